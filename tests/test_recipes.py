"""Recipes: the paired statistics, study configs, and whole comparisons / budget sweeps on a tiny model."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from turngym.envs.tasks import SplitOverlapError
from turngym.recipes import compare_algorithms, sft_rl_budget
from turngym.recipes.study import (
    Arm,
    Study,
    StudyConfig,
    _plan_record,
    duration,
    episodes_per_step,
    load_config,
    moving_average,
    pairwise_differences,
    recompute,
    study_progress,
)
from turngym.recipes.study_clock import StudyClock, clock_time
from turngym.recipes.study_progress import Pace, PlannedStage, expected_seconds, paces, stage_left

CONFIGS = Path(__file__).resolve().parents[1] / "recipes" / "configs"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ---------------------------------------------------------------------- statistics
def _rows(seed_wins: dict[int, dict[str, bool]], panel: str = "held_out") -> list[dict]:
    return [{"panel": panel, "seed": seed, "outcomes": [{"task": t, "won": w} for t, w in wins.items()]}
            for seed, wins in seed_wins.items()]


def test_pairwise_differences_pair_by_seed_and_task_by_hand():
    evals = {
        "ppo": _rows({0: {"a": True, "b": True}, 1: {"a": False, "b": True}}),
        "grpo": _rows({0: {"a": False, "b": True}, 1: {"a": False, "b": False}}) + _rows({0: {"a": True}}, "other"),
        "null": _rows({0: {"b": True, "a": True}}),  # seed 1 missing: only seed 0's two tasks pair
    }
    pairs = {(p["a"], p["b"]): p for p in pairwise_differences(evals, ["ppo", "grpo", "null"])}
    assert list(pairs) == [("ppo", "grpo"), ("ppo", "null"), ("grpo", "null")]
    # ppo - grpo per (seed, task): (0,a) 1, (0,b) 0, (1,a) 0, (1,b) 1. Seed means and task means are all 1/2,
    # so MS_seed = MS_task = 0 and MS_e = 4 * (1/2)^2 / 1 = 1: V = 1 / 4, nu = 1, half width t_1 * 1/2.
    ppo_grpo = pairs["ppo", "grpo"]
    assert ppo_grpo["mean"] == pytest.approx(0.5) and ppo_grpo["pairs"] == 4 and ppo_grpo["seeds"] == 2
    assert ppo_grpo["ci95"] == pytest.approx([0.5 - 12.706205 / 2, 0.5 + 12.706205 / 2], abs=1e-5)
    assert ppo_grpo["per_seed"] == {0: 0.5, 1: 0.5} and ppo_grpo["seed_t_ci95"] == [0.5, 0.5]
    # one seed, both won both tasks: no spread, so the bound is Wilson's for 0 of 2 tasks differing,
    # (z^2/n) / (1 + z^2/n) = 1.9208 / 2.9208 either way; and the exact McNemar test
    ppo_null = pairs["ppo", "null"]
    assert (ppo_null["mean"], ppo_null["pairs"], ppo_null["mcnemar_p"]) == (0.0, 2, {0: 1.0})
    assert ppo_null["ci95"] == pytest.approx([-1.9208 / 2.9208, 1.9208 / 2.9208])
    assert pairs["grpo", "null"]["mean"] == pytest.approx(-0.5) and pairs["grpo", "null"]["pairs"] == 2
    table = "\n".join(compare_algorithms.pairwise_table(list(pairs.values())))
    assert "| ppo | grpo | +50.0 (-585.3 to +685.3) | +50.0 to +50.0; per seed +50.0 / +50.0 |" in table
    assert "| grpo | null | -50.0" in table and "1 gained" not in table and "0 gained, 1 lost; McNemar p = 1" in table


def test_moving_average_by_hand():
    assert moving_average([1.0, 3.0, 5.0, 7.0], 2) == [1.0, 2.0, 4.0, 6.0]
    assert moving_average([2.0, 4.0], 5) == [2.0, 3.0]


# ---------------------------------------------------------------------- the learning-curve plot
def _curve_summary() -> dict:
    """Three RL arms (one a null control) whose held-out points coincide, as they do at 0 episodes (every arm
    starts from the SFT policy) and whenever two arms win the same games."""
    def run(ys):
        return {"seed": 0, "held_out": list(zip([0, 64, 128], ys, strict=True)),
                "train_return": [(16 * k, 0.5) for k in range(1, 9)], "train_success": []}

    arms = {"base": {"null": False}, "sft-only": {"null": False}, "ppo": {"null": False},
            "turn_rloo": {"null": False}, "turn_rloo-null": {"null": True}}
    for label, arm in arms.items():  # full-panel success: NOT the curve's games
        arm["panels"] = {"held_out": {"success": {"base": 0.0, "sft-only": 0.64}.get(label, 0.6)}}
    return {"name": "t", "reference_arm": "sft-only", "arms": arms,
            "curves": {"ppo": [run([0.55, 0.5, 0.5])], "turn_rloo": [run([0.55, 0.5, 0.6])],
                       "turn_rloo-null": [run([0.55, 0.5, 0.5])]},
            "curve_reference": {"base": 0.0, "sft-only": 0.55},
            "config": {"world": {"env_id": "turngym/TextWorld-v0"}, "seeds": [0],
                       "evaluation": {"curve_tasks": 20}}}


def test_a_stage_is_expected_to_take_its_work_at_its_kinds_measured_pace_or_the_prior_by_hand():
    # rl: 300 s over 40 episodes; eval: 10 s over 5 episodes; no SFT stage has run: its prior, not measured
    pace = paces([("rl", 100.0, 10), ("rl", 200.0, 30), ("eval", 10.0, 5)], priors={"rl": 9.0, "eval": 9.0, "sft": 4.0})
    assert pace == {"rl": Pace(7.5, True), "eval": Pace(2.0, True), "sft": Pace(4.0, False)}
    assert expected_seconds(PlannedStage("rl", Path("x"), 8), pace) == 60.0
    assert expected_seconds(PlannedStage("sft", Path("x"), 20), pace) == 80.0
    # The running stage: what its expected time leaves until some of its work is done, then its own pace.
    assert stage_left(30.0, 100.0) == 70.0 and stage_left(130.0, 100.0) == 0.0
    assert stage_left(30.0, 100.0, done=0.25) == 90.0  # 30 s for a quarter: 90 s for the other three
    assert stage_left(30.0, 100.0, done=1.0) == 0.0
    assert (duration(42), duration(62), duration(5399), duration(7200)) == ("42 s", "1 min", "90 min", "2.0 h")
    assert (clock_time(59.6), clock_time(125), clock_time(3725)) == ("1:00", "2:05", "1:02:05")


def test_the_study_clock_says_each_stage_its_time_and_the_time_left_by_hand(tmp_path):
    now, lines = [0.0], []
    names = ["seed 0 (1/1) · SFT on 20 demos", "seed 0 (1/1) · ppo RL", "seed 0 (1/1) · eval ppo on held_out"]
    plan = [PlannedStage(kind, tmp_path / f"{kind}.json", units, name)
            for kind, units, name in zip(("sft", "rl", "eval"), (20, 128, 100), names, strict=True)]

    def finish(stage, seconds):
        stage.marker.write_text(json.dumps({"seconds": seconds}))
        now[0] += seconds

    clock = StudyClock(plan, live=False, clock=lambda: now[0], write=lines.append)
    # Priors: SFT 20 demos x 5 s = 100 s, RL 128 episodes x 2.5 s = 320 s, eval 100 episodes x 1 s = 100 s: 520 s.
    clock.begin("SFT warm start")
    estimate = "(an estimate for eval, rl, sft until a stage of each has run)"
    assert lines == ["\n== SFT warm start",
                     f"   study: stage 1 of 3 ({names[0]}): about 2 min; 0 s elapsed, about 9 min left {estimate}"]
    finish(plan[0], 80)  # SFT measured: 4 s a demo
    clock.begin("ppo")
    estimate = "(an estimate for eval, rl until a stage of each has run)"
    left = f"1 min elapsed, about 7 min left {estimate}"  # 320 + 100 s
    assert lines[2:] == [f"   finished stage 1 of 3 ({names[0]}) in 1 min (expected 2 min); {left}", "\n== ppo",
                         f"   study: stage 2 of 3 ({names[1]}): about 5 min; {left}"]
    assert clock.status() == f"stage 2/3 · {names[1]} · 0:00, about 5:20 left · study about 7 min left (an estimate)"
    clock.progress(4, 8, "step 4/8")  # resumed at step 4: this leg's pace counts from there
    now[0] += 60
    clock.progress(6, 8, "step 6/8")  # half of this leg in 60 s: 60 s left, then the evaluation's 100 s
    assert clock.status() == f"stage 2/3 · {names[1]} · step 6/8 · 1:00, about 1:00 left · study about 3 min left " \
                             "(an estimate)"
    finish(plan[1], 60)
    clock.begin("evaluate ppo")
    assert lines[-1].endswith("3 min elapsed, about 2 min left (an estimate for eval until a stage of each has run)")
    now[0] += 30
    clock.close()  # stopped before its evaluation finished: no line says it did
    assert not any(line.startswith("   finished stage 3") for line in lines)


def test_peak_rss_is_the_processes_high_water_mark():
    import subprocess
    import sys

    code = ("from turngym.recipes.study import peak_rss_gb\n"
            "before = peak_rss_gb()\n"
            "block = bytearray(b'x') * 300_000_000\n"  # written, so resident
            "del block\n"
            "print(before, peak_rss_gb())\n")
    before, after = map(float, subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                              check=True).stdout.split())
    assert after - before >= 0.29  # the 300 MB stay in the peak after they are freed


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_a_finished_stage_hands_its_freed_memory_back():
    import subprocess

    code = ("from turngym.recipes.study import release_freed_memory\n"
            "def rss(): return int(next(l for l in open('/proc/self/status') if l.startswith('VmRSS')).split()[1])\n"
            "bytearray(b'z') * 20_000_000\n"  # a freed 20 MB mmap: 1 MB blocks now go to glibc's heap
            "blocks = [bytearray(b'x') * (1_000_000 + i) for i in range(300)]\n"  # written, so resident
            "del blocks[::2]\n"  # 150 holes of 1 MB, each held in place by its surviving neighbours
            "freed = rss()\n"
            "print(release_freed_memory(), freed, rss())\n")
    released, freed, after = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                            check=True).stdout.split()
    if released == "False":
        pytest.skip("this C library has no malloc_trim")
    assert int(freed) - int(after) > 100_000  # kB: the holes stayed resident until trimmed


def test_a_long_study_says_which_stage_it_is_on_and_how_long_is_left(tmp_path):
    config = tiny_study(tmp_path, tmp_path / "model", seeds=[0, 1])
    study = Study(config, compare_algorithms.arms_of(config), progress=False)
    plan = study.stage_plan()
    # Per seed: one SFT warm start shared by the arms, ppo's and turn_rloo's RL, and both panels for each policy;
    # the greedy base model is evaluated for the first seed only.
    kinds = [stage.kind for stage in plan]
    assert (kinds.count("sft"), kinds.count("rl"), kinds.count("eval")) == (2, 4, 8 + 6)
    assert not any("base/seed1" in str(stage.marker) for stage in plan)
    assert kinds[:3] == ["eval", "eval", "sft"]  # run()'s order: the base model's evaluations come first
    assert [stage.units for stage in plan[:5]] == [4, 4, 4, 4, 4] and plan[5].units == 8  # demos; episodes
    assert [stage.name.removeprefix("seed 0 (1/2) · ") for stage in plan[2:6]] == [
        "SFT on 4 demos", "eval sft-only on held_out", "eval sft-only on longer", "ppo RL"]
    # Nothing has run: each kind at its prior, 2 SFT x 4 demos x 5 s + 4 RL x 8 episodes x 2.5 s + 14 x 4 x 1 s = 176 s.
    assert study_progress(plan) == ("study: stage 1 of 20; about 3 min left (an estimate for eval, rl, sft until a "
                                    "stage of each has run)")

    def finish(stage, seconds):
        stage.marker.parent.mkdir(parents=True, exist_ok=True)
        stage.marker.write_text(json.dumps({"seconds": seconds}))

    for stage, seconds in zip(plan[:3], (30, 90, 60), strict=True):
        finish(stage, seconds)
    # Evaluations 15 s an episode (120 s for 8), SFT 15 s a demo: 60 + 4 x 20 (RL's prior) + 12 x 60 = 860 s.
    assert study_progress(plan) == ("study: stage 4 of 20; about 14 min left (an estimate for rl until a stage of each "
                                    "has run)")
    finish(plan[kinds.index("rl")], 3600)
    # Left: 1 SFT (60 s), 3 RL (3600 s), 12 evaluations (60 s, the mean of 30 and 90).
    assert study_progress(plan).endswith(
        f"stage 5 of 20; about {(60 + 3 * 3600 + 12 * 60) / 3600:.1f} h left at the pace of the 4 finished")


def test_the_learning_curve_plot_cannot_mislead(tmp_path):
    import matplotlib.pyplot as plt

    summary = _curve_summary()
    fig = compare_algorithms.curve_figure(summary)
    try:
        held_out = fig.axes[0]
        lines = {line.get_label(): line for line in held_out.get_lines()}
        # The SFT-only line sits on the held-out panel at its success on the curve's 20 games (55 %), the games the
        # curves are measured on, not at its full-panel 64 %; the base model's likewise.
        sft = lines["sft-only (the same 20 games)"]
        assert list(sft.get_ydata()) == pytest.approx([55.0, 55.0])
        assert list(lines["base (the same 20 games)"].get_ydata()) == [0.0, 0.0]
        assert not any(abs(y - 64.0) < 1e-6 for line in held_out.get_lines() for y in line.get_ydata())
        # The null control: dashed and labelled; the RL arms solid.
        null = lines["turn_rloo-null (null control)"]
        assert null.get_linestyle() == "--" and lines["ppo"].get_linestyle() == "-"
        # Every point has a marker, and no two markers sit on the same spot (the arms' points coincide in data).
        curves = [lines[label] for label in ("ppo", "turn_rloo", "turn_rloo-null (null control)")]
        assert all(line.get_marker() not in (None, "", "None", " ") for line in curves)
        assert all(len(line.get_xdata()) == 3 for line in curves)
        assert len({line.get_marker() for line in curves}) == 3
        spots = [(round(float(x), 6), round(float(y), 6)) for line in curves
                 for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)]
        assert len(set(spots)) == len(spots) == 9
        # The legend names every curve and reference line.
        legend = {text.get_text() for text in held_out.get_legend().get_texts()}
        assert {"ppo", "turn_rloo", "turn_rloo-null (null control)", "sft-only (the same 20 games)"} <= legend
        assert {line.get_label() for line in fig.axes[1].get_lines()} == {
            "ppo", "turn_rloo", "turn_rloo-null (null control)"}
    finally:
        plt.close(fig)
    assert compare_algorithms.plot_curves(summary, tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"


# ---------------------------------------------------------------------- configs
def test_study_config_errors_name_the_problem(tmp_path):
    world = {"env_id": "turngym/Signals-v0"}
    with pytest.raises(ValueError, match="unknown study option.*epsiodes"):
        StudyConfig.from_dict({"name": "x", "world": world, "epsiodes": 3})
    with pytest.raises(ValueError, match="world: unknown option.*learning_rate"):
        StudyConfig.from_dict({"name": "x", "world": {**world, "learning_rate": 1.0}})
    with pytest.raises(ValueError, match="seeds"):
        StudyConfig.from_dict({"name": "x", "world": world, "seeds": [0, 0]})
    with pytest.raises(ValueError, match="unknown evaluation option"):
        StudyConfig.from_dict({"name": "x", "world": world, "evaluation": {"tasks": 3}})
    with pytest.raises(ValueError, match="plain folder name"):
        StudyConfig.from_dict({"name": "../x", "world": world})
    with pytest.raises(FileNotFoundError):
        load_config(tmp_path / "missing.yaml")


def test_a_panel_can_start_after_the_games_an_earlier_study_played(tmp_path, monkeypatch):
    from turngym.envs.panels import task_panel

    def held_out(**evaluation):
        config = tiny_study(tmp_path, tmp_path / "model", name=f"panel{evaluation.get('first_task', 0)}",
                            evaluation={"num_tasks": 3, **evaluation})
        return Study(config, compare_algorithms.arms_of(config), progress=False).tasks("held_out")

    first_five = task_panel("turngym/Signals-v0", "eval", 5, {"turns": 2, "colours": 2}, progress=False)
    later = held_out(first_task=2)
    assert [t.id for t in later] == [t.id for t in first_five][2:5] and later.name.endswith("[2:5]")
    first_three = task_panel("turngym/Signals-v0", "eval", 3, {"turns": 2, "colours": 2}, progress=False)
    assert held_out().fingerprint == first_three.fingerprint != later.fingerprint  # first_task 0: the panel as before
    with pytest.raises(ValueError, match="first_task must be at least 0"):
        tiny_study(tmp_path, tmp_path / "model", evaluation={"first_task": -1})
    # A split too short for the window (TextWorld's test split has 500 games) is refused, not silently cut.
    monkeypatch.setattr("turngym.envs.panels.task_panel",
                        lambda env_id, split, n, env_kwargs, first=0, **_: first_five.take(n, start=first))
    with pytest.raises(ValueError, match="eval split of turngym/Signals-v0 has 5 tasks, not the 7 that first_task 4"):
        held_out(first_task=4)


def test_a_panel_of_a_smaller_split_names_its_own_size(tmp_path):
    """The SWE study's ``seen`` panel: its split has fewer tasks than the held-out panel's num_tasks."""
    from turngym.envs.panels import task_panel

    config = tiny_study(tmp_path, tmp_path / "model", evaluation={
        "num_tasks": 4, "panels": {"small": {"env_kwargs": {"turns": 3}, "num_tasks": 2}}})
    study = Study(config, compare_algorithms.arms_of(config), progress=False)
    assert len(study.tasks("held_out")) == 4 and len(study.tasks("small")) == 2
    assert study.world("small").env_kwargs["turns"] == 3  # num_tasks is the panel's size, not a world option
    seed = config.seeds[0]
    sizes = {stage.name.rsplit(" on ", 1)[-1]: stage.units for stage in study.arm_stages(study.arms[0], seed)
             if stage.kind == "eval"}
    assert sizes == {"held_out": 4, "small": 2}  # the progress estimate counts each panel's own episodes
    expected = task_panel("turngym/Signals-v0", "eval", 2, {"turns": 3, "colours": 2}, progress=False)
    assert study.tasks("small").fingerprint == expected.fingerprint
    for bad in (0, "2"):
        with pytest.raises(ValueError, match="evaluation.panels.small.num_tasks must be a positive integer"):
            tiny_study(tmp_path, tmp_path / "model", evaluation={"panels": {"small": {"num_tasks": bad}}})


def test_a_null_arm_written_in_yaml_is_a_null_arm_that_builds(tmp_path):
    """YAML reads the documented ``null: true`` as the key None; the arm must still be a null control."""
    path = tmp_path / "study.yaml"
    path.write_text("name: n\nworld: {env_id: turngym/Signals-v0}\n"
                    "rl: {per_device_train_batch_size: 4, num_generations: 2}\n"
                    "algorithms:\n  turn_rloo-null: {algorithm: turn_rloo, null: true}\nepisodes: 4\n")
    config = load_config(path, results_dir=str(tmp_path))
    (arm,) = [a for a in compare_algorithms.arms_of(config) if a.trains_rl]
    assert arm.null
    study = Study(config, [arm], progress=False)
    assert study.rl_config(arm, "unused", 0, tmp_path / "arm").shuffle_advantages
    assert study.rl_config(arm, "unused", 0, tmp_path / "arm").shuffle_scope == "group"  # the fair null
    path.write_text(path.read_text().replace("null: true", "null: lr0"))  # the same steps at learning rate 0
    (arm,) = [a for a in compare_algorithms.arms_of(load_config(path, results_dir=str(tmp_path))) if a.trains_rl]
    assert (arm.null, arm.null_kind) == (True, "lr0")
    rl = study.rl_config(arm, "unused", 0, tmp_path / "arm")
    assert rl.learning_rate == 0.0 and not rl.shuffle_advantages
    path.write_text(path.read_text().replace("null: lr0", "null: sometimes"))
    with pytest.raises(ValueError, match="turn_rloo-null.null: expected true, 'shuffle' or 'lr0'"):
        compare_algorithms.arms_of(load_config(path, results_dir=str(tmp_path)))
    path.write_text("name: n\nworld: {}\nalgorithms:\n  x: {1: 2}\n")
    with pytest.raises(ValueError, match="algorithms.x: option names must be strings"):
        load_config(path)


def test_budget_arms_round_rl_episodes_down_to_whole_steps():
    config = StudyConfig.from_dict({"name": "b", "world": {}, "budget": 100, "demo_cost": 10, "demos": [10, 0, 5]})
    arms = sft_rl_budget.arms_of(config, per_step=16)
    assert [(a.label, a.demos, a.episodes) for a in arms] == [
        ("0demos+96rl", 0, 96), ("5demos+48rl", 5, 48), ("10demos+0rl", 10, 0)]
    with pytest.raises(ValueError, match="more than the budget"):
        sft_rl_budget.arms_of(StudyConfig.from_dict({"name": "b", "world": {}, "budget": 50, "demos": [6]}), 16)


def test_the_demo_config_builds_each_algorithms_trainer_config(tmp_path):
    config = load_config(CONFIGS / "compare" / "textworld-demo.yaml", results_dir=str(tmp_path))
    arms = compare_algorithms.arms_of(config)
    assert [a.label for a in arms] == ["base", "sft-only", "ppo", "grpo", "turn_rloo", "turn_rloo-null"]
    assert {a.demos for a in arms[1:]} == {config.sft["num_demos"]}  # every RL arm starts from the same SFT
    study = Study(config, arms, progress=False)
    for arm in arms[2:]:
        rl = study.rl_config(arm, "start", 0, tmp_path / arm.label)
        assert rl.algorithm == arm.label.removesuffix("-null")
        assert rl.max_steps * episodes_per_step(rl) == config.episodes  # the same budget for every algorithm
        assert rl.env_kwargs == config.world["env_kwargs"] and rl.action_protocol == config.world["action_protocol"]
        assert rl.eval_strategy == "no"  # curve points come from the study's callback
        assert rl.skip_train_tasks == config.sft["num_demos"]  # RL plays other games than the SFT demos
        assert rl.shuffle_advantages == arm.null == arm.label.endswith("-null")  # the null control, and only it
    # An equal budget that is not a whole number of steps is refused, not silently rounded.
    with pytest.raises(ValueError, match="not a whole number of steps"):
        study.rl_config(Arm("ppo", 20, "ppo", 100), "start", 0, tmp_path / "x")


def test_the_headline_is_the_quick_demo_on_fresh_seeds_and_the_reserved_panel(tmp_path):
    quick = load_config(CONFIGS / "compare" / "textworld-demo-quick.yaml", results_dir=str(tmp_path))
    headline = load_config(CONFIGS / "compare" / "textworld-headline.yaml", results_dir=str(tmp_path))
    assert (headline.world, headline.sft, headline.rl, headline.algorithms, headline.episodes) == (
        quick.world, quick.sft, quick.rl, quick.algorithms, quick.episodes)
    assert headline.seeds == [100, 101, 102, 103, 104] and not set(headline.seeds) & {0, 1, 2}
    assert (headline.evaluation.split, headline.evaluation.num_tasks) == ("test", 200)
    assert Path(headline.preregistered).is_file() and "## Analysis" in Path(headline.preregistered).read_text()


def test_the_rl_gain_confirmatory_study_is_e1_with_its_fair_null_on_fresh_seeds_and_the_reserved_panel(tmp_path):
    """docs/plans/2026-11-26-rl-gain-confirmatory.md: E1's recipe unchanged, plus the fair null, 5 fresh seeds,
    200 test games, no curve."""
    e1 = load_config(CONFIGS / "compare" / "textworld-rl-gain-long.yaml", results_dir=str(tmp_path))
    confirm = load_config(CONFIGS / "compare" / "textworld-rl-gain-confirmatory.yaml", results_dir=str(tmp_path))
    assert (confirm.world, confirm.sft, confirm.rl, confirm.episodes) == (e1.world, e1.sft, e1.rl, e1.episodes)
    arms = compare_algorithms.arms_of(confirm)
    assert [a.label for a in arms] == ["base", "sft-only", "turn_rloo", "turn_rloo-null"]
    assert [a.null for a in arms[2:]] == [False, True]
    used_before = {0, 1, 2, 100, 101, 102, 103, 104}  # the demos, the search's screening and the headline
    assert confirm.seeds == [105, 106, 107, 108, 109] and not set(confirm.seeds) & used_before
    assert (confirm.evaluation.split, confirm.evaluation.num_tasks, confirm.evaluation.curve_points) == ("test", 200, 0)
    plan = Path(confirm.preregistered)
    assert plan.is_file() and "## Analysis" in plan.read_text() and "105, 106, 107, 108, 109" in plan.read_text()


def test_the_quick_demo_is_the_demo_at_half_the_step_and_twice_the_episodes_a_step(tmp_path):
    demo = load_config(CONFIGS / "compare" / "textworld-demo.yaml", results_dir=str(tmp_path))
    quick = load_config(CONFIGS / "compare" / "textworld-demo-quick.yaml", results_dir=str(tmp_path))
    arms = compare_algorithms.arms_of(quick)
    assert [a.label for a in arms] == ["base", "sft-only", "turn_rloo", "turn_rloo-null"]
    assert quick.sft == demo.sft and quick.evaluation == demo.evaluation  # the same warm start and held-out games
    changed = {"learning_rate": 5e-6, "per_device_train_batch_size": 32}
    assert quick.rl == {**demo.rl, **changed} and quick.episodes == 2 * demo.episodes
    assert quick.world == {**demo.world, "num_train_tasks": 64}
    study = Study(quick, arms, progress=False)
    for arm in arms[2:]:
        rl = study.rl_config(arm, "start", 0, tmp_path / arm.label)
        assert rl.max_steps == 8 and rl.shuffle_advantages == arm.null
        # every training game once, none of them an SFT demo
        assert rl.max_steps * rl.per_device_train_batch_size // rl.num_generations == quick.world["num_train_tasks"]
        assert rl.skip_train_tasks == quick.sft["num_demos"]


def test_the_rl_gain_search_candidates_are_quick_demo_plus_the_plans_changes(tmp_path):
    """docs/plans/2026-11-26-rl-gain-search.md: E1 is demo-quick at lr 1e-5 for 1024 episodes (no null while
    screening, 200 eval games, a 5-point curve on 100); E2-E4 change one thing each; every training game once."""
    quick = load_config(CONFIGS / "compare" / "textworld-demo-quick.yaml", results_dir=str(tmp_path))
    long = load_config(CONFIGS / "compare" / "textworld-rl-gain-long.yaml", results_dir=str(tmp_path))
    assert long.sft == quick.sft and long.world == {**quick.world, "num_train_tasks": 256}
    assert long.rl == {**quick.rl, "learning_rate": 1e-5} and long.episodes == 1024
    assert (long.evaluation.split, long.evaluation.num_tasks, long.evaluation.curve_tasks,
            long.evaluation.curve_points) == ("eval", 200, 100, 5)
    changes = {"kl": ({"beta": 0.05}, {}), "5demos": ({}, {"num_demos": 5}),
               "lora": ({"learning_rate": 1e-4, "use_peft": True, "lora_r": 16, "lora_alpha": 32,
                         "lora_target_modules": "all-linear"}, {})}
    for name, (rl_change, sft_change) in changes.items():
        candidate = load_config(CONFIGS / "compare" / f"textworld-rl-gain-{name}.yaml", results_dir=str(tmp_path))
        assert candidate.rl == {**long.rl, **rl_change} and candidate.sft == {**long.sft, **sft_change}, name
        assert (candidate.world, candidate.episodes, candidate.evaluation) == (long.world, 1024, long.evaluation)
        arms = compare_algorithms.arms_of(candidate)
        assert [a.label for a in arms] == ["base", "sft-only", "turn_rloo"]
        rl = Study(candidate, arms, progress=False).rl_config(arms[2], "start", 0, tmp_path / name)
        assert rl.max_steps == 32 and rl.skip_train_tasks == candidate.sft["num_demos"]
        assert rl.max_steps * rl.per_device_train_batch_size // rl.num_generations == 256  # each game once
        assert rl.use_peft == (name == "lora") and rl.beta == candidate.rl["beta"]


def test_the_gigpo_config_builds_gigpo_turn_rloo_and_grpo_at_an_equal_budget(tmp_path):
    demo = load_config(CONFIGS / "compare" / "textworld-demo.yaml", results_dir=str(tmp_path))
    config = load_config(CONFIGS / "compare" / "textworld-gigpo.yaml", results_dir=str(tmp_path))
    arms = compare_algorithms.arms_of(config)
    assert [a.label for a in arms] == ["base", "sft-only", "gigpo", "turn_rloo", "grpo"]
    assert {a.demos for a in arms[1:]} == {config.sft["num_demos"]}  # one SFT warm start for every RL arm
    # The demo's settings verbatim: its turn_rloo and grpo arms are this study's (a demo run can be extended)
    for key in ("world", "sft", "rl", "episodes", "evaluation"):
        assert getattr(config, key) == getattr(demo, key), key
    for shared in ("turn_rloo", "grpo"):
        assert config.algorithms[shared] == demo.algorithms[shared]
    study = Study(config, arms, progress=False)
    built = {arm.label: study.rl_config(arm, "start", 0, tmp_path / arm.label) for arm in arms[2:]}
    for label, rl in built.items():
        assert rl.algorithm == label and rl.estimator.name == label
        assert rl.max_steps * episodes_per_step(rl) == config.episodes == 128  # the same budget for each
        assert rl.max_steps * rl.per_device_train_batch_size // rl.num_generations == config.world["num_train_tasks"]
        assert rl.skip_train_tasks == config.sft["num_demos"] and not rl.shuffle_advantages
        assert not rl.estimator.needs_critic
    gigpo = built["gigpo"]  # the paper's settings: omega 1, gamma 0.95, mean-centred only (verl-agent's mean_norm)
    assert (gigpo.step_advantage_weight, gigpo.gamma, gigpo.scale_rewards) == (1.0, 0.95, "none")
    assert (built["grpo"].gamma, built["grpo"].scale_rewards) == (1.0, "group")


ALGORITHM_PLAN = "docs/plans/2026-11-28-algorithm-comparison.md"
TIERS = [["ppo", "turn_rloo", "grpo", "rft"], ["ppo-sparse", "turn_rloo-sparse"], ["gigpo"]]  # the plan's run order


def _algorithm_study(kind: str, world: str, tmp_path: Path) -> StudyConfig:
    return load_config(CONFIGS / "compare" / f"textworld-algorithms-{kind}{world}.yaml", results_dir=str(tmp_path))


def _without(entry: dict, *keys: str) -> dict:
    return {k: v for k, v in entry.items() if k not in keys}


@pytest.mark.parametrize("kind", ["pilot-world-", "tune-", ""])
def test_the_algorithm_comparison_configs_are_e1s_recipe_on_either_world(kind, tmp_path):
    """docs/plans/2026-11-28-algorithm-comparison.md: every config is E1's world, SFT and RL settings; each has a
    twin on the other world that differs only in its name and the world's config."""
    e1 = load_config(CONFIGS / "compare" / "textworld-rl-gain-long.yaml", results_dir=str(tmp_path))
    q2, q4 = (_algorithm_study(kind, world, tmp_path) for world in ("q2", "q4"))
    assert q2.world == e1.world and q4.world == {**e1.world, "env_kwargs": {"config": "w2-o3-q4"}}
    for config in (q2, q4):
        assert (config.sft, config.rl) == (e1.sft, e1.rl)
        assert config.preregistered == ALGORITHM_PLAN
    assert {**q4.to_dict(), "name": q2.name, "world": q2.world} == q2.to_dict()


