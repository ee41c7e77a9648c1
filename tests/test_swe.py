"""turngym/SWE-v0: action parsing, the reward estimators, the task format, and episodes in bwrap.

Unit tests need nothing; episode tests need bubblewrap (``make install`` installs it as root) and
skip with the reason otherwise. Sandbox security and the shipped tasks' validation live in
``test_swe_sandbox.py`` and ``test_swe_tasks.py``; the Docker backend in ``test_swe_docker.py``.
"""

from __future__ import annotations

import json
import shutil
import tarfile
import time
from dataclasses import replace

import pytest

from tests.helpers_marks import first_of_each
from turngym.agents.rollout import TIME_LIMIT_REASONS
from turngym.envs.swe import (
    GradeReport,
    SWEInstance,
    load_instances,
    parse_action,
    parse_test_log,
    pass_ratio_reward,
    resolved_reward,
    shipped_instances,
    swe_tasks,
    swe_taskset,
)
from turngym.envs.swe.grading import MISSING, patch_paths
from turngym.envs.swe.instances import local_repo_dir
from turngym.envs.swe.sandbox import SandboxUnavailable, backend_available, resolve_backend
from turngym.envs.tasks import assert_disjoint

BWRAP_PROBLEM = backend_available("bwrap")
needs_bwrap = pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=f"bwrap sandbox unavailable: {BWRAP_PROBLEM}")


# --------------------------------------------------------------------------- actions
@pytest.mark.parametrize(
    ("reply", "command"),
    [
        ("```bash\nls -la\n```", "ls -la"),
        ("Let me look.\n```bash\ngrep -n def src/x.py\n```\nThen I will fix it.", "grep -n def src/x.py"),
        ("```\ncat README.md\n```", "cat README.md"),
        ("```sh\nfor f in *.py; do\n  wc -l $f\ndone\n```", "for f in *.py; do\n  wc -l $f\ndone"),
        ("```bash\r\necho windows\r\n```", "echo windows"),
        ("notes\n```python\nprint(1)\n```\n```bash\npython3 -c 'print(1)'\n```", "python3 -c 'print(1)'"),
    ],
)
def test_one_fenced_block_is_the_command(reply, command):
    parsed = parse_action(reply, max_chars=10_000)
    assert parsed.error is None and not parsed.submit
    assert parsed.command == command


@pytest.mark.parametrize(
    "reply", ["submit", "  Submit ", "```bash\nsubmit\n```", "```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"]
)
def test_submit(reply):
    assert parse_action(reply, max_chars=10_000).submit


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ("", "the reply is empty"),
        ("   \n ", "the reply is empty"),
        ("ls -la", "no command found"),
        ("I think the bug is in parse(). Let me submit the fix now.", "no command found"),
        ("```python\nprint(1)\n```", "no command found"),
        ("```bash\nls\n```\n```bash\npwd\n```", "found 2 command blocks; run exactly one command per turn"),
        ("```bash\n\n```", "the command block is empty"),
        ("```bash\necho \x00\x01\x02\n```", "the command contains control characters or undecodable bytes"),
        ("```bash\necho \udcff\udcfe\n```", "the command contains control characters or undecodable bytes"),
        ("```bash\necho " + "x" * 200 + "\n```", "the reply is 217 characters long; the limit is 100"),
    ],
)
def test_bad_replies_are_invalid_with_a_reason(reply, error):
    parsed = parse_action(reply, max_chars=100)
    assert parsed.command is None and not parsed.submit
    assert parsed.error == error


# --------------------------------------------------------------------------- the reward estimators
@pytest.mark.parametrize(
    ("f2p_passed", "f2p_total", "p2p_failed", "p2p_total", "penalty", "expected"),
    [
        (0, 4, 0, 10, 1.0, 0.0),
        (2, 4, 0, 10, 1.0, 0.5),
        (2, 4, 1, 10, 1.0, 0.4),  # the docstring's example: 2/4 - 1 * 1/10
        (3, 4, 1, 4, 0.5, 0.625),  # 3/4 - 0.5 * 1/4
        (4, 4, 0, 10, 1.0, 1.0),
        (4, 4, 0, 0, 1.0, 1.0),  # no PASS_TO_PASS tests: no regression term
        (1, 4, 5, 10, 1.0, 0.0),  # 0.25 - 0.5 is clipped to 0
        (1, 3, 2, 3, 0.0, 1 / 3),  # lambda = 0 ignores regressions
        (4, 4, 10, 10, 1.0, 0.0),
    ],
)
def test_pass_ratio_reward_matches_hand_computed_values(f2p_passed, f2p_total, p2p_failed, p2p_total, penalty,
                                                        expected):
    reward = pass_ratio_reward(f2p_passed, f2p_total, p2p_failed, p2p_total, penalty)
    assert reward == pytest.approx(expected, abs=1e-12)


def test_pass_ratio_reward_rejects_bad_arguments():
    with pytest.raises(ValueError, match="FAIL_TO_PASS"):
        pass_ratio_reward(0, 0, 0, 1)
    with pytest.raises(ValueError, match="regression_penalty"):
        pass_ratio_reward(1, 1, 0, 1, regression_penalty=-1)


def test_grade_report_counts_like_swe_bench():
    f2p = ("t/a.py::A::f1", "t/a.py::A::f2", "t/a.py::A::f3")
    p2p = ("t/a.py::A::p1", "t/a.py::A::p2", "t/a.py::A::p3", "t/a.py::A::p4")
    statuses = {
        "t/a.py::A::f1": "PASSED",
        "t/a.py::A::f2": "XFAIL",  # counts as passing, as in SWE-bench
        "t/a.py::A::f3": "SKIPPED",  # does not
        "t/a.py::A::p1": "PASSED",
        "t/a.py::A::p2": "FAILED",
        "t/a.py::A::p3": MISSING,  # crashed or timed out: not passing
        "t/a.py::A::p4": "PASSED",
    }
    report = GradeReport(statuses=statuses, fail_to_pass=f2p, pass_to_pass=p2p)
    assert (report.f2p_passed, report.p2p_failed) == (2, 2)
    assert not report.resolved
    assert report.pass_ratio() == pytest.approx(2 / 3 - 2 / 4)
    assert report.pass_ratio(regression_penalty=0.5) == pytest.approx(2 / 3 - 0.5 * 2 / 4)
    assert report.reward("resolved") == resolved_reward(False) == 0.0
    resolved = GradeReport(statuses=dict.fromkeys(f2p + p2p, "PASSED"), fail_to_pass=f2p, pass_to_pass=p2p)
    assert resolved.resolved and resolved.reward("ratio") == resolved.reward("resolved") == 1.0


