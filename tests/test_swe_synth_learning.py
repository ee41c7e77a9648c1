"""Issue 42, point 6: a synthesized set's easy tier, split by repository, and the study config that learns on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from turngym.envs.swe.synth.world import synth_tasks, task_panel
from turngym.recipes.swe_synth_learning import split_set

ROOT = Path(__file__).resolve().parents[1]


def record(package: str, number: int, tier: str) -> dict:
    return {"instance_id": f"{package}__1.0.m__{number:04d}", "repo": f"pypi/{package}", "base_commit": "",
            "problem_statement": "a test fails", "patch": "diff --git a/x.py b/x.py\n", "test_patch": "",
            "FAIL_TO_PASS": ["tests/test_x.py::test_a"], "PASS_TO_PASS": [], "repo_path": f"../../repos/{package}",
            "difficulty": "m", "difficulty_label": {"tier": tier}, "synth": {"package": package}}


@pytest.fixture
def source(tmp_path) -> Path:
    folder = tmp_path / "sets" / "whole"
    folder.mkdir(parents=True)
    rows = [record(p, i, "easy" if i % 2 else "hard") for p in ("alpha", "beta", "gamma") for i in range(20)]
    (folder / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_split_set_holds_whole_repositories_out_and_keeps_one_tier(source, tmp_path):
    out = tmp_path / "sets" / "easy"
    summary = split_set(source, out, eval_repos=["beta"], tier="easy", rule=None)
    assert summary["repositories"] == {"alpha": "train", "beta": "eval", "gamma": "train"}
    tasks = synth_tasks(out)
    assert len(tasks) == 30 and {t.payload["difficulty_label"]["tier"] for t in tasks} == {"easy"}
    assert {t.payload["repo"] for t in tasks.split("eval")} == {"pypi/beta"}
    assert "pypi/beta" not in {t.payload["repo"] for t in tasks if t.split != "eval"}
    assert set(tasks.splits) <= {"train", "eval_seen", "eval"} and summary["splits"]["eval"] == 10
    # repo_path still names the source set's repositories, from the new folder
    assert all(Path(t.payload["repo_path"]).resolve() == (source / "../../repos" / t.payload["repo"][5:]).resolve()
               for t in tasks)
    with pytest.raises(ValueError, match="no package delta"):
        split_set(source, tmp_path / "x", eval_repos=["delta"])


def test_the_tier_and_split_env_arguments_choose_the_panel(source):
    assert len(synth_tasks(source, tier="easy")) == 30 and len(synth_tasks(source, tier="hard")) == 30
    with pytest.raises(ValueError, match="tier must be one of easy, medium, hard"):
        synth_tasks(source, tier="trivial")
    with pytest.raises(KeyError, match="no medium tasks"):
        synth_tasks(source, tier="medium")
    panel = task_panel("eval", None, {"task_file": str(source), "tier": "easy", "split": "train"})
    assert len(panel) == 30  # the records carry no split: all train; the split env argument is the panel's


def test_the_study_config_compares_the_two_reward_sources_on_the_easy_tier():
    from turngym.recipes import compare_algorithms
    from turngym.recipes.study_config import load_config

    config = load_config(ROOT / "recipes" / "configs" / "compare" / "swe-synth-easy.yaml")
    arms = compare_algorithms.arms_of(config)
    assert [a.label for a in arms] == ["base", "sft-only", "turn_rloo_ratio", "turn_rloo_binary"]
    world = config.world["env_kwargs"]
    assert world["tier"] == "easy" and config.world["action_protocol"] == "tools"
    ratio, binary = (config.algorithms[label]["env_kwargs"] for label in ("turn_rloo_ratio", "turn_rloo_binary"))
    assert {**world, "reward": "ratio"} == ratio and {**world, "reward": "resolved"} == binary  # only the reward
    assert config.evaluation.split == "eval" and config.evaluation.panels == {"seen": {"env_kwargs": {
        "split": "eval_seen"}, "num_tasks": 15}}  # the set's 15 easy eval_seen tasks (the plan's status of 2026-12-04)
    assert len(config.seeds) == 5 and Path(ROOT / config.preregistered).is_file()


def test_the_study_finds_its_world_and_panels_in_a_fresh_process(tmp_path):
    """`turngym compare` on the study config, as a new process meets it: the world is registered only by the config's
    `imports`, the train panel (40 demos, then 32 RL tasks) and both held-out panels come from the set, disjoint."""
    import subprocess
    import sys

    source = tmp_path / "sets" / "whole"
    source.mkdir(parents=True)
    rows = [record(p, i, "easy") for p in ("alpha", "beta", "gamma", "delta") for i in range(100)]
    (source / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    split_set(source, tmp_path / "sets" / "easy", eval_repos=["beta"], tier="easy")
    script = f"""
import json
from turngym.recipes import compare_algorithms
from turngym.recipes.study import Study
from turngym.recipes.study_config import load_config
config = load_config({str(ROOT / "recipes/configs/compare/swe-synth-easy.yaml")!r})
config.world["env_kwargs"]["task_file"] = {str(tmp_path / "sets" / "easy")!r}
config.results_dir = {str(tmp_path / "results")!r}
study = Study(config, compare_algorithms.arms_of(config), progress=False)
print(json.dumps({{"games": study.training_games(), "check": study.check_panels()}}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["games"] == 40 + 32
    assert report["check"]["train"]["tasks"] == 72
    assert report["check"]["held_out"]["shared_with_train"] == 0 and report["check"]["seen"]["shared_with_train"] == 0
