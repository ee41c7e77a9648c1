"""turngym's pytest plugin: the pytest child of ``unittest_runner.py --pytest``.

Loaded by path (never by a module name the repository could shadow) in a fresh interpreter that
the runner starts with the current directory off ``sys.path``, ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``,
no ``PYTEST_ADDOPTS`` and turngym's own options (``-c`` the base commit's configuration, ``--rootdir``,
``-o addopts=``, ``-p no:cacheprovider``). It reads ``{"ids", "canaries", "trusted", "args"}`` from stdin
and writes JSON records to the file descriptor it is given, never to stdout: printing ``PASSED <id>``
from a test counts for nothing.

What it defends (the parent judges, see ``unittest_runner.pytest_forgery``):

* **canaries**: the parent wrote them into the test files themselves (in the graded tests' classes,
  or beside their functions), named like the file's tests; they run first (the failing ones) and last
  (the erroring ones) in each module, collected and run as any test: a plugin, conftest or code under
  test that turns failures into passes turns theirs into passes too;
* **two observations**: each test's status as pytest reports it, and the exception each phase
  (setup, call, teardown) raised as seen from a hook wrapper inside pytest's hook call, before any
  report exists: a report of a pass over a raised exception is a forgery;
* **the framework and the test files** (``integrity.py``): pytest's, pluggy's and unittest's modules and
  classes are snapshotted before pytest starts (its default plugins and the installed ones imported
  first) and compared by identity before and after every test; each test's module, class and
  function must be the restored file's code (as pytest's assertion rewriting compiles it), and the
  interpreter's hooks unchanged (``integrity.Guard``); an audit hook reports writes to the framework's
  functions and trace or profile functions set by code other than the test files'.

Plugins installed in the image (``pytest11`` entry points) are loaded by name unless their module
lives in the repository; a repository's own plugin, ``conftest.py`` aside (restored to its base
version before grading), is not loaded.
"""

import ast
import bisect
import importlib
import importlib.util
import os
import sys

import pytest
from _pytest.outcomes import Skipped, XFailed


def _module_of(item):
    return item.getparent(pytest.Module)


def _hex(text):
    return str(text).encode("utf-8", "replace").hex()


def _selects(step_id, nodeid):
    """Whether a graded id selects a collected item: itself, one of its parameters, or a test under a class."""
    return nodeid == step_id or nodeid.startswith((step_id + "[", step_id + "::"))


class _Selection:
    """The items a step selects (:func:`_selects`), in collection order, found by bisection among the sorted node
    ids: every id it selects starts with the step's id, so only that sorted range is tested. Scanning every item for
    every step cost a grading of a heavily parametrized file (9,085 items, 60 steps) about a second."""

    def __init__(self, items):
        self.items = list(items)
        self.order = sorted(range(len(self.items)), key=lambda i: self.items[i].nodeid)
        self.ids = [self.items[i].nodeid for i in self.order]

    def __call__(self, step_id):
        start = bisect.bisect_left(self.ids, step_id)
        chosen = []
        for position in range(start, len(self.ids)):
            if not self.ids[position].startswith(step_id):
                break
            if _selects(step_id, self.ids[position]):
                chosen.append(self.order[position])
        return [self.items[i] for i in sorted(chosen)]