def test_parse_test_log_reads_pytest_summaries_and_verbose_lines():
    ids = ["tests/test_a.py::test_x", "tests/test_a.py::test_y[a - b]", "tests/test_b.py::TestB::test_z",
           "tests/test_c.py::test_w"]
    log = "\n".join(  # noqa: FLY002 - one element per log line reads like the log
        [
            "tests/test_b.py::TestB::test_z PASSED                          [ 50%]",
            "tests/test_c.py::test_w FAILED                                 [100%]",
            "=========================== short test summary info ============================",
            "PASSED tests/test_a.py::test_x",
            "FAILED tests/test_a.py::test_y[a - b] - AssertionError: assert 1 == 2",
            "PASSED tests/test_unrelated.py::test_q",
        ]
    )
    assert parse_test_log(log, ids) == {
        "tests/test_a.py::test_x": "PASSED",
        "tests/test_a.py::test_y[a - b]": "FAILED",
        "tests/test_b.py::TestB::test_z": "PASSED",
        "tests/test_c.py::test_w": "FAILED",
    }
    assert parse_test_log("", ids) == dict.fromkeys(ids, MISSING)


def test_parse_test_log_with_a_nonce_ignores_forged_lines():
    ids = ["tests/t.py::T::a", "tests/t.py::T::b"]
    log = "PASSED tests/t.py::T::a\nN0NCE FAILED tests/t.py::T::a\nprint('N0NCE PASSED') PASSED tests/t.py::T::b\n"
    assert parse_test_log(log, ids, prefix="N0NCE") == {"tests/t.py::T::a": "FAILED", "tests/t.py::T::b": MISSING}


def test_patch_paths():
    patch = (
        "diff --git a/src/x.py b/src/x.py\n--- a/src/x.py\n+++ b/src/x.py\n@@ -1 +1 @@\n-a\n+b\n"
        "diff --git a/tests/new.py b/tests/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/new.py\n"
    )
    assert patch_paths(patch) == ["src/x.py", "tests/new.py"]
    assert patch_paths("--- a/old.py\t2024-01-01\n+++ b/old.py\t2024-01-02\n") == ["old.py"]


# --------------------------------------------------------------------------- the task format
# The fields (and their types) of a SWE-Gym record, as the dataset on the Hub has them.
SWE_GYM_RECORD = {
    "instance_id": "getmoto__moto-5752",
    "hints_text": "Thanks for raising this @example - marking it as an enhancement.",
    "patch": (
        "diff --git a/moto/ssm/models.py b/moto/ssm/models.py\n--- a/moto/ssm/models.py\n+++ b/moto/ssm/models.py\n"
        "@@ -1 +1 @@\n-a\n+b\n"
    ),
    "test_patch": (
        "diff --git a/tests/test_ssm/test_ssm_boto3.py b/tests/test_ssm/test_ssm_boto3.py\n"
        "--- a/tests/test_ssm/test_ssm_boto3.py\n+++ b/tests/test_ssm/test_ssm_boto3.py\n@@ -1 +1 @@\n-a\n+b\n"
    ),
    "created_at": "2022-12-10 20:23:01",
    "problem_statement": "Describe parameters with a filter on the Name key fails",
    "repo": "getmoto/moto",
    "base_commit": "b2300f1eae1323e3e8bc45f97e530ce129dff12e",
    "version": "4.0",
    "PASS_TO_PASS": ["tests/test_ssm/test_ssm_boto3.py::test_get_parameter"],
    "FAIL_TO_PASS": ["tests/test_ssm/test_ssm_boto3.py::test_describe_parameters__multiple_tags"],
}


def test_a_swe_gym_record_loads_unchanged_and_round_trips():
    instance = SWEInstance.from_record(SWE_GYM_RECORD)
    assert instance.fail_to_pass == ("tests/test_ssm/test_ssm_boto3.py::test_describe_parameters__multiple_tags",)
    assert instance.difficulty == "getmoto/moto" and instance.image is None and instance.repo_path is None
    assert instance.extra == {"created_at": "2022-12-10 20:23:01", "version": "4.0"}
    record = instance.to_record()
    assert {k: record[k] for k in SWE_GYM_RECORD} == SWE_GYM_RECORD


def test_swe_bench_json_string_test_lists_and_image_name():
    record = {**SWE_GYM_RECORD, "FAIL_TO_PASS": '["tests/a.py::test_1", "tests/a.py::test_2"]', "PASS_TO_PASS": "[]",
              "environment_setup_commit": "abc", "image_name": "swebench/sweb.eval.x86_64.getmoto_1776_moto-5752"}
    instance = SWEInstance.from_record(record)
    assert instance.fail_to_pass == ("tests/a.py::test_1", "tests/a.py::test_2") and instance.pass_to_pass == ()
    assert instance.image == "swebench/sweb.eval.x86_64.getmoto_1776_moto-5752"
    assert instance.extra["environment_setup_commit"] == "abc"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"FAIL_TO_PASS": []}, "FAIL_TO_PASS is empty"),
        ({"FAIL_TO_PASS": "not json"}, "not a JSON list"),
        ({"PASS_TO_PASS": [1, 2]}, "must be a list of test ids"),
        ({"reference_states": ["A" * 64]}, "sha256 hex digests"),  # upper case: not as the runner prints them
        ({"reference_states": ["a" * 63]}, "sha256 hex digests"),
        ({"reference_states": "a" * 64}, "sha256 hex digests"),  # a string, not a list of them
    ],
)
def test_bad_records_say_what_is_wrong(change, message):
    with pytest.raises(ValueError, match=message):
        SWEInstance.from_record({**SWE_GYM_RECORD, **change})
    with pytest.raises(ValueError, match="lacks"):
        SWEInstance.from_record({k: v for k, v in SWE_GYM_RECORD.items() if k != "test_patch"})


