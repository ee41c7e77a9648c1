"""turngym's pytest plugin: the pytest child of ``unittest_runner.py --pytest``.

Loaded by path (never by a module name the repository could shadow) in a fresh interpreter that
the runner starts with the current directory off ``sys.path``, ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``,
no ``PYTEST_ADDOPTS`` and turngym's own options (``-c`` the base commit's configuration, ``--rootdir``,
``-o addopts=``, ``-p no:cacheprovider``). It reads ``{"ids", "canary", "args"}`` from stdin and
writes JSON records to the file descriptor it is given, never to stdout: printing ``PASSED <id>``
from a test counts for nothing.

What it defends (the parent judges, see ``unittest_runner.pytest_forgery``):

* **canaries**: in every module that holds a graded test, a test that must fail comes first and one
  whose setup must error comes last, under random names: a plugin, conftest or code under test
  that turns failures into passes turns them into passes too;
* **two observations**: each test's status as pytest reports it, and the exception each phase
  (setup, call, teardown) raised as seen from a hook wrapper inside pytest's hook call, before any
  report exists: a report of a pass over a raised exception is a forgery.

Plugins installed in the image (``pytest11`` entry points) are loaded by name unless their module
lives in the repository; a repository's own plugin, ``conftest.py`` aside (restored to its base
version before grading), is not loaded.
"""

import json
import os
import sys

import pytest
from _pytest.outcomes import Skipped, XFailed


def _must_fail():
    raise AssertionError("turngym canary: this test must fail")


def _must_error():  # its setup raises (Verdicts.pytest_runtest_setup): an ERROR
    raise AssertionError("turngym canary: unreachable")


def _module_of(item):
    return item.getparent(pytest.Module)


class Verdicts:
    """pytest's reports, one status per node id, and the canaries."""

    def __init__(self, canary):
        self.canary = canary
        self.statuses = {}
        self.xfail_marked = {}
        self.canary_items = {}  # node id -> ("fail" | "error", file)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        ordered, previous = [], None
        for item in items:
            module = _module_of(item)
            if module is not previous:
                if previous is not None:
                    ordered.append(self._canary(previous, "error"))
                if module is not None:
                    ordered.append(self._canary(module, "fail"))
                previous = module
            ordered.append(item)
        if previous is not None:
            ordered.append(self._canary(previous, "error"))
        items[:] = ordered

    def _canary(self, module, kind):
        function = _must_fail if kind == "fail" else _must_error
        item = pytest.Function.from_parent(module, name=self.canary[kind], callobj=function)
        self.canary_items[item.nodeid] = (kind, module.nodeid.partition("::")[0])
        return item

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        if self.canary_items.get(item.nodeid, ("",))[0] == "error":
            raise RuntimeError("turngym canary: this test must error")

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
        self.statuses[report.nodeid] = status

    def pytest_runtest_protocol(self, item, nextitem):
        self.xfail_marked[item.nodeid] = item.get_closest_marker("xfail") is not None


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
    """Names of the ``pytest11`` entry points whose module is not in the repository at ``cwd``."""
    import importlib.util

    try:
        from importlib.metadata import entry_points
    except ImportError:  # Python 3.7
        return []
    found = entry_points()
    group = found.select(group="pytest11") if hasattr(found, "select") else found.get("pytest11", [])
    names = []
    for entry in group:
        top = entry.value.split(":")[0].split(".")[0].strip()
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            continue
        places = [spec.origin or ""] + list(spec.submodule_search_locations or []) if spec else []
        inside = [p for p in places if os.path.realpath(p).startswith(os.path.realpath(cwd) + os.sep)]
        if spec is not None and not inside and entry.name not in names:
            names.append(entry.name)
    return names


def records(verdicts, observer):
    """The JSON records for the parent: canaries by file, tests with both observations."""
    for nodeid, status in verdicts.statuses.items():
        if nodeid in verdicts.canary_items:
            kind, path = verdicts.canary_items[nodeid]
            yield {"canary": kind, "name": verdicts.canary[kind], "file": path, "status": status}
        else:
            yield {"id": nodeid, "status": status, "raw": observer.raw.get(nodeid, {}),
                   "xfail_marked": verdicts.xfail_marked.get(nodeid, False)}


def main(result_fd):
    payload = json.loads(sys.stdin.readline())
    sys.stdin = open(os.devnull)  # noqa: SIM115 - the tests get an empty stdin
    write, dumps = os.write, json.dumps
    verdicts, observer = Verdicts(payload["canary"]), Observer()
    args = list(payload["args"])
    for name in installed_plugins(os.getcwd()):
        args += ["-p", name]
    try:
        code = int(pytest.main(args + list(payload["ids"]), plugins=[verdicts, observer]))
    except BaseException:  # noqa: BLE001 - pytest itself failed: the parent sees no end record
        import traceback

        traceback.print_exc()
        code = 3
    sys.stdout.flush()
    sys.stderr.flush()
    lines = [dumps(record) for record in records(verdicts, observer)]
    write(result_fd, ("\n".join(lines + [dumps({"end": len(lines)})]) + "\n").encode())
    os._exit(code)