class Stepper:
    """The pytest child: the parent's steps run one at a time (pytest collects the graded files, then this
    plugin's ``pytest_runtestloop`` runs what each step names and nothing else); every report and every
    exception a phase raised written the moment it exists; the checks before, during and after each test.

    ``harness`` 1 runs each test through pytest's own protocol (its reports are the record); ``harness`` 2,
    the independent one, sets the test up, calls it and tears it down itself, each in its own ``try``, with
    pytest's skip and xfail marks evaluated by pytest's functions: no report, no ``pytest_runtest_*`` hook."""

    def __init__(self, harness, control, channel, guard, digest_of, config_cell, cwd, own_ids):
        self.harness, self.control, self.channel = harness, control, channel
        self.guard, self.digest_of, self.config_cell, self.cwd = guard, digest_of, config_cell, cwd
        self.own_ids = own_ids  # ids of the code objects of this plugin and of integrity.py
        self.adopted = set()
        # filled in place (the instance is in the snapshot): the snapshot's checker, the hooks, the digest
        self.state = {"same": None, "hooks": None, "digest": None}

    def same(self):
        return self.state["same"]()

    def pytest_configure(self, config):
        self.config_cell.append(config)

    # ----------------------------------------------------------------- collection
    def pytest_collection_finish(self, session):
        if not self.same():
            self.channel.alarm(f"pytest's or unittest's machinery was modified before the tests ran "
                               f"({self.state['same'].what()})")
        for item in session.items:
            self._adopt(item)
        # each (class, test) pair once: a parametrized test (and each of its canaries) collects one item a parameter,
        # all of one function; checking every item made the collection checks ~75 % of a grading of inflection's
        # tests (9,085 items for 60 graded ids). A pair skipped here was checked with the machinery as it then was,
        # and every item that runs is checked again before and after it.
        checked, seen = [], set()  # the pairs are kept alive, so their ids stay theirs
        for item in session.items:
            pair = self._objects(item)
            key = (id(pair[0]), id(pair[1]))
            if key in seen:
                continue
            seen.add(key)
            checked.append(pair)
            if self._check(item, "after collection", pair):
                break
        if not self.same():
            self.channel.alarm(f"pytest's or unittest's machinery was modified during collection "
                               f"({self.state['same'].what()})")
        self.state["hooks"] = self._hooks(session.config)
        why = self._hooks_foreign(self.state["hooks"])
        if why:
            self.channel.alarm(why)
        codes = []
        for item in session.items:
            function = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
            code = getattr(function, "__code__", None)
            if code is not None and code not in codes:
                codes.append(code)
        self.state["digest"] = self.digest_of(codes)
        self.channel.event("ready", self.state["digest"]())

    def _adopt(self, item):
        module = item.module
        path = os.path.join(self.cwd, item.nodeid.partition("::")[0])
        found, name = self.guard._get(tuple(vars(module).items()), "__name__")
        if not found or type(name) is not str:
            self.channel.alarm(f"the module of {item.nodeid} has no name")
            return
        if name in self.adopted:
            return
        self.adopted.add(name)
        why = self.guard.adopt_file(name, module, path)
        if why:
            self.channel.alarm(why)

    @staticmethod
    def _hooks(config):
        """Every hook caller of the plugin manager and its implementations, as objects (compared by identity)."""
        relay = config.pluginmanager.hook
        return tuple((name, caller, tuple(caller.get_hookimpls())) for name, caller in sorted(vars(relay).items())
                     if hasattr(caller, "get_hookimpls"))

    def _hooks_foreign(self, hooks):
        """Why a hook implementation is not pytest's, an installed plugin's, a restored test file's or conftest's,
        or this plugin's own code (a hook wrapper the code under test registered), or ''."""
        for name, _, impls in hooks:
            for impl in impls:
                function = getattr(impl, "function", None)
                function = getattr(function, "__func__", function)
                code = getattr(function, "__code__", None)
                if code is None or id(code) in self.own_ids or self.guard.code_ok(code):
                    continue
                return f"a {name} hook implementation is not pytest's, a plugin's or a test file's code"
        return ""

    @staticmethod
    def _objects(item):
        """``(class, test)`` of an item, ``(None, None)`` for one whose object cannot be found (pytest reports it)."""
        try:
            return item.cls, item.obj
        except Exception as error:  # noqa: BLE001
            del error
            return None, None

    def _check(self, item, when, pair=None):
        if not self.same():
            self.channel.alarm(f"{when} {item.nodeid}: pytest's or unittest's machinery was modified "
                               f"({self.state['same'].what()})")
            return True
        hooks = self.state["hooks"]
        if hooks is not None:
            now = self._hooks(item.config)
            if len(now) != len(hooks) or any(a[1] is not b[1] or len(a[2]) != len(b[2]) or any(
                    x is not y for x, y in zip(a[2], b[2])) for a, b in zip(now, hooks)):
                self.channel.alarm(f"{when} {item.nodeid}: a pytest hook was registered or removed "
                                   "(plugin-manager state)")
                return True
        why = self.guard.check([pair or self._objects(item)])
        if why:
            self.channel.alarm(f"{when} {item.nodeid}: {why}")
            return True
        return False

    # ----------------------------------------------------------------- the steps
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        selection = _Selection(session.items)
        for step_id, keep in self.control.pytest_steps():
            if self.channel.alarmed:
                break
            self.channel.event("begin")
            for item in selection(step_id):
                nextitem = _keep_node(item, keep, session)
                self.channel.event("start", _hex(item.nodeid))
                self._check(item, "before")
                if self.harness == 1:
                    item.ihook.pytest_runtest_protocol(item=item, nextitem=nextitem)
                else:
                    self._direct(item, nextitem)
                self._check(item, "after")
                self.channel.event("stop")
            self.channel.event("end", self.state["digest"]() if self.state["digest"] else "")
        return True

    def pytest_runtest_logreport(self, report):
        """pytest's report of a phase, written as it is made (harness 1)."""
        outcome = report.outcome if report.outcome in ("passed", "failed", "skipped") else "failed"
        self.channel.event("rep", report.when, outcome, "1" if hasattr(report, "wasxfail") else "0")

    def _direct(self, item, nextitem):
        """Harness 2: set up, call and tear down ``item`` without pytest's runner, reports or hooks."""
        from _pytest.skipping import evaluate_skip_marks, evaluate_xfail_marks
        from _pytest.unittest import TestCaseFunction

        event, counts = self.channel.event, self.channel.counts
        before = counts[0]
        state = item.session._setupstate
        set_up = getattr(state, "setup", None) or state.prepare  # pytest 6: prepare
        try:
            skipped = evaluate_skip_marks(item)
            xfailed = evaluate_xfail_marks(item)
        except BaseException:  # noqa: BLE001 - a mark that cannot be evaluated: pytest errors the test
            event("out", "error")
            return
        if skipped is not None:
            event("out", "skip")
            return
        if xfailed is not None and not xfailed.run:
            event("out", "xfail")
            return
        try:
            try:
                set_up(item)
            except XFailed:
                event("out", "xfail")
            except Skipped:
                event("out", "skip")
            except BaseException:  # noqa: BLE001 - every exception is a verdict
                event("out", "error")
            else:
                try:
                    item.runtest()
                except XFailed:
                    event("out", "xfail")
                except Skipped:
                    event("out", "skip")
                except BaseException as error:  # noqa: BLE001
                    raises = xfailed.raises if xfailed is not None else None
                    expected = xfailed is not None and (raises is None or isinstance(error, raises))
                    event("out", "xfail" if expected else "fail")
                else:
                    if xfailed is not None and not isinstance(item, TestCaseFunction):
                        event("out", "fail" if xfailed.strict else "xpass")
                self._check(item, "during")
        finally:
            try:
                state.teardown_exact(nextitem)
            except BaseException:  # noqa: BLE001
                event("out", "error")
            # a unittest item keeps each failure's exception (its traceback, frames and their locals) in _excinfo
            # until pytest's report takes it; no report is made here, so it is dropped as pytest would: kept, it
            # held the failing tests' objects alive for the whole session (python-dateutil's test_tzoffset_weakref,
            # which checks that a cached object is collected, then failed here only)
            item.__dict__.pop("_excinfo", None)
        if counts[0] == before:
            event("out", "pass")