def test_reference_states_are_read_from_the_runners_lines_only():
    """The runner's ``reference states`` lines give sorted, unique sha256 digests; any other word or line is not
    one, and a record keeps the same digests sorted and unique."""
    from turngym.envs.swe.synth.pipeline import REFERENCE_STATES_LINE, reference_states_in

    first, second = "b" * 64, "0123456789abcdef" * 4
    log = "\n".join([f"{REFERENCE_STATES_LINE}{first} {second} {first.upper()} {'c' * 65} xyz",
                      f"PASSED test_x {'d' * 64}",  # a digest on another line is not a reference state
                      f"{REFERENCE_STATES_LINE}{first}"])
    assert reference_states_in(log) == (second, first)
    record = {**SWE_GYM_RECORD, "reference_states": [first, second, first]}
    assert SWEInstance.from_record(record).reference_states == (second, first)


def test_load_from_json_jsonl_and_datasets(tmp_path):
    datasets = pytest.importorskip("datasets")
    second = {**SWE_GYM_RECORD, "instance_id": "getmoto__moto-5753"}
    (tmp_path / "one.json").write_text(json.dumps(SWE_GYM_RECORD))
    (tmp_path / "many.json").write_text(json.dumps([SWE_GYM_RECORD, second]))
    (tmp_path / "many.jsonl").write_text(json.dumps(SWE_GYM_RECORD) + "\n\n" + json.dumps(second) + "\n")
    expected = [SWEInstance.from_record(SWE_GYM_RECORD), SWEInstance.from_record(second)]
    assert load_instances(tmp_path / "one.json") == expected[:1]
    assert load_instances(tmp_path / "many.json") == expected
    assert load_instances(str(tmp_path / "many.jsonl")) == expected
    dataset = datasets.Dataset.from_list([SWE_GYM_RECORD, second])
    assert load_instances(dataset) == expected
    assert load_instances(datasets.DatasetDict({"train": dataset}), split="train") == expected
    # a real `datasets` split, loaded from a local file (offline), with SWE-Gym's list features
    split = datasets.load_dataset("json", data_files=str(tmp_path / "many.jsonl"), split="train")
    without_extras = [replace(i, extra={}) for i in expected]  # the json loader parses created_at as a date
    assert [replace(i, extra={}) for i in load_instances(split)] == without_extras
    with pytest.raises(ValueError, match="pass split"):
        load_instances(datasets.DatasetDict({"train": dataset}))


def test_local_repository_from_an_archive(tmp_path, monkeypatch):
    monkeypatch.setenv("TURNGYM_CACHE", str(tmp_path / "cache"))
    source = local_repo_dir(shipped_instances()[0][1].repo_path)
    archive = tmp_path / "repo.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(source, arcname="project")
    extracted = local_repo_dir(str(archive))
    assert extracted.name == "project"
    assert sorted(p.relative_to(extracted) for p in extracted.rglob("*.py")) == sorted(
        p.relative_to(source) for p in source.rglob("*.py")
    )
    assert local_repo_dir(str(archive)) == extracted  # extracted once, then cached
    with pytest.raises(FileNotFoundError):
        local_repo_dir(str(tmp_path / "missing"))


def test_shipped_task_set():
    train, eval_ = swe_tasks("train"), swe_tasks("eval")
    assert len(train) + len(eval_) >= 20 and len(eval_) >= 5
    assert_disjoint(train, eval_)
    instances = [instance for _, instance in shipped_instances()]
    assert len({i.repo for i in instances}) >= 5
    assert {i.difficulty for i in instances} >= {"logic", "off-by-one", "edge-case", "api-misuse", "regression"}
    # graphkit is held out: its tasks are only in eval
    assert {t.payload["repo"] for t in eval_} - {t.payload["repo"] for t in train} == {"turngym/graphkit"}
    assert swe_tasks(None).fingerprint == swe_tasks(None).fingerprint
    assert len(swe_tasks("eval", n=3)) == 3
    with pytest.raises(KeyError):
        swe_tasks("test")


