"""Run the tests that grade an SWE task and print one result line per test, tagged with a nonce.

Runs inside the sandbox with the sandbox's own Python (the host's /usr/bin/python3 under bwrap,
the image's python3 under docker), so it uses the standard library only (Python 3.7 and newer).

    python3 /opt/turngym/unittest_runner.py tests/test_a.py::TestA::test_x [more ids...]
    python3 /opt/turngym/unittest_runner.py --pytest [-p PLUGIN]... tests/test_a.py::test_x [more ids...]

The **parent** (this process) never imports the code under test. It reads a nonce from the first
line of standard input, makes itself non-dumpable (no ptrace, no ``/proc/<pid>/mem`` for processes of
the same user), runs the tests in child processes and prints every verdict as ``<nonce> STATUS <id>``;
the children's output reaches the log only indented with ``| ``. Printing a result line from a test
counts for nothing. What the children report travels on a private pipe, never on stdout.

Code under test runs in the same process as the test's assertions, so a child's report is evidence,
not proof. Four defences make a forged verdict fail (docs/worlds/swe.md, "Grading and the reward's
threat model", says what remains):

* **canaries**: the parent makes random test names for each child, which runs a test that must
  fail before, and a test that must error after, every graded test, through the same machinery. A
  test's pass counts only if every canary of its file came back FAILED / ERROR: neutering the
  machinery (unittest's ``_Outcome``, ``TestResult``, pytest's reports) turns the canaries into passes
  too, and forging records without them leaves them missing. Either voids the grading;
* **integrity checks** (unittest) after every test: each module of unittest, each of its classes and
  this runner's globals are compared *by identity*, over tuples snapshotted before any repository
  import, by a function whose every helper was bound then, with the garbage collector off (no
  ``__eq__``, ``__hash__`` or ``__del__`` of the code under test runs during the comparison). An
  audit hook, which no Python code can remove, reports any write to the code of unittest's or the
  runner's functions (and, on Pythons that audit it, to their classes) the moment it happens;
* **a second, independent harness** (unittest): another process runs the same tests without
  unittest's result machinery (it calls setUp, the test method and tearDown itself, with its own
  ``try``/``except``). Every test the first harness passes must pass there too;
* **two observations** (pytest): turngym's plugin (``pytest_plugin.py``, loaded by path, not by a
  name the repository could shadow) records the exception each test phase raised, seen from inside
  pytest's hook calls, next to pytest's own report; a report of a pass over a raised exception is a
  forgery.

Any of these failing makes every test ``TAMPERED``: the grader pays 0 and says so.

Ids: ``path.py::Class::method``, ``path.py::Class``, ``path.py`` or a dotted unittest name. Files
run in the order of their first id, each file's verdicts printed as soon as both harnesses agree.
A test file inside a repository directory named like ``test*`` (``test/``, ``testing/``) is imported
from the repository even where the standard library has a module of that name (Debian's ``test``).
"""

import json
import os
import subprocess
import sys
import threading

CHILD = "--child"  # harness 1: unittest's own machinery
CHECK = "--check"  # harness 2: direct calls, no result machinery
PYTEST = "--pytest"
STATUSES = ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS")
PASSING = ("PASSED", "XFAIL")
TAMPERED = "TAMPERED"
# what each canary must come back as
CANARY_EXPECTED = {"fail": "FAILED", "error": "ERROR"}
# under pytest a module marked xfail makes its failing canary XFAIL (a forged XFAIL is caught apart)
PYTEST_CANARY = {"fail": ("FAILED", "XFAIL"), "error": ("ERROR",)}
PLUGIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pytest_plugin.py")


def unittest_name(test_id):
    """``tests/test_a.py::TestA::test_x`` -> ``tests.test_a.TestA.test_x``."""
    path, _, rest = test_id.partition("::")
    if path.endswith(".py"):
        path = path[: -len(".py")].replace("/", ".").replace(os.sep, ".")
    return ".".join([path] + [part for part in rest.split("::") if part])


