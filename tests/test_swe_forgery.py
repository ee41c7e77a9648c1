"""Issue #24: verdicts the code under test cannot forge.

Each attack is an episode in the real bwrap sandbox whose commands plant code that the grading
then imports: the unittest runner's and pytest's machinery neutered, the result pipe written by
hand, pytest configured from the working tree. Every one earned reward 1.0 from the grader before
issue #24 (checked by running this file against that grader's runner and default test command);
each must now earn 0, and the ones the runner detects must say so (``info["grading_tampered"]``).
The last tests check that grading still gives a correct fix its reward: a test package named
``test/`` (the standard library has one) and a task graded by pytest.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
from dataclasses import replace

import pytest

from tests.test_swe import ANY_TEST_CLASS, TASK, _append, _plant, needs_bwrap, play
from turngym.envs.swe import GradeReport, SWEInstance, shipped_instances, swe_taskset
from turngym.envs.swe.instances import local_repo_dir
from turngym.envs.swe.sandbox.bwrap import TOOLS_DIR

F2P = ("tests/test_core.py::TestInterval::test_touching_intervals_do_not_overlap",
       "tests/test_core.py::TestInterval::test_intersection_of_touching_intervals_is_none")


@pytest.fixture
def make_env(make_swe_env):
    return make_swe_env  # tests/conftest.py


def _graded(make_env, actions, task=TASK, **env_kwargs):
    """Play ``actions`` then submit; the last step's reward and info."""
    env = make_env(**env_kwargs)
    _, info = env.reset(options={"task": task})
    *_, (_, reward, _, _, info) = play(env, [*actions, "submit"])
    return reward, info


def _assert_void(reward, info, hidden=F2P):
    assert reward == 0.0 and not info["resolved"], info["tests"]
    assert info["grading_tampered"] is True and info["pass_ratio"] == 0.0
    assert all(info["tests"][t] != "PASSED" for t in hidden)


# --------------------------------------------------------------------------- unittest's machinery
# Each one is code an agent appends to the package under test: it runs inside the test process.
UNITTEST_ATTACKS = {
    # a private piece of CPython's unittest: the outcome executor swallows every exception
    "replace_the_outcome_executor": _append("intervals/__init__.py", """
import contextlib, unittest.case as _case
class _Quiet(_case._Outcome):
    @contextlib.contextmanager
    def testPartExecutor(self, test_case, *args, **kwargs):
        try:
            yield
        except Exception:
            pass
_case._Outcome = _Quiet"""),
    # TestResult neutered, and put back by an __eq__ that the integrity comparison itself calls
    "neuter_testresult_restored_by_the_comparison": _append("intervals/__init__.py", """
import unittest
_R = unittest.TestResult
_real = {_n: _R.__dict__[_n] for _n in ("addFailure", "addError")}
class _Swallow:
    def __get__(self, obj, owner=None):
        return lambda *args, **kwargs: None
    def __eq__(self, other):
        for _n, _f in _real.items():
            setattr(_R, _n, _f)
        return True
    __hash__ = object.__hash__
for _n in _real:
    setattr(_R, _n, _Swallow())"""),
    # the test ids found in the runner's frames, PASSED records written on its result pipe, exit
    "forge_records_on_the_result_pipe": _append("intervals/__init__.py", """
import json, os, sys
def _ids():
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()):
            for found in [value] + (list(value.values()) if isinstance(value, dict) else []):
                if isinstance(found, list) and found and all(isinstance(t, str) and "::" in t for t in found):
                    return found
        frame = frame.f_back
    return []
if len(sys.argv) == 3 and sys.argv[1].startswith("--"):
    _ids = _ids()
    _lines = [json.dumps({"id": t, "status": "PASSED"}) for t in _ids] + [json.dumps({"end": len(_ids)})]
    os.write(int(sys.argv[2]), ("\\n".join(_lines) + "\\n").encode())
    os._exit(0)"""),
    # selective and self-restoring: a failure is swallowed only while a test checks touching intervals
    # (not from merge), by swapping unittest's module-level _addError, which puts itself back at once
    "selective_self_restoring_swap": _append("intervals/core.py", """
import sys, unittest.case as _case
_real_add_error, _real_overlaps = _case._addError, Interval.overlaps
def _swallow(result, test, exc_info):
    _case._addError = _real_add_error
def _overlaps(self, other):
    frame, in_merge = sys._getframe(), False
    while frame is not None:
        in_merge, frame = in_merge or frame.f_code.co_name == "merge", frame.f_back
    if (self.end == other.start or other.end == self.start) and not in_merge:
        _case._addError = _swallow
    return _real_overlaps(self, other)
Interval.overlaps = _overlaps"""),
}
# the same, also put back once the test's exception is dropped (a __del__): nothing is left for an
# integrity check to see, so only the independent harness, which never calls _addError, tells
UNITTEST_ATTACKS["selective_swap_that_leaves_no_trace"] = UNITTEST_ATTACKS["selective_self_restoring_swap"].replace(
    "    return _real_overlaps(self, other)", """        return _Answer(_real_overlaps(self, other))
    return _real_overlaps(self, other)
class _Answer:
    def __init__(self, value):
        self.value = value
    def __bool__(self):
        return self.value
    def __del__(self):
        _case._addError = _real_add_error""")


# Issue #40: the data that decides a verdict no longer lives, mutable, in the test process. Each of these earned
# 1.0 from the runner before it (checked against that runner on a copy of the repository, the bug in place).
_WHEN_OVERLAPS_RUNS = """
import sys
_real_overlaps = Interval.overlaps
def _running_test():
    frame = sys._getframe(2)
    while frame is not None:
        test = frame.f_locals.get("self")
        if hasattr(test, "addCleanup") and hasattr(test, "_testMethodName"):
            return test
        frame = frame.f_back
def _overlaps(self, other):
    test = _running_test()
    if test is not None:
        _act(test)
    return _real_overlaps(self, other)
Interval.overlaps = _overlaps
"""
RECORD_ATTACKS = {
    # class 1: a cleanup (public API) runs after the failure was recorded and empties the records it finds in the
    # frames: unittest's result lists in harness 1, the list of phase outcomes in harness 2
    "a_cleanup_empties_the_recorded_failures": _append("intervals/core.py", """
def _hide(*_):
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            for name in ("failures", "errors"):
                found = None if isinstance(value, type) else getattr(value, name, None)
                if isinstance(found, list):
                    found.clear()
            if isinstance(value, list) and value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
                value.clear()
        frame = frame.f_back
def _act(test):
    test.addCleanup(_hide)""" + _WHEN_OVERLAPS_RUNS),
    # class 2: the child's plan read from its frames while the package imports, and records forged canary-correct
    "records_forged_from_the_plan_in_the_child": _append("intervals/__init__.py", """
import json, os, sys
def _forge():
    frame = sys._getframe()
    while frame is not None:
        payload = frame.f_locals.get("payload")
        if isinstance(payload, dict) and "sequence" in payload:
            break
        frame = frame.f_back
    else:
        return
    records = [{"id": i, "status": "PASSED" if show else ("FAILED" if n % 3 == 0 else "ERROR")}
               for n, (i, _, show) in enumerate(payload["sequence"])]
    lines = [json.dumps(r) for r in records] + [json.dumps({"end": len(records)})]
    os.write(int(sys.argv[2]), ("\\n".join(lines) + "\\n").encode())
    os._exit(0)
if len(sys.argv) == 3 and sys.argv[1] in ("--child", "--check"):
    _forge()"""),
    # class 4: the test's own code object, trusted by identity, rewritten in place through ctypes while the test
    # module imports the package (its names: assertFalse -> assertTrue, assertIsNone -> assertIsNotNone); the runner
    # before passed both FAIL_TO_PASS tests (one PASS_TO_PASS test shares the names tuple CPython merged, and failed)
    "test_code_rewritten_in_place_through_ctypes": _append("intervals/__init__.py", """
import ctypes, sys, types
_SWAP = {"assertFalse": "assertTrue", "assertIsNone": "assertIsNotNone"}
_TESTS = ("test_touching_intervals_do_not_overlap", "test_intersection_of_touching_intervals_is_none")
def _rewrite(code):
    for index, name in enumerate(code.co_names if code.co_name in _TESTS else ()):
        if name in _SWAP:
            new = sys.intern(_SWAP[name])
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(new))
            ctypes.c_void_p.from_address(id(code.co_names) + 24 + 8 * index).value = id(new)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _rewrite(const)
_frame = sys._getframe()
while _frame is not None:
    if _frame.f_code.co_name == "<module>" and "test" in _frame.f_code.co_filename:
        _rewrite(_frame.f_code)
    _frame = _frame.f_back"""),
    # class 5: unittest's result methods swapped through the class's real dict (gc.get_referents of its proxy),
    # which no attribute-write audit sees, while the test runs, and put back by a cleanup before any check (the
    # runner before issue #40 voided this one only because harness 2 disagreed; now the reach itself is seen)
    "result_methods_swapped_through_gc_and_restored_in_a_cleanup": _append("intervals/core.py", """
import gc, unittest
def _act(test):
    real = gc.get_referents(unittest.TestResult.__dict__)[0]
    saved = {n: real[n] for n in ("addFailure", "addError")}
    for n in saved:
        real[n] = lambda *args, **kwargs: None
    test.addCleanup(real.update, saved)""" + _WHEN_OVERLAPS_RUNS),
}


