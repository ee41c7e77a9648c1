"""The algorithm comparison's pre-registered analysis (docs/plans/2026-11-28-algorithm-comparison.md), from outcomes.

Every comparison is a paired contrast over the (seed, game) grid, ``d_st = sum_i c_i y_i,st`` (``a - b`` has
coefficients +1, -1; the density interaction ``(PPO dense - PPO sparse) - (RLOO dense - RLOO sparse)`` has four).
Its interval is :func:`~turngym.agents.intervals.bounded_crossed_interval` (seeds x tasks random effects; Wilson's
over the games where every cell is 0) at the family's Bonferroni level, and its equivalence interval is the same
at the TOST level:

    family f with k_f comparisons:   level_f = 1 - 0.05 / k_f        TOST level_f = 1 - 2 * 0.05 / k_f

A comparison whose paper claim is a direction (``a > b``) is

    reproduced    if low_f > 0           reversed   if high_f < 0
    equivalent    if -3 < TOST low and TOST high < +3 points (not reproduced, but resolved)
    unresolved    otherwise (not reproduced)

and one whose claim is "no difference" is reproduced when equivalent within +-3, not reproduced when the corrected
interval excludes 0 (its sign said), unresolved otherwise. F3 (H4) labels each RL algorithm against RFT instead:
*beats RFT* (low_f > 0), *below RFT* (high_f < 0), *no better than RFT shown*. H1 as a whole is reproduced when
PPO - RLOO and RLOO - GRPO both are; partly reproduced when one F1 pair is and none is reversed; reversed when any
is; resolved as equivalent when all three are equivalent; unresolved otherwise. The ordering counts as *resolved*
(the issue's word) when some F1 interval excludes 0 or all three pairs are equivalent.

Each family uses the seeds on which every one of its arms has outcomes, and the games all of them played; a family
with none is *not run*. Nothing here is tuned: the families, levels, bound and rules are the plan's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ALPHA = 0.05
EQUIVALENCE_BOUND = 0.03  # +-3 points, the plan's bound

GREATER, NO_DIFFERENCE = "greater", "no difference"


@dataclass(frozen=True)
class Comparison:
    """One contrast: ``terms`` are (coefficient, arm label); ``claim`` is the paper's (GREATER, NO_DIFFERENCE, or
    None where the paper says nothing); ``paper`` its numbers, as the table shows them."""

    name: str
    terms: tuple[tuple[float, str], ...]
    claim: str | None
    paper: str

    @property
    def arms(self) -> tuple[str, ...]:
        return tuple(label for _, label in self.terms)


@dataclass(frozen=True)
class Family:
    """Comparisons sharing one Bonferroni correction. ``labels``: verdicts by where the corrected interval lies
    (above 0, spanning it, below 0), in place of the paper-claim rule (F3)."""

    key: str
    hypothesis: str
    comparisons: tuple[Comparison, ...]
    labels: tuple[str, str, str] | None = None

    @property
    def k(self) -> int:
        return len(self.comparisons)

    @property
    def level(self) -> float:
        return 1 - ALPHA / self.k

    @property
    def tost_level(self) -> float:
        return 1 - 2 * ALPHA / self.k

    @property
    def arms(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(label for c in self.comparisons for label in c.arms))


def _minus(a: str, b: str) -> tuple[tuple[float, str], ...]:
    return ((1.0, a), (-1.0, b))


# Arm labels of recipes/configs/compare/textworld-algorithms-<world>.yaml.
PPO, RLOO, GRPO, RFT, SFT = "ppo", "turn_rloo", "grpo", "rft", "sft-only"
PPO_SPARSE, RLOO_SPARSE, GIGPO = "ppo-sparse", "turn_rloo-sparse", "gigpo"

PAPER_ORDERING = "w2-o3-q4, 1.5B: PPO 88, RLOO 51, GRPO ~17 (base); w4-o6-q8, 7B: PPO 72, RLOO 47, GRPO 36"

FAMILIES: tuple[Family, ...] = (
    Family("F1", "H1: PPO > turn-level RLOO > GRPO at equal episodes (primary)", (
        Comparison("PPO - RLOO", _minus(PPO, RLOO), GREATER, "+37 (88 vs 51); +25 (72 vs 47)"),
        Comparison("RLOO - GRPO", _minus(RLOO, GRPO), GREATER, "+34 (51 vs ~17); +11 (47 vs 36)"),
        Comparison("PPO - GRPO", _minus(PPO, GRPO), GREATER, "+71 (88 vs ~17); +36 (72 vs 36)"),
    )),
    Family("F2", "H2: GRPO does not improve on its start; the others over SFT-only", (
        Comparison("PPO - SFT-only", _minus(PPO, SFT), GREATER, "PPO 88 vs base 17 (no SFT start)"),
        Comparison("RLOO - SFT-only", _minus(RLOO, SFT), GREATER, "RLOO 51 vs base 17 (no SFT start)"),
        Comparison("GRPO - SFT-only", _minus(GRPO, SFT), NO_DIFFERENCE, "GRPO ~ base (~17)"),
        Comparison("RFT - SFT-only", _minus(RFT, SFT), None, "not in the paper"),
    )),
    Family("F3", "H4: each RL algorithm beats rejection-sampling fine-tuning at the same budget", (
        Comparison("PPO - RFT", _minus(PPO, RFT), None, "not in the paper"),
        Comparison("RLOO - RFT", _minus(RLOO, RFT), None, "not in the paper"),
        Comparison("GRPO - RFT", _minus(GRPO, RFT), None, "not in the paper"),
    ), labels=("beats RFT", "no better than RFT shown", "below RFT")),
    Family("F4", "H3: dense rewards help PPO more than turn-level RLOO", (
        Comparison("PPO dense - sparse", _minus(PPO, PPO_SPARSE), GREATER, "+17 (58 vs 41)"),
        Comparison("RLOO dense - sparse", _minus(RLOO, RLOO_SPARSE), NO_DIFFERENCE, "~0 (about 55 either way)"),
        Comparison("interaction (PPO gain - RLOO gain)",
                   ((1.0, PPO), (-1.0, PPO_SPARSE), (-1.0, RLOO), (1.0, RLOO_SPARSE)), GREATER, "about +17"),
    )),
    Family("F5", "H5: GiGPO >= turn-level RLOO and > GRPO (verl-agent's claim; exploratory)", (
        Comparison("GiGPO - RLOO", _minus(GIGPO, RLOO), GREATER, "verl-agent: GiGPO above RLOO"),
        Comparison("GiGPO - GRPO", _minus(GIGPO, GRPO), GREATER, "verl-agent: GiGPO above GRPO"),
    )),
)


@dataclass
class Verdict:
    """One comparison's numbers and verdict (fractions; the table prints points)."""

    family: str
    name: str
    paper: str
    mean: float
    interval: tuple[float, float]
    tost: tuple[float, float]
    level: float
    seeds: int
    tasks: int
    per_seed: dict[str, float]
    verdict: str
    method: str = ""
    seed_t: tuple[float, float] | None = None
    excludes_zero: bool = field(init=False)
    equivalent: bool = field(init=False)

    def __post_init__(self) -> None:
        self.excludes_zero = self.interval[0] > 0 or self.interval[1] < 0
        self.equivalent = within_bound(self.tost)