def file_of(test_id):
    if "::" in test_id or test_id.endswith(".py"):
        return test_id.partition("::")[0]
    return test_id.rsplit(".", 2)[0] if test_id.count(".") >= 2 else test_id


def status_of(result):
    if result.errors:
        return "ERROR"
    if result.failures or result.unexpectedSuccesses:
        return "FAILED"
    if result.testsRun == 0:
        return "ERROR"  # nothing matched the id
    if len(result.skipped) == result.testsRun:
        return "SKIPPED"
    if result.expectedFailures:
        return "XFAIL"
    return "PASSED"


def worst(statuses):
    """The status of several tests run under one id, as :func:`status_of` ranks them."""
    for status in ("ERROR", "FAILED"):
        if status in statuses:
            return status
    if not statuses:
        return "ERROR"
    if all(s == "SKIPPED" for s in statuses):
        return "SKIPPED"
    return "XFAIL" if "XFAIL" in statuses else "PASSED"


def random_name(prefix):
    return prefix + os.urandom(6).hex()


def canary_names():
    """A fresh class name and two method names, looking like any test's."""
    return {"class": random_name("Test"), "fail": random_name("test_"), "error": random_name("test_")}


# --------------------------------------------------------------------------- both unittest children
def _prepare_path():
    """The standard library first, then the repository: a module at the repository root cannot shadow
    a standard-library module; the runner's own directory is not on the path."""
    cwd = os.getcwd()
    script_dir = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != script_dir]
    stdlib = [i for i, p in enumerate(sys.path) if "-packages" not in p and p.startswith(sys.base_prefix)]
    sys.path.insert(stdlib[-1] + 1 if stdlib else 0, cwd)
    return cwd


def _prefer_repository_test_package(test_ids, cwd):
    """Import a test directory named ``test*`` from the repository, before anything imports the
    standard library's module of that name (Debian ships ``test``). The test directories are restored
    to their base versions before grading: they are the task's, not the agent's."""
    import importlib.machinery
    import importlib.util

    for test_id in test_ids:
        path = test_id.partition("::")[0]
        top = path.split("/")[0]
        directory = os.path.join(cwd, top)
        if "/" not in path or not top.startswith("test") or top in sys.modules or not os.path.isdir(directory):
            continue
        init = os.path.join(directory, "__init__.py")
        if os.path.isfile(init):
            spec = importlib.util.spec_from_file_location(top, init, submodule_search_locations=[directory])
        else:  # a namespace package
            spec = importlib.machinery.ModuleSpec(top, None, is_package=True)
            spec.submodule_search_locations = [directory]
        module = importlib.util.module_from_spec(spec)
        sys.modules[top] = module
        try:
            if spec.loader is not None:
                spec.loader.exec_module(module)
        except BaseException:  # noqa: BLE001 - its tests will report the import error
            del sys.modules[top]


def _snapshot(unittest_modules, extra_modules):
    """``(owner, type(owner), items)`` for each module of unittest, each class they define, and the
    runner's own globals: the state the verdict depends on, taken before any repository import."""
    taken = []
    for module in tuple(unittest_modules) + tuple(extra_modules):
        items = tuple(vars(module).items())
        taken.append((module, type(module), items))
        for _, value in items:
            if isinstance(value, type) and getattr(value, "__module__", "").startswith("unittest"):
                taken.append((value, type(value), tuple(vars(value).items())))
    return tuple(taken)