def _keep_node(item, keep, session):
    """The node whose fixtures outlive this step (the common part of this step's id and the next one's, the
    parent says which): its module or class, else the session. The child is told no more of the next step."""
    if keep:
        for node in item.listchain():
            if node.nodeid == keep:
                return node
    return session


class Observer:
    """The exception each phase raised, from the innermost hook wrapper (before pytest reports it), written
    at once; and the checks the moment the test's call returns, before its teardown."""

    def __init__(self, channel, stepper):
        self.channel, self.stepper = channel, stepper

    def _see(self, when, outcome):
        excinfo = outcome.excinfo
        kind = "none"
        if excinfo is not None:
            error = excinfo[1]
            kind = "xfail" if isinstance(error, XFailed) else "skip" if isinstance(error, Skipped) else "exception"
        self.channel.event("raw", when, kind)

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_setup(self, item):
        outcome = yield
        self._see("setup", outcome)

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_call(self, item):
        outcome = yield
        self._see("call", outcome)
        self.stepper._check(item, "during")

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_teardown(self, item):
        outcome = yield
        self._see("teardown", outcome)


def _stream_unittest_outcomes(channel):
    """A ``unittest.TestCase`` run by pytest reports to ``TestCaseFunction``, which keeps the exception in a
    list (``_excinfo``) that pytest reads after the cleanups ran: each outcome is written the moment unittest
    reports it, before that list exists. Done before the snapshot, so the wrappers are the framework's now."""
    from _pytest.unittest import TestCaseFunction

    kinds = {"addError": "error", "addFailure": "fail", "addSkip": "skip", "addExpectedFailure": "xfail",
             "addUnexpectedSuccess": "xpass", "addSuccess": "pass"}

    def wrap(original, kind):
        def streaming(self, *args, **kwargs):
            channel.event("out", kind)
            return original(self, *args, **kwargs)
        streaming.__name__ = original.__name__
        return streaming

    for name, kind in kinds.items():
        original = TestCaseFunction.__dict__.get(name)
        if original is not None:
            setattr(TestCaseFunction, name, wrap(original, kind))
    _observe_swallowed_stop(channel)


