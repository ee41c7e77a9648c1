"""Tokens per expert episode, by TextWorld config and action protocol: what one RL episode costs.

    .venv/bin/python bench/episode_tokens.py [--configs w2-o3-q2 w2-o3-q4 --episodes 8]

The oracle plays the first ``--episodes`` training games of each config through the LLM agent's
chat format (the same replay the SFT warm start uses), so each episode is exactly the token record
an RL rollout of those replies would train on: the demo's chat format (SmolLM2-135M-Instruct's
template, the default system prompt, ``Action:`` replies). It prints the mean tokens, model
tokens and turns per episode, and each row's tokens as a ratio to the first row. This is the
measurement behind the demo's world and protocol (docs/results.md).
"""

from __future__ import annotations

import argparse
import statistics


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--configs", nargs="+", default=["w2-o3-q2", "w2-o3-q4"])
    parser.add_argument("--protocols", nargs="+", default=["free_form", "choose_index"])
    parser.add_argument("--episodes", type=int, default=8)
    args = parser.parse_args(argv)

    from transformers import AutoTokenizer

    from turngym.agents.models import resolve_model
    from turngym.trainers.sft import TurnGymSFTConfig, collect_demos

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(args.model))
    rows = []
    for config in args.configs:
        for protocol in args.protocols:
            options = TurnGymSFTConfig(output_dir="/tmp/turngym-episode-tokens", env_kwargs={"config": config},
                                       action_protocol=protocol, num_demos=args.episodes, response_prefix="Action:",
                                       max_new_tokens_per_turn=24, max_length=4096, report_to="none")
            demos, stats = collect_demos(options, tokenizer, progress=False)
            turns = statistics.mean(len(t.actions) for t in demos)
            rows.append((config, protocol, stats.total_tokens / stats.kept, stats.assistant_tokens / stats.kept, turns))
    baseline = rows[0][2]
    print(f"{args.model}: oracle episodes on the first {args.episodes} training games of each config\n")
    print("| config | protocol | tokens / episode | model tokens / episode | turns | tokens vs first row |")
    print("|---|---|---:|---:|---:|---:|")
    for config, protocol, tokens, model_tokens, turns in rows:
        print(f"| {config} | {protocol} | {tokens:.0f} | {model_tokens:.1f} | {turns:.1f} | {tokens / baseline:.2f}x |")


if __name__ == "__main__":
    main()
