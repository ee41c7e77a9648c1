"""Intervals over seeds x tasks, against numbers computed by hand (agents/intervals.py)."""

import math

import pytest

from turngym.agents.intervals import (
    CROSSED,
    NO_SPREAD,
    SEEDS_T,
    TASKS_ONLY,
    crossed_interval,
    mcnemar_exact_p,
    no_spread_interval,
    paired_comparison,
    seed_t_interval,
    success_interval,
)

T975 = {1: 12.706204736174703, 2: 4.302652729911275, 3: 3.182446305284263}  # Student t, 97.5 % quantile


def pooled_normal_half_width(grid):
    """What the old interval did: every (seed, task) cell an independent pair, normal quantile."""
    cells = [v for row in grid for v in row]
    n, mean = len(cells), sum(cells) / len(cells)
    return 1.959963984540054 * math.sqrt(sum((v - mean) ** 2 for v in cells) / (n * (n - 1)))


def test_all_three_variance_components_by_hand():
    # S = 3 seeds, T = 4 tasks; grand mean 1/2. Row means 3/4, 1/2, 1/4; column means 1, 2/3, 1/3, 0.
    #   MS_seed = 4/2 * (1/16 + 0 + 1/16)                       = 1/4
    #   MS_task = 3/3 * (1/4 + 1/36 + 1/36 + 1/4)               = 5/9
    #   MS_e    = (sum of squared residuals = 5/6) / (2 * 3)    = 5/36
    #   V  = (1/4 + 5/9 - 5/36) / 12 = 1/18,  se = sqrt(1/18)
    #   nu = (2/3)^2 / ((1/4)^2/2 + (5/9)^2/3 + (5/36)^2/6)      = 288/89
    grid = [[1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0]]
    interval = crossed_interval(grid)
    assert interval.method == CROSSED
    assert interval.mean == pytest.approx(0.5)
    assert interval.se == pytest.approx(math.sqrt(1 / 18))
    assert interval.df == pytest.approx(288 / 89)
    from scipy import stats

    half = stats.t.ppf(0.975, 288 / 89) * math.sqrt(1 / 18)
    assert (interval.low, interval.high) == pytest.approx((0.5 - half, 0.5 + half))


def test_a_component_below_the_residual_counts_as_zero():
    # S = 3, T = 3, grand 5/9: MS_seed = 4/9, MS_task = 1/9 < MS_e = 5/18, so V = MS_seed / 9, nu = S - 1
    interval = crossed_interval([[1, 1, 1], [1, 0, 0], [0, 0, 1]])
    assert interval.se == pytest.approx(2 / 9)
    assert interval.df == pytest.approx(2)
    assert interval.high - interval.mean == pytest.approx(T975[2] * 2 / 9)


def test_the_interval_widens_when_seeds_disagree():
    # The same eight cells (four wins, four ties), arranged two ways. The old pooled interval cannot tell
    # them apart; the clustered one must be far wider when one run gains everything and the other nothing.
    agree = [[1, 1, 0, 0], [1, 1, 0, 0]]
    disagree = [[1, 1, 1, 1], [0, 0, 0, 0]]
    assert pooled_normal_half_width(agree) == pooled_normal_half_width(disagree)
    a, d = crossed_interval(agree), crossed_interval(disagree)
    # agree: MS_seed = MS_e = 0, MS_task = 2/3: V = 1/12, nu = 3
    assert a.high - a.mean == pytest.approx(T975[3] * math.sqrt(1 / 12))
    # disagree: MS_task = MS_e = 0, MS_seed = 2: V = 1/4, nu = 1 (it is the t over two seed means)
    assert d.high - d.mean == pytest.approx(T975[1] * 0.5)
    assert d.high - d.low > 5 * (a.high - a.low) > 5 * 2 * pooled_normal_half_width(agree)
    assert d.low < a.low


