"""Baselines, the rollout loop and evaluation on real TextWorld games."""

from __future__ import annotations

import json
import math

import pytest

from turngym.agents import HumanAgent, OracleAgent, RandomAgent, evaluate, markdown_table, summarise, wilson_interval
from turngym.agents.rollout import Trajectory
from turngym.envs.textworld import materialise, textworld_tasks
from turngym.recipes.cli import main as cli

ENV = "turngym/TextWorld-v0"


@pytest.fixture(scope="module")
def panel50():
    return materialise(textworld_tasks("w2-o3-q4", "eval", n=50), workers=2, progress=False)


def test_wilson_interval_matches_hand_computed_values():
    # k=8, n=10, z=1.96: centre = (0.8 + 0.19208) / 1.38416 = 0.716738; half = 1.96 * sqrt(0.016 + 0.009604) / 1.38416
    low, high = wilson_interval(8, 10)
    half = 1.96 * math.sqrt(0.8 * 0.2 / 10 + 1.96**2 / 400) / (1 + 1.96**2 / 10)
    assert low == pytest.approx(0.716738 - half, abs=1e-5)
    assert high == pytest.approx(0.716738 + half, abs=1e-5)
    assert low == pytest.approx(0.4902, abs=1e-4) and high == pytest.approx(0.9433, abs=1e-4)
    assert wilson_interval(0, 20)[0] == 0.0 and wilson_interval(20, 20)[1] == 1.0
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_summary_counts_per_episode_not_per_step():
    long_loss = Trajectory(task={}, observations=["o"] * 9, actions=["a"] * 8, turn_rewards=[0.0] * 8,
                           invalid_actions=[True] * 4 + [False] * 4, truncated=True, truncation_reason="max_turns")
    short_win = Trajectory(task={}, observations=["o"] * 3, actions=["a"] * 2, turn_rewards=[0.0, 1.0],
                           invalid_actions=[False, False], won=True, terminated=True)
    crashed = Trajectory(task={}, observations=["o"] * 2, actions=["a"], turn_rewards=[0.0],
                         invalid_actions=[False], truncated=True, truncation_reason="engine_crash")
    s = summarise([long_loss, short_win, crashed])
    assert s.success_rate == pytest.approx(1 / 3)  # per step it would read 1/11
    assert s.mean_turns == pytest.approx(11 / 3)
    assert s.invalid_action_rate == pytest.approx(4 / 11)
    assert s.truncation_rate == pytest.approx(2 / 3)
    assert s.infrastructure_failures == 1
    assert s.mean_return == pytest.approx(1 / 3)


@pytest.mark.parametrize(("reason", "outcome"), [
    ("max_turns", "truncated"), ("wall_clock", "truncated"), ("time_limit", "truncated"),
    ("context_length", "truncated"), ("oom_killed", "truncated"),
    ("engine_timeout", "failed"), ("sandbox_error", "failed"), ("worker_crash", "failed"), ("api_error", "failed")])
def test_a_limit_of_the_episode_is_a_truncation_and_only_infrastructure_is_a_failure(reason, outcome):
    """The SWE world's wall clock and its sandbox's memory limit are the episode's limits (the agent's own time and
    commands), not the infrastructure's failures: a report counts them as truncated, not as failed."""
    trajectory = Trajectory(task={}, observations=["o"] * 2, actions=["a"], turn_rewards=[0.0],
                            invalid_actions=[False], truncated=True, truncation_reason=reason)
    assert trajectory.outcome == outcome
    assert summarise([trajectory]).infrastructure_failures == (outcome == "failed")


@pytest.mark.timeout(600)
def test_oracle_wins_all_50_generated_w2_o3_q4_games_through_the_pool(panel50, tmp_path):
    path = tmp_path / "oracle.jsonl"
    report = evaluate(OracleAgent(), ENV, panel50, num_workers=2, trajectories_path=path, progress=False)
    assert report.overall.episodes == 50
    assert report.overall.success_rate == 1.0
    assert report.overall.mean_return == 1.0
    assert report.overall.invalid_action_rate == 0.0
    assert report.taskset_fingerprint == panel50.fingerprint
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 50 and all(r["won"] for r in rows)
    assert [r["task"]["id"] for r in rows] == [t.id for t in panel50]


@pytest.mark.timeout(600)
def test_same_seed_same_result_whatever_the_number_of_workers(panel50, record_property):
    tasks = panel50.take(12)
    kwargs = {"action_protocol": "choose_index"}
    one = evaluate(RandomAgent(seed=3), ENV, tasks, env_kwargs=kwargs, num_workers=0, progress=False)
    two = evaluate(RandomAgent(seed=3), ENV, tasks, env_kwargs=kwargs, num_workers=2, progress=False)
    assert one.overall == two.overall
    assert one.action_protocol == "choose_index"
    record_property("random_choose_index_success_w2-o3-q4", one.overall.success_rate)  # reported, not asserted


@pytest.mark.timeout(300)
def test_oracle_plays_every_protocol_and_breakdown_by_difficulty():
    tasks = materialise(textworld_tasks("w1-o2-q1", "eval", n=2), progress=False)
    reports = [
        evaluate(OracleAgent(), ENV, tasks, env_kwargs={"action_protocol": p}, progress=False)
        for p in ("free_form", "admissible_in_prompt", "choose_index")
    ]
    assert [r.overall.success_rate for r in reports] == [1.0, 1.0, 1.0]
    assert list(reports[0].by_difficulty) == ["w1-o2-q1"]
    table = markdown_table(reports)
    assert "choose_index" in table and "100.0 %" in table


@pytest.mark.timeout(300)
def test_human_agent_reads_commands_from_its_input():
    tasks = materialise(textworld_tasks("w1-o2-q1", "eval", n=1), progress=False)
    from turngym.envs.textworld.generation import task_files

    script = iter(["", "look"] + list(task_files(tasks[0]).walkthrough))
    shown: list[str] = []
    agent = HumanAgent(read=lambda prompt: next(script), write=shown.append)
    report = evaluate(agent, ENV, tasks, env_kwargs={"max_turns": 10}, progress=False)
    assert report.overall.success_rate == 1.0
    assert any("Invalid action" in line for line in shown)  # the empty line got feedback


@pytest.mark.timeout(300)
def test_cli_eval_prints_a_table_and_writes_reports(tmp_path, capsys):
    code = cli(["eval", "--agent", "oracle", "--config", "w1-o2-q1", "--episodes", "2", "--workers", "1",
                "--out", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "| oracle |" in out and "100.0 %" in out
    report = json.loads((tmp_path / "oracle.json").read_text())
    assert report["overall"]["success_rate"] == 1.0
    assert len((tmp_path / "oracle.jsonl").read_text().splitlines()) == 2


def test_cli_reports_a_bad_config_clearly(capsys):
    assert cli(["generate", "--config", "w2-q4"]) == 2
    assert "unknown TextWorld config" in capsys.readouterr().err