def _make_checker(snapshot):
    """A comparison of the current state with ``snapshot`` that runs no code of the repository.

    Every helper is bound now (the repository may replace builtins later); owners are checked to
    still be of their type (a module's ``__class__`` can be swapped for one with a ``__dict__``
    property) before ``vars``; items are compared by ``is`` (no ``__eq__``); the garbage collector is
    off during the comparison (no ``__del__``). A module may gain new entries that are modules (an
    ``import unittest.mock`` sets ``unittest.mock``) and a ``__warningregistry__`` (any warning
    attributed to it); nothing else may change."""
    import gc
    from types import ModuleType

    def same(_snapshot=snapshot, _len=len, _range=range, _tuple=tuple, _vars=vars, _type=type, _str=str,
             _dict=dict, _module=ModuleType, _gc_disable=gc.disable, _gc_enable=gc.enable, _gc_on=gc.isenabled):
        was_on = _gc_on()
        _gc_disable()
        try:
            for owner, kind, items in _snapshot:
                if _type(owner) is not kind:
                    return False
                now = _tuple(_vars(owner).items())
                size = _len(items)
                if _len(now) < size or (kind is not _module and _len(now) != size):
                    return False
                for index in _range(size):
                    old_key, old_value = items[index]
                    new_key, new_value = now[index]
                    if old_key is not new_key or old_value is not new_value:
                        return False
                for index in _range(size, _len(now)):
                    key, value = now[index]
                    if _type(value) is not _module and not (
                            _type(key) is _str and key == "__warningregistry__" and _type(value) is _dict):
                        return False
            return True
        finally:
            if was_on:
                _gc_enable()

    return same


def _protected_ids(snapshot):
    """ids of the classes and functions the verdict depends on (for the audit hook)."""
    ids = set()
    for owner, _, items in snapshot:
        ids.add(id(owner))
        for _, value in items:
            if callable(value) or isinstance(value, (classmethod, staticmethod)):
                ids.add(id(value))
                ids.add(id(getattr(value, "__func__", value)))
    return frozenset(ids)


def _install_alarm(protected, alarm):
    """An audit hook (it cannot be removed) that raises ``alarm`` on any write to a protected object."""
    events = frozenset(("object.__setattr__", "object.__delattr__"))

    def hook(event, args, _events=events, _protected=protected, _id=id, _len=len, _alarm=alarm):
        if event in _events and _len(args) >= 2 and _id(args[0]) in _protected:
            _alarm(f"{event} {args[1]}")

    if hasattr(sys, "addaudithook"):  # Python 3.8 and newer
        sys.addaudithook(hook)


class _Channel:
    """The child's report: records kept in memory, written at the end; alarms written at once."""

    def __init__(self, fd):
        self.fd = fd
        self.records = []
        self.write = os.write
        self.dumps = json.dumps

    def alarm(self, reason):
        self.write(self.fd, (self.dumps({"tamper": str(reason)}) + "\n").encode())

    def finish(self):
        lines = [self.dumps(r) for r in self.records] + [self.dumps({"end": len(self.records)})]
        self.write(self.fd, ("\n".join(lines) + "\n").encode())


def _child_setup(result_fd):
    """Read the ids, fix the path, bind everything the verdict needs, then let the repository in."""
    payload = json.loads(sys.stdin.readline())
    sys.stdin = open(os.devnull)  # noqa: SIM115 - the tests get an empty stdin
    cwd = _prepare_path()
    import unittest

    if _mentions(payload["ids"], b"IsolatedAsyncioTestCase"):
        # its first use (unittest's module __getattr__) adds it to the package: use it before the snapshot
        getattr(unittest, "IsolatedAsyncioTestCase", None)

    channel = _Channel(result_fd)
    modules = [m for name, m in sorted(sys.modules.items()) if name == "unittest" or name.startswith("unittest.")]
    snapshot = _snapshot(modules, [sys.modules[__name__]])
    same = _make_checker(snapshot)
    _install_alarm(_protected_ids(snapshot), channel.alarm)
    _prefer_repository_test_package(payload["ids"], cwd)
    return payload, channel, same, unittest


def _mentions(test_ids, word):
    """Whether a test file (or, for dotted ids, maybe one) holds ``word``."""
    for test_id in test_ids:
        path = test_id.partition("::")[0]
        if not path.endswith(".py"):
            return True
        try:
            with open(path, "rb") as handle:
                if word in handle.read():
                    return True
        except OSError:
            pass
    return False


def _canary_class(unittest, names):
    def must_fail(self):
        raise AssertionError("turngym canary: this test must fail")

    def must_error(self):
        raise RuntimeError("turngym canary: this test must error")

    namespace = {names["fail"]: must_fail, names["error"]: must_error, "__module__": random_name("turngym_")}
    return type(names["class"], (unittest.TestCase,), namespace)


