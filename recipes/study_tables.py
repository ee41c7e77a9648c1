"""A study's text: the cells and lines of its Markdown tables, the note on its intervals, and what a finished
study prints."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


def peak_memory(summary: Mapping[str, Any]) -> str:
    """The table footer's memory: the highest resident memory any run of the study had reached when a stage ended."""
    peak = summary.get("peak_rss_gb")
    return "peak resident memory not recorded" if peak is None else f"peak resident memory {peak:.1f} GB"


def stage_costs(stages: Mapping[str, Mapping[str, Any]],
                evals: Mapping[str, Iterable[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Each stage's seconds and peak resident memory, sorted by seed then stage: training stages (``seedS/NAME``,
    from their ``done.json``) and evaluations (``seedS/eval ARM (PANEL)``). The peak is the running process's
    when the stage ended, so it bounds the stage's own from above where one process ran several stages. An
    evaluation reused for another seed (the base model's, made once per study) is listed once, under its own seed."""
    rows = [{"stage": key, "seconds": record.get("seconds"), "peak_rss_gb": record.get("peak_rss_gb")}
            for key, record in stages.items()]
    rows += [{"stage": f"seed{record['seed']}/eval {label} ({record['panel']})", "seconds": record.get("seconds"),
              "peak_rss_gb": record.get("peak_rss_gb")}
             for label, records in evals.items() for record in records if "reused_from_seed" not in record]
    return sorted(rows, key=lambda row: row["stage"])


def folder_stage_costs(study_dir: Path) -> list[dict[str, Any]]:
    """:func:`stage_costs` read from a study's folder as it stands (``results/<name>/``): each finished stage's
    ``done.json`` and each evaluation's record, so a study still running, cut, or written by an older version (no
    ``stage_costs`` in its summary) has its table too."""
    import json

    stages = {str(done.parent.relative_to(study_dir)): json.loads(done.read_text())
              for done in sorted(study_dir.glob("seed*/**/done.json"))}
    evals: dict[str, list[dict[str, Any]]] = {}
    for record in sorted(study_dir.glob("evals/*/seed*.json")):
        evals.setdefault(record.parent.name, []).append(json.loads(record.read_text()))
    return stage_costs(stages, evals)


def cost_table(summary: Mapping[str, Any]) -> list[str]:
    """:func:`stage_costs`' rows (``summary["stage_costs"]``) as a markdown section; none for older summaries."""
    rows = summary.get("stage_costs")
    if not rows:
        return []
    lines = ["", "## Cost by stage", "", "| stage | minutes | peak resident memory (GB) |", "|---|---:|---:|"]
    for row in rows:
        minutes = "" if row["seconds"] is None else f"{row['seconds'] / 60:.1f}"
        peak = "not recorded" if row["peak_rss_gb"] is None else f"{row['peak_rss_gb']:.1f}"
        lines.append(f"| {row['stage']} | {minutes} | {peak} |")
    return lines


def percent(x: float) -> str:
    return f"{100 * x:.1f}"


def success_cell(s: Mapping[str, Any]) -> str:
    low, high = s["success_ci95"]
    return f"{percent(s['success'])} % ({percent(low)}-{percent(high)})"


def difference_cell(s: Mapping[str, Any]) -> str:
    """``+1.0 (-4.2 to +6.2)`` for a panel summary's ``vs_reference`` or a :func:`pairwise_differences` row."""
    d = s.get("vs_reference", s)
    low, high = d["ci95"]
    mark = " **+**" if low > 0 else (" **-**" if high < 0 else "")
    return f"{100 * d['mean']:+.1f} ({100 * low:+.1f} to {100 * high:+.1f}){mark}"


def seeds_cell(d: Mapping[str, Any]) -> str:
    """A paired difference seed by seed: the t interval over seed means and each seed's difference, or with
    one seed the games gained and lost and the exact McNemar p."""
    per_seed = d.get("per_seed") or {}
    if len(per_seed) == 1:
        (p,) = d["mcnemar_p"].values()
        return f"{d['gained']} gained, {d['lost']} lost; McNemar p = {p:.3g}"
    low, high = d.get("seed_t_ci95") or (float("nan"), float("nan"))
    seeds = " / ".join(f"{100 * v:+.1f}" for v in per_seed.values())  # 200 games: half points (+4.5), not +4
    return f"{100 * low:+.1f} to {100 * high:+.1f}; per seed {seeds}"


def seed_table(rows: Iterable[tuple[str, Mapping[str, Any]]], reference: str) -> list[str]:
    """Markdown lines: each paired difference to ``reference`` seed by seed (:func:`seeds_cell`)."""
    rows = list(rows)
    if not rows:
        return []
    return ["", f"Paired differences to {reference}, seed by seed:", "",
            f"| policy | vs {reference} (95 % CI, seeds x tasks) | t over seeds (95 % CI); per seed |",
            "|---|---|---|",
            *(f"| {label} | {difference_cell(d)} | {seeds_cell(d)} |" for label, d in rows)]


INTERVAL_NOTE = (
    "Intervals: a paired difference's 95 % interval comes from a seeds x tasks random-effects model (run-to-run "
    "and task-sampling variance, Satterthwaite t); with one seed it is the t interval over tasks, which leaves "
    "run-to-run variance out. Success intervals are the same model over several seeds, Wilson (tasks independent) "
    "for one. Where every (seed, task) cell is equal (no task won, or every one, on every seed), neither model has "
    "a spread to estimate, and the interval is Wilson's over the tasks instead of the point.")


def print_outputs(summary: Mapping[str, Any], out: Path, plot: str) -> None:
    """What both recipes print when a study is done: the table, where the files are, the time."""
    print("\n" + (out / "results.md").read_text())
    print(f"table: {out / 'results.md'}\nplot:  {out / plot}\nsummary: {out / 'summary.json'}")
    print(f"measured time: {summary['wall_seconds'] / 60:.1f} min")


def recomputed_markdown(result: Mapping[str, Any]) -> str:
    """:func:`recompute`'s numbers as a table (``turngym stats``)."""
    reference = result["reference"]
    lines = [f"| policy | success (95 % CI) | vs {reference} (95 % CI, seeds x tasks) |",
             "|---|---|---|"]
    for label, row in result["arms"].items():
        vs = "(reference)" if label == reference else difference_cell(row)
        lines.append(f"| {label}{' (null control)' if row['null'] else ''} | {success_cell(row)} | {vs} |")
    lines += seed_table(((label, row["vs_reference"]) for label, row in result["arms"].items()
                         if label != reference), reference)
    return "\n".join([*lines, "", INTERVAL_NOTE]) + "\n"