def _observe_swallowed_stop(channel):
    """unittest's ``_Outcome.testPartExecutor`` swallows ``_ShouldStop`` and leaves the part a success; pytest runs a
    ``unittest.TestCase`` through ``TestCase.run`` in both harnesses, so a ``_ShouldStop`` the code under test raised
    from inside a test was a pass (round 21). Every one that leaves a part is written as the part's error, the moment
    it leaves, as the Observer writes a phase's exception. unittest raises it itself only after a subtest's failure
    (failfast) or expected failure, each recorded already, so an honest test's verdict (failed, xfail) is never a pass
    either way; and no state of the ``_Outcome`` is asked, which the code under test can set from a frame (a first
    version that spared a part whose ``success`` was False, or whose ``expectedFailure`` was set, let both pass)."""
    import contextlib
    from unittest import case

    original, stop = case._Outcome.__dict__.get("testPartExecutor"), getattr(case, "_ShouldStop", None)
    if original is None or stop is None:
        return

    @contextlib.contextmanager
    def testPartExecutor(self, test_case, *args, **kwargs):
        with original(self, test_case, *args, **kwargs):
            try:
                yield
            except stop:
                channel.event("out", "error")
                raise

    testPartExecutor.__qualname__ = original.__qualname__
    case._Outcome.testPartExecutor = testPartExecutor


def installed_plugins(cwd):
    """``(name, module)`` of the ``pytest11`` entry points whose module is not in the repository at ``cwd``."""
    try:
        from importlib.metadata import entry_points
    except ImportError:  # Python 3.7
        return []
    found = entry_points()
    group = found.select(group="pytest11") if hasattr(found, "select") else found.get("pytest11", [])
    plugins = []
    for entry in group:
        module = entry.value.split(":")[0].strip()
        top = module.split(".")[0]
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            continue
        places = [spec.origin or ""] + list(spec.submodule_search_locations or []) if spec else []
        inside = [p for p in places if os.path.realpath(p).startswith(os.path.realpath(cwd) + os.sep)]
        if spec is not None and not inside and entry.name not in [name for name, _ in plugins]:
            plugins.append((entry.name, module))
    return plugins


def _framework(cwd, plugins, mentions, integrity):
    """Load everything pytest will run before the repository can: its default plugins, the installed
    ones, unittest (and ``unittest.mock`` where the test files use it), each name the framework's modules make on
    first use bound (:func:`integrity.resolve_lazy_names`)."""
    import abc
    import unittest

    from _pytest.config import default_plugins

    for name in default_plugins:
        try:
            importlib.import_module("_pytest." + name)
        except ImportError:
            pass
    for _, module in plugins:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001, S110 - pytest itself reports a plugin that does not load
            pass
    if "mock" in mentions:
        import unittest.mock

    def framework():
        return [m for n, m in sorted(sys.modules.items()) if n in ("pytest", "abc") or n.startswith(
            ("_pytest.", "pluggy.", "unittest.")) or n in ("_pytest", "pluggy", "unittest")]

    integrity.resolve_lazy_names(framework())
    return framework(), unittest, abc


