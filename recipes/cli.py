"""The ``turngym`` command line.

    turngym envs                                   list registered worlds
    turngym generate --config w2-o3-q4 --split eval   pre-generate (and hash) games
    turngym eval --agent oracle --config w2-o3-q4 --split eval --episodes 100
    turngym eval --agent llm --model HuggingFaceTB/SmolLM2-135M-Instruct --episodes 20
    turngym play turngym/TextWorld-v0              play a world yourself
    turngym check-template --model NAME            is the chat template append-only?
    turngym sft --config recipes/configs/textworld-sft.yaml [--field value ...]   SFT warm start on expert demos
    turngym train --config recipes/configs/textworld-ppo.yaml [--field value ...]   RL on whole episodes
    turngym compare --config recipes/configs/compare/textworld-demo.yaml   algorithms at an equal budget
    turngym budget --config recipes/configs/budget/textworld.yaml           SFT demos vs RL episodes
    turngym demo                                   the embedded default job (SFT, then PPO / GRPO / turn-RLOO)
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any


def _env_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"reward_mode": args.reward_mode, "action_protocol": args.protocol}
    if args.max_turns:
        kwargs["max_turns"] = args.max_turns
    for item in args.env_arg or []:
        key, _, value = item.partition("=")
        try:
            kwargs[key] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key] = value
    return kwargs


def _task_set(args: argparse.Namespace):
    """The evaluation panel of a world: its first ``--episodes`` tasks of ``--split``."""
    from envs.panels import task_panel

    return task_panel(args.env, args.split, args.episodes, {**_env_kwargs(args), "config": args.config}, workers=args.workers)


def cmd_envs(args: argparse.Namespace) -> int:
    import envs

    for env_id in envs.text_world_ids():
        print(env_id)
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    if args.world == "alfworld":
        from envs.alfworld import alfworld_tasks, materialise

        tasks = materialise(alfworld_tasks(args.split, n=args.n), workers=args.workers)
    else:
        from envs.textworld import materialise, textworld_tasks

        tasks = materialise(textworld_tasks(args.config, args.split, n=args.n), workers=args.workers)
    print(f"{len(tasks)} games ready for {tasks.name} (fingerprint {tasks.fingerprint})")
    if args.manifest:
        Path(args.manifest).write_text(tasks.to_jsonl())
        print(f"manifest written to {args.manifest}")
    return 0


def _make_agent(name: str, args: argparse.Namespace):
    from agents import make_baseline

    if name not in ("llm", "openai"):
        return make_baseline(name, seed=args.seed)
    from agents.llm import LLMAgentConfig
    from agents.models import make_llm_agent

    config = LLMAgentConfig(
        action_format=args.action_format, response_prefix=args.response_prefix, temperature=args.temperature,
        top_p=args.top_p, max_new_tokens=args.max_new_tokens, max_context_tokens=args.max_context, seed=args.seed,
    )
    backend = "openai" if name == "openai" else args.backend
    return make_llm_agent(args.model, backend=backend, device=args.device, config=config,
                          openai_base_url=args.base_url, vllm_server=args.vllm_server)


def cmd_eval(args: argparse.Namespace) -> int:
    from agents import evaluate, markdown_table

    tasks = _task_set(args)
    reports = []
    for name in args.agent:
        agent = _make_agent(name, args)
        out = Path(args.out) / f"{_file_name(agent.name)}.jsonl" if args.out else None
        report = evaluate(
            agent,
            args.env,
            tasks,
            env_kwargs=_env_kwargs(args),
            num_workers=args.workers,
            seed=args.seed,
            trajectories_path=out,
        )
        reports.append(report)
        if args.out:
            (Path(args.out) / f"{_file_name(agent.name)}.json").write_text(json.dumps(report.to_dict(), indent=1))
    print(markdown_table(reports))
    if args.out:
        print(f"\ntrajectories and reports written under {args.out}/")
    return 0


def _file_name(agent_name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in agent_name)


def cmd_play(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import envs  # noqa: F401 - registers the built-in worlds

    env = gym.make(args.env, **_env_kwargs(args), **({"split": args.split, "config": args.config} if args.env == "turngym/TextWorld-v0" else {}))
    observation, info = env.reset(seed=args.seed)
    print(f"[{info['task']['id']}] up to {info['max_turns']} turns. Type a command; Ctrl-D quits.\n")
    print(observation)
    while True:
        try:
            action = input("> ")
        except EOFError:
            print()
            break
        observation, reward, terminated, truncated, info = env.step(action)
        print(observation + (f"\n[reward {reward:+.2f}]" if reward else ""))
        if terminated or truncated:
            outcome = "won" if info["won"] else ("lost" if info["lost"] else f"truncated ({info['truncation_reason']})")
            print(f"\nEpisode over after {info['turn']} turns: {outcome}, return {info['episode_reward']:.2f}.")
            break
    env.close()
    return 0


def cmd_check_template(args: argparse.Namespace) -> int:
    from transformers import AutoTokenizer

    from agents.chat import check_chat_template
    from agents.models import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(args.model))
    report = check_chat_template(tokenizer)
    print(f"{args.model}\n{report.summary()}")
    return 0


def cmd_sft(args: argparse.Namespace) -> int:
    """SFT warm start: every argument after ``sft`` goes to ``trl.TrlParser`` (``--help`` lists the fields)."""
    from trainers.sft import parse_config, run_sft

    config = parse_config(args.config_args)
    if not args.verbose:  # demo counts and the eval table are the point of the run: show them
        logging.getLogger("trainers").setLevel(logging.INFO)
    output = run_sft(config)
    print(f"SFT model and tokenizer saved to {output}; continue with RL: turngym train --model_name_or_path {output}")
    return 0


DEMO_CONFIG = Path(__file__).resolve().parent / "configs" / "compare" / "textworld-demo.yaml"


def cmd_demo(args: argparse.Namespace) -> int:
    """The embedded default: SFT warm start, then PPO, GRPO and turn-level RLOO at one budget, on CPU."""
    if args.baselines:
        return _baselines_demo(args)
    from recipes import compare_algorithms
    from recipes.study import Study, load_config

    args.config, args.name, args.seeds, args.episodes = str(DEMO_CONFIG), "demo", None, None
    if not args.restart and Study.changed_options(load_config(DEMO_CONFIG, name="demo", results_dir=args.results_dir)):
        print(f"{Path(args.results_dir) / 'demo'}/ holds a run of an earlier demo config: starting over")
        args.restart = True
    print(f"turngym demo: {DEMO_CONFIG.name} (results in {Path(args.results_dir) / 'demo'}/; rerun to resume)")
    return compare_algorithms.main_with(args)


def _baselines_demo(args: argparse.Namespace) -> int:
    """Oracle and random agents on held-out TextWorld games: the world's floor and ceiling in seconds."""
    from agents import OracleAgent, RandomAgent, evaluate, markdown_table
    from envs.textworld import materialise, textworld_tasks

    started = time.perf_counter()
    config, episodes = "w2-o3-q4", 50
    print(f"turngym demo --baselines: oracle and random agents on {episodes} held-out TextWorld {config} games\n")
    tasks = materialise(textworld_tasks(config, "eval", n=episodes), workers=2)
    reports = []
    for protocol in ("free_form", "choose_index"):
        for agent in (OracleAgent(), RandomAgent(seed=0)):
            reports.append(evaluate(agent, "turngym/TextWorld-v0", tasks, env_kwargs={"action_protocol": protocol},
                                    num_workers=2, seed=0))
    print(markdown_table(reports))
    print(f"\ntask panel {tasks.name}, fingerprint {tasks.fingerprint}; {time.perf_counter() - started:.0f} s")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from recipes import compare_algorithms

    return compare_algorithms.main_with(args)


