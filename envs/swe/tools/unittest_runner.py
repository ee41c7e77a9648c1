"""Run the tests that grade an SWE task and print one result line per test, tagged with a nonce.

Runs inside the sandbox with the sandbox's own Python (the host's /usr/bin/python3 under bwrap,
the image's python3 under docker), so it uses the standard library only (Python 3.8 and newer).

    python3 /opt/turngym/unittest_runner.py tests/test_a.py::TestA::test_x [more ids...]
    python3 /opt/turngym/unittest_runner.py --pytest [-p PLUGIN]... tests/test_a.py::test_x [more ids...]

The **parent** (this process) never imports the code under test. It reads a nonce from the first
line of standard input, makes itself non-dumpable (no ptrace, no ``/proc/<pid>/mem`` for processes of
the same user), runs the tests in child processes and prints every verdict as ``<nonce> STATUS <id>``;
the children's output reaches the log only indented with ``| ``. Printing a result line from a test
counts for nothing. What the children report travels on a private pipe, never on stdout.

Code under test runs in the same process as the test's assertions, so a child's report is evidence,
not proof. These defences make a forged verdict fail (docs/worlds/swe.md, "Grading and the reward's
threat model", says what remains):

* **canaries in the test files** (``integrity.plan_canaries``): before any child starts, the parent
  writes into each graded file, inside the graded tests' own classes, a test that must fail and one
  that must error, named from the words of the file's test names (``async`` where its tests are).
  Every graded test runs between its class's two canaries, through the same code path; a pass counts
  only if they came back FAILED / ERROR. A wrapper that swallows the tests' failures (by class, by name,
  by "is it in the file") swallows theirs too; forged records leave them missing or in the wrong place;
* **the test file's own code** (``integrity.Guard``): the child compiles the restored file itself
  (its hash checked against the parent's), imports it under its name itself, and before and after every
  test checks that ``sys.modules`` holds that module, that the graded classes and methods are that
  compile's code (their MRO and metaclass too, up to unittest's ``TestCase``), and that no hook of the
  interpreter changed (``builtins``, trace and profile functions, import hooks, ``gc.callbacks``);
* **integrity checks** (unittest) after every test: each module of unittest, each of its classes and
  this runner's globals are compared *by identity*, over tuples snapshotted before any repository
  import, by a function whose every helper was bound then, with the garbage collector off. Audit
  hooks, which no Python code can remove, report at once any write to the code of unittest's or the
  runner's functions, and any trace or profile function set by code other than the test file's;
* **a second, independent harness** (unittest): another process runs the same tests without
  unittest's result machinery (it calls setUp, the test method and tearDown itself, with its own
  ``try``/``except``). Every test the first harness passes must pass there too;
* **two observations** (pytest): turngym's plugin (``pytest_plugin.py``, loaded by path, not by a
  name the repository could shadow) records the exception each test phase raised, seen from inside
  pytest's hook calls, next to pytest's own report; a report of a pass over a raised exception is a
  forgery; pytest's and pluggy's modules and classes are checked by identity after every test;
* **expected failures from the source**: an XFAIL counts only for a test whose source marks it
  (``expectedFailure``, ``xfail``), read by the parent.

Any of these failing makes every test ``TAMPERED``: the grader pays 0 and says so. The test files are
put back as they were when the runner ends.

Ids: ``path.py::Class::method``, ``path.py::Class``, ``path.py`` or a dotted unittest name whose
module is a file under the current directory. Files run in the order of their first id, each file's
verdicts printed as soon as both harnesses agree. A test file inside a repository directory named
like ``test*`` (``test/``, ``testing/``) is imported from the repository even where the standard
library has a module of that name (Debian's ``test``).
"""

import hashlib
import json
import os
import random
import subprocess
import sys
import threading

CHILD = "--child"  # harness 1: unittest's own machinery
CHECK = "--check"  # harness 2: direct calls, no result machinery
PYTEST = "--pytest"
PASSING = ("PASSED", "XFAIL")
SUPPORT_FLAG = "--support"  # --support FILE: a module of the package the test classes take code from (pyparsing's
# testing.py: its assertion mixins), which the grading restores like a test file, so its code counts as the tests'
SUPPORT = []
LOOSE = "--loose-equality"  # equality as the objects define it (strict equality is the default: integrity.py)
STRICT = [True]
TAMPERED = "TAMPERED"
HERE = os.path.dirname(os.path.abspath(__file__))
PLUGIN = os.path.join(HERE, "pytest_plugin.py")
INTEGRITY = os.path.join(HERE, "integrity.py")
JUDGE = os.path.join(HERE, "judge.py")
# The package's reference tree (TURNGYM_PRISTINE, extracted by the grading script from the base commit, with the
# task's gold patch applied where the grading has one): its .py sources, read into memory by main() before any code
# under test runs, for the judge of strict equality's disputes. With TURNGYM_PRISTINE_DISCARD the tree holds the
# answer, and main() deletes it from disk before any code under test runs.
PRISTINE = [None]
GRADED = []  # the test files graded now, relative to the tree: the only test modules the judge may import
PRISTINE_LIMIT = 64 << 20  # bytes of source: a larger tree is not read (disputes then fail as before)
JUDGE_TIMEOUT = 120
# The gold patch's reference states (sent after the nonce on standard input, with the gold reference tree): the
# sha256 of each frozen pair that the gold patch's own grading handed the judge and whose untouched comparison held
# on a pair rebuilt in full (judge.decide's ``in_full``), whatever the probes said. A package's honest ``==`` can
# be coarser than its data (boltons' OrderedMultiDict against a mapping ignores the values; semver's Version
# ignores build metadata), so it also equals the judge's probes, as a planted wildcard does, and the probes are
# drawn anew in each grading, so a pair they let through once may be refused the next time (packaging 24.0's
# ``<=1!3.0.0.rc2``); a pair whose frozen state is exactly one of the gold patch's holds. STATES_SEEN: such pairs'
# digests in this grading, printed at its end for the validation to record; PROBES_REFUSED: those of them the
# probes refused here (the validation grades again when a new state would change one of its verdicts).
REFERENCE_STATES = [frozenset()]
STATES_SEEN = set()
PROBES_REFUSED = set()
STATE_DIGITS = frozenset("0123456789abcdef")


def id_names(rest):
    """The names after the file in a test id (``A::test_x[p]`` -> ``("A", "test_x[p]")``). A pytest id's
    parameters may hold ``::`` (python-dateutil's ``test_invalid_GNU_tzstr[...\\xf1::]``): as pytest reads an id,
    only the part before the first ``[`` is split, and the parameters stay on the last name."""
    head, bracket, params = rest.partition("[")
    names = [part for part in head.split("::") if part]
    if bracket and names:
        names[-1] += bracket + params
    return tuple(names)


def unittest_name(test_id):
    """``tests/test_a.py::TestA::test_x`` -> ``tests.test_a.TestA.test_x``."""
    path, _, rest = test_id.partition("::")
    if path.endswith(".py"):
        path = path[: -len(".py")].replace("/", ".").replace(os.sep, ".")
    return ".".join([path, *id_names(rest)])