def _run_all(payload, channel, same, run_test, run_canary):
    """Canary (must fail), test, canary (must error), with the integrity check after each."""
    for test_id in payload["ids"]:
        for kind, run in (("fail", run_canary), ("test", run_test), ("error", run_canary)):
            status = run(test_id) if kind == "test" else run(kind)
            if kind == "test":
                channel.records.append({"id": test_id, "status": status})
            else:
                channel.records.append({"canary": kind, "name": payload["canary"][kind], "status": status})
            if not same():
                channel.alarm("unittest or the runner was modified during " + test_id)
                return


# --------------------------------------------------------------------------- harness 1: unittest's machinery
def child_main(result_fd):
    import traceback

    payload, channel, same, unittest = _child_setup(result_fd)
    # everything the verdict needs is bound to locals before the code under test is imported
    classify, name_of, result_class, suite_class = status_of, unittest_name, unittest.TestResult, unittest.TestSuite
    loader = unittest.TestLoader()
    canary = _canary_class(unittest, payload["canary"])
    write_err = sys.stderr.write

    def run(tests, show=True):
        result = result_class()
        try:
            tests().run(result)
            status = classify(result)
        except BaseException:  # noqa: BLE001 - an import error or a SystemExit in a test is a failed test
            traceback.print_exc()
            status = "ERROR"
        for _, text in (result.errors + result.failures) if show else ():
            write_err(text)
        return status

    def run_test(test_id):
        return run(lambda: loader.loadTestsFromName(name_of(test_id)))

    def run_canary(kind):
        return run(lambda: suite_class([canary(payload["canary"][kind])]), show=False)

    _run_all(payload, channel, same, run_test, run_canary)
    sys.stdout.flush()
    sys.stderr.flush()
    channel.finish()
    os._exit(0)


# --------------------------------------------------------------------------- harness 2: direct calls
def _import(name, import_module):
    """The longest importable prefix of a dotted name, and the attribute names after it."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            return import_module(module_name), parts[cut:]
        except ModuleNotFoundError as error:  # only a missing module named by this prefix: try a shorter one
            missing = error.name or ""
            if module_name != missing and not module_name.startswith(missing + "."):
                raise
    raise ModuleNotFoundError("no module in " + name)


def _test_cases(test_id, unittest, import_module):
    """``(module, [(class, method name or None)])`` for an id, found as unittest's loader finds them."""
    if "::" in test_id or test_id.endswith(".py"):
        path, _, rest = test_id.partition("::")
        module, rest = import_module(unittest_name(path)), [part for part in rest.split("::") if part]
    else:
        module, rest = _import(test_id, import_module)
    if not rest:
        classes = [value for _, value in sorted(vars(module).items())
                   if isinstance(value, type) and issubclass(value, unittest.TestCase)]
        return module, [(cls, None) for cls in classes]
    owner = getattr(module, rest[0])
    return module, [(owner, rest[1] if len(rest) > 1 else None)]


def _method_names(cls):
    return sorted(name for name in dir(cls) if name.startswith("test") and callable(getattr(cls, name, None)))


