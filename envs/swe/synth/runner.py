"""Running a repository's tests in the sandbox while synthesizing: collect, run, trace, try a mutation.

One sandbox (the SWE world's own, bubblewrap by default: no network, uid 65534, the host's ``/usr``)
holds the repository for a whole package; each mutation is written into it, its tests run with plain
``python3 -m pytest -rA`` (fast screening), and the original file is written back. The tasks that
survive screening are then validated through the world's own grading path (``taskset.validate``:
turngym's runner, a fresh grading sandbox per grading), so nothing here decides a task's verdict.

Bytecode is off (``PYTHONDONTWRITEBYTECODE``): a mutation of the same size written in the same second
as the original would otherwise reuse the original's ``.pyc``.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from turngym.envs.swe.grading import parse_test_log
from turngym.envs.swe.sandbox import PhaseTimeouts, SandboxLimits, SandboxSpec, make_sandbox, resolve_backend
from turngym.envs.swe.sandbox.base import WORKDIR

SCRATCH = "/scratch"
IDS_FILE = f"{SCRATCH}/.turngym-synth-ids"
TRACE_PLUGIN = f"{SCRATCH}/turngym_synth_trace.py"
TRACE_OUT = f"{SCRATCH}/.turngym-synth-trace.json"
# An unknown mark is a plugin the sandbox lacks (pytest-cov's ``no_cover``): with a suite's ``filterwarnings = error``
# its warning would end the whole collection (python-dateutil), so it is ignored, as the grading runner does.
PYTEST_OPTIONS = ["-p", "no:cacheprovider", "-o", "addopts=", "-o", "console_output_style=classic",
                  "-p", "no:randomly", "-W", "ignore::DeprecationWarning",
                  "-W", "ignore::pytest.PytestUnknownMarkWarning"]
# -rA, less the passing tests' printed output (P): for a suite whose passing tests print (pyparsing's) -rA's
# report runs past the sandbox's output limit and the run is killed before its summary.
QUIET_PASSES = "-rfEsxXp"

# Records, per test, which functions of the repository (not its tests) ran: (file, first line of the code).
TRACE_SOURCE = r'''
import json, os, sys, threading
import pytest
ROOT = os.getcwd()
OUT = os.environ["TURNGYM_TRACE_OUT"]  # read now: a test may replace os.environ
_now = None
_seen = {}
_codes = {}

def _where(code):
    found = _codes.get(code)
    if found is None:
        name = code.co_filename
        path = os.path.normpath(name if os.path.isabs(name) else os.path.join(ROOT, name))
        inside = path.startswith(ROOT + os.sep)
        found = _codes[code] = (os.path.relpath(path, ROOT), code.co_firstlineno) if inside else ()
    return found

def _profile(frame, event, arg):
    if event == "call" and _now is not None:
        where = _where(frame.f_code)
        if where:
            _now.add(where)

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    global _now
    _now = set()
    sys.setprofile(_profile)
    threading.setprofile(_profile)
    try:
        yield
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        _seen[item.nodeid] = sorted(_now)
        _now = None

_support = set()

def pytest_collection_modifyitems(session, config, items):
    # the repository's files the test classes take code from (a mixin of assertions the package ships)
    for item in items:
        for klass in getattr(getattr(item, "cls", None), "__mro__", ()):
            name = getattr(sys.modules.get(getattr(klass, "__module__", "") or ""), "__file__", None)
            if isinstance(name, str):
                path = os.path.normpath(os.path.abspath(name))
                if path.startswith(ROOT + os.sep):
                    _support.add(os.path.relpath(path, ROOT))

def pytest_sessionfinish(session):
    with open(OUT, "w") as out:
        json.dump({"tests": _seen, "classes_from": sorted(_support)}, out)
'''


@dataclass
class Run:
    """One pytest run: the status of each id, the log, and whether it finished in time."""

    statuses: dict[str, str]
    log: str
    seconds: float
    timed_out: bool = False
    exit_code: int | None = 0
    extra: dict = field(default_factory=dict)
    flooded: bool = False  # printed past the sandbox's output limit (killed): its statuses are missing

    def failing(self) -> list[str]:
        return sorted(t for t, s in self.statuses.items() if s not in ("PASSED", "XFAIL"))


class TestSession:
    """A sandbox holding ``repo_dir`` at /testbed for the whole synthesis of one package."""

    def __init__(self, repo_dir: Path, backend: str = "bwrap", name: str = "synth",
                 memory_mb: int = 2048, workspace_root: Path | None = None) -> None:
        spec = SandboxSpec(repo_dir=repo_dir, limits=SandboxLimits(memory_mb=memory_mb, cpu_seconds=600),
                           timeouts=PhaseTimeouts(exec=600.0, test=600.0), lifetime_s=6 * 3600.0, name=name)
        self.sandbox = make_sandbox(resolve_backend(backend), spec, workspace_root=workspace_root)
        self.sandbox.start()

    def close(self) -> None:
        self.sandbox.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- files
    def write(self, path: str, text: str) -> None:
        """Write ``text`` to ``/testbed/path`` (through stdin: no size limit on arguments)."""
        result = self.sandbox.exec(f"cat > {shlex.quote(path)}", stdin=text.encode(), timeout=60)
        if not result.ok:
            raise RuntimeError(f"could not write {path} in the sandbox: {result.output[-300:]}")

    # ----------------------------------------------------------------- pytest
    def _env(self) -> str:
        # COLUMNS: pytest cuts the short summary's messages at the terminal's width (80 without a terminal)
        pieces = ["PYTHONDONTWRITEBYTECODE=1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1", "PYTHONHASHSEED=0", "TZ=UTC",
                  "COLUMNS=400"]
        return "env " + " ".join(pieces)

    def pytest(self, args: list[str], ids: list[str] | None, timeout: float,
               env: str = "") -> tuple[str, int | None, float, bool, bool]:
        """Run pytest with ``args`` and the ids (through a file: thousands exceed the argument limit):
        ``(output, exit code, seconds, timed out, flooded)``."""
        if ids is not None:
            self.write(IDS_FILE, "\n".join(ids) + "\n")
        # the current directory off sys.path, as under the pytest script and turngym's grading runner
        script = (f"import sys; del sys.path[0]; import pytest; "
                  f"ids = open({IDS_FILE!r}).read().split('\\n') if {ids is not None!r} else []; "
                  f"sys.exit(pytest.main({args!r} + [i for i in ids if i]))")
        command = f"{self._env()} {env} python3 -c {shlex.quote(script)}"
        start = time.monotonic()
        result = self.sandbox.exec(command, timeout=timeout)
        seconds = time.monotonic() - start
        return result.output, result.exit_code, seconds, bool(result.timed_out), bool(result.output_limit_hit)

    def collect(self, timeout: float = 300.0) -> tuple[list[str], str]:
        """The suite's test ids (pytest's collection, files that fail to collect skipped) and the log."""
        log, _, _, timed_out, _ = self.pytest([*PYTEST_OPTIONS, "--collect-only", "-q",
                                               "--continue-on-collection-errors"], None, timeout)
        if timed_out:
            raise TimeoutError(f"collecting the tests took over {timeout:.0f} s")
        ids = [line.strip() for line in log.splitlines() if "::" in line and not line.startswith(("ERROR", " "))
               and not line.startswith("<")]
        return list(dict.fromkeys(ids)), log

    def run(self, ids: list[str], timeout: float, tb: str = "short") -> Run:
        """Run ``ids`` once; statuses from pytest's ``-rA`` summary (MISSING when absent). A run that printed past
        the output limit is run again without the passing tests' output (a run that floods even then says so)."""
        log, code, seconds, timed_out, flooded = self.pytest([*PYTEST_OPTIONS, "-rA", f"--tb={tb}", "-q"], ids,
                                                             timeout)
        if flooded:
            log, code, seconds, timed_out, flooded = self.pytest([*PYTEST_OPTIONS, QUIET_PASSES, f"--tb={tb}", "-q"],
                                                                 ids, timeout)
        return Run(parse_test_log(log, ids), log, seconds, timed_out, code, flooded=flooded)

    def trace(self, ids: list[str], timeout: float) -> tuple[dict[str, list[tuple[str, int]]], list[str]]:
        """Which functions of the repository each test runs, ``{test id: [(file, first line), ...]}``, and the
        repository's files that the test classes' bases come from (the tests' own, and a mixin the package ships)."""
        self.sandbox.exec(f"cat > {TRACE_PLUGIN}", stdin=TRACE_SOURCE.encode(), timeout=60)
        env = f"TURNGYM_TRACE_OUT={TRACE_OUT}"
        log, _, _, timed_out, _ = self.pytest([*PYTEST_OPTIONS, "-q", "--tb=no", "-p", "turngym_synth_trace"], ids,
                                              timeout, env=f"{env} PYTHONPATH={SCRATCH}")
        if timed_out:
            raise TimeoutError(f"tracing the tests took over {timeout:.0f} s")
        size = self.sandbox.exec(f"stat -c %s {TRACE_OUT}", timeout=60)
        if not size.ok:
            raise RuntimeError(f"the trace plugin wrote nothing: {log[-500:]}")
        data = json.loads(self.read_bytes(TRACE_OUT, int(size.output.strip().splitlines()[-1])))
        return ({test: [tuple(x) for x in calls] for test, calls in data["tests"].items()},
                [str(f) for f in data["classes_from"]])

    def read_bytes(self, path: str, size: int) -> bytes:
        """A file of the sandbox, read in chunks that stay under its output limit (a large suite's trace is
        several MB: python-dateutil's, 1,458 tests, ran past the limit in one read)."""
        chunk = max(1, self.sandbox.limits.max_output_bytes // 2)  # base64 grows it by 4/3
        parts = []
        for index in range((size + chunk - 1) // chunk):
            result = self.sandbox.exec(f"dd if={shlex.quote(path)} bs={chunk} skip={index} count=1 status=none "
                                       f"| base64 -w0", timeout=60)
            lines = result.output.strip().splitlines()
            if not result.ok or not lines:
                raise RuntimeError(f"could not read {path} from the sandbox: {result.output[-300:]}")
            parts.append(base64.b64decode(lines[-1]))
        data = b"".join(parts)
        if len(data) != size:
            raise RuntimeError(f"read {len(data)} bytes of {path} from the sandbox, not {size}")
        return data


_NOT_FOUND = re.compile(r"^ERROR: not found: (.+?)\s*$")


def ids_not_found(log: str, ids: list[str]) -> list[str]:
    """The ids of ``ids`` that pytest could not find in this run (it then runs none of them, exit code 4).

    A parametrized test whose id holds the time or a random value is named anew at every collection: marshmallow
    3.21.1's ``test_invalid_datetime_deserialization[12-01-2026 18:57:17]`` was collected, then not found by the
    run a second later, and the whole package was dropped as "no test passes"."""
    wanted = set(ids)
    missing = []
    for line in log.splitlines():
        match = _NOT_FOUND.match(line.strip())
        if match:
            name = match.group(1).removeprefix(f"{WORKDIR}/")
            if name in wanted and name not in missing:
                missing.append(name)
    return missing


# --------------------------------------------------------------------------- failure details
_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$")
_SUMMARY = re.compile(r"^(FAILED|ERROR) (\S+)(?: - (.*))?$")


def failure_sections(log: str) -> dict[str, list[str]]:
    """pytest's ``--tb`` section of each failing test, by the header's name (``Class.test`` or ``test``)."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in log.splitlines():
        if line.startswith("=") and ("short test summary" in line or "PASSES" in line or "warnings summary" in line):
            current = None
            continue
        match = _SECTION.match(line)
        if match:
            current = sections.setdefault(match.group(1), [])
            continue
        if current is not None and not line.startswith("="):
            current.append(line)
    return sections


def failure_messages(log: str) -> dict[str, str]:
    """The one-line message of each FAILED / ERROR line of pytest's short summary, by test id."""
    found = {}
    for line in log.splitlines():
        match = _SUMMARY.match(line.strip())
        if match and match.group(2) not in found:
            found[match.group(2)] = (match.group(3) or "").strip()
    return found