def within_bound(tost: tuple[float, float]) -> bool:
    """Equivalence by TOST: the interval at the family's TOST level lies inside (-3, +3) points."""
    return -EQUIVALENCE_BOUND < tost[0] and tost[1] < EQUIVALENCE_BOUND


def contrast_grid(record: Mapping[str, Any], comparison: Comparison, seeds: Sequence[str], panel: str
                  ) -> tuple[list[str], list[list[float]]]:
    """The games every arm of ``comparison`` played on every one of ``seeds``, and d_st = sum_i c_i y_i,st."""
    outcomes = [(c, record["arms"][label]["outcomes"]) for c, label in comparison.terms]
    shared = set.intersection(*(set(o[s][panel]) for _, o in outcomes for s in seeds))
    games = sorted(shared, key=str)
    return games, [[sum(c * float(o[s][panel][g]) for c, o in outcomes) for g in games] for s in seeds]


def family_seeds(record: Mapping[str, Any], family: Family, panel: str) -> list[str]:
    """The seeds on which every arm of ``family`` has outcomes on ``panel`` (the plan's rule for partial results)."""
    arms = record["arms"]
    if any(label not in arms for label in family.arms):
        return []
    per_arm = [{s for s, panels in arms[label]["outcomes"].items() if panels.get(panel)} for label in family.arms]
    return sorted(set.intersection(*per_arm), key=str)