def _call_phases(test, method_name, skip_error):
    """setUp, the test method, tearDown and cleanups, as ``TestCase.run`` orders them, each in its own
    ``try``: a list of ``(phase, outcome)`` with outcome ``"fail"``, ``"error"`` or ``"skip"``."""
    outcomes = []
    failure = getattr(test, "failureException", AssertionError)

    def attempt(phase, function, *args, **kwargs):
        try:
            function(*args, **kwargs)
            return True
        except skip_error:
            outcomes.append((phase, "skip"))
        except BaseException as error:  # noqa: BLE001 - every exception is a verdict
            outcomes.append((phase, "fail" if isinstance(error, failure) else "error"))
        return False

    start = getattr(test, "_setupAsyncioRunner", None) or getattr(test, "_setupAsyncioLoop", None)
    stop = getattr(test, "_tearDownAsyncioRunner", None) or getattr(test, "_tearDownAsyncioLoop", None)
    if start is not None and not attempt("setUp", start):
        return outcomes
    try:
        method = getattr(test, method_name)
        if attempt("setUp", getattr(test, "_callSetUp", test.setUp)):
            call = getattr(test, "_callTestMethod", None)
            if call is not None:
                attempt("test", call, method)
            else:
                attempt("test", method)
            attempt("tearDown", getattr(test, "_callTearDown", test.tearDown))
        cleanups = getattr(test, "_cleanups", [])
        while cleanups:
            function, args, kwargs = cleanups.pop()
            caller = getattr(test, "_callCleanup", None)
            if caller is not None:
                attempt("cleanup", caller, function, *args, **kwargs)
            else:
                attempt("cleanup", function, *args, **kwargs)
    finally:
        if stop is not None:
            attempt("tearDown", stop)
    return outcomes


def _direct_status(cls, method_name, skip_error):
    method = getattr(cls, method_name, None)
    if method is None:
        return "ERROR"
    if getattr(cls, "__unittest_skip__", False) or getattr(method, "__unittest_skip__", False):
        return "SKIPPED"
    expecting = getattr(method, "__unittest_expecting_failure__", False) or getattr(
        cls, "__unittest_expecting_failure__", False)
    try:
        test = cls(method_name)
    except BaseException:  # noqa: BLE001
        return "ERROR"
    outcomes = _call_phases(test, method_name, skip_error)
    # an expected failure is any exception of the test method itself (unittest's rule)
    kinds = ["xfail" if expecting and phase == "test" and kind != "skip" else kind for phase, kind in outcomes]
    for kind, status in (("error", "ERROR"), ("fail", "FAILED"), ("skip", "SKIPPED"), ("xfail", "XFAIL")):
        if kind in kinds:
            return status
    return "FAILED" if expecting else "PASSED"  # an unexpected success fails


def _run_class(cls, method_name, skip_error):
    names = [method_name] if method_name else _method_names(cls)
    if getattr(cls, "__unittest_skip__", False):
        return ["SKIPPED"] * len(names)
    try:
        cls.setUpClass()
    except skip_error:
        return ["SKIPPED"] * len(names)
    except BaseException:  # noqa: BLE001
        return ["ERROR"]
    statuses = [_direct_status(cls, name, skip_error) for name in names]
    try:
        cls.tearDownClass()
        if hasattr(cls, "doClassCleanups"):
            cls.doClassCleanups()
            if getattr(cls, "tearDown_exceptions", None):
                statuses.append("ERROR")
    except BaseException:  # noqa: BLE001
        statuses.append("ERROR")
    return statuses


def check_main(result_fd):
    """Harness 2: the same tests, called directly; unittest's result and outcome classes play no part."""
    import importlib

    payload, channel, same, unittest = _child_setup(result_fd)
    skip_error, cases, run_class, combine = unittest.SkipTest, _test_cases, _run_class, worst
    import_module = importlib.import_module
    canary = _canary_class(unittest, payload["canary"])

    def run_test(test_id):
        try:
            module, found = cases(test_id, unittest, import_module)
        except BaseException:  # noqa: BLE001 - the test could not be found or imported
            return "ERROR"
        set_up, tear_down = getattr(module, "setUpModule", None), getattr(module, "tearDownModule", None)
        try:
            if set_up is not None:
                set_up()
        except skip_error:
            return "SKIPPED"
        except BaseException:  # noqa: BLE001
            return "ERROR"
        statuses = []
        for cls, method_name in found:
            statuses += run_class(cls, method_name, skip_error)
        try:
            if tear_down is not None:
                tear_down()
        except BaseException:  # noqa: BLE001
            statuses.append("ERROR")
        return combine(statuses)

    def run_canary(kind):
        return combine(run_class(canary, payload["canary"][kind], skip_error))

    _run_all(payload, channel, same, run_test, run_canary)
    sys.stdout.flush()
    sys.stderr.flush()
    channel.finish()
    os._exit(0)


