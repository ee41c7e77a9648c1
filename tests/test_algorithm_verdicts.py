"""The algorithm comparison's pre-registered analysis (recipes/algorithm_verdicts.py, issue 43): the families'
Bonferroni levels, the crossed interval at those levels against hand-computed numbers, each verdict rule, H1 as a
whole, the partial-results rule, and `turngym stats --plan algorithm-comparison`."""

from __future__ import annotations

import json
import math

import pytest

from turngym.recipes.algorithm_verdicts import (
    FAMILIES,
    GREATER,
    NO_DIFFERENCE,
    Comparison,
    Family,
    Verdict,
    analyse,
    contrast_grid,
    judge,
    ordering_verdict,
    verdicts_markdown,
    verdicts_plot,
)
from turngym.recipes.cli import main

ARMS = ("sft-only", "ppo", "turn_rloo", "grpo", "rft", "ppo-sparse", "turn_rloo-sparse", "gigpo")


def record_of(grids: dict[str, dict[str, list[float]]]) -> dict:
    """An outcome record: ``{arm: {seed: [outcome of game g0, g1, ...]}}``."""
    return {"name": "tiny", "panels": {"held_out": "abc"}, "arms": {
        label: {"demos": 4, "episodes": 0 if label == "sft-only" else 8, "null": False,
                "outcomes": {seed: {"held_out": {f"g{i}": v for i, v in enumerate(row)}}
                             for seed, row in seeds.items()}}
        for label, seeds in grids.items()}}


def t_two_df(p: float) -> float:
    """Student's t quantile with 2 degrees of freedom, in closed form: F^-1(p) = (2p - 1) / sqrt(2 p (1 - p))."""
    return (2 * p - 1) / math.sqrt(2 * p * (1 - p))


def test_the_families_and_levels_are_the_plans():
    assert [(f.key, f.k) for f in FAMILIES] == [("F1", 3), ("F2", 4), ("F3", 3), ("F4", 3), ("F5", 2)]
    assert [round(100 * f.level, 2) for f in FAMILIES] == [98.33, 98.75, 98.33, 98.33, 97.5]
    assert round(100 * FAMILIES[0].tost_level, 2) == 96.67
    interaction = FAMILIES[3].comparisons[2]
    assert interaction.terms == ((1.0, "ppo"), (-1.0, "ppo-sparse"), (-1.0, "turn_rloo"), (1.0, "turn_rloo-sparse"))


def test_a_contrast_is_its_coefficients_over_the_shared_games():
    record = record_of({"ppo": {"1": [1, 1, 0]}, "ppo-sparse": {"1": [0, 1, 0]},
                        "turn_rloo": {"1": [1, 0, 1]}, "turn_rloo-sparse": {"1": [1, 1, 1]}})
    del record["arms"]["turn_rloo"]["outcomes"]["1"]["held_out"]["g2"]  # g2 is not shared: left out
    games, grid = contrast_grid(record, FAMILIES[3].comparisons[2], ["1"], "held_out")
    # (1 - 0) - (1 - 1) = 1 on g0; (1 - 1) - (0 - 1) = 1 on g1
    assert games == ["g0", "g1"] and grid == [[1.0, 1.0]]


def test_the_corrected_interval_is_the_crossed_model_at_the_familys_level_by_hand():
    """PPO - RLOO over 2 seeds x 3 games: seed A [1, 0, 0], seed B [1, 1, 0]. Grand mean 1/2; seed means 1/3, 2/3;
    game means 1, 1/2, 0. MS_seed = 3 (1/36 + 1/36) = 1/6; MS_task = 2/2 (1/4 + 0 + 1/4) = 1/2; residuals
    +-1/6, -+1/3, +-1/6, so MS_e = (1/3) / 2 = 1/6. MS_seed is not above MS_e (no seed component): V = MS_task /
    (S T) = 1/12, with Satterthwaite df = 2. F1's level is 1 - 0.05/3, so the half-width is t_2(1 - 0.05/6) sqrt(1/12)
    = 7.649 x 0.2887 = 2.208; the TOST level 1 - 0.1/3 gives t_2(1 - 0.1/6) sqrt(1/12) = 5.339 x 0.2887 = 1.541."""
    record = record_of({"ppo": {"A": [1, 1, 0], "B": [1, 1, 0]}, "turn_rloo": {"A": [0, 1, 0], "B": [0, 0, 0]},
                        "grpo": {"A": [0, 0, 0], "B": [0, 0, 0]}})
    (pr, *_), = [analyse(record)["families"]["F1"]["verdicts"]]
    assert pr.name == "PPO - RLOO" and pr.mean == pytest.approx(0.5)
    half = t_two_df(1 - 0.05 / 6) * math.sqrt(1 / 12)
    assert half == pytest.approx(2.2080, abs=1e-3)
    assert pr.interval == pytest.approx((0.5 - half, 0.5 + half))
    tost_half = t_two_df(1 - 0.1 / 6) * math.sqrt(1 / 12)
    assert pr.tost == pytest.approx((0.5 - tost_half, 0.5 + tost_half))
    assert pr.per_seed == pytest.approx({"A": 1 / 3, "B": 2 / 3}) and (pr.seeds, pr.tasks) == (2, 3)
    assert pr.verdict == "unresolved (not reproduced)"