@needs_bwrap
@pytest.mark.parametrize("attack", list(RECORD_ATTACKS))
def test_records_leave_the_test_process_as_they_happen(make_env, attack):
    """Issue #40, classes 1, 2, 4 and 5: a failure recorded, then taken back; records forged from the child's plan;
    the test's own code rewritten in place; framework methods swapped through the garbage collector during a
    test. None earns a reward."""
    reward, info = _graded(make_env, [RECORD_ATTACKS[attack]])
    assert reward == 0.0 and not info["resolved"], info["tests"]
    assert all(info["tests"][t] != "PASSED" for t in F2P), info["tests"]
    if attack.startswith(("result_methods_swapped", "test_code_rewritten")):
        assert info["grading_tampered"] is True


@needs_bwrap
@pytest.mark.parametrize("attack", list(UNITTEST_ATTACKS))
def test_neutering_or_bypassing_unittest_voids_the_grading(make_env, attack):
    reward, info = _graded(make_env, [UNITTEST_ATTACKS[attack]])
    _assert_void(reward, info)


@needs_bwrap
def test_the_fix_still_resolves_with_canaries_and_the_second_harness(make_env):
    """The defences cost a correct fix nothing: gold patch, reward 1, nothing flagged."""
    env = make_env()
    _, info = env.reset(options={"task": TASK})
    *_, (observation, reward, _, _, info) = play(env, info["walkthrough"])
    # once (2026-12-01, the whole suite beside two long runs at load 6) one test of 21 did not pass: say which
    not_passing = {test: status for test, status in info["tests"].items() if status != "PASSED"}
    assert reward == 1.0 and info["resolved"] and info["grading_tampered"] is False, (not_passing, observation[-3000:])
    assert not not_passing


# --------------------------------------------------------------------------- the test file's own code
# The red team's second round (each earned reward 1.0, unflagged, from the runner before this change):
# the code under test, imported by the test module, changes what the test module's classes and
# functions are, without touching unittest: a fake TestCase through the module's globals, the test
# methods wrapped as their classes are built or as the module returns, the module replaced in
# sys.modules. The runner now imports the test file from its own compile, checks that every graded
# test, its class and their bases are that compile's code and that no interpreter hook changed, and
# writes the canaries into the test file's own classes (a wrapper of the tests wraps them too).
_WRAP_TEST_METHODS = """
def _swallowing(method):
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except Exception:
            return None
    return wrapper"""
# Puts _on_return as the trace function of the test module's frame that imports the code under test.
_TRACE_THE_TEST_MODULE = """
_f = _sys._getframe(1)
while _f is not None:
    if _f.f_code.co_name == "<module>" and "test" in _f.f_code.co_filename.rsplit("/", 1)[-1]:
        _sys.settrace(lambda *a: None)
        _f.f_trace = _on_return
        break
    _f = _f.f_back"""

TEST_FILE_ATTACKS = {
    # F1: the test module's global `unittest` swapped (from the import's frames) for a fake whose
    # TestCase swallows every exception; unittest's own modules stay untouched
    "fake_testcase_through_the_test_modules_globals": _append("intervals/__init__.py", """
import sys as _sys, types as _types, unittest as _ut
class _TC(_ut.TestCase):
    def _callTestMethod(self, method):
        try:
            method()
        except Exception:
            pass
_fake = _types.ModuleType("unittest"); _fake.__dict__.update(_ut.__dict__); _fake.TestCase = _TC
_f = _sys._getframe(1)
while _f is not None:
    if _f.f_globals.get("unittest") is _ut and _f.f_globals.get("__name__", "").startswith("tests"):
        _f.f_globals["unittest"] = _fake
    _f = _f.f_back"""),
    # F2: builtins.__build_class__ wraps every test method of every Test* class as it is built
    "build_class_wraps_every_test_method": _append("intervals/__init__.py", _WRAP_TEST_METHODS + """
import builtins as _b
_real_bc = _b.__build_class__
def _bc(func, name, *bases, **kw):
    cls = _real_bc(func, name, *bases, **kw)
    if name.startswith("Test"):
        for _n, _v in list(vars(cls).items()):
            if _n.startswith("test") and callable(_v):
                setattr(cls, _n, _swallowing(_v))
    return cls
_b.__build_class__ = _bc"""),
    # F3: the test module replaced in sys.modules while it imports the package: its Test* classes and
    # their test methods are made on demand, each a no-op
    "test_module_replaced_in_sys_modules": _append("intervals/__init__.py", "\n" + ANY_TEST_CLASS + """
import sys as _sys, types as _types
for _name, _mod in list(_sys.modules.items()):
    if _name.startswith("tests.test_") and not hasattr(_mod, "_faked"):
        _fake = _types.ModuleType(_name); _fake._faked = True
        _fake.__getattr__ = lambda n: type(n, (_Any,), {}) if n.startswith("Test") else (_ for _ in ()).throw(
            AttributeError(n))
        _sys.modules[_name] = _fake"""),
    # F4: a trace function on the importing test module's frame wraps its tests when the module returns
    "trace_wraps_the_tests_as_the_module_returns": _append("intervals/__init__.py", _WRAP_TEST_METHODS + """
import sys as _sys
def _on_return(frame, event, arg):
    if event == "return":
        for _v in list(frame.f_globals.values()):
            if isinstance(_v, type) and _v.__name__.startswith("Test"):
                for _m, _f in list(vars(_v).items()):
                    if _m.startswith("test") and callable(_f):
                        setattr(_v, _m, _swallowing(_f))
        REMOVE
    return _on_return
""".replace("REMOVE", "pass") + _TRACE_THE_TEST_MODULE),
}
# variants that leave no hook behind: the class check and the canaries catch them, not the hook check
TEST_FILE_ATTACKS["build_class_hook_that_restores_itself"] = TEST_FILE_ATTACKS[
    "build_class_wraps_every_test_method"].replace("    return cls\n", """    if name == "TestMerge":
        _b.__build_class__ = _real_bc
    return cls
""")
_TRACE = TEST_FILE_ATTACKS["trace_wraps_the_tests_as_the_module_returns"]
TEST_FILE_ATTACKS["trace_that_removes_itself"] = _TRACE.replace(
    "        pass\n    return _on_return",
    "        _sys.settrace(None)\n        frame.f_trace = None\n    return _on_return")
