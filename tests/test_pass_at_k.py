"""pass@k: the unbiased estimator by hand, its bootstrap interval, n samples per task in `evaluate`,
`turngym eval --samples-per-task/--pass-at`, and the study's evaluation option and results table."""

from __future__ import annotations

import json
import math
import random
from fractions import Fraction

import pytest

from turngym.agents import OracleAgent, RandomAgent, evaluate, pass_at_k, pass_at_k_summary
from turngym.agents.evaluate import markdown_table, passes_by_task
from turngym.agents.intervals import wilson_interval
from turngym.envs.signals import signal_tasks
from turngym.recipes.cli import main

SIGNALS = "turngym/Signals-v0"


# ---------------------------------------------------------------------- the estimator
def test_pass_at_k_by_hand():
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2) = 0.7
    assert pass_at_k(5, 2, 1) == pytest.approx(2 / 5)  # pass@1 is c/n
    assert pass_at_k(10, 3, 4) == pytest.approx(1 - 35 / 210)  # C(7,4) = 35, C(10,4) = 210
    assert pass_at_k(4, 1, 4) == 1.0  # n - c = 3 < k: every 4-subset holds the pass


@pytest.mark.parametrize(("n", "k"), [(1, 1), (5, 1), (5, 5), (8, 3), (20, 7)])
def test_no_pass_gives_zero_and_n_minus_c_below_k_gives_one(n, k):
    assert pass_at_k(n, 0, k) == 0.0
    for c in range(n - k + 1, n + 1):  # n - c < k
        assert pass_at_k(n, c, k) == 1.0


def test_the_product_equals_the_binomial_formula_exactly_enough():
    for n in range(1, 31):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
                assert pass_at_k(n, c, k) == pytest.approx(float(exact), abs=1e-12), (n, c, k)


def test_large_n_stays_finite_where_the_binomials_overflow_floats():
    n, c, k = 2000, 7, 300
    with pytest.raises(OverflowError):
        float(math.comb(n, k))  # the naive ratio of floats is not even computable
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-9)


@pytest.mark.parametrize(("n", "c", "k"), [(5, 2, 6), (5, 2, 0), (5, 6, 1), (0, 0, 1), (5, -1, 1)])
def test_bad_arguments_are_refused(n, c, k):
    with pytest.raises(ValueError, match="pass@"):
        pass_at_k(n, c, k)


# ---------------------------------------------------------------------- over tasks, with an interval
def test_panel_pass_at_k_is_the_mean_of_the_per_task_estimates():
    passes = {"a": [True, True, False, False, False], "b": [False] * 5, "c": [True] * 5}
    summary = pass_at_k_summary(passes, 2)
    assert summary.estimate == pytest.approx((0.7 + 0.0 + 1.0) / 3)
    assert (summary.k, summary.tasks, summary.samples_per_task) == (2, 3, 5)
    low, high = summary.ci95
    assert 0.0 <= low <= summary.estimate <= high <= 1.0
    assert pass_at_k_summary(passes, 2).ci95 == summary.ci95  # seeded: the same interval every time
    assert pass_at_k_summary(passes, 1).estimate == pytest.approx(7 / 15)  # pooled success


def test_interval_edge_cases():
    same = pass_at_k_summary({str(i): [True, False] for i in range(10)}, 1)
    assert same.estimate == same.ci95[0] == same.ci95[1] == 0.5  # no spread between tasks: nothing to resample
    lost = pass_at_k_summary({str(i): [False, False] for i in range(20)}, 2)
    assert lost.estimate == 0.0 and lost.ci95 == pytest.approx((0.0, 0.19208 / 1.19208))  # Wilson, 0 of 20 tasks
    alone = pass_at_k_summary({"only": [True, False, False]}, 2)
    assert alone.ci95 == (0.0, 1.0)  # one task: the interval is the whole range
    with pytest.raises(ValueError, match="at least 3 samples"):
        pass_at_k_summary({"a": [True] * 5, "b": [False] * 2}, 3)
    with pytest.raises(ValueError, match="at least one task"):
        pass_at_k_summary({}, 1)