# --------------------------------------------------------------------------- the parent
def _no_dump():
    """prctl(PR_SET_DUMPABLE, 0): processes of the same user can no longer ptrace us or read our memory."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class Report:
    """What one child process reported: test statuses, canary statuses, alarms, and whether it ended well."""

    def __init__(self, code, frames, test_ids):
        self.statuses, self.canaries, self.alarms, self.extra = {}, [], [], []
        ended = None
        for raw in frames.decode("utf-8", "replace").splitlines():
            try:
                frame = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(frame, dict):
                continue
            if "end" in frame:
                ended = frame["end"]
            elif "tamper" in frame:
                self.alarms.append(str(frame["tamper"])[:300])
            elif frame.get("canary") in CANARY_EXPECTED:
                self.canaries.append(frame)
            elif frame.get("id") in test_ids and frame.get("status") in STATUSES:
                self.statuses[frame["id"]] = frame["status"]
                self.extra.append(frame)
        self.code = code
        self.ended = ended is not None
        self.complete = self.ended and all(t in self.statuses for t in test_ids)

    def canary_problems(self, names, expected_each):
        """Why the canaries do not vouch for this run ('' when they do): each canary, under the name
        the parent gave it, must be reported as many times as it had to run, with its status."""
        counts = {kind: 0 for kind in CANARY_EXPECTED}
        for frame in self.canaries:
            if frame.get("name") != names[frame["canary"]]:
                return "a canary test was reported under a name it was not given"
            if frame.get("status") != CANARY_EXPECTED[frame["canary"]]:
                return "a canary test that must come back {} came back {}".format(
                    CANARY_EXPECTED[frame["canary"]], frame.get("status"))
            counts[frame["canary"]] += 1
        if any(count < expected_each for count in counts.values()):
            return "canary tests are missing from the report"
        return ""


def spawn(command, payload, emit, env=None):
    """Run a child with ``payload`` on its stdin and a private result pipe; return (exit code, frames)."""
    read_fd, write_fd = os.pipe()
    process = subprocess.Popen(command + [str(write_fd)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, pass_fds=(write_fd,), close_fds=True, env=env)
    os.close(write_fd)
    frames = []
    reader = threading.Thread(target=lambda: frames.append(_read_all(read_fd)), daemon=True)
    reader.start()
    try:
        process.stdin.write((json.dumps(payload) + "\n").encode())
        process.stdin.close()
    except OSError:
        pass
    output = process.stdout.read()
    code = process.wait()
    reader.join()
    for line in output.decode("utf-8", "replace").splitlines():
        emit("| " + line)
    return code, frames[0] if frames else b""


def _read_all(fd):
    with os.fdopen(fd, "rb") as pipe:
        return pipe.read()


def _child_command(mode):
    return [sys.executable, "-B", "-s", "--check-hash-based-pycs", "always", os.path.abspath(__file__), mode]


def run_file(test_ids, emit):
    """Both harnesses on one file's tests: ``(statuses, why the grading is void or '')``."""
    path = test_ids[0].partition("::")[0]
    if path.endswith(".py") and not os.path.isfile(path):  # nothing to import: no process needed
        emit(f"| turngym: {path} does not exist")
        return dict.fromkeys(test_ids, "ERROR"), ""
    names = canary_names()
    first = Report(*spawn(_child_command(CHILD), {"ids": test_ids, "canary": names}, emit), test_ids)
    if first.alarms:
        return {}, "harness 1: " + first.alarms[0]
    if not (first.complete and first.code == 0):
        emit(f"| turngym: the test process ended abnormally (exit {first.code}); its tests count as errors")
        return dict.fromkeys(test_ids, "ERROR"), ""
    statuses = {t: first.statuses[t] for t in test_ids}
    passed = [t for t in test_ids if statuses[t] in PASSING]
    if not passed:
        return statuses, ""
    problem = first.canary_problems(names, len(test_ids))
    if problem:
        return {}, "harness 1: " + problem
    names = canary_names()
    second = Report(*spawn(_child_command(CHECK), {"ids": test_ids, "canary": names}, emit), test_ids)
    if second.alarms:
        return {}, "harness 2: " + second.alarms[0]
    if not (second.complete and second.code == 0):
        return {}, f"the independent harness ended abnormally (exit {second.code})"
    problem = second.canary_problems(names, len(test_ids))
    if problem:
        return {}, "harness 2: " + problem
    for test_id in passed:
        if second.statuses[test_id] not in PASSING:
            return {}, (f"{test_id} {statuses[test_id]} under unittest but {second.statuses[test_id]} "
                        "when called directly")
    return statuses, ""