# no trace and no hook: a thread wraps the tests once the test module exists
TEST_FILE_ATTACKS["thread_wraps_the_tests_after_import"] = _append("intervals/__init__.py", _WRAP_TEST_METHODS + """
import sys as _sys, threading as _th, time as _time
def _patcher():
    for _ in range(20000):
        _cls = getattr(_sys.modules.get("tests.test_core"), "TestInterval", None)
        if _cls is not None:
            for _m, _f in list(vars(_cls).items()):
                if _m.startswith("test") and callable(_f):
                    setattr(_cls, _m, _swallowing(_f))
            return
        _time.sleep(0.0005)
_sys.setswitchinterval(1e-6)
_th.Thread(target=_patcher, daemon=True).start()""")


@needs_bwrap
@pytest.mark.parametrize("attack", list(TEST_FILE_ATTACKS))
def test_changing_what_the_test_file_defines_voids_the_grading(make_env, attack):
    reward, info = _graded(make_env, [TEST_FILE_ATTACKS[attack]])
    _assert_void(reward, info)


def test_canaries_are_written_into_the_test_files_and_the_files_put_back(tmp_path):
    """The canaries sit in the graded tests' own class, named from the file's words, and the runner
    leaves the file as it found it."""
    from turngym.envs.swe.sandbox.bwrap import TOOLS_DIR

    instance = {i.instance_id: i for _, i in shipped_instances()}[TASK]
    repo = tmp_path / "repo"
    shutil.copytree(local_repo_dir(instance.repo_path), repo)
    before = (repo / "tests" / "test_core.py").read_bytes()
    with open(repo / "intervals" / "__init__.py", "a") as package:  # the code under test shows what it sees
        package.write("\nprint('SPY<<' + open('tests/test_core.py').read() + '>>SPY')\n")
    done = subprocess.run(["/usr/bin/python3", str(TOOLS_DIR / "unittest_runner.py"),
                           "tests/test_core.py::TestMerge::test_empty"],
                          cwd=repo, input=b"n0nce\n", capture_output=True, timeout=120, check=True)
    log = done.stdout.decode()
    assert "n0nce PASSED tests/test_core.py::TestMerge::test_empty" in log, log
    seen = "\n".join(line.removeprefix("| ") for line in log.split("SPY<<", 1)[1].split(">>SPY", 1)[0].splitlines())
    merge = next(n for n in ast.parse(seen).body if getattr(n, "name", "") == "TestMerge")
    added = [n.name for n in merge.body if n.name not in {"test_merges_overlapping", "test_merges_touching",
                                                          "test_keeps_disjoint", "test_empty"}]
    assert len(added) == 2 and all(name.startswith("test_") for name in added), added
    words = {w for n in ast.walk(ast.parse(before)) if getattr(n, "name", "").startswith("test_")
             for w in n.name.split("_")[1:]}
    assert all(set(name.split("_")[1:]) <= words for name in added), added
    assert (repo / "tests" / "test_core.py").read_bytes() == before  # put back


# --------------------------------------------------------------------------- a test package named test/
@needs_bwrap
def test_a_test_package_named_test_grades_with_the_gold_patch(make_env, tmp_path):
    """Debian's standard library has a ``test`` package; the repository's ``test/`` must win for its ids."""
    instance = {i.instance_id: i for _, i in shipped_instances()}[TASK]
    repo = tmp_path / "repo"
    shutil.copytree(local_repo_dir(instance.repo_path), repo)
    (repo / "tests").rename(repo / "test")

    def moved(text):
        for old, new in (("tests/", "test/"), ("from tests.", "from test."), ("import tests.", "import test.")):
            text = text.replace(old, new)
        return text

    for path in (repo / "test").rglob("*.py"):
        path.write_text(moved(path.read_text()))
    task = replace(instance, instance_id="moved__intervals-2", repo_path=str(repo), base_commit="",
                   test_patch=moved(instance.test_patch), setup_patch=moved(instance.setup_patch),
                   fail_to_pass=tuple(map(moved, instance.fail_to_pass)),
                   pass_to_pass=tuple(map(moved, instance.pass_to_pass)))
    env = make_env(tasks=swe_taskset([task], name="moved"))
    _, info = env.reset(options={"task": task.instance_id})
    *_, (_, reward, _, _, info) = play(env, info["walkthrough"])
    assert reward == 1.0 and info["resolved"], info["tests"]
    assert set(info["tests"].values()) == {"PASSED"} and all(t.startswith("test/") for t in info["tests"])


# --------------------------------------------------------------------------- pytest tasks
def _sandbox_has_pytest() -> bool:
    done = subprocess.run(["/usr/bin/python3", "-c", "import pytest"], capture_output=True, check=False)
    return done.returncode == 0


needs_pytest = pytest.mark.skipif(not _sandbox_has_pytest(),
                                  reason="the sandbox's python3 (/usr/bin/python3) has no pytest (python3-pytest)")

CALC = "def add(a, b):\n    return a + b\n\n\ndef mean(values):\n    return sum(values) // len(values)\n"
TESTS = "from calc import add, mean\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
HIDDEN = "\n\ndef test_mean():\n    assert mean([1, 2]) == 1.5\n"
PYPROJECT = '[project]\nname = "calc"\n\n[tool.pytest.ini_options]\npythonpath = ["."]\n'


def _git_diff(repo, change) -> str:
    """The diff ``change(repo)`` makes, the repository left as it was."""
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    change(repo)
    diff = subprocess.run([*git, "diff"], capture_output=True, text=True, check=True).stdout
    subprocess.run([*git, "checkout", "-q", "."], check=True)
    shutil.rmtree(repo / ".git")
    return diff


@pytest.fixture
def pytest_task(tmp_path):
    """A repository graded by pytest with the default test command: ``mean`` truncates."""
    repo = tmp_path / "calc-repo"
    (repo / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "calc" / "__init__.py").write_text(CALC)
    (repo / "tests" / "test_calc.py").write_text(TESTS)
    (repo / "pyproject.toml").write_text(PYPROJECT)
    gold = _git_diff(repo, lambda r: (r / "calc" / "__init__.py").write_text(CALC.replace("//", "/")))
    hidden = _git_diff(repo, lambda r: (r / "tests" / "test_calc.py").write_text(TESTS + HIDDEN))
    instance = SWEInstance(instance_id="local__calc-1", repo="local/calc", base_commit="",
                           problem_statement="mean([1, 2]) is 1, not 1.5", patch=gold, test_patch=hidden,
                           fail_to_pass=("tests/test_calc.py::test_mean",),
                           pass_to_pass=("tests/test_calc.py::test_add",), repo_path=str(repo))
    assert instance.test_cmd is None  # graded by the default command, as SWE-Gym records are
    return swe_taskset([instance], name="calc")


PLUGIN_PASSES_EVERYTHING = """
import pytest
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if WHICH(item):
        report.outcome, report.longrepr = "passed", None
"""

# code under test that finds pytest's config in the frames of the collection importing it
REGISTER_FROM_THE_FRAMES = """
import sys, types
_frame = sys._getframe()
while _frame is not None and not hasattr(_frame.f_locals.get("config"), "pluginmanager"):
    _frame = _frame.f_back
if _frame is not None:
    _plugin = types.ModuleType("calc_plugin")
    exec(compile(PLUGIN, "calc_plugin", "exec"), _plugin.__dict__)
    _frame.f_locals["config"].pluginmanager.register(_plugin, "calc_plugin")
"""