def test_one_seed_is_the_paired_t_over_tasks_and_says_so():
    interval = crossed_interval([[1, 1, 0, 1]])  # mean 3/4, sample variance 1/4, se = sqrt(1/16)
    assert interval.method == TASKS_ONLY and "run-to-run variance not measured" in interval.method
    assert interval.df == 3
    assert (interval.low, interval.high) == pytest.approx((0.75 - T975[3] / 4, 0.75 + T975[3] / 4))


def test_no_spread_gives_the_point_and_ragged_grids_are_refused():
    point = crossed_interval([[1, 1], [1, 1]])
    assert (point.low, point.mean, point.high, point.df) == (1.0, 1.0, 1.0, None)
    with pytest.raises(ValueError, match="same tasks"):
        crossed_interval([[1, 0], [1]])
    with pytest.raises(ValueError, match="at least one seed"):
        crossed_interval([])


def test_seed_t_interval_by_hand():
    # seed means -3, +7, +4 points: mean 8/300, sd^2 = 79/3 points^2, se = sqrt(79/9) points
    interval = seed_t_interval([-0.03, 0.07, 0.04])
    assert interval.method == SEEDS_T and interval.df == 2
    se = math.sqrt(79 / 9) / 100
    assert (interval.low, interval.high) == pytest.approx((0.08 / 3 - T975[2] * se, 0.08 / 3 + T975[2] * se))
    assert seed_t_interval([0.5]) is None


def test_mcnemar_exact_by_hand():
    assert mcnemar_exact_p(7, 0) == pytest.approx(2 / 2 ** 7)
    assert mcnemar_exact_p(0, 3) == pytest.approx(2 / 2 ** 3)
    assert mcnemar_exact_p(3, 1) == pytest.approx(2 * (1 + 4) / 16)
    assert mcnemar_exact_p(0, 0) == 1.0


def test_paired_comparison_reports_every_view_of_the_difference():
    # the quick demo's shape: seed 0 loses 3 games, seeds 1 and 2 gain 7 and 4, on 100 shared games
    sft = {s: {f"g{t}": 0.0 for t in range(100)} for s in range(3)}
    rl = {s: dict(games) for s, games in sft.items()}
    for t in range(3):
        sft[0][f"g{t}"] = 1.0
    for t in range(10, 17):
        rl[1][f"g{t}"] = 1.0
    for t in range(20, 24):
        rl[2][f"g{t}"] = 1.0
    result = paired_comparison(rl, sft)
    assert result["mean"] == pytest.approx(8 / 300)
    assert (result["pairs"], result["seeds"], result["tasks"]) == (300, 3, 100)
    assert result["per_seed"] == pytest.approx({0: -0.03, 1: 0.07, 2: 0.04})
    assert (result["gained"], result["lost"]) == (11, 3)
    assert result["mcnemar_p"] == pytest.approx({0: 0.25, 1: 2 / 2 ** 7, 2: 2 / 2 ** 4})
    low, high = result["ci95"]
    assert low < -0.09 and high > 0.14  # the run-to-run variance is in it (pooled: +0.2 to +5.1 points)
    assert result["seed_t_ci95"] == pytest.approx([seed_t_interval([-0.03, 0.07, 0.04]).low,
                                                   seed_t_interval([-0.03, 0.07, 0.04]).high])


def test_paired_comparison_uses_only_tasks_every_seed_played():
    a = {0: {"x": 1.0, "y": 1.0, "z": 0.0}, 1: {"x": 1.0, "y": 0.0}}
    b = {0: {"x": 0.0, "y": 1.0, "z": 1.0}, 1: {"x": 0.0, "y": 0.0, "z": 1.0}}
    result = paired_comparison(a, b)
    assert result["tasks"] == 2 and result["per_seed"] == {0: 0.5, 1: 0.5}


def test_success_interval_says_what_it_assumes():
    one = success_interval({0: {"a": 1.0, "b": 0.0, "c": 1.0}})
    assert one["method"].startswith("Wilson") and "independent" in one["method"]
    many = success_interval({0: {"a": 1.0, "b": 1.0}, 1: {"a": 0.0, "b": 0.0}})
    assert many["method"] == CROSSED
    assert many["ci95"] == [0.0, 1.0]  # two runs that disagree completely: clipped to [0, 1]


