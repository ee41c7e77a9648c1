"""TextWorld throughput: raw textworld vs turngym's env, and the parallel pool with 1 and 2 workers.

Every measurement plays the *same* games with the *same* command script, in one run:
per game, ``--noise`` cheap commands (look / inventory) then the walkthrough (a win), repeated.
The raw baseline requests the same textworld infos as the env (admissible commands, policy,
scores), so the ratio measures the wrapper, not the cost of extra infos.

    python bench/env_throughput.py            # defaults: 20 games of w2-o3-q4, 3 repeats
    python bench/env_throughput.py --config w4-o6-q8 --games 10

Prints steps/s and ratios against the raw baseline and against 1 worker.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import textworld

from turngym.agents.base import EpisodeView, PerEpisodeAgent
from turngym.agents.rollout import run_episodes
from turngym.envs.textworld import TextWorldEnv, materialise, textworld_tasks
from turngym.envs.textworld.engine import request_infos
from turngym.envs.textworld.generation import task_files
from turngym.envs.vector import EnvPool


def script(walkthrough: list[str], noise: int) -> list[str]:
    return ["look", "inventory"] * (noise // 2) + list(walkthrough)


def timed_episodes(start_episode, step, episodes, rounds: int) -> float:
    """Steps/s over ``rounds`` passes; ``start_episode(key)`` loads and resets, ``step`` runs a command."""
    steps, elapsed = 0, 0.0
    for _ in range(rounds):
        for key, commands in episodes:
            start = time.perf_counter()
            start_episode(key)
            for command in commands:
                step(command)
            elapsed += time.perf_counter() - start
            steps += len(commands)
    return steps / elapsed


def raw_textworld(games: list[tuple[str, list[str]]], rounds: int) -> float:
    env = textworld.start(games[0][0], request_infos=request_infos())

    def start_episode(game_file: str) -> None:
        env.load(game_file)  # the env loads the task's game at every reset too
        env.reset()

    rate = timed_episodes(start_episode, env.step, games, rounds)
    env.close()
    return rate


def turngym_env(tasks, scripts, rounds: int, isolation: str) -> float:
    env = TextWorldEnv(tasks=tasks, engine_isolation=isolation, max_turns=10_000)
    env.reset(options={"task": tasks[0]})  # start the engine outside the timed region
    rate = timed_episodes(lambda task: env.reset(options={"task": task}), env.step,
                          list(zip(tasks, scripts, strict=True)), rounds)
    env.close()
    return rate


class ScriptedAgent(PerEpisodeAgent):
    name = "scripted"

    def __init__(self, noise: int) -> None:
        super().__init__()
        self.noise = noise

    def choose(self, view: EpisodeView) -> str:
        return script(view.info["walkthrough"], self.noise)[len(view.actions)]


def pool(tasks, rounds: int, workers: int, noise: int, isolation: str, env_id: str = "turngym/TextWorld-v0") -> float:
    env_kwargs: dict[str, Any] = {"tasks": tasks, "engine_isolation": isolation, "max_turns": 10_000}
    env_pool = EnvPool.from_id(env_id, workers, env_kwargs=env_kwargs)
    run_episodes(ScriptedAgent(noise), env_pool, list(tasks)[:workers])  # warm up workers and engines
    episodes = list(tasks) * rounds
    start = time.perf_counter()
    trajectories = run_episodes(ScriptedAgent(noise), env_pool, episodes)
    elapsed = time.perf_counter() - start
    env_pool.close()
    assert all(t.won for t in trajectories), "the scripted agent must win every game"
    return sum(t.num_turns for t in trajectories) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="w2-o3-q4")
    parser.add_argument("--games", type=int, default=20)
    parser.add_argument("--noise", type=int, default=10, help="look/inventory commands before each walkthrough")
    parser.add_argument("--rounds", type=int, default=3, help="passes over the games per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per setting; the median is reported")
    args = parser.parse_args()

    tasks = materialise(textworld_tasks(args.config, "eval", n=args.games), progress=False)
    files = [task_files(t) for t in tasks]
    scripts = [script(list(f.walkthrough), args.noise) for f in files]
    games = [(str(f.game_file), s) for f, s in zip(files, scripts, strict=True)]

    def median(fn, *fn_args) -> float:
        return statistics.median(fn(*fn_args) for _ in range(args.repeats))

    # Interleave nothing else: each setting runs alone on the machine, one after the other.
    raw = median(raw_textworld, games, args.rounds)
    ours_inproc = median(turngym_env, tasks, scripts, args.rounds, "none")
    ours_isolated = median(turngym_env, tasks, scripts, args.rounds, "process")
    pool_rounds = args.rounds * 2
    pool_1 = median(pool, tasks, pool_rounds, 1, args.noise, "none")
    pool_2 = median(pool, tasks, pool_rounds, 2, args.noise, "none")
    pool_2_iso = median(pool, tasks, pool_rounds, 2, args.noise, "process")

    steps_per_game = statistics.mean(len(s) for s in scripts)
    print(f"config {args.config}: {args.games} eval games, {steps_per_game:.1f} steps per episode, "
          f"median of {args.repeats}")
    print("| setting | steps/s | ratio |")
    print("|---|---:|---:|")
    print(f"| raw textworld (same infos) | {raw:.0f} | 1.00 (baseline) |")
    print(f"| TextWorldEnv, engine in-process | {ours_inproc:.0f} | {ours_inproc / raw:.2f} vs raw |")
    print(f"| TextWorldEnv, engine isolated (default) | {ours_isolated:.0f} | {ours_isolated / raw:.2f} vs raw |")
    print(f"| EnvPool, 1 worker | {pool_1:.0f} | 1.00 (baseline) |")
    print(f"| EnvPool, 2 workers | {pool_2:.0f} | {pool_2 / pool_1:.2f} vs 1 worker |")
    print(f"| EnvPool, 2 workers, engines isolated | {pool_2_iso:.0f} | {pool_2_iso / pool_1:.2f} vs 1 worker |")


if __name__ == "__main__":
    main()