_PYTEST_WRAP = """
import sys as _sys, functools as _ft
def _wrapfn(fn):
    @_ft.wraps(fn)
    def w(*a, **k):
        try:
            return fn(*a, **k)
        except Exception:
            return None
    return w
def _on_return(frame, event, arg):
    if event == "return":
        for n, v in list(frame.f_globals.items()):
            if n.startswith("test") and callable(v) and not isinstance(v, type):
                frame.f_globals[n] = _wrapfn(v)
    return _on_return
""" + _TRACE_THE_TEST_MODULE

INNER_WRAPPER = """
import pytest
@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_call(item):
    outcome = yield
    if outcome.excinfo is not None and "mean" in item.obj.__code__.co_names:
        outcome.force_result(None)
"""
PYTEST_ATTACKS = {
    # result lines printed after pytest's own summary: the last report of a test wins in a -rA log
    "print_pass_lines_at_exit": ([_append("calc/__init__.py", (
        "import atexit, os\natexit.register(lambda: os.write(1, b'\\nPASSED tests/test_calc.py::test_mean\\n'))"))],
        False),
    # pyproject.toml (not protected like pytest.ini and conftest.py) adds a module of the repository to
    # the command line: pytest imports it, and it registers the plugin
    "pyproject_loads_a_plugin": ([
        _plant("calc/evil.py", "PLUGIN = '''" + PLUGIN_PASSES_EVERYTHING.replace("WHICH(item)", "True") + "'''"
               + REGISTER_FROM_THE_FRAMES),
        _append("pyproject.toml", 'addopts = "calc/evil.py"')], False),
    # the same plugin registered by the code under test while pytest imports it
    "plugin_registered_from_the_code_under_test": ([_append("calc/__init__.py", "PLUGIN = '''"
        + PLUGIN_PASSES_EVERYTHING.replace("WHICH(item)", "True") + "'''" + REGISTER_FROM_THE_FRAMES)], True),
    # selective: only tests whose name is in their file's source (turngym's canaries are not)
    "selective_plugin_spares_the_canaries": ([_append("calc/__init__.py", "PLUGIN = '''"
        + PLUGIN_PASSES_EVERYTHING.replace("WHICH(item)", "item.name in open(str(item.fspath)).read()")
        + "'''" + REGISTER_FROM_THE_FRAMES)], True),
    # F5: pytest's Function.runtest patched to swallow the exceptions of the tests named in the test
    # file (canaries made outside the file were spared; they are in the file now)
    "runtest_patched_for_the_tests_named_in_the_file": ([_append("calc/__init__.py", """
import sys as _sys
if "_pytest.python" in _sys.modules:
    _F = _sys.modules["_pytest.python"].Function
    _real = _F.runtest
    def _runtest(self):
        try:
            _real(self)
        except Exception:
            if self.name not in open(str(self.fspath)).read():
                raise
    _F.runtest = _runtest""")], True),
    # F4 under pytest: a trace on the importing test module's frame wraps its test functions
    "trace_wraps_the_test_functions": ([_append("calc/__init__.py", _PYTEST_WRAP)], True),
    # builtins.__spec__ may be rebound to a module spec (six imports builtins under another name), nothing else
    "builtins_spec_replaced_by_another_object": ([_append("calc/__init__.py",
                                                          "import builtins as _b\n_b.__spec__ = object()")], True),
}

# Issue #40 under pytest: each earned 1.0 from the runner before it (checked on a copy of the repository).
PYTEST_ATTACKS.update({
    # class 1: the records the plugin kept to write at the end, rewritten by a cleanup the code under test gave
    # pytest's config while it imported (it runs as pytest unconfigures, after every report)
    "kept_records_rewritten_by_a_config_cleanup": ([_append("calc/__init__.py", """
import gc as _gc
def _forge():
    for o in _gc.get_objects():
        for name, value in list(getattr(o, "__dict__", {}).items()) if not isinstance(o, type) else ():
            if name == "statuses" and isinstance(value, dict):
                for key in list(value):
                    if key.endswith("::test_mean"):
                        value[key] = "PASSED"
            if name == "raw" and isinstance(value, dict):
                for key in list(value):
                    value[key] = {when: None for when in value[key]}
for _o in _gc.get_objects():
    if type(_o).__name__ == "Config" and hasattr(_o, "add_cleanup"):
        _o.add_cleanup(_forge)
        break""")], False),
    # class 6 (and 3): a hook wrapper registered from inside (trylast: pluggy puts it inside the plugin's own
    # observer) that swallows the exception of the tests that call the package (old canaries compared literals)
    "inner_hook_wrapper_spares_literal_canaries": ([_append("calc/__init__.py", "PLUGIN = '''" + INNER_WRAPPER
                                                            + "'''" + REGISTER_FROM_THE_FRAMES)], True),
})


@needs_bwrap
@needs_pytest
@pytest.mark.parametrize("attack", list(PYTEST_ATTACKS))
def test_pytest_verdicts_cannot_be_forged(make_env, pytest_task, attack):
    actions, detected = PYTEST_ATTACKS[attack]
    reward, info = _graded(make_env, actions, task="local__calc-1", tasks=pytest_task)
    assert reward == 0.0 and not info["resolved"], info["tests"]
    assert info["tests"]["tests/test_calc.py::test_mean"] != "PASSED"
    assert info["grading_tampered"] is detected


@needs_bwrap
@needs_pytest
def test_a_pytest_task_resolves_with_the_gold_patch_and_its_base_configuration(make_env, pytest_task):
    """The gold patch earns 1.0 through turngym's plugin; an agent's edit of pyproject.toml that would
    break the run (an unknown option in addopts) changes nothing: the base commit's section is used."""
    env = make_env(tasks=pytest_task)
    _, info = env.reset(options={"task": "local__calc-1"})
    breaking = _append("pyproject.toml", 'addopts = "--no-such-option"')
    *_, (_, reward, _, _, info) = play(env, [breaking, *info["walkthrough"]])
    assert reward == 1.0 and info["resolved"] and info["grading_tampered"] is False, info["tests"]
    assert info["tests"] == {"tests/test_calc.py::test_mean": "PASSED", "tests/test_calc.py::test_add": "PASSED"}


@needs_bwrap
@needs_pytest
def test_a_pytest_task_fails_without_the_fix(make_env, pytest_task):
    reward, info = _graded(make_env, [], task="local__calc-1", tasks=pytest_task)
    assert reward == 0.0 and info["grading_tampered"] is False
    assert info["tests"] == {"tests/test_calc.py::test_mean": "FAILED", "tests/test_calc.py::test_add": "PASSED"}


@needs_bwrap
@needs_pytest
def test_swe_benchs_own_pytest_command_is_graded_through_the_runner(make_env, pytest_task):
    """Issue #40, class 7: a record naming SWE-bench's usual command (`pytest --no-header -rA --tb=no -p
    no:cacheprovider`) was graded from the log the code under test prints: PASSED lines printed at import
    earned 1.0 before. Now the command goes through the runner and the printed lines count for nothing."""
    task = pytest_task.tasks[0]
    record = {**task.payload, "test_cmd": "pytest --no-header -rA --tb=no -p no:cacheprovider {tests}"}
    tasks = swe_taskset([SWEInstance.from_record(record)], name="calc-swebench")
    printed = _append("calc/__init__.py", "print('PASSED tests/test_calc.py::test_mean')\n"
                                          "print('tests/test_calc.py::test_mean PASSED')")
    reward, info = _graded(make_env, [printed], task="local__calc-1", tasks=tasks)
    assert reward == 0.0 and info["tests"]["tests/test_calc.py::test_mean"] == "FAILED", info["tests"]