WILSON_0_OF_20 = 0.19208 / 1.19208  # (z^2/n) / (1 + z^2/n) at z = 1.96, n = 20: Wilson's upper end for 0 of 20


def test_a_grid_without_spread_is_bounded_by_its_tasks_not_given_as_the_point():
    """5 seeds x 20 tasks, every one lost by both policies (the SWE-synth study's base and SFT-only): the crossed
    model and the t over seeds have nothing to estimate; the bound is Wilson's over the 20 tasks."""
    lost = {seed: {f"t{t}": 0.0 for t in range(20)} for seed in range(5)}
    won = {seed: {f"t{t}": 1.0 for t in range(20)} for seed in range(5)}
    assert no_spread_interval(0.0, 20) == pytest.approx((-WILSON_0_OF_20, WILSON_0_OF_20))
    assert no_spread_interval(1.0, 20) == pytest.approx((1 - WILSON_0_OF_20, 1.0))
    assert no_spread_interval(-1.0, 20) == pytest.approx((-1.0, -(1 - WILSON_0_OF_20)))
    assert no_spread_interval(0.5, 20) is None
    # a family's level (98.75 %: z = 2.4977) and a four-arm interaction (cells up to +-2) that is 0 everywhere
    z = 2.497705474412669
    wide = (z * z / 20) / (1 + z * z / 20)
    assert no_spread_interval(0.0, 20, 0.9875, span=2.0) == pytest.approx((-2 * wide, 2 * wide))
    assert no_spread_interval(1.0, 20, span=2.0) is None
    success = success_interval(lost)
    assert success["method"] == NO_SPREAD and success["ci95"] == pytest.approx([0.0, WILSON_0_OF_20])
    assert success_interval(won)["ci95"] == pytest.approx([1 - WILSON_0_OF_20, 1.0])
    tied = paired_comparison(lost, lost)
    assert tied["method"] == NO_SPREAD and tied["mean"] == 0.0
    assert tied["ci95"] == pytest.approx([-WILSON_0_OF_20, WILSON_0_OF_20])
    swept = paired_comparison(won, lost)  # a won every task on every seed, b none
    assert swept["ci95"] == pytest.approx([1 - WILSON_0_OF_20, 1.0]) and swept["mean"] == 1.0
    # one cell apart: the grid has spread again and the crossed model answers
    lost[0]["t0"] = 1.0
    assert paired_comparison(lost, {s: dict(r) for s, r in won.items()})["method"] == CROSSED
    assert success_interval(lost)["method"] == CROSSED


