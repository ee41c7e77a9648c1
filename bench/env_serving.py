"""Where the worlds run: in this process, in worker processes, served on loopback, or in Ray actors.

Every setting plays the *same* tasks with the *same* scripted agent (the oracle: each world's
walkthrough, so every episode is won) through the one rollout loop, ``--envs`` episodes side by
side, in one run:

* in this process (``LocalPool``): the baseline;
* worker processes (``EnvPool``, one world each);
* served on loopback: a ``turngym serve`` child process, played by a ``RemotePool`` of ``--envs``
  OpenEnv sessions (each step is a WebSocket round trip plus JSON on both sides);
* Ray actors (``RayPool``, one world per actor) on a single-node Ray started here.

    python bench/env_serving.py                                   # Signals, 20 turns, 8 envs, 64 tasks
    python bench/env_serving.py --envs 2 --tasks 4 --rounds 1 --repeats 1      # a smoke run
    python bench/env_serving.py --env turngym/TextWorld-v0 --env-arg config='"w2-o3-q4"' --tasks 16

Prints steps/s and the ratio of each setting against the baseline. Without Ray installed
(``pip install "turngym[ray]"``) its row is skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from turngym.agents.baselines import OracleAgent
from turngym.agents.rollout import run_episodes
from turngym.envs.panels import task_panel
from turngym.envs.tasks import Task
from turngym.envs.vector import EnvPool, LocalPool


def steps_per_second(pool: Any, tasks: list[Task], rounds: int) -> float:
    """Steps/s of the oracle over ``tasks`` x ``rounds`` after one warm-up pass of ``pool.num_envs`` episodes."""
    run_episodes(OracleAgent(seed=0), pool, tasks[: pool.num_envs])  # start engines, connections, caches
    start = time.perf_counter()
    trajectories = run_episodes(OracleAgent(seed=0), pool, tasks * rounds)
    elapsed = time.perf_counter() - start
    assert all(t.won for t in trajectories), "the oracle must win every episode"
    return sum(t.num_turns for t in trajectories) / elapsed


def measure(make_pool: Callable[[], Any], tasks: list[Task], rounds: int, repeats: int) -> float:
    """The median over ``repeats`` of the steps/s of a fresh pool (built and closed outside the timing)."""
    rates = []
    for _ in range(repeats):
        pool = make_pool()
        try:
            rates.append(steps_per_second(pool, tasks, rounds))
        finally:
            pool.close()
    return statistics.median(rates)


def parse_env_args(items: list[str]) -> dict[str, Any]:
    kwargs = {}
    for item in items:
        key, equals, value = item.partition("=")
        if not equals:
            raise SystemExit(f"--env-arg expects KEY=VALUE (VALUE may be JSON), got {item!r}")
        try:
            kwargs[key] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key] = value
    return kwargs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="turngym/Signals-v0")
    parser.add_argument("--env-arg", action="append", default=None, metavar="KEY=VALUE",
                        help="a world option (VALUE may be JSON); default for Signals: turns=20")
    parser.add_argument("--envs", type=int, default=8, help="episodes side by side (worlds, workers, sessions)")
    parser.add_argument("--tasks", type=int, default=64, help="eval tasks played per pass")
    parser.add_argument("--rounds", type=int, default=2, help="passes over the tasks per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per setting; the median is reported")
    parser.add_argument("--ray-cpus", type=int, default=None, help="CPUs of the local Ray node (default: all)")
    args = parser.parse_args()

    env_kwargs = parse_env_args(args.env_arg or (["turns=20"] if args.env == "turngym/Signals-v0" else []))
    panel = task_panel(args.env, "eval", args.tasks, env_kwargs, progress=False)
    tasks, kwargs = list(panel), {**env_kwargs, "tasks": panel}
    rows: list[tuple[str, float]] = []

    def run(label: str, make_pool: Callable[[], Any]) -> None:
        rows.append((label, measure(make_pool, tasks, args.rounds, args.repeats)))

    run("in this process (LocalPool)", lambda: LocalPool.from_id(args.env, args.envs, env_kwargs=kwargs))
    run(f"worker processes (EnvPool, {args.envs})", lambda: EnvPool.from_id(args.env, args.envs, env_kwargs=kwargs))

    from turngym.envs.openenv.pool import RemotePool
    from turngym.envs.openenv.server import ServerProcess

    # The server plays only its panel's tasks, and the oracle reads walkthroughs: --reveal-solutions.
    with ServerProcess(args.env, env_kwargs=env_kwargs, max_sessions=args.envs, panel_size=args.tasks,
                       extra_args=["--reveal-solutions"]) as server:
        run(f"served on loopback (turngym serve + RemotePool, {args.envs} sessions)",
            lambda: RemotePool(server.url, args.envs, env_id=args.env, env_kwargs=env_kwargs))

    try:
        import ray
    except ImportError:
        print('(Ray is not installed: pip install "turngym[ray]"; its row is skipped)')
    else:
        from turngym.envs.ray_pool import RayPool

        cpus = args.ray_cpus or os.cpu_count() or 1
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
        per_actor = min(1.0, cpus / args.envs)  # every actor fits on this one node
        try:
            run(f"Ray actors (RayPool, {args.envs} actors x 1 world, {per_actor:g} CPU each)",
                lambda: RayPool.from_id(args.env, args.envs, env_kwargs=kwargs, num_cpus_per_actor=per_actor))
        finally:
            ray.shutdown()

    baseline = rows[0][1]
    options = ", ".join(f"{k}={v}" for k, v in env_kwargs.items()) or "default options"
    print(f"{args.env} ({options}): {args.envs} episodes side by side, {len(tasks)} eval tasks x {args.rounds} "
          f"rounds, median of {args.repeats}, {os.cpu_count()} CPUs")
    print("| setting | steps/s | ratio |")
    print("|---|---:|---:|")
    for index, (label, rate) in enumerate(rows):
        ratio = "1.00 (baseline)" if index == 0 else f"{rate / baseline:.3f} vs in-process"
        print(f"| {label} | {rate:.0f} | {ratio} |")


if __name__ == "__main__":
    main()