# Issue #40, class 8: objects that equal anything. Each earned 1.0 from the runner before strict equality.
TRUNCATE_TEST = "tests/test_wrap.py::TestTruncate::test_text_of_exact_width_is_unchanged"
ALWAYS_EQUAL = {
    # unittest: truncate returns a str subclass whose __eq__ always says True
    "str_subclass_equal_to_anything": ("turngym__textkit-1", TRUNCATE_TEST, _append("textkit/wrap.py", """
class _Yes(str):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = str.__hash__
_real_truncate = truncate
def truncate(*args, **kwargs):
    return _Yes(_real_truncate(*args, **kwargs))""")),
    # the standard library's own always-equal object, returned by the code under test
    "mock_any_returned": ("turngym__textkit-1", TRUNCATE_TEST, _append("textkit/wrap.py", """
from unittest import mock as _mock
def truncate(*args, **kwargs):
    return _mock.ANY""")),
}


@needs_bwrap
@pytest.mark.parametrize("attack", list(ALWAYS_EQUAL))
def test_an_object_equal_to_anything_does_not_pass_an_equality_assertion(make_env, attack):
    task, failing, action = ALWAYS_EQUAL[attack]
    reward, info = _graded(make_env, [action], task=task)
    assert reward == 0.0 and info["tests"][failing] == "FAILED", info["tests"]


@needs_bwrap
@needs_pytest
def test_a_float_equal_to_anything_does_not_pass_a_plain_pytest_assert(make_env, pytest_task):
    """pytest's `assert mean([1, 2]) == 1.5`: the comparison pytest's rewriter compiles is strict too."""
    always = _append("calc/__init__.py", """
class _Yes(float):
    def __eq__(self, other):
        return True
    __hash__ = float.__hash__
_real_mean = mean
def mean(values):
    return _Yes(_real_mean(values))""")
    reward, info = _graded(make_env, [always], task="local__calc-1", tasks=pytest_task)
    assert reward == 0.0 and info["tests"]["tests/test_calc.py::test_mean"] == "FAILED", info["tests"]