def test_bootstrap_interval_matches_the_normal_interval_on_many_tasks():
    """With 400 tasks the percentile bootstrap over tasks is close to mean +- 1.96 sd / sqrt(T)."""
    rng = random.Random(3)
    passes = {str(t): [rng.random() < p for _ in range(8)] for t, p in enumerate(rng.random() for _ in range(400))}
    summary = pass_at_k_summary(passes, 4)
    values = [pass_at_k(8, sum(o), 4) for o in passes.values()]
    mean = sum(values) / len(values)
    se = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1) / len(values))
    assert summary.estimate == pytest.approx(mean)
    assert summary.ci95[0] == pytest.approx(mean - 1.96 * se, abs=0.25 * se)
    assert summary.ci95[1] == pytest.approx(mean + 1.96 * se, abs=0.25 * se)


# ---------------------------------------------------------------------- evaluate(): n samples per task
@pytest.fixture(scope="module")
def tasks():
    return signal_tasks("eval", n=12)


@pytest.fixture(scope="module")
def random_report(tasks):
    return evaluate(RandomAgent(seed=1), SIGNALS, tasks, samples_per_task=4, pass_at=[1, 2, 4], progress=False)


def test_random_agent_pass_at_k_end_to_end(random_report, tasks):
    report = random_report
    assert report.samples_per_task == 4 and report.overall.episodes == 4 * len(tasks)
    trajectories = report.trajectories
    # Sample-major order: every task once, then every task again...; each task's samples are numbered 0..3.
    assert [t.task["id"] for t in trajectories[:len(tasks)]] == [t.id for t in tasks]
    assert sorted(t.sample for t in trajectories if t.task["id"] == tasks[0].id) == [0, 1, 2, 3]
    # The estimates are the per-task formula averaged over tasks, recomputed here from the episodes.
    counts = {}
    for t in trajectories:
        won, n = counts.get(t.task["id"], (0, 0))
        counts[t.task["id"]] = (won + t.won, n + 1)
    by_k = {p.k: p for p in report.pass_at_k}
    assert sorted(by_k) == [1, 2, 4]
    for k, p in by_k.items():
        expected = sum(1 - math.comb(n - c, k) / math.comb(n, k) for c, n in counts.values()) / len(counts)
        assert p.estimate == pytest.approx(expected)
        assert p.ci95[0] <= p.estimate <= p.ci95[1] and p.tasks == len(tasks)
    assert by_k[1].estimate == pytest.approx(report.overall.success_rate)  # pass@1 = pooled success
    assert by_k[1].estimate <= by_k[2].estimate <= by_k[4].estimate
    assert 0.0 < by_k[1].estimate < by_k[4].estimate  # the random agent wins some samples, not all


def test_samples_of_a_task_are_independent_and_sample_0_is_a_single_run(random_report, tasks):
    trajectories = random_report.trajectories
    plays = {}
    for t in trajectories:
        plays.setdefault(t.task["id"], []).append(tuple(t.actions))
    assert any(len(set(actions)) > 1 for actions in plays.values())  # not n copies of one episode
    single = evaluate(RandomAgent(seed=1), SIGNALS, tasks, progress=False)
    assert [t.actions for t in single.trajectories] == [t.actions for t in trajectories[:len(tasks)]]
    assert single.pass_at_k == [] and single.samples_per_task == 1


def test_samples_do_not_depend_on_the_number_of_workers(random_report, tasks):
    in_workers = evaluate(RandomAgent(seed=1), SIGNALS, tasks, samples_per_task=4, pass_at=[1, 2, 4],
                          num_workers=2, progress=False)
    assert [t.actions for t in in_workers.trajectories] == [t.actions for t in random_report.trajectories]
    assert in_workers.pass_at_k == random_report.pass_at_k


def test_oracle_passes_every_k_and_the_table_shows_pass_at_k(tasks, random_report):
    oracle = evaluate(OracleAgent(), SIGNALS, tasks, samples_per_task=3, progress=False)
    # every task passed: Wilson's interval over the tasks, not the bootstrap's point
    bound = wilson_interval(len(tasks), len(tasks))
    assert [(p.k, p.estimate, p.ci95) for p in oracle.pass_at_k] == [(1, 1.0, bound), (3, 1.0, bound)]
    assert bound[0] < 1.0
    table = markdown_table([random_report, oracle])
    assert "| agent | tasks | samples per task | pass@1 (95 % CI) | pass@2 (95 % CI) | pass@3 (95 % CI) " in table
    # Wilson's over 12 tasks that all passed
    assert "| oracle | signals/eval | 3 | 100.0 % (75.7-100.0) | - | 100.0 % (75.7-100.0) |" in table
    data = json.loads(json.dumps(oracle.to_dict()))
    assert data["samples_per_task"] == 3 and data["pass_at_k"][1]["k"] == 3