def test_the_algorithm_comparison_holds_to_its_plan(tmp_path):
    """The main study: the plan's arms in its tier order at 1024 episodes each (RFT samples as many), 5 seeds no
    study used or earmarked, 200 fresh test games (tasks 200-399), every arm's learning rate one of its two pilot
    configurations, and the pilots' shape (two configurations per algorithm; a 2-step world pilot)."""
    from dataclasses import fields as dataclass_fields

    from turngym.trainers.sft import TurnGymSFTConfig

    plan = Path(ALGORITHM_PLAN).read_text()
    for world in ("q2", "q4"):
        main = _algorithm_study("", world, tmp_path / world)
        tune = _algorithm_study("tune-", world, tmp_path / world)
        pilot = _algorithm_study("pilot-world-", world, tmp_path / world)
        arms = compare_algorithms.arms_of(main)
        assert [a.label for a in arms] == ["base", "sft-only", *(label for tier in TIERS for label in tier)]
        assert not any(a.null for a in arms)
        # Seeds: fresh against every other study config, the earlier plans' seeds and the earmarked 110-114.
        others = {seed for path in (CONFIGS / "compare").glob("*.yaml") if "algorithms" not in path.name
                  for seed in load_config(path, results_dir=str(tmp_path)).seeds}
        assert main.seeds == [120, 121, 122, 123, 124] and "120, 121, 122, 123, 124" in plan
        assert not set(main.seeds) & (others | {0, 1, 2, *range(100, 115)})
        evaluation = main.evaluation
        assert (evaluation.split, evaluation.first_task, evaluation.num_tasks) == ("test", 200, 200)
        assert (evaluation.temperature, evaluation.curve_points) == (0.0, 0) and "10201-10400" in plan
        assert main.episodes == 1024 and "## Analysis" in plan and "±3" in plan

        study = Study(main, arms, progress=False)
        for arm in arms[2:]:
            entry = main.algorithms[arm.label]
            pair = [e for label, e in tune.algorithms.items() if label.startswith(f"{entry['algorithm']}-lr")]
            assert len(pair) == 2, arm.label  # every algorithm: exactly two pilot configurations
            assert _without(pair[0], "learning_rate") == _without(pair[1], "learning_rate") == _without(
                entry, "learning_rate", "reward_mode"), arm.label  # the sparse arms: their dense partner's
            assert entry["learning_rate"] in {e["learning_rate"] for e in pair}, arm.label
            if entry["algorithm"] == "rft":  # SFT on the policy's own wins: TurnGymSFTConfig fields, RL's budget
                assert set(entry) - {"algorithm"} <= {f.name for f in dataclass_fields(TurnGymSFTConfig)}
                assert entry["demo_source"] == "policy" and entry["demo_temperature"] == main.rl["temperature"]
                rounds, samples = entry["rounds"], entry["demo_samples_per_task"]
                assert main.episodes % rounds == 0 and (main.episodes // rounds) % samples == 0
                assert main.episodes // samples == main.world["num_train_tasks"]  # each RL training game once
                continue
            rl = study.rl_config(arm, "start", 0, tmp_path / world / arm.label)
            assert rl.algorithm == entry["algorithm"] == arm.label.removesuffix("-sparse")
            assert rl.max_steps == 32 and rl.max_steps * episodes_per_step(rl) == main.episodes
            assert rl.max_steps * rl.per_device_train_batch_size // rl.num_generations == 256  # each game once
            assert rl.skip_train_tasks == main.sft["num_demos"] and not rl.shuffle_advantages
            assert rl.reward_mode == ("sparse" if arm.label.endswith("-sparse") else "dense")
            assert rl.estimator.needs_critic == (rl.algorithm == "ppo")

        # Pilot T: the same budget on 200 eval games, one seed; each algorithm's pair is A = 1e-5 and its B.
        assert (tune.episodes, tune.seeds, tune.evaluation.split, tune.evaluation.num_tasks) == (1024, [0], "eval", 200)
        assert tune.evaluation.first_task == 0
        rates = {label: e["learning_rate"] for label, e in tune.algorithms.items()}
        assert rates == {"ppo-lr1e-5": 1e-5, "ppo-lr5e-6": 5e-6, "turn_rloo-lr1e-5": 1e-5, "turn_rloo-lr5e-6": 5e-6,
                         "grpo-lr1e-5": 1e-5, "grpo-lr5e-6": 5e-6, "rft-lr1e-5": 1e-5, "rft-lr3e-5": 3e-5,
                         "gigpo-lr1e-5": 1e-5, "gigpo-lr5e-6": 5e-6}
        # The main arms' rates are pilot T's picks, recomputed from its committed outcomes and the record of the
        # five configurations whose outcomes were lost (Amendment 6); a sparse arm takes its dense partner's.
        from turngym.recipes import outcome_files
        from turngym.recipes.algorithm_verdicts import read_recorded, tuning_picks

        docs = CONFIGS.parents[1] / "docs"
        record = outcome_files.read_outcomes(docs / "outcomes/algorithm-comparison/pilot-tune-q2.json")["record"]
        recorded = read_recorded(docs / "benchmark-runs" / "algorithm-pilot-tune-q2-recorded.json")
        picks = tuning_picks(record, recorded=recorded)
        assert {a: p["pick"] for a, p in picks.items()} == {"ppo": "ppo-lr5e-6", "turn_rloo": "turn_rloo-lr1e-5",
                                                             "grpo": "grpo-lr1e-5", "rft": "rft-lr3e-5"}
        for entry in main.algorithms.values():
            if entry["algorithm"] in picks:
                assert entry["learning_rate"] == tune.algorithms[picks[entry["algorithm"]]["pick"]]["learning_rate"]
        # Pilot W: PPO and turn-level RLOO for 2 steps, the first 100 eval games, main's PPO settings.
        assert [a.label for a in compare_algorithms.arms_of(pilot)] == ["base", "sft-only", "ppo", "turn_rloo"]
        assert (pilot.episodes, pilot.seeds) == (64, [0])  # 2 steps of 32
        assert (pilot.evaluation.split, pilot.evaluation.first_task, pilot.evaluation.num_tasks) == ("eval", 0, 100)
        assert _without(pilot.algorithms["ppo"], "learning_rate") == _without(main.algorithms["ppo"], "learning_rate")


@pytest.mark.parametrize("world", ["q2", "q4"])
def test_the_algorithm_comparison_plans_its_stages_tier_by_tier_with_rft_at_rls_budget(world, tmp_path):
    """The plan's run order: tier 1 (base, SFT-only, PPO, RLOO, GRPO, RFT) seed-major from one folder, then each later
    tier, which adds its arms' stages and reuses every seed's SFT warm start; RFT trains like an RL stage, from the
    seed's SFT checkpoint, on the same 256 games RL plays (64 a round x 4 samples, 4 rounds: 1024 episodes)."""
    from turngym.recipes.study import RFT

    main = _algorithm_study("", world, tmp_path)
    arms = compare_algorithms.arms_of(main)
    first = Study(main, arms, only=["base", "sft-only", *TIERS[0]], progress=False)
    assert [a.label for a in first.arms] == ["base", "sft-only", *TIERS[0]]
    assert first.left_out == [label for tier in TIERS[1:] for label in tier]
    plan = [(stage.kind, str(stage.marker.relative_to(first.out))) for stage in first.stage_plan()]
    seed_one = [("eval", "evals/base/seed120-held_out.json"), ("sft", "seed120/sft-20demos/done.json"),
                ("eval", "evals/sft-only/seed120-held_out.json")]
    for label in TIERS[0]:  # RFT's training counts as an RL stage for the progress line and the time left
        seed_one += [("rl", f"seed120/{label}/done.json"), ("eval", f"evals/{label}/seed120-held_out.json")]
    assert plan[:11] == seed_one and len(plan) == 11 + 4 * 10  # the base model is evaluated once
    assert plan[11:13] == [("sft", "seed121/sft-20demos/done.json"), ("eval", "evals/sft-only/seed121-held_out.json")]
    # Every game any arm trains on is checked against the panel: the 20 demos and the 256 RL and RFT games after them.
    assert first.training_games() == 276

    rft = next(a for a in arms if a.label == "rft")
    assert first.rft_entry(rft) is not None and first.rft_budget(rft) == (4, 256)
    assert all(first.rft_entry(a) is None for a in arms if a.label != "rft")
    with pytest.raises(ValueError, match="is an RFT arm"):
        first.rl_config(rft, "start", 120, tmp_path / "rft")
    config = first.rft_config(rft, "sft-checkpoint", 120, first.out / "seed120" / "rft")
    assert (config.demo_source, config.rounds, config.num_demos, config.demo_samples_per_task) == ("policy", 4, 256, 4)
    assert config.skip_train_tasks == main.sft["num_demos"] and config.demo_temperature == main.rl["temperature"]
    assert (config.model_name_or_path, config.seed, config.demo_seed) == ("sft-checkpoint", 120, 120)
    assert (config.learning_rate, config.num_train_epochs) == (main.algorithms[RFT]["learning_rate"], 1)
    assert (config.per_device_train_batch_size, config.lr_scheduler_type.value, config.bf16) == (4, "cosine", True)
    assert config.eval_split is None and config.output_dir.endswith("seed120/rft/policy")
    assert config.env_kwargs == main.world["env_kwargs"] and config.max_length == main.sft["max_length"]

    # Tier 2 from the same folder: the same config (nothing refused), its own arms' stages, the shared SFT stages.
    second = Study(main, arms, only=["base", "sft-only", *TIERS[1]], progress=False)
    kinds = [(stage.kind, stage.marker.parent.name) for stage in second.stage_plan()]
    assert [k for k in kinds if k[0] == "rl"] == [("rl", label) for _ in main.seeds for label in TIERS[1]]
    assert kinds.count(("sft", "sft-20demos")) == 5
    # Pilot T's RFT pair plans like its RL arms, at the same budget.
    tune = _algorithm_study("tune-", world, tmp_path / "tune")
    pilot = Study(tune, compare_algorithms.arms_of(tune), progress=False)
    assert [pilot.rft_budget(a) for a in pilot.arms if pilot.rft_entry(a)] == [(4, 256), (4, 256)]
    assert sum(stage.kind == "rl" for stage in pilot.stage_plan()) == 10


@pytest.mark.parametrize("path", sorted(CONFIGS.rglob("*.yaml")), ids=lambda p: str(p.relative_to(CONFIGS)))
def test_no_config_credits_the_clip_with_small_steps_when_it_cannot_fire(path):
    """With one update per batch (num_iterations 1, TRL's default) the ratio is 1, so the clip never fires."""
    import yaml

    data = yaml.safe_load(path.read_text()) or {}
    iterations = max(int(section.get("num_iterations", 1)) for section in (data, data.get("rl") or {})
                     if isinstance(section, dict))
    if iterations == 1:
        assert "clipping keeps" not in path.read_text().lower(), f"{path.name}: the clip is inert at num_iterations 1"


@pytest.mark.parametrize("path", sorted((CONFIGS / "budget").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_budget_configs_build_their_arms(path, tmp_path):
    config = load_config(path, results_dir=str(tmp_path))
    per_step = sft_rl_budget.rl_episodes_per_step(config)
    arms = sft_rl_budget.arms_of(config, per_step)
    assert [a.demos for a in arms] == sorted(config.demos)
    for arm in arms:  # every arm spends the budget, to within one RL step
        assert 0 <= config.budget - config.demo_cost * arm.demos - arm.episodes < per_step
    assert config.evaluation.panels, "the budget study reports a harder panel"


# ---------------------------------------------------------------------- whole studies on a tiny model
def tiny_study(tmp_path: Path, policy: Path, **overrides) -> StudyConfig:
    data = {
        "name": "tiny",
        "results_dir": str(tmp_path / "results"),
        "world": {"model_name_or_path": str(policy), "env_id": "turngym/Signals-v0",
                  "env_kwargs": {"turns": 2, "colours": 2}, "reward_mode": "dense",
                  "system_prompt": "Obey the lights. {format_instruction}", "max_new_tokens_per_turn": 4,
                  "num_train_tasks": 8},
        "sft": {"num_demos": 4, "num_train_epochs": 1, "per_device_train_batch_size": 4, "learning_rate": 1e-3,
                "max_length": 512, "gradient_checkpointing": False},
        "rl": {"num_generations": 2, "per_device_train_batch_size": 4, "learning_rate": 1e-3, "beta": 0.0,
               "max_completion_length": 128, "save_strategy": "steps", "save_steps": 1},
        "algorithms": {"ppo": {"critic_learning_rate": 1e-3}, "turn_rloo": {}},
        "episodes": 8,
        "evaluation": {"num_tasks": 4, "curve_tasks": 2, "curve_points": 3,
                       "panels": {"longer": {"env_kwargs": {"turns": 3}}}},
    }
    data.update(overrides)
    data["evaluation"] = {"overlap": "report", **data["evaluation"]}  # Signals' splits share sequences by design
    return StudyConfig.from_dict(data)


@pytest.fixture(scope="module")
def policy(tiny_policy) -> Path:
    return tiny_policy


def test_stage_costs_list_each_stage_once_by_seed_and_the_table_shows_minutes_and_peaks():
    from turngym.recipes.study_tables import cost_table, stage_costs

    stages = {"seed1/ppo": {"seconds": 600.0, "peak_rss_gb": 19.46, "episodes": 8},
              "seed0/sft-4demos": {"seconds": 90.0, "peak_rss_gb": 7.0}}
    evals = {"base": [{"seed": 0, "panel": "held_out", "seconds": 30.0, "peak_rss_gb": 2.0},
                      {"seed": 1, "panel": "held_out", "seconds": 0.0, "peak_rss_gb": 2.0, "reused_from_seed": 0}],
             "ppo": [{"seed": 1, "panel": "held_out", "seconds": 45.0}]}
    rows = stage_costs(stages, evals)
    assert [(r["stage"], r["seconds"], r["peak_rss_gb"]) for r in rows] == [
        ("seed0/eval base (held_out)", 30.0, 2.0), ("seed0/sft-4demos", 90.0, 7.0),
        ("seed1/eval ppo (held_out)", 45.0, None), ("seed1/ppo", 600.0, 19.46)]
    table = cost_table({"stage_costs": rows})
    assert table[1:5] == ["## Cost by stage", "", "| stage | minutes | peak resident memory (GB) |", "|---|---:|---:|"]
    assert table[5:] == ["| seed0/eval base (held_out) | 0.5 | 2.0 |", "| seed0/sft-4demos | 1.5 | 7.0 |",
                         "| seed1/eval ppo (held_out) | 0.8 | not recorded |", "| seed1/ppo | 10.0 | 19.5 |"]
    assert cost_table({}) == []


def test_stats_costs_reads_a_study_folder_as_it_stands(tmp_path, capsys):
    from turngym.recipes.cli import main

    study = tmp_path / "study"
    for stage, record in {"seed3/sft-4demos": {"seconds": 120.0, "peak_rss_gb": 6.0},
                          "seed3/rft/round1": {"seconds": 60.0, "peak_rss_gb": 8.25}}.items():
        (study / stage).mkdir(parents=True)
        (study / stage / "done.json").write_text(json.dumps(record))
    (study / "evals" / "sft-only").mkdir(parents=True)
    (study / "evals" / "sft-only" / "seed3-held_out.json").write_text(
        json.dumps({"seed": 3, "panel": "held_out", "seconds": 6.0, "peak_rss_gb": 6.5, "outcomes": []}))
    written = tmp_path / "costs.json"
    assert main(["stats", str(study), "--costs", str(written)]) == 0  # no outcomes.json yet: still running
    printed = capsys.readouterr().out
    assert "| seed3/rft/round1 | 1.0 | 8.2 |" in printed and "| seed3/eval sft-only (held_out) | 0.1 | 6.5 |" in printed
    assert [row["stage"] for row in json.loads(written.read_text())[str(study)]] == [
        "seed3/eval sft-only (held_out)", "seed3/rft/round1", "seed3/sft-4demos"]
    assert main(["stats", str(written), "--costs"]) == 2
    assert "reads a study's results folder" in capsys.readouterr().err
    assert main(["stats", str(study), "--costs", "--plan", "algorithm-comparison", "--keep-first", "sft-only"]) == 2
    assert "leave out --keep-first, --plan" in capsys.readouterr().err  # not silently ignored


def test_each_evaluation_is_in_outcomes_json_as_it_ends_so_a_cut_run_loses_none(tmp_path, policy, monkeypatch):
    from turngym.trainers import rollout

    real, calls = rollout.evaluate_policy, []

    def cut_at_the_fourth(*args, **kwargs):
        calls.append(kwargs.get("name"))
        if len(calls) == 4:
            raise RuntimeError("the machine went away")
        return real(*args, **kwargs)

    monkeypatch.setattr(rollout, "evaluate_policy", cut_at_the_fourth)
    config = tiny_study(tmp_path, policy, algorithms={"turn_rloo": {}}, evaluation={"num_tasks": 2, "curve_points": 0,
                        "panels": {"longer": {"env_kwargs": {"turns": 3}}}})
    with pytest.raises(RuntimeError, match="went away"):
        compare_algorithms.run(config, progress=False)
    out = Path(config.results_dir) / "tiny"
    so_far = json.loads((out / "outcomes.json").read_text())
    assert calls == ["base", "base", "sft-only", "sft-only"]  # held_out then longer, for each arm
    assert {label: {seed: sorted(panels) for seed, panels in arm["outcomes"].items()}
            for label, arm in so_far["arms"].items()} == {"base": {"0": ["held_out", "longer"]},
                                                          "sft-only": {"0": ["held_out", "longer"]}}
    assert so_far["arms"]["sft-only"]["outcomes"]["0"]["longer"] == {}  # the cut evaluation holds nothing
    assert not list(out.glob(".*.partial"))


def test_the_learning_signal_of_an_rl_stage_and_its_table_are_the_logs_numbers():
    """learning_signal reads one stage's log per step; signal_table pools an arm's seeds' steps (hand-computed)."""
    from turngym.recipes.study_curves import learning_signal

    seed_a = [{"advantages/frac_zero_groups": 1.0, "policy/skipped_zero_advantages": 1.0,
               "sampling/importance_sampling_ratio/mean": 0.9},
              {"advantages/frac_zero_groups": 0.75, "policy/skipped_zero_advantages": 0.0,
               "sampling/importance_sampling_ratio/mean": 1.1},
              {"train_runtime": 12.0},  # the trainer's closing row: not a step
              {"advantages/frac_zero_groups": 1.0, "policy/skipped_zero_advantages": 1.0,
               "sampling/importance_sampling_ratio/mean": 0.7}]
    seed_b = [{"advantages/frac_zero_groups": 0.5}, {"advantages/frac_zero_groups": 0.0}]
    a, b = learning_signal(seed_a), learning_signal(seed_b)
    assert a == {"tied_groups": [1.0, 0.75, 1.0], "skipped": [1.0, 0.0, 1.0], "is_weight_means": [0.9, 1.1, 0.7]}
    assert b == {"tied_groups": [0.5, 0.0], "skipped": [], "is_weight_means": []}
    assert learning_signal([{"loss": 1.0}]) is None  # an estimator with no groups logged

    table = compare_algorithms.signal_table({"turn_rloo": [{"signal": a}, {"signal": b}],
                                             "ppo": [{"signal": None}], "grpo": []})
    assert table[1] == "## Learning signal (RL stages)"
    rows = [line for line in table if line.startswith("| ") and not line.startswith("| policy")]
    # tied: (1 + 0.75 + 1 + 0.5 + 0) / 5 steps; skipped: seed a's 2 of 3 (seed b logged none)
    assert rows == ["| turn_rloo | 2 | 5 | 65.0 % | 3 of 5 | 66.7 % | 0.70-1.10 |"]
    assert compare_algorithms.signal_table({"ppo": [{"signal": None}]}) == []


def test_compare_writes_table_plot_and_summary_and_resumes(tmp_path, policy, monkeypatch, capsys):
    config = tiny_study(tmp_path, policy)
    summary, out = compare_algorithms.run(config)

    # Each stage said where the study stood, in the order the stage plan counts them, and how long it took.
    printed = capsys.readouterr().out
    said = re.findall(r"study: stage (\d+) of (\d+)", printed)
    assert [int(k) for k, _ in said] == list(range(1, 12)) and {n for _, n in said} == {"11"}  # 4 arms, 2 panels
    took = r"\d+ (?:s|min)"
    ended = re.findall(rf"   finished stage (\d+) of 11 \((.+?)\) in {took} \(expected {took}\); {took} elapsed, "
                       rf"(?:about {took} left|no stage left)", printed)
    assert [int(k) for k, _ in ended] == list(range(1, 12))
    assert [name.removeprefix("seed 0 (1/1) · ") for _, name in ended][2:5] == [
        "SFT on 4 demos", "eval sft-only on held_out", "eval sft-only on longer"]
    assert "stage 11 of 11 (seed 0 (1/1) · eval turn_rloo on longer): about " in printed

    table = (out / "results.md").read_text()
    for label in ("base", "sft-only", "ppo", "turn_rloo"):
        assert f"| {label} |" in table
    assert "(reference)" in table and "## Panel `longer`" in table
    assert (out / "learning_curves.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((out / "summary.json").read_text())["arms"].keys() == summary["arms"].keys()
    # Every stage kept the run's peak memory when it ended; the table's footer gives the highest.
    peaks = [stage["peak_rss_gb"] for stage in summary["stages"].values()] + [
        json.loads(f.read_text())["peak_rss_gb"] for f in (out / "evals").glob("*/*.json")]
    assert len(peaks) == 1 + 2 + 4 * 2 and min(peaks) > 0 and summary["peak_rss_gb"] == max(peaks)
    assert f"peak resident memory {max(peaks):.1f} GB" in table
    # ... and each stage's own time and peak are a table.
    costs = {row["stage"]: row for row in summary["stage_costs"]}
    assert len(costs) == 11 and costs["seed0/ppo"]["peak_rss_gb"] == summary["stages"]["seed0/ppo"]["peak_rss_gb"]
    assert "## Cost by stage" in table and "| seed0/eval turn_rloo (longer) |" in table
    # Each RL arm's learning signal, from its stage's log (2 steps each).
    assert "## Learning signal (RL stages)" in table
    for label in ("ppo", "turn_rloo"):
        (run,) = summary["curves"][label]
        assert len(run["signal"]["tied_groups"]) == 2 and all(0.0 <= t <= 1.0 for t in run["signal"]["tied_groups"])
        assert re.search(rf"^\| {label} \| 1 \| 2 \| [\d.]+ % \| \d of 2 \|", table, re.MULTILINE)

    # Every RL arm spent the same budget, from the same SFT checkpoint.
    for label in ("ppo", "turn_rloo"):
        (stage,) = summary["arms"][label]["rl"]
        assert (stage["episodes"], stage["steps"], stage["episodes_per_step"]) == (8, 2, 4)
        assert stage["start"] == str(out / "seed0" / "sft-4demos" / "model")
        assert stage["sampled_tokens"] > 0
        assert not (out / "seed0" / label / "trainer").exists()  # resume checkpoints are cleaned up

    # The table's numbers are the evaluation files' outcomes, paired with SFT-only's on the same tasks.
    def wins(label: str, panel: str = "held_out") -> list[float]:
        rows = json.loads((out / "evals" / label / f"seed0-{panel}.json").read_text())["outcomes"]
        return [float(o["won"]) for o in sorted(rows, key=lambda o: o["task"])]

    ppo = summary["arms"]["ppo"]["panels"]["held_out"]
    assert ppo["episodes"] == 4 and ppo["success"] == sum(wins("ppo")) / 4
    gains = [a - b for a, b in zip(wins("ppo"), wins("sft-only"), strict=True)]
    assert ppo["vs_reference"]["mean"] == pytest.approx(sum(gains) / 4)
    assert summary["arms"]["ppo"]["panels"]["longer"]["episodes"] == 4

    # Learning curve: the start policy's and the final policy's evaluations bracket the mid-run one.
    (curve,) = summary["curves"]["ppo"]
    assert [x for x, _ in curve["held_out"]] == [0, 4, 8]
    assert [x for x, _ in curve["train_return"]] == [4, 8]
    # The plot's reference lines are the no-RL arms' success on the curve's games (the first curve_tasks tasks).
    curve_ids = {t.id for t in Study(config, compare_algorithms.arms_of(config), progress=False)._curve_tasks()}
    won = [o["won"] for o in json.loads((out / "evals" / "sft-only" / "seed0-held_out.json").read_text())["outcomes"]
           if o["task"] in curve_ids]
    assert len(won) == 2 and summary["curve_reference"]["sft-only"] == sum(won) / 2
    assert set(summary["curve_reference"]) == {"base", "sft-only"}

    # The per-game outcomes behind the table are written beside it, and give back its numbers.
    record = json.loads((out / "outcomes.json").read_text())
    assert record["arms"]["ppo"]["outcomes"]["0"]["held_out"] == {
        o["task"]: float(o["won"]) for o in json.loads((out / "evals" / "ppo" / "seed0-held_out.json").read_text())[
            "outcomes"]}
    recomputed = recompute(record)
    assert recomputed["reference"] == "sft-only"
    for label in ("base", "ppo", "turn_rloo"):
        mine, theirs = recomputed["arms"][label], summary["arms"][label]["panels"]["held_out"]
        assert mine["success"] == pytest.approx(theirs["success"])
        assert mine["vs_reference"]["ci95"] == pytest.approx(theirs["vs_reference"]["ci95"])
    longer = recompute(record, panel="longer")["arms"]["ppo"]["vs_reference"]
    assert longer["ci95"] == pytest.approx(summary["arms"]["ppo"]["panels"]["longer"]["vs_reference"]["ci95"])
    with pytest.raises(ValueError, match="no arm 'nope'"):
        recompute(record, "nope")

    # A rerun with the same config trains and evaluates nothing again.
    def refuse(*args, **kwargs):
        raise AssertionError("a finished stage ran again")

    monkeypatch.setattr("turngym.trainers.sft.run_sft", refuse)
    monkeypatch.setattr("turngym.trainers.trainer.TurnGymTrainer.train", refuse)
    monkeypatch.setattr("turngym.trainers.rollout.evaluate_policy", refuse)
    again, _ = compare_algorithms.run(config, progress=False)
    assert json.loads(json.dumps(again["arms"])) == json.loads(json.dumps(summary["arms"]))

    # More seeds after the finished ones extend the study (and are saved with it); other seed changes are refused.
    assert Study.changed_options(tiny_study(tmp_path, policy, seeds=[0, 1])) == []
    for seeds in ([1], [1, 0], [2, 3]):
        assert Study.changed_options(tiny_study(tmp_path, policy, seeds=seeds)) == ["seeds"], seeds
    Study(tiny_study(tmp_path, policy, seeds=[0, 1]), compare_algorithms.arms_of(config), progress=False)
    assert json.loads((out / "config.json").read_text())["seeds"] == [0, 1]
    assert Study.changed_options(config) == ["seeds"]  # the study now has 2 seeds: one alone is not it
    # The same folder named another way (relative, from its parent) is the same study: where it is, not what.
    monkeypatch.chdir(tmp_path)
    assert Study.changed_options(tiny_study(tmp_path, policy, seeds=[0, 1], results_dir="results")) == []

    # A different config in the same folder is refused; --restart starts over.
    changed = tiny_study(tmp_path, policy, episodes=12, seeds=[0, 1])
    assert Study.changed_options(changed) == ["episodes"]
    with pytest.raises(ValueError, match="different config.*episodes"):
        compare_algorithms.run(changed, progress=False)
    Study(changed, compare_algorithms.arms_of(changed), restart=True, progress=False)
    assert not (out / "evals").exists()


def test_an_interrupted_rl_stage_resumes_from_its_checkpoint(tmp_path, policy, monkeypatch):
    from turngym.trainers.trainer import TurnGymTrainer

    config = tiny_study(tmp_path, policy, algorithms={"turn_rloo": {}}, sft=None,
                        evaluation={"num_tasks": 2, "curve_points": 0})
    study = Study(config, compare_algorithms.arms_of(config), progress=False)
    arm = study.arms[-1]
    train = TurnGymTrainer.train
    calls = []

    def stop_after_one_step(self, *args, **kwargs):
        calls.append(kwargs.get("resume_from_checkpoint"))
        if len(calls) == 1:
            self.args.max_steps = 1  # the first attempt "dies" after its first checkpoint
            train(self, *args, **kwargs)
            raise KeyboardInterrupt
        return train(self, *args, **kwargs)

    rollout = TurnGymTrainer._rollout
    rollouts = []

    def counted(self, *args, **kwargs):
        rollouts.append(self.state.global_step)
        return rollout(self, *args, **kwargs)

    monkeypatch.setattr(TurnGymTrainer, "train", stop_after_one_step)
    monkeypatch.setattr(TurnGymTrainer, "_rollout", counted)
    with pytest.raises(KeyboardInterrupt):
        study.rl_stage(arm, str(policy), 0)
    assert (study.out / "seed0" / "turn_rloo" / "trainer" / "checkpoint-1").is_dir()
    study.rl_stage(arm, str(policy), 0)
    assert calls == [None, True]
    assert rollouts == [0, 1]  # the resumed run played step 2 only
    log = json.loads((study.out / "seed0" / "turn_rloo" / "log.json").read_text())
    assert [h["step"] for h in log if "episode/return" in h] == [1, 2]


def test_rl_tasks_are_disjoint_from_the_sft_demos(tmp_path, policy):
    from turngym.envs.panels import task_panel
    from turngym.trainers.trainer import train_tasks

    config = tiny_study(tmp_path, policy)
    study = Study(config, compare_algorithms.arms_of(config), progress=False)
    arm = next(a for a in study.arms if a.trains_rl)
    rl = study.rl_config(arm, str(policy), 0, tmp_path / "x")
    demos = task_panel(rl.env_id, rl.train_split, config.sft["num_demos"], rl.world_kwargs(), progress=False)
    trained = train_tasks(rl)
    assert len(trained) == config.world["num_train_tasks"]
    assert not {t.id for t in trained} & {t.id for t in demos}
    # An explicit choice in the rl section wins over the default.
    overlap = tiny_study(tmp_path, policy, name="overlap", rl={**config.rl, "skip_train_tasks": 0})
    assert Study(overlap, [arm], progress=False).rl_config(arm, str(policy), 0, tmp_path / "y").skip_train_tasks == 0


def test_a_null_arm_shuffles_advantages_and_is_reported_as_the_null_control(tmp_path, policy):
    config = tiny_study(tmp_path, policy, algorithms={"null": {"algorithm": "turn_rloo", "null": True}}, episodes=4,
                        evaluation={"num_tasks": 2, "curve_points": 0})
    arms = compare_algorithms.arms_of(config)
    assert [(a.label, a.null) for a in arms] == [("base", False), ("sft-only", False), ("null", True)]
    study = Study(config, arms, progress=False)
    rl = study.rl_config(arms[-1], str(policy), 0, tmp_path / "x")
    assert rl.shuffle_advantages and rl.algorithm == "turn_rloo"
    summary, out = compare_algorithms.run(config, progress=False)
    null = summary["arms"]["null"]
    assert null["null"] and null["rl"][0]["episodes"] == 4
    assert null["panels"]["held_out"]["vs_reference"]["pairs"] == 2  # paired with SFT-only, task by task
    table = (out / "results.md").read_text()
    (row,) = [line for line in table.splitlines() if line.startswith("| null (null control) |")]
    assert " to " in row  # its paired difference to SFT-only
    assert "Null control (null)" in table


def test_a_lora_arm_is_saved_merged_and_evaluated_like_any_policy(tmp_path, policy):
    config = tiny_study(tmp_path, policy, algorithms={"turn_rloo": {"use_peft": True, "lora_r": 4}}, sft=None,
                        episodes=4, evaluation={"num_tasks": 2, "curve_points": 0})
    summary, out = compare_algorithms.run(config, progress=False)
    saved = out / "seed0" / "turn_rloo" / "policy"
    assert (saved / "model.safetensors").is_file() and not (saved / "adapter_config.json").exists()
    assert summary["arms"]["turn_rloo"]["panels"]["held_out"]["episodes"] == 2


def test_the_base_model_is_evaluated_once_per_study(tmp_path, policy):
    """Greedy and untrained, the base model plays the same episodes for every seed: one evaluation stands for all."""
    config = tiny_study(tmp_path, policy, seeds=[0, 1, 2], evaluation={"num_tasks": 3, "curve_points": 0})
    study = Study(config, [Arm("base")], progress=False)
    summary = study.run()
    assert sorted(p.name for p in (study.out / "evals" / "base").glob("*.json")) == ["seed0-held_out.json"]
    held = summary["arms"]["base"]["panels"]["held_out"]
    assert held["episodes"] == 9 and set(held["success_per_seed"]) == {0, 1, 2}
    assert len(set(held["success_per_seed"].values())) == 1
    # the breakdown counts its episodes once, not once per seed it stands for
    assert sum(d["episodes"] for d in held["by_difficulty"].values()) == 3
    # sampled at a temperature, or trained, every seed plays its own episodes
    hot = tiny_study(tmp_path, policy, name="hot", seeds=[0, 1], evaluation={"temperature": 0.7})
    assert not Study(hot, [Arm("base")], progress=False).seed_independent(Arm("base"))
    assert not study.seed_independent(Arm("sft-only", demos=4))


def test_a_held_out_panel_that_repeats_training_tasks_is_refused_before_any_stage(tmp_path, policy):
    # Signals draws 2^2 sequences: its eval tasks repeat train tasks by content under other ids and seeds.
    config = tiny_study(tmp_path, policy, evaluation={"num_tasks": 4, "curve_points": 0, "overlap": "refuse"})
    study = Study(config, [Arm("base")], progress=False)
    refused = r"(?s)signals/eval/10000 \(eval\) is the same task as signals/train/.*panel held_out.*overlap: report"
    with pytest.raises(SplitOverlapError, match=refused):
        study.run()
    assert not (study.out / "evals").exists()  # nothing ran
    reported = Study(tiny_study(tmp_path, policy, name="r", evaluation={"num_tasks": 4, "overlap": "report"}),
                     [Arm("base")], progress=False).check_panels()
    assert reported["held_out"]["shared_with_train"] == 4 and reported["train"]["tasks"] == 8
    assert reported["held_out"]["templates"] is None  # Signals has no quest templates
    with pytest.raises(ValueError, match="num_train_tasks is not set"):
        Study(tiny_study(tmp_path, policy, name="u", world={"env_id": "turngym/Signals-v0"}), [Arm("base")],
              progress=False).check_panels()


def test_the_reserved_test_split_needs_a_preregistered_plan(tmp_path, policy):
    with pytest.raises(ValueError, match="the test split is reserved.*preregistered: docs/plans"):
        tiny_study(tmp_path, policy, evaluation={"split": "test"})
    with pytest.raises(ValueError, match="the test split is reserved"):  # an extra panel on it too
        tiny_study(tmp_path, policy, evaluation={"panels": {"fresh": {"split": "test"}}})
    with pytest.raises(ValueError, match="no plan at"):
        tiny_study(tmp_path, policy, evaluation={"split": "test"}, preregistered=str(tmp_path / "missing.md"))
    plan = tmp_path / "plan.md"
    plan.write_text("hypothesis, recipe, seeds, panel, analysis\n")
    assert tiny_study(tmp_path, policy, evaluation={"split": "test"}, preregistered=str(plan)).preregistered
    record = _plan_record(str(plan))
    assert record["sha256"] == hashlib.sha256(plan.read_bytes()).hexdigest() and record["path"] == str(plan)


def test_budget_sweep_writes_table_and_plot(tmp_path, policy):
    config = tiny_study(tmp_path, policy, name="budget", algorithms={}, rl={
        "num_generations": 2, "per_device_train_batch_size": 4, "learning_rate": 1e-3, "beta": 0.0,
        "max_completion_length": 128, "save_strategy": "no", "algorithm": "turn_rloo"},
        budget=16, demo_cost=4, demos=[0, 1], evaluation={"num_tasks": 2, "curve_points": 0,
                                                           "panels": {"harder": {"env_kwargs": {"turns": 3}}}})
    summary, out = sft_rl_budget.run(config, progress=False)
    assert list(summary["arms"]) == ["0demos+16rl", "1demos+12rl"]
    assert summary["arms"]["1demos+12rl"]["rl"][0]["episodes"] == 12
    table = (out / "results.md").read_text()
    assert "| 1 | 12 | 25.0 % |" in table and "harder success" in table
    assert (out / "budget.png").read_bytes()[:4] == b"\x89PNG"


def test_turngym_compare_command(tmp_path, policy, capsys):
    import yaml

    from turngym.recipes.cli import main

    config = tiny_study(tmp_path, policy, algorithms={"grpo": {}}, sft=None,
                        evaluation={"num_tasks": 2, "curve_points": 0})
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config.to_dict()))
    assert main(["compare", "--config", str(path), "--name", "cli"]) == 0
    printed = capsys.readouterr().out
    assert "| grpo |" in printed and "learning_curves.png" in printed and "measured time" in printed
    # `turngym stats` recomputes the table from the outcomes file alone
    assert main(["stats", str(tmp_path / "results" / "cli")]) == 0
    printed = capsys.readouterr().out
    assert "| grpo | " in printed and "vs base (95 % CI, seeds x tasks)" in printed and "McNemar p" in printed
    assert main(["stats", str(tmp_path / "missing")]) == 2
    assert main(["compare", "--config", str(tmp_path / "nope.yaml")]) == 2


def _rft_study(tmp_path: Path, policy: Path, **overrides) -> StudyConfig:
    """The tiny study with an RFT arm (2 rounds of 4 episodes, 2 a game) beside two RL arms, one panel, 1-turn games."""
    rft = {"algorithm": "rft", "rounds": 2, "demo_samples_per_task": 2, "num_train_epochs": 1, "learning_rate": 1e-3}
    options = {"name": "tiers", "algorithms": {"turn_rloo": {}, "rft": rft, "grpo": {}},
               "evaluation": {"num_tasks": 2, "curve_points": 0}}
    config = tiny_study(tmp_path, policy, **{**options, **overrides})
    config.world["env_kwargs"] = {"turns": 1, "colours": 2}  # one right command in 2 turns: wins to keep
    return config


def test_a_study_runs_its_arms_tier_by_tier_with_an_rft_arm(tmp_path, policy, monkeypatch, capsys):
    """`--arms` runs base, SFT-only and the named arms into the study's folder; a later call with other arms extends
    the same study (the same config: nothing refused, nothing finished runs again) and tables every finished arm. The
    RFT arm samples its budget in rounds from the seed's SFT checkpoint, keeps the wins, fine-tunes on them, and
    records each round's stats in its done.json."""
    import yaml

    from tests.test_sft import SpelledPolicy
    from turngym.recipes.cli import main

    sampled = []

    def backend(model, tokenizer):  # the tiny model seldom wins: a policy that does, spelled on the model's tokenizer
        sampled.append(model)
        return SpelledPolicy(tokenizer)

    monkeypatch.setattr("turngym.trainers.sft.policy_backend", backend)
    config = _rft_study(tmp_path, policy)
    summary, out = compare_algorithms.run(config, arms=["rft"])
    said = re.findall(r"study: stage (\d+) of (\d+)", capsys.readouterr().out)
    assert [int(k) for k, _ in said] == [1, 2, 3, 4, 5] and {n for _, n in said} == {"5"}
    study = Study(config, compare_algorithms.arms_of(config), only=["base", "sft-only", "rft"], progress=False)
    assert [(s.kind, s.marker.parent.name) for s in study.stage_plan()] == [
        ("eval", "base"), ("sft", "sft-4demos"), ("eval", "sft-only"), ("rl", "rft"), ("eval", "rft")]

    done = json.loads((out / "seed0" / "rft" / "done.json").read_text())
    assert (done["algorithm"], done["episodes"], done["rounds"], done["episodes_per_round"]) == ("rft", 8, 2, 4)
    assert done["start"] == str(out / "seed0" / "sft-4demos" / "model") and done["seconds"] > 0
    assert done["peak_rss_gb"] > 0 and len(sampled) == 2  # each round samples with the policy it has then
    assert done["backend"] == "hf" and study.rft_sampler("any") is None  # on HF the policy samples itself
    per_round = done["per_round"]
    assert [r["taskset"].rsplit("[", 1)[1] for r in per_round] == ["4:6]", "6:8]"]  # RL's games, after the demos
    assert all(r["played"] == 4 and 0 < r["kept"] <= 4 for r in per_round)
    assert done["kept"] == sum(r["kept"] for r in per_round)
    assert summary["arms_run"] == ["base", "sft-only", "rft"] and summary["arms_left_out"] == ["turn_rloo", "grpo"]
    assert list(summary["arms"]) == ["base", "sft-only", "rft"] and summary["arms"]["rft"]["rft"]
    assert summary["stages"]["seed0/rft"]["rounds"] == 2
    table = (out / "results.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| rft |"))  # the main table's
    assert row.startswith("| rft | 8 | - | ")  # its budget in sampled episodes; RL's token count is not RFT's
    assert "RFT (rejection-sampling fine-tuning, expert iteration): rft." in table
    assert "2 rounds of 4 episodes (2 a game, temperature 0.7)" in table
    assert "Not in this table (not run yet, or unfinished for some seed): turn_rloo, grpo." in table
    assert not (out / "seed0" / "turn_rloo").exists()

    # The next tier through the command line: the same config file, other arms; finished stages are not run again.
    def refuse(*args, **kwargs):
        raise AssertionError("a finished stage ran again")

    monkeypatch.setattr("turngym.trainers.sft.run_sft", refuse)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))  # the arms in the config's order
    assert main(["compare", "--config", str(path), "--arms", "turn_rloo"]) == 0
    said = re.findall(r"study: stage (\d+) of (\d+)", capsys.readouterr().out)
    assert said == [("6", "7"), ("7", "7")]  # the finished stages count: turn_rloo's RL and its evaluation are left
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["arms"]) == ["base", "sft-only", "turn_rloo", "rft"]  # the config's order
    assert summary["arms_run"] == ["base", "sft-only", "turn_rloo"] and summary["arms_left_out"] == ["grpo"]
    assert [(p["a"], p["b"]) for p in summary["pairwise"]] == [("turn_rloo", "rft")]
    assert summary["arms"]["turn_rloo"]["rl"][0]["episodes"] == 8 and not summary["arms"]["turn_rloo"]["rft"]
    record = json.loads((out / "outcomes.json").read_text())
    assert set(record["arms"]) == {"base", "sft-only", "turn_rloo", "rft"}
    table = (out / "results.md").read_text()
    assert "| turn_rloo | 8 | " in table and "| rft | 8 | - | " in table and "| turn_rloo | rft |" in table
    assert "Not in this table (not run yet, or unfinished for some seed): grpo." in table

    # --arms none: base and SFT-only alone (a stop rule's seeds); here all finished, so nothing runs again.
    assert main(["compare", "--config", str(path), "--arms", "none"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["arms_run"] == ["base", "sft-only"] and summary["arms_left_out"] == ["grpo"]
    assert list(summary["arms"]) == ["base", "sft-only", "turn_rloo", "rft"]
    capsys.readouterr()
    assert main(["compare", "--config", str(path), "--arms", "none", "rft"]) == 2
    assert "--arms none runs no RL arm; it cannot be given with rft" in capsys.readouterr().err

    # --arms names only the config's entries; a changed config is refused as before.
    with pytest.raises(ValueError, match="--arms: no algorithm entry ppo in the config; it has turn_rloo, rft, grpo"):
        compare_algorithms.run(config, arms=["ppo"], progress=False)
    with pytest.raises(ValueError, match="different config.*episodes"):
        compare_algorithms.run(_rft_study(tmp_path, policy, episodes=16), arms=["grpo"], progress=False)

    # A stop rule's shape: the RL arms ran for seed 0 only, then base and SFT-only for another seed. The RL arms
    # leave the pooled table (they lack seed 1) but keep their outcomes and a table of their own, paired with
    # SFT-only on their seed, and the arms' comparison.
    monkeypatch.undo()
    monkeypatch.setattr("turngym.trainers.sft.policy_backend", backend)
    assert main(["compare", "--config", str(path), "--seeds", "0", "1", "--arms", "none"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["arms"]) == ["base", "sft-only"] and summary["arms_left_out"] == ["turn_rloo", "rft", "grpo"]
    assert {label: arm["seeds"] for label, arm in summary["partial_arms"].items()} == {"turn_rloo": [0], "rft": [0]}
    assert summary["partial_arms"]["rft"]["panels"]["held_out"]["vs_reference"]["seeds"] == 1
    assert [(p["a"], p["b"], p["seeds"]) for p in summary["pairwise"]] == [("turn_rloo", "rft", 1)]
    record = json.loads((out / "outcomes.json").read_text())
    assert set(record["arms"]["turn_rloo"]["outcomes"]) == {"0"} and set(record["arms"]["sft-only"]["outcomes"]) == {
        "0", "1"}
    table = (out / "results.md").read_text()
    assert "Arms run for some seeds only (not pooled with the table above; paired with sft-only" in table
    assert re.search(r"^\| turn_rloo \| 0 \| .+ %", table, re.MULTILINE)
    assert re.search(r"^\| rft \| 0 \| ", table, re.MULTILINE)
    assert "Not in this table (not run yet, or unfinished for some seed): grpo." in table


@pytest.mark.slow  # four RL stages, two in fresh processes: 40-90 s; the one-seed test below is in the fast suite
def test_a_study_runs_one_rl_stage_per_process_in_its_own_order(tmp_path, policy, capsys):
    """`--max-rl-stages 1` runs the next unfinished RL stage (with the SFT and evaluations around it) and stops before
    the one after, status 75, naming it: the study's seed-major order, whatever was run before. Then
    `--process-per-rl-stage` finishes the study in fresh processes, one RL stage each; the last writes the tables."""
    import yaml

    from turngym.recipes.cli import main
    from turngym.recipes.compare_algorithms import MORE_STAGES_EXIT

    config = tiny_study(tmp_path, policy, name="staged", algorithms={"grpo": {}, "turn_rloo": {}}, seeds=[0, 1],
                        evaluation={"num_tasks": 2, "curve_points": 0})
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))
    out = tmp_path / "results" / "staged"

    def trained() -> list[str]:
        return sorted(p.parent.relative_to(out).as_posix() for p in out.glob("seed*/*/done.json")
                      if "sft" not in p.parent.name)

    assert main(["compare", "--config", str(path), "--max-rl-stages", "1"]) == MORE_STAGES_EXIT
    assert trained() == ["seed0/grpo"] and (out / "evals" / "grpo" / "seed0-held_out.json").exists()
    assert "stopped after 1 RL/RFT stage (--max-rl-stages); next: turn_rloo, seed 0." in capsys.readouterr().out
    assert not (out / "summary.json").exists()  # the call that finishes the study writes the tables
    so_far = json.loads((out / "outcomes.json").read_text())  # and the outcomes so far, which `stats` reads
    assert {label: list(arm["outcomes"]) for label, arm in so_far["arms"].items()} == {
        "base": ["0", "1"], "sft-only": ["0"], "grpo": ["0"]}  # the base model's seed-0 evaluation stands for seed 1
    assert main(["stats", str(out)]) == 0 and "| grpo | " in capsys.readouterr().out
    assert main(["compare", "--config", str(path), "--max-rl-stages", "1"]) == MORE_STAGES_EXIT
    assert trained() == ["seed0/grpo", "seed0/turn_rloo"]
    assert "next: grpo, seed 1." in capsys.readouterr().out  # every arm of seed 0 before seed 1
    assert main(["compare", "--config", str(path), "--max-rl-stages", "0"]) == 2

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-m", "turngym.recipes.cli", "compare", "--config", str(path),
                           "--process-per-rl-stage"], check=False, capture_output=True, text=True, env=env,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("stopped after 1 RL/RFT stage") == 1  # seed 1's grpo, then a process for turn_rloo
    assert trained() == ["seed0/grpo", "seed0/turn_rloo", "seed1/grpo", "seed1/turn_rloo"]
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["arms"]) == ["base", "sft-only", "grpo", "turn_rloo"] and summary["config"]["seeds"] == [0, 1]
    assert main(["compare", "--config", str(path), "--process-per-rl-stage", "--max-rl-stages", "1"]) == 2