def resolve(test_id, cwd):
    """``(file, module name, names after the module)`` of an id, or None when no file under ``cwd`` holds it."""
    if "::" in test_id or test_id.endswith(".py"):
        path, _, rest = test_id.partition("::")
        return path, unittest_name(path), id_names(rest)
    parts = test_id.split(".")
    for cut in range(len(parts), 0, -1):
        path = "/".join(parts[:cut]) + ".py"
        if os.path.isfile(os.path.join(cwd, path)):
            return path, ".".join(parts[:cut]), tuple(parts[cut:])
    return None


def random_name(prefix):
    return prefix + os.urandom(6).hex()


def load_integrity(code=None):
    """``integrity.py`` from this directory (or its code object), under a name no repository module can take."""
    import types

    module = types.ModuleType(random_name("turngym_integrity_"))
    module.__file__ = INTEGRITY
    if code is None:
        with open(INTEGRITY, "rb") as handle:
            code = compile(handle.read(), INTEGRITY, "exec", dont_inherit=True)
    exec(code, vars(module))  # noqa: S102 - turngym's own integrity.py, compiled by this runner
    return module


# --------------------------------------------------------------------------- the test files (parent)
def _read_source(path):
    """``(text, encoding, raw bytes)`` of a Python file, decoded as Python would."""
    import io
    import tokenize

    with open(path, "rb") as handle:
        raw = handle.read()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    return raw.decode(encoding), encoding, raw