def judge(family: Family, comparison: Comparison, interval: tuple[float, float], tost: tuple[float, float]) -> str:
    """The plan's verdict for one comparison (see the module's docstring)."""
    low, high = interval
    equivalent = within_bound(tost)
    if family.labels is not None:
        above, spans, below = family.labels
        return above if low > 0 else below if high < 0 else spans
    if comparison.claim == GREATER:
        if low > 0:
            return "reproduced"
        if high < 0:
            return "reversed"
        return "equivalent (not reproduced, resolved)" if equivalent else "unresolved (not reproduced)"
    if comparison.claim == NO_DIFFERENCE:
        if equivalent:
            return "reproduced (equivalent within ±3)"
        if low > 0 or high < 0:
            return f"not reproduced ({'higher' if low > 0 else 'lower'})"
        return "unresolved (not reproduced)"
    return "above 0" if low > 0 else "below 0" if high < 0 else "spans 0"


def analyse(record: Mapping[str, Any], panel: str = "held_out", families: Sequence[Family] = FAMILIES
            ) -> dict[str, Any]:
    """Every family's comparisons with their corrected and TOST intervals and verdicts, and H1 as a whole."""
    from turngym.agents.intervals import bounded_crossed_interval, seed_t_interval

    result: dict[str, Any] = {"panel": panel, "families": {}}
    for family in families:
        seeds = family_seeds(record, family, panel)
        rows = []
        for comparison in family.comparisons if seeds else ():
            games, grid = contrast_grid(record, comparison, seeds, panel)
            if not games:
                continue
            span = sum(abs(c) for c, _ in comparison.terms) / 2  # the largest |d_st|: 1 for a - b
            corrected = bounded_crossed_interval(grid, family.level, span)
            tost = bounded_crossed_interval(grid, family.tost_level, span)
            seed_t = seed_t_interval([sum(row) / len(row) for row in grid], family.level)
            rows.append(Verdict(
                family.key, comparison.name, comparison.paper, corrected.mean, (corrected.low, corrected.high),
                (tost.low, tost.high), family.level, len(seeds), len(games),
                {s: sum(row) / len(row) for s, row in zip(seeds, grid, strict=True)},
                judge(family, comparison, (corrected.low, corrected.high), (tost.low, tost.high)),
                corrected.method, (seed_t.low, seed_t.high) if seed_t else None))
        result["families"][family.key] = {"hypothesis": family.hypothesis, "k": family.k, "level": family.level,
                                          "seeds": seeds, "verdicts": rows}
    result["h1"] = ordering_verdict(result["families"].get("F1", {}).get("verdicts", []))
    return result


def ordering_verdict(f1: Sequence[Verdict]) -> dict[str, Any]:
    """H1 as a whole from the F1 verdicts, and whether the ordering is resolved (the issue's definition)."""
    if len(f1) < 3:
        return {"verdict": "not run", "resolved": False}
    by_name = {v.name: v.verdict for v in f1}
    verdicts = list(by_name.values())
    if by_name["PPO - RLOO"] == "reproduced" and by_name["RLOO - GRPO"] == "reproduced":
        verdict = "reproduced"
    elif "reproduced" in verdicts and "reversed" not in verdicts:
        verdict = "partly reproduced"
    elif "reversed" in verdicts:
        verdict = "reversed (" + ", ".join(v.name for v in f1 if v.verdict == "reversed") + ")"
    elif all(v.equivalent for v in f1):
        verdict = "resolved as equivalent"
    else:
        verdict = "unresolved"
    resolved = any(v.excludes_zero for v in f1) or all(v.equivalent for v in f1)
    return {"verdict": verdict, "resolved": resolved}


def _points(low: float, high: float) -> str:
    return f"{100 * low:+.1f} to {100 * high:+.1f}"