def test_a_one_seed_study_stops_after_one_rl_stage_and_a_fresh_process_finishes_it(tmp_path, policy, capsys):
    """The fast suite's share of the test above: one stage in this process, the other in a fresh one."""
    import yaml

    from turngym.recipes.cli import main
    from turngym.recipes.compare_algorithms import MORE_STAGES_EXIT

    config = tiny_study(tmp_path, policy, name="staged1", algorithms={"grpo": {}, "turn_rloo": {}}, seeds=[0],
                        evaluation={"num_tasks": 2, "curve_points": 0})
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))
    out = tmp_path / "results" / "staged1"
    assert main(["compare", "--config", str(path), "--max-rl-stages", "1"]) == MORE_STAGES_EXIT
    assert "next: turn_rloo, seed 0." in capsys.readouterr().out and not (out / "summary.json").exists()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-m", "turngym.recipes.cli", "compare", "--config", str(path),
                           "--process-per-rl-stage"], check=False, capture_output=True, text=True, env=env,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "stopped after 1 RL/RFT stage" not in done.stdout  # the last stage: its process writes the tables
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["arms"]) == ["base", "sft-only", "grpo", "turn_rloo"]


def test_an_rft_budget_that_is_not_whole_rounds_is_refused_before_any_stage(tmp_path, policy):
    """episodes must split into rounds x demo_samples_per_task; the study says so in one line before it runs
    anything, even for an arm a later tier runs."""
    config = _rft_study(tmp_path, policy, episodes=8)
    config.algorithms["rft"]["rounds"] = 3
    with pytest.raises(ValueError, match=r"^rft: RFT's budget of 8 episodes is not 3 rounds \(rounds\) of whole games "
                                         r"x 2 samples \(demo_samples_per_task\); make episodes a multiple of rounds x "
                                         r"demo_samples_per_task = 6$") as refused:
        compare_algorithms.run(config, arms=["turn_rloo"], progress=False)
    assert "\n" not in str(refused.value)
    out = Path(config.results_dir) / config.name
    assert sorted(p.name for p in out.iterdir()) == ["config.json"]  # no stage ran
    config.algorithms["rft"] = {"algorithm": "rft", "rounds": 2, "demo_samples_per_task": 2, "num_demos": 4}
    with pytest.raises(ValueError, match="rft: an RFT arm's num_demos is set by the study"):
        Study(config, compare_algorithms.arms_of(config), restart=True, progress=False).run()
    config.algorithms["rft"] = {"algorithm": "rft", "rounds": 2, "demo_samples_per_task": 2, "demo_backend": "hf"}
    with pytest.raises(ValueError, match="rft: an RFT arm's demo_backend is set by the study .*the study's backend"):
        Study(config, compare_algorithms.arms_of(config), restart=True, progress=False).run()


