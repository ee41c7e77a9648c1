"""LLM rollout throughput: lockstep batched generation against one episode at a time.

Both runs play the *same* TextWorld tasks with the *same* LLM agent code (prompting, exact token
bookkeeping, parsing) and the same backend; only the number of live episodes differs:

* batched: all ``--episodes`` episodes live at once, one forward pass per step for all of them;
* sequential: one episode at a time (batch size 1), still with its KV cache kept across turns.

It prints sampled tokens/s for both and their ratio, and, for the batched run, the share of
rollout wall time spent outside generation (environment steps, tokenisation, bookkeeping).
``--repeats N`` alternates the two runs N times and reports the median ratio, since a shared
machine's speed drifts by several per cent from one minute to the next.

    python bench/rollout_throughput.py                          # SmolLM2-135M-Instruct, fp32, CPU, 16 episodes
    python bench/rollout_throughput.py --repeats 3 --dtype bfloat16
    python bench/rollout_throughput.py --device cuda --model-config qwen2.5-0.5b --episodes 64
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from turngym.agents.backends import HFBackend
from turngym.agents.llm import LLMAgent, LLMAgentConfig
from turngym.agents.rollout import run_episodes
from turngym.envs.textworld import materialise, textworld_tasks
from turngym.envs.vector import LocalPool

# Shapes of Qwen2.5-0.5B, for GPU numbers with random weights (no download needed).
MODEL_CONFIGS = {
    "qwen2.5-0.5b": {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
                     "num_key_value_heads": 2, "max_position_embeddings": 32768, "rope_theta": 1_000_000.0,
                     "tie_word_embeddings": True},
}


class TimedBackend:
    """Counts the wall time and the tokens of every generate() call."""

    def __init__(self, inner: HFBackend) -> None:
        self.inner, self.seconds, self.cpu_seconds, self.tokens, self.calls = inner, 0.0, 0.0, 0, 0

    def generate(self, requests, sampling, stop_ids):
        start, cpu_start = time.perf_counter(), time.process_time()
        generations = self.inner.generate(requests, sampling, stop_ids)
        _synchronise(self.inner.device)
        self.seconds += time.perf_counter() - start
        self.cpu_seconds += time.process_time() - cpu_start
        self.tokens += sum(len(g.ids) for g in generations)
        self.calls += 1
        return generations

    def release(self, key):
        self.inner.release(key)

    def cache_prefix(self, ids):
        self.inner.cache_prefix(ids)


def _synchronise(device: Any) -> None:
    import torch

    if getattr(device, "type", "cpu") == "cuda":
        torch.cuda.synchronize()


def load(args: argparse.Namespace) -> tuple[Any, Any]:
    import torch

    from turngym.agents.models import load_policy

    if args.model_config is None:
        return load_policy(args.model, device=args.device, dtype=args.dtype)
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from turngym.agents.models import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(args.model))
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), **MODEL_CONFIGS[args.model_config])
    dtype = getattr(torch, args.dtype) if args.dtype else (torch.bfloat16 if args.device != "cpu" else torch.float32)
    return Qwen2ForCausalLM(config).to(device=args.device, dtype=dtype).eval(), tokenizer


def rollout(model, tokenizer, tasks, live: int, args: argparse.Namespace) -> dict[str, float]:
    config = LLMAgentConfig(temperature=1.0, max_new_tokens=args.max_new_tokens, response_prefix="Action:", seed=0)
    backend = TimedBackend(HFBackend(model, pad_id=tokenizer.pad_token_id))
    agent = LLMAgent(backend, tokenizer, config)
    pool = LocalPool.from_id("turngym/TextWorld-v0", live, env_kwargs={"tasks": tasks, "max_turns": args.turns})
    try:
        # Start every engine first: a training pool is long-lived, so start-up is not rollout time.
        for index in range(live):
            pool.send(index, "reset", {"seed": 0, "options": {"task": tasks[index % len(tasks)]}})
        pool.receive(wait_all=True)
        start = time.perf_counter()
        trajectories = run_episodes(agent, pool, list(tasks), seed=0, progress=f"{live} live")
        wall = time.perf_counter() - start
    finally:
        pool.close()
    return {
        "wall_s": wall,
        "generate_s": backend.seconds,
        "tokens": backend.tokens,
        "tokens_per_s": backend.tokens / backend.seconds,
        "tokens_per_cpu_s": backend.tokens / backend.cpu_seconds,
        "other_share": (wall - backend.seconds) / wall,
        "calls": backend.calls,
        "forward_passes": backend.inner.forward_passes,
        "turns": sum(t.num_turns for t in trajectories),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--model-config", choices=sorted(MODEL_CONFIGS), help="random weights of this shape")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--config", default="w2-o3-q4", help="TextWorld config of the tasks")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--turns", type=int, default=None,
                        help="max turns per episode (default: the world's, 2x the walkthrough)")
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default=None,
                        help="weights' dtype (default: float32 on CPU, bfloat16 on GPU)")
    parser.add_argument("--repeats", type=int, default=1, help="alternate batched and sequential runs this many times")
    args = parser.parse_args()

    import torch

    torch.set_grad_enabled(False)
    tasks = materialise(textworld_tasks(args.config, "eval", n=args.episodes), workers=2)
    model, tokenizer = load(args)
    # warm-up: allocator, kernels, engines
    rollout(model, tokenizer, tasks.take(2), 2, argparse.Namespace(**{**vars(args), "turns": 2}))
    runs = []
    for _ in range(args.repeats):
        runs.append((rollout(model, tokenizer, tasks, args.episodes, args), rollout(model, tokenizer, tasks, 1, args)))
    name = args.model_config or args.model
    print(f"\n{name} ({str(next(model.parameters()).dtype).removeprefix('torch.')}) on {args.device}, torch threads "
          f"{torch.get_num_threads()}, {args.episodes} TextWorld {args.config} episodes, up to "
          f"{args.turns or '2x the walkthrough'} turns, up to {args.max_new_tokens} new tokens per turn\n")
    print("| run | turns | sampled tokens | forward passes | generate s | wall s | tokens/s | tokens per CPU s "
          "| share of wall time outside generation |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for index, pair in enumerate(runs, 1):
        for label, r in zip(("lockstep batched", "one episode at a time"), pair, strict=True):
            label += f" (run {index})" if args.repeats > 1 else ""
            print(f"| {label} | {r['turns']} | {r['tokens']} | {r['forward_passes']} | {r['generate_s']:.1f} | "
                  f"{r['wall_s']:.1f} | {r['tokens_per_s']:.1f} | {r['tokens_per_cpu_s']:.1f} | "
                  f"{100 * r['other_share']:.1f} % |")
    ratios = [batched["tokens_per_s"] / sequential["tokens_per_s"] for batched, sequential in runs]
    cpu_ratios = [batched["tokens_per_cpu_s"] / sequential["tokens_per_cpu_s"] for batched, sequential in runs]
    shares = [batched["other_share"] for batched, _ in runs]
    listed = ", ".join(f"{r:.2f}x" for r in ratios)
    # CPU time is less sensitive than wall time to other work on the machine
    print(f"\nbatched / sequential tokens per CPU second: median {statistics.median(cpu_ratios):.2f}x")
    print(f"batched / sequential tokens/s: median {statistics.median(ratios):.2f}x ({listed}; target >= 4x at 16 "
          f"episodes on CPU); environment and bookkeeping share of batched wall time: {100 * max(shares):.1f} % "
          "at most (target < 10 %)")


if __name__ == "__main__":
    main()