def test_strict_equality_allows_what_real_tests_compare_and_refuses_what_hacks_return(tmp_path):
    """The rule on its own (the sandbox's python3 runs integrity.py): namedtuples, enums, OrderedDict, Counter,
    Decimal and ints against floats pass; a repository's always-equal types and mock.ANY do not."""
    (tmp_path / "m.py").write_text("from unittest import mock\nclass Yes(str):\n    def __eq__(self, o):\n"
                                   "        return True\n    __hash__ = str.__hash__\nclass Borrow(str):\n"
                                   "    __eq__ = mock.ANY.__eq__\n    __hash__ = str.__hash__\n")
    script = f"""
import collections, decimal, enum, sys
from unittest import mock
sys.path[:0] = [{str(TOOLS_DIR)!r}, {str(tmp_path)!r}]
import integrity, m
problem = integrity.make_strict_equality({str(tmp_path)!r}, [])
P = collections.namedtuple("P", "x y")
class E(enum.IntEnum):
    A = 1
fine = [("a", "a"), (1, 1.0), (True, 1), (P(1, 2), (1, 2)), (E.A, 1), (collections.OrderedDict(a=1), {{"a": 1}}),
        (collections.Counter("ab"), {{"a": 1, "b": 1}}), (decimal.Decimal(1), 1), ([1, [2.0]], [1, [2]])]
hacks = [(m.Yes("x"), "y"), ("y", m.Yes("x")), ([m.Yes("x")], ["y"]), ({{"k": m.Yes("x")}}, {{"k": "y"}}),
         (mock.ANY, "x"), (m.Borrow("a"), "b")]
import unittest
class Case(unittest.TestCase):
    def runTest(self):
        pass
integrity.strict_assertions(Case, problem)
case = Case()
case.assertIn(1, [1.0, "x"])  # a number for a number
try:
    case.assertIn(m.Yes("x"), ["y"])
    refused = False
except AssertionError:
    refused = True
print([problem(a, b) for a, b in fine] == [""] * len(fine), all(problem(a, b) for a, b in hacks) and refused)
"""
    done = subprocess.run(["/usr/bin/python3", "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout.split() == ["True", "True"], done.stdout + done.stderr


def test_a_code_object_with_another_line_table_is_not_the_test_files():
    """Strict equality's excuse finds the call a test makes by its source span (``co_positions``, read from the
    line table): a test function whose code was swapped for one with a forged table pointed the excuse at another
    call of the file (a red-team finding). The runner's code comparison now includes the line table."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("integrity_under_test", TOOLS_DIR / "integrity.py")
    integrity = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(integrity)
    honest = compile("def f(a, b):\n    return g(a, b)\n", "t.py", "exec").co_consts[0]
    moved = compile("def f(a, b):\n    return g(a,    b)\n", "t.py", "exec").co_consts[0]  # same bytecode
    same_code = integrity._make_same_code(type(honest))
    assert honest.co_code == moved.co_code and honest.co_linetable != moved.co_linetable
    forged = honest.replace(co_linetable=moved.co_linetable)
    assert same_code(honest, honest.replace()) and not same_code(honest, forged)


# Red-team findings on strict equality itself (2026-11-29). Each passed an always-equal object before its fix.
STRICT_HOLES_PACKAGE = """import functools, itertools, operator


class Yes:  # equal to anything, by a builtin (no Python frame runs)
    __eq__ = functools.partial(operator.is_not, object())
    __ne__ = functools.partial(operator.is_, object())
    __hash__ = None


class Alternating:  # True, False, True...: `in` said True, a second comparison False
    __eq__ = functools.partial(next, itertools.cycle([True, False]))
    __hash__ = None


class YesDict(dict):
    __eq__ = Yes.__eq__
    __ne__ = Yes.__ne__
    __hash__ = None


class YesList(list):
    __eq__ = Yes.__eq__
    __ne__ = Yes.__ne__
    __hash__ = None


def squares(n):  # element 0 is the last pair checked: past a budget of 10,000 pairs
    return [Yes()] + [i * i for i in range(1, n)]


def posing(base, module):  # a builtin type's subclass that says it is the standard library's
    return type(base.__name__, (base,), {"__module__": module, "__eq__": Yes.__eq__,
                                         "__hash__": None if base in (dict, list) else base.__hash__})


import collections, fractions, numbers, types
from unittest import mock
_forged = (lambda self, other: True).__code__.replace(co_filename=collections.__file__, co_name="__eq__")


class Fake(fractions.Fraction):  # the library's __eq__, reading what a subclass defines
    _numerator = property(lambda self: Yes(), lambda self, value: None)
    _denominator = property(lambda self: Yes(), lambda self, value: None)


def registered():  # an ABC's registry is anyone's to fill
    numbers.Number.register(type(mock.ANY))
    return mock.ANY


def call_of_another_length():  # mock's _Call holding ANY, compared with a shorter tuple
    return mock._Call(("", mock.ANY, mock.ANY))
Forged = type("Forged", (str,), {"__module__": "collections", "__eq__": types.FunctionType(_forged, {}),
                                 "__hash__": str.__hash__})
"""
STRICT_HOLES_TESTS = """import collections
import fractions
import unittest
from unittest import mock
import pkg


class TestHoles(unittest.TestCase):
    def test_assert_in_compares_once(self):
        self.assertIn({"a": 1}, [pkg.Alternating()])

    def test_no_budget_to_hide_behind(self):
        self.assertEqual(pkg.squares(12000), [i * i for i in range(12000)])

    def test_assert_dict_equal(self):
        self.assertDictEqual(pkg.YesDict(), {"a": 1})

    def test_assert_list_equal(self):
        self.assertListEqual(pkg.YesList(), [1, 2, 3])

    def test_assert_sequence_equal(self):
        self.assertSequenceEqual([pkg.Yes()], (1,))

    def test_assert_count_equal(self):
        self.assertCountEqual([pkg.Yes(), pkg.Yes()], [1, 2])

    def test_assert_count_equal_nested(self):
        self.assertCountEqual([[pkg.Yes()], (pkg.Yes(),)], [[1], (2,)])

    def test_assert_almost_equal(self):
        self.assertAlmostEqual(pkg.Yes(), 1.5)

    def test_a_class_posing_as_the_standard_librarys(self):
        self.assertEqual(pkg.posing(dict, "collections")(), {"a": 1})

    def test_a_class_naming_no_module(self):
        self.assertEqual(pkg.posing(str, "no_such_module")("wrong"), "right")

    def test_an_eq_whose_code_claims_a_library_file(self):
        self.assertEqual(pkg.Forged("wrong"), "right")

    def test_a_library_eq_reading_a_subclass(self):
        self.assertEqual(object.__new__(pkg.Fake), 42)

    def test_a_number_by_registration(self):
        self.assertEqual(pkg.registered(), 0.5)

    def test_a_library_sequence_of_another_length(self):
        self.assertEqual(pkg.call_of_another_length(), (1, 2))


class TestHonest(unittest.TestCase):
    def test_every_wrapped_assertion(self):
        self.assertDictEqual({"a": [1, 2]}, {"a": [1, 2]})
        self.assertDictEqual({"a": 1, "id": mock.ANY}, {"a": 1, "id": 7})
        self.assertListEqual([1, "x"], [1, "x"])
        self.assertTupleEqual((1, 2.0), (1, 2))
        self.assertSetEqual({1, 2}, frozenset({1, 2}))
        self.assertSequenceEqual((1, 2), [1, 2])
        self.assertMultiLineEqual("a\\nb", "a\\nb")
        self.assertAlmostEqual(1.0, 1.00000001)
        self.assertCountEqual([1, 2, "a"], ["a", 2, 1])
        self.assertCountEqual([[1, 2], {"k": (3,)}, collections.Counter("a")], [{"k": (3,)}, [1, 2], {"a": 1}])
        self.assertIn(2, [1, 2])
        self.assertIn("b", {"a", "b"})
        self.assertEqual(list(range(12000)), list(range(12000)))
        self.assertEqual(collections.Counter("ab"), {"a": 1, "b": 1})  # the library's own __eq__, vouched for
        self.assertEqual(collections.OrderedDict(a=1), {"a": 1})
        self.assertEqual(fractions.Fraction(1, 2), 0.5)
        self.assertEqual(mock.call(1, 2), ("", (1, 2), {}))
"""


def test_strict_equality_holes_found_by_the_red_team_are_closed(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(STRICT_HOLES_PACKAGE)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_holes.py").write_text(STRICT_HOLES_TESTS)
    holes = ["test_assert_in_compares_once", "test_no_budget_to_hide_behind", "test_assert_dict_equal",
             "test_assert_list_equal", "test_assert_sequence_equal", "test_assert_count_equal",
             "test_assert_count_equal_nested",
             "test_assert_almost_equal", "test_a_class_posing_as_the_standard_librarys",
             "test_a_class_naming_no_module", "test_an_eq_whose_code_claims_a_library_file",
             "test_a_library_eq_reading_a_subclass", "test_a_number_by_registration",
             "test_a_library_sequence_of_another_length"]
    ids = [f"tests/test_holes.py::TestHoles::{name}" for name in holes]
    honest = "tests/test_holes.py::TestHonest::test_every_wrapped_assertion"
    statuses, log = _run_the_runner(tmp_path, [*ids, honest])
    assert statuses == {**dict.fromkeys(ids, "FAILED"), honest: "PASSED"}, log
    assert log.count("strict equality") >= len(ids)


@needs_pytest
def test_a_plain_assert_has_no_budget_to_hide_behind(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(STRICT_HOLES_PACKAGE)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_big.py").write_text(
        "import pkg\n\n\ndef test_big():\n    assert pkg.squares(12000) == [i * i for i in range(12000)]\n\n\n"
        "def test_honest_big():\n    assert list(range(12000)) == list(range(12000))\n")
    ids = ["tests/test_big.py::test_big", "tests/test_big.py::test_honest_big"]
    statuses, log = _run_the_runner(tmp_path, ids, "--pytest")
    assert statuses == {ids[0]: "FAILED", ids[1]: "PASSED"}, log


def test_a_closure_cell_or_default_of_the_strict_assertion_cannot_be_swapped(tmp_path):
    """A red-team finding: the cell of ``TestCase.assertEqual.__closure__`` holding ``problem`` was set to a
    function returning '' (``cell_contents`` is writable, and no audit event reports it), and an always-equal
    str passed. The strict functions now read everything from their defaults, and a write to those is reported."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("""import unittest


class Yes(str):
    def __eq__(self, other):
        return True
    __hash__ = str.__hash__


def swap(function):
    for cell in function.__closure__ or ():
        cell.cell_contents = lambda *args, **kwargs: ""
    if function.__defaults__:
        function.__defaults__ = tuple(lambda *args, **kwargs: "" for _ in function.__defaults__)


swap(unittest.TestCase.assertEqual)


def answer():
    return Yes("wrong")
""")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_a.py").write_text("import unittest\nimport pkg\n\n\nclass TestA(unittest.TestCase):\n"
                                                  "    def test_answer(self):\n"
                                                  "        self.assertEqual(pkg.answer(), 'right')\n")
    ids = ["tests/test_a.py::TestA::test_answer"]
    statuses, log = _run_the_runner(tmp_path, ids)
    assert statuses[ids[0]] in ("FAILED", "ERROR", "TAMPERED"), log


# --------------------------------------------------------------------------- no false alarms
# unittest's and pytest's features, run by the runner with the sandbox's python3 (no sandbox needed):
# every status comes out as the framework means it, and the harnesses never disagree on honest code.
UNITTEST_FEATURES = """import unittest, warnings
from unittest import mock


def setUpModule():
    pass


class TestFeatures(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.shared = 41

    def setUp(self):
        self.value = self.shared + 1
        self.addCleanup(setattr, self, "value", None)

    def test_plain(self):
        self.assertEqual(self.value, 42)

    def test_returns_a_value(self):  # a DeprecationWarning attributed to unittest's own module
        return 1

    def test_subtests(self):
        for i in range(3):
            with self.subTest(i=i):
                self.assertLess(i, 3)

    def test_subtest_fails(self):
        for i in range(3):
            with self.subTest(i=i):
                self.assertLess(i, 2)

    @unittest.skip("not today")
    def test_skipped(self):
        raise RuntimeError

    @unittest.expectedFailure
    def test_expected_failure(self):
        self.assertEqual(1, 2)

    @unittest.expectedFailure
    def test_unexpected_success(self):
        pass

    def test_mock(self):
        with mock.patch("os.getcwd", return_value="/x"):
            import os
            self.assertEqual(os.getcwd(), "/x")

    def test_warns(self):
        warnings.warn("careful", UserWarning)

    def test_error(self):
        raise KeyError("x")

    def test_fails(self):
        self.fail("no")


class TestAsync(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.ready = True

    async def test_async(self):
        self.assertTrue(self.ready)

    async def test_async_fails(self):
        self.assertTrue(False)


@unittest.skip("whole class")
class TestSkippedClass(unittest.TestCase):
    def test_x(self):
        raise RuntimeError


class TestBrokenClassSetUp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        raise RuntimeError("broken")

    def test_x(self):
        pass
"""
UNITTEST_EXPECTED = {
    "TestFeatures::test_plain": "PASSED", "TestFeatures::test_returns_a_value": "PASSED",
    "TestFeatures::test_subtests": "PASSED", "TestFeatures::test_subtest_fails": "FAILED",
    "TestFeatures::test_skipped": "SKIPPED", "TestFeatures::test_expected_failure": "XFAIL",
    "TestFeatures::test_unexpected_success": "FAILED", "TestFeatures::test_mock": "PASSED",
    "TestFeatures::test_warns": "PASSED", "TestFeatures::test_error": "ERROR", "TestFeatures::test_fails": "FAILED",
    "TestAsync::test_async": "PASSED", "TestAsync::test_async_fails": "FAILED", "TestSkippedClass::test_x": "SKIPPED",
    "TestBrokenClassSetUp::test_x": "ERROR", "TestFeatures": "ERROR",
}
PYTEST_FEATURES = """import unittest
import pytest


@pytest.fixture
def broken_teardown():
    yield 1
    raise RuntimeError("teardown")


@pytest.mark.parametrize("x", [1, 2])
def test_param(x):
    assert x < 2


def test_skip():
    pytest.skip("no")


@pytest.mark.xfail(strict=True)
def test_xpass_strict():
    pass


@pytest.mark.xfail
def test_xfail():
    assert False


def test_imperative_xfail():
    pytest.xfail("later")


def test_teardown_error(broken_teardown):
    assert broken_teardown == 1


class TestU(unittest.TestCase):
    def test_ok(self):
        self.assertTrue(True)

    def test_bad(self):
        self.assertTrue(False)
"""
PYTEST_EXPECTED = {
    "test_param[1]": "PASSED", "test_param[2]": "FAILED", "test_skip": "SKIPPED", "test_xpass_strict": "FAILED",
    "test_xfail": "XFAIL", "test_imperative_xfail": "XFAIL", "test_teardown_error": "ERROR", "TestU::test_ok": "PASSED",
    "TestU::test_bad": "FAILED",
}


def _run_the_runner(repo, ids, *options):
    from turngym.envs.swe.grading import parse_test_log
    from turngym.envs.swe.sandbox.bwrap import TOOLS_DIR

    done = subprocess.run(["/usr/bin/python3", str(TOOLS_DIR / "unittest_runner.py"), *options, *ids], cwd=repo,
                          input=b"n0nce\n", capture_output=True, timeout=120, check=True)
    return parse_test_log(done.stdout.decode(), ids, prefix="n0nce"), done.stdout.decode()


def test_unittest_features_grade_as_unittest_means_them_in_both_harnesses(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_features.py").write_text(UNITTEST_FEATURES)
    ids = [f"tests/test_features.py::{name}" for name in UNITTEST_EXPECTED]
    statuses, log = _run_the_runner(tmp_path, ids)
    assert statuses == {f"tests/test_features.py::{name}": s for name, s in UNITTEST_EXPECTED.items()}, log


@needs_pytest
def test_pytest_features_grade_as_pytest_means_them(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_p.py").write_text(PYTEST_FEATURES)
    ids = [f"tests/test_p.py::{name}" for name in PYTEST_EXPECTED]
    statuses, log = _run_the_runner(tmp_path, ids, "--pytest")
    assert statuses == {f"tests/test_p.py::{name}": s for name, s in PYTEST_EXPECTED.items()}, log
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tests"]  # its private configuration is gone


# helper base classes in a tests/ helper module, mixins from the standard library, `from unittest import
# TestCase`, decorators (mock.patch, skipIf, a helper's wrapper), an alias of unittest's assert, tests
# attached at run time, super(), plain pytest classes with setup_method: the test file's own code, no alarm
HELPERS = """import unittest


class Base(unittest.TestCase):
    factor = 2

    def setUp(self):
        super().setUp()
        self.ready = True

    def check_double(self, value):
        from pkg import double
        self.assertEqual(double(value), self.factor * value)


def requires_ready(test):
    def wrapper(self, *args, **kwargs):
        assert self.ready
        return test(self, *args, **kwargs)
    wrapper.__wrapped__ = test
    return wrapper
"""
THINGS = """import abc
import os
from unittest import TestCase, mock, skipIf

from pkg import double
from tests.helpers import Base, requires_ready

EXPECTED = {1: 2, 2: 4}


def helper(x):
    return double(x)


class Mixin(abc.ABC):
    def mixed(self):
        return 3


class LocalBase(TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.shared = 1


class TestThings(Mixin, LocalBase):
    assertItemsEqual = TestCase.assertCountEqual

    def test_plain(self):
        self.assertEqual(helper(2), EXPECTED[2])

    def test_alias(self):
        self.assertItemsEqual([1, 2], [2, 1])

    @mock.patch("os.getcwd", return_value="/x")
    def test_patched(self, getcwd):
        self.assertEqual(os.getcwd(), "/x")

    @skipIf(False, "never")
    def test_skip_if(self):
        self.assertEqual(self.mixed(), 3)


class TestHelpers(Base):
    @requires_ready
    def test_with_helper_base(self):
        self.check_double(3)


@mock.patch("os.getcwd", return_value="/y")
class TestClassPatched(TestCase):
    def test_cwd(self, getcwd):
        self.assertEqual(os.getcwd(), "/y")


class TestGenerated(TestCase):
    pass


def _make(n):
    def test(self):
        self.assertEqual(double(n), 2 * n)
    return test


for _n in (1, 2):
    setattr(TestGenerated, "test_gen_%d" % _n, _make(_n))
"""
PLAIN = """import pytest

from pkg import double
from tests.helpers import requires_ready


@pytest.fixture
def value():
    return 3


class Base:
    def check(self, x):
        assert double(x) == 2 * x


class TestPlain(Base):
    def setup_method(self, method):
        self.ready = True

    def test_check(self, value):
        self.check(value)

    @requires_ready
    def test_wrapped(self):
        self.check(1)


def test_function(value):
    assert double(value) == 6


@pytest.mark.parametrize("n", [1, 2])
class TestParametrized:
    def test_double(self, n):
        assert double(n) == 2 * n
"""
HELPER_IDS = [*("tests/test_things.py::TestThings::" + n for n in ("test_plain", "test_alias", "test_patched",
                                                                   "test_skip_if")),
              "tests/test_things.py::TestHelpers::test_with_helper_base",
              "tests/test_things.py::TestClassPatched::test_cwd", "tests/test_things.py::TestGenerated::test_gen_1",
              "tests/test_things.py::TestThings"]


@pytest.mark.parametrize("mode", ["unittest", "pytest"])
def test_helper_modules_mixins_decorators_and_generated_tests_raise_no_false_alarm(tmp_path, mode):
    if mode == "pytest" and not _sandbox_has_pytest():
        pytest.skip("the sandbox's python3 (/usr/bin/python3) has no pytest (python3-pytest)")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("def double(x):\n    return 2 * x\n")
    (tmp_path / "tests").mkdir()
    for name, text in (("__init__.py", ""), ("helpers.py", HELPERS), ("test_things.py", THINGS),
                       ("test_pt.py", PLAIN)):
        (tmp_path / "tests" / name).write_text(text)
    ids = HELPER_IDS if mode == "unittest" else HELPER_IDS[:-1] + [  # pytest grades no whole-class id
        f"tests/test_pt.py::{n}" for n in ("TestPlain::test_check", "TestPlain::test_wrapped", "test_function",
                                           "TestParametrized::test_double[2]")]
    statuses, log = _run_the_runner(tmp_path, ids, *(["--pytest"] if mode == "pytest" else []))
    assert statuses == dict.fromkeys(ids, "PASSED"), log
    assert (tmp_path / "tests" / "test_things.py").read_text() == THINGS  # the canaries are gone again


# What real repositories' own tests do that the grader once took for tampering (issue #42's first synthesized
# sets, 31 of 146 gold validations void): cachetools' test classes hold the package's decorators as data
# (`DECORATOR = staticmethod(cachetools.func.ttl_cache)`, some inheriting every test from a mixin; graded under
# pytest, such a class that no graded id names has no canary, and pytest 7 sets its xunit fixture on it at
# collection, a function from pytest's files: `_UnitTestCase__pytest_class_setup`, `_Class__pytest_setup_method`),
# toolz compares with a set display of constant tuples (a frozenset constant of tuples), more-itertools' load_tests
# runs the package's doctests (doctest restores the trace it found through sys.settrace).
REAL_REPOSITORY_TESTS = '''import doctest
import unittest

import pkg


def load_tests(loader, tests, ignore):
    tests.addTests(doctest.DocTestSuite(pkg))
    return tests


class DecoratorMixin:
    def test_decorated(self):
        self.assertEqual(self.DECORATOR(lambda x: x + 1)(1), 2)


class TestOnlyInherited(unittest.TestCase, DecoratorMixin):
    DECORATOR = staticmethod(pkg.cached)


class TestHeld(unittest.TestCase, DecoratorMixin):
    DECORATOR = staticmethod(pkg.cached)

    def test_pairs(self):
        expected = {(1, "one"), (2, "two"), (3, "three")}
        self.assertEqual(set(pkg.pairs()), expected)
'''
REAL_PACKAGE = '''def cached(function):
    """
    >>> cached(abs)(-2)
    2
    """
    return function


def pairs():
    return [(1, "one"), (2, "two"), (3, "three")]
'''
REAL_PYTEST = '''import pkg


class Decorated:
    def setup_method(self, method):
        self.argument = 1

    def test_decorated(self):
        assert self.DECORATOR(lambda x: x + 1)(self.argument) == 2


class TestHeld(Decorated):
    DECORATOR = staticmethod(pkg.cached)


class TestNotGraded(Decorated):
    DECORATOR = staticmethod(pkg.cached)


def test_pairs():
    expected = {(1, "one"), (2, "two"), (3, "three")}
    assert set(pkg.pairs()) == expected
'''


@pytest.mark.parametrize("mode", ["unittest", "pytest", "unittest under pytest"])
def test_what_real_repositories_tests_do_raises_no_false_alarm(tmp_path, mode):
    if mode != "unittest" and not _sandbox_has_pytest():
        pytest.skip("the sandbox's python3 (/usr/bin/python3) has no pytest (python3-pytest)")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(REAL_PACKAGE)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_real.py").write_text(REAL_PYTEST if mode == "pytest" else REAL_REPOSITORY_TESTS)
    # under pytest the whole file is collected and checked: TestNotGraded and TestOnlyInherited too, without canaries
    names = {"unittest": ["TestHeld::test_decorated", "TestHeld::test_pairs", "TestHeld",
                          "TestOnlyInherited::test_decorated"],
             "pytest": ["TestHeld::test_decorated", "test_pairs"],
             "unittest under pytest": ["TestHeld::test_decorated", "TestHeld::test_pairs"]}[mode]
    ids = [f"tests/test_real.py::{n}" for n in names]
    statuses, log = _run_the_runner(tmp_path, ids, *([] if mode == "unittest" else ["--pytest"]))
    assert statuses == dict.fromkeys(ids, "PASSED"), log


# --------------------------------------------------------------------------- the report
def test_a_tampered_grading_pays_nothing_whatever_else_passed():
    statuses = {"a": "TAMPERED", "b": "TAMPERED"}
    report = GradeReport(statuses=statuses, fail_to_pass=("a",), pass_to_pass=("b",))
    assert report.tampered and not report.resolved
    assert report.reward("ratio") == report.reward("resolved") == 0.0
    assert report.components()["tampered"] == 1.0 and "void" in report.summary()
    honest = GradeReport(statuses={"a": "PASSED", "b": "PASSED"}, fail_to_pass=("a",), pass_to_pass=("b",))
    assert not honest.tampered and honest.reward("ratio") == 1.0


# The test commands SWE-bench, SWE-Gym and SWE-smith records name, and what they become.
RECORD_COMMANDS = {
    "pytest -rA {tests}": [],
    "pytest --no-header -rA --tb=no -p no:cacheprovider {tests}": [],  # SWE-bench's usual command
    "pytest --no-header -rA --tb=no -p no:cacheprovider": [],  # SWE-bench appends the test files itself
    "pytest --disable-warnings --color=no --tb=no --verbose": [],  # SWE-smith
    "python -m pytest -v --tb=short {tests}": [],
    "python3.11 -m pytest -W ignore::DeprecationWarning --tb no -x {test_files}": [],
    "py.test {tests}": [],
    "PYTHONWARNINGS=ignore pytest -rA -p xdist -n 4 {tests}": ["xdist"],
    "pytest -pno:randomly -p 'timeout' --timeout=60 -rA {tests}": ["timeout"],
    "pytest -p hypothesis -p hypothesis {tests}": ["hypothesis"],
}


@pytest.mark.parametrize("command", list(RECORD_COMMANDS))
def test_every_pytest_command_form_records_use_is_graded_through_the_runner(command):
    """Graded from its own log, a test that prints `PASSED <id>` (or a plugin from pyproject.toml) would win:
    every plain pytest call goes through the runner, keeping only the plugins it names."""
    from turngym.envs.swe.instances import DEFAULT_TEST_CMD
    from turngym.envs.swe.test_command import protected_test_command

    plugins = "".join(f"-p {p} " for p in RECORD_COMMANDS[command])
    expected = DEFAULT_TEST_CMD.replace("{tests}", plugins + "{tests}")
    assert protected_test_command(command) == expected


def test_an_unprotected_command_is_refused_unless_the_record_opts_in(caplog):
    from turngym.envs.swe.instances import DEFAULT_TEST_CMD
    from turngym.envs.swe.test_command import UnprotectedTestCommand, protected_test_command

    assert protected_test_command(None) == DEFAULT_TEST_CMD
    runner = "python3 /opt/turngym/unittest_runner.py {tests}"
    assert protected_test_command(runner) == runner and not caplog.records
    for command in ("make test", "cd sub && pytest {tests}", "pytest {tests}; echo PASSED", "tox -e py311",
                    "./tests/runtests.py --verbosity 2 --settings=test_sqlite", "pytest 'unclosed {tests}"):
        with pytest.raises(UnprotectedTestCommand, match="unprotected_test_cmd"):
            protected_test_command(command, "task-1")
    with caplog.at_level("WARNING"):
        assert protected_test_command("make test", "task-1", allow_unprotected=True) == "make test"
    assert "task-1" in caplog.text and "can forge it" in caplog.text


def test_a_record_with_an_unprotected_command_is_refused_at_load():
    record = {"instance_id": "x-1", "repo": "x/x", "base_commit": "", "problem_statement": "p", "patch": "",
              "test_patch": "", "FAIL_TO_PASS": ["t.py::test_a"], "PASS_TO_PASS": [], "test_cmd": "make test"}
    with pytest.raises(ValueError, match="x-1: test_cmd 'make test' does not run through"):
        SWEInstance.from_record(record)
    with pytest.raises(ValueError, match="true or false"):
        SWEInstance.from_record({**record, "unprotected_test_cmd": "yes"})
    allowed = SWEInstance.from_record({**record, "unprotected_test_cmd": True})
    assert allowed.unprotected_test_cmd and allowed.to_record()["unprotected_test_cmd"] is True
    assert SWEInstance.from_record(allowed.to_record()) == allowed
