"""A synthesized set's ``report.json`` as the tables a reader looks at (``turngym swe report DIR``).

The synthesis writes everything it did into ``report.json`` (per package and for the set); this module only
arranges it: one row per package (tests, bugs screened and kept, tasks, the main drop reasons, the grader's false
alarms and disagreements with pytest, seconds per validation), the set's totals, and what the tasks are
(repositories, splits, modifier kinds, tiers, FAIL_TO_PASS counts). Markdown, so it pastes into the docs.
"""

from __future__ import annotations

import statistics as stats
from collections import Counter
from pathlib import Path
from typing import Any

from turngym.envs.swe.synth.manifest import SPLITS

# FAIL_TO_PASS counts in the buckets the docs use (the synthesis caps the list at max_f2p = 20)
F2P_BUCKETS = ((1, 1), (2, 5), (6, 10), (11, 19), (20, 10**9))


def _table(header: list[str], rows: list[list[Any]]) -> str:
    align = ["---:" if rows and all(isinstance(r[i], (int, float)) for r in rows) else "---"
             for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _top(counts: dict[str, int], n: int = 3) -> str:
    if not counts:
        return "-"
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    shown = "; ".join(f"{reason} {count}" for reason, count in ranked[:n])
    rest = sum(count for _, count in ranked[n:])
    return shown + (f"; other {rest}" if rest else "")


def _bucket_label(low: int, high: int) -> str:
    return str(low) if low == high else (f"{low}+" if high >= 10**9 else f"{low}-{high}")


def f2p_buckets(histogram: dict[str, int]) -> dict[str, int]:
    """FAIL_TO_PASS counts (``{"1": 59, "2": 16, ...}``) summed into :data:`F2P_BUCKETS`."""
    found = dict.fromkeys((_bucket_label(low, high) for low, high in F2P_BUCKETS), 0)
    for count, tasks in histogram.items():
        for low, high in F2P_BUCKETS:
            if low <= int(count) <= high:
                found[_bucket_label(low, high)] += tasks
    return found


def package_rows(summary: dict, splits: dict[str, str]) -> list[list[Any]]:
    """One row per package, in the order it was synthesized; ``splits``: each repository's split."""
    tasks = summary.get("statistics", {}).get("repositories", {})
    rows = []
    for p in summary["packages"]:
        if p["status"] != "ok":
            rows.append([p["spec"], splits.get(p["name"], "-"), "-", "-", "-", 0,
                         f"package dropped: {p['reason']}", "-", "-", "-", "-"])
            continue
        alarms = len(p.get("false_alarms", []))
        rows.append([
            p["spec"], splits.get(p["name"], "-"),
            f"{p['tests_kept']}/{p['tests_collected']}"
            + (f" ({p['tests_flaky']} flaky)" if p.get("tests_flaky") else ""),
            p["screened"], p["kept_mutations"], tasks.get(p["name"], 0), _top(p.get("drops", {})),
            f"{alarms} of {len(p.get('validation_seconds', []))}",
            _package_disagreements(p), p.get("regraded", "-"),
            _median_and_mean(p.get("validation_seconds", []))])
    return rows


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _package_disagreements(package: dict) -> str:
    """``n validations, m tests``: the validations whose gold patch failed a test that passes under pytest, and
    the distinct tests (``m tests`` alone for a report written before the validations were counted)."""
    tests = len(package.get("gold_disagreements", {}))
    if not tests:
        return "0"
    if "gold_gradings_disagreeing" not in package:
        return _plural(tests, "test")
    return f"{_plural(package['gold_gradings_disagreeing'], 'validation')}, {_plural(tests, 'test')}"


def _median_and_mean(values: list[float]) -> str:
    return f"{stats.median(values):.1f} / {stats.fmean(values):.1f}" if values else "-"


def _disagreeing(summary: dict, validations: int) -> str:
    """``n of N (x %), m test results`` (``-`` for a report written before the count was kept)."""
    if "gold_gradings_disagreeing" not in summary or not validations:
        return "-"
    n = summary["gold_gradings_disagreeing"]
    results = sum(summary.get("gold_disagreements", {}).values())
    return f"{n} of {validations} ({100 * n / validations:.1f} %), {results} test results"


def render(summary: dict, splits: dict[str, str] | None = None) -> str:
    """The report as markdown: packages, totals, and what the tasks are. ``splits``: each repository's split (the
    manifest's ``splits.repositories``)."""
    st = summary.get("statistics", {})
    parts = ["### Packages", "", _table(
        ["package", "split", "tests kept/collected", "bugs screened", "bugs kept", "tasks", "drops (most common)",
         "false alarms (of validations)", "gold disagreements", "tasks kept once rebuilt",
         "s per validation (median / mean)"],
        package_rows(summary, splits or {}))]
    validations = summary.get("gold_gradings", 0)
    alarms = len(summary.get("false_alarms", []))
    rate = f"{alarms} of {validations} ({100 * alarms / validations:.1f} %)" if validations else "no validation"
    parts += ["", "### The set", "", _table(["what", "value"], [
        ["tasks", summary.get("tasks", 0)],
        ["packages with tasks", sum(1 for n in st.get("repositories", {}).values() if n)],
        ["splits", ", ".join(f"{k} {v}" for k, v in summary.get("splits", {}).items())],
        ["grader false alarms that void a grading (on the gold patch or the bug, repeated by every rerun)", rate],
        ["void gradings a rerun did not repeat (flaky tasks, dropped)", len(summary.get("unrepeated_voids", []))],
        [("validations whose gold patch failed a test that passes under pytest (a false alarm on a test, not a "
          "void; the task is rebuilt without it)"), _disagreeing(summary, validations)],
        ["tests the grader disagrees with pytest on (untouched code)", len(summary.get("gold_disagreements", {}))],
        [("validations whose gold grading recorded reference states (pairs whose untouched `==` held on a full "
          "rebuild, kept with the task; validated again where one changed a verdict; before validator 8, only "
          "pairs the probes refused)"), summary.get("gold_gradings_with_reference_states", "-")],
        ["seconds per validation (mean)", summary.get("seconds_per_validation") or "-"],
        ["drops", _top(summary.get("drops", {}), n=10)]])]
    if st.get("modifiers"):
        parts += ["", "### The tasks", "",
                  _table(["modifier", "tasks"], [[k, v] for k, v in sorted(st["modifiers"].items(),
                                                                          key=lambda kv: (-kv[1], kv[0]))]), "",
                  _tier_table(st), "",
                  _table(["FAIL_TO_PASS tests", "tasks"],
                         [[k, v] for k, v in f2p_buckets(st.get("fail_to_pass", {}).get("histogram", {})).items()]),
                  "", f"FAIL_TO_PASS median {st.get('fail_to_pass', {}).get('median', 0)}; runner modes: "
                  + ", ".join(f"{k} {v}" for k, v in st.get("runner", {}).items())]
    return "\n".join(parts) + "\n"


def _tier_table(st: dict) -> str:
    """Tasks by tier, with a column for each split when the set has them (older reports: the total only)."""
    by_split = st.get("tiers_by_split", {})
    tiers = [t for t in ("easy", "medium", "hard") if t in st.get("tiers", {})] + sorted(
        set(st.get("tiers", {})) - {"easy", "medium", "hard"})
    splits = sorted(by_split, key=lambda s: (SPLITS.index(s) if s in SPLITS else len(SPLITS), s))
    return _table(["tier", *splits, "tasks"],
                  [[t, *(by_split[s].get(t, 0) for s in splits), st["tiers"][t]] for t in tiers])


def _drop_kind(reason: str) -> str:
    """A drop reason's colour group in :func:`plot`: no failing test, another screening drop, or validation's."""
    if reason.startswith("validate"):
        return "dropped in validation"
    return "dropped: no test fails" if reason == "no test fails" else "dropped in screening (other)"


SPLIT_COLOURS = {"train": "tab:blue", "eval": "tab:orange", "test": "tab:purple", "-": "tab:gray"}
DROP_COLOURS = {"dropped: no test fails": "0.8", "dropped in screening (other)": "0.6", "dropped in validation": "0.35"}


def plot(summary: dict, path: str | Path, splits: dict[str, str] | None = None) -> Path:
    """A figure of ``report.json`` (``turngym swe report DIR --plot FILE.png``): per package, the bugs screened as
    tasks (coloured by the repository's split) and drops (by kind), and the seconds per validation; for the set,
    the modifier kinds, the FAIL_TO_PASS counts and the tiers. Written to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    splits = splits or {}
    packages = [p for p in summary.get("packages", []) if p.get("status") == "ok"]
    if not packages:
        raise ValueError("the report has no synthesized package: nothing to plot")
    st = summary.get("statistics", {})
    tasks = st.get("repositories", {})
    figure = plt.figure(figsize=(13, 4.2 + 0.32 * len(packages)))
    grid = figure.add_gridspec(2, 3, height_ratios=[0.6 + 0.32 * len(packages), 3.6], hspace=0.45, wspace=0.35)

    bars = figure.add_subplot(grid[0, :2])
    names = [p["spec"] for p in packages][::-1]
    left = [0.0] * len(names)
    shown: set[str] = set()
    for i, p in enumerate(packages[::-1]):
        split = splits.get(p["name"], "-")
        pieces = [(f"tasks ({split})", tasks.get(p["name"], 0), SPLIT_COLOURS.get(split, "tab:gray"))]
        drops: Counter[str] = Counter()
        for reason, count in p.get("drops", {}).items():
            drops[_drop_kind(reason)] += count
        pieces += [(kind, drops.get(kind, 0), colour) for kind, colour in DROP_COLOURS.items()]
        for label, width, colour in pieces:
            if width:
                bars.barh(i, width, left=left[i], color=colour, label=None if label in shown else label)
                shown.add(label)
                left[i] += width
        bars.annotate(str(tasks.get(p["name"], 0)), (left[i], i), xytext=(3, 0), textcoords="offset points",
                      va="center", fontsize=8)
    bars.set_yticks(range(len(names)), names, fontsize=8)
    bars.set_xlabel("bugs screened")
    alarms, validations = len(summary.get("false_alarms", [])), summary.get("gold_gradings", 0)
    title = (f"{summary.get('tasks', 0)} tasks from {sum(1 for n in tasks.values() if n)} packages; "
             f"{alarms} of {validations} validations voided by a grader false alarm")
    if "gold_gradings_disagreeing" in summary:
        title += f", {summary['gold_gradings_disagreeing']} with a test the gold patch failed (left out)"
    figure.suptitle(title, fontsize=11)
    bars.set_xlim(0, 1.08 * max(left))
    handles, labels = bars.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: (not labels[i].startswith("tasks"), labels[i]))
    bars.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=7, ncol=len(labels),
                loc="lower left", bbox_to_anchor=(0, 1.01), frameon=False, handlelength=1.2)

    cost = figure.add_subplot(grid[0, 2])
    seconds = [p.get("validation_seconds") or [] for p in packages[::-1]]  # none validated: an empty row
    cost.boxplot(seconds, orientation="horizontal", widths=0.6, flierprops={"markersize": 3})
    cost.set_yticks(range(1, len(names) + 1), [p["name"] for p in packages[::-1]], fontsize=8)
    cost.set_xlabel("seconds per validation")
    cost.set_title("validation cost", fontsize=10)

    def _bars(axis, counts: dict[str, int], title: str, horizontal: bool = False) -> None:
        labels, values = list(counts), list(counts.values())
        (axis.barh if horizontal else axis.bar)(labels, values, color="tab:blue")
        axis.set_title(title, fontsize=10)
        axis.tick_params(labelsize=7)

    modifiers = dict(sorted(st.get("modifiers", {}).items(), key=lambda kv: (kv[1], kv[0])))
    _bars(figure.add_subplot(grid[1, 0]), {k.removeprefix("func_pm_"): v for k, v in modifiers.items()},
          "tasks by modifier", horizontal=True)
    _bars(figure.add_subplot(grid[1, 1]), f2p_buckets(st.get("fail_to_pass", {}).get("histogram", {})),
          "tasks by FAIL_TO_PASS tests")
    tiers = st.get("tiers", {})
    _bars(figure.add_subplot(grid[1, 2]), {t: tiers.get(t, 0) for t in ("easy", "medium", "hard")}, "tasks by tier")
    path = Path(path)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return path
