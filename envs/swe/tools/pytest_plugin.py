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
import importlib
import importlib.util
import json
import os
import sys

import pytest
from _pytest.outcomes import Skipped, XFailed


def _module_of(item):
    return item.getparent(pytest.Module)


class Verdicts:
    """pytest's reports, one status per node id; the canaries' order; the checks around every test."""

    def __init__(self, canaries, guard, same, alarm, config_cell, cwd):
        self.canaries = canaries  # node id (parameters cut) -> "fail" | "error"
        self.guard, self.same, self.alarm, self.config_cell, self.cwd = guard, same, alarm, config_cell, cwd
        self.statuses = {}
        self.adopted = set()

    def pytest_configure(self, config):
        self.config_cell.append(config)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        """Each module's failing canaries first and its erroring canaries last."""
        ordered, group, previous = [], [], None
        for item in items + [None]:
            module = _module_of(item) if item is not None else None
            if item is None or module is not previous:
                ordered += [i for i in group if self._canary(i.nodeid) == "fail"]
                ordered += [i for i in group if self._canary(i.nodeid) is None]
                ordered += [i for i in group if self._canary(i.nodeid) == "error"]
                group, previous = [], module
            if item is not None:
                group.append(item)
        items[:] = ordered

    def _canary(self, nodeid):
        """The kind of canary ``nodeid`` is (a parametrized class or module parametrizes them too), or None."""
        return self.canaries.get(nodeid.split("[", 1)[0])

    def pytest_collection_finish(self, session):
        if not self.same():
            self.alarm(f"pytest's or unittest's machinery was modified before the tests ran ({self.same.what()})")
            return
        for item in session.items:
            self._adopt(item)
        for item in session.items:
            if self._check(item, "after collection"):
                return

    def _adopt(self, item):
        module = item.module
        path = os.path.join(self.cwd, item.nodeid.partition("::")[0])
        found, name = self.guard._get(tuple(vars(module).items()), "__name__")
        if not found or type(name) is not str:
            self.alarm(f"the module of {item.nodeid} has no name")
            return
        if name in self.adopted:
            return
        self.adopted.add(name)
        why = self.guard.adopt_file(name, module, path)
        if why:
            self.alarm(why)

    def _check(self, item, when):
        if not self.same():
            self.alarm(f"{when} {item.nodeid}: pytest's or unittest's machinery was modified ({self.same.what()})")
            return True
        try:
            cls, test = item.cls, item.obj
        except Exception as error:  # noqa: BLE001 - an item whose object cannot be found: pytest reports it
            cls, test = None, None
            del error
        why = self.guard.check([(cls, test)])
        if why:
            self.alarm(f"{when} {item.nodeid}: {why}")
            return True
        return False

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self._check(item, "before")
        yield
        self._check(item, "after")

    def pytest_runtest_logreport(self, report):
        wasxfail = hasattr(report, "wasxfail")
        if report.when == "setup":
            if report.failed:
                status = "ERROR"
            elif report.skipped:
                status = "XFAIL" if wasxfail else "SKIPPED"
            else:
                return
        elif report.when == "call":
            if report.passed:
                status = "XPASS" if wasxfail else "PASSED"
            elif report.failed:
                status = "FAILED"
            else:
                status = "XFAIL" if wasxfail else "SKIPPED"
        elif report.failed:  # teardown
            status = "ERROR"
        else:
            return
        nodeid = report.nodeid
        if self._canary(nodeid) is not None and nodeid not in self.canaries:
            nodeid = nodeid.split("[", 1)[0]  # a parametrized canary: any of its runs that passes counts
            if self.statuses.get(nodeid) in ("PASSED", "XFAIL", "XPASS", "SKIPPED"):
                return
        self.statuses[nodeid] = status


class Observer:
    """The exception each phase raised, from the innermost hook wrapper (before pytest reports it)."""

    def __init__(self):
        self.raw = {}

    def _see(self, item, when, outcome):
        excinfo = outcome.excinfo
        kind = None
        if excinfo is not None:
            error = excinfo[1]
            kind = "xfail" if isinstance(error, XFailed) else "skip" if isinstance(error, Skipped) else "exception"
        self.raw.setdefault(item.nodeid, {})[when] = kind

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_setup(self, item):
        outcome = yield
        self._see(item, "setup", outcome)

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_call(self, item):
        outcome = yield
        self._see(item, "call", outcome)

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_teardown(self, item):
        outcome = yield
        self._see(item, "teardown", outcome)


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


def records(verdicts, observer):
    """The JSON records for the parent: every test and canary with both observations."""
    for nodeid, status in verdicts.statuses.items():
        yield {"id": nodeid, "status": status, "raw": observer.raw.get(nodeid, {})}


def _framework(cwd, plugins, mentions):
    """Load everything pytest will run before the repository can: its default plugins, the installed
    ones, unittest (and ``unittest.mock``, asyncio's test case where the test files use them)."""
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
    if "IsolatedAsyncioTestCase" in mentions:
        getattr(unittest, "IsolatedAsyncioTestCase", None)
    modules = [m for n, m in sorted(sys.modules.items()) if n in ("pytest", "abc") or n.startswith(
        ("_pytest.", "pluggy.", "unittest.")) or n in ("_pytest", "pluggy", "unittest")]
    return modules, unittest, abc


def main(result_fd, integrity_path, own_module):
    payload = json.loads(sys.stdin.readline())
    sys.stdin = open(os.devnull)  # noqa: SIM115 - the tests get an empty stdin
    write, dumps = os.write, json.dumps
    cwd = os.getcwd()
    spec = importlib.util.spec_from_file_location("turngym_integrity_" + os.urandom(6).hex(), integrity_path)
    integrity = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(integrity)

    def alarm(reason, _write=write, _dumps=dumps, _fd=result_fd, _str=str):
        _write(_fd, (_dumps({"tamper": _str(reason)[:300]}) + "\n").encode())

    mentions = ""
    for path in payload["trusted"]:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
            mentions += " mock" if "mock" in text else ""
            mentions += " IsolatedAsyncioTestCase" if "IsolatedAsyncioTestCase" in text else ""
        except OSError:
            pass
    plugins = installed_plugins(cwd)
    framework, unittest, _ = _framework(cwd, plugins, mentions)
    from _pytest.assertion.rewrite import rewrite_asserts

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
                            variants=variants, alarm=alarm)
    taken = integrity.snapshot(framework, [own_module, integrity, guard])
    same = integrity.make_checker(taken, lenient=True)
    integrity.install_alarm(integrity.protected_ids(taken), alarm)
    guard.install_audit()
    verdicts, observer = Verdicts(payload["canaries"], guard, same, alarm, config_cell, cwd), Observer()
    args = list(payload["args"])
    for name, _ in plugins:
        args += ["-p", name]
    ids = list(dict.fromkeys(list(payload["ids"]) + list(payload["canaries"])))
    try:
        code = int(pytest.main(args + ids, plugins=[verdicts, observer]))
    except BaseException:  # noqa: BLE001 - pytest itself failed: the parent sees no end record
        import traceback

        traceback.print_exc()
        code = 3
    if not same():
        alarm(f"pytest's or unittest's machinery was modified ({same.what()})")
    sys.stdout.flush()
    sys.stderr.flush()
    lines = [dumps(record) for record in records(verdicts, observer)]
    write(result_fd, ("\n".join(lines + [dumps({"end": len(lines)})]) + "\n").encode())
    os._exit(code)