def run_unittest(test_ids, emit, verdict):
    groups = {}
    for test_id in test_ids:
        groups.setdefault(file_of(test_id), []).append(test_id)
    for ids in groups.values():
        statuses, void = run_file(ids, emit)
        if void:
            return void
        for test_id, status in statuses.items():
            verdict(status, test_id)
    return ""


# --------------------------------------------------------------------------- pytest
# Where pytest looks for its configuration in the repository root, and the section that makes a file count.
PYTEST_CONFIGS = (("pytest.ini", "", ".ini"), (".pytest.ini", "", ".ini"),
                  ("pyproject.toml", "[tool.pytest.ini_options]", ".toml"), ("tox.ini", "[pytest]", ".ini"),
                  ("setup.cfg", "[tool:pytest]", ".cfg"))
# The pytest child: the current directory off sys.path (as under the ``pytest`` script), the plugin
# loaded from its path (no module name the repository could shadow).
PYTEST_BOOT = ("import sys; del sys.path[0]; import importlib.util as u; "
               "s = u.spec_from_file_location('turngym_pytest_plugin', sys.argv[1]); m = u.module_from_spec(s); "
               "s.loader.exec_module(m); m.main(int(sys.argv[2]))")


def _pytest_python():
    """This interpreter if it has pytest, else the one named by the ``pytest`` script on PATH."""
    import importlib.util
    import shutil

    if importlib.util.find_spec("pytest") is not None:
        return sys.executable
    script = shutil.which("pytest")
    if script is None:
        return None
    with open(script, "rb") as handle:
        first = handle.readline().decode("utf-8", "replace")
    words = first[2:].split() if first.startswith("#!") else []
    if words and os.path.basename(words[0]) == "env" and len(words) > 1:
        return shutil.which(words[1])
    return words[0] if words and os.path.isfile(words[0]) else None