def verdicts_markdown(result: Mapping[str, Any]) -> str:
    """The claim-by-claim table: the paper's numbers beside turngym's corrected intervals and the verdicts."""
    lines = [(f"Pre-registered analysis (docs/plans/2026-11-28-algorithm-comparison.md), panel {result['panel']}: "
             "paired differences in points over seeds x games, each interval at its family's Bonferroni level, "
             "equivalence by TOST within ±3 points."), "",
             "| family | comparison | paper | turngym (corrected CI) | TOST CI | t over seeds; per seed | verdict |",
             "|---|---|---|---|---|---|---|"]
    for key, family in result["families"].items():
        seeds = family["seeds"]
        if not family["verdicts"]:
            lines.append(f"| {key} ({100 * family['level']:.2f} %) | {family['hypothesis']} | | not run | | | |")
            continue
        for v in family["verdicts"]:
            per_seed = " / ".join(f"{100 * m:+.1f}" for m in v.per_seed.values())
            seed_t = f"{_points(*v.seed_t)}; " if v.seed_t else ""
            lines.append(f"| {key} ({100 * v.level:.2f} %, {len(seeds)} seeds) | {v.name} | {v.paper} | "
                         f"{100 * v.mean:+.1f} ({_points(*v.interval)}) | {_points(*v.tost)} | "
                         f"{seed_t}{per_seed} | {v.verdict} |")
    h1 = result["h1"]
    lines += ["", (f"**H1 (the ordering): {h1['verdict']}**; "
              f"{'resolved' if h1['resolved'] else 'not resolved'} in the issue's sense (a corrected F1 interval "
              "excluding 0, or all three pairs equivalent within ±3)."), ""]
    partial = [k for k, f in result["families"].items() if f["verdicts"] and len(f["seeds"]) < 5]
    if partial:
        lines += [(f"Partial: {', '.join(partial)} rest on fewer than the plan's 5 seeds (the seeds where every arm "
                  "of the family finished)."), ""]
    return "\n".join(lines)