def _write(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


class TestFiles:
    """The graded files with their canaries written in, put back as they were by :meth:`restore`."""

    def __init__(self, integrity, unittest_style):
        self.integrity = integrity
        self.unittest_style = unittest_style
        self.rng = random.SystemRandom()
        self.originals = {}
        self.sources = {}  # path -> the original text (for the expected-failure marks)
        self.plans = {}  # path -> {an id's names: (fail canary's names, error canary's names)}

    def add(self, path, targets):
        """Write canaries for the ids' names ``targets`` into ``path``; False if the file cannot take them."""
        try:
            text, encoding, raw = _read_source(path)
            new_text, plan = self.integrity.plan_canaries(text, targets, self.unittest_style, self.rng)
            _write(path, new_text.encode(encoding))
        except Exception:  # noqa: BLE001 - a file that cannot take canaries: its passes cannot be believed
            return False
        self.originals[path], self.sources[path], self.plans[path] = raw, text, plan
        return True

    def restore(self):
        for path, raw in self.originals.items():
            try:
                _write(path, raw)
            except OSError:
                pass


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


def _prefer_repository_test_package(paths, cwd):
    """Import a test directory named ``test*`` from the repository, before anything imports the
    standard library's module of that name (Debian ships ``test``). The test directories are restored
    to their base versions before grading: they are the task's, not the agent's."""
    import importlib.machinery
    import importlib.util

    for path in paths:
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


class _Graded:
    """What a child knows of its test file, all of it made before the repository is importable."""

    def __init__(self, payload, cwd, channel, integrity):
        import importlib
        import importlib.util
        import inspect
        import types
        import unittest

        self.path = os.path.abspath(payload["path"])
        self.name = payload["module"]
        with open(self.path, "rb") as handle:
            source = handle.read()
        if source != payload["source"].encode("latin-1"):  # the bytes the parent hashed before any test ran
            raise RuntimeError(f"{payload['path']} is not the file the runner restored")
        if b"mock" in source:
            import unittest.mock  # in the snapshot, before the repository can touch it
        import abc

        def unittest_modules():
            return [m for n, m in sorted(sys.modules.items()) if n == "unittest" or n.startswith("unittest.")]

        # a name unittest makes on first use (IsolatedAsyncioTestCase) is bound before the snapshot
        integrity.resolve_lazy_names(unittest_modules())
        framework = unittest_modules()
        self.framework = framework + [abc]
        core = frozenset(["builtins", "sys", "abc", "types", "functools", "importlib", "importlib.util", "gc",
                          "importlib.machinery", "threading"] + [m.__name__ for m in framework])
        self.guard = integrity.Guard(cwd, payload["trusted"], self.framework, core, test_case=unittest.TestCase,
                                     require_test_case=True, alarm=channel.alarm)
        self.strict_parts = None
        if payload.get("strict", True):  # before the snapshot: the strict assertions are the framework's now
            dispute = integrity.make_dispute(channel.event) if payload.get("pristine") else None
            integrity.strict_assertions(unittest.TestCase, integrity.make_strict_equality(
                cwd, payload["trusted"], self.guard.code_ok, self.guard.function_ok), self.guard, dispute)
            self.strict_parts = integrity.strict_functions(*[getattr(unittest.TestCase, name) for name in (
                "assertEqual", "assertIn", "assertCountEqual", "assertDictEqual", "assertAlmostEqual",
                "assertNotEqual", "_getAssertEqualityFunc")],
                integrity.LockedMethod.__get__, integrity.LockedMethod.__set__)
        integrity.lock_assertions(unittest.TestCase)
        self.code, self.info = self.guard.compile_graded(self.path, source)
        self.unittest = unittest
        self.import_module = importlib.import_module
        self.spec_from_file_location = importlib.util.spec_from_file_location
        self.module_from_spec = importlib.util.module_from_spec
        self.module_type = types.ModuleType
        self.is_coroutine = inspect.iscoroutinefunction
        self.exec = exec
        # filled in place: the instance is in the snapshot
        self.state = {"module": None, "import error": None, "exclude": frozenset()}
        self.safe = (type, tuple, str, type.__dict__["__mro__"].__get__, type.__dict__["__dict__"].__get__, callable,
                     sorted, unittest.TestCase)

    def load(self):
        """Import the graded module from the runner's own compile; None (and ``import_error``) if it raises."""
        parent, _, leaf = self.name.rpartition(".")
        try:
            parent_module = self.import_module(parent) if parent else None
            spec = self.spec_from_file_location(self.name, self.path)
            module = self.module_from_spec(spec)
            if type(module) is not self.module_type:
                raise ImportError("the module of the test file was not made as a module")
            sys.modules[self.name] = module
            try:
                self.exec(self.code, vars(module))
            except BaseException:
                sys.modules.pop(self.name, None)
                raise
            if parent_module is not None:
                setattr(parent_module, leaf, module)
        except BaseException as error:  # noqa: BLE001 - the test file's import error: its tests error
            self.state["import error"] = error
            return None
        self.guard.adopt(self.name, module, self.info, self.path)
        self.state["module"] = module
        return module

    def _get(self, items, name):
        _type, _, _str = self.safe[:3]
        for key, value in items:
            if _type(key) is _str and key == name:
                return True, value
        return False, None

    def _lookup(self, cls, name):
        """``cls``'s attribute ``name`` from its MRO's dicts, found without running any of its code."""
        mro, cdict = self.safe[3], self.safe[4]
        for klass in mro(cls):
            found, value = self._get(cdict(klass).items(), name)
            if found:
                return value
        raise LookupError(name)

    def _test_names(self, cls):
        names = set()
        mro, cdict, _callable = self.safe[3], self.safe[4], self.safe[5]
        for klass in mro(cls):
            for key, value in cdict(klass).items():
                if type(key) is str and key.startswith("test") and _callable(value) and \
                        key not in self.state["exclude"]:
                    names.add(key)
        if not names:  # unittest's loader: a class without test* methods runs its runTest (pyparsing's)
            try:
                if _callable(self._lookup(cls, "runTest")):
                    names.add("runTest")
            except LookupError:
                pass
        return self.safe[6](names)

    def _is_test_case(self, value):
        return type(value) is not self.module_type and isinstance(value, type) and any(
            c is self.safe[7] for c in self.safe[3](value))

    def targets(self, rest):
        """``[(class, [method names])]`` an id's remaining names select (canaries left out of whole
        classes and modules); LookupError when they select nothing."""
        namespace = tuple(vars(self.state["module"]).items())
        if not rest:
            return [(value, self._test_names(value)) for key, value in sorted(namespace, key=lambda kv: str(kv[0]))
                    if self._is_test_case(value) and key not in self.state["exclude"]]
        found, obj = self._get(namespace, rest[0])
        if not found or not self._is_test_case(obj):
            raise LookupError(rest[0])
        for part in rest[1:-1]:
            obj = self._lookup(obj, part)
            if not self._is_test_case(obj):
                raise LookupError(part)
        if len(rest) == 1:
            return [(obj, self._test_names(obj))]
        self._lookup(obj, rest[-1])
        return [(obj, [rest[-1]])]

    def check(self, rests):
        """Why the tests at ``rests`` are not the test file's own, run by the real framework, or ''."""
        pairs = []
        for rest in rests:
            try:
                targets = self.targets(rest) if self.state["module"] is not None else []
            except LookupError:
                targets = []
            for cls, names in targets:
                pairs.append((cls, None))
                pairs += [(cls, self._lookup(cls, name)) for name in names]
        return self.guard.check(pairs)

    def checked(self, method, rest, verify):
        """``method`` with ``verify(rest)`` run the moment its body returns or raises, before tearDown and the
        cleanups: a change made during a test and put back in its cleanup is seen (it was there when the
        test's verdict was decided)."""
        if self.is_coroutine(method):
            async def run_checked(*args, **kwargs):
                try:
                    return await method(*args, **kwargs)
                finally:
                    verify(rest)
        else:
            def run_checked(*args, **kwargs):
                try:
                    return method(*args, **kwargs)
                finally:
                    verify(rest)
        for name in ("__unittest_expecting_failure__", "__unittest_skip__", "__unittest_skip_why__"):
            found, value = self._get(tuple(getattr(method, "__dict__", {}).items()), name)
            if not found:
                found, value = self._get(tuple(getattr(getattr(method, "__func__", None), "__dict__", {}).items()),
                                         name)
            if found:
                setattr(run_checked, name, value)
        return run_checked


def _child_setup(result_fd):
    """Read the file's payload, fix the path, bind everything the verdict needs, then let the repository in."""
    integrity = load_integrity()
    payload, control = integrity.take_stdin()
    cwd = _prepare_path()
    channel = integrity.Channel(result_fd)
    try:
        graded = _Graded(payload, cwd, channel, integrity)
    except (OSError, RuntimeError) as error:
        channel.alarm(str(error))
        os._exit(0)
    taken = integrity.snapshot(graded.framework, [sys.modules[__name__], integrity, graded, graded.guard, channel,
                                                  control] + ([graded.strict_parts] if graded.strict_parts else []))
    same = integrity.make_checker(taken)
    protected = integrity.protected_ids(taken)
    integrity.install_alarm(protected, channel.alarm)
    graded.guard.install_audit()
    own = integrity.own_codes(sys.modules[__name__], integrity)
    digest = integrity.live_digest(own + list(graded.guard.graded_keep), graded.guard.verified_codes)
    expected = digest()
    channel.event("ready", expected)
    _prefer_repository_test_package([payload["path"]], cwd)
    if graded.load() is not None:
        classes = [v for v in vars(graded.state["module"]).values() if graded._is_test_case(v)]
        integrity.install_alarm(frozenset(id(c) for c in classes), channel.alarm, gc_only=True)
        why = graded.check([()])
        if why:
            channel.alarm("after the test file's import: " + why)
    if digest() != expected:
        channel.alarm("the runner's or the test file's code was rewritten in place during the import")

    def verify(rest):
        if not same():
            channel.alarm(f"unittest or the runner was modified ({same.what()})")
        else:
            why = graded.check([rest])
            if why:
                channel.alarm(why)

    return control, channel, graded, verify, digest


def _run_steps(control, channel, graded, verify, digest, run):
    """Each step the parent sends, with the checks before and after it, and its events as they happen."""
    for rest, exclude in control.steps():
        if channel.alarmed:
            break
        graded.state["exclude"] = exclude
        channel.event("begin")
        verify(rest)
        if not channel.alarmed:
            run(rest, verify)
            verify(rest)
        channel.event("end", digest())
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# --------------------------------------------------------------------------- harness 1: unittest's machinery
OUTCOMES = ("fail", "error", "skip", "xfail", "xpass", "pass")


def _streaming_result_class(unittest, channel, format_exception):
    """A ``TestResult`` that writes each outcome the moment unittest reports it, before tearDown's and the
    cleanups' code runs (CPython 3.11+ reports a failure as it is caught), through a data descriptor: an
    attribute set on the instance cannot shadow its methods."""
    from types import MethodType

    class Locked:
        def __init__(self, function):
            self.function = function

        def __get__(self, obj, owner=None):
            return self.function if obj is None else MethodType(self.function, obj)

        def __set__(self, obj, value):
            channel.alarm("a method of the runner's test result was overridden on the instance")
            raise AttributeError("read-only")

        def __delete__(self, obj):
            self.__set__(obj, None)

    base, event = unittest.TestResult, channel.event

    def outcome(kind, err=None):
        text = "".join(format_exception(*err)) if err is not None else ""
        event("out", kind, text=text[-4000:])

    def start_test(self, test):
        event("start")
        base.startTest(self, test)

    def stop_test(self, test):
        base.stopTest(self, test)
        event("stop")

    def add_error(self, test, err):
        outcome("error", err)
        base.addError(self, test, err)

    def add_failure(self, test, err):
        outcome("fail", err)
        base.addFailure(self, test, err)

    def add_sub_test(self, test, subtest, err):
        if err is not None:
            outcome("fail" if issubclass(err[0], test.failureException) else "error", err)
        base.addSubTest(self, test, subtest, err)

    def add_success(self, test):
        outcome("pass")
        base.addSuccess(self, test)

    def add_skip(self, test, reason):
        outcome("skip")
        base.addSkip(self, test, reason)

    def add_expected_failure(self, test, err):
        outcome("xfail")
        base.addExpectedFailure(self, test, err)

    def add_unexpected_success(self, test):
        outcome("xpass")
        base.addUnexpectedSuccess(self, test)

    methods = {"startTest": start_test, "stopTest": stop_test, "addError": add_error, "addFailure": add_failure,
               "addSubTest": add_sub_test, "addSuccess": add_success, "addSkip": add_skip,
               "addExpectedFailure": add_expected_failure, "addUnexpectedSuccess": add_unexpected_success}
    return type("StreamingResult", (base,), {name: Locked(f) for name, f in methods.items()})


def child_main(result_fd):
    import traceback

    control, channel, graded, verify, digest = _child_setup(result_fd)
    # everything the verdict needs is bound to locals before the code under test runs its tests
    result_class = _streaming_result_class(graded.unittest, channel, traceback.format_exception)
    suite_class = graded.unittest.TestSuite

    def run(rest, verify):
        if graded.state["module"] is None:
            channel.event("out", "error", text=f"the test file did not import: {graded.state['import error']!r}")
            return
        try:
            tests = []
            for cls, names in graded.targets(rest):
                for name in names:
                    test = cls(name)
                    method = getattr(test, name)
                    object.__setattr__(test, name, graded.checked(method, rest, verify))
                    tests.append(test)
        except LookupError:
            channel.event("out", "error", text=f"no test {'::'.join(rest)}")
            return
        except BaseException as error:  # noqa: BLE001 - a test that cannot be made errors
            channel.event("out", "error", text=repr(error))
            return
        try:
            suite_class(tests).run(result_class())
        except BaseException:  # noqa: BLE001 - a SystemExit escaping the suite: an error of this step
            channel.event("out", "error", text=traceback.format_exc()[-4000:])

    _run_steps(control, channel, graded, verify, digest, run)


# --------------------------------------------------------------------------- harness 2: direct calls
def _call_phases(test, method_name, skip_error, expecting, verify, rest, event):
    """setUp, the test method, tearDown and cleanups, as ``TestCase.run`` orders them, each in its own
    ``try``, each outcome written the moment it is caught; True when no phase wrote one."""
    failure = getattr(test, "failureException", AssertionError)
    clean = [True]

    def attempt(phase, function, *args, **kwargs):
        try:
            function(*args, **kwargs)
            return True
        except skip_error:
            event("out", "skip")
        except BaseException as error:  # noqa: BLE001 - every exception is a verdict
            kind = "fail" if isinstance(error, failure) else "error"
            event("out", "xfail" if expecting and phase == "test" else kind, text=repr(error)[:2000])
        clean[0] = False
        return False

    start = getattr(test, "_setupAsyncioRunner", None) or getattr(test, "_setupAsyncioLoop", None)
    stop = getattr(test, "_tearDownAsyncioRunner", None) or getattr(test, "_tearDownAsyncioLoop", None)
    if start is not None and not attempt("setUp", start):
        return False
    try:
        method = getattr(test, method_name)
        if attempt("setUp", getattr(test, "_callSetUp", test.setUp)):
            call = getattr(test, "_callTestMethod", None)
            if call is not None:
                attempt("test", call, method)
            else:
                attempt("test", method)
            verify(rest)  # the moment the test's outcome is decided, before tearDown and the cleanups
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
    return clean[0]


def _direct_test(cls, method_name, skip_error, verify, rest, event):
    event("start")
    try:
        method = getattr(cls, method_name, None)
        if method is None:
            event("out", "error", text=f"no test {method_name}")
            return
        if getattr(cls, "__unittest_skip__", False) or getattr(method, "__unittest_skip__", False):
            event("out", "skip")
            return
        expecting = getattr(method, "__unittest_expecting_failure__", False) or getattr(
            cls, "__unittest_expecting_failure__", False)
        try:
            test = cls(method_name)
        except BaseException as error:  # noqa: BLE001
            event("out", "error", text=repr(error)[:2000])
            return
        if _call_phases(test, method_name, skip_error, expecting, verify, rest, event):
            event("out", "xpass" if expecting else "pass")  # an unexpected success fails
    finally:
        event("stop")


def _run_class(cls, names, skip_error, verify, rest, event):
    if getattr(cls, "__unittest_skip__", False):
        for _ in names:
            event("start")
            event("out", "skip")
            event("stop")
        return
    try:
        cls.setUpClass()
    except skip_error:
        event("out", "skip")
        return
    except BaseException as error:  # noqa: BLE001
        event("out", "error", text=repr(error)[:2000])
        return
    for name in names:
        _direct_test(cls, name, skip_error, verify, rest, event)
    try:
        cls.tearDownClass()
        if hasattr(cls, "doClassCleanups"):
            cls.doClassCleanups()
            if getattr(cls, "tearDown_exceptions", None):
                event("out", "error")
    except BaseException as error:  # noqa: BLE001
        event("out", "error", text=repr(error)[:2000])


def check_main(result_fd):
    """Harness 2: the same tests, called directly; unittest's result and outcome classes play no part."""
    control, channel, graded, verify, digest = _child_setup(result_fd)
    skip_error, run_class, event = graded.unittest.SkipTest, _run_class, channel.event

    def run(rest, verify):
        module = graded.state["module"]
        if module is None:
            event("out", "error")
            return
        try:
            targets = graded.targets(rest)
        except LookupError:
            event("out", "error")
            return
        namespace = tuple(vars(module).items())
        set_up, tear_down = graded._get(namespace, "setUpModule")[1], graded._get(namespace, "tearDownModule")[1]
        try:
            if set_up is not None:
                set_up()
        except skip_error:
            event("out", "skip")
            return
        except BaseException:  # noqa: BLE001
            event("out", "error")
            return
        for cls, names in targets:
            run_class(cls, names, skip_error, verify, rest, event)
        try:
            if tear_down is not None:
                tear_down()
        except BaseException:  # noqa: BLE001
            event("out", "error")

    _run_steps(control, channel, graded, verify, digest, run)


# --------------------------------------------------------------------------- the parent
def _no_dump():
    """prctl(PR_SET_DUMPABLE, 0): processes of the same user can no longer ptrace us or read our memory. Whether our
    memory is hidden from the code under test: the flag holds (PR_GET_DUMPABLE reads 0), and we are not root and
    hold no capability, which our children would have too (CAP_SYS_PTRACE reads a non-dumpable process)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)
        undumpable = libc.prctl(3, 0, 0, 0, 0) == 0
        with open("/proc/self/status") as status:
            caps = [line.split()[1] for line in status if line.startswith(("CapEff:", "CapPrm:", "CapAmb:"))]
        return undumpable and os.geteuid() != 0 and len(caps) == 3 and all(int(c, 16) == 0 for c in caps)
    except (OSError, AttributeError, ValueError, IndexError):
        return False


def _subreaper():
    """prctl(PR_SET_CHILD_SUBREAPER, 1): a process the code under test leaves behind (a daemon, a double fork)
    becomes this process's child when its parent ends, so :func:`reap_descendants` can find and end it."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _children(pid):
    """The pids whose parent is ``pid``, read from /proc (a command name may hold spaces and parentheses)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[1] == str(pid).encode():
            found.append(int(entry))
    return found


def reap_descendants(rounds=200):
    """Kill and reap every process left under this one once a test child has ended; True when none is left. The
    judge runs only after this: a thread or a process of the code under test that is still alive can open the
    judge's standard output through /proc and write its verdict (red team, round 11)."""
    import signal
    import time

    for _ in range(rounds):
        children = _children(os.getpid())
        if not children:
            return True
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        time.sleep(0.005)
    return not _children(os.getpid())


class Child:
    """A test process driven a step at a time: its payload first, then each step once the last one ended.
    Its events are read as they come on a private pipe; its own output is kept for the log."""

    def __init__(self, command, payload, env=None):
        read_fd, write_fd = os.pipe()
        self.process = subprocess.Popen(command + [str(write_fd)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, pass_fds=(write_fd,), close_fds=True, env=env)
        os.close(write_fd)
        self.events = os.fdopen(read_fd, "rb")
        self.output = []
        self.reader = threading.Thread(target=lambda: self.output.append(self.process.stdout.read()), daemon=True)
        self.reader.start()
        self.alarms, self.outlived = [], False
        self.send(json.dumps(payload))

    def send(self, line):
        try:
            self.process.stdin.write((line + "\n").encode())
            self.process.stdin.flush()
        except OSError:
            pass

    def next_event(self):
        """The next event as a list of words (hex text decoded), None at the end of the stream; alarms are
        kept aside."""
        while True:
            raw = self.events.readline()
            if not raw:
                return None
            words = raw.decode("utf-8", "replace").rstrip("\n").split(" ")
            if words[0] == "tamper":
                self.alarms.append(_unhex(words[1] if len(words) > 1 else "")[:300])
                continue
            if words[0] == "out" and len(words) > 2:
                words[2] = _unhex(words[2])
            return words

    def close(self, emit):
        try:
            self.process.stdin.close()
        except OSError:
            pass
        if self.alarms:
            self.process.kill()
        code = self.process.wait()
        self.outlived = not reap_descendants()  # nothing of the code under test runs past its child
        self.reader.join()
        self.events.close()
        for line in (self.output[0] if self.output else b"").decode("utf-8", "replace").splitlines():
            emit("| " + line)
        return code


def _unhex(text):
    try:
        return bytes.fromhex(text).decode("utf-8", "replace")
    except ValueError:
        return ""


def _encode_step(rest, exclude=()):
    return " ".join("\x1f".join(words).encode().hex() or "" for words in (rest, sorted(exclude))).rstrip()


class StepEvents:
    """One step's events, checked as a whole: every test started and stopped, at least one outcome each, a
    pass never beside a failure. ``status`` ranks them as unittest's ``TestResult`` would."""

    def __init__(self):
        self.tests, self.loose, self.current, self.texts = [], [], None, []
        self.problem = ""
        self.disputes = []  # (index of the test or None, the frozen pair): strict equality's refused pairs

    def add(self, words):
        kind = words[0]
        if kind == "dispute" and len(words) == 3:
            self.disputes.append((len(self.tests) if self.current is not None else None, words[1]))
        elif kind == "start":
            if self.current is not None:
                self.problem = "a test started inside another"
            self.current = []
        elif kind == "stop":
            if self.current is None:
                self.problem = "a test stopped that never started"
            else:
                self.tests.append(self.current)
            self.current = None
        elif kind == "out" and len(words) > 1 and words[1] in OUTCOMES:
            (self.current if self.current is not None else self.loose).append(words[1])
            if len(words) > 2 and words[2] and words[1] in ("fail", "error"):
                self.texts.append(words[2])
        else:
            self.problem = f"an unknown event {kind[:20]!r}"

    def why_forged(self):
        """Why these events cannot be the record of an honest run, or ''."""
        if self.problem or self.current is not None:
            return self.problem or "a test never stopped"
        for outcomes in self.tests:
            if not outcomes:
                return "a test ended with no outcome recorded"
            final = [o for o in outcomes if o in ("pass", "xfail", "xpass")]
            if len(final) > 1 or (final and any(o in ("fail", "error", "skip") for o in outcomes)):
                return "a test recorded both a pass and a failure"
        return ""

    def settle(self, judge):
        """Each dispute's verdict: a pair the untouched package's own ``==`` does not uphold fails its test (or the
        step, outside any test). Called once the events are known not to be forged."""
        for (index, _), (held, why) in zip(self.disputes, judge([d for _, d in self.disputes])):
            if held:
                continue
            (self.loose if index is None or index >= len(self.tests) else self.tests[index]).append("fail")
            self.texts.append("strict equality, judged on the untouched package: " + why)

    def status(self):
        every = self.loose + [o for outcomes in self.tests for o in outcomes]
        if "error" in every:
            return "ERROR"
        if "fail" in every or "xpass" in every:
            return "FAILED"
        if not self.tests:
            return "SKIPPED" if self.loose and set(self.loose) == {"skip"} else "ERROR"
        if all(set(outcomes) == {"skip"} for outcomes in self.tests):
            return "SKIPPED"
        return "XFAIL" if "xfail" in every else "PASSED"

    def best(self):
        """The most passing status of any one test of the step (a canary must have none that passes)."""
        if self.loose or not self.tests:
            return self.status()
        ranked = []
        for outcomes in self.tests:
            one = StepEvents()
            one.tests = [outcomes]
            ranked.append(one.status())
        return min(ranked, key=RANK.index)


# statuses from the most passing to the least
RANK = ("PASSED", "XFAIL", "XPASS", "SKIPPED", "FAILED", "ERROR")


class PytestStepEvents:
    """One step of pytest's own protocol (harness 1): per collected item, the report of each phase and the
    exception each phase raised as the innermost hook wrapper saw it, checked as a whole."""

    def __init__(self):
        self.items, self.current, self.problem = [], None, ""
        self.disputes, self.texts = [], []  # (the item or None, the frozen pair); the judge's refusals

    def add(self, words):
        kind = words[0]
        if kind == "dispute" and len(words) == 3:
            self.disputes.append((self.current, words[1]))
        elif kind == "start":
            if self.current is not None:
                self.problem = "a test started inside another"
            self.current = {"reports": [], "raw": {}, "unittest": [], "refused": False}
        elif self.current is None:
            self.problem = f"a {kind[:20]!r} record outside a test"
        elif kind == "stop":
            self.items.append(self.current)
            self.current = None
        elif kind == "rep" and len(words) == 4:
            self.current["reports"].append((words[1], words[2], words[3] == "1"))
        elif kind == "raw" and len(words) == 3:
            if words[1] in self.current["raw"]:
                self.problem = "a phase observed twice"
            self.current["raw"][words[1]] = words[2]
        elif kind == "out" and len(words) > 1 and words[1] in OUTCOMES:
            self.current["unittest"].append(words[1])
        else:
            self.problem = f"an unknown event {kind[:20]!r}"

    def why_forged(self):
        if self.problem or self.current is not None:
            return self.problem or "a test never stopped"
        for item in self.items:
            phases = [when for when, _, _ in item["reports"]]
            outcomes = {when: outcome for when, outcome, _ in item["reports"]}
            expected = ["setup", "call", "teardown"] if outcomes.get("setup") == "passed" else ["setup", "teardown"]
            if phases != expected:
                return "a test's reports are missing or extra (" + ", ".join(phases) + ")"
            for when, outcome, _ in item["reports"]:
                if outcome == "passed" and item["raw"].get(when) == "exception":
                    return f"pytest reported a {when} passed although it raised"
            if outcomes.get("call") == "passed" and any(o in ("fail", "error") for o in item["unittest"]):
                return "pytest reported a unittest test passed although unittest recorded its failure"
        return ""

    def settle(self, judge):
        """As :meth:`StepEvents.settle`: an item whose pair the untouched ``==`` does not uphold has FAILED."""
        for (item, _), (held, why) in zip(self.disputes, judge([d for _, d in self.disputes])):
            if not held:
                for one in [item] if item is not None else self.items:
                    one["refused"] = True
                self.texts.append("strict equality, judged on the untouched package: " + why)

    @staticmethod
    def _item_status(item):
        found = ["FAILED"] if item.get("refused") else []
        for when, outcome, wasxfail in item["reports"]:
            if when == "setup":
                found.append("ERROR" if outcome == "failed" else ("XFAIL" if wasxfail else "SKIPPED")
                             if outcome == "skipped" else "PASSED")
            elif when == "call":
                found.append({"passed": "XPASS" if wasxfail else "PASSED", "failed": "FAILED",
                              "skipped": "XFAIL" if wasxfail else "SKIPPED"}[outcome])
            elif outcome == "failed":
                found.append("ERROR")
        return max(found, key=RANK.index) if found else "ERROR"

    def status(self):
        return max((self._item_status(i) for i in self.items), key=RANK.index) if self.items else "ERROR"

    def best(self):
        return min((self._item_status(i) for i in self.items), key=RANK.index) if self.items else "ERROR"


def run_steps(command, payload, steps, emit, events_class=StepEvents, env=None):
    """Run ``steps`` (each already encoded as the line the child reads) in one child: ``(each step's events in
    order, why the grading is void or '', complete)``. A step's events must end before the next is sent."""
    child = Child(command, payload, env=env)
    found, void = [], ""
    ready = child.next_event()
    digest = ready[1] if ready and ready[0] == "ready" and len(ready) > 1 else None
    for step in steps if digest else ():
        if child.alarms:
            break
        child.send(step)
        first = child.next_event()
        if first != ["begin"]:
            if first is not None:
                void = "a step's events did not begin where the step did"
            break
        events = events_class()
        while True:
            words = child.next_event()
            if words is None or words[0] == "end":
                break
            if words[0] in ("ready", "begin"):
                events.problem = "an extra record in the step's events"
            else:
                events.add(words)
        if words is None:
            break
        void = events.why_forged() or ("" if words[1:2] == [digest] else "the runner's or the test file's code "
                                       "was rewritten in place (its live bytecode or constants changed)")
        if void:
            break
        found.append(events)
    code = child.close(emit)
    if child.alarms:
        return found, child.alarms[0], True
    if void:
        return found, void, True
    for events in found:  # judged only now: no process of the code under test is left to touch the judge
        if events.disputes:
            events.settle(judge_disputes if not child.outlived else
                          lambda disputes: [(False, "a process of the code under test outlived its test run")]
                          * len(disputes))
    return found, "", len(found) == len(steps) and code in (0, 1, 2, 5)  # pytest: tests failed, none ran...


class FilePlan:
    """One graded file: each test with its two canaries in an order chosen here (the child never learns which
    is which), the tests that select a whole class or module last, and what the source allows."""

    def __init__(self, path, module, tests, files, integrity, rng):
        self.path, self.module, self.tests = path, module, tests  # tests: [(test id, rest)]
        plan = files.plans.get(path) or {}
        self.source, self.integrity = files.sources.get(path, ""), integrity
        self.guards, self.marked, every_canary = {}, {}, set()
        # the canaries' own names, left out of whole classes and modules: the names the file did not have (a
        # method canary's class is the test's own: leaving it out emptied a whole-module step)
        known = integrity.source_names(self.source) if plan else set()
        for canaries in plan.values():
            every_canary |= {name for canary in canaries for name in canary if name not in known and name != "runTest"}
        singles, wholes = [], []
        for test_id, rest in tests:
            canaries = plan.get(tuple(rest))
            entries = [(test_id, tuple(rest), "test")]
            if canaries is not None:
                self.guards[test_id] = canaries
                entries += [(path + "::" + "::".join(c), tuple(c), "canary") for c in canaries]
            rng.shuffle(entries)
            if len(rest) >= 2:
                singles += entries
            else:  # a whole class or module: its canaries first, and only now are the canaries' names left out
                wholes += sorted(entries, key=lambda entry: entry[2] == "test")
        self.steps = [_encode_step(rest, every_canary if kind == "test" and len(rest) < 2 else ())
                      for _, rest, kind in singles + wholes]
        self.entries = singles + wholes

    def expects_failure(self, rest):
        """Whether the source marks the test (or, with a trailing "\0", the class) at ``rest`` expectedFailure."""
        key = tuple(rest)
        if key not in self.marked:
            self.marked[key] = self.integrity.marked(self.source, key, "expectedFailure")
        return self.marked[key]

    def payload(self, trusted):
        try:
            with open(self.path, "rb") as handle:
                source = handle.read()
        except OSError:
            source = b""
        if self.integrity._sha256(source) != trusted.get(os.path.abspath(self.path)):
            source = b""  # changed since the parent read it: the child refuses it
        return {"path": self.path, "module": self.module, "trusted": trusted, "source": source.decode("latin-1"),
                "strict": STRICT[0], "pristine": PRISTINE[0] is not None}

    def judge(self, events, harness):
        """``(statuses of the graded tests, why the grading is void or '')`` from one harness's steps' events."""
        by_entry = {(test_id, kind): (e.status() if kind == "test" else e.best())
                    for (test_id, _, kind), e in zip(self.entries, events)}
        found = {}
        for test_id, rest in self.tests:
            status = by_entry[(test_id, "test")]
            found[test_id] = status
            if status not in PASSING:
                continue
            canaries = self.guards.get(test_id)
            if canaries is None:
                return {}, f"harness {harness}: {test_id} passed without canaries beside it"
            marked = self.expects_failure(rest) or self.expects_failure(tuple(rest[:-1]) + ("\0",))
            if status == "XFAIL" and not marked:
                return {}, f"harness {harness}: {test_id} came back XFAIL but its source expects no failure"
            for canary in canaries:
                came = by_entry[(self.path + "::" + "::".join(canary), "canary")]
                if came not in ("FAILED", "ERROR") + (("XFAIL",) if marked else ()):
                    return {}, (f"harness {harness}: a canary test beside {test_id} (a copy of it that must fail) "
                                f"came back {came}")
        return found, ""


def run_file(plan, trusted, emit):
    """Both harnesses on one file's tests: ``(statuses, why the grading is void or '')``."""
    test_ids = [test_id for test_id, _ in plan.tests]
    if not os.path.isfile(plan.path):  # nothing to import: no process needed
        emit(f"| turngym: {plan.path} does not exist")
        return dict.fromkeys(test_ids, "ERROR"), ""
    events, void, complete = run_steps(_child_command(CHILD), plan.payload(trusted), plan.steps, emit)
    if void:
        return {}, "harness 1: " + void
    for (test_id, _, kind), step in zip(plan.entries, events):
        for text in step.texts if kind == "test" else ():
            emit(f"| turngym: {test_id}:")
            for line in text.splitlines()[-40:]:
                emit("|   " + line)
    if not complete:
        emit("| turngym: the test process ended abnormally; its tests count as errors")
        return dict.fromkeys(test_ids, "ERROR"), ""
    found, void = plan.judge(events, 1)
    if void:
        return {}, void
    passed = [t for t in test_ids if found[t] in PASSING]
    if not passed:
        return found, ""
    second, void, complete = run_steps(_child_command(CHECK), plan.payload(trusted), plan.steps, emit)
    if void:
        return {}, "harness 2: " + void
    if not complete:
        return {}, "the independent harness ended abnormally"
    second_found, void = plan.judge(second, 2)
    if void:
        return {}, void
    for test_id in passed:
        if second_found[test_id] not in PASSING:
            return {}, (f"{test_id} {found[test_id]} under unittest but {second_found[test_id]} "
                        "when called directly")
    return found, ""


def _child_command(mode):
    return [sys.executable, "-B", "-s", "--check-hash-based-pycs", "always", os.path.abspath(__file__), mode]


def run_unittest(test_ids, emit, verdict):
    cwd = os.getcwd()
    integrity = load_integrity()
    groups, unresolved = {}, []
    for test_id in test_ids:
        found = resolve(test_id, cwd)
        if found is None:
            unresolved.append(test_id)
            continue
        path, module, rest = found
        groups.setdefault(path, (module, []))[1].append((test_id, rest))
    for test_id in unresolved:
        emit(f"| turngym: no file under {cwd} holds the test {test_id}")
        verdict("ERROR", test_id)
    files = TestFiles(integrity, unittest_style=True)
    try:
        for path, (_, tests) in groups.items():
            if os.path.isfile(path):
                files.add(path, [rest for _, rest in tests])
        trusted = integrity.trusted_hashes(cwd, list(groups) + SUPPORT)
        for path, (module, tests) in groups.items():
            plan = FilePlan(path, module, tests, files, integrity, files.rng)
            GRADED[:] = [os.path.relpath(path, cwd)]
            statuses, void = run_file(plan, trusted, emit)
            if void:
                return void
            for test_id, status in statuses.items():
                verdict(status, test_id)
    finally:
        files.restore()
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
               "s.loader.exec_module(m); m.main(int(sys.argv[3]), sys.argv[2], m)")


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
    # --tb=native: Python's own traceback of a failure (pytest's long form re-parses the test file for each one,
    # 70 ms a failure on toolz's tests, where every canary fails)
    # an unknown mark is a plugin the sandbox lacks (pytest-cov's no_cover): under the suite's own
    # ``filterwarnings = error`` its warning would end the whole collection (python-dateutil's suite)
    args = ["-c", config_path or os.devnull, "--rootdir", cwd, "-o", "addopts=", "-p", "no:cacheprovider",
            "--tb=native", "-W", "ignore::pytest.PytestUnknownMarkWarning"]
    for plugin in plugins:
        args += ["-p", plugin]
    return args


def _conftest_mentions(cwd, path, word):
    """Whether a conftest.py between the repository root and ``path`` mentions ``word`` (it may mark tests)."""
    directory = os.path.dirname(path)
    parts = [p for p in directory.split("/") if p]
    for depth in range(len(parts) + 1):
        candidate = os.path.join(cwd, *parts[:depth], "conftest.py")
        try:
            with open(candidate, "rb") as handle:
                if word.encode() in handle.read():
                    return True
        except OSError:
            pass
    return False


def _common_node(step_id, next_id):
    """The node id two steps share, module or class (the fixtures that outlive the first), or ''."""
    if not next_id:
        return ""
    here, there = step_id.split("[", 1)[0].split("::"), next_id.split("[", 1)[0].split("::")
    common = []
    for a, b in zip(here[:-1], there[:-1]):
        if a != b:
            break
        common.append(a)
    return "::".join(common)


def _conftests(cwd):
    """Every conftest.py under the repository (restored to their base versions before grading)."""
    found = []
    for directory, subdirs, files in os.walk(cwd):
        subdirs[:] = sorted(d for d in subdirs if d not in (".git", "__pycache__"))
        found += [os.path.relpath(os.path.join(directory, "conftest.py"), cwd) for f in files if f == "conftest.py"]
    return found


class PytestPlan:
    """The graded pytest ids, each with its two canaries in an order drawn here, as the steps both harnesses run."""

    def __init__(self, test_ids, files, rng):
        self.test_ids, self.guards, self.entries = test_ids, {}, []
        for test_id in test_ids:
            path, _, rest = test_id.partition("::")
            rest = id_names(rest)
            canaries = files.plans.get(path, {}).get(rest)
            entries = [(test_id, "test")]
            if canaries is not None:
                self.guards[test_id] = tuple(path + "::" + "::".join(c) for c in canaries)
                entries += [(c, "canary") for c in self.guards[test_id]]
            rng.shuffle(entries)
            self.entries += entries
        ids = [entry[0] for entry in self.entries]
        self.steps = [" ".join(w.encode().hex() for w in (i, _common_node(i, n))).rstrip()
                      for i, n in zip(ids, ids[1:] + [""])]

    def judge(self, events, harness, allowed_xfail):
        """``(statuses of the graded tests, why the grading is void or '')`` from one harness's steps' events."""
        by_entry = {(i, kind): (e.status() if kind == "test" else e.best())
                    for (i, kind), e in zip(self.entries, events)}
        found = {}
        for test_id in self.test_ids:
            status = by_entry[(test_id, "test")]
            found[test_id] = status
            if status not in PASSING:
                continue
            if test_id not in self.guards:
                return {}, f"harness {harness}: {test_id} passed without canaries beside it"
            if status == "XFAIL" and not allowed_xfail(test_id):
                return {}, f"harness {harness}: pytest reported {test_id} XFAIL although its source does not mark it"
            allowed = ("FAILED", "ERROR") + (("XFAIL",) if allowed_xfail(test_id) else ())
            for canary in self.guards[test_id]:
                came = by_entry[(canary, "canary")]
                if came not in allowed:
                    return {}, (f"harness {harness}: a canary test beside {test_id} (a copy of it that must fail) "
                                f"came back {came}")
        return found, ""


def run_pytest(test_ids, plugins, emit, verdict):
    """The ids through turngym's plugin in two pytest processes, a step at a time: pytest's own protocol, then
    (when a test passed) the independent harness; the grading is void ('' if not) when a passing test's canaries
    came back wrong, a phase's report contradicts what it raised, a record is missing or extra, an XFAIL is not
    in the source, the harnesses disagree, or the plugin saw the framework, the hooks or the code changed."""
    python = _pytest_python()
    if python is None:
        emit("| turngym: pytest is not installed for this python3 nor on PATH")
        for test_id in test_ids:
            verdict("ERROR", test_id)
        return ""
    cwd = os.getcwd()
    integrity = load_integrity()
    files = TestFiles(integrity, unittest_style=False)
    config_path = None
    try:
        by_file = {}
        for test_id in test_ids:
            path, _, rest = test_id.partition("::")
            by_file.setdefault(path, set()).add(id_names(rest))
        for path, targets in by_file.items():
            if os.path.isfile(path) and path.endswith(".py"):
                files.add(path, targets)
        plan = PytestPlan(test_ids, files, files.rng)
        trusted = integrity.trusted_hashes(cwd, list(by_file) + _conftests(cwd) + SUPPORT)
        config = base_pytest_config()
        config_path = _write_private(cwd, config[1], config[0]) if config else None
        env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        GRADED[:] = sorted(os.path.relpath(p, cwd) for p in by_file if os.path.isfile(p))
        payload = {"files": sorted(p for p in by_file if os.path.isfile(p)), "trusted": trusted,
                   "args": pytest_arguments(cwd, config_path, plugins), "strict": STRICT[0],
                   "pristine": PRISTINE[0] is not None}
        command = [python, "-B", "-s", "--check-hash-based-pycs", "always", "-c", PYTEST_BOOT, PLUGIN, INTEGRITY]

        def allowed_xfail(test_id):
            path, _, rest = test_id.partition("::")
            rest = id_names(rest)
            conftest = _conftest_mentions(cwd, path, "xfail")
            return integrity.marked(files.sources.get(path, ""), rest, "xfail", conftest) or \
                integrity.marked(files.sources.get(path, ""), rest[:-1] + ("\0",), "xfail", conftest)

        first, void, complete = run_steps(command, {**payload, "harness": 1}, plan.steps, emit,
                                          events_class=PytestStepEvents, env=env)
        if void:
            return "harness 1: " + void
        if not complete:
            emit("| turngym: pytest ended abnormally; its tests count as errors")
            for test_id in test_ids:
                verdict("ERROR", test_id)
            return ""
        for (test_id, kind), step in zip(plan.entries, first):
            for text in step.texts if kind == "test" else ():
                emit(f"| turngym: {test_id}: {text}")
        found, void = plan.judge(first, 1, allowed_xfail)
        if void:
            return void
        passed = [t for t in test_ids if found[t] in PASSING]
        if passed:
            second, void, complete = run_steps(command, {**payload, "harness": 2}, plan.steps, emit, env=env)
            if void:
                return "harness 2: " + void
            if not complete:
                return "the independent harness ended abnormally"
            second_found, void = plan.judge(second, 2, allowed_xfail)
            if void:
                return void
            for test_id in passed:
                if second_found[test_id] not in PASSING:
                    return (f"{test_id} {found[test_id]} under pytest's protocol but {second_found[test_id]} "
                            "when set up and called directly")
    finally:
        if config_path:
            os.unlink(config_path)
        files.restore()
    for test_id in test_ids:
        verdict(found[test_id], test_id)
    return ""


# --------------------------------------------------------------------------- the package's own equality
def read_pristine(root, emit):
    """``{"root", "sources"}``: every ``.py`` file of the untouched tree ``root`` (the grading script extracts it
    from the base commit), read now, before any code under test runs; None without one, or when it is too big."""
    if not root or not os.path.isdir(root):
        return None
    sources, total = {}, 0
    for directory, names, files in os.walk(root):
        names[:] = sorted(n for n in names if n not in (".git", "__pycache__"))
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(directory, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as handle:
                data = handle.read(PRISTINE_LIMIT + 1 - total)
            total += len(data)
            if total > PRISTINE_LIMIT:
                emit(f"| turngym: the untouched tree has over {PRISTINE_LIMIT >> 20} MB of Python source; "
                     "strict equality's refusals are final")
                return None
            sources[os.path.relpath(path, root).replace(os.sep, "/")] = data.decode("latin-1")
    return {"root": os.path.abspath(root), "sources": sources}


def discard_reference(root):
    """Delete the reference tree ``root`` (it holds the gold patch: code under test must never read it); whether it
    is gone."""
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    return not os.path.lexists(root)


JUDGED = {}  # a frozen pair's verdict, by the graded files and its data: both harnesses send the same pairs


def reference_verdict(data, held, why, in_full):
    """A judged pair's ``(held, why)``: a refusal by the probes alone, of a pair rebuilt in full, holds when the
    pair's frozen state is one of the gold patch's (:data:`REFERENCE_STATES`). The digest of every pair whose
    untouched comparison held in full is recorded, refused by the probes or not."""
    if in_full is not True:
        return held is True, str(why)[:300]
    digest = hashlib.sha256(data.encode()).hexdigest()
    STATES_SEEN.add(digest)
    if held is True or digest in REFERENCE_STATES[0]:
        return True, ""
    PROBES_REFUSED.add(digest)
    return False, str(why)[:300]


def reference_states(words):
    """The gold patch's reference states among the words after the nonce (64 hex digits each)."""
    return frozenset(w for w in words if len(w) == 64 and STATE_DIGITS.issuperset(w))


def judge_disputes(disputes):
    """``[(held, why)]`` for frozen pairs, decided by ``judge.py`` in a fresh process on the untouched sources
    (:func:`reference_verdict`); every pair is refused when there is no untouched tree or the judge fails."""
    graded = tuple(GRADED)
    verdicts = [JUDGED.get((graded, d)) for d in disputes]
    wanted = [d for d, v in zip(disputes, verdicts) if v is None]
    if wanted and PRISTINE[0] is None:
        return [(False, "no untouched tree to judge it")] * len(disputes)
    if wanted:
        request = json.dumps({**PRISTINE[0], "graded": list(graded),
                              "disputes": list(dict.fromkeys(wanted))}).encode()
        try:
            done = subprocess.run([sys.executable, "-B", "-s", JUDGE, os.getcwd()], input=request,
                                  capture_output=True, timeout=JUDGE_TIMEOUT, cwd="/", check=False)
            answers = json.loads(done.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
            for data, (held, why, in_full) in zip(dict.fromkeys(wanted), answers):
                JUDGED[graded, data] = reference_verdict(data, held, why, in_full)
        except (OSError, ValueError, IndexError, TypeError, subprocess.TimeoutExpired) as error:
            why = f"the judge failed ({type(error).__name__})"
            return [JUDGED.get((graded, d), (False, why)) for d in disputes]
    return [JUDGED.get((graded, d), (False, "the judge gave no verdict")) for d in disputes]


def main(argv):
    words = [] if sys.stdin is None or sys.stdin.isatty() else sys.stdin.readline().split()
    sys.stdin = open(os.devnull)  # noqa: SIM115
    hidden = _no_dump()
    nonce = words[0] if words else ""
    prefix = (nonce + " ") if nonce else ""
    REFERENCE_STATES[0] = reference_states(words[1:])
    del nonce, words
    out = sys.stdout

    def emit(line):
        out.write(line + "\n")
        out.flush()

    def verdict(status, test_id):
        emit("\n" + prefix + status + " " + test_id)

    _subreaper()
    reference, holds_the_answer = os.environ.get("TURNGYM_PRISTINE", ""), os.environ.pop("TURNGYM_PRISTINE_DISCARD", "")
    if holds_the_answer and not hidden:  # code under test could read the answer in this process's memory
        emit("| turngym: this process's memory is not hidden from the code under test (dumpable, root or a "
             "capability), so the reference tree is not read; strict equality's refusals are final")
    else:
        PRISTINE[0] = read_pristine(reference, emit)
    if holds_the_answer and not discard_reference(reference):
        emit("| turngym: the reference tree holds the answer and could not be deleted: nothing is graded")
        return 2
    while argv[:1] == [SUPPORT_FLAG] and len(argv) > 1:
        SUPPORT.append(os.path.normpath(argv[1]).lstrip("/"))
        argv = argv[2:]
    if argv[:1] == [LOOSE]:
        argv, STRICT[0] = argv[1:], False
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
    if STATES_SEEN:  # digests only: the state stays in this process
        emit("| turngym: reference states " + " ".join(sorted(STATES_SEEN)))
    if PROBES_REFUSED:
        emit("| turngym: refused by the probes alone " + " ".join(sorted(PROBES_REFUSED)))
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