def test_an_interrupted_rft_stage_resumes_at_its_unfinished_round(tmp_path, policy, monkeypatch):
    """Each RFT round is `turngym sft --demos policy`'s round: its own games and seed, from the policy the round before
    trained; a finished round leaves a marker, so a stage cut in round 3 reruns round 3 only, from round 2's policy."""
    from tests.test_sft import SpelledPolicy
    from turngym.trainers import sft

    monkeypatch.setattr("turngym.trainers.sft.policy_backend", lambda model, tokenizer: SpelledPolicy(tokenizer))
    config = _rft_study(tmp_path, policy, sft=None, episodes=12, name="rft-resume")
    config.algorithms["rft"]["rounds"] = 3
    study = Study(config, compare_algorithms.arms_of(config), only=["rft"], progress=False)
    (arm,) = study.arms
    folder = study.out / "seed0" / "rft"
    whole = study.rft_config(arm, str(policy), 0, folder)
    assert (whole.rounds, whole.num_demos, whole.skip_train_tasks, whole.demo_seed) == (3, 4, 0, 0)
    rounds = [study.rft_config(arm, f"start{k}", 0, folder, round_index=k) for k in range(3)]
    assert [(c.rounds, c.num_demos, c.skip_train_tasks, c.demo_seed) for c in rounds] == [
        (1, 4, 0, 0), (1, 4, 2, 1), (1, 4, 4, 2)]  # the games and seeds of sft's rounds 1-3 within one run
    assert [Path(c.output_dir).name for c in rounds] == ["round1", "round2", "policy"]

    run_sft, starts = sft.run_sft, []

    def cut_in_round_three(options, **kwargs):
        starts.append(options.model_name_or_path)
        if len(starts) == 3:
            raise KeyboardInterrupt
        return run_sft(options, **kwargs)

    monkeypatch.setattr("turngym.trainers.sft.run_sft", cut_in_round_three)
    with pytest.raises(KeyboardInterrupt):
        study.rft_stage(arm, str(policy), 0)
    assert starts == [str(policy), str(folder / "round1"), str(folder / "round2")]
    assert (folder / "round1" / "done.json").is_file() and not (folder / "round1" / "model.safetensors").exists()
    assert (folder / "round2" / "model.safetensors").is_file() and not (folder / "done.json").exists()
    study.rft_stage(arm, str(policy), 0)
    assert starts[3:] == [str(folder / "round2")]  # round 3 only, from round 2's policy
    done = json.loads((folder / "done.json").read_text())
    assert [r["taskset"].rsplit("[", 1)[1] for r in done["per_round"]] == [":2]", "2:4]", "4:6]"]
    assert [r["start"] for r in done["per_round"]] == starts[:2] + starts[3:]
    assert (folder / "policy" / "model.safetensors").is_file() and not (folder / "round2").exists()
    # The rounds run one at a time train the policy `turngym sft --demos policy --rounds 3` trains in one run.
    import torch

    from turngym.agents.models import load_policy

    one_run = study.rft_config(arm, str(policy), 0, tmp_path / "one-run")
    run_sft(one_run)
    assert json.loads((Path(one_run.output_dir) / "sft_demos.json").read_text())["rounds"] == [
        {k: v for k, v in r.items() if k not in ("seconds", "start", "peak_rss_gb")} for r in done["per_round"]]
    (mine, _), (theirs, _) = load_policy(str(folder / "policy")), load_policy(one_run.output_dir)
    assert all(torch.equal(a, b) for a, b in zip(mine.parameters(), theirs.parameters(), strict=True))
