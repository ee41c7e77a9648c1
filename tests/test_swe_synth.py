"""Issue 42: SWE tasks synthesized from a package's own tests, validated in the bwrap sandbox.

The end-to-end test makes a tiny package in tmp (a unittest file, a pytest file, a test that needs the
network), synthesizes tasks from it with swesmith's procedural modifiers and validates them through the
world's grading path; the unit tests check the problem statement never quotes the change and that bad
input gives a one-line reason.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

CORE = '''\
"""Small statistics helpers."""


def mean(values):
    if not values:
        raise ValueError("mean of an empty sequence")
    total = 0
    for value in values:
        total += value
    return total / len(values)


def clamp(x, low, high):
    if low > high:
        raise ValueError("low must not exceed high")
    if x < low:
        return low
    elif x > high:
        return high
    else:
        return x


def grade(score):
    if score < 0 or score > 100:
        raise ValueError("score out of range")
    if score >= 90:
        return "A"
    elif score >= 75:
        return "B"
    elif score >= 50:
        return "C"
    return "F"


def histogram(values, width):
    counts = {}
    for value in values:
        if width <= 0:
            raise ValueError("width must be positive")
        bucket = (value // width) * width
        counts[bucket] = counts.get(bucket, 0) + 1
    return counts
'''

TEST_UNITTEST = '''\
import unittest

from tinystats.core import clamp, mean


class TestMean(unittest.TestCase):
    def test_mean_of_three(self):
        self.assertEqual(mean([1, 2, 6]), 3)

    def test_mean_of_one(self):
        self.assertEqual(mean([5]), 5)

    def test_empty_raises(self):
        with self.assertRaises(ValueError):
            mean([])


class TestClamp(unittest.TestCase):
    def test_inside(self):
        self.assertEqual(clamp(5, 0, 10), 5)

    def test_below(self):
        self.assertEqual(clamp(-3, 0, 10), 0)

    def test_above(self):
        self.assertEqual(clamp(12, 0, 10), 10)

    def test_bad_bounds(self):
        with self.assertRaises(ValueError):
            clamp(1, 5, 0)


if __name__ == "__main__":
    unittest.main()
'''

TEST_PYTEST = '''\
import socket

import pytest

from tinystats.core import grade, histogram


@pytest.mark.parametrize("score,letter", [(95, "A"), (80, "B"), (60, "C"), (10, "F")])
def test_grade(score, letter):
    assert grade(score) == letter


def test_grade_range():
    with pytest.raises(ValueError):
        grade(101)


def test_histogram():
    assert histogram([1, 2, 11, 25], 10) == {0: 2, 10: 1, 20: 1}


def test_histogram_width():
    with pytest.raises(ValueError):
        histogram([1], 0)


def test_needs_network():
    socket.create_connection(("192.0.2.1", 80), timeout=2).close()
'''


def make_tiny_package(root: Path) -> Path:
    """A small flat-layout package with a unittest file and a pytest file."""
    package = root / "tinystats"
    (package / "tinystats").mkdir(parents=True)
    (package / "tests").mkdir()
    (package / "tinystats" / "__init__.py").write_text('"""tinystats."""\n')
    (package / "tinystats" / "core.py").write_text(CORE)
    (package / "tests" / "__init__.py").write_text("")
    (package / "tests" / "test_core.py").write_text(TEST_UNITTEST)
    (package / "tests" / "test_more.py").write_text(TEST_PYTEST)
    (package / "setup.py").write_text("from setuptools import setup\nsetup(name='tinystats', version='0.1')\n")
    return package


pytest.importorskip("libcst", reason="procedural bugs need libcst and swesmith (pip install swesmith libcst)")
pytest.importorskip("swesmith", reason="procedural bugs need swesmith's modifiers (pip install swesmith libcst)")

from tests.helpers_marks import first_fast
from turngym.envs.swe import load_instances, oracle_actions, swe_taskset, validate
from turngym.envs.swe.grading import patch_paths
from turngym.envs.swe.sandbox import backend_available
from turngym.envs.swe.synth import SynthConfig, synthesize
from turngym.envs.swe.synth.manifest import SplitRule
from turngym.envs.swe.synth.runner import ids_not_found
from turngym.envs.swe.synth.statement import changed_lines, write_statement

BWRAP_PROBLEM = backend_available("bwrap")
needs_bwrap = pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=f"bwrap sandbox unavailable: {BWRAP_PROBLEM}")


def _changed(patch: str) -> list[str]:
    return [line[1:].strip() for line in patch.splitlines()
            if line[:1] in "+-" and not line.startswith(("+++", "---")) and line[1:].strip()]


def _quotes(statement: str, line: str) -> bool:
    """A statement line is the changed line, or holds it (when it is more than a bare word like `pass`)."""
    bare = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*:?", line) or not re.search(r"[A-Za-z0-9]", line)
    return any(row.strip() == line or (not (bare and len(line) < 8) and line in row) for row in statement.splitlines())


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    root = tmp_path_factory.mktemp("synth")
    package = make_tiny_package(root / "src")
    config = SynthConfig(seed=0, max_candidates=8)
    summary = synthesize([str(package)], root / "out", config, root=root / "cache")
    return root, package, config, summary


@needs_bwrap
def test_synthesized_tasks_load_fail_on_the_bug_and_the_gold_patch_resolves(synthesized):
    root, _, _, summary = synthesized
    (package,) = summary["packages"]
    assert package["status"] == "ok", package["reason"]
    # the suite ran twice in the sandbox: the test that needs the network fails there and is not kept
    assert package["tests_collected"] == 15 and package["tests_kept"] == 14
    assert summary["tasks"] >= 3 and summary["false_alarms"] == []
    instances = load_instances(root / "out" / "tasks.jsonl")
    assert len(instances) == summary["tasks"]
    runners = set()
    for instance in instances:
        assert all("needs_network" not in t for t in instance.fail_to_pass + instance.pass_to_pass)
        assert not set(instance.fail_to_pass) & set(instance.pass_to_pass)
        assert patch_paths(instance.patch) == patch_paths(instance.setup_patch) == ["tinystats/core.py"]
        # the test patch protects exactly the graded test files
        assert set(patch_paths(instance.test_patch)) == {t.split("::")[0] for t in instance.test_ids}
        label = instance.extra["difficulty_label"]
        assert label["modifier"] == instance.difficulty and label["fail_to_pass"] == len(instance.fail_to_pass)
        assert label["files_touched"] == 1 and label["lines_changed"] >= 1
        # the statement names the failing tests and never quotes the patch or the mutated line
        assert instance.fail_to_pass[0] in instance.problem_statement
        assert instance.patch not in instance.problem_statement
        for line in _changed(instance.setup_patch):
            assert not _quotes(instance.problem_statement, line), (instance.instance_id, line)
        runners.add("--pytest" in instance.test_cmd)
        assert "PYTHONPATH" not in instance.test_cmd  # never the agent's tree before the standard library
    assert runners == {True, False}  # the unittest file is graded by the runner's unittest harnesses
    # independently of the pipeline: the bug fails every FAIL_TO_PASS test, the empty patch earns 0, gold resolves
    instance = instances[0]
    check = validate(instance, "bwrap", workspace_root=root)
    assert check.before.f2p_passed == 0 and check.before.p2p_failed == 0
    assert check.before.pass_ratio() == 0.0 and not check.before.tampered
    assert check.after.resolved and not check.after.tampered
    assert check.base_commit == instance.base_commit


@needs_bwrap
def test_a_grading_that_does_not_finish_is_a_drop_of_its_own_not_failing_tests(synthesized, monkeypatch):
    """inflection's tasks were dropped as "PASS_TO_PASS fails on the bug" when a busy machine made a grading cross
    validation's old 120 s limit: the killed run's missing statuses were counted as failures."""
    from turngym.envs.swe import taskset
    from turngym.envs.swe.synth import pipeline

    root, _, _, _ = synthesized
    instance = load_instances(root / "out" / "tasks.jsonl")[0]
    check = validate(instance, "bwrap", workspace_root=root, test_timeout=0.01)
    assert check.before.error and "did not finish" in check.before.error
    assert check.problems and all("did not finish" in p for p in check.problems)
    assert not any("PASS_TO_PASS" in p for p in check.problems)

    def killed(instance, backend, real=taskset.validate):
        return real(instance, backend, workspace_root=root, test_timeout=0.01)

    monkeypatch.setattr(taskset, "validate", killed)
    record = json.loads((root / "out" / "tasks.jsonl").read_text().splitlines()[0])
    row = pipeline.validate_record(record, root / "out" / record["repo_path"], "bwrap")
    assert row["ok"] is False and row["drop"] == "validate: a grading did not finish", row


@needs_bwrap
def test_a_task_whose_fail_to_pass_partly_passes_in_the_graders_run_is_rebuilt_from_that_run(synthesized, tmp_path,
                                                                                            monkeypatch):
    """Screening runs whole test files, so a failing test could break later ones: they failed in screening, passed
    in the grader's run of the bug, and the task was dropped (more-itertools 1, python-dateutil 4). Now the grader's
    run decides: those tests leave FAIL_TO_PASS (and the statement; they are not PASS_TO_PASS either, being
    order-dependent), and the rebuilt record is validated once more, for real. So does a test that fails with the
    gold patch (boltons' strict-equality disagreements), counted in the report. The first validation is faked
    here (which tests pass or fail in it), to be deterministic; the second is the sandbox's."""
    from turngym.envs.swe.synth import pipeline

    root, package, config, _ = synthesized
    shutil.copytree(root / "cache", tmp_path / "cache")
    two_failing = {r["instance_id"] for r in map(json.loads, (root / "out" / "tasks.jsonl").read_text().splitlines())
                   if len(r["FAIL_TO_PASS"]) >= 2}
    for rows in (tmp_path / "cache").rglob("validate*.jsonl"):  # only the faked tasks are validated again
        rows.write_text("".join(line + "\n" for line in rows.read_text().splitlines()
                                if json.loads(line)["key"] not in two_failing))
    calls, real = [], pipeline.validate_record

    def first_run_passes_one(record, repo_path, backend):
        calls.append(record["instance_id"])
        if len(record["FAIL_TO_PASS"]) >= 2 and calls.count(record["instance_id"]) == 1:
            gold = record["PASS_TO_PASS"][:1]
            return {"key": record["instance_id"], "ok": False, "drop": "validate: FAIL_TO_PASS passes on the bug",
                    "passing_on_bug": record["FAIL_TO_PASS"][:1], "seconds": 0.1, "failing_on_gold": gold,
                    "leave_out": gold + record["FAIL_TO_PASS"][:1]}
        return real(record, repo_path, backend)

    monkeypatch.setattr(pipeline, "validate_record", first_run_passes_one)
    summary = synthesize([str(package)], tmp_path / "out", config, root=tmp_path / "cache")
    first = {i: json.loads(line) for i, line in enumerate((root / "out" / "tasks.jsonl").read_text().splitlines())}
    moved = {r["instance_id"]: r["FAIL_TO_PASS"][0] for r in first.values() if len(r["FAIL_TO_PASS"]) >= 2}
    assert moved, "the tiny package has no task with two failing tests"
    on_gold = {r["instance_id"]: r["PASS_TO_PASS"][0] for r in first.values()
               if r["instance_id"] in moved and r["PASS_TO_PASS"]}
    assert on_gold, "the tiny package has no such task with a PASS_TO_PASS test"
    (report,) = summary["packages"]
    assert report["regraded"] == len(moved), report["drops"]
    assert "validate: FAIL_TO_PASS passes on the bug" not in report["drops"]
    assert sum(report["gold_disagreements"].values()) == len(on_gold)  # counted: the grader's false alarms
    assert set(report["gold_disagreements"]) == set(on_gold.values())
    assert report["gold_gradings_disagreeing"] == summary["gold_gradings_disagreeing"] == len(on_gold)
    rebuilt = {r.instance_id: r for r in load_instances(tmp_path / "out" / "tasks.jsonl") if r.instance_id in moved}
    assert set(rebuilt) == set(moved) and summary["tasks"] == len(first)
    for key, test in on_gold.items():
        assert test not in rebuilt[key].fail_to_pass + rebuilt[key].pass_to_pass
    for key, test in moved.items():
        assert test not in rebuilt[key].fail_to_pass + rebuilt[key].pass_to_pass
        block = rebuilt[key].problem_statement.split("Failing test", 1)[1].split("\n\n", 1)[0]
        listed = [line.strip() for line in block.splitlines()[1:]]
        assert test not in listed and rebuilt[key].fail_to_pass[0] in listed
    calls.clear()
    again = synthesize([str(package)], tmp_path / "out2", config, root=tmp_path / "cache")
    assert calls == [] and again["tasks"] == summary["tasks"]  # both validations are cached


@needs_bwrap
def test_a_rebuild_that_draws_another_unjudgeable_test_is_rebuilt_again_without_both(synthesized, tmp_path,
                                                                                       monkeypatch):
    """pyparsing runs each test class under 6 parser modes: a task rebuilt without `Test02_...::testOptionalEachTest2`
    (failing on gold under strict equality) drew `Test06_...::testOptionalEachTest2` into its PASS_TO_PASS sample,
    which failed on gold the same way, and 4 tasks were dropped. Now the rebuild is rebuilt again without both rounds'
    tests; both are counted as the grader's false alarms, and each round's validations are cached apart. The first
    two validations are faked (which test fails with the gold patch), the third is the sandbox's."""
    from turngym.envs.swe.synth import pipeline

    root, package, config, _ = synthesized
    shutil.copytree(root / "cache", tmp_path / "cache")
    first = {r["instance_id"]: r for r in map(json.loads, (root / "out" / "tasks.jsonl").read_text().splitlines())
             if len(r["PASS_TO_PASS"]) >= 2}
    assert first, "the tiny package has no task with two PASS_TO_PASS tests"
    for rows in (tmp_path / "cache").rglob("validate*.jsonl"):  # only the faked tasks are validated again
        rows.write_text("".join(line + "\n" for line in rows.read_text().splitlines()
                                if json.loads(line)["key"] not in first))
    calls, on_gold, real = [], {}, pipeline.validate_record

    def gold_fails_a_passing_test_twice(record, repo_path, backend):
        key = record["instance_id"]
        calls.append(key)
        if key in first and calls.count(key) <= 2:
            test = record["PASS_TO_PASS"][0]
            on_gold.setdefault(key, []).append(test)
            return {"key": key, "ok": False, "drop": "validate: the gold patch does not resolve it", "seconds": 0.1,
                    "failing_on_gold": [test], "leave_out": [test]}
        return real(record, repo_path, backend)

    monkeypatch.setattr(pipeline, "validate_record", gold_fails_a_passing_test_twice)
    summary = synthesize([str(package)], tmp_path / "out", config, root=tmp_path / "cache")
    (report,) = summary["packages"]
    assert report["regraded"] == len(first), report["drops"]
    assert not any("gold patch" in reason for reason in report["drops"]), report["drops"]
    assert all(len(set(tests)) == 2 for tests in on_gold.values())  # the second round drew another test
    assert sum(report["gold_disagreements"].values()) == 2 * len(first)  # both rounds' false alarms counted
    rebuilt = {r.instance_id: r for r in load_instances(tmp_path / "out" / "tasks.jsonl") if r.instance_id in first}
    assert set(rebuilt) == set(first)
    for key, tests in on_gold.items():
        assert not set(tests) & set(rebuilt[key].fail_to_pass + rebuilt[key].pass_to_pass)
    (work,) = [p.parent for p in (tmp_path / "cache").rglob("validate-regraded-2.jsonl")]
    assert {json.loads(line)["key"] for line in (work / "validate-regraded-2.jsonl").read_text().splitlines()} \
        == set(first)
    calls.clear()
    again = synthesize([str(package)], tmp_path / "out2", config, root=tmp_path / "cache")
    assert calls == [] and again["tasks"] == summary["tasks"]  # every round's validation is cached


@needs_bwrap
def test_a_second_rebuild_leaves_out_every_test_the_package_found_failing_on_gold(synthesized, tmp_path,
                                                                                 monkeypatch):
    """The gold tree is the same in each of a package's tasks, so a test failing on it under the grader fails in all
    of them. semver's first rebuilds drew, into their PASS_TO_PASS samples, tests other tasks had already found
    failing on gold, and 9 of 10 second rebuilds were dropped for nothing else. Now a second rebuild leaves out every
    test any validation before it found failing on gold. Here the grader "fails" three of `test_grade`'s parametrized
    cases on gold and passes every other task (faked: the sandbox's verdicts are the tests above), and PASS_TO_PASS
    samples hold two tests, so the rebuilds keep drawing those cases."""
    from turngym.envs.swe.synth import pipeline

    root, package, _, _ = synthesized
    shutil.copytree(root / "cache", tmp_path / "cache")
    on_gold = {f"tests/test_more.py::test_grade[{case}]" for case in ("95-A", "80-B", "60-C")}
    calls: list[tuple[str, set[str], list[str]]] = []  # (task, its graded tests, those failing on gold)

    def gold_fails_the_grade_cases(record, repo_path, backend):
        tests = set(record["FAIL_TO_PASS"] + record["PASS_TO_PASS"])
        failing = sorted(tests & on_gold)
        calls.append((record["instance_id"], tests, failing))
        if not failing:
            return {"key": record["instance_id"], "ok": True, "seconds": 0.1, "base_commit": "0" * 40}
        leave_out = failing if set(record["FAIL_TO_PASS"]) - on_gold else None
        return {"key": record["instance_id"], "ok": False, "drop": "validate: the gold patch does not resolve it",
                "seconds": 0.1, "failing_on_gold": failing, "leave_out": leave_out}

    monkeypatch.setattr(pipeline, "validate_record", gold_fails_the_grade_cases)
    config = SynthConfig(seed=0, max_candidates=8, max_p2p=2)
    summary = synthesize([str(package)], tmp_path / "out", config, root=tmp_path / "cache")
    (report,) = summary["packages"]
    seen: dict[str, int] = {}
    found_before_round_2: set[str] = set()
    second_rebuilds = []
    for key, tests, failing in calls:  # each round's validations all come before the next round's
        seen[key] = seen.get(key, 0) + 1
        if seen[key] <= 2:
            found_before_round_2.update(failing)
        else:
            second_rebuilds.append((key, tests))
    assert second_rebuilds, "no task was rebuilt twice: the fake no longer exercises the second round"
    for key, tests in second_rebuilds:
        assert not tests & found_before_round_2, (key, sorted(tests & found_before_round_2))
    assert not any("gold patch" in reason for reason in report["drops"]), report["drops"]
    assert report["regraded"] == len(second_rebuilds) == 4 and set(report["gold_disagreements"]) == on_gold


def test_only_tests_whose_removal_leaves_a_valid_task_are_left_out():
    """FAIL_TO_PASS tests passing on the bug (screening's order effects) and tests failing with the gold patch (the
    grader disagreeing with pytest on the package's own code: boltons' `OrderedMultiDict == dict` under strict
    equality) are left out, when the tests left still make a task; otherwise nothing is."""
    from turngym.envs.swe.grading import GradeReport
    from turngym.envs.swe.synth.pipeline import tests_to_leave_out
    from turngym.envs.swe.taskset import Validation

    f2p, p2p = ("t::a", "t::b", "t::c"), ("t::d",)

    def check(before, after=None, error=None):
        after = after or dict.fromkeys(f2p + p2p, "PASSED")
        return tests_to_leave_out(Validation("x", "", GradeReport({**dict(zip(f2p, before)), "t::d": before[3]}, f2p,
                                                                  p2p, error=error), GradeReport(after, f2p, p2p)))

    gold = dict.fromkeys(f2p + p2p, "PASSED")

    def leave_out(*tests):
        return {"leave_out": list(tests)}

    assert check(("PASSED", "FAILED", "FAILED", "PASSED")) == {"passing_on_bug": ["t::a"], **leave_out("t::a")}
    assert check(("PASSED", "PASSED", "FAILED", "PASSED")) == {"passing_on_bug": ["t::a", "t::b"],
                                                                **leave_out("t::a", "t::b")}
    assert check(("PASSED", "PASSED", "PASSED", "PASSED")) == {  # none fails on the bug: nothing to keep
        "passing_on_bug": ["t::a", "t::b", "t::c"]}
    assert check(("FAILED", "FAILED", "FAILED", "PASSED")) == {}  # nothing to rebuild
    assert check(("PASSED", "FAILED", "FAILED", "FAILED")) == {  # a PASS_TO_PASS test fails on the bug only
        "passing_on_bug": ["t::a"]}
    assert check(("FAILED", "FAILED", "FAILED", "PASSED"), {**gold, "t::b": "FAILED"}) == {
        "failing_on_gold": ["t::b"], **leave_out("t::b")}  # the gold patch fails a FAIL_TO_PASS test: the grader's
    assert check(("FAILED", "FAILED", "FAILED", "FAILED"), {**gold, "t::d": "FAILED"}) == {
        "failing_on_gold": ["t::d"], **leave_out("t::d")}  # a PASS_TO_PASS test failing on the bug and gold alike
    assert check(("PASSED", "FAILED", "FAILED", "FAILED"), {**gold, "t::d": "FAILED", "t::c": "ERROR"}) == {
        "failing_on_gold": ["t::c", "t::d"], "passing_on_bug": ["t::a"], **leave_out("t::c", "t::d", "t::a")}
    # every FAIL_TO_PASS test fails with the gold patch: no task is left, and the disagreement is still recorded
    assert check(("FAILED", "FAILED", "FAILED", "PASSED"), dict.fromkeys(f2p + p2p, "FAILED")) == {
        "failing_on_gold": ["t::a", "t::b", "t::c", "t::d"]}
    assert check(("PASSED", "FAILED", "FAILED", "PASSED"), error="timed out") == {}


def test_cached_validations_hold_for_kept_tasks_and_drops_of_this_validator_only():
    from turngym.envs.swe.synth.pipeline import VALIDATOR, _still_valid

    assert _still_valid({"content_hash": "h", "ok": True}, "h")  # a kept task stays kept
    assert not _still_valid({"content_hash": "h", "ok": False, "drop": "validate: PASS_TO_PASS fails on the bug"},
                            "h")  # an older validator's drop is validated again
    assert _still_valid({"content_hash": "h", "ok": False, "validator": VALIDATOR}, "h")
    assert not _still_valid({"content_hash": "other", "ok": True}, "h")  # another record or grader
    # version 6 changed only how a void is judged: version 5's other drops stand, its voids are validated again
    assert _still_valid({"content_hash": "h", "ok": False, "validator": 5, "drop": "validate: sandbox error"}, "h")
    assert not _still_valid({"content_hash": "h", "ok": False, "validator": 5, "false_alarm": [{"on": "x"}]}, "h")
    assert not _still_valid({"content_hash": "h", "ok": False, "validator": 4}, "h")
    # version 7 changed only how reference states are gathered: version 6's drops with states are validated again
    assert not _still_valid({"content_hash": "h", "ok": False, "validator": 6, "reference_states": ["a" * 64]}, "h")
    assert _still_valid({"content_hash": "h", "ok": False, "validator": 6, "drop": "validate: sandbox error"}, "h")
    assert _still_valid({"content_hash": "h", "ok": True, "validator": 6, "reference_states": ["a" * 64]}, "h")
    # version 8 keeps every state the gold grading saw hold (with a new grader, whose hash restarts each row too)
    assert not _still_valid({"content_hash": "h", "ok": False, "validator": 7, "reference_states": ["a" * 64]}, "h")


def _grading(statuses, states=(), refused=(), refused_on_bug=()):
    """A scripted validation: the gold grading's ``statuses``, the states it printed, and those of them (and of the
    bug's grading) its probes refused."""
    from types import SimpleNamespace

    def log(states, refused):
        return "".join([*(f"| turngym: reference states {state}\n" for state in states),
                        *(f"| turngym: refused by the probes alone {state}\n" for state in refused)])
    return SimpleNamespace(after=SimpleNamespace(log=log([*states, *refused], refused), statuses=statuses, error=None),
                           before=SimpleNamespace(log=log(refused_on_bug, refused_on_bug)))


def test_the_gold_patchs_states_are_kept_and_validated_again_when_they_change_a_verdict(monkeypatch):
    """The gold grading prints every pair whose untouched comparison held; the task keeps them all. The judge's
    probes are drawn anew in each grading, so a pair they refused (packaging 24.0's ``==1.0-alpha``) changes its
    verdict with its state and the task is validated again; a state no probe refused changes none (packaging's
    ``<=1!3.0.0.rc2``, held in that grading, refused in a later one: kept now before any grading refuses it), and
    one the bug's grading refused is validated again too. Up to REFERENCE_ROUNDS validations in all."""
    from turngym.envs.swe import SWEInstance, taskset
    from turngym.envs.swe.synth import pipeline

    a, b, c = "a" * 64, "b" * 64, "c" * 64
    instance = SWEInstance(instance_id="x__y-1", repo="x/y", base_commit="", problem_statement="", patch="",
                           test_patch="", fail_to_pass=("t::f",), pass_to_pass=("t::p",))
    failed, passed = {"t::f": "PASSED", "t::p": "FAILED"}, {"t::f": "PASSED", "t::p": "PASSED"}

    def run(gradings):
        seen = []

        def validate(instance, backend):
            seen.append(instance.reference_states)
            return gradings[len(seen) - 1]
        monkeypatch.setattr(taskset, "validate", validate)
        result, validated = pipeline.validate_with_reference_states(instance, "bwrap")
        return seen, validated.reference_states, result.after.statuses

    # a refused, b held: both kept, one more validation with both; it passes
    assert run([_grading(failed, [b], refused=[a]), _grading(passed, [a, b])]) == ([(), (a, b)], (a, b), passed)
    # nothing refused: the states are kept and the first validation stands, passing or failing
    assert run([_grading(passed, [a, b])]) == ([()], (a, b), passed)
    assert run([_grading(failed, [a])]) == ([()], (a,), failed)
    # the bug's grading refused a state the gold patch's held: validated again
    assert run([_grading(passed, [a], refused_on_bug=[a]), _grading(passed, [a])]) == ([(), (a,)], (a,), passed)
    # a refusal of a state the task already had ends it (the failing task drops as before)
    assert run([_grading(failed, refused=[a]), _grading(failed, refused=[a])]) == ([(), (a,)], (a,), failed)
    # no state printed: one validation
    assert run([_grading(failed)]) == ([()], (), failed)
    endless = [_grading(failed, refused=[state]) for state in (a, b, c, "d" * 64, "e" * 64)]
    seen, _, _ = run(endless)
    assert len(seen) == pipeline.REFERENCE_ROUNDS == 4


def _validation(voids: tuple[str, ...]):
    """A validation result whose gradings are void where ``voids`` says ("gold patch", "untouched bug")."""
    from types import SimpleNamespace

    def grading(label):
        void = label in voids
        return SimpleNamespace(tampered=void, log="| turngym: the grading is void: t::x PASSED under pytest's "
                               "protocol but FAILED when set up and called directly" if void else "", error=None,
                               duration_s=1.0, statuses={}, fail_to_pass=(), pass_to_pass=(), pass_ratio=lambda: 0.0)

    return SimpleNamespace(before=grading("untouched bug"), after=grading("gold patch"), base_commit="c" * 40,
                           problems=[])


@pytest.mark.parametrize(("runs", "drop", "reruns"), [
    # a test whose outcome varies between runs: the void is not repeated, and the task is dropped as flaky
    ([("untouched bug",), ()], "validate: a void grading did not repeat on a rerun (a flaky test)", [[]]),
    ([("gold patch",), ("gold patch",), ()], "validate: a void grading did not repeat on a rerun (a flaky test)",
     [["gold patch"], []]),
    # every run repeats it: a false alarm of the grader, reported as one
    ([("untouched bug",), ("untouched bug",), ("gold patch", "untouched bug")],
     "validate: grader false alarm (grading_tampered)", [["untouched bug"], ["gold patch", "untouched bug"]]),
])
def test_a_void_grading_is_validated_again_before_it_counts_as_a_false_alarm(monkeypatch, runs, drop, reruns):
    """more-itertools' `sample` with `iterable = iter(iterable)` removed samples a list with repeats at random:
    a PASS_TO_PASS test passed under one harness and failed under the other, on the untouched bug, and voided
    the grading. That is the bug's nondeterminism, not a forgery: a second validation did not repeat it."""
    from turngym.envs.swe import taskset
    from turngym.envs.swe.synth import pipeline

    results = iter(_validation(voids) for voids in runs)
    monkeypatch.setattr(taskset, "validate", lambda instance, backend: next(results))
    record = {"instance_id": "pkg__1.0.x", "repo": "pkg", "base_commit": "", "patch": "", "test_patch": "",
              "problem_statement": "", "FAIL_TO_PASS": ["t::x"], "PASS_TO_PASS": []}
    row = pipeline.validate_record(record, Path("/nonexistent"), "bwrap")
    assert row["drop"] == drop and row["void_reruns"] == reruns and row["ok"] is False
    assert next(results, None) is None  # no more validations than the rule needs
    assert ("false_alarm" in row) == ("false alarm" in drop) and ("unrepeated_void" in row) != ("false alarm" in drop)
    assert "PASSED under pytest's protocol" in (row.get("false_alarm") or row["unrepeated_void"])[0]["excerpt"]


@needs_bwrap
def test_the_world_plays_a_synthesized_task_and_the_oracle_resolves_it(synthesized):
    import gymnasium as gym

    import turngym  # noqa: F401

    root = synthesized[0]
    instance = load_instances(root / "out" / "tasks.jsonl")[-1]
    env = gym.make("turngym/SWE-v0", tasks=swe_taskset([instance], name="synth"), sandbox="bwrap",
                   workspace_root=root)
    try:
        observation, _ = env.reset(seed=0)
        assert instance.fail_to_pass[0] in observation
        _, reward, terminated, _, step_info = env.step("```bash\nsubmit\n```")  # nothing changed: the bug stays
        assert terminated and reward == 0.0 and not step_info["resolved"]
        env.reset(seed=0)
        for action in oracle_actions(instance):
            _, reward, terminated, _, step_info = env.step(action)
        assert terminated and step_info["resolved"] and reward == 1.0
        assert not step_info.get("grading_tampered")
    finally:
        env.close()


@needs_bwrap
@pytest.mark.parametrize("which", [pytest.param("two"), pytest.param("all", marks=pytest.mark.slow)])
def test_the_tools_walkthrough_rebuilds_the_synthesized_gold_patches(synthesized, which):
    """Issue 42 point 6: view, edit and submit calls rebuild each gold patch (checked in the sandbox) and resolve it;
    the default run plays a unittest-graded and a pytest-graded task, the slow one every task (50 s)."""
    from tests.helpers_swe import play_tools_walkthrough
    from turngym.envs.swe import SWEEnv

    root = synthesized[0]
    instances = load_instances(root / "out" / "tasks.jsonl")
    if which == "two":
        by_runner = {"--pytest" in i.test_cmd: i for i in instances}
        instances = [by_runner[False], by_runner[True]]
    tasks = swe_taskset(instances, name="synth")
    env = SWEEnv(tasks=tasks, sandbox="bwrap", workspace_root=root, action_protocol="tools")
    try:
        for task in tasks:
            play_tools_walkthrough(env, task)
    finally:
        env.close()


@pytest.mark.slow
@needs_bwrap
def test_a_rerun_resumes_from_the_cache_and_gives_the_same_set(synthesized):
    root, package, config, _ = synthesized
    screened = sorted((root / "cache" / "work").rglob("screen.jsonl"))
    lines = [len(p.read_text().splitlines()) for p in screened]
    synthesize([str(package)], root / "out2", config, root=root / "cache")
    first = json.loads((root / "out" / "manifest.json").read_text())
    second = json.loads((root / "out2" / "manifest.json").read_text())
    assert first["tasks"] == second["tasks"] and first["tasks"]
    assert [len(p.read_text().splitlines()) for p in screened] == lines  # no mutation was screened again


@pytest.mark.slow  # every kept mutation validated again: 25-50 s; the scale run validates in two workers too
@needs_bwrap
def test_validation_in_two_worker_processes_gives_the_same_records(synthesized, tmp_path):
    root, package, config, first = synthesized
    cache = tmp_path / "cache"
    shutil.copytree(root / "cache", cache, symlinks=True)
    for path in cache.rglob("validate.jsonl"):
        path.unlink()  # every kept mutation is validated again, two at a time
    summary = synthesize([str(package)], tmp_path / "out", config, root=cache, workers=2)
    (validations,) = list(cache.rglob("validate.jsonl"))
    assert len(validations.read_text().splitlines()) == first["packages"][0]["kept_mutations"]
    assert summary["tasks"] == first["tasks"] and summary["drops"] == first["drops"]
    serial = [{k: v for k, v in json.loads(line).items() if k != "repo_path"}
              for line in (root / "out" / "tasks.jsonl").read_text().splitlines()]
    parallel = [{k: v for k, v in json.loads(line).items() if k != "repo_path"}
                for line in (tmp_path / "out" / "tasks.jsonl").read_text().splitlines()]
    assert parallel == serial


@pytest.mark.slow  # every mutation screened again, two sandboxes at once: 20-40 s
@needs_bwrap
def test_screening_in_two_sandboxes_gives_the_same_rows_and_set(synthesized, tmp_path):
    root, package, config, first = synthesized
    cache = tmp_path / "cache"
    shutil.copytree(root / "cache", cache, symlinks=True)
    (screened,) = list(cache.rglob("screen.jsonl"))
    serial = [json.loads(line) for line in screened.read_text().splitlines()]
    screened.unlink()
    summary = synthesize([str(package)], tmp_path / "out", config, root=cache, workers=2)
    parallel = [json.loads(line) for line in screened.read_text().splitlines()]

    def verdict(row):  # the log holds pytest's timings
        return {k: v for k, v in row.items() if k != "log"}

    assert [verdict(r) for r in parallel] == [verdict(r) for r in serial]  # the seeded order, whatever finished first
    assert summary["tasks"] == first["tasks"] and summary["drops"] == first["drops"]
    from turngym.envs.swe.sandbox.bwrap import default_root
    key = summary["packages"][0]["key"]
    assert not list(default_root().glob(f"synth-{key}-1-*"))  # the second sandbox closed with its package


class FakeSandbox:
    """Screens by sleeping; records that no two screenings ever share it."""

    def __init__(self):
        self.busy = False
        self.overlaps = 0


def test_screenings_come_in_the_seeded_order_and_a_stop_starts_no_more():
    import random as stdlib_random
    import threading

    from turngym.envs.swe.synth.pipeline import _screen_in_order

    todo = [SimpleNamespace(key=f"m{i}") for i in range(30)]
    sandboxes = [FakeSandbox(), FakeSandbox(), FakeSandbox()]
    started, lock = [], threading.Lock()
    delays = {m.key: stdlib_random.Random(i).uniform(0, 0.01) for i, m in enumerate(todo)}

    def one(sandbox, mutation):
        with lock:
            sandbox.overlaps += sandbox.busy
            sandbox.busy = True
            started.append(mutation.key)
        time.sleep(delays[mutation.key])
        sandbox.busy = False
        return {"key": mutation.key}

    rows = [r["key"] for r in _screen_in_order(todo, sandboxes, one)]
    assert rows == [m.key for m in todo] and sorted(started) == sorted(rows)
    assert all(s.overlaps == 0 for s in sandboxes)

    started.clear()
    stream = _screen_in_order(todo, sandboxes, one)
    first = [next(stream)["key"] for _ in range(4)]
    stream.close()  # the caller stops (max_tasks reached): what was only queued never starts
    assert first == ["m0", "m1", "m2", "m3"]
    assert 4 <= len(started) <= 4 + 2 * len(sandboxes)


def test_a_screening_that_fails_fails_the_stream_after_the_rows_before_it():
    from turngym.envs.swe.synth.pipeline import _screen_in_order

    todo = [SimpleNamespace(key=f"m{i}") for i in range(6)]

    def one(sandbox, mutation):
        if mutation.key == "m3":
            raise RuntimeError("could not write the file in the sandbox")
        return {"key": mutation.key}

    got = []
    with pytest.raises(RuntimeError, match="could not write"):
        for row in _screen_in_order(todo, [FakeSandbox(), FakeSandbox()], one):
            got.append(row["key"])
    assert got == ["m0", "m1", "m2"]


def test_screening_goes_on_in_fewer_sandboxes_when_another_does_not_start(monkeypatch, caplog):
    from turngym.envs.swe.sandbox.base import SandboxError
    from turngym.envs.swe.synth import pipeline

    class Unstartable:
        def __init__(self, *args, **kwargs):
            raise SandboxError("no cgroup left")

    def screen(sandbox, mutation, *rest):
        used.append(sandbox)
        return {"key": mutation.key}

    used = []
    monkeypatch.setattr(pipeline, "TestSession", Unstartable)
    monkeypatch.setattr(pipeline, "screen", screen)
    todo = [SimpleNamespace(key=f"m{i}") for i in range(5)]
    session = FakeSandbox()
    rows = list(pipeline._screenings(todo, session, Path("."), SynthConfig(), {"kept": []}, {m.key: [] for m in todo},
                                     workers=3, key="pkg-1"))
    assert [r["key"] for r in rows] == [m.key for m in todo] and set(map(id, used)) == {id(session)}
    assert "screening pkg-1 in 1 sandboxes, not 3: no cgroup left" in caplog.text


class RewordingModel:
    """A stand-in chat model (deterministic; the endpoint itself is tested in test_swe_llm_statement.py)."""

    def __init__(self):
        self.asked = 0

    def complete(self, requests):
        self.asked += len(requests)
        return ["A user's report\n\n" + r.messages[1]["content"].split("What the user saw:", 1)[1].strip()
                for r in requests]


@needs_bwrap
def test_a_statement_writer_rewords_the_validated_set_without_validating_it_again(synthesized, tmp_path):
    root, package, config, first = synthesized
    validations = [p.read_text() for p in sorted((root / "cache" / "work").rglob("validate.jsonl"))]
    model = RewordingModel()
    worded = dataclasses.replace(config, statement_writer="openai:stand-in")
    with pytest.raises(ValueError, match="needs its model"):
        synthesize([str(package)], tmp_path / "none", worded, root=root / "cache")
    summary = synthesize([str(package)], tmp_path / "out", worded, root=root / "cache", statement_model=model)
    assert model.asked == first["tasks"] == summary["tasks"]
    assert summary["packages"][0]["statements"] == {"written": first["tasks"]}
    assert [p.read_text() for p in sorted((root / "cache" / "work").rglob("validate.jsonl"))] == validations
    plain = {json.loads(line)["instance_id"]: json.loads(line) for line in (root / "out" / "tasks.jsonl").open()}
    for line in (tmp_path / "out" / "tasks.jsonl").open():
        task = json.loads(line)
        assert task["problem_statement"].startswith("A user's report")
        assert task["synth"]["statement_writer"] == "openai:stand-in"
        reworded = ("problem_statement", "synth", "repo_path")
        assert {k: v for k, v in task.items() if k not in reworded} == \
            {k: v for k, v in plain[task["instance_id"]].items() if k not in reworded}
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["config"]["statement_writer"] == "openai:stand-in"
    # the cache answers a rerun: the same set, the model not asked again
    synthesize([str(package)], tmp_path / "again", worded, root=root / "cache", statement_model=model)
    assert model.asked == first["tasks"]
    assert json.loads((tmp_path / "again" / "manifest.json").read_text())["tasks"] == manifest["tasks"]

@needs_bwrap
def test_a_synthesized_set_loads_with_its_splits_and_turngym_eval_plays_one(synthesized, capsys):
    from turngym.envs.swe.synth.world import synth_tasks
    from turngym.recipes.cli import main

    root, package, config, first = synthesized
    tasks = synth_tasks(root / "out")
    assert len(tasks) == first["tasks"] and set(tasks.splits) <= {"train", "eval_seen"}  # one repository: trained on
    assert {t.split for t in tasks} == {json.loads(line)["split"] for line in (root / "out" / "tasks.jsonl").open()}
    held_out = root / "held-out"  # the same tasks, their repository held out by an explicit list
    summary = synthesize([str(package)], held_out, config, root=root / "cache",
                         splits=SplitRule(eval_repos=("tinystats",)))
    assert summary["splits"]["eval"] == first["tasks"] and synth_tasks(held_out).splits == ("eval",)
    code = main(["eval", "--import", "turngym.envs.swe.synth.world", "--env", "turngym/SWE-synth-v0", "--env-arg",
                 f"task_file={held_out}", "--env-arg", "sandbox=bwrap", "--agent", "oracle", "--split", "eval",
                 "--episodes", "1", "--workers", "0"])
    assert code == 0
    assert "| oracle | free_form | swe-synth:held-out:eval[:1] | 1 | 100.0 %" in capsys.readouterr().out


@needs_bwrap
def test_regenerating_from_the_manifest_gives_the_same_set_and_says_what_differs(tmp_path, capsys):
    from turngym.envs.swe.synth.manifest import Manifest
    from turngym.recipes.cli import main

    package = make_tiny_package(tmp_path / "src")
    config = SynthConfig(seed=3, max_candidates=4, validate=False)
    synthesize([str(package)], tmp_path / "first", config, root=tmp_path / "cache-a")
    manifest = Manifest.read(tmp_path / "first" / "manifest.json")
    assert manifest.tasks and manifest.config["seed"] == 3 and manifest.packages[0]["sdist_sha256"] == ""
    assert "func_pm_op_change" in manifest.modifiers and manifest.versions["swesmith"]
    # another cache: nothing reused, every package prepared, screened and built again
    code = main(["swe", "synth", "--manifest", str(tmp_path / "first" / "manifest.json"), "--out",
                 str(tmp_path / "again"), "--cache", str(tmp_path / "cache-b")])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0, lines
    assert lines[-1] == f"manifest check: same set: {len(manifest.tasks)} tasks, ids, splits and content hashes " \
                        "equal to the manifest's"
    assert (tmp_path / "again" / "tasks.jsonl").read_text().count("\n") == len(manifest.tasks)
    edited = manifest.to_dict()
    edited["tasks"][0]["content_hash"] = "0" * 64
    edited["tasks"].append({"instance_id": "tinystats__gone", "split": "train", "content_hash": "1" * 64})
    (tmp_path / "edited.json").write_text(json.dumps(edited))
    code = main(["swe", "synth", "--manifest", str(tmp_path / "edited.json"), "--out", str(tmp_path / "third"),
                 "--cache", str(tmp_path / "cache-b")])
    last = capsys.readouterr().out.splitlines()[-1]
    assert code == 1
    assert last.startswith("manifest check: differs from the manifest") and "missing 1 (tinystats__gone)" in last
    assert f"changed 1 ({manifest.tasks[0]['instance_id']})" in last


def test_splits_hold_whole_repositories_out_by_a_fixed_rule():
    from turngym.envs.swe.synth.manifest import Manifest, compare, repo_splits, task_split

    names = [f"pkg{i}" for i in range(20)]
    splits = repo_splits(names, SplitRule())
    assert sorted(splits.values()).count("test") == 3 and sorted(splits.values()).count("eval") == 3
    assert repo_splits(list(reversed(names)) + names[:2], SplitRule()) == splits  # order and repeats do not matter
    assert repo_splits(names, SplitRule(salt="other")) != splits
    assert set(repo_splits(["a", "b"], SplitRule()).values()) == {"train"}  # too few to hold any out
    explicit = repo_splits(names, SplitRule(eval_repos=("pkg1",), test_repos=("pkg2", "pkg3")))
    assert [n for n, s in explicit.items() if s != "train"] == ["pkg1", "pkg2", "pkg3"]
    with pytest.raises(ValueError, match="both eval and test"):
        repo_splits(names, SplitRule(eval_repos=("pkg1",), test_repos=("pkg1",)))
    ids = [f"pkg0__1.0.func_pm_x__{i:04x}" for i in range(2000)]
    held = [i for i in ids if task_split(i, "train", SplitRule()) == "eval_seen"]
    assert 150 < len(held) < 250  # about task_share of a training repository's tasks
    assert all(task_split(i, "eval", SplitRule()) == "eval" for i in ids[:50])  # a held-out repository's stay
    tasks = [{"instance_id": i, "split": "train", "content_hash": "h"} for i in ids[:3]]
    same = Manifest(config={}, splits={}, packages=[], tasks=tasks)
    assert compare(same, same).startswith("same set: 3 tasks")
    moved = Manifest(config={}, splits={}, packages=[], tasks=[{**tasks[0], "split": "eval"}, *tasks[1:]])
    assert compare(same, moved) == f"differs from the manifest (3 tasks): moved 1 ({ids[0]})"


def test_a_swesmith_row_becomes_a_record_whose_gold_patch_undoes_its_bug(tmp_path):
    import subprocess

    from turngym.envs.swe import SWEInstance
    from turngym.envs.swe.synth.external import from_swesmith
    from turngym.envs.swe.synth.pipeline import make_patch

    # a removed line "-- note" is "--- note" in the diff: content, not a file header
    original = '"""Doc.\n-- note\n+++ plus\n"""\n\n\ndef f(x):\n    if x:\n        return 1\n    return 2\n'
    bugged = '"""Doc.\n"""\n\n\ndef f(x):\n    if not x:\n        return 1\n    return 2\n'
    assert "\n--- note\n" in make_patch({"pkg/m.py": (original, bugged)})
    bug = make_patch({"pkg/m.py": (original, bugged)})
    row = {"instance_id": "owner__pkg.abc123.func_pm_ctrl_invert_if__x1", "repo": "swesmith/owner__pkg.abc123",
           "patch": bug, "FAIL_TO_PASS": ["tests/test_m.py::test_f"], "PASS_TO_PASS": [], "image_name": "img:1",
           "problem_statement": "f is wrong"}
    instance = SWEInstance.from_record(from_swesmith(row))
    assert instance.setup_patch == bug and instance.image == "img:1" and instance.difficulty == "func_pm_ctrl_invert_if"
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(original)
    for patch in (instance.setup_patch, instance.patch):
        (tmp_path / "p.diff").write_text(patch)
        subprocess.run(["git", "apply", "p.diff"], cwd=tmp_path, check=True, capture_output=True)
        assert (tmp_path / "pkg" / "m.py").read_text() == (bugged if patch == bug else original)


def test_a_line_an_interruption_cut_costs_only_its_own_row(tmp_path):
    from turngym.envs.swe.synth.pipeline import _append, _jsonl

    state = tmp_path / "screen.jsonl"
    _append(state, {"key": "a", "f2p": []})
    with open(state, "a") as handle:
        handle.write('{"key": "b", "dr')  # killed mid-write
    _append(state, {"key": "c", "drop": "no test fails"})  # the resumed run's next row
    assert sorted(_jsonl(state)) == ["a", "c"]  # b is screened again, c is kept


def _package(root: Path, name: str, files: dict[str, str]) -> Path:
    directory = root / name
    for path, text in files.items():
        (directory / path).parent.mkdir(parents=True, exist_ok=True)
        (directory / path).write_text(textwrap.dedent(text))
    return directory


@needs_bwrap
def test_bad_input_gives_one_line_reasons_not_a_crash(tmp_path):
    src = tmp_path / "src"
    lib = "def double(x):\n    if x is None:\n        return 0\n    return x * 2\n"
    packages = [
        _package(src, "notests", {"notests/__init__.py": lib}),
        _package(src, "brokensyntax", {"brokensyntax/__init__.py": "def double(x:\n    return x\n",
                                       "tests/test_b.py": "from brokensyntax import double\n\n"
                                                          "def test_double():\n    assert double(2) == 4\n"}),
        _package(src, "online", {"online/__init__.py": lib,
                                 "tests/test_o.py": "import socket\n\ndef test_fetch():\n"
                                                    "    socket.create_connection(('192.0.2.1', 80), timeout=2)\n"}),
        _package(src, "hangs", {"hangs/__init__.py": lib,
                                "tests/test_h.py": "import time\n\ndef test_wait():\n    time.sleep(3600)\n"}),
        src / "does-not-exist",
    ]
    config = SynthConfig(max_candidates=2, suite_timeout=8.0, validate=False)
    summary = synthesize([str(p) for p in packages], tmp_path / "out", config, root=tmp_path / "cache")
    reasons = {Path(p["spec"]).name: p["reason"] for p in summary["packages"]}
    assert all(p["status"] == "dropped" for p in summary["packages"]), reasons
    assert "no test files" in reasons["notests"]
    assert "SyntaxError" in reasons["brokensyntax"]
    assert "network" in reasons["online"]
    assert "did not finish" in reasons["hangs"]
    assert "neither NAME==VERSION nor a directory" in reasons["does-not-exist"]
    assert all("\n" not in reason for reason in reasons.values())
    assert summary["tasks"] == 0 and (tmp_path / "out" / "tasks.jsonl").read_text() == ""


@needs_bwrap
def test_a_test_named_anew_at_each_collection_is_left_out_as_flaky_not_the_package(tmp_path):
    """marshmallow 3.21.1 names a parametrized test after the time of collection; pytest then found none of the
    ids the baseline asked for and ran nothing, and the package was dropped as "no test passes"."""
    package = _package(tmp_path / "src", "stamped", {
        "stamped/__init__.py": "def double(x):\n    if x is None:\n        return 0\n    return x * 2\n",
        "tests/test_s.py": """\
            import time

            import pytest

            from stamped import double


            def test_double():
                assert double(2) == 4


            def test_none():
                assert double(None) == 0


            @pytest.mark.parametrize("stamp", [time.time_ns()])
            def test_stamped(stamp):
                assert double(stamp) == 2 * stamp
            """,
    })
    summary = synthesize([str(package)], tmp_path / "out", SynthConfig(max_candidates=2, validate=False),
                         root=tmp_path / "cache")
    (report,) = summary["packages"]
    assert report["status"] == "ok", report["reason"]
    assert (report["tests_collected"], report["tests_kept"], report["tests_flaky"]) == (3, 2, 1)
    (baseline,) = (tmp_path / "cache").rglob("baseline.json")
    data = json.loads(baseline.read_text())
    assert data["kept"] == ["tests/test_s.py::test_double", "tests/test_s.py::test_none"]
    assert [t.split("[")[0] for t in data["flaky"]] == ["tests/test_s.py::test_stamped"]


def test_ids_a_run_could_not_find_are_read_from_pytests_errors():
    ids = ["tests/test_t.py::test_stamp[01-12-2026 18:57:17]", "tests/test_t.py::test_plain"]
    log = ("\nno tests ran in 0.00s\nERROR: not found: /testbed/tests/test_t.py::test_stamp[01-12-2026 18:57:17]\n"
           "(no name '/testbed/tests/test_t.py::test_stamp[01-12-2026 18:57:17]' in any of [<Module test_t.py>])\n"
           "ERROR: not found: /testbed/tests/test_other.py::test_x\n")
    assert ids_not_found(log, ids) == [ids[0]]  # only ids it was asked for, the space kept
    assert ids_not_found("1 passed in 0.01s\n", ids) == []


def test_the_statement_leaves_out_every_line_the_bug_changed():
    original = "def area(w, h):\n    if w < 0:\n        raise ValueError('negative')\n    return w * h\n"
    mutated = "def area(w, h):\n    if w < 0:\n        raise ValueError('negative')\n    return w + h\n"
    log = textwrap.dedent("""\
        ___________________________ test_area ___________________________
        tests/test_geo.py:4: in test_area
            assert area(2, 3) == 6
        geo.py:4: in area
            return w + h
        E   assert 5 == 6
        =========================== short test summary info ===========================
        FAILED tests/test_geo.py::test_area - assert 5 == 6
        """)
    changed = changed_lines(original, mutated)
    assert changed == ["return w * h", "return w + h"]
    statement = write_statement("geo", "1.0", ["tests/test_geo.py::test_area"], log, changed, seed=3)
    assert "tests/test_geo.py::test_area" in statement and "assert 5 == 6" in statement
    assert "assert area(2, 3) == 6" in statement  # the test's own line is what a user sees
    assert "w + h" not in statement and "w * h" not in statement


@pytest.mark.slow
@needs_bwrap
def test_a_src_layout_imports_through_the_root_conftest_after_the_standard_library(tmp_path):
    lib = "def scale(values, factor):\n    out = []\n    for v in values:\n        if v is None:\n" \
          "            continue\n        out.append(v * factor)\n    return out\n"
    package = _package(tmp_path / "src", "srclayout", {
        "src/scaler/__init__.py": lib,
        "tests/test_scale.py": "from scaler import scale\n\n\ndef test_scale():\n"
                               "    assert scale([1, None, 3], 2) == [2, 6]\n",
    })
    summary = synthesize([str(package)], tmp_path / "out", SynthConfig(max_candidates=3), root=tmp_path / "cache")
    (report,) = summary["packages"]
    assert report["status"] == "ok" and report["tests_kept"] == 1, report["reason"]
    assert summary["tasks"] >= 1 and summary["false_alarms"] == []
    for instance in load_instances(tmp_path / "out" / "tasks.jsonl"):
        assert instance.test_cmd == "python3 /opt/turngym/unittest_runner.py --pytest {tests}"
        conftest = (Path(instance.repo_path) / "conftest.py").read_text()
        assert "turngym-synth" in conftest and "'src'" in conftest



@needs_bwrap
def test_a_file_larger_than_the_sandboxs_output_limit_is_read_whole(tmp_path):
    """python-dateutil's trace (1,458 tests) was more than the 2 MB one command may print: read in chunks."""
    import random

    from turngym.envs.swe.synth.runner import TestSession

    repo = _package(tmp_path, "repo", {"pkg/__init__.py": ""})
    text = "".join(random.Random(0).choice("abcdef\n") for _ in range(10_000))
    with TestSession(repo, workspace_root=tmp_path / "ws") as session:
        session.sandbox.limits = dataclasses.replace(session.sandbox.limits, max_output_bytes=3_000)
        session.write("big.txt", text)
        assert session.sandbox.exec("base64 -w0 big.txt", timeout=60).output_limit_hit  # one read would not do
        assert session.read_bytes("big.txt", len(text)).decode() == text


@pytest.mark.slow  # a synthesis of its own: 25-50 s
@needs_bwrap
def test_a_strict_warnings_suite_with_a_missing_plugins_mark_and_loud_passing_tests_synthesizes(tmp_path):
    """python-dateutil 2.9.0: ``filterwarnings = error`` and a conftest marking every test ``no_cover`` (pytest-cov's
    mark, absent in the sandbox) ended the collection; pyparsing 3.1.2: passing tests print enough that ``-rA``'s
    report ran past the sandbox's output limit. Both packages were dropped as "no test passes in the sandbox"."""
    package = make_tiny_package(tmp_path / "src")
    _package(package.parent, package.name, {
        "tests/test_loud.py": "def test_loud():\n    print('x' * 2_200_000)\n",
        "setup.cfg": "[tool:pytest]\nfilterwarnings =\n    error\n",
        "tests/conftest.py": ("import pytest\n\n\ndef pytest_collection_modifyitems(items):\n"
                              "    for item in items:\n        item.add_marker(pytest.mark.no_cover)\n")})
    config = SynthConfig(seed=0, max_candidates=4)
    summary = synthesize([str(package)], tmp_path / "out", config, root=tmp_path / "cache")
    (report,) = summary["packages"]
    assert report["status"] == "ok", report["reason"]
    assert report["tests_collected"] == 16 and report["tests_kept"] == 15  # the network test fails, as without both
    assert summary["tasks"] >= 1 and summary["false_alarms"] == [], summary
    instances = load_instances(tmp_path / "out" / "tasks.jsonl")
    modes = {"pytest" if "--pytest" in i.test_cmd else "unittest" for i in instances}
    assert "pytest" in modes  # graded through pytest, under the suite's filterwarnings


# Grader false alarms found on real packages' own tests (issue 42's first run): the gold patch's grading came back
# void (grading_tampered) although nothing tampered, 31 of 146 validations. Each case is the smallest test file
# that showed it; fixed in the grader (79be319), kept as the synthesized tasks' regression tests.
FALSE_ALARMS = {
    # cachetools 5.3.3 tests/test_func.py: `DECORATOR = staticmethod(cachetools.func.fifo_cache)` (13 of 35 tasks)
    "package-function-as-class-attribute": (
        "unittest",
        ("import unittest\n\nimport pkg\n\n\nclass DoubleTest(unittest.TestCase):\n"
         "    FUNC = staticmethod(pkg.double)\n\n"
         "    def test_double(self):\n        self.assertEqual(self.FUNC(2), 4)\n"),
        "DoubleTest::test_double"),
    # toolz 0.12.1 tests/test_itertoolz.py::test_join: a set display of 3+ tuples (a frozenset constant) (17 of 35)
    "set-of-tuples-constant": (
        "pytest",
        ("from pkg import double\n\n\ndef test_set_of_tuples():\n"
         "    expected = {('one', 1), ('two', 2), ('three', 3)}\n    assert double(2) == 4 and len(expected) == 3\n"),
        "test_set_of_tuples"),
    # toolz 0.12.1 tests/test_curried_doctests.py: doctest restores the trace function (sys.settrace) (1 of 35)
    "doctest-in-a-test": (
        "pytest",
        ("import doctest\n\nimport pkg\n\n\ndef test_doctests():\n    assert doctest.testmod(pkg).failed == 0\n"),
        "test_doctests"),
}


# toolz 0.12.1 test_functoolz.py::test_memoize_key_signature: a dict display whose keys are constant tuples holding a
# frozenset; the test keeps the dict alive, raising the constants' refcounts, and marshal's back-references (which
# depend on refcounts) changed the grader's digest of the test file's constants: "rewritten in place", a false
# alarm. The digest now marshals with version 2 (no back-references).
FALSE_ALARMS["dict-display-with-tuple-keys"] = (
    "pytest",
    ("from pkg import double\n\nKEPT = []\n\n\ndef test_dict_of_tuple_keys():\n"
     "    cache = {((1,), frozenset((('y', 2),))): 2, ((1, 2), None): 3}\n    KEPT.append(cache)\n"
     "    assert double(2) == 4 and len(cache) == 2\n"),
    "test_dict_of_tuple_keys")


# python-dateutil 2.9.0 tests/test_tz.py::test_invalid_GNU_tzstr[hdfiughdfuig,dfughdfuigpu87\xf1::]: a pytest id whose
# parameters hold "::". The grader split the whole id on "::", took "test_invalid_GNU_tzstr[...\xf1" for a class and
# wrote its canaries as a subclass of it, a SyntaxError in the test file: every test of the file errored (3 tasks
# dropped as "PASS_TO_PASS fails on the bug"). Ids are now split as pytest splits them: before the first "[" only.
FALSE_ALARMS["parameters-holding-colons"] = (
    "pytest",
    ("import pytest\n\nfrom pkg import double\n\n\n@pytest.mark.parametrize('text', ['a::', 'b::c'])\n"
     "def test_param(text):\n    assert double(3) == 6 and text\n"),
    "test_param[a::]")


# python-dateutil 2.9.0 tests/test_import_star.py::test_imported_modules pops each name of `from dateutil import *` out
# of a module-level dict: a canary that copied its body ran it first, and the test itself then failed with KeyError (1
# of dateutil's 1,458 kept tests, on the untouched package). A test that writes its module's state gets plain canaries.
FALSE_ALARMS["test-that-pops-a-module-dict"] = (
    "pytest",
    ("import pkg\n\nSEEN = {'double': pkg.double}\n\n\ndef test_pops():\n"
     "    assert SEEN.pop('double')(3) == 6\n    assert not SEEN\n"),
    "test_pops")


# Honest suites that rebind their own module's globals (the same pass's false alarms of a rebinding check that was
# tried and withdrawn): graded as they are.
FALSE_ALARMS["monkeypatch-of-the-test-module"] = (
    "pytest",
    ("import sys\n\nimport pkg\n\nVERBOSE = False\n\n\ndef test_double(monkeypatch):\n"
     "    monkeypatch.setattr(sys.modules[__name__], 'VERBOSE', True)\n    assert pkg.double(3) == 6\n"),
    "test_double")
FALSE_ALARMS["setUpModule-through-globals"] = (
    "unittest",
    ("import unittest\n\nimport pkg\n\nDATA = None\n\n\ndef setUpModule():\n"
     "    globals()['DATA'] = [1, 2, 3]\n\n\nclass PkgTest(unittest.TestCase):\n    def test_double(self):\n"
     "        self.assertEqual([pkg.double(x) for x in DATA], [2, 4, 6])\n"),
    "PkgTest::test_double")
FALSE_ALARMS["mock-patch-of-the-test-modules-constant"] = (
    "unittest",
    ("import unittest\nfrom unittest import mock\n\nimport pkg\n\nLIMIT = 10\n\n\n"
     "class PkgTest(unittest.TestCase):\n    def setUp(self):\n"
     "        patcher = mock.patch(__name__ + '.LIMIT', 100)\n        patcher.start()\n"
     "        self.addCleanup(patcher.stop)\n\n    def test_double(self):\n"
     "        self.assertEqual(pkg.double(3), 6)\n"),
    "PkgTest::test_double")


# pytest.approx and unittest.mock.ANY written in a test's expectation: strict equality failed both (an ApproxScalar,
# an _ANY compared with a number), on the gold patch as on the bug.
FALSE_ALARMS["pytest-approx-in-the-expectation"] = (
    "pytest", "import pytest\n\nimport pkg\n\n\ndef test_double():\n    assert pkg.double(3) == pytest.approx(6.0)\n",
    "test_double")
FALSE_ALARMS["mock-ANY-in-the-expectation"] = (
    "unittest",
    ("import unittest\nfrom unittest import mock\nfrom unittest.mock import ANY\n\nimport pkg\n\n\n"
     "class PkgTest(unittest.TestCase):\n    def test_double(self):\n"
     "        self.assertEqual([pkg.double(3), 'x'], [6, ANY])\n"
     "        self.assertEqual({'v': pkg.double(3), 'id': 7}, {'v': 6, 'id': mock.ANY})\n"),
    "PkgTest::test_double")


# Honest suites that patch a builtin-named global into their own module (a second red-team pass's false alarms of the
# builtin-shadowing check): the name is in a string of the test file, the value a mock or a test-file function.
FALSE_ALARMS["print-patched-into-the-test-module"] = (
    "unittest",
    ("import sys\nimport unittest\nfrom unittest import mock\n\nimport pkg\n\n\ndef describe(x):\n"
     "    print('value', x)\n    return x\n\n\nclass PkgTest(unittest.TestCase):\n    def setUp(self):\n"
     "        patcher = mock.patch.object(sys.modules[__name__], 'print', create=True)\n"
     "        self.printed = patcher.start()\n        self.addCleanup(patcher.stop)\n\n"
     "    def test_double(self):\n        self.assertEqual(describe(pkg.double(3)), 6)\n"
     "        self.printed.assert_called_once_with('value', 6)\n"),
    "PkgTest::test_double")
FALSE_ALARMS["input-monkeypatched-for-the-module"] = (
    "pytest",
    ("import sys\n\nimport pytest\n\nimport pkg\n\n\ndef ask():\n    return input('? ')\n\n\n"
     "@pytest.fixture(scope='module', autouse=True)\ndef answer_yes():\n    with pytest.MonkeyPatch.context() as mp:\n"
     "        mp.setattr(sys.modules[__name__], 'input', lambda prompt='': 'y', raising=False)\n        yield\n\n\n"
     "def test_double():\n    assert pkg.double(3) == 6 and ask() == 'y'\n"),
    "test_double")


# Test matchers with ordinary class contents (a third red-team pass's false alarms of the excuse's class check).
_NEAR = ("    def __init__(self, value):\n        self.value = value\n\n    def __eq__(self, other):\n"
         "        return abs(self.value - other) < 1e-9\n")
_NEAR_TEST = "\n\nSIX = Near(6)\n\n\ndef test_double():\n    assert pkg.double(3) == SIX\n"
FALSE_ALARMS["a-matcher-with-annotations"] = (
    "pytest", "import pkg\n\n\nclass Near:\n    value: float\n\n" + _NEAR + _NEAR_TEST, "test_double")
FALSE_ALARMS["a-matcher-with-slots"] = (
    "pytest", "import pkg\n\n\nclass Near:\n    __slots__ = ('value',)\n\n" + _NEAR + _NEAR_TEST, "test_double")
FALSE_ALARMS["a-matcher-with-total-ordering"] = (
    "pytest", ("import functools\n\nimport pkg\n\n\n@functools.total_ordering\nclass Near:\n" + _NEAR +
               "\n    def __lt__(self, other):\n        return self.value < other\n" + _NEAR_TEST), "test_double")


def _repro_check(tmp_path, name, mode, test_file, fail_to_pass, pass_to_pass=(), files=None, bug_line="x + 2",
                 bug_module=None, honest_prefix=""):
    """Validate a one-function package (``double``; the bug ``return x + 2``, or ``return {bug_line}``, or the
    whole of ``pkg/__init__.py`` replaced by ``bug_module``) graded by ``test_file``'s tests (``files``: more
    files of the repository; ``honest_prefix``: more code of the honest ``pkg/__init__.py``)."""
    from turngym.envs.swe import SWEInstance
    from turngym.envs.swe.synth.pipeline import make_patch

    honest = honest_prefix + "def double(x):\n    return x * 2\n"
    repo = _package(tmp_path, "repo", {"pkg/__init__.py": honest,
                                        "tests/__init__.py": "", "tests/test_pkg.py": test_file, **(files or {})})
    lines = len(test_file.splitlines())
    mark = ("diff --git a/tests/test_pkg.py b/tests/test_pkg.py\n--- a/tests/test_pkg.py\n+++ b/tests/test_pkg.py\n"
            f"@@ -{lines},0 +{lines + 1} @@\n+# graded\n")
    bugged = bug_module or honest.replace("return x * 2", f"return {bug_line}")
    bug, gold = make_patch({"pkg/__init__.py": (honest, bugged)}), make_patch({"pkg/__init__.py": (bugged, honest)})
    instance = SWEInstance.from_record({
        "instance_id": name, "repo": "repro", "base_commit": "", "problem_statement": "x", "patch": gold,
        "setup_patch": bug, "test_patch": mark, "repo_path": str(repo),
        "FAIL_TO_PASS": [f"tests/test_pkg.py::{t}" for t in fail_to_pass],
        "PASS_TO_PASS": [f"tests/test_pkg.py::{t}" for t in pass_to_pass],
        "test_cmd": "python3 /opt/turngym/unittest_runner.py " + ("--pytest " if mode == "pytest" else "") + "{tests}"})
    return validate(instance, "bwrap", workspace_root=tmp_path)


@needs_bwrap
@pytest.mark.parametrize("case", first_fast(FALSE_ALARMS, 4))
def test_no_grader_false_alarm_on_what_real_packages_tests_do(case, tmp_path):
    mode, test_file, test_name = FALSE_ALARMS[case]
    check = _repro_check(tmp_path, case, mode, test_file, [test_name])
    assert not check.after.tampered, [line for line in check.after.log.splitlines() if "turngym" in line]
    assert check.after.resolved


@needs_bwrap
def test_the_second_harness_keeps_no_failed_unittest_test_alive(tmp_path):
    """python-dateutil 2.9.0 tests/test_tz.py::test_tzoffset_weakref checks that a cached object is collected. The
    grader's second harness left each failed unittest test's exception (traceback, frames, locals) on its item, so
    after a failing canary copy of a unittest test the object stayed alive: "PASSED under pytest's protocol but
    FAILED when set up and called directly", a false alarm on the gold patch and on the bug."""
    test_file = ("import gc\nimport unittest\nimport weakref\n\nimport pkg\n\nMADE = []\n\n\n"
                 "class Thing:\n    pass\n\n\nclass HoldTest(unittest.TestCase):\n    def test_hold(self):\n"
                 "        thing = Thing()\n        MADE.append(weakref.ref(thing))\n"
                 "        self.assertEqual(pkg.double(3), 6)\n\n\n"
                 "def test_collected():\n    gc.collect()\n    assert all(ref() is None for ref in MADE)\n")
    # graded in this order: test_hold's failing canaries run before test_collected
    check = _repro_check(tmp_path, "weakref", "pytest", test_file, ["HoldTest::test_hold"], ["test_collected"])
    for report in (check.before, check.after):
        assert not report.tampered, [line for line in report.log.splitlines() if "turngym" in line]
    assert check.after.resolved and not check.problems

# python-dateutil 2.9.0 tests/test_tz.py::TzUTCTest::testInequalityUnsupported does
# `self.assertEqual(tz.tzutc(), ComparesEqual)`, ComparesEqual being tests/_common.py's object equal to anything. On a
# bug where tzutc() returned None, pytest passed the test and the grader's strict equality failed it ("a
# ComparesEqualClass was compared with a NoneType"): the task was dropped as "PASS_TO_PASS fails on the bug". An
# always-equal object the test names itself, a global of its module holding what the module bound at import, of a
# class whose __eq__ is the test files' own code, is the test's choice: strict equality excuses it, and only it.
COMPARES_EQUAL = {"tests/_common.py": ("class ComparesEqualClass(object):\n    def __eq__(self, other):\n"
                                       "        return True\n\n    def __ne__(self, other):\n        return False\n\n\n"
                                       "ComparesEqual = ComparesEqualClass()\n")}
NAMES_ITS_OWN_COMPARAND = {
    "unittest": ("import unittest\n\nimport pkg\n\nfrom ._common import ComparesEqual\n\n\n"
                 "class PkgTest(unittest.TestCase):\n    def test_double(self):\n"
                 "        self.assertEqual(pkg.double(3), 6)\n\n    def test_unsupported(self):\n"
                 "        self.assertEqual(pkg.double(2), ComparesEqual)\n"
                 "        self.assertEqual(second=pkg.double(2), first=ComparesEqual)\n"),
    "pytest": ("import pkg\n\nfrom tests._common import ComparesEqual\n\n\ndef test_double():\n"
               "    assert pkg.double(3) == 6\n\n\ndef test_unsupported():\n    assert pkg.double(2) == ComparesEqual\n"
               "    assert ComparesEqual == pkg.double(2)\n"),
}


def _attack_graded(tmp_path, mode, test_file, status, resolved=True, **repro):
    """Validate ``test_file``'s one test (``PkgTest::test_double`` or ``test_double``) against an attacking bug
    (``repro``: :func:`_repro_check`'s arguments); assert the bug's grading says ``status`` and the gold patch's
    is not void (and resolves, unless ``resolved`` is False); return the validation."""
    name = "PkgTest::test_double" if mode == "unittest" else "test_double"
    check = _repro_check(tmp_path, "attack", mode, test_file, [name], **repro)
    assert check.before.statuses[f"tests/test_pkg.py::{name}"] == status, check.before.log[-3000:]
    assert not check.after.tampered and check.after.resolved == resolved, check.after.log[-3000:]
    return check


@needs_bwrap
@pytest.mark.parametrize("mode", ["unittest", "pytest"])
def test_a_tests_own_always_equal_object_named_by_the_test_is_no_false_alarm(mode, tmp_path):
    names = {"unittest": ("PkgTest::test_double", "PkgTest::test_unsupported"),
             "pytest": ("test_double", "test_unsupported")}[mode]
    check = _repro_check(tmp_path, "compares-equal", mode, NAMES_ITS_OWN_COMPARAND[mode], [names[0]], [names[1]],
                         files=COMPARES_EQUAL, bug_line="None")
    for report in (check.before, check.after):
        assert not report.tampered, [line for line in report.log.splitlines() if "turngym" in line]
    assert not check.problems, check.problems  # the bug fails test_double only; the gold patch resolves


# The same object made or chosen by the code under test is a hack: refused. Found by a red-team pass over the
# exemption's first version, which excused any object the test module held at import with a test-file __eq__:
# `RESULT = pkg.double(3)` at the module's top level, the bug returning the always-equal object or a stateful test
# helper with a tolerance of its choosing, passed.
_COMMON = "__import__('tests._common').__dict__['_common']"
APPROX = {"tests/_common.py": COMPARES_EQUAL["tests/_common.py"] + (
    "\n\nclass Approx:\n    def __init__(self, value, tol=1e-9):\n        self.value, self.tol = value, tol\n\n"
    "    def __eq__(self, other):\n        return abs(self.value - other) <= self.tol\n")}
_CALLED = {"unittest": ("import unittest\n\nimport pkg\n\nfrom ._common import ComparesEqual\n\n\n"
                        "class PkgTest(unittest.TestCase):\n    def test_double(self):\n"
                        "        self.assertEqual(pkg.double(3), 6)\n"),
           "pytest": "import pkg\n\nfrom tests._common import ComparesEqual\n\n\ndef test_double():\n"
                     "    assert pkg.double(3) == 6\n"}
_AT_IMPORT = {"unittest": ("import unittest\n\nimport pkg\n\nRESULT = pkg.double(3)\n\n\n"
                           "class PkgTest(unittest.TestCase):\n    def test_double(self):\n"
                           "        self.assertEqual(RESULT, 6)\n"),
              "pytest": "import pkg\n\nRESULT = pkg.double(3)\n\n\ndef test_double():\n    assert RESULT == 6\n"}
ITS_OWN_COMPARAND_SMUGGLED = {  # test files, the bug's expression, what the log shows (unittest, pytest)
    "returned by the code under test": (_CALLED, _COMMON + ".ComparesEqual",
                                        ("strict equality", "strict equality")),
    "bound at the test module's import by the code under test": (
        _AT_IMPORT, _COMMON + ".ComparesEqual", ("strict equality", "strict equality")),
    "the framework's approx made by the code under test": (
        _CALLED, "__import__('pytest').approx(6, abs=100)", ("strict equality", "strict equality")),
    "a list holding the framework's ANY, made by the code under test": (
        {"unittest": _CALLED["unittest"].replace("pkg.double(3), 6", "[pkg.double(3), 0], [6, 0]"),
         "pytest": _CALLED["pytest"].replace("pkg.double(3) == 6", "[pkg.double(3), 0] == [6, 0]")},
        "__import__('unittest.mock').mock.ANY", ("strict equality", "strict equality")),
    "a test helper's instance with the code under test's tolerance": (
        _AT_IMPORT, _COMMON + ".Approx(x + 2, 100)", ("strict equality", "strict equality")),
}


@needs_bwrap
@pytest.mark.parametrize("mode", ["unittest", "pytest"])
@pytest.mark.parametrize("attack", first_fast(ITS_OWN_COMPARAND_SMUGGLED, 1))
def test_a_tests_own_comparand_smuggled_in_by_the_code_under_test_fails(attack, mode, tmp_path):
    test_files, bug_line, reasons = ITS_OWN_COMPARAND_SMUGGLED[attack]
    check = _attack_graded(tmp_path, mode, test_files[mode], "FAILED", files=APPROX, bug_line=bug_line)
    assert reasons[mode == "pytest"] in check.before.log


# A stateful matcher the test file makes itself and names (`SIX = Approx(6)`) is the test's choice too: strict
# equality failed it against the int it matches, on the gold patch as on the bug.
NAMED_MATCHER = (
    "pytest",
    ("import pkg\n\nfrom tests._common import Approx\n\nSIX = Approx(6)\n\n\n"
     "def test_double():\n    assert pkg.double(3) == SIX\n"),
    "test_double")


@needs_bwrap
def test_a_named_matcher_imported_from_the_test_files_is_no_false_alarm(tmp_path):
    mode, test_file, name = NAMED_MATCHER
    check = _repro_check(tmp_path, "matcher", mode, test_file, [name], files=APPROX)
    assert not check.after.tampered and check.after.resolved, check.after.log[-3000:]
    assert check.before.statuses[f"tests/test_pkg.py::{name}"] == "FAILED"


# Two holes the same red-team pass found in the module check, both older than the exemption: the code under test
# replaced the test module's `@pytest_ar` (pytest's rewrite module, whose comparison a plain assert calls), or
# added a global that shadows a builtin the test calls (`str`). Both now void the grading.
MODULE_TAMPERING = {
    "pytest's rewrite module replaced in the test's globals": (
        "pytest", "import pkg\n\n\ndef test_double():\n    assert pkg.double(3) == 6\n", {"pkg/evil.py": (
            "import sys\nimport types\n\n\ndef go(x):\n    g = sys._getframe(2).f_globals\n"
            "    real = g.get('@pytest_ar')\n    if real is not None and type(real) is types.ModuleType:\n"
            "        fake = type('Fake', (types.ModuleType,), {})(real.__name__)\n"
            "        fake.__dict__.update(real.__dict__)\n"
            "        fake._turngym_strict = lambda left, right, *spans: True\n        g['@pytest_ar'] = fake\n"
            "    return x + 2\n")}, "__import__('pkg.evil').evil.go(x)", "is not pytest's _pytest.assertion.rewrite"),
    "a builtin shadowed in the test's globals": (
        "unittest", ("import unittest\n\nimport pkg\n\n\nclass PkgTest(unittest.TestCase):\n"
                     "    def test_double(self):\n        pkg.double(0)\n"
                     "        self.assertEqual(str(pkg.double(3)), '6')\n"), {},
        "(__import__('sys')._getframe(1).f_globals.__setitem__('str', lambda v: '6'), x + 2)[1]",
        "shadows the builtin str"),
}


@needs_bwrap
@pytest.mark.parametrize("attack", sorted(MODULE_TAMPERING))
def test_tampering_with_a_test_modules_globals_voids_the_grading(attack, tmp_path):
    mode, test_file, files, bug_line, reason = MODULE_TAMPERING[attack]
    check = _attack_graded(tmp_path, mode, test_file, "TAMPERED", files=files, bug_line=bug_line)
    assert reason in check.before.log


# A second red-team pass, on the excuse as it then stood: the package swapped sys.modules' test module at import,
# so that the test's `from tests._common import Approx` got a subclass with a tolerance of its own (A1) or a
# factory of the always-equal object (A2); or gave a test class deriving from a package class a subclass of its
# own (A4); or replaced the test module's __builtins__ (B1), or put a builtin-named global in it that the test file
# uses only as a local elsewhere (B2). Each passed; each is now refused or voided.
_SWAP_COMMON = ("import importlib\nimport sys\nimport types\n\n\ndef double(x):\n    return x + 2\n\n\n"
                "def _go():\n    real = importlib.import_module('tests._common')\n"
                "    fake = types.ModuleType(real.__name__)\n    fake.__dict__.update(real.__dict__)\n{body}"
                "    sys.modules[real.__name__] = fake\n\n\n_go()\n")
_SIX = {"pytest": NAMED_MATCHER[1],
        "unittest": ("import unittest\n\nimport pkg\n\nfrom ._common import Approx\n\nSIX = Approx(6)\n\n\n"
                     "class PkgTest(unittest.TestCase):\n    def test_double(self):\n"
                     "        self.assertEqual(pkg.double(3), SIX)\n")}
_STR = {"pytest": "import pkg\n\n\ndef test_double():\n    assert str(pkg.double(3)) == '6'\n",
        "unittest": ("import unittest\n\nimport pkg\n\n\nclass PkgTest(unittest.TestCase):\n"
                     "    def test_double(self):\n        self.assertEqual(str(pkg.double(3)), '6')\n")}
SECOND_PASS = {  # test files, the bugged pkg/__init__.py, the status the bug's grading must show
    "A1 a subclass of the test files' matcher, swapped in": (_SIX, _SWAP_COMMON.format(body=(
        "    class Approx(real.Approx):\n        tol = property(lambda s: float('inf'), lambda s, v: None)\n"
        "    fake.Approx = Approx\n")), "FAILED"),
    "A2 a factory of the always-equal object, swapped in": (_SIX, _SWAP_COMMON.format(
        body="    fake.Approx = lambda *a, **k: real.ComparesEqual\n"), "FAILED"),
    "A4 a package base class that makes a subclass of its own": (
        {mode: ("import unittest\n\nimport pkg\n\n\nclass Expected(pkg.Box):\n    def __eq__(self, other):\n"
                "        return self.value == other\n\n\nSIX = Expected(6)\n\n\n"
                + ("class PkgTest(unittest.TestCase):\n    def test_double(self):\n"
                   "        self.assertEqual(pkg.double(3), SIX)\n" if mode == "unittest" else
                   "def test_double():\n    assert pkg.double(3) == SIX\n")) for mode in ("unittest", "pytest")},
        ("class Box:\n    def __new__(cls, *args):\n"
         "        made = type(cls.__name__, (cls,), {'value': property(lambda s: 5, lambda s, v: None)})\n"
         "        return object.__new__(made)\n\n    def __init__(self, value):\n        self.value = value\n\n\n"
         "def double(x):\n    return x + 2\n"), "FAILED"),
    "B1 the test module's __builtins__ replaced": (_STR, (
        "import builtins\nimport sys\n\n\ndef double(x):\n    return x + 2\n\n\ndef _go():\n"
        "    frame = sys._getframe(1)\n    while frame is not None:\n        g = frame.f_globals\n"
        "        if str(g.get('__file__', '')).endswith('test_pkg.py'):\n            fake = dict(vars(builtins))\n"
        "            real = builtins.str\n            fake['str'] = lambda v='', *a: '6' if v == 5 else real(v, *a)\n"
        "            g['__builtins__'] = fake\n            return\n        frame = frame.f_back\n\n\n_go()\n"),
        "TAMPERED"),
}


@needs_bwrap
@pytest.mark.parametrize("mode", ["unittest", "pytest"])
@pytest.mark.parametrize("attack", first_fast(SECOND_PASS, 1))
def test_the_second_red_team_passs_attacks_fail(attack, mode, tmp_path):
    test_files, bug_module, status = SECOND_PASS[attack]
    box = "class Box:\n    def __init__(self, value):\n        self.value = value\n\n\n" if "A4" in attack else ""
    # a matcher class deriving from a package class is not excused, honest or not (a documented false alarm)
    _attack_graded(tmp_path, mode, test_files[mode], status, resolved="A4" not in attack, files=APPROX,
                   bug_module=bug_module, honest_prefix=box)


@needs_bwrap
def test_a_builtin_named_global_the_test_file_uses_only_as_a_local_elsewhere_voids_the_grading(tmp_path):
    test_file = ("import unittest\n\nimport pkg\n\n\nclass PkgTest(unittest.TestCase):\n    def test_double(self):\n"
                 "        pkg.double(0)\n        self.assertEqual(max(pkg.double(3), 0), 6)\n\n"
                 "    def test_bounds(self):\n        min, max = 0, 10\n        self.assertLess(min, max)\n")
    bug = "(__import__('sys')._getframe(1).f_globals.__setitem__('max', lambda *v: 6), x + 2)[1]"
    check = _repro_check(tmp_path, "b2", "unittest", test_file, ["PkgTest::test_double"], ["PkgTest::test_bounds"],
                         bug_line=bug)
    assert check.before.statuses["tests/test_pkg.py::PkgTest::test_double"] == "TAMPERED", check.before.log[-3000:]
    assert "shadows the builtin max" in check.before.log


# A third red-team pass. Strict equality read containers through their own methods, so a list subclass that lied
# about its length or items, a dict subclass hiding its keys, a dict key or set element with the repository's __eq__
# let always-equal values through; a test-file class's __eq__ could be swapped for another test class's; a builtin
# shadow passed as a partial (its MRO reached `object`) or behind a `try: from itertools import izip as zip`; and
# pytest's `@pytest_ar` swapped for a module whose comparison said True and put itself back passed any plain assert.
_AEQ = "class E:\n    def __eq__(self, o):\n        return True\n\n    __hash__ = object.__hash__\n\n\n"
_CONTAINERS = ("def table(x):\n    return {'v': x * 2}\n\n\ndef seq(x):\n    return [x * 2, 1]\n\n\n"
               "def bag(x):\n    return {x * 2}\n\n\n")
_MAX = ("import unittest\n\nimport pkg\n\nNAMES = ('min', 'max')\n\n\nclass PkgTest(unittest.TestCase):\n"
        "    def test_double(self):\n        pkg.double(0)\n        self.assertEqual(max(pkg.double(3), 0), 6)\n")
_SET_MAX = "(__import__('sys')._getframe(1).f_globals.__setitem__('max', {value}), x + 2)[1]"
THIRD_PASS = {  # mode, test file, files, the bugged pkg/__init__.py (or the bug's expression), status
    "a list subclass lying about its length": ("table", "seq(3)", "[6, 1]", _AEQ + (
        "class L(list):\n    def __len__(self):\n        return 99\n\n\ndef seq(x):\n    return L([E(), E()])\n\n\n")),
    "a list subclass lying about its items": ("table", "seq(3)", "[6, 1]", _AEQ + (
        "class L(list):\n    def __getitem__(self, i):\n        return [6, 1][i]\n\n\n"
        "def seq(x):\n    return L([E(), E()])\n\n\n")),
    "a dict subclass hiding its keys": ("table", "table(3)", "{'v': 6}", _AEQ + (
        "class D(dict):\n    def __contains__(self, k):\n        return False\n\n\n"
        "def table(x):\n    return D(v=E())\n\n\n")),
    "a dict key with the repository's __eq__": ("table", "table(3)", "{'v': 6}", _AEQ + (
        "import sys\n\n\nclass K:\n    def __hash__(self):\n        return hash('v')\n\n    def __eq__(self, o):\n"
        "        return sys._getframe(1).f_code.co_name != 'problem'\n\n\ndef table(x):\n    return {K(): E()}\n\n\n")),
    "a set of always-equal elements": ("table", "bag(3)", "{6}", (
        "class E:\n    def __eq__(self, o):\n        return True\n\n    def __hash__(self):\n        return 6\n\n\n"
        "def bag(x):\n    return {E()}\n\n\n")),
}


@needs_bwrap
@pytest.mark.parametrize("mode", ["unittest", "pytest"])
@pytest.mark.parametrize("attack", first_fast(THIRD_PASS, 1))
def test_a_container_that_lies_to_strict_equality_fails(attack, mode, tmp_path):
    _, call, expected, evil = THIRD_PASS[attack]
    test_file = {"unittest": ("import unittest\n\nimport pkg\n\n\nclass PkgTest(unittest.TestCase):\n"
                              f"    def test_double(self):\n        self.assertEqual(pkg.{call}, {expected})\n"),
                 "pytest": f"import pkg\n\n\ndef test_double():\n    assert pkg.{call} == {expected}\n"}[mode]
    _attack_graded(tmp_path, mode, test_file, "FAILED", honest_prefix=_CONTAINERS,
                   bug_module=evil + "def double(x):\n    return x + 2\n")


MORE_THIRD_PASS = {  # mode, test file, files, bug module or None, bug line, status
    "a test class's __eq__ swapped for the always-equal one": (
        "pytest", NAMED_MATCHER[1], APPROX, ("import importlib\n\n\ndef double(x):\n    return x + 2\n\n\n"
                                             "_c = importlib.import_module('tests._common')\n"
                                             "_c.Approx.__eq__ = _c.ComparesEqualClass.__eq__\n"), None, "FAILED"),
    "a partial shadowing a builtin the file names in a string": (
        "unittest", _MAX, {}, None, _SET_MAX.format(value="__import__('functools').partial(lambda *a: 6)"), "TAMPERED"),
    "a shadow where the file binds the name only under a try": (
        "unittest", ("import unittest\n\ntry:\n    from itertools import izip as zip\nexcept ImportError:\n"
                     "    pass\n\nimport pkg\n\n\nclass PkgTest(unittest.TestCase):\n    def test_double(self):\n"
                     "        pkg.double(0)\n"
                     "        self.assertEqual([a for a, b in zip([pkg.double(3)], [0])], [6])\n"), {}, None,
        "(__import__('sys')._getframe(1).f_globals.__setitem__('zip', lambda *a: [(6, 0)]), x + 2)[1]", "TAMPERED"),
    "pytest's comparison swapped and put back": (
        "pytest", "import pkg\n\n\ndef test_double():\n    assert pkg.double(3) == 6\n", {}, (
            "import sys\nimport types\n\n\ndef double(x):\n    g = sys._getframe(1).f_globals\n"
            "    real = g.get('@pytest_ar')\n    if real is not None and type(real) is types.ModuleType:\n"
            "        fake = types.ModuleType(real.__name__)\n        fake.__dict__.update(real.__dict__)\n\n"
            "        def strict(left, right, *spans):\n            g['@pytest_ar'] = real\n            return True\n\n"
            "        fake._turngym_strict = strict\n        g['@pytest_ar'] = fake\n    return x + 2\n"),
        None, "TAMPERED"),  # Python's own == decides now: the fake is never called, so it stays and is seen
}


@needs_bwrap
@pytest.mark.parametrize("attack", sorted(MORE_THIRD_PASS))
def test_the_third_red_team_passs_other_attacks_fail(attack, tmp_path):
    mode, test_file, files, bug_module, bug_line, status = MORE_THIRD_PASS[attack]
    _attack_graded(tmp_path, mode, test_file, status, files=files, bug_module=bug_module,
                   **({"bug_line": bug_line} if bug_line else {}))


# What real requirements and packages do that the grader once took for tampering (issue #42's re-validation:
# humanize 52 of 78 gold validations void, six 7 of 24): freezegun's freeze_time wraps the test in its own function
# (code from the read-only requirements folder) and reads every attribute of every loaded module, which binds
# unittest's lazy IsolatedAsyncioTestCase; six imports builtins under the name six.moves.builtins, which rebinds
# builtins.__spec__.
FREEZEGUN_LIKE = """import functools
import sys


def factor():
    return 2


def frozen(test):
    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        for module in list(sys.modules.values()):
            for name in dir(module):
                try:
                    getattr(module, name)
                except Exception:
                    pass
        return test(*args, **kwargs)
    return wrapper
"""
SIX_MOVES = """import builtins
import importlib.util
import sys


class _Moves:
    def find_spec(self, fullname, path=None, target=None):
        return importlib.util.spec_from_loader(fullname, self) if fullname == "pkg.moves_builtins" else None

    def create_module(self, spec):
        return builtins

    def exec_module(self, module):
        pass


sys.meta_path.append(_Moves())
"""


@needs_bwrap
def test_the_tests_requirements_are_read_only_in_the_sandbox_and_at_grading(tmp_path):
    from turngym.envs.swe import SWEInstance
    from turngym.envs.swe.sandbox import SandboxSpec, make_sandbox
    from turngym.envs.swe.synth.source import DEPS_DIR, write_path_conftest

    repo = _package(tmp_path, "repo", {
        "pkg/__init__.py": "from depmod import factor\n\n\ndef double(x):\n    return x * factor()\n",
        "pkg/_moves.py": SIX_MOVES,
        f"{DEPS_DIR}/depmod.py": FREEZEGUN_LIKE,
        "tests/__init__.py": "", "tests/test_pkg.py": "import depmod\nfrom pkg import double\n\n\n@depmod.frozen\n"
                                                      "def test_double():\n    import pkg._moves  # noqa: F401\n"
                                                      "    __import__('pkg.moves_builtins')\n"
                                                      "    assert double(3) == 6\n"})
    write_path_conftest(repo)  # the installed requirements importable, as the pipeline does it
    with make_sandbox("bwrap", SandboxSpec(repo_dir=repo, name="deps"), workspace_root=tmp_path) as box:
        for attempt in (f"echo 'def factor(): return 3' > {DEPS_DIR}/depmod.py", f"touch {DEPS_DIR}/new.py",
                        f"rm -rf {DEPS_DIR}", f"mv {DEPS_DIR} gone", f"chmod u+w {DEPS_DIR}/depmod.py"):
            assert not box.exec(attempt, timeout=30).ok, attempt
        assert "return 2" in box.exec(f"cat {DEPS_DIR}/depmod.py", timeout=30).output
        assert box.exec("echo '# edited' >> pkg/__init__.py", timeout=30).ok  # the repository itself stays writable
        assert box.exec("python3 -m pytest -q -p no:cacheprovider tests", timeout=120).ok
    bug = ("diff --git a/pkg/__init__.py b/pkg/__init__.py\n--- a/pkg/__init__.py\n+++ b/pkg/__init__.py\n"
           "@@ -4,2 +4,2 @@\n def double(x):\n-    return x * factor()\n+    return x + factor()\n")
    gold = bug.replace("-    return x * factor()\n+    return x + factor()",
                       "-    return x + factor()\n+    return x * factor()")
    instance = SWEInstance.from_record({
        "instance_id": "deps", "repo": "repro", "base_commit": "", "problem_statement": "x", "patch": gold,
        "setup_patch": bug, "test_patch": "", "repo_path": str(repo), "PASS_TO_PASS": [],
        "FAIL_TO_PASS": ["tests/test_pkg.py::test_double"],
        "test_cmd": "python3 /opt/turngym/unittest_runner.py --pytest {tests}"})
    check = validate(instance, "bwrap", workspace_root=tmp_path)  # grading copies the tree around the read-only folder
    assert check.problems == [] and check.after.resolved and not check.after.tampered


def test_the_packages_own_version_is_found_by_importlib_metadata_in_the_sandbox(tmp_path):
    """humanize 4.9.0 calls ``importlib.metadata.version`` at import; an sdist's PKG-INFO becomes the package's own
    dist-info in the read-only requirements folder, which is no pin of the manifest's."""
    import io
    import tarfile

    from turngym.envs.swe.sandbox import SandboxSpec, make_sandbox
    from turngym.envs.swe.synth.source import DEPS_DIR, installed_requirements, prepare_repo

    files = {
        "PKG-INFO": "Metadata-Version: 2.1\nName: tinyver\nVersion: 1.2.3\nSummary: a tiny package\n",
        "tinyver/__init__.py": "import importlib.metadata\n\n__version__ = importlib.metadata.version('tinyver')\n",
        "tests/test_version.py": "import tinyver\n\n\ndef test_version():\n    assert tinyver.__version__ == '1.2.3'\n",
    }
    sdists = tmp_path / "cache" / "sdists" / "tinyver-1.2.3"
    sdists.mkdir(parents=True)
    with tarfile.open(sdists / "tinyver-1.2.3.tar.gz", "w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"tinyver-1.2.3/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    source, repo = prepare_repo("tinyver==1.2.3", root=tmp_path / "cache")  # the cached archive: no download
    assert source.version == "1.2.3"
    assert (repo / DEPS_DIR / "tinyver-1.2.3.dist-info" / "METADATA").read_text().startswith("Metadata-Version")
    assert installed_requirements(repo) == []  # the package itself is not a requirement to pin
    with make_sandbox("bwrap", SandboxSpec(repo_dir=repo, name="own-metadata"), workspace_root=tmp_path) as box:
        run = box.exec("python3 -m pytest -q -p no:cacheprovider tests", timeout=120)
        assert run.ok, run.output


@pytest.mark.slow  # a synthesis of its own: 25-55 s; how support files are found is tested below, in the fast suite
@needs_bwrap
def test_a_package_that_ships_its_tests_assertions_is_graded_with_them_restored(tmp_path):
    """pyparsing 3.1.2: its test classes inherit assertion methods from the package (``pyparsing/testing.py``), code
    the agent could rewrite; the runner voided every grading of its 1,672 kept tests on the untouched code ("not
    code of the test files"). Such a file is now found at baseline (the test classes' bases), never mutated,
    restored at grading like a test file (``test_patch``) and trusted by the runner (``--support``)."""
    package = make_tiny_package(tmp_path / "src")
    _package(package.parent, package.name, {
        "tinystats/testing.py": """\
            from tinystats.core import mean


            class StatsAsserts:
                def assertMean(self, values, expected):
                    self.assertEqual(mean(values), expected)
            """,
        "tests/test_mixin.py": """\
            import unittest

            from tinystats.testing import StatsAsserts


            class TestWithMixin(StatsAsserts, unittest.TestCase):
                def test_mean_through_the_mixin(self):
                    self.assertMean([2, 4], 3)

                def test_mean_of_four(self):
                    self.assertMean([1, 1, 1, 5], 2)
            """})
    config = SynthConfig(seed=0, max_candidates=6)
    summary = synthesize([str(package)], tmp_path / "out", config, root=tmp_path / "cache")
    (report,) = summary["packages"]
    assert report["status"] == "ok", report["reason"]
    assert summary["false_alarms"] == [] and summary["tasks"] >= 1, summary
    baseline = json.loads(next((tmp_path / "cache" / "work").glob("*/*/baseline.json")).read_text())
    assert baseline["support"] == ["tinystats/testing.py"]
    records = [json.loads(line) for line in (tmp_path / "out" / "tasks.jsonl").read_text().splitlines()]
    assert not any("tinystats/testing.py" in patch_paths(r["setup_patch"]) for r in records)  # never mutated
    for record in records:
        assert "--support tinystats/testing.py" in record["test_cmd"]
        assert "tinystats/testing.py" in patch_paths(record["test_patch"])  # restored at grading
    mixin_tasks = [r for r in records if any("test_mixin" in t for t in r["FAIL_TO_PASS"] + r["PASS_TO_PASS"])]
    assert mixin_tasks  # graded through the mixin, and validated (no void grading)


def test_support_files_are_the_packages_own_modules_the_test_classes_take_code_from():
    from turngym.envs.swe.synth.pipeline import support_files, test_command

    found = ["tests/test_unit.py", "pyparsing/testing.py", "conftest.py", "src/pkg/helpers.py", "pkg/x_test.py",
             "testing/util.py", "pkg/tests/base.py", "markdown/test_tools.py", "test_root.py", "pkg/conftest.py"]
    collected = ["tests/test_unit.py", "pkg/x_test.py", "test_root.py"]
    # markdown 3.6's markdown/test_tools.py: named like a test, but no test is collected from it and no test folder
    # holds it, so nothing else restores it and the runner would void every grading through its TestCase
    assert support_files(found, collected) == ["markdown/test_tools.py", "pyparsing/testing.py", "src/pkg/helpers.py"]
    assert test_command("pytest") == "python3 /opt/turngym/unittest_runner.py --pytest {tests}"  # none: as before
    assert test_command("unittest", ["pyparsing/testing.py"]) == (
        "python3 /opt/turngym/unittest_runner.py --support pyparsing/testing.py {tests}")


def test_a_stopped_synthesis_leaves_no_validation_worker(tmp_path):
    """A run killed mid-validation takes its worker processes (and so their sandboxes) with it."""
    import os
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "slow_validation.py").write_text(
        "import os, time\n\n\ndef validate(record, repo, backend):\n"
        "    open(record['pids'], 'a').write(f'{os.getpid()}\\n')\n    time.sleep(120)\n")
    pids = tmp_path / "pids"
    run = subprocess.Popen([sys.executable, "-c", (
        "import sys; from turngym.envs.swe.synth import pipeline; import slow_validation\n"
        "pipeline.validate_safely = slow_validation.validate\n"
        f"todo = [{{'pids': {str(pids)!r}}}] * 2\n"
        "list(pipeline._validations(todo, None, 'bwrap', 2))\n")],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])})
    try:
        deadline = time.monotonic() + 60
        while not (pids.exists() and len(pids.read_text().split()) == 2):
            assert time.monotonic() < deadline and run.poll() is None, "the workers never started"
            time.sleep(0.1)
        workers = [int(p) for p in pids.read_text().split()]
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    deadline = time.monotonic() + 10
    alive = workers
    while alive and time.monotonic() < deadline:
        alive = [p for p in workers if os.path.exists(f"/proc/{p}") and
                 Path(f"/proc/{p}/stat").read_text().split(") ")[-1][0] != "Z"]
        time.sleep(0.1)
    assert not alive, f"workers {alive} outlived the run"