def main(result_fd, integrity_path, own_module):
    spec = importlib.util.spec_from_file_location("turngym_integrity_" + os.urandom(6).hex(), integrity_path)
    integrity = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(integrity)
    payload, control = integrity.take_stdin()
    cwd = os.getcwd()
    channel = integrity.Channel(result_fd)
    mentions = ""
    for path in payload["trusted"]:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
            mentions += " mock" if "mock" in text else ""
        except OSError:
            pass
    plugins = installed_plugins(cwd)
    framework, unittest, _ = _framework(cwd, plugins, mentions, integrity)
    _stream_unittest_outcomes(channel)
    import _pytest.assertion.rewrite as rewrite_module

    rewrite_asserts = rewrite_module.rewrite_asserts

    config_cell = []

    def variants(source, path, _parse=ast.parse, _rewrite=rewrite_asserts, _compile=compile, _cell=config_cell):
        """The code pytest makes of a test file: its asserts rewritten."""
        if not _cell:
            return []
        tree = _parse(source, filename=path)
        _rewrite(tree, source, path, _cell[0])
        return [_compile(tree, path, "exec", dont_inherit=True)]

    core = frozenset(["builtins", "sys", "abc", "types", "functools", "importlib", "importlib.util", "gc",
                      "threading"] + [vars(m)["__name__"] for m in framework])
    guard = integrity.Guard(cwd, payload["trusted"], framework, core, test_case=unittest.TestCase,
                            variants=variants, alarm=channel.alarm)
    strict_parts = []
    if payload.get("strict", True):  # before the snapshot: the strict comparisons are the framework's now
        problem = integrity.make_strict_equality(cwd, payload["trusted"], guard.code_ok, guard.function_ok)
        dispute = integrity.make_dispute(channel.event) if payload.get("pristine") else None
        integrity.strict_assertions(unittest.TestCase, problem, guard, dispute)
        if not integrity.strict_pytest_asserts(rewrite_module, problem, guard, dispute):
            print("turngym: this pytest's assertion rewriter is not one strict equality knows; plain asserts "
                  "compare as the objects define it", file=sys.stderr)
        strict_parts = [integrity.strict_functions(
            *[getattr(unittest.TestCase, name) for name in ("assertEqual", "assertIn", "assertCountEqual",
                                                            "assertDictEqual", "assertAlmostEqual",
                                                            "assertNotEqual", "_getAssertEqualityFunc")],
            getattr(rewrite_module, "_turngym_strict", None), getattr(rewrite_module, "_turngym_freeze", None),
            getattr(rewrite_module, "_turngym_in", None), getattr(rewrite_module, "_turngym_prefreeze", None),
            getattr(rewrite_module, "_turngym_settle", None), getattr(rewrite_module, "_turngym_compare", None),
            getattr(getattr(rewrite_module, "AssertionRewriter", None), "visit_Compare", None),
            getattr(getattr(rewrite_module, "AssertionRewriter", None), "visit_Assert", None),
            integrity.LockedMethod.__get__, integrity.LockedMethod.__set__)]
    integrity.lock_assertions(unittest.TestCase)
    own = integrity.own_codes(own_module, integrity)
    own_ids = frozenset(id(c) for c in own)

    def digest_of(test_codes, _own=tuple(own)):
        return integrity.live_digest(list(_own) + list(test_codes), guard.verified_codes)

    stepper = Stepper(int(payload.get("harness", 1)), control, channel, guard, digest_of, config_cell, cwd, own_ids)
    observer = Observer(channel, stepper)
    taken = integrity.snapshot(framework, [own_module, integrity, guard, channel, control, stepper, observer]
                               + strict_parts)
    same = integrity.make_checker(taken, lenient=True)
    stepper.state["same"] = same
    integrity.install_alarm(integrity.protected_ids(taken), channel.alarm)
    guard.install_audit()
    args = list(payload["args"])
    for name, _ in plugins:
        args += ["-p", name]
    active = [stepper] + ([observer] if stepper.harness == 1 else [])
    try:
        code = int(pytest.main(args + list(payload["files"]), plugins=active))
    except BaseException:  # noqa: BLE001 - pytest itself failed: the parent sees the steps end early
        import traceback

        traceback.print_exc()
        code = 3
    if not same():
        channel.alarm(f"pytest's or unittest's machinery was modified ({same.what()})")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