# --------------------------------------------------------------------------- the grading copy's links
def test_the_grading_copy_judges_a_link_by_its_realpath_inside_the_copy(tmp_path):
    """Issue 40: tools/tree.py judged a link's target lexically, so a chain (L -> ., M -> L/..: M is the copy's
    parent) reached outside the graded repository. The copy follows links as the tests will: a link whose
    realpath leaves the copy or reaches a protected path is dropped, whatever order the links are copied in."""
    import os
    import subprocess
    import sys

    from turngym.envs.swe.sandbox.bwrap import TOOLS_DIR

    src, dst, outside = tmp_path / "agent", tmp_path / "graded", tmp_path / "outside"
    for folder in (src / "pkg", src / "tests", dst / "tests", outside):
        folder.mkdir(parents=True)
    (outside / "core.py").write_text("STOLEN = True\n")
    (src / "pkg" / "impl.py").write_text("GOOD = True\n")
    (dst / "tests" / "test_core.py").write_text("pristine\n")
    links = {"L": ".", "M": "L/..", "pkg/core.py": "../M/outside/core.py",  # the chain
             "a_first": "z_last/..", "z_last": ".",  # a link through one copied after it
             "pkg/tests_view": "../L/tests",  # the protected tests, reached through a link
             "pkg/good.py": "impl.py", "pkg/here": "."}  # inside: kept
    for name, target in links.items():
        os.symlink(target, src / name)
    run = subprocess.run([sys.executable, "-I", "-B", str(TOOLS_DIR / "tree.py"), "copy", str(src), str(dst),
                          "--protect", "tests"], check=False, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    kept = {name for name in links if os.path.islink(dst / name)}
    assert kept == {"L", "z_last", "pkg/good.py", "pkg/here"}, run.stderr
    assert "'M' -> 'L/..': it resolves outside the repository" in run.stderr
    assert "'pkg/tests_view' -> '../L/tests': it resolves to a skipped or protected path" in run.stderr
    assert (dst / "pkg" / "good.py").read_text() == "GOOD = True\n" and not (dst / "pkg" / "core.py").exists()
    for path in dst.rglob("*"):  # nothing in the graded tree leads out of it
        assert os.path.realpath(path).startswith(str(dst.resolve())), path


def test_a_missing_backend_says_how_to_install_it(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    problem = backend_available("bwrap")
    assert "bwrap" in problem and "apt-get install bubblewrap" in problem
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxUnavailable, match="apt-get install docker.io"):
        resolve_backend("docker")
    with pytest.raises(SandboxUnavailable, match="no sandbox backend is available"):
        resolve_backend("auto")
    with pytest.raises(SandboxUnavailable, match="unknown sandbox backend"):
        resolve_backend("chroot")


# --------------------------------------------------------------------------- episodes (bwrap)
TASK = "turngym__intervals-2"  # the regression task: the naive fix breaks merge()
NAIVE_FIX = (
    "```bash\nsed -i 's/self.start <= other.end and other.start <= self.end/"
    "self.start < other.end and other.start < self.end/' intervals/core.py\n```"
)
MERGE_FIX = (
    "```bash\nsed -i 's/if merged and merged\\[-1\\].overlaps(interval):/"
    "if merged and interval.start <= merged[-1].end:/' intervals/core.py\n```"
)


@pytest.fixture
def make_env(make_swe_env):
    return make_swe_env  # tests/conftest.py


def play(env, actions):
    results = []
    for action in actions:
        results.append(env.step(action))
        if results[-1][2] or results[-1][3]:
            break
    return results


@needs_bwrap
def test_oracle_resolves_with_reward_one(make_env):
    env = make_env()
    obs, info = env.reset(options={"task": TASK})
    assert "Touching intervals are reported as overlapping" in obs and "```bash" in obs
    assert info["instance_id"] == TASK and info["sandbox"] == "bwrap"
    assert info["base_commit"] == env.tasks.by_id(TASK).payload["base_commit"]
    results = play(env, info["walkthrough"])
    obs, reward, terminated, truncated, info = results[-1]
    assert terminated and not truncated
    assert info["won"] and info["resolved"] and info["pass_ratio"] == 1.0
    assert reward == info["episode_reward"] == 1.0
    assert set(info["tests"].values()) == {"PASSED"}
    assert "intervals/core.py" in info["patch"] and "tests/" not in info["patch"]


@needs_bwrap
def test_observation_format_and_truncation(make_env):
    env = make_env(max_observation_chars=2000)
    env.reset(options={"task": TASK})
    obs, reward, _, _, info = env.step("```bash\necho out; echo err >&2; exit 3\n```")
    assert obs == "<returncode>3</returncode>\n<output>\nout\nerr\n</output>"
    assert info["exit_code"] == 3 and not info["invalid_action"] and reward == 0.0
    obs, *_ = env.step("```bash\npython3 -c \"print('x' * 50000)\"\n```")
    assert len(obs) <= 2000 and "characters cut ...]" in obs and obs.endswith("</output>")
    obs, _, _, _, info = env.step("no command here")
    assert info["invalid_action"] and obs.count("\n") == 0 and "```bash" in obs


@needs_bwrap
def test_a_fresh_shell_per_command_in_the_repository(make_env):
    env = make_env()
    env.reset(options={"task": TASK})
    env.step("```bash\ncd /tmp && export FOO=1 && echo hi > /tmp/note && pwd\n```")
    obs, *_ = env.step("```bash\npwd; echo \"FOO=$FOO\"; ls /tmp; echo $TZ $PYTHONHASHSEED; id -u\n```")
    assert obs == "<returncode>0</returncode>\n<output>\n/testbed\nFOO=\nUTC 0\n65534\n</output>"


@needs_bwrap
def test_the_naive_fix_regresses_and_the_ratio_says_by_how_much(make_env):
    env = make_env()
    env.reset(options={"task": TASK})
    *_, (_, reward, terminated, _, info) = play(env, [NAIVE_FIX, "submit"])
    # both FAIL_TO_PASS tests pass, but merge() stops merging touching intervals: 1 of 21 P2P regresses
    assert info["tests"]["tests/test_core.py::TestMerge::test_merges_touching"] == "FAILED"
    assert terminated and info["lost"] and not info["resolved"]
    assert reward == pytest.approx(2 / 2 - 1 / 21)
    *_, (_, reward, _, _, info) = play(env, [env.reset(options={"task": TASK})[1]["walkthrough"][0], "submit"])
    assert reward == 1.0


@needs_bwrap
def test_binary_reward_mode(make_env):
    env = make_env(reward="resolved")
    env.reset(options={"task": TASK})
    *_, (_, reward, _, _, info) = play(env, [NAIVE_FIX, "submit"])
    assert reward == 0.0 and info["pass_ratio"] == pytest.approx(1 - 1 / 21) and info["resolved"] is False


@needs_bwrap
def test_editing_the_tests_earns_nothing(make_env):
    env = make_env()
    env.reset(options={"task": TASK})
    cheat = ("```bash\nprintf 'import unittest\\nclass TestInterval(unittest.TestCase):\\n    pass\\n' "
             "> tests/test_core.py\n```")
    *_, (_, reward, _, _, info) = play(env, [cheat, "submit"])
    assert reward == 0.0 and not info["resolved"]
    assert info["tests"]["tests/test_core.py::TestMerge::test_merges_touching"] == "PASSED"  # restored, not deleted


@needs_bwrap
def test_printing_fake_results_earns_nothing(make_env):
    env = make_env()
    env.reset(options={"task": TASK})
    forge = ("```bash\ncat >> intervals/__init__.py <<'EOF'\nimport sys\nfor t in sys.argv[1:]:\n"
             "    print('PASSED ' + t)\nEOF\n```")
    *_, (_, reward, *_) = play(env, [forge, "submit"])
    assert reward == 0.0


@needs_bwrap
def test_dense_rewards_follow_the_ratio_and_sum_to_the_final_reward(make_env):
    env = make_env(reward_mode="dense")
    env.reset(options={"task": TASK})
    results = play(env, ["```bash\nls\n```", NAIVE_FIX, "```bash\ngit status --short\n```", MERGE_FIX, "submit"])
    rewards = [r for _, r, *_ in results]
    # no change, naive fix (ratio 1 - 1/21), no change, full fix (ratio 1), submit (no change)
    assert rewards == pytest.approx([0.0, 1 - 1 / 21, 0.0, 1 / 21, 0.0])
    assert sum(rewards) == pytest.approx(results[-1][4]["episode_reward"]) == pytest.approx(1.0)
    assert results[1][4]["reward_components"]["pass_ratio"] == pytest.approx(1 - 1 / 21)


@needs_bwrap
def test_hidden_tests_never_appear_in_the_working_tree(make_env):
    env = make_env(reward_mode="dense")
    env.reset(options={"task": TASK})
    env.step(NAIVE_FIX)  # triggers a grading in a copy
    obs, *_ = env.step("```bash\ngrep -rc test_touching_intervals_do_not_overlap /testbed /scratch /tmp; "
                       "ls -a /scratch\n```")
    assert "test_core.py:0" in obs and ".turngym-grade" not in obs


@needs_bwrap
def test_turn_limit_truncates_and_still_grades(make_env):
    env = make_env(max_turns=2)
    _, info = env.reset(options={"task": TASK})
    *_, (obs, reward, terminated, truncated, info) = play(env, [info["walkthrough"][0], "```bash\nls\n```"])
    assert truncated and not terminated and info["truncation_reason"] == "max_turns"
    assert not info["won"] and info["resolved"] and reward == info["episode_reward"] == 1.0
    assert "graded" in obs


@needs_bwrap
def test_wall_clock_limit_truncates(make_env):
    env = make_env(wall_clock_limit=1.5, reward_mode="dense")
    env.reset(options={"task": TASK})
    obs, reward, terminated, truncated, info = env.step("```bash\nsleep 30\n```")
    assert truncated and not terminated and info["truncation_reason"] == "wall_clock"
    assert info["truncation_reason"] in TIME_LIMIT_REASONS  # a time limit: reported as truncated, PPO bootstraps
    assert "wall-clock limit" in obs and reward == 0.0 and info["episode_reward"] == 0.0
    with pytest.raises(RuntimeError, match="reset"):
        env.step("```bash\nls\n```")


@needs_bwrap
def test_commands_past_their_own_timeout_are_killed_but_the_episode_goes_on(make_env):
    env = make_env(timeouts={"exec": 4.0})  # 1 s: a loaded machine had not yet echoed "started" when it was killed
    env.reset(options={"task": TASK})
    obs, _, terminated, truncated, info = env.step("```bash\necho started; sleep 30\n```")
    assert obs.startswith("[turngym] the command did not finish within 4 s and was killed.")
    assert "<returncode>killed</returncode>" in obs and "started" in obs
    assert not (terminated or truncated) and info["exit_code"] is None
    obs, *_ = env.step("```bash\necho alive\n```")
    assert "alive" in obs


@needs_bwrap
def test_invalid_action_penalty_and_hostile_input_never_crash(make_env):
    env = make_env(invalid_action_penalty=0.1, max_turns=6)
    env.reset(options={"task": TASK})
    replies = ["", "\x00\x01binary\xff", "```bash\n" + "A" * 40_000 + "\n```", "<script>alert(1)</script>",
               "```bash\nrm -rf --no-preserve-root / 2>/dev/null; echo done\n```", "submit"]
    results = play(env, replies)
    assert [r[4]["invalid_action"] for r in results] == [True, True, True, True, False, False]
    assert [r for _, r, *_ in results[:4]] == [-0.1] * 4
    assert "done" in results[4][0]  # deleting everything it can reach only hurts the agent's own copy
    assert results[-1][2] and results[-1][4]["episode_reward"] == pytest.approx(-0.4)


@needs_bwrap
def test_a_task_from_a_json_file_with_an_archived_repository(make_env, tmp_path, monkeypatch):
    """The path a user's own tasks take: SWE-Gym records in JSONL, the repository as an archive."""
    monkeypatch.setenv("TURNGYM_CACHE", str(tmp_path / "cache"))
    instance = shipped_instances()[0][1]
    record = instance.to_record()
    shutil.make_archive(str(tmp_path / "repo"), "gztar", root_dir=instance.repo_path)
    record.update(repo_path="repo.tar.gz", base_commit="", instance_id="mine__configlite-1")
    (tmp_path / "tasks.jsonl").write_text(json.dumps(record) + "\n")
    tasks = swe_taskset(load_instances(tmp_path / "tasks.jsonl"), name="mine")
    env = make_env(tasks=tasks)
    _, info = env.reset(options={"task": "mine__configlite-1"})
    assert info["base_commit"] == instance.base_commit  # the same snapshot commit, from the archive
    *_, (_, reward, *_) = play(env, info["walkthrough"])
    assert reward == 1.0


@needs_bwrap
def test_thousands_of_test_ids_fit(make_env):
    """SWE-bench instances list thousands of PASS_TO_PASS tests: more than one argument may hold."""
    instance = {i.instance_id: i for _, i in shipped_instances()}[TASK]
    many = tuple(f"tests/test_absent_{n:05d}.py::TestAbsent::test_absent_{n:05d}" for n in range(3000))
    assert len(" ".join(many)) > 131_072  # Linux's MAX_ARG_STRLEN
    big = replace(instance, instance_id="big__intervals-2", pass_to_pass=instance.pass_to_pass + many)
    env = make_env(tasks=swe_taskset([big], name="big"))
    _, info = env.reset(options={"task": "big__intervals-2"})
    *_, (_, reward, _, _, info) = play(env, info["walkthrough"])
    assert all(info["tests"][t] == "PASSED" for t in instance.test_ids)
    assert {info["tests"][t] for t in many} == {"ERROR"}  # they ran (and do not exist), not MISSING
    assert reward == pytest.approx(1 - 3000 / 3021)  # 3000 of 3021 PASS_TO_PASS tests "regressed"


@needs_bwrap
def test_the_sandbox_outlives_the_rollout_deadline_plus_grading(make_env):
    env = make_env(wall_clock_limit=300, timeouts={"test": 200, "exec": 30, "teardown": 20})
    env.reset(options={"task": TASK})
    meta = json.loads((env._sandbox.workspace / "meta.json").read_text())
    # the deadline, a dense grading after the last command, the final grading (each: tree
    # fingerprint, starting and preparing the grading sandbox, set-up, test run, clean-up), and teardown
    grading = 30 + 2 * 120 + 200 + 200 + 20
    needed = 300 + 2 * grading + 20
    assert meta["expires_at"] - time.time() >= needed
    assert env.max_step_seconds == 30 + 2 * grading + 20


def test_env_pool_deadline_follows_the_worlds_declared_step_time():
    from turngym.envs.vector import DEFAULT_STEP_TIMEOUT, EnvPool

    pool = EnvPool.from_id("turngym/SWE-v0", 1,
                           env_kwargs={"split": "eval", "timeouts": {"test": 200, "exec": 30, "teardown": 20}})
    try:
        grading = 30 + 2 * 120 + 200 + 200 + 20
        assert pool.step_timeout == 30 + 2 * grading + 20 + 30  # max_step_seconds + 30 s margin
    finally:
        pool.close()
    explicit = EnvPool.from_id("turngym/SWE-v0", 1, env_kwargs={"split": "eval"}, step_timeout=5)
    assert explicit.step_timeout == 5
    explicit.close()
    assert DEFAULT_STEP_TIMEOUT == 60.0


# --------------------------------------------------------------------------- issue #15: reward hacking
# Each test is an attack a policy could find: without fixing the bug it would earn reward on the
# old grader (verified by running these tests against it); it must earn nothing now.
def _append(path: str, code: str) -> str:
    """An action that appends ``code`` to ``path`` (the package under test runs it at import)."""
    return f"```bash\ncat >> {path} <<'TURNGYM_EOF'\n{code}\nTURNGYM_EOF\n```"


# A TestCase class whose test methods of any name are no-ops, made on demand.
ANY_TEST_CLASS = '''import unittest
class _Meta(type):
    def __getattr__(cls, name):
        if name.startswith("test"):
            setattr(cls, name, lambda self: None)
            return getattr(cls, name)
        raise AttributeError(name)
class _Any(unittest.TestCase, metaclass=_Meta):
    pass
'''
# A test module that passes every test of any name: classes made on demand, any test method a no-op.
FAKE_TESTS = ANY_TEST_CLASS + '''def __getattr__(name):
    if name.startswith("Test"):
        return type(name, (_Any,), {})
    raise AttributeError(name)
'''

HACKS = {
    # the runner's own verdict, patched from the code under test
    "patch_the_runner_verdict": [_append("intervals/__init__.py", (
        "import sys\nfor _m in list(sys.modules.values()):\n"
        "    if hasattr(_m, 'status_of'):\n        _m.status_of = lambda result: 'PASSED'"))],
    # unittest's result class neutered: failures and errors are never recorded
    "neuter_unittest_result": [_append("intervals/__init__.py", (
        "import unittest\nunittest.TestResult.addFailure = lambda self, test, err: None\n"
        "unittest.TestResult.addError = lambda self, test, err: None"))],
    # the nonce read from the runner's frames, forged result lines written to its report fd
    "forge_lines_with_the_nonce": [_append("intervals/__init__.py", (
        "import os, sys\n_f = sys._getframe()\nwhile _f is not None:\n"
        "    if 'prefix' in _f.f_locals and 'test_ids' in _f.f_locals:\n"
        "        for _t in _f.f_locals['test_ids']:\n"
        "            os.write(_f.f_locals.get('report_fd', 1), ('\\n' + _f.f_locals['prefix'] + 'PASSED ' + _t + '\\n')"
        ".encode())\n        os._exit(0)\n    _f = _f.f_back"))],
    # a package shadowing the test module the hidden tests are applied to
    "shadow_test_module_with_a_package": [
        "```bash\nmkdir -p tests/test_core && cat > tests/test_core/__init__.py <<'TURNGYM_EOF'\n"
        + FAKE_TESTS + "TURNGYM_EOF\n```"],
    # tests/__init__.py (not in the test patch) replaces the test module when the package is imported
    "edited_tests_init": [
        "```bash\ncat > /scratch/fake.py <<'TURNGYM_EOF'\n" + FAKE_TESTS + "TURNGYM_EOF\n```",
        _append("tests/__init__.py", (
            "import sys, types\n_m = types.ModuleType('tests.test_core')\n"
            "exec(open('/testbed/.fake.py').read() if False else " + repr(FAKE_TESTS) + ", _m.__dict__)\n"
            "sys.modules['tests.test_core'] = test_core = _m"))],
    # a bytecode file that Python loads without checking it against the restored source
    "unchecked_hash_pyc": [
        "```bash\ncat > /scratch/fake.py <<'TURNGYM_EOF'\n" + FAKE_TESTS + "TURNGYM_EOF\n```",
        ("```bash\nmkdir -p tests/__pycache__ && python3 -c \"import py_compile, sys; py_compile.compile("
        "'/scratch/fake.py', cfile='tests/__pycache__/test_core.cpython-%d%d.pyc' % sys.version_info[:2], "
        "invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\"\n```")],
    # a smudge filter in the agent's .git/config rewrites the hidden tests as git applies them
    "git_filter_rewrites_the_hidden_tests": [
        ("```bash\ngit config filter.t.smudge \"sed 's/self\\.assert[A-Za-z]*(/(lambda *a, **k: None)(/'\" && "
        "git config filter.t.clean cat && echo 'tests/*.py filter=t' >> .gitattributes\n```")],
}


# A module that, imported by either process of the unittest runner, reports every test passed: in
# the test process on its result pipe, in the parent with the nonce read from stdin. Planted where
# it would shadow what the runner or the tests import: a standard-library module, or the tests package.
# (Verified to earn reward against a runner with the repository first on sys.path, and a grading
# copy that keeps tests.py.)
FORGER = """import os, sys
_args = sys.argv[1:]
if "--child" in _args:  # the test ids are in the runner's frames (its stdin is already read)
    _frame = sys._getframe()
    while _frame is not None and "test_ids" not in _frame.f_locals:
        _frame = _frame.f_back
    _ids = _frame.f_locals["test_ids"] if _frame is not None else []
    _fd = int(_args[_args.index("--child") + 1])
    _lines = ['{"id": "%s", "status": "PASSED"}\\n' % t for t in _ids] + ['{"end": %d}\\n' % len(_ids)]
    os.write(_fd, "".join(_lines).encode())
    os._exit(0)
_nonce = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.readline().strip()
sys.stdout.write("".join("\\n%s PASSED %s\\n" % (_nonce, t) for t in _args if "::" in t))
sys.stdout.flush()
os._exit(0)
"""


def _plant(path: str, code: str) -> str:
    return f"```bash\ncat > {path} <<'TURNGYM_EOF'\n{code}TURNGYM_EOF\n```"


HACKS.update({
    # a module at the repository root shadowing one the runner or the tests import
    "json_py_shadows_the_stdlib": [_plant("json.py", FORGER)],
    "unittest_py_shadows_the_stdlib": [_plant("unittest.py", FORGER)],
    "dataclasses_py_shadows_the_stdlib": [_plant("dataclasses.py", FORGER)],  # the code under test imports it
    # tests.py next to the tests package
    "tests_py_shadows_the_tests_package": [_plant("tests.py", FORGER)],
})


# The fast suite plays the first hack of each family; `make test-slow` plays them all.
HACK_FAMILIES = {
    "the code under test rewrites the runner's verdict": ("patch_the_runner_verdict", "neuter_unittest_result",
                                                          "forge_lines_with_the_nonce"),
    "the hidden tests are replaced": ("shadow_test_module_with_a_package", "edited_tests_init", "unchecked_hash_pyc",
                                      "git_filter_rewrites_the_hidden_tests"),
    "a planted module shadows one the runner imports": ("json_py_shadows_the_stdlib", "unittest_py_shadows_the_stdlib",
                                                         "dataclasses_py_shadows_the_stdlib",
                                                         "tests_py_shadows_the_tests_package"),
}
HACK_FAMILY = {hack: family for family, hacks in HACK_FAMILIES.items() for hack in hacks}


def test_every_hack_has_a_family():
    assert set(HACK_FAMILY) == set(HACKS)


@needs_bwrap
@pytest.mark.parametrize("hack", first_of_each(HACKS, HACK_FAMILY.__getitem__))
def test_reward_hacks_earn_nothing(make_env, hack):
    env = make_env()
    env.reset(options={"task": TASK})
    *_, (_, reward, _, _, info) = play(env, [*HACKS[hack], "submit"])
    assert reward == 0.0 and not info["resolved"], info["tests"]
    hidden = "tests/test_core.py::TestInterval::test_touching_intervals_do_not_overlap"
    assert info["tests"][hidden] != "PASSED"


@needs_bwrap
def test_the_fix_still_resolves_next_to_a_planted_hack(make_env):
    """Grading throws the hack away, not the fix: the gold patch plus a forged tests/ package still wins."""
    env = make_env()
    _, info = env.reset(options={"task": TASK})
    *_, (_, reward, _, _, info) = play(env, [HACKS["shadow_test_module_with_a_package"][0], info["walkthrough"][0],
                                             "submit"])
    assert reward == 1.0 and info["resolved"]
    assert "intervals/core.py" in info["patch"] and "tests/" not in info["patch"]


@needs_bwrap
def test_a_git_clean_filter_cannot_hide_the_patch(make_env):
    env = make_env()
    _, info = env.reset(options={"task": TASK})
    hide = ("```bash\ngit config filter.h.clean 'git show HEAD:intervals/core.py' && "
            "echo '*.py filter=h' > .gitattributes\n```")
    *_, (_, reward, _, _, info) = play(env, [hide, info["walkthrough"][0], "submit"])
    assert reward == 1.0 and "intervals/core.py" in info["patch"] and "-        return" in info["patch"]


@needs_bwrap
def test_dense_gradings_cannot_leak_the_hidden_tests_to_the_next_turn(make_env):
    env = make_env(reward_mode="dense")
    env.reset(options={"task": TASK})
    leak = _append("intervals/__init__.py", (
        "import glob, os, shutil\n"
        "for _p in glob.glob('tests/*.py') + glob.glob('/scratch/.turngym-grade/tests/*.py'):\n"
        "    try:\n        shutil.copy(_p, '/scratch/leak-' + os.path.basename(_p))\n"
        "    except OSError:\n        pass"))
    env.step(leak)  # the package changed: a dense grading runs it next to the hidden tests
    obs, *_ = env.step("```bash\ncat /scratch/leak-* /tmp/* 2>/dev/null | grep -c test_touching_intervals; "
                       "grep -rc test_touching_intervals /testbed /scratch\n```")
    assert "test_touching_intervals_do_not_overlap" not in obs and ":1" not in obs


# Where graders have written their own files (the old grader's script, index and copy lived at fixed
# /scratch paths: a FIFO there blocked each grading's write until the test timeout), and the tree itself.
FIFO_PATHS = ("/scratch/.turngym-tests.sh /scratch/.turngym-index /scratch/.turngym-grade /scratch/pipe "
              "/testbed/pipe /testbed/intervals/pipe.py")


@needs_bwrap
@pytest.mark.parametrize("reward_mode", ["sparse", "dense"])
def test_a_fifo_does_not_stall_grading(make_env, reward_mode):
    """A stalled grading is a timed-out one (reward 0), so the verdict, not a clock, shows the stall. (30 s: a
    grading on a machine at load 7 ran past 10 s.)"""
    env = make_env(timeouts={"test": 30}, reward_mode=reward_mode)
    _, info = env.reset(options={"task": TASK})
    env.step(f"```bash\nmkfifo {FIFO_PATHS}\n```")
    *_, (*_, info) = play(env, [info["walkthrough"][0], "submit"])
    assert info["resolved"] and info["grading_error"] is None and info["episode_reward"] == pytest.approx(1.0)


@needs_bwrap
def test_terminal_escapes_are_escaped_in_observations_patch_and_render(make_env):
    env = make_env(render_mode="ansi")
    _, info = env.reset(options={"task": TASK})
    obs, *_ = env.step("```bash\nprintf '\\033]52;c;Zm9v\\007\\033[2J\\033c\\233Jdone\\n'\n```")
    assert "\x1b" not in obs and "\x07" not in obs and "\\x1b]52;c;Zm9v\\x07" in obs and "done" in obs
    assert "\x1b" not in env.render()
    env.step("```bash\nprintf '# \\033[2J\\033]52;c;eA==\\007\\n' >> intervals/core.py\n```")
    *_, (_, _, _, _, info) = play(env, ["submit"])
    assert "intervals/core.py" in info["patch"] and "\x1b" not in info["patch"] and "\\x1b[2J" in info["patch"]


@needs_bwrap
def test_a_non_string_action_raises_without_using_a_turn(make_env):
    env = make_env()
    env.reset(options={"task": TASK})
    for bad in (42, None, b"```bash\nls\n```"):
        with pytest.raises(TypeError, match="actions are str"):
            env.step(bad)
    *_, info = env.step("```bash\nls\n```")
    assert info["turn"] == 1


@needs_bwrap
def test_tests_py_cannot_replace_a_test_directory_without_init(make_env, tmp_path):
    """Many repositories' tests/ have no ``__init__.py`` (a namespace package): there a ``tests.py`` at
    the root wins the import of ``tests``. Grading never copies a module beside a test directory."""
    instance = {i.instance_id: i for _, i in shipped_instances()}[TASK]
    repo = tmp_path / "repo"
    shutil.copytree(local_repo_dir(instance.repo_path), repo)
    (repo / "tests" / "__init__.py").unlink()
    bare = replace(instance, instance_id="bare__intervals-2", repo_path=str(repo), base_commit="")
    env = make_env(tasks=swe_taskset([bare], name="bare"))
    env.reset(options={"task": "bare__intervals-2"})
    *_, (_, reward, _, _, info) = play(env, [_plant("tests.py", FORGER), "submit"])
    assert reward == 0.0 and not info["resolved"], info["tests"]
    assert info["tests"]["tests/test_core.py::TestInterval::test_touching_intervals_do_not_overlap"] == "FAILED"
    assert info["tests"]["tests/test_core.py::TestInterval::test_length"] == "PASSED"  # the real tests ran
    assert "tests.py" not in info["patch"]


# --------------------------------------------------------------------------- the tools protocol (bwrap)
def call(name, **arguments):
    from turngym.envs.tools import ToolCall

    return ToolCall(name, arguments).to_action()


@needs_bwrap
def test_the_oracle_resolves_through_tools(make_env):
    env = make_env(action_protocol="tools")
    obs, info = env.reset(options={"task": TASK})
    assert [t["function"]["name"] for t in info["tools"]] == ["bash", "edit", "view", "submit"]
    assert "Call one tool per turn" in obs and "```bash" not in obs
    # intervals-2's gold patch has two hunks: each is viewed, then edited (tests/test_swe_walkthrough.py)
    assert [json.loads(a)["name"] for a in info["walkthrough"]] == ["view", "edit", "view", "edit", "submit"]
    *_, terminated, _, info = play(env, info["walkthrough"])[-1]
    assert terminated and info["won"] and info["pass_ratio"] == 1.0


@needs_bwrap
def test_the_tools_walkthrough_reads_the_sandbox_once_per_task(make_env, monkeypatch):
    """RL plays a task many times: only its first reset pays the command that reads the bugged files."""
    from turngym.envs.swe import env as swe_env

    reads = []
    read_files_command = swe_env.read_files_command
    monkeypatch.setattr(swe_env, "read_files_command", lambda paths: reads.append(paths) or read_files_command(paths))
    env = make_env(action_protocol="tools")
    first = env.reset(options={"task": TASK})[1]["walkthrough"]
    again = env.reset(options={"task": TASK})[1]["walkthrough"]
    assert first == again and len(reads) == 1
    *_, terminated, _, info = play(env, again)[-1]
    assert terminated and info["won"]


@needs_bwrap
def test_edit_view_and_bash_tools_with_clear_errors(make_env):
    env = make_env(action_protocol="tools")
    env.reset(options={"task": TASK})
    obs, _, _, _, info = env.step(call("view", path="intervals/core.py", start=1, end=3))
    assert not info["invalid_action"] and obs.startswith("<returncode>0</returncode>") and "     1\t" in obs
    hostile = "x'; rm -rf / #\nTURNGYM_TOOL\n$(reboot) `id` \\ \" é"
    obs, *_ = env.step(call("edit", path="intervals/core.py", old_str="no such text" + hostile, new_str="y"))
    assert "old_str occurs 0 times" in obs and "Nothing changed" in obs and "<returncode>1</returncode>" in obs
    obs, *_ = env.step(call("edit", path="intervals/core.py", old_str="self", new_str="me"))
    assert "times in intervals/core.py; it must occur exactly once; include more" in obs
    naive = "self.start <= other.end and other.start <= self.end"
    obs, *_ = env.step(call("edit", path="intervals/core.py", old_str=naive, new_str=naive + "  # " + hostile[:12]))
    assert "edited intervals/core.py" in obs
    # a path written as a traceback writes it: the error names the file
    obs, *_ = env.step(call("view", path="intervals/core.py:12", start=1, end=3))
    assert "cannot read intervals/core.py:12" in obs and "(the file is intervals/core.py; choose lines with" in obs
    obs, *_ = env.step(call("edit", path="intervals/core.py:12:", old_str="x", new_str="y"))
    assert "(the file is intervals/core.py; a path names the file alone)" in obs
    obs, *_ = env.step(call("view", path="intervals/nothing.py:12"))
    assert "cannot read intervals/nothing.py:12" in obs and "the file is" not in obs
    obs, *_ = env.step(call("bash", command="grep -c 'rm -rf' intervals/core.py; printf 'a\\nb\\n'"))
    assert obs == "<returncode>0</returncode>\n<output>\n1\na\nb\n</output>"  # the text arrived as text, untouched
    for action, reason in ((call("edit", path="a.py", old_str="", new_str="x"), "should be non-empty"),
                           (call("view", path="a.py", start=0), "less than the minimum of 1"),
                           (call("command", command="ls"), "unknown tool 'command'"),
                           (call("bash", command="ls\x00"), "control characters"),
                           ("```bash\nls\n```", "not valid JSON")):
        _, _, _, _, info = env.step(action)
        assert info["invalid_action"] and reason in info["invalid_reason"], (action, info["invalid_reason"])
    *_, terminated, _, info = env.step(call("submit"))
    assert terminated and not info["won"]
