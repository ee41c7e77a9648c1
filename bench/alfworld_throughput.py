"""ALFWorld throughput: raw alfworld vs turngym's env, game generation, and the pool with 1 and 2 workers.

Every play measurement runs the *same* games with the *same* command script, in one run: per game,
``--noise`` cheap commands (look / inventory) then the planner's walkthrough (a win), each episode
loading its game and resetting it, as training does. The raw baseline is the engine stack
``AlfredTWEnv`` plays through (textworld's ``PddlEnv`` + alfworld's ``AlfredDemangler`` and
``AlfredInfos``, requesting what AlfredTWEnv requests), so the ratio measures turngym's wrapper.

    python bench/alfworld_throughput.py                 # 12 eval_seen games (2 per task type)
    python bench/alfworld_throughput.py --games 6 --repeats 1

Prints steps/s, the ratios against the raw baseline and against 1 worker, and the time to
generate one game (in a fresh cache folder, so nothing is served from the cache).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from env_throughput import pool, script, timed_episodes

from turngym.envs.alfworld import ALFWorldEnv, alfworld_tasks, generate_games, materialise
from turngym.envs.alfworld.games import task_files
from turngym.envs.alfworld.generation import GameSpec, split_specs

ENV_ID = "turngym/ALFWorld-v0"


def with_and_without_resets(start_episode, step, episodes, rounds: int) -> tuple[float, float]:
    """(steps/s counting load+reset time, steps/s of the steps alone) over the same episodes."""
    reset_seconds = 0.0

    def timed_start(key) -> None:
        nonlocal reset_seconds
        start = time.perf_counter()
        start_episode(key)
        reset_seconds += time.perf_counter() - start

    rate = timed_episodes(timed_start, step, episodes, rounds)
    steps = rounds * sum(len(commands) for _, commands in episodes)
    return rate, steps / (steps / rate - reset_seconds)


def raw_alfworld(games: list[tuple[str, list[str]]], rounds: int) -> tuple[float, float]:
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    from textworld.envs import PddlEnv

    # What AlfredTWEnv.init_env requests and wraps (without textworld.gym's batching layer).
    infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
    env = AlfredInfos(AlfredDemangler(PddlEnv(infos), shuffle=False))

    def start_episode(game_file: str) -> None:
        env.load(game_file)
        env.reset()

    rates = with_and_without_resets(start_episode, env.step, games, rounds)
    env.close()
    return rates


def turngym_env(tasks, scripts, rounds: int, isolation: str, speedups: bool) -> tuple[float, float]:
    env = ALFWorldEnv(tasks=tasks, engine_isolation=isolation, speedups=speedups, max_turns=10_000)
    env.reset(options={"task": tasks[-1]})  # start the engine outside the timed region
    episodes = list(zip(tasks, scripts, strict=True))
    rates = with_and_without_resets(lambda task: env.reset(options={"task": task}), env.step, episodes, rounds)
    env.close()
    return rates


def generation_seconds(count: int) -> tuple[float, float, float]:
    """Wall seconds to generate fresh train games (two of each task type per 12) into empty folders.

    Returns (one game in a fresh generator process, as the first reset of an uncached game waits;
    per game for ``count`` games on 1 worker; per game for the same games on 2 workers).
    """
    specs = [GameSpec.from_payload(s.payload) for s in split_specs("train", count)]
    seconds = []
    for batch, workers in ((specs[:1], 1), (specs, 1), (specs, 2)):
        with tempfile.TemporaryDirectory() as root:
            start = time.perf_counter()
            generate_games(batch, workers=workers, root=Path(root), progress=False)
            seconds.append((time.perf_counter() - start) / len(batch))
    return seconds[0], seconds[1], seconds[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", type=int, default=12)
    parser.add_argument("--noise", type=int, default=10, help="look/inventory commands before each walkthrough")
    parser.add_argument("--rounds", type=int, default=1, help="passes over the games per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per setting; the median is reported")
    parser.add_argument("--generate", type=int, default=12, help="fresh train games generated to time generation")
    args = parser.parse_args()

    tasks = materialise(alfworld_tasks("eval_seen", n=args.games), workers=2, progress=False)
    files = [task_files(t) for t in tasks]
    scripts = [script(list(f.walkthrough), args.noise) for f in files]
    games = [(str(f.game_file), s) for f, s in zip(files, scripts, strict=True)]

    def median(fn, *fn_args) -> float:
        return statistics.median(fn(*fn_args) for _ in range(args.repeats))

    def medians(fn, *fn_args) -> tuple[float, float]:
        runs = [fn(*fn_args) for _ in range(args.repeats)]
        return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)

    # Each setting runs alone on the machine, one after the other.
    raw, raw_steps = medians(raw_alfworld, games, args.rounds)
    plain_inproc, plain_inproc_steps = medians(turngym_env, tasks, scripts, args.rounds, "none", False)
    plain_isolated, plain_isolated_steps = medians(turngym_env, tasks, scripts, args.rounds, "process", False)
    default, default_steps = medians(turngym_env, tasks, scripts, args.rounds, "process", True)
    # One pass: a game's PDDL translation is memoised per engine, and with more passes a worker
    # that sees half the games would be measured on warmer caches than one that sees them all.
    pool_1 = median(pool, tasks, args.rounds, 1, args.noise, "none", ENV_ID)
    pool_2 = median(pool, tasks, args.rounds, 2, args.noise, "none", ENV_ID)
    pool_2_iso = median(pool, tasks, args.rounds, 2, args.noise, "process", ENV_ID)
    generation_cold, generation_1, generation_2 = generation_seconds(args.generate)

    steps_per_game = statistics.mean(len(s) for s in scripts)
    print(f"{args.games} eval_seen games, {steps_per_game:.1f} steps per episode (a load and reset each), "
          f"median of {args.repeats}")
    print("| setting | steps/s (with resets) | ratio | steps/s (steps alone) | ratio |")
    print("|---|---:|---:|---:|---:|")
    for name, rate, steps in (
        ("raw alfworld (AlfredTWEnv's engine stack)", raw, raw_steps),
        ("ALFWorldEnv, engine in-process, no speed-ups", plain_inproc, plain_inproc_steps),
        ("ALFWorldEnv, engine isolated, no speed-ups", plain_isolated, plain_isolated_steps),
        ("ALFWorldEnv, default (isolated, speed-ups)", default, default_steps),
    ):
        print(f"| {name} | {rate:.1f} | {rate / raw:.2f} | {steps:.1f} | {steps / raw_steps:.2f} |")
    print(f"| EnvPool, 1 worker (engine in the worker) | {pool_1:.1f} | 1.00 (baseline) | | |")
    print(f"| EnvPool, 2 workers (engine in the worker) | {pool_2:.1f} | {pool_2 / pool_1:.2f} vs 1 worker | | |")
    print(f"| EnvPool, 2 workers, engines isolated | {pool_2_iso:.1f} | {pool_2_iso / pool_1:.2f} vs 1 worker | | |")
    print(f"generation (goal, layout, PDDL, plan, replay, handcoded expert): one game {generation_cold:.2f} s "
          f"in a fresh process; {args.generate} games: {generation_1:.2f} s a game on 1 worker, "
          f"{generation_2:.2f} s a game on 2 workers ({generation_1 / generation_2:.2f}x)")


if __name__ == "__main__":
    main()