def test_a_contrast_tied_on_every_game_and_seed_is_not_called_equivalent_from_a_point():
    """RLOO - GRPO with both arms losing all 3 games on both seeds: every cell is 0, so the crossed model gives the
    point 0, and a point inside +-3 would read as 'equivalent'. The interval is Wilson's over the 3 games instead:
    at F1's TOST level (z = 2.128) (z^2/3) / (1 + z^2/3) = 0.6016."""
    record = record_of({"ppo": {"A": [1, 1, 0], "B": [1, 0, 0]}, "turn_rloo": {"A": [0, 0, 0], "B": [0, 0, 0]},
                        "grpo": {"A": [0, 0, 0], "B": [0, 0, 0]}})
    tied = next(v for v in analyse(record)["families"]["F1"]["verdicts"] if v.name == "RLOO - GRPO")
    z = 2.128045234184984  # the normal quantile at 1 - (1 - 0.9667) / 2
    bound = (z * z / 3) / (1 + z * z / 3)
    assert tied.mean == 0.0 and tied.tost == pytest.approx((-bound, bound), abs=1e-6)
    assert tied.verdict == "unresolved (not reproduced)"


@pytest.mark.parametrize(("claim", "interval", "tost", "verdict"), [
    (GREATER, (0.01, 0.09), (0.02, 0.08), "reproduced"),
    (GREATER, (-0.09, -0.01), (-0.08, -0.02), "reversed"),
    (GREATER, (-0.035, 0.032), (-0.029, 0.028), "equivalent (not reproduced, resolved)"),
    (GREATER, (-0.05, 0.06), (-0.04, 0.05), "unresolved (not reproduced)"),
    (GREATER, (-0.035, 0.032), (-0.030, 0.028), "unresolved (not reproduced)"),  # the bound is open: -3 is out
    (NO_DIFFERENCE, (-0.035, 0.032), (-0.029, 0.028), "reproduced (equivalent within ±3)"),
    (NO_DIFFERENCE, (0.01, 0.09), (0.02, 0.08), "not reproduced (higher)"),
    (NO_DIFFERENCE, (-0.09, -0.01), (-0.08, -0.02), "not reproduced (lower)"),
    (NO_DIFFERENCE, (-0.05, 0.06), (-0.04, 0.05), "unresolved (not reproduced)"),
    (None, (0.01, 0.09), (0.02, 0.08), "above 0"),
    (None, (-0.05, 0.06), (-0.04, 0.05), "spans 0"),
])
def test_each_verdict_rule(claim, interval, tost, verdict):
    family = Family("F", "h", (Comparison("a - b", ((1.0, "a"), (-1.0, "b")), claim, ""),))
    assert judge(family, family.comparisons[0], interval, tost) == verdict


@pytest.mark.parametrize(("interval", "label"), [((0.001, 0.1), "beats RFT"), ((-0.1, 0.1), "no better than RFT shown"),
                                                 ((-0.1, -0.001), "below RFT")])
def test_h4_labels_each_rl_algorithm_against_rft(interval, label):
    f3 = FAMILIES[2]
    assert judge(f3, f3.comparisons[0], interval, interval) == label


def verdicts(*rows: tuple[str, tuple[float, float], tuple[float, float]]) -> list[Verdict]:
    names = ("PPO - RLOO", "RLOO - GRPO", "PPO - GRPO")
    f1 = FAMILIES[0]
    return [Verdict("F1", name, "", sum(i) / 2, i, t, f1.level, 5, 200, {}, judge(f1, c, i, t))
            for name, c, (_, i, t) in zip(names, f1.comparisons, rows, strict=True)]


