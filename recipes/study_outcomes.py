"""A study's numbers: success grids ({seed: {task: success}}) and the statistics over them (panel summaries,
pairwise differences, with the intervals of :mod:`turngym.agents.intervals`), and the outcome record behind a
published table (``outcomes.json``), which :func:`recompute` reads back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from turngym.recipes.study_config import Arm

OUTCOMES = "outcomes.json"  # every (arm, seed, panel, task) outcome: small, meant to be committed beside a table


def moving_average(values: Sequence[float], window: int) -> list[float]:
    """Trailing mean over the last ``window`` values (fewer at the start)."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def success_grid(rows: Iterable[dict[str, Any]], panel: str) -> dict[Any, dict[Any, float]]:
    """{seed: {task: success}} of one policy on ``panel``; with several samples per task
    (``samples_per_task``), a task's success is its mean over the samples."""
    grid: dict[Any, dict[Any, float]] = {}
    for (seed, task), won in _passes_by_task(rows, panel).items():
        grid.setdefault(seed, {})[task] = sum(won) / len(won)
    return grid


def _passes_by_task(rows: Iterable[dict[str, Any]], panel: str) -> dict[tuple[Any, Any], list[bool]]:
    """(seed, task) -> the outcome of each sample played on ``panel``."""
    passes: dict[tuple[Any, Any], list[bool]] = {}
    for r in rows:
        if r["panel"] == panel:
            for o in r["outcomes"]:
                passes.setdefault((r["seed"], o["task"]), []).append(bool(o["won"]))
    return passes


def pairwise_differences(evals: Mapping[str, list[dict[str, Any]]], labels: Sequence[str],
                         panel: str = "held_out") -> list[dict[str, Any]]:
    """Every pair (a, b) of ``labels``, a before b: a's success minus b's, paired by (seed, task)
    (:func:`~turngym.agents.intervals.paired_comparison`: the seeds x tasks interval, the t over seeds,
    the difference per seed). The ordering of the algorithms is read off these, not off the separate
    success rates."""
    from turngym.agents.intervals import paired_comparison

    out = []
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            out.append({"a": a, "b": b, **paired_comparison(success_grid(evals[a], panel),
                                                            success_grid(evals[b], panel))})
    return out


def panel_summary(rows: Iterable[dict[str, Any]], reference_rows: Iterable[dict[str, Any]],
                  panel: str) -> dict[str, Any]:
    """Pooled over seeds: success with its interval (over seeds and tasks when there are several seeds,
    else Wilson), per-seed rates, the paired difference to the reference arm on the same (seed, task)
    pairs (:func:`~turngym.agents.intervals.paired_comparison`), the breakdown by difficulty (Wilson,
    tasks treated as independent), and pass@k (when the evaluation played several samples per task)."""
    from turngym.agents.intervals import paired_comparison, pass_at_k_summary, success_interval, wilson_interval

    rows = [r for r in rows if r["panel"] == panel]
    outcomes = [(r["seed"], o) for r in rows for o in r["outcomes"]]
    n = len(outcomes)
    wins = sum(o["won"] for _, o in outcomes)
    turns = sum(o["turns"] for _, o in outcomes)
    mine = success_grid(rows, panel)
    success = success_interval(mine) if mine else {"ci95": [0.0, 1.0], "method": "no episodes"}
    by_difficulty: dict[str, list[bool]] = {}
    for r in rows:
        if "reused_from_seed" in r:  # the base model's one greedy evaluation standing for another seed: no new episode
            continue
        for o in r["outcomes"]:
            by_difficulty.setdefault(str(o["difficulty"]), []).append(o["won"])
    ks = sorted({p["k"] for r in rows for p in r["report"].get("pass_at_k", [])})
    passes = _passes_by_task(rows, panel)  # pass@k pools seeds: each (seed, task) is one unit of the bootstrap
    return {
        "pass_at_k": [asdict(pass_at_k_summary(passes, k)) for k in ks],
        "episodes": n,
        "success": wins / n if n else 0.0,
        "success_ci95": success["ci95"],
        "success_ci95_method": success["method"],
        "success_per_seed": {r["seed"]: r["report"]["overall"]["success_rate"] for r in rows},
        "return": sum(o["return"] for _, o in outcomes) / n if n else 0.0,
        "turns": turns / n if n else 0.0,
        "invalid_action_rate": sum(o["invalid"] for _, o in outcomes) / turns if turns else 0.0,
        "vs_reference": paired_comparison(mine, success_grid(reference_rows, panel)),
        "by_difficulty": {k: {"episodes": len(v), "success": sum(v) / len(v),
                              "success_ci95": wilson_interval(sum(v), len(v))}
                          for k, v in sorted(by_difficulty.items())},
        "taskset": rows[0]["report"]["taskset"] if rows else None,
        "protocol": rows[0]["report"]["action_protocol"] if rows else None,
    }


# ---------------------------------------------------------------------- outcomes: the numbers behind a table
def outcome_record(name: str, evals: Mapping[str, list[dict[str, Any]]], arms: Sequence[Arm],
                   fingerprints: Mapping[str, str]) -> dict[str, Any]:
    """Every outcome of a study, small enough to commit: {arm: {seed: {panel: {task: success}}}}, with each
    arm's kind (demos, RL episodes, null) and the panels' fingerprints. :func:`recompute` reads it back."""
    kinds = {arm.label: arm for arm in arms}
    record: dict[str, Any] = {"name": name, "panels": dict(fingerprints), "arms": {}}
    for label, rows in evals.items():
        arm = kinds[label]
        grids = {panel: success_grid(rows, panel) for panel in fingerprints}
        seeds = sorted({seed for grid in grids.values() for seed in grid}, key=str)
        record["arms"][label] = {
            "demos": arm.demos, "episodes": arm.episodes, "null": arm.null,
            "outcomes": {str(seed): {panel: grids[panel].get(seed, {}) for panel in grids} for seed in seeds},
        }
    return record


def recompute(record: Mapping[str, Any], reference: str | None = None, panel: str = "held_out") -> dict[str, Any]:
    """Every arm's success and paired difference to ``reference`` (default: the SFT-only arm, else the first)
    from an :func:`outcome_record`, with the intervals of :mod:`turngym.agents.intervals`."""
    from turngym.agents.intervals import paired_comparison, success_interval

    arms = record["arms"]
    if reference is None:
        reference = next((label for label, a in arms.items() if a["demos"] and not a["episodes"]), next(iter(arms)))
    if reference not in arms:
        raise ValueError(f"no arm {reference!r} in the outcomes; they have {', '.join(arms)}")

    def grid(label: str) -> dict[str, dict[str, float]]:
        return {seed: panels[panel] for seed, panels in arms[label]["outcomes"].items() if panels.get(panel)}

    rows = {}
    for label in arms:
        mine = grid(label)
        cells = [v for tasks in mine.values() for v in tasks.values()]
        rows[label] = {"success": sum(cells) / len(cells) if cells else 0.0, **_prefixed(success_interval(mine)),
                       "vs_reference": paired_comparison(mine, grid(reference)), "null": arms[label]["null"]}
    return {"reference": reference, "panel": panel, "arms": rows}


def _prefixed(success: Mapping[str, Any]) -> dict[str, Any]:
    return {"success_ci95": success["ci95"], "success_ci95_method": success["method"]}