def test_evaluate_refuses_k_above_the_samples(tasks):
    with pytest.raises(ValueError, match="samples_per_task"):
        evaluate(OracleAgent(), SIGNALS, tasks, samples_per_task=2, pass_at=[3], progress=False)
    with pytest.raises(ValueError, match="at least 1"):
        evaluate(OracleAgent(), SIGNALS, tasks, samples_per_task=0, progress=False)


def test_passes_by_task_groups_samples():
    report = evaluate(OracleAgent(), SIGNALS, signal_tasks("eval", n=2), samples_per_task=2, progress=False)
    assert passes_by_task(report.trajectories) == {"signals/eval/10000": [True, True],
                                                   "signals/eval/10001": [True, True]}


# ---------------------------------------------------------------------- the command line
def test_turngym_eval_reports_pass_at_k(tmp_path, capsys):
    out = tmp_path / "eval"
    code = main(["eval", "--env", SIGNALS, "--agent", "random", "--episodes", "6", "--workers", "0",
                 "--samples-per-task", "4", "--pass-at", "1", "4", "--out", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "| agent | tasks | samples per task | pass@1 (95 % CI) | pass@4 (95 % CI) |" in text
    assert "| random | free_form | signals/eval | 24 |" in text  # 6 tasks x 4 samples
    report = json.loads((out / "random.json").read_text())
    assert [p["k"] for p in report["pass_at_k"]] == [1, 4] and report["samples_per_task"] == 4
    lines = (out / "random.jsonl").read_text().splitlines()
    assert len(lines) == 24 and {json.loads(line)["sample"] for line in lines} == {0, 1, 2, 3}


@pytest.mark.parametrize(("argv", "message"), [
    (["--agent", "random", "--samples-per-task", "2", "--pass-at", "3"], "samples_per_task (2); got k = 3"),
    (["--agent", "llm", "--samples-per-task", "4"], "with --temperature 0 (greedy)"),
    (["--agent", "random", "--samples-per-task", "0"], "must be at least 1"),
])
def test_bad_pass_at_k_options_are_one_line_errors(capsys, argv, message):
    assert main(["eval", "--env", SIGNALS, "--episodes", "2", "--workers", "0", *argv]) == 2
    error = capsys.readouterr().err
    assert message in error and len(error.strip().splitlines()) == 1


# ---------------------------------------------------------------------- studies (turngym compare)
def _study(**evaluation):
    from turngym.recipes.study import StudyConfig

    return StudyConfig.from_dict({"name": "s", "world": {"env_id": SIGNALS}, "algorithms": {"grpo": {}},
                                  "evaluation": evaluation})


def test_study_config_checks_the_pass_at_k_options():
    config = _study(samples_per_task=4, pass_at_k=[1, 4], temperature=0.7)
    assert config.evaluation.samples_per_task == 4 and config.evaluation.pass_at_k == [1, 4]
    with pytest.raises(ValueError, match="each k must be between 1 and samples_per_task"):
        _study(samples_per_task=2, pass_at_k=[4], temperature=0.7)
    with pytest.raises(ValueError, match="temperature 0"):
        _study(samples_per_task=4)


def _eval_row(label, seed, wins_by_task):
    """A study evaluation file's content, as Study.eval_stage writes it, from each task's sample outcomes."""
    from turngym.agents.intervals import pass_at_k_summary as summary

    outcomes = [{"task": task, "difficulty": "d", "won": won, "return": float(won), "turns": 2, "invalid": 0,
                 "sample": i} for i in range(len(next(iter(wins_by_task.values())))) for task, wins in
                wins_by_task.items() for won in [wins[i]]]
    n = len(outcomes)
    pass_at = [{"k": k, **{key: value for key, value in vars(summary(wins_by_task, k)).items() if key != "k"}}
               for k in (1, 2)]
    return {"label": label, "seed": seed, "panel": "held_out", "outcomes": outcomes,
            "report": {"overall": {"success_rate": sum(o["won"] for o in outcomes) / n}, "taskset": "t",
                       "action_protocol": "free_form", "pass_at_k": pass_at}}


def test_study_summary_and_results_table_show_pass_at_k():
    from turngym.recipes.compare_algorithms import markdown
    from turngym.recipes.study import panel_summary

    policy = [_eval_row("grpo", 0, {"a": [True, False], "b": [False, False]})]
    reference = [_eval_row("sft-only", 0, {"a": [False, False], "b": [False, False]})]
    s = panel_summary(policy, reference, "held_out")
    by_k = {p["k"]: p for p in s["pass_at_k"]}
    assert by_k[1]["estimate"] == pytest.approx(0.25) and by_k[2]["estimate"] == pytest.approx(0.5)
    # The paired difference compares each task's mean over its samples: a: 0.5 - 0, b: 0 - 0.
    assert s["vs_reference"]["pairs"] == 2 and s["vs_reference"]["mean"] == pytest.approx(0.25)
    ref = panel_summary(reference, reference, "held_out")
    config = _study(samples_per_task=2, pass_at_k=[1, 2], temperature=0.7).to_dict()
    summary = {"name": "s", "config": config, "reference_arm": "sft-only", "stage_seconds": 0.0, "versions": {},
               "arms": {"sft-only": {"episodes": 0, "rl": [], "panels": {"held_out": ref}},
                        "grpo": {"episodes": 8, "rl": [], "panels": {"held_out": s}}}}
    text = markdown(summary)
    assert "| invalid actions | pass@1 (95 % CI) | pass@2 (95 % CI) |" in text
    assert "| 0.0 % | 25.0 % (" in text and "| 50.0 % (" in text
    assert "2 samples per task" in text and "1 - C(n-c, k) / C(n, k)" in text


@pytest.mark.usefixtures("one_torch_thread")
def test_a_tiny_comparison_reports_pass_at_k_and_its_episodes_can_be_viewed(tmp_path, tiny_policy):
    from turngym.recipes import compare_algorithms
    from turngym.recipes.study import StudyConfig
    from turngym.recipes.view import load_sources

    config = StudyConfig.from_dict({
        "name": "tiny", "results_dir": str(tmp_path / "results"),
        "world": {"model_name_or_path": str(tiny_policy), "env_id": SIGNALS, "env_kwargs": {"turns": 2, "colours": 2},
                  "reward_mode": "dense", "max_new_tokens_per_turn": 4, "num_train_tasks": 4},
        "rl": {"num_generations": 2, "per_device_train_batch_size": 4, "learning_rate": 1e-3, "beta": 0.0,
               "max_completion_length": 128, "save_strategy": "no", "episode_samples": 2},
        "algorithms": {"turn_rloo": {}}, "episodes": 4,
        "evaluation": {"num_tasks": 3, "curve_points": 0, "overlap": "report", "samples_per_task": 3,
                       "pass_at_k": [1, 3], "temperature": 1.0},
    })
    summary, out = compare_algorithms.run(config, progress=False)
    table = (out / "results.md").read_text()
    assert "| pass@1 (95 % CI) | pass@3 (95 % CI) |" in table and "3 samples per task" in table
    held = summary["arms"]["turn_rloo"]["panels"]["held_out"]
    assert held["episodes"] == 9 and [p["k"] for p in held["pass_at_k"]] == [1, 3]
    assert held["pass_at_k"][0]["estimate"] == pytest.approx(held["success"])  # pass@1 = pooled success
    evaluation = json.loads((out / "evals" / "turn_rloo" / "seed0-held_out.json").read_text())
    assert sorted({o["sample"] for o in evaluation["outcomes"]}) == [0, 1, 2]
    # The episodes behind the numbers: each evaluation's text, and the RL run's samples moved out of its
    # (deleted) trainer folder.
    labels = {s.label: len(s.episodes) for s in load_sources(out)}
    assert labels == {"evals/base/seed0-held_out": 9, "evals/turn_rloo/seed0-held_out": 9,
                      "seed0/turn_rloo/episode_samples": 2}