UP, DOWN, SPAN, EQUAL = ((0.01, 0.1), (0.02, 0.09)), ((-0.1, -0.01), (-0.09, -0.02)), \
    ((-0.05, 0.06), (-0.04, 0.05)), ((-0.035, 0.032), (-0.029, 0.028))


@pytest.mark.parametrize(("rows", "verdict", "resolved"), [
    ((UP, UP, UP), "reproduced", True),
    ((UP, SPAN, UP), "partly reproduced", True),
    ((SPAN, SPAN, UP), "partly reproduced", True),  # PPO - GRPO alone
    ((UP, DOWN, SPAN), "reversed (RLOO - GRPO)", True),
    ((EQUAL, EQUAL, EQUAL), "resolved as equivalent", True),
    ((EQUAL, SPAN, EQUAL), "unresolved", False),
    ((SPAN, SPAN, SPAN), "unresolved", False),
])
def test_h1_as_a_whole(rows, verdict, resolved):
    assert ordering_verdict(verdicts(*(("", *r) for r in rows))) == {"verdict": verdict, "resolved": resolved}


def test_a_family_uses_the_seeds_where_all_its_arms_finished_and_an_unrun_one_says_so():
    seeds = {"120": [1, 0, 1, 1], "121": [1, 1, 0, 1]}
    grids = {label: dict(seeds) for label in ("sft-only", "ppo", "turn_rloo", "grpo")}
    grids["ppo"] = {"120": [1, 1, 1, 1], "121": [1, 1, 1, 1], "122": [1, 1, 1, 1]}  # 122: only PPO has it
    grids["grpo"] = {"120": [0, 0, 0, 0]}  # GRPO finished one seed
    result = analyse(record_of(grids))
    f1, f2 = result["families"]["F1"], result["families"]["F2"]
    assert f1["seeds"] == ["120"] and all(v.seeds == 1 for v in f1["verdicts"])
    assert f2["seeds"] == [] and f2["verdicts"] == []  # no RFT arm: F2 did not run
    assert result["families"]["F4"]["verdicts"] == [] and result["families"]["F5"]["verdicts"] == []
    text = verdicts_markdown(result)
    assert "| F2 (98.75 %) | H2: GRPO does not improve" in text and "not run" in text
    assert "Partial: F1 rest on fewer than the plan's 5 seeds" in text


def test_stats_prints_the_plans_analysis(tmp_path, capsys):
    """Five seeds where PPO wins every game, RLOO half of them and GRPO none: the ordering is reproduced."""
    seeds = [str(s) for s in range(120, 125)]
    half = [1, 0] * 10
    grids = {"sft-only": {s: [0] * 20 for s in seeds}, "ppo": {s: [1] * 20 for s in seeds},
             "turn_rloo": {s: half for s in seeds}, "grpo": {s: [0] * 20 for s in seeds},
             "rft": {s: half[::-1] for s in seeds}}
    path = tmp_path / "outcomes.json"
    path.write_text(json.dumps(record_of(grids)))
    assert main(["stats", str(path), "--plan", "algorithm-comparison"]) == 0
    out = capsys.readouterr().out
    assert "| policy |" in out  # the usual table first
    assert "**H1 (the ordering): reproduced**; resolved" in out
    assert "| F1 (98.33 %, 5 seeds) | PPO - RLOO | +37 (88 vs 51); +25 (72 vs 47) | +50.0 (" in out
    # GRPO and SFT-only both lose every game: the difference is 0 on every cell, which says nothing of other games;
    # F2's level (z = 2.4977) gives Wilson's (z^2/20) / (1 + z^2/20) = 23.8 points either way, not equivalence
    assert "| GRPO - SFT-only | GRPO ~ base (~17) | +0.0 (-23.8 to +23.8) |" in out
    assert "reproduced (equivalent within ±3)" not in out
    assert "| F3 (98.33 %, 5 seeds) | PPO - RFT | not in the paper | +50.0 (" in out and "beats RFT" in out
    assert "| F4 (98.33 %) | H3: dense rewards help PPO more than turn-level RLOO | | not run |" in out
    assert "Partial:" not in out


