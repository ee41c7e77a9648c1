"""Two saved evaluations compared, paired by task (``turngym eval --compare A B``), with the intervals ``turngym
compare`` uses (:func:`turngym.agents.intervals.paired_comparison`: the difference per task, a t interval over tasks
from one evaluation each, the exact McNemar test when outcomes are 0/1, the tasks gained and lost; each side's
success with Wilson's interval).

A saved evaluation is the trajectories file ``turngym eval --out DIR`` writes for an agent (``DIR/<agent>.jsonl``),
or a folder holding exactly one such file. A task's outcome is its success averaged over its samples (1 or 0 with
one sample per task). Only the tasks both played are compared; the others are counted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from turngym.agents.intervals import paired_comparison, success_interval


@dataclass
class SavedEvaluation:
    """One saved evaluation: its name (the file's), protocol(s) and success per task id."""

    name: str
    path: Path
    protocols: set[str]
    success: dict[str, float]


def read_evaluation(location: str | Path) -> SavedEvaluation:
    """The trajectories at ``location`` (a .jsonl file, or a folder with one), as success per task."""
    path = Path(location).expanduser()
    if path.is_dir():
        files = sorted(path.glob("*.jsonl"))
        if len(files) != 1:
            found = ", ".join(f.name for f in files) or "none"
            raise ValueError(f"--compare {location}: a folder must hold exactly one trajectories file (.jsonl), found "
                             f"{found}; name the file, e.g. {path / (files[0].name if files else 'oracle.jsonl')}")
        path = files[0]
    if not path.is_file():
        raise FileNotFoundError(f"--compare {location}: no such file or folder (turngym eval --out DIR writes "
                                "DIR/<agent>.jsonl)")
    outcomes: dict[str, list[float]] = {}
    protocols: set[str] = set()
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            task, won = str(row["task"]["id"]), row["won"]
        except (ValueError, KeyError, TypeError):
            raise ValueError(f"--compare {path}: line {number} is not an episode of turngym eval's trajectories "
                             "(JSON with task.id and won)") from None
        outcomes.setdefault(task, []).append(1.0 if won else 0.0)
        protocols.add(str(row.get("action_protocol")))
    if not outcomes:
        raise ValueError(f"--compare {path}: no episodes in the file")
    return SavedEvaluation(path.stem, path, protocols,
                           {task: sum(values) / len(values) for task, values in outcomes.items()})


def compare_evaluations(a: SavedEvaluation, b: SavedEvaluation) -> dict[str, Any]:
    """a against b on the tasks both played: :func:`paired_comparison` over one seed, and each side's success."""
    shared = sorted(set(a.success) & set(b.success))
    if not shared:
        raise ValueError(f"--compare: {a.path} and {b.path} share no task; compare evaluations of the same panel")
    result = paired_comparison({0: {t: a.success[t] for t in shared}}, {0: {t: b.success[t] for t in shared}})
    result["only_a"], result["only_b"] = len(set(a.success) - set(b.success)), len(set(b.success) - set(a.success))
    for side, evaluation in (("a", a), ("b", b)):
        values = {t: evaluation.success[t] for t in shared}
        result[f"success_{side}"] = sum(values.values()) / len(values)
        result[f"success_{side}_ci95"] = success_interval({0: values})["ci95"]
    return result


def comparison_table(a: SavedEvaluation, b: SavedEvaluation, result: dict[str, Any]) -> str:
    """The comparison as a markdown table and a note on what the interval covers."""
    def percent(value: float) -> str:
        return f"{100 * value:.1f}"

    low, high = result["ci95"]
    mcnemar = result["mcnemar_p"].get(0)
    test = f"; McNemar exact p = {mcnemar:.3g}" if mcnemar is not None and all(
        v in (0.0, 1.0) for v in (*a.success.values(), *b.success.values())) else ""
    header = ("| a | b | tasks | success a (95 % CI) | success b (95 % CI) | a - b (95 % CI) | tasks a won, b lost "
              "| tasks b won, a lost |")
    success_a, success_b = (f"{percent(result[f'success_{side}'])} % ({percent(result[f'success_{side}_ci95'][0])}-"
                            f"{percent(result[f'success_{side}_ci95'][1])})" for side in "ab")
    difference = (f"{100 * result['mean']:+.1f} points ({100 * max(low, -1.0):+.1f} to "
                  f"{100 * min(high, 1.0):+.1f})")
    row = (f"| {a.name} | {b.name} | {result['tasks']} | {success_a} | {success_b} | {difference} | "
           f"{result['gained']} | {result['lost']} |")
    note = (f"Paired by task ({result['method']}{test}). One evaluation each: the interval covers the tasks, not the "
            "variance between training runs (`turngym compare` trains several seeds for that).")
    lines = [header, "|---|---|---:|---|---|---|---:|---:|", row, "", note]
    if result["only_a"] or result["only_b"]:
        lines.append(f"Left out: {result['only_a']} task(s) only {a.name} played, {result['only_b']} only {b.name} "
                     "played.")
    if len(a.protocols | b.protocols) > 1:
        lines.append(f"Note: the two played different action protocols ({', '.join(sorted(a.protocols))} vs "
                     f"{', '.join(sorted(b.protocols))}); results under different protocols differ for that reason.")
    return "\n".join(lines)