def _git(*args):
    try:
        done = subprocess.run(["git", "-c", "safe.directory=*", "-c", "core.fsmonitor=false"] + list(args),
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def base_pytest_config():
    """``(text, suffix)`` of the pytest configuration pytest would read at the repository root, as the
    base commit has it (git's HEAD: in the grading sandbox the agent's changes are not committed), or
    None. The working tree's pyproject.toml, setup.cfg, tox.ini and pytest.ini never configure the run."""
    listed = _git("ls-tree", "--name-only", "HEAD", "--", *[name for name, _, _ in PYTEST_CONFIGS])
    present = set((listed or b"").decode("utf-8", "replace").split())
    for name, section, suffix in PYTEST_CONFIGS:
        if name not in present:
            continue
        blob = _git("cat-file", "blob", "HEAD:" + name)
        text = (blob or b"").decode("utf-8", "replace")
        if blob is not None and (not section or section in text):
            return text, suffix
    return None


def _write_private(directory, suffix, text):
    """A new file with a random name (no planted file or link is ever opened): its path."""
    path = os.path.join(directory, random_name(".turngym-pytest-") + suffix)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def pytest_arguments(cwd, config_path, plugins):
    """pytest's options: turngym's configuration file, rootdir, no addopts, no cache, named plugins only."""
    args = ["-c", config_path or os.devnull, "--rootdir", cwd, "-o", "addopts=", "-p", "no:cacheprovider"]
    for plugin in plugins:
        args += ["-p", plugin]
    return args


def run_pytest(test_ids, plugins, emit, verdict):
    """All ids in one pytest process with turngym's plugin; the grading is void ('' if not) when a
    canary of a passing test's file is wrong or missing, or pytest reported a pass over an exception."""
    python = _pytest_python()
    if python is None:
        emit("| turngym: pytest is not installed for this python3 nor on PATH")
        for test_id in test_ids:
            verdict("ERROR", test_id)
        return ""
    cwd = os.getcwd()
    config = base_pytest_config()
    config_path = _write_private(cwd, config[1], config[0]) if config else None
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    names = canary_names()
    payload = {"ids": test_ids, "canary": names, "args": pytest_arguments(cwd, config_path, plugins)}
    command = [python, "-B", "-s", "--check-hash-based-pycs", "always", "-c", PYTEST_BOOT, PLUGIN]
    try:
        report = Report(*spawn(command, payload, emit, env=env), test_ids)
    finally:
        if config_path:
            os.unlink(config_path)
    if report.alarms:
        return report.alarms[0]
    ended = report.ended and report.code in (0, 1, 2, 5)  # tests ran, failed, were interrupted or none ran
    statuses = {t: (report.statuses.get(t, "ERROR") if ended else "ERROR") for t in test_ids}
    if not ended:
        emit(f"| turngym: pytest ended abnormally (exit {report.code}); its tests count as errors")
    void = pytest_forgery(statuses, report, names)
    if void:
        return void
    for test_id in test_ids:
        verdict(statuses[test_id], test_id)
    return ""


def pytest_forgery(statuses, report, names):
    """Why pytest's passes cannot be believed ('' when they can): per file, the canaries; per test,
    pytest's report of a pass against the exceptions its phases raised."""
    canaries = {}
    for frame in report.canaries:
        canaries.setdefault(frame.get("file"), []).append(frame)
    raw = {frame["id"]: frame for frame in report.extra}
    for test_id, status in statuses.items():
        if status not in PASSING:
            continue
        seen = canaries.get(test_id.partition("::")[0], [])
        kinds = {frame["canary"] for frame in seen}
        wrong = [f for f in seen if f.get("status") not in PYTEST_CANARY[f["canary"]]
                 or f.get("name") != names[f["canary"]]]
        if wrong or kinds != set(CANARY_EXPECTED):
            return "the canary tests of {} came back wrong or not at all".format(test_id.partition("::")[0])
        phases = raw.get(test_id, {}).get("raw") or {}
        raised = [kind for kind in phases.values() if kind]
        if status == "PASSED" and raised:
            return "pytest reported {} PASSED although it raised ({})".format(test_id, ", ".join(raised))
        if status == "XFAIL" and not (raw.get(test_id, {}).get("xfail_marked") or "xfail" in raised):
            return f"pytest reported {test_id} XFAIL although it is not marked xfail"
    return ""


def main(argv):
    nonce = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.readline().strip()
    sys.stdin = open(os.devnull)  # noqa: SIM115
    _no_dump()
    prefix = (nonce + " ") if nonce else ""
    del nonce
    out = sys.stdout

    def emit(line):
        out.write(line + "\n")
        out.flush()

    def verdict(status, test_id):
        emit("\n" + prefix + status + " " + test_id)

    if argv[:1] == [PYTEST]:
        argv, plugins = argv[1:], []
        while argv[:1] == ["-p"] and len(argv) > 1:
            plugins.append(argv[1])
            argv = argv[2:]
        test_ids = list(dict.fromkeys(argv))
        void = run_pytest(test_ids, plugins, emit, verdict)
    else:
        test_ids = list(dict.fromkeys(argv))
        void = run_unittest(test_ids, emit, verdict)
    if void:
        emit("| turngym: the grading is void, the code under test tampered with it: " + void)
        for test_id in test_ids:
            verdict(TAMPERED, test_id)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == CHILD:
        child_main(int(sys.argv[2]))
    if len(sys.argv) == 3 and sys.argv[1] == CHECK:
        check_main(int(sys.argv[2]))
    sys.exit(main(sys.argv[1:]))
