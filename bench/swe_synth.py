"""What a synthesized SWE task costs against a shipped toy task, in one run.

For ``--tasks`` tasks of a synthesized set (round-robin over its repositories, in the set's order) and as many of
the shipped toy tasks (``envs/swe/data/tasks``), alternated task by task so both see the same load:

* **validation**: :func:`turngym.envs.swe.taskset.validate` (set-up, a grading of the untouched bug and one of the
  gold patch, each in a fresh grading sandbox), what ``turngym swe synth`` runs per kept mutation;
* **graded episode**: ``turngym/SWE-v0`` played by the oracle (reset, the gold patch applied, submit and the final
  grading), what one training or evaluation episode costs besides the model;
* **tasks validated per hour** with ``--workers`` processes (default 2: this machine's cores), the validations of
  the synthesized tasks run again in a process pool (``turngym swe synth --workers``).

It prints medians, the synthesized / toy ratios, the throughput, the machine's load average before and after
(a shared machine makes every number slower), and the synthesis run's own seconds per validated task when the
set's ``report.json`` is there::

    python bench/swe_synth.py --set ~/.cache/turngym/swe-synth/sets/scale-v1 --tasks 6
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").is_file() else "?"


def pick(records: list[dict], n: int) -> list[dict]:
    """``n`` records, round-robin over their repositories in the set's order."""
    by_repo: dict[str, list[dict]] = {}
    for record in records:
        by_repo.setdefault(record["repo"], []).append(record)
    chosen: list[dict] = []
    while len(chosen) < n and any(by_repo.values()):
        for rows in by_repo.values():
            if rows and len(chosen) < n:
                chosen.append(rows.pop(0))
    return chosen


def synthesized(path: Path, n: int) -> list:
    from turngym.envs.swe import SWEInstance

    tasks = path / "tasks.jsonl" if path.is_dir() else path
    records = [json.loads(line) for line in tasks.read_text().splitlines() if line.strip()]
    return [SWEInstance.from_record(r, base_dir=tasks.parent) for r in pick(records, n)]


def validation_seconds(instance) -> float:
    from turngym.envs.swe import validate

    start = time.perf_counter()
    result = validate(instance, "bwrap")
    if result.problems or result.after.tampered:
        raise RuntimeError(f"{instance.instance_id} does not validate: {result.problems or 'grading_tampered'}")
    return time.perf_counter() - start


def episode_seconds(instance) -> float:
    import gymnasium as gym

    import turngym  # noqa: F401 - registers the worlds
    from turngym.envs.swe import oracle_actions, swe_taskset

    env = gym.make("turngym/SWE-v0", tasks=swe_taskset([instance], name="bench"), sandbox="bwrap")
    try:
        start = time.perf_counter()
        env.reset(seed=0)
        for action in oracle_actions(instance):
            _, reward, terminated, _, _ = env.step(action)
        seconds = time.perf_counter() - start
    finally:
        env.close()
    if not (terminated and reward == 1.0):
        raise RuntimeError(f"the oracle did not resolve {instance.instance_id} (reward {reward})")
    return seconds


def throughput(instances: list, workers: int) -> tuple[float, float]:
    """``(wall seconds, tasks validated per hour)`` for ``instances`` validated in ``workers`` processes."""
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        list(pool.map(validation_seconds, instances))
    wall = time.perf_counter() - start
    return wall, 3600 * len(instances) / wall


def run_cost(path: Path) -> str:
    """The synthesis run's own cost (screening and validation) per validated task, from its report."""
    report = (path if path.is_dir() else path.parent) / "report.json"
    if not report.is_file():
        return ""
    data = json.loads(report.read_text())
    total = sum(p["seconds"].get("total", 0.0) for p in data["packages"])
    screen = sum(p["seconds"].get("screen", 0.0) for p in data["packages"])
    validate = sum(p["seconds"].get("validate", 0.0) for p in data["packages"])
    tasks = max(1, data["tasks"])
    return (f"synthesis run (its report): {data['tasks']} tasks, {total / tasks:.1f} s per validated task "
            f"({screen / tasks:.1f} screening, {validate / tasks:.1f} validating), "
            f"{3600 * data['tasks'] / max(total, 1):.0f} tasks per hour, one process")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", default=str(Path.home() / ".cache/turngym/swe-synth/sets/scale-v1"),
                        help="a synthesized set's folder (or its tasks.jsonl)")
    parser.add_argument("--tasks", type=int, default=6, help="tasks of each kind")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="processes for the throughput")
    args = parser.parse_args()

    from turngym.envs.swe import shipped_instances

    path = Path(args.set).expanduser()
    synth = synthesized(path, args.tasks)
    toy = [instance for _, instance in shipped_instances()][: args.tasks]
    before = load()
    cost: dict[str, dict[str, list[float]]] = {"synthesized": {"validation": [], "episode": []},
                                                "toy": {"validation": [], "episode": []}}
    for s, t in zip(synth, toy, strict=False):
        for kind, instance in (("synthesized", s), ("toy", t)):
            cost[kind]["validation"].append(validation_seconds(instance))
            cost[kind]["episode"].append(episode_seconds(instance))
    wall, per_hour = throughput(synth, args.workers)
    after = load()
    print(f"{len(synth)} synthesized tasks ({len({i.repo for i in synth})} repositories) and {len(toy)} toy tasks; "
          f"{os.cpu_count()} cores; load average {before} before, {after} after")
    print("| per task | synthesized (median s) | toy (median s) | ratio |")
    print("|---|---:|---:|---:|")
    for what in ("validation", "episode"):
        a, b = statistics.median(cost["synthesized"][what]), statistics.median(cost["toy"][what])
        label = "validation (bug + gold gradings)" if what == "validation" else "graded episode (oracle)"
        print(f"| {label} | {a:.2f} | {b:.2f} | {a / b:.1f}x |")
    print(f"throughput: {len(synth)} synthesized tasks validated in {wall:.0f} s with {args.workers} processes: "
          f"{per_hour:.0f} tasks per hour")
    line = run_cost(path)
    if line:
        print(line)


if __name__ == "__main__":
    main()