def verdicts_plot(result: Mapping[str, Any], path: str | Path, title: str = "") -> Path:
    """A forest plot of :func:`analyse`'s comparisons, one row each, grouped by family: the mean paired difference
    (points), its corrected interval (thick) and TOST interval (thin), each seed's difference (dots), the +-3
    equivalence band and the verdict. Families that did not run are left out. Written to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(key, v) for key, family in result["families"].items() for v in family["verdicts"]]
    if not rows:
        raise ValueError("no comparison has outcomes on every seed of its family: nothing to plot")
    figure, axis = plt.subplots(figsize=(9.5, 0.55 * len(rows) + 1.4))
    bound = 100 * EQUIVALENCE_BOUND
    axis.axvspan(-bound, bound, color="0.9", zorder=0, label=f"equivalence bound (±{bound:.0f} points)")
    axis.axvline(0, color="0.4", linewidth=0.8, zorder=1)
    colours = {"F1": "tab:blue", "F2": "tab:green", "F3": "tab:red", "F4": "tab:purple", "F5": "tab:orange"}
    for y, (key, v) in enumerate(reversed(rows)):
        colour = colours.get(key, "tab:gray")
        axis.plot([100 * x for x in v.tost], [y, y], color=colour, linewidth=1, zorder=2)
        axis.plot([100 * x for x in v.interval], [y, y], color=colour, linewidth=4, alpha=0.6, zorder=3)
        axis.plot([100 * v.mean], [y], "o", color=colour, markersize=7, zorder=4)
        axis.plot([100 * m for m in v.per_seed.values()], [y] * len(v.per_seed), "|", color="black",
                  markersize=9, zorder=5)
        axis.annotate(v.verdict, (1.01, y), xycoords=("axes fraction", "data"), va="center", fontsize=8)
    labels = [f"{key}: {v.name} ({v.seeds} seeds)" for key, v in reversed(rows)]
    axis.set_yticks(range(len(rows)), labels, fontsize=8)
    axis.set_xlabel("paired difference, points (thick: the family's corrected CI; thin: TOST CI; |: each seed)")
    axis.set_title(title or f"Pre-registered comparisons, panel {result['panel']}", fontsize=10)
    axis.legend(loc="upper right", fontsize=7, frameon=False)
    figure.tight_layout()
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return Path(path)


# ---------------------------------------------------------------------- pilot T: the tuning rule
# Each algorithm's two pilot configurations (A, B) in textworld-algorithms-tune-<world>.yaml, and the main arm they
# tune. The plan: per algorithm, the configuration with the higher success on the pilot's 200 eval games; a tie
# goes to A. Nothing else is tuned.
TUNING_PAIRS: dict[str, tuple[str, str]] = {
    PPO: ("ppo-lr1e-5", "ppo-lr5e-6"),
    RLOO: ("turn_rloo-lr1e-5", "turn_rloo-lr5e-6"),
    GRPO: ("grpo-lr1e-5", "grpo-lr5e-6"),
    RFT: ("rft-lr1e-5", "rft-lr3e-5"),
    GIGPO: ("gigpo-lr1e-5", "gigpo-lr5e-6"),
}


def tuning_picks(record: Mapping[str, Any], panel: str = "held_out",
                 recorded: Mapping[str, float] | None = None) -> dict[str, dict[str, Any]]:
    """Per algorithm whose two configurations both finished: each one's success (the mean over its games and
    seeds) and the pick, ``A`` unless ``B`` is strictly higher. An algorithm with a configuration missing is left
    out. ``recorded`` (label -> success): the recorded success of a configuration whose per-game outcomes are not
    in ``record`` (pilot T's lost rows, Amendment 6); such a configuration is named in ``"recorded"``. A label in
    both is refused: the outcomes decide, and two sources for one cell would hide which did."""
    arms, recorded = record["arms"], dict(recorded or {})
    both = sorted(set(recorded) & set(arms))
    if both:
        raise ValueError(f"{', '.join(both)}: both recorded and in the outcomes file; give each configuration once")

    def success(label: str) -> float | None:
        if label in recorded:
            return float(recorded[label])
        if label not in arms:
            return None
        cells = [v for panels in arms[label]["outcomes"].values() for v in (panels.get(panel) or {}).values()]
        return sum(cells) / len(cells) if cells else None

    picks = {}
    for algorithm, (a, b) in TUNING_PAIRS.items():
        rates = success(a), success(b)
        if None in rates:
            continue
        picks[algorithm] = {"A": a, "B": b, "success": {a: rates[0], b: rates[1]},
                            "pick": b if rates[1] > rates[0] else a,
                            "recorded": [label for label in (a, b) if label in recorded]}
    return picks


def read_recorded(path: Path) -> dict[str, float]:
    """A recorded-successes file (``{"successes": {label: rate in [0, 1]}, "source": ...}``); one-line errors."""
    try:
        content = json.loads(path.read_text())
        successes = content["successes"]
        if not isinstance(successes, dict) or not all(
                isinstance(k, str) and isinstance(v, int | float) and 0 <= v <= 1 for k, v in successes.items()):
            raise TypeError("successes must map labels to rates in [0, 1]")
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not a recorded-successes file ({error})") from None
    return {label: float(rate) for label, rate in successes.items()}


def picks_markdown(picks: Mapping[str, Mapping[str, Any]]) -> str:
    """Pilot T's table: each algorithm's two configurations and the one the plan's rule picks; a recorded success
    (no per-game outcomes) is marked."""
    rule = ("Pilot T's rule (docs/plans/2026-11-28-algorithm-comparison.md): per algorithm, the configuration with "
            "the higher success on the pilot's games; a tie goes to A.")
    lines = [rule, "", "| algorithm | A | B | pick |", "|---|---|---|---|"]

    def cell(p: Mapping[str, Any], label: str) -> str:
        mark = " (recorded)" if label in p.get("recorded", ()) else ""
        return f"{label}: {100 * p['success'][label]:.1f} %{mark}"

    for algorithm, p in picks.items():
        lines.append(f"| {algorithm} | {cell(p, p['A'])} | {cell(p, p['B'])} | **{p['pick']}** |")
    if not picks:
        lines.append("| (no algorithm has both configurations finished) | | | |")
    if any(p.get("recorded") for p in picks.values()):
        lines += ["", ("(recorded): a success taken from the record, whose per-game outcomes were lost (the plan's "
                       "Amendment 6); every other cell is recomputed from the outcomes file.")]
    return "\n".join(lines) + "\n"