def test_stats_draws_the_plans_comparisons_as_a_forest_plot(tmp_path, capsys):
    """--plot writes a PNG with one row per comparison that ran; without --plan algorithm-comparison it is refused."""
    seeds = ["120", "121", "122"]
    grids = {"sft-only": {s: [0, 1] * 10 for s in seeds}, "ppo": {s: [1] * 20 for s in seeds},
             "turn_rloo": {s: [1, 0] * 10 for s in seeds}, "grpo": {s: [0] * 20 for s in seeds}}
    path = tmp_path / "outcomes.json"
    path.write_text(json.dumps(record_of(grids)))
    png = tmp_path / "forest.png"
    assert main(["stats", str(path), "--plan", "algorithm-comparison", "--plot", str(png)]) == 0
    assert f"plot: {png}" in capsys.readouterr().out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert main(["stats", str(path), "--plot", str(tmp_path / "other.png")]) == 2
    assert "use it with --plan algorithm-comparison" in capsys.readouterr().err
    assert not (tmp_path / "other.png").exists()
    with pytest.raises(ValueError, match="nothing to plot"):
        verdicts_plot({"panel": "held_out", "families": {"F1": {"verdicts": []}}}, tmp_path / "none.png")


def test_the_plan_needs_per_game_outcomes(tmp_path, capsys):
    rates = {"seeds": [0, 1], "studies": {"s": {"sft-only": [50, 60], "rl": [55, 70]}}}
    path = tmp_path / "rates.json"
    path.write_text(json.dumps(rates))
    assert main(["stats", str(path), "--plan", "algorithm-comparison"]) == 2
    assert "per-game outcomes" in capsys.readouterr().err


def test_pilot_ts_rule_picks_the_higher_success_and_a_on_a_tie(tmp_path, capsys):
    """PPO: A wins 2 of 4 games, B 3: B. RLOO: 3 and 3: a tie, A. GRPO: only A finished: no pick yet."""
    from turngym.recipes.algorithm_verdicts import tuning_picks

    record = record_of({"sft-only": {"0": [1, 0, 0, 0]},
                        "ppo-lr1e-5": {"0": [1, 1, 0, 0]}, "ppo-lr5e-6": {"0": [1, 1, 1, 0]},
                        "turn_rloo-lr1e-5": {"0": [1, 1, 1, 0]}, "turn_rloo-lr5e-6": {"0": [0, 1, 1, 1]},
                        "grpo-lr1e-5": {"0": [1, 1, 1, 1]}})
    picks = tuning_picks(record)
    assert {algorithm: p["pick"] for algorithm, p in picks.items()} == {"ppo": "ppo-lr5e-6",
                                                                        "turn_rloo": "turn_rloo-lr1e-5"}
    assert picks["ppo"]["success"] == {"ppo-lr1e-5": 0.5, "ppo-lr5e-6": 0.75}
    path = tmp_path / "outcomes.json"
    path.write_text(json.dumps(record))
    assert main(["stats", str(path), "--plan", "algorithm-tuning"]) == 0
    out = capsys.readouterr().out
    assert "| ppo | ppo-lr1e-5: 50.0 % | ppo-lr5e-6: 75.0 % | **ppo-lr5e-6** |" in out
    assert "| turn_rloo | turn_rloo-lr1e-5: 75.0 % | turn_rloo-lr5e-6: 75.0 % | **turn_rloo-lr1e-5** |" in out
    assert "| grpo |" not in out

    # Recorded successes (pilot T's lost rows): GRPO B recorded at 0.5 against A's 1.0 outcomes: A, marked.
    recorded = tmp_path / "recorded.json"
    recorded.write_text(json.dumps({"successes": {"grpo-lr5e-6": 0.5}}))
    assert main(["stats", str(path), "--plan", "algorithm-tuning", "--recorded", str(recorded)]) == 0
    out = capsys.readouterr().out
    assert "| grpo | grpo-lr1e-5: 100.0 % | grpo-lr5e-6: 50.0 % (recorded) | **grpo-lr1e-5** |" in out
    assert "per-game outcomes were lost" in out
    recorded.write_text(json.dumps({"successes": {"grpo-lr5e-6": 0.9, "grpo-lr1e-5": 0.5}}))  # A has outcomes
    assert main(["stats", str(path), "--plan", "algorithm-tuning", "--recorded", str(recorded)]) == 2
    assert "grpo-lr1e-5: both recorded and in the outcomes file" in capsys.readouterr().err
    recorded.write_text(json.dumps({"successes": {"grpo-lr5e-6": 72}}))  # a percentage, not a rate
    assert main(["stats", str(path), "--plan", "algorithm-tuning", "--recorded", str(recorded)]) == 2
    assert "not a recorded-successes file" in capsys.readouterr().err
    assert main(["stats", str(path), "--recorded", str(recorded)]) == 2  # only with the tuning plan
