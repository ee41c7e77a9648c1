"""The ``turngym`` command line.

    turngym envs                                   list registered worlds
    turngym generate --config w2-o3-q4 --split eval   pre-generate (and hash) games
    turngym eval --agent oracle --config w2-o3-q4 --split eval --episodes 100
    turngym play turngym/TextWorld-v0              play a world yourself
    turngym demo                                   the embedded default job
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
    if args.env != "turngym/TextWorld-v0":
        raise SystemExit(f"turngym eval: only turngym/TextWorld-v0 has a task panel so far, got {args.env}")
    from envs.textworld import materialise, textworld_tasks

    return materialise(textworld_tasks(args.config, args.split, n=args.episodes), workers=args.workers)


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


def cmd_eval(args: argparse.Namespace) -> int:
    from agents import evaluate, make_baseline, markdown_table

    tasks = _task_set(args)
    reports = []
    for name in args.agent:
        out = Path(args.out) / f"{name}.jsonl" if args.out else None
        report = evaluate(
            make_baseline(name, seed=args.seed),
            args.env,
            tasks,
            env_kwargs=_env_kwargs(args),
            num_workers=args.workers,
            seed=args.seed,
            trajectories_path=out,
        )
        reports.append(report)
        if args.out:
            (Path(args.out) / f"{name}.json").write_text(json.dumps(report.to_dict(), indent=1))
    print(markdown_table(reports))
    if args.out:
        print(f"\ntrajectories and reports written under {args.out}/")
    return 0


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


def cmd_demo(args: argparse.Namespace) -> int:
    """Oracle and random agents on held-out TextWorld games (until the algorithm comparison lands)."""
    from agents import OracleAgent, RandomAgent, evaluate, markdown_table
    from envs.textworld import materialise, textworld_tasks

    started = time.perf_counter()
    print(f"turngym demo: oracle and random agents on {args.episodes} held-out TextWorld {args.config} games\n")
    tasks = materialise(textworld_tasks(args.config, "eval", n=args.episodes), workers=args.workers)
    reports = []
    for protocol in ("free_form", "choose_index"):
        for agent in (OracleAgent(), RandomAgent(seed=args.seed)):
            reports.append(
                evaluate(agent, "turngym/TextWorld-v0", tasks, env_kwargs={"action_protocol": protocol},
                         num_workers=args.workers, seed=args.seed)
            )
    print(markdown_table(reports))
    print(f"\ntask panel {tasks.name}, fingerprint {tasks.fingerprint}; {time.perf_counter() - started:.0f} s")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="turngym", description="Multi-turn RL for LLM agents.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    def env_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--env", default="turngym/TextWorld-v0", help="gymnasium id of the world")
        p.add_argument("--config", default="w2-o3-q4", help="TextWorld config, e.g. w2-o3-q4, simple-dense")
        p.add_argument("--split", default="eval", help="train or eval")
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
    p.add_argument("--agent", action="append", choices=["oracle", "random"], help="repeatable")
    p.add_argument("--episodes", type=int, default=100, help="first N tasks of the split")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", help="folder for trajectories (JSONL) and reports (JSON)")
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

    p = sub.add_parser("demo", help="run the embedded default job")
    p.add_argument("--config", default="w2-o3-q4")
    p.add_argument("--episodes", type=int, default=50)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_demo)
    return parser


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