def cmd_budget(args: argparse.Namespace) -> int:
    from recipes import sft_rl_budget

    return sft_rl_budget.main_with(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="turngym", description="Multi-turn RL for LLM agents.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    def env_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--env", default="turngym/TextWorld-v0", help="gymnasium id of the world")
        p.add_argument("--config", default="w2-o3-q4", help="TextWorld config, e.g. w2-o3-q4, simple-dense")
        p.add_argument("--split", default="eval", help="train or eval (ALFWorld: train, eval_seen, eval_unseen)")
        p.add_argument("--reward-mode", default="sparse", choices=["sparse", "dense"])
        p.add_argument("--protocol", default="free_form", choices=["free_form", "admissible_in_prompt", "choose_index"])
        p.add_argument("--max-turns", type=int, default=None, help="default: 2x the optimal length")
        p.add_argument("--env-arg", action="append", metavar="KEY=VALUE", help="extra env option (JSON value)")
        p.add_argument("--seed", type=int, default=0)

    p = sub.add_parser("envs", help="list registered worlds")
    p.set_defaults(func=cmd_envs)

    p = sub.add_parser("generate", help="generate and cache TextWorld or ALFWorld games")
    p.add_argument("--world", default="textworld", choices=["textworld", "alfworld"])
    p.add_argument("--config", default="w2-o3-q4")
    p.add_argument("--split", default="eval", choices=["train", "eval", "all", "eval_seen", "eval_unseen"],
                   help="ALFWorld: train, eval_seen (= eval), eval_unseen or all")
    p.add_argument("-n", type=int, default=None, help="first n seeds of each split")
    p.add_argument("--workers", type=int, default=None)
    p.add_argument("--manifest", help="write the task set (ids and content hashes) as JSONL")
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("eval", help="evaluate baseline agents on held-out tasks")
    env_options(p)
    p.add_argument("--agent", action="append", choices=["oracle", "random", "llm", "openai"],
                   help="repeatable; llm: a model through --backend; openai: a served model at --base-url")
    p.add_argument("--episodes", type=int, default=100, help="first N tasks of the split")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", help="folder for trajectories (JSONL) and reports (JSON)")
    llm = p.add_argument_group("LLM agent")
    llm.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct", help="Hub name or local folder")
    llm.add_argument("--backend", default="hf", choices=["hf", "vllm"], help="generation backend for --agent llm")
    llm.add_argument("--device", default="cpu")
    llm.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (the default for evaluation)")
    llm.add_argument("--top-p", type=float, default=1.0)
    llm.add_argument("--max-new-tokens", type=int, default=48, help="cap per turn")
    llm.add_argument("--max-context", type=int, default=4096, help="tokens; past it the episode ends as truncated")
    llm.add_argument("--action-format", default="prefix", choices=["prefix", "last_line", "tags", "raw"],
                     help="raw: the whole reply (the SWE world reads its fenced command itself)")
    llm.add_argument("--response-prefix", default="", help="text each reply starts with, e.g. 'Action:'")
    llm.add_argument("--base-url", help="OpenAI-compatible endpoint for --agent openai, e.g. http://host:8000/v1")
    llm.add_argument("--vllm-server", help="TRL vllm-serve URL for --backend vllm (default: vLLM in-process)")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("play", help="play a world in the terminal")
    p.add_argument("env", nargs="?", default="turngym/TextWorld-v0")
    p.add_argument("--config", default="w2-o3-q4")
    p.add_argument("--split", default="eval")
    p.add_argument("--reward-mode", default="sparse", choices=["sparse", "dense"])
    p.add_argument("--protocol", default="free_form", choices=["free_form", "admissible_in_prompt", "choose_index"])
    p.add_argument("--max-turns", type=int, default=None)
    p.add_argument("--env-arg", action="append", metavar="KEY=VALUE")
    p.add_argument("--seed", type=int, default=None)
    p.set_defaults(func=cmd_play)

    p = sub.add_parser("check-template", help="is a model's chat template append-only? (exact token bookkeeping)")
    p.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct", help="Hub name or local folder")
    p.set_defaults(func=cmd_check_template)

    # Subcommands whose options are a TRL config dataclass. prefix_chars="+": the subparser takes no
    # options itself, so every "--field value" (and --help) is left to TrlParser, which knows the
    # config's fields; argparse would otherwise reject them as unknown.
    for name, func, text in (
        ("sft", cmd_sft, "SFT warm start on expert (oracle) episodes; `turngym sft --help` lists the fields"),
        ("train", cmd_train, "RL on whole episodes: PPO, GRPO, RLOO, turn-level RLOO/GRPO; `turngym train --help`"),
    ):
        p = sub.add_parser(name, add_help=False, prefix_chars="+", help=text)
        p.add_argument("config_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        p.set_defaults(func=func)

    p = sub.add_parser("demo", help="the embedded default: SFT, then PPO / GRPO / turn-RLOO at one budget (CPU, < 30 min)")
    p.add_argument("--restart", action="store_true", help="delete results/demo/ and start over (default: resume)")
    p.add_argument("--results-dir", default="results", help="parent folder of demo/")
    p.add_argument("--baselines", action="store_true", help="only the oracle and random agents (seconds)")
    p.set_defaults(func=cmd_demo)

    from recipes import compare_algorithms, sft_rl_budget

    p = sub.add_parser("compare", help="compare RL algorithms at an equal episode budget: table, plot, JSON in results/<name>/")
    compare_algorithms.add_arguments(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("budget", help="split a fixed budget between SFT demos and RL episodes: table and plot")
    sft_rl_budget.add_arguments(p)
    p.set_defaults(func=cmd_budget)
    return parser


def cmd_train(args: argparse.Namespace) -> int:
    """RL on whole episodes. Every field of TurnGymConfig (and TRL's GRPOConfig) is an option;
    ``--config FILE.yaml`` sets them from YAML, and options given after it override the file."""
    from trl import TrlParser

    from trainers.config import TurnGymConfig
    from trainers.trainer import TurnGymTrainer

    (config,) = TrlParser([TurnGymConfig], prog="turngym train").parse_args_and_config(args.config_args)
    if not args.verbose:
        logging.getLogger("trainers").setLevel(logging.INFO)
    trainer = TurnGymTrainer(args=config)
    resume = config.resume_from_checkpoint
    resume = True if str(resume).lower() in ("true", "last") else resume  # True: the newest checkpoint
    trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(config.output_dir)
    critic = " (critic in critic/)" if trainer.critic is not None else ""
    print(f"turngym train: policy saved to {config.output_dir}{critic}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if getattr(args, "agent", "unset") is None:
        args.agent = ["oracle", "random"]
    try:
        return args.func(args)
    except (ValueError, KeyError, FileNotFoundError) as error:
        print(f"turngym {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