def test_the_committed_validation_rows_were_made_by_this_grader():
    """The scale set's validation rows (docs/benchmark-runs/swe-synth-scale-v1/validate/) hold only for the grader
    that made them (grader.sha256 beside them): any byte changed under envs/swe/tools/, a comment included,
    validates every row again (hours of 2 cores). A change meant to do that says so in revalidation.json (the rows'
    grader, the new one, why) until the scale run has made the rows again; then grader.sha256 takes the new one."""
    from turngym.envs.swe.synth.pipeline import grader_hash

    runs = Path(__file__).parents[1] / "docs/benchmark-runs/swe-synth-scale-v1"
    recorded = (runs / "grader.sha256").read_text().strip()
    if grader_hash() == recorded:
        return
    pending = json.loads((runs / "revalidation.json").read_text()) if (runs / "revalidation.json").exists() else {}
    assert pending.get("grader") == grader_hash() and pending.get("rows_grader") == recorded, (
        f"envs/swe/tools/ changed: its sha256 is {grader_hash()}, the committed validation rows were made by "
        f"{recorded}; the next scale run validates every row again. If that is meant, say so in "
        "docs/benchmark-runs/swe-synth-scale-v1/revalidation.json")


def test_the_committed_scale_manifest_is_this_graders_and_its_tasks_have_committed_validations():
    """recipes/configs/swe-synth-scale-v1.manifest.json (the set a clean clone regenerates) was made by the grader
    of the committed rows, and every task it lists passed a validation committed beside them."""
    from turngym.envs.swe.synth.manifest import Manifest

    root = Path(__file__).parents[1]
    manifest = Manifest.read(root / "recipes/configs/swe-synth-scale-v1.manifest.json")
    rows_grader = (root / "docs/benchmark-runs/swe-synth-scale-v1/grader.sha256").read_text().strip()
    assert manifest.grader_sha256 == rows_grader  # this grader's, or the previous one's while revalidation.json says
    rows = {}
    for path in (root / "docs/benchmark-runs/swe-synth-scale-v1/validate").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            rows.setdefault(row["key"], []).append(row)
    assert len(manifest.tasks) >= 400 and {t["split"] for t in manifest.tasks} >= {"train", "eval_seen", "test"}
    unvalidated = [t["instance_id"] for t in manifest.tasks
                   if not any(r.get("drop") is None for r in rows.get(t["instance_id"], []))]
    assert not unvalidated, unvalidated[:5]