def test_the_published_seed_level_intervals_are_the_committed_rates():
    """docs/results.md and README print intervals recomputed from docs/outcomes/issue14-per-seed.json."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    data = json.loads((root / "docs" / "outcomes" / "issue14-per-seed.json").read_text())
    results, readme = (root / "docs" / "results.md").read_text(), (root / "README.md").read_text()
    checked = 0
    for arms in data["studies"].values():
        for label, rates in arms.items():
            if label == "sft-only":
                continue
            interval = seed_t_interval([(a - b) / 100 for a, b in zip(rates, arms["sft-only"], strict=True)])
            cell = f"{100 * interval.mean:+.1f} ({100 * interval.low:+.1f} to {100 * interval.high:+.1f})"
            assert cell in results, (label, cell)
            checked += 1
    assert checked == 9 and "+5.7 (-5.5 to +16.9)" in readme and "+2.7 (-10.1 to +15.4)" in readme


def test_the_published_headline_is_recomputed_from_its_committed_outcomes():
    """README and docs/results.md print the pre-registered headline's intervals; the committed per-game outcomes
    (docs/outcomes/textworld-headline.json) give them back, arm by arm and against the null."""
    import json
    from pathlib import Path

    from turngym.recipes.study import difference_cell, recompute, seeds_cell

    root = Path(__file__).resolve().parents[1]
    record = json.loads((root / "docs" / "outcomes" / "textworld-headline.json").read_text())
    results, readme = (root / "docs" / "results.md").read_text(), (root / "README.md").read_text()
    against_sft = recompute(record)["arms"]
    rloo = against_sft["turn_rloo"]["vs_reference"]
    assert difference_cell(rloo) == "+4.7 (+0.5 to +8.9) **+**"
    assert "**+4.7 (+0.5 to +8.9) +**" in results and "+4.7 points" in readme and "+0.5 to +8.9" in readme
    assert seeds_cell(rloo) == "+0.4 to +9.0; per seed +10.0 / +4.5 / +3.5 / +5.0 / +0.5"
    assert "+10.0 / +4.5 / +3.5 / +5.0 / +0.5" in results and "+10/+4.5/+3.5/+5/+0.5" in readme
    assert seeds_cell(against_sft["base"]["vs_reference"]).split("; per seed ")[1] in results
    assert difference_cell(against_sft["turn_rloo-null"]["vs_reference"]) in results
    against_null = recompute(record, reference="turn_rloo-null")["arms"]["turn_rloo"]["vs_reference"]
    assert difference_cell(against_null) == "+4.1 (+0.2 to +8.0) **+**"
    assert "per seed " + seeds_cell(against_null).split("per seed ")[1] in results
    assert "+4.1 (+0.2 to +8.0)" in results and "+4.1 (+0.2 to +8.0)" in readme
    assert len(rloo["per_seed"]) == 5 and sum(map(len, record["arms"]["sft-only"]["outcomes"].values())) == 5


def test_the_confirmatory_verdict_is_recomputed_from_its_committed_outcomes():
    """docs/results.md and README report the RL-gain confirmatory study (docs/plans/2026-11-26-rl-gain-confirmatory.md):
    its committed per-game outcomes give back every published interval, and the plan's rule gives back its verdict."""
    import json
    from pathlib import Path

    from turngym.recipes.study import difference_cell, recompute, seeds_cell

    root = Path(__file__).resolve().parents[1]
    record = json.loads((root / "docs" / "outcomes" / "rl-gain-confirmatory.json").read_text())
    results, readme = (root / "docs" / "results.md").read_text(), (root / "README.md").read_text()
    against_sft = recompute(record)["arms"]
    rloo = against_sft["turn_rloo"]["vs_reference"]
    assert list(rloo["per_seed"]) == ["105", "106", "107", "108", "109"] and rloo["pairs"] == 1000
    base = record["arms"]["base"]["outcomes"].values()
    assert len({json.dumps(games, sort_keys=True) for games in base}) == 1  # one evaluation, paired with every seed
    for label in ("base", "turn_rloo", "turn_rloo-null"):
        row = against_sft[label]["vs_reference"]
        t_interval, per_seed = seeds_cell(row).split("; per seed ")
        cell = difference_cell(row)
        bold = "**" + cell.replace(" **+**", " +**")  # the result the table is about, in bold
        assert any(f"{c} | {t_interval} | {per_seed} |" in results for c in (cell, bold)), label
    against_null = recompute(record, reference="turn_rloo-null")["arms"]["turn_rloo"]["vs_reference"]
    t_interval, per_seed = seeds_cell(against_null).split("; per seed ")
    assert f"{difference_cell(against_null)} (t over seeds {t_interval}; per seed {per_seed})" in results
    # The plan's rule: met only if the mean gain is at least +8 points and the t interval over seeds is above 0.
    mean, low = 100 * rloo["mean"], 100 * rloo["seed_t_ci95"][0]
    verdict = ("met" if mean >= 8 and low > 0 else "missed: RL's gain is confirmed, but smaller than +8" if low > 0
               else "missed: no gain confirmed at the seed level")
    assert f"**Verdict ({verdict}).**" in results
    assert verdict == "met" and difference_cell(rloo) == "+10.6 (+5.4 to +15.8) **+**"
    assert "**+10.6 points**" in readme and "+5.4 to +15.8" in readme and "+5.5 to +15.7" in readme
