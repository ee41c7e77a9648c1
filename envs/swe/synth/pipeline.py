"""The synthesis pipeline: a package's own tests, procedural bugs, SWE-bench records, validated in the sandbox.

For each package (``name==version`` from the registry, or a local directory):

1. **source** (:mod:`.source`): the sdist, unpacked and cleaned into ``<cache>/repos/<name>-<version>``,
   the repository every task of the package points at (``repo_path``);
2. **baseline** (:mod:`.runner`, in one sandbox): collect the suite, run it twice, keep the tests that
   pass both times (flaky ones, and ones that need the network, fail there and drop out), and trace
   which functions of the package each kept test runs;
3. **mutations** (:mod:`.modifiers`): swesmith's procedural modifiers on the functions and classes those
   tests run, in a deterministic order seeded by ``seed`` and the package, interleaved by modifier kind;
4. **screening**: a mutation is kept only if the file compiles, at least one kept test that runs the
   changed code now fails, and the failing set over the test files involved is the same on a rerun;
5. **records**: SWE-bench / SWE-Gym records (``FAIL_TO_PASS``, ``PASS_TO_PASS``, gold ``patch`` = the
   mutation reversed, ``setup_patch`` = the bug, ``test_patch``, ``repo_path``, ``test_cmd``, a problem
   statement from :mod:`.statement`, ``difficulty`` = the modifier kind, ``difficulty_label`` with lines
   changed, failing tests and files touched);
6. **validation** in the sandbox through the world's own grading path (:func:`turngym.envs.swe.taskset.
   validate`: turngym's runner, a fresh grading sandbox): the bugged repository fails every FAIL_TO_PASS
   and passes every PASS_TO_PASS test, the gold patch resolves it, the empty patch earns 0. A void grading
   (``grading_tampered``) on the gold patch or the untouched bug is a *false alarm* of the grader: it is
   reported with its log excerpt, never silently dropped. The gold grading prints the digest of every pair
   strict equality's judge saw hold on the untouched code; the task keeps those digests as its
   ``reference_states`` (a pair the probes alone refuse, as a package's honest ``==`` coarser than its data is,
   then holds when its state is exactly the gold patch's) and is validated again with them when they change a
   verdict (:func:`validate_with_reference_states`).

Screening runs in ``workers`` sandboxes at once and validation in ``workers`` processes when asked (each its own
sandboxes; the same set as one).
Every stage writes its results under ``<cache>/work/<name>-<version>/`` (``baseline.json``,
``screen.jsonl``, ``validate.jsonl``), keyed by the mutation, so an interrupted run resumes where it
stopped and a rerun with the same seed does the same work. :func:`synthesize` writes the set after every
package: ``tasks.jsonl`` with each task's split, ``report.json`` and ``manifest.json`` (:mod:`.manifest`).
Bad input (no sdist, no tests, a syntax error, a suite that needs the network or hangs) ends that package with
a one-line reason in the report, never the run.

The test files of each task are *protected* at grading: its ``test_patch`` appends one comment line to
each graded test file, so the grader restores those files (and their test directories) to their base
versions before the tests run, as it does for SWE-bench's hidden tests. The tests stay visible in the
repository, as in SWE-smith.
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import queue
import random
import shlex
import shutil
import subprocess
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from contextlib import closing
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from turngym.envs.isolation import die_with_parent
from turngym.envs.swe.grading import PASSING
from turngym.envs.swe.instances import SWEInstance, is_sha256_hex
from turngym.envs.swe.sandbox.base import SandboxError
from turngym.envs.swe.synth import modifiers as mods
from turngym.envs.swe.synth.llm_statement import rewrite_statements
from turngym.envs.swe.synth.manifest import Manifest, SplitRule, content_hash, repo_splits, task_split, versions
from turngym.envs.swe.synth.runner import Run, TestSession, ids_not_found
from turngym.envs.swe.synth.source import (
    LAYOUT,
    SourceError,
    cache_root,
    in_test_directory,
    installed_requirements,
    needs_pytest,
    prepare_repo,
    source_files,
    spec_name,
)
from turngym.envs.swe.synth.statement import changed_lines, leaks, write_statement
from turngym.envs.tasks import canonical_json, sha256_text

logger = logging.getLogger(__name__)

RUNNER = "/opt/turngym/unittest_runner.py"
GRADED_MARK = "# turngym-synth: this file grades the task (restored to its base version before grading)\n"
MAX_COVERING_TESTS = 300
NETWORK_HINTS = ("Network is unreachable", "Temporary failure in name resolution", "Name or service not known",
                 "Failed to establish a new connection", "nodename nor servname")


@dataclass
class SynthConfig:
    """What a synthesis run does (the manifest records it)."""

    seed: int = 0
    max_candidates: int = 40  # mutations screened per package
    max_tasks: int = 0  # stop screening a package after this many kept mutations (0: no limit)
    validate: bool = True
    backend: str = "bwrap"
    suite_timeout: float = 600.0  # one run of the whole suite
    min_timeout: float = 60.0  # one run of a mutation's tests: max(this, 3 x the baseline's time for them)
    max_validations: int = 0  # 0: validate every kept mutation
    # Every grading of a task runs its FAIL_TO_PASS and PASS_TO_PASS tests through turngym's runner, whose checks
    # cost about 0.1-0.3 s a test on 2 busy cores (inflection's 455 tests took over 120 s): a task grades a
    # seeded sample of at most this many of each (the tests that run the changed code first, for PASS_TO_PASS).
    max_f2p: int = 20
    max_p2p: int = 40
    # an LLM that rewords each validated task's statement (llm_statement.py): openai:MODEL, hf:NAME or vllm:NAME;
    # "" keeps the procedural statements
    statement_writer: str = ""


@dataclass
class PackageReport:
    spec: str
    key: str = ""
    name: str = ""
    version: str = ""
    requirements: list[str] = field(default_factory=list)  # name==version installed for its tests
    status: str = "ok"  # ok | dropped
    reason: str = ""
    tests_collected: int = 0
    tests_kept: int = 0
    tests_flaky: int = 0
    collection_errors: int = 0
    covered_units: int = 0
    candidates: int = 0
    screened: int = 0
    kept_mutations: int = 0
    validated: int = 0
    regraded: int = 0  # kept once rebuilt without the tests the grader's runs could not judge (regrade_candidates)
    # test id -> validations in which it failed with the gold patch, having passed twice under pytest: grader false
    # alarms that void nothing (a test failed, not the grading), left out of the rebuilt task
    gold_disagreements: dict[str, int] = field(default_factory=dict)
    gold_gradings_disagreeing: int = 0  # validations (of validation_seconds) with at least one such test
    # validations whose gold patch needed reference states (an honest == coarser than its data), validated twice
    gold_gradings_with_reference_states: int = 0
    drops: dict[str, int] = field(default_factory=dict)
    false_alarms: list[dict[str, Any]] = field(default_factory=list)
    # void gradings that the same validation, run again, did not repeat: a graded test whose outcome varies between
    # runs (the bug made it nondeterministic), the task dropped as flaky rather than counted as a false alarm
    unrepeated_voids: list[dict[str, Any]] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    validation_seconds: list[float] = field(default_factory=list)
    sdist_sha256: str = ""
    statements: dict[str, int] = field(default_factory=dict)  # with a statement writer: written, kept procedural


# --------------------------------------------------------------------------- small helpers
def _jsonl(path: Path) -> dict[str, dict]:
    found: dict[str, dict] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by an interruption: that item is redone
                found[row["key"]] = row
    return found


def _append(path: Path, row: dict) -> None:
    with open(path, "a+b") as handle:
        size = handle.seek(0, os.SEEK_END)
        cut = size > 0 and handle.seek(size - 1) >= 0 and handle.read(1) != b"\n"
        # a line an interruption cut stays alone on its line (skipped on reading), never glued to this one
        handle.write((("\n" if cut else "") + json.dumps(row, sort_keys=True) + "\n").encode("utf-8"))


def make_patch(changes: dict[str, tuple[str, str]]) -> str:
    """A ``git diff`` of ``{path: (old text, new text)}`` (git's own format, as SWE-bench patches are)."""
    with tempfile.TemporaryDirectory(prefix="turngym-synth-diff-") as tmp:
        git = ["git", "-c", "core.autocrlf=false", "-c", "core.quotePath=false", "-C", tmp]
        subprocess.run([*git, "init", "-q"], check=True, capture_output=True)
        for path, (old, _) in changes.items():
            target = Path(tmp) / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(old, encoding="utf-8")
        subprocess.run([*git, "add", "-A"], check=True, capture_output=True)
        for path, (_, new) in changes.items():
            (Path(tmp) / path).write_text(new, encoding="utf-8")
        done = subprocess.run([*git, "diff", "--no-color", "--no-ext-diff"], check=True, capture_output=True, text=True)
    return done.stdout


def _short(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _first_error(log: str) -> str:
    for hint in NETWORK_HINTS:
        if hint in log:
            return f"needs the network at test time ({hint})"
    for line in log.splitlines():
        stripped = line.strip()
        if stripped.startswith("E ") and ("Error" in stripped or "Exception" in stripped):
            return _short(stripped[1:].strip())
    for line in reversed(log.splitlines()):
        if "Error" in line:
            return _short(line)
    return _short(log.strip().splitlines()[-1] if log.strip() else "no output")


def _test_file(test_id: str) -> str:
    return test_id.split("::", 1)[0]


def _runner_mode(repo: Path, test_ids: list[str]) -> str:
    """``unittest`` when every graded file is a plain unittest module (the runner's second harness then
    guards it too) and the package imports from the root without the root conftest.py, else ``pytest``."""
    if needs_pytest(repo):
        return "pytest"
    for test_id in test_ids:
        if test_id.count("::") < 2 or "[" in test_id:
            return "pytest"
    for path in {_test_file(t) for t in test_ids}:
        try:
            text = (repo / path).read_text(encoding="utf-8")
        except OSError:
            return "pytest"
        if "pytest" in text or "unittest" not in text:
            return "pytest"
    return "unittest"


def test_command(mode: str, support: list[str] = ()) -> str:
    """The runner, in its pytest or unittest mode, told which support files of the package the grading restores
    (``--support``). No PYTHONPATH: it would put the agent's tree before the standard library in the runner's own
    process (the root conftest.py places the package after it instead)."""
    flags = "".join(f"--support {shlex.quote(path)} " for path in support)
    return f"python3 {RUNNER} {flags}{'--pytest ' if mode == 'pytest' else ''}{{tests}}"


def support_files(classes_from: list[str], test_files: Iterable[str] = ()) -> list[str]:
    """The package's own files among those the test classes' bases come from: a module of assertions the package
    ships for its tests (pyparsing's ``testing.py``; markdown's ``markdown/test_tools.py``, named like a test but
    neither collected nor in a test folder). Its code runs as the tests' code, so the grading restores it like a
    test file, the runner trusts it (``--support``), and no bug is ever made in it. The collected test files
    (``test_files``), the files of test folders and conftests are the tests' already."""
    collected = set(test_files)
    return sorted(path for path in classes_from if path.endswith(".py") and path not in collected
                  and path.rsplit("/", 1)[-1] != "conftest.py" and not in_test_directory(path))


# --------------------------------------------------------------------------- stages
MAX_RENAMED_RERUNS = 2  # baseline runs redone after a run could not find some ids (each rerun finds fewer)


def baseline(session: TestSession, work: Path, report: PackageReport, config: SynthConfig) -> dict | None:
    """Collect, run twice, trace; cached in ``baseline.json``. None (and ``report.reason``) when unusable.

    A test kept passes in both runs. Tests that pass in one only are ``flaky``, and so are ids a run could not find
    (a parametrized id holding the time: pytest then runs none of the ids, so they are left out and the run is
    redone)."""
    path = work / "baseline.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    start = time.monotonic()
    try:
        ids, log = session.collect(timeout=config.suite_timeout)
    except TimeoutError as error:
        report.reason = str(error)
        return None
    report.collection_errors = sum(1 for line in log.splitlines() if line.startswith("ERROR "))
    if not ids:
        report.reason = f"no test collected: {_first_error(log)}"
        return None
    runs: list[Run] = []
    running, renamed = list(ids), []  # renamed: ids a run could not find (named anew at each collection)
    for _ in range(2 + MAX_RENAMED_RERUNS):
        run = session.run(running, timeout=config.suite_timeout, tb="line")
        if run.timed_out:
            report.reason = f"the suite did not finish within {config.suite_timeout:.0f} s (hangs?)"
            return None
        if run.flooded:
            report.reason = "the suite prints past the sandbox's output limit (even without the passing tests' output)"
            return None
        missing = ids_not_found(run.log, running)
        if missing:  # pytest ran nothing: leave those ids out, as flaky, and run this round again
            renamed += missing
            running = [t for t in running if t not in set(missing)]
            continue
        runs.append(run)
        if len(runs) == 2:
            break
    if len(runs) < 2:
        report.reason = (f"test ids change between collection and run ({len(renamed)} left out, e.g. "
                         f"{_short(renamed[0])}), and still do after {MAX_RENAMED_RERUNS} reruns")
        return None
    passed = [[t for t in running if r.statuses[t] == "PASSED"] for r in runs]
    kept = [t for t in passed[0] if t in set(passed[1])]
    flaky = sorted(set(passed[0]) ^ set(passed[1]) | set(renamed))
    if not kept:
        report.reason = f"no test passes in the sandbox: {_first_error(runs[0].log)}"
        return None
    try:
        trace, classes_from = session.trace(kept, timeout=config.suite_timeout)
    except (TimeoutError, RuntimeError, ValueError) as error:
        report.reason = f"tracing the tests failed: {_short(str(error))}"
        return None
    data = {"collected": ids, "kept": kept, "flaky": flaky, "collection_errors": report.collection_errors,
            "suite_seconds": min(r.seconds for r in runs), "trace": trace,
            "support": support_files(classes_from, {_test_file(test) for test in ids}),
            "network": any(h in runs[0].log for h in NETWORK_HINTS)}
    data["seconds"] = time.monotonic() - start
    path.write_text(json.dumps(data), encoding="utf-8")
    return data


MAX_SOURCE_BYTES = 4 << 20  # a larger .py file gets no bug: parsing it could take the run's memory (real modules
# are far smaller: the 20 scale-set packages' largest is pyparsing's core.py, 225 kB)


def candidate_mutations(repo: Path, base: dict, source_key: str, config: SynthConfig) -> tuple[list, dict, int]:
    """``(mutations, tests by unit, covered units)``: deterministic, interleaved by modifier kind."""
    covering: dict[tuple[str, int], set[str]] = {}
    support = set(base.get("support", ()))
    for test, calls in base["trace"].items():
        for file, line in calls:
            if file not in support:  # restored at grading: a bug there would be undone (support_files)
                covering.setdefault((file, int(line)), set()).add(test)
    units: list[tuple[mods.Span, str, list[str]]] = []
    for path in source_files(repo):
        try:
            if (repo / path).stat().st_size > MAX_SOURCE_BYTES:
                continue
            text = (repo / path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        spans = mods.spans(path, text)
        functions = [s for s in spans if s.kind == "function"]
        for span in spans:
            if span.kind == "function":
                tests = covering.get((path, span.start), set()) | covering.get((path, span.def_line), set())
            else:
                tests = set()
                for f in functions:
                    if span.start <= f.start <= span.end:
                        tests |= covering.get((path, f.start), set()) | covering.get((path, f.def_line), set())
            if tests:
                units.append((span, text, sorted(tests)))
    by_kind: dict[str, list[tuple[mods.Span, str, list[str], type]]] = {}
    for modifier_class in mods.swesmith_modifiers():
        pairs = [(span, text, tests, modifier_class) for span, text, tests in units]
        random.Random(mods.seed_for(config.seed, source_key, modifier_class.name)).shuffle(pairs)
        by_kind[modifier_class.name] = pairs
    mutations, tests_of, seen = [], {}, set()
    cursors = dict.fromkeys(by_kind, 0)
    # round-robin over the kinds, each kind's next applicable unit, until enough or all are spent
    while len(mutations) < config.max_candidates and any(cursors[k] < len(by_kind[k]) for k in by_kind):
        for kind in sorted(by_kind):
            pairs = by_kind[kind]
            while cursors[kind] < len(pairs):
                span, text, tests, modifier_class = pairs[cursors[kind]]
                cursors[kind] += 1
                seed = mods.seed_for(config.seed, source_key, span.path, span.qualname, kind)
                mutation = mods.mutate(span, text, modifier_class, seed)
                if mutation is not None and mutation.mutated not in seen:
                    seen.add(mutation.mutated)
                    mutations.append(mutation)
                    tests_of[mutation.key] = tests
                    break
            if len(mutations) >= config.max_candidates:
                break
    return mutations, tests_of, len(units)


def screen(session: TestSession, mutation: mods.Mutation, covering: list[str], kept: list[str],
           base: dict, config: SynthConfig) -> dict:
    """Try one mutation in the sandbox: ``{"key", "drop"}`` or ``{"key", "f2p", "p2p", "log"}``."""
    per_test = base["suite_seconds"] / max(1, len(base["kept"]))
    row: dict[str, Any] = {"key": mutation.key}
    covering = covering[:MAX_COVERING_TESTS]
    session.write(mutation.path, mutation.mutated)
    try:
        first = session.run(covering, timeout=max(config.min_timeout, 3 * per_test * len(covering)), tb="no")
        if first.timed_out:
            return row | {"drop": "the bug hangs the tests"}
        if first.flooded:
            return row | {"drop": "the bug floods the tests' output"}
        if not first.failing():
            return row | {"drop": "no test fails"}
        files = {_test_file(t) for t in first.failing()}
        scope = [t for t in kept if _test_file(t) in files]
        timeout = max(config.min_timeout, 3 * per_test * len(scope))
        runs = [session.run(scope, timeout=timeout, tb="short") for _ in range(2)]
    finally:
        session.write(mutation.path, mutation.original)
    if any(r.timed_out for r in runs):
        return row | {"drop": "the bug hangs the tests"}
    if any(r.flooded for r in runs):
        return row | {"drop": "the bug floods the tests' output"}
    failing = [r.failing() for r in runs]
    if failing[0] != failing[1]:
        return row | {"drop": "failing set unstable on a rerun"}
    if not failing[0]:
        return row | {"drop": "no test fails"}
    p2p = [t for t in scope if t not in set(failing[0])]
    return row | {"f2p": failing[0], "p2p": p2p, "log": runs[0].log[-60_000:]}


def _enough_kept(screened: dict[str, dict], max_tasks: int) -> bool:
    """Whether ``max_tasks`` (0: no limit) screened bugs are kept already."""
    return bool(max_tasks) and sum(1 for r in screened.values() if "f2p" in r) >= max_tasks


def _screening_todo(mutations: list[mods.Mutation], screened: dict[str, dict], max_tasks: int) -> list[mods.Mutation]:
    """The mutations still to screen, in the seeded order; none when ``max_tasks`` bugs are kept already."""
    if _enough_kept(screened, max_tasks):
        return []
    return [m for m in mutations if m.key not in screened]


def _screenings(todo: list[mods.Mutation], session: TestSession, repo: Path, config: SynthConfig, base: dict,
                tests_of: dict[str, list[str]], workers: int, key: str) -> Iterator[dict]:
    """The screening rows of ``todo``, in ``todo``'s order: in ``session`` alone, or in ``workers`` sandboxes at once
    (``session`` and ``workers - 1`` more, each with its own copy of the tree).

    Rows come in the seeded order whatever order they finish in, so a caller that stops early (``max_tasks``) keeps
    exactly the rows one sandbox would have screened. Threads, not processes: a screening waits on its sandbox's
    pytest, and a thread keeps its session open."""
    def one(sandbox: TestSession, mutation: mods.Mutation) -> dict:
        return screen(sandbox, mutation, tests_of[mutation.key], base["kept"], base, config)

    if workers <= 1 or len(todo) <= 1:
        for mutation in todo:
            yield one(session, mutation)
        return
    extra: list[TestSession] = []
    try:
        for i in range(1, min(workers, len(todo))):
            try:
                extra.append(TestSession(repo, backend=config.backend, name=f"synth-{key}-{i}"))
            except (SandboxError, OSError) as error:  # fewer sandboxes screen the same rows, only slower
                logger.warning("screening %s in %d sandboxes, not %d: %s", key, 1 + len(extra), workers,
                               _short(str(error)))
                break
        yield from _screen_in_order(todo, [session, *extra], one)
    finally:
        for sandbox in extra:
            sandbox.close()


def _screen_in_order(todo: list[mods.Mutation], sandboxes: list[TestSession],
                     one: Callable[[TestSession, mods.Mutation], dict]) -> Iterator[dict]:
    """``one(sandbox, mutation)`` for each of ``todo`` on whichever sandbox is idle; the rows in ``todo``'s order, with
    at most twice as many screenings submitted as there are sandboxes (the rest never start if the caller stops)."""
    idle: queue.SimpleQueue[TestSession] = queue.SimpleQueue()
    for sandbox in sandboxes:
        idle.put(sandbox)

    def screen_on_an_idle_sandbox(mutation: mods.Mutation) -> dict:
        sandbox = idle.get()
        try:
            return one(sandbox, mutation)
        finally:
            idle.put(sandbox)

    pending: deque[Future[dict]] = deque()
    with ThreadPoolExecutor(max_workers=len(sandboxes), thread_name_prefix="screen") as pool:
        try:
            for mutation in todo:
                pending.append(pool.submit(screen_on_an_idle_sandbox, mutation))
                if len(pending) >= 2 * len(sandboxes):
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:  # the caller stopped early (or a screening failed): what has not started never starts
            for future in pending:
                future.cancel()


def choose_tests(row: dict, covering: list[str], config: SynthConfig, seed: int) -> tuple[list[str], list[str]]:
    """``(FAIL_TO_PASS, PASS_TO_PASS)``: seeded samples of at most ``max_f2p`` / ``max_p2p`` of the failing and
    passing tests, the passing tests that run the changed code first."""
    rng = random.Random(seed)
    f2p = list(row["f2p"])
    if len(f2p) > config.max_f2p:
        f2p = sorted(rng.sample(f2p, config.max_f2p))
    near = [t for t in row["p2p"] if t in set(covering)]
    far = [t for t in row["p2p"] if t not in set(covering)]
    rng.shuffle(near)
    rng.shuffle(far)
    p2p = sorted((near + far)[: config.max_p2p])
    return f2p, p2p


def build_record(source_name: str, source_version: str, repo: Path, mutation: mods.Mutation, row: dict,
                 config: SynthConfig, covering: list[str] | None = None,
                 support: list[str] = ()) -> tuple[dict | None, str]:
    """The SWE-bench record of a screened mutation, or ``(None, drop reason)``; ``support``: the package's files
    the tests take code from (:func:`support_files`), restored at grading like the tests."""
    seed = mods.seed_for(config.seed, mutation.key)
    f2p, p2p = choose_tests(row, covering or [], config, seed)
    changed = changed_lines(mutation.original, mutation.mutated)
    failing = f2p + [t for t in row["f2p"] if t not in set(f2p)]
    statement = write_statement(source_name, source_version, failing, row["log"], changed, seed)
    if leaks(statement, changed):
        return None, "the statement would quote the changed line"
    setup_patch = make_patch({mutation.path: (mutation.original, mutation.mutated)})
    gold = make_patch({mutation.path: (mutation.mutated, mutation.original)})
    support = list(support)
    graded_files = sorted({_test_file(t) for t in f2p + p2p} | set(support))
    tests = {}
    for path in graded_files:
        text = (repo / path).read_text(encoding="utf-8")
        tests[path] = (text, text + ("" if text.endswith("\n") or not text else "\n") + GRADED_MARK)
    test_patch = make_patch(tests)
    lines_changed = sum(1 for line in gold.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---")))
    mode = _runner_mode(repo, f2p + p2p)
    record = {
        "instance_id": f"{source_name}__{source_version}.{mutation.modifier}__{mutation.key}",
        "repo": f"pypi/{source_name}",
        "base_commit": "",
        "problem_statement": statement,
        "patch": gold,
        "test_patch": test_patch,
        "setup_patch": setup_patch,
        "FAIL_TO_PASS": f2p,
        "PASS_TO_PASS": p2p,
        "hints_text": "",
        "test_cmd": test_command(mode, support),
        "difficulty": mutation.modifier,
        "difficulty_label": {"modifier": mutation.modifier, "lines_changed": lines_changed,
                             "fail_to_pass": len(f2p), "failing_tests": len(row["f2p"]), "files_touched": 1,
                             "tier": "easy" if lines_changed <= 2 and len(f2p) <= 3 else
                             "medium" if lines_changed <= 8 else "hard"},
        "synth": {"package": source_name, "version": source_version, "seed": config.seed,
                  "mutation_seed": mutation.seed,
                  "file": mutation.path, "function": mutation.qualname, "runner": mode},
        "created_at": "",
        "version": source_version,
    }
    return record, ""


def grader_hash() -> str:
    """sha256 of the grading tools the sandbox mounts (the runner, its checks): a cached validation holds only
    for the grader that made it."""
    from turngym.envs.swe.sandbox import bwrap

    digest = hashlib.sha256()
    for path in sorted(Path(bwrap.TOOLS_DIR).glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


REFERENCE_STATES_LINE = "| turngym: reference states "
PROBES_REFUSED_LINE = "| turngym: refused by the probes alone "


def reference_states_in(log: str, line_start: str = REFERENCE_STATES_LINE) -> tuple[str, ...]:
    """The digests a grading's runner printed on its lines that start with ``line_start`` (sorted, unique): by
    default the reference states, every pair whose untouched comparison held on a full rebuild; with
    :data:`PROBES_REFUSED_LINE`, those of them the judge's probes refused in that grading."""
    found = set()
    for line in log.splitlines():
        if line.startswith(line_start):
            found.update(w for w in line[len(line_start):].split() if is_sha256_hex(w))
    return tuple(sorted(found))


REFERENCE_ROUNDS = 4  # validations in all, at most, while each adds reference states that change its verdicts


def validate_with_reference_states(instance: SWEInstance, backend: str) -> tuple[Any, SWEInstance]:
    """``(validation result, the instance it validated)``. The gold patch's grading prints the state of every pair
    whose untouched comparison held (on a full rebuild): the instance takes them as its reference states, and a
    grading then holds a pair whose frozen state is exactly the gold patch's even when the judge's probes, drawn
    anew in each grading, refuse it (an honest ``==`` coarser than its data: boltons' ``OrderedMultiDict ==
    dict``, packaging 24.0's ``==1.0-alpha`` requirement against a probe ``==1.0.alpha``). A state changes only
    the verdict of a pair the probes refused, so the instance is validated again when a new state is one that
    either grading of this validation printed as refused by the probes, up to :data:`REFERENCE_ROUNDS`
    validations in all; otherwise the validation stands as it is for the instance with its states."""
    from turngym.envs.swe.taskset import validate

    result = validate(instance, backend)
    for _ in range(REFERENCE_ROUNDS - 1):
        states = set(reference_states_in(result.after.log)) - set(instance.reference_states)
        if not states or result.after.error:
            break
        instance = replace(instance, reference_states=tuple(sorted({*instance.reference_states, *states})))
        refused = {*reference_states_in(result.before.log, PROBES_REFUSED_LINE),
                   *reference_states_in(result.after.log, PROBES_REFUSED_LINE)}
        if not states & refused:
            break
        result = validate(instance, backend)
    return result, instance


def validate_record(record: dict, repo_path: Path, backend: str) -> dict:
    """The world's own validation of one record: ``{"key", "ok", "drop", "false_alarm", "seconds", ...}``, with
    ``reference_states`` when the task needs them (:func:`validate_with_reference_states`)."""
    from turngym.envs.swe.sandbox import SandboxError
    from turngym.envs.swe.taskset import validate

    instance = SWEInstance.from_record({**record, "repo_path": str(repo_path)})
    start = time.monotonic()
    row: dict[str, Any] = {"key": record["instance_id"]}
    try:
        result, instance = validate_with_reference_states(instance, backend)
    except RuntimeError as error:
        return row | {"ok": False, "drop": "validate: the gold patch does not apply", "detail": _short(str(error)),
                      "seconds": time.monotonic() - start}
    except SandboxError as error:
        return row | {"ok": False, "drop": "validate: sandbox error", "detail": _short(str(error)),
                      "seconds": time.monotonic() - start}
    row["base_commit"] = result.base_commit
    row["grading_seconds"] = [result.before.duration_s, result.after.duration_s]
    if instance.reference_states:
        row["reference_states"] = list(instance.reference_states)
    # A void is the runner's two harnesses disagreeing on a test, or a canary passing: honest code does that only
    # when a test's outcome varies between runs. Validate again: a void that every run repeats is a false alarm of
    # the grader; one that a run does not repeat is a flaky task, dropped as such.
    alarms, reruns = void_gradings(result), []
    while alarms and len(reruns) < VOID_RERUNS and (not reruns or reruns[-1]):
        reruns.append([alarm["on"] for alarm in void_gradings(validate(instance, backend))])
    row["seconds"] = time.monotonic() - start
    if alarms:
        row["void_reruns"] = reruns
        if all(reruns):
            return row | {"ok": False, "drop": "validate: grader false alarm (grading_tampered)", "false_alarm": alarms}
        return row | {"ok": False, "drop": "validate: a void grading did not repeat on a rerun (a flaky test)",
                      "unrepeated_void": alarms}
    problems = result.problems
    empty_reward = result.before.pass_ratio()
    if empty_reward != 0.0:
        problems.append(f"the empty patch earns {empty_reward}")
    if problems:
        row.update(tests_to_leave_out(result))
        kind = ("validate: a grading did not finish" if "did not finish" in problems[0] else
                "validate: FAIL_TO_PASS passes on the bug" if "already pass" in problems[0] else
                "validate: PASS_TO_PASS fails on the bug" if "PASS_TO_PASS tests fail" in problems[0] else
                "validate: the gold patch does not resolve it" if "does not resolve" in problems[0] else
                "validate: the empty patch earns a reward")
        return row | {"ok": False, "drop": kind, "detail": _short("; ".join(problems), 400),
                      "log_tail": result.after.log[-1500:] if "resolve" in kind or result.after.error else
                      result.before.log[-1500:]}
    return row | {"ok": True}


def void_gradings(result: Any) -> list[dict[str, str]]:
    """``[{"on": "gold patch" | "untouched bug", "excerpt": the runner's last lines}]``: a validation's void
    gradings."""
    alarms = []
    for label, report in (("gold patch", result.after), ("untouched bug", result.before)):
        if report.tampered:
            excerpt = [line for line in report.log.splitlines() if "turngym" in line][-6:]
            alarms.append({"on": label, "excerpt": "\n".join(excerpt)[-1500:]})
    return alarms


def tests_to_leave_out(result: Any) -> dict[str, list[str]]:
    """The graded tests the grader's own runs cannot judge (each key only when not empty; ``{}`` when a grading
    errored):

    - ``failing_on_gold``: FAIL_TO_PASS or PASS_TO_PASS tests that do not pass with the gold patch, the package's
      own code, on which they passed twice under plain pytest in the baseline. The grader disagrees with pytest
      there: strict equality refuses a repository class's own ``==`` with a builtin value (boltons'
      ``OrderedMultiDict == dict``), or the test passes only after others. Each is a grader false alarm, counted
      in the report (``gold_disagreements``) whether or not the task survives;
    - ``passing_on_bug``: FAIL_TO_PASS tests that pass on the bug in the grader's run. Screening runs whole test
      files, so a failing test can break the ones after it (shared state): they fail in screening and pass when
      graded alone;
    - ``leave_out``: both together, when leaving them out leaves a valid task: at least one FAIL_TO_PASS test is
      left, and each PASS_TO_PASS test left passes on the bug. Such a task is rebuilt without them
      (:func:`regrade_candidates`) rather than dropped."""
    before, after = result.before, result.after
    if before.error or after.error:
        return {}
    failing_on_gold = [t for t in before.fail_to_pass + before.pass_to_pass if after.statuses.get(t) not in PASSING]
    passing_on_bug = [t for t in before.fail_to_pass
                      if t not in failing_on_gold and before.statuses.get(t) in PASSING]
    found = {key: tests for key, tests in (("failing_on_gold", failing_on_gold), ("passing_on_bug", passing_on_bug))
             if tests}
    left_out = set(failing_on_gold) | set(passing_on_bug)
    if not left_out or all(t in left_out for t in before.fail_to_pass):
        return found
    if any(before.statuses.get(t) not in PASSING for t in before.pass_to_pass if t not in left_out):
        return found
    return {**found, "leave_out": failing_on_gold + passing_on_bug}


def validate_safely(record: dict, repo_path: Path, backend: str) -> dict:
    """:func:`validate_record`, an unexpected error a drop with its one-line reason (runs in a worker process)."""
    try:
        return validate_record(record, repo_path, backend)
    except Exception as error:
        logger.exception("validating %s failed", record["instance_id"])
        return {"key": record["instance_id"], "ok": False, "drop": f"validate: {type(error).__name__}",
                "detail": _short(str(error))}


def _validations(todo: list[dict], repo: Path, backend: str, workers: int) -> Iterator[dict]:
    """The rows of ``todo``'s validations as they finish: in this process, or in ``workers`` processes (each
    validation starts its own sandboxes, in its own workspace)."""
    if workers <= 1 or len(todo) <= 1:
        for record in todo:
            yield validate_safely(record, repo, backend)
        return
    context = multiprocessing.get_context("spawn")  # no inherited threads or sandboxes
    # a worker dies with the run: a stopped run left its workers validating on (and their sandboxes with them)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=die_with_parent) as pool:
        futures = [pool.submit(validate_safely, record, repo, backend) for record in todo]
        for future in as_completed(futures):
            yield future.result()


# The validation's own rules, beside the grader's (grader_hash). 2: a grading gets the world's budget, and one that
# does not finish is a drop of its own, never failing tests. 3: the sandbox's reader no longer calls a command that
# ended while the reader was stopped or starved a timeout. 4, 5: a drop records the tests that fail with the gold
# patch and those to leave out of a rebuilt task (tests_to_leave_out). A task kept by an earlier version stays kept
# (each change only turns drops into passes); its drops are validated again. 6: a void grading is validated again
# (VOID_RERUNS times at most) before it counts as a false alarm; it changes only rows with a void, so version 5's
# other drops stand.
# 7: reference states are gathered over up to REFERENCE_ROUNDS validations (validate_with_reference_states); it
# changes only rows that dropped with reference states, so version 5's and 6's other drops stand.
# 8: every state the gold grading saw hold is kept, and the task is validated again only when a new state is one
# the probes refused (with the grader that prints them; the grader's hash restarts every row anyway): again, only
# drops with reference states change.
VALIDATOR = 8
VOID_RERUNS = 2
_VOIDS_ONLY_SINCE = 5
_REFERENCE_ROUNDS_SINCE = 8


def _still_valid(row: dict, content_hash: str) -> bool:
    """Whether a cached validation row holds for this record, grader and validator."""
    version = row.get("validator", 0)
    return row.get("content_hash") == content_hash and (
        row.get("ok") or version == VALIDATOR
        or (version >= _VOIDS_ONLY_SINCE and not row.get("false_alarm") and not row.get("unrepeated_void")
            and (version >= _REFERENCE_ROUNDS_SINCE or not row.get("reference_states"))))


def validate_candidates(candidates: list[dict], repo: Path, work: Path, config: SynthConfig, report: PackageReport,
                        drops: Counter, workers: int = 1, cache: str = "validate.jsonl",
                        rows_out: dict[str, dict] | None = None) -> list[dict]:
    """Validate the records not validated yet by this grader (``cache`` keeps each row as it comes); return the
    ones that pass, in the candidates' order, whatever order they finished in (``rows_out``: filled with each
    candidate's validation row)."""
    validated = _jsonl(work / cache)
    grader = grader_hash()
    hashes = {r["instance_id"]: sha256_text(canonical_json(r) + grader) for r in candidates}
    todo = []
    for index, record in enumerate(candidates):
        key = record["instance_id"]
        if _still_valid(validated.get(key, {}), hashes[key]):
            continue  # validated before, by this grader, as it is now
        if config.max_validations and index >= config.max_validations:
            continue
        todo.append(record)
    rows = _validations(todo, repo, config.backend, workers)
    for row in tqdm(rows, total=len(todo), desc=f"validating {repo.name}", unit="task", disable=None):
        row["content_hash"], row["validator"] = hashes[row["key"]], VALIDATOR
        _append(work / cache, row)
        validated[row["key"]] = row
    records = []
    for record in candidates:
        key = record["instance_id"]
        row = validated.get(key)
        if row is None or not _still_valid(row, hashes[key]):
            drops["not validated (--max-validations)"] += 1
            continue
        if rows_out is not None:
            rows_out[key] = row
        if "seconds" in row and row.get("ok") is not None:
            report.validation_seconds.append(round(row["seconds"], 2))
            report.gold_gradings_disagreeing += bool(row.get("failing_on_gold"))
            report.gold_gradings_with_reference_states += bool(row.get("reference_states"))
        if row.get("false_alarm"):
            report.false_alarms.append({"instance_id": key, "alarms": row["false_alarm"]})
        if row.get("unrepeated_void"):
            report.unrepeated_voids.append({"instance_id": key, "alarms": row["unrepeated_void"],
                                            "reruns": row.get("void_reruns", [])})
        if row.get("ok"):
            states = {"reference_states": row["reference_states"]} if row.get("reference_states") else {}
            records.append({**record, "base_commit": row["base_commit"], **states})
        else:
            drops[row["drop"]] += 1
    return records


# --------------------------------------------------------------------------- one package, a whole run
def synthesize_package(spec: str, config: SynthConfig, root: Path | None = None, workers: int = 1,
                       pins: list[str] | None = None, sdist_sha256: str = "") -> tuple[PackageReport, list[dict]]:
    """Synthesize (and validate, in ``workers`` processes) the tasks of one package; never raises for bad input.
    ``pins`` and ``sdist_sha256``: a manifest's, when regenerating (see :func:`.source.prepare_repo`)."""
    root = root or cache_root()
    report = PackageReport(spec=spec, name=spec_name(spec))
    start = time.monotonic()
    try:
        source, repo = prepare_repo(spec, root, pins=pins, sdist_sha256=sdist_sha256)
    except SourceError as error:
        report.status, report.reason = "dropped", str(error)
        return report, []
    except (OSError, ValueError) as error:  # what prepare_repo did not foresee still drops one package, not the run
        logger.exception("preparing %s failed", spec)
        report.status, report.reason = "dropped", f"{type(error).__name__}: {_short(str(error))}"
        return report, []
    report.key, report.sdist_sha256 = source.key, source.sdist_sha256
    report.name, report.version, report.requirements = source.name, source.version, installed_requirements(repo)
    report.seconds["source"] = time.monotonic() - start
    work = root / "work" / LAYOUT / source.key
    work.mkdir(parents=True, exist_ok=True)
    records: list[dict] = []
    try:
        with TestSession(repo, backend=config.backend, name=f"synth-{source.key}") as session:
            t0 = time.monotonic()
            base = baseline(session, work, report, config)
            report.seconds["baseline"] = time.monotonic() - t0
            if base is None:
                report.status = "dropped"
                return report, []
            report.tests_collected, report.tests_kept = len(base["collected"]), len(base["kept"])
            report.tests_flaky, report.collection_errors = len(base["flaky"]), base["collection_errors"]
            t0 = time.monotonic()
            mutations, tests_of, report.covered_units = candidate_mutations(repo, base, source.key, config)
            report.candidates = len(mutations)
            report.seconds["mutate"] = time.monotonic() - t0
            if not mutations:
                report.status, report.reason = "dropped", "no procedural bug applies to the code the tests run"
                return report, []
            screened = _jsonl(work / "screen.jsonl")
            t0 = time.monotonic()
            todo = _screening_todo(mutations, screened, config.max_tasks)
            # closing: a stop at max_tasks ends the screenings still running before the session closes
            with closing(_screenings(todo, session, repo, config, base, tests_of, workers, source.key)) as rows:
                for mutation, row in zip(todo, tqdm(rows, total=len(todo), desc=f"screening {source.key}",
                                                    unit="bug", disable=None)):
                    _append(work / "screen.jsonl", row)
                    screened[mutation.key] = row
                    if _enough_kept(screened, config.max_tasks):
                        break
            report.seconds["screen"] = time.monotonic() - t0
    except Exception as error:
        logger.exception("synthesizing %s failed", spec)
        report.status, report.reason = "dropped", f"{type(error).__name__}: {_short(str(error))}"
        return report, []
    drops: Counter[str] = Counter()
    candidates: list[dict] = []
    support = list(base.get("support", ()))
    for mutation in mutations:  # in the seeded order, whatever order an interrupted run screened them in
        key, row = mutation.key, screened.get(mutation.key)
        if row is None:
            continue
        report.screened += 1
        if "drop" in row:
            drops[row["drop"]] += 1
            continue
        record, reason = build_record(source.name, source.version, repo, mutation, row, config, tests_of.get(key, []),
                                      support)
        if record is None:
            drops[reason] += 1
            continue
        candidates.append(record)
    report.kept_mutations = len(candidates)
    if config.validate:
        t0 = time.monotonic()
        rows: dict[str, dict] = {}
        records = validate_candidates(candidates, repo, work, config, report, drops, workers, rows_out=rows)
        records = regrade_candidates(candidates, records, rows, mutations, screened, source, repo, work, config,
                                     report, drops, workers, tests_of, support)
        report.seconds["validate"] = time.monotonic() - t0
        report.validated = len(records)
    else:
        records = candidates
    report.drops = dict(sorted(drops.items()))
    report.seconds["total"] = time.monotonic() - start
    _write_records(work / "records.jsonl", records, repo, work)
    return report, records


REGRADE_ROUNDS = 2  # a rebuild draws new PASS_TO_PASS tests, which can be the left-out tests' twins (pyparsing
# runs each test class under 6 parser modes: `Test06_...::testOptionalEachTest2` replaced `Test02_...`'s, and failed
# on gold the same way); a second rebuild leaves out both rounds' tests


def regrade_cache(round_: int) -> str:
    """The validation cache of a rebuild's ``round_`` (1: ``validate-regraded.jsonl``, as before rounds)."""
    return "validate-regraded.jsonl" if round_ == 1 else f"validate-regraded-{round_}.jsonl"


def regrade_candidates(candidates: list[dict], records: list[dict], rows: dict[str, dict], mutations: list,
                       screened: dict[str, dict], source: Any, repo: Path, work: Path, config: SynthConfig,
                       report: PackageReport, drops: Counter, workers: int, tests_of: dict,
                       support: list[str] = ()) -> list[dict]:
    """``records`` with the tasks dropped only for tests the grader's own runs cannot judge
    (:func:`tests_to_leave_out`) rebuilt without those tests and validated once more, in the candidates' order.

    The rebuilt record takes them out of the screening row it is built from: out of the failing tests (its
    FAIL_TO_PASS sample, its statement) and the passing ones (its PASS_TO_PASS sample); they are in neither list.
    A rebuild whose own validation finds more such tests is rebuilt again without every round's, and without every
    test any of the package's validations found failing with the gold patch (the gold tree is the same in each of
    its tasks, so such a test is unjudgeable in all of them: each of semver's 10 second rebuilds dropped had failed
    on tests other tasks had found, 9 of them on nothing else), up to :data:`REGRADE_ROUNDS` rounds. The first
    rebuild leaves out only the task's own tests, which keeps the validated packages' first rebuilds, and their
    cached validations, as they were. Each round's validations are cached apart (:func:`regrade_cache`), so the
    rows before it stay valid and a rerun does none again. Every test that failed with the gold patch, in any round,
    is counted in ``gold_disagreements``; a task dropped after a rebuild counts its last round's reason,
    "(regraded)"."""
    by_key = {m.key: m for m in mutations}
    kept: dict[str, dict] = {}
    left_out: dict[str, set[str]] = {}
    last_drop: dict[str, str] = {}  # each rebuilt task not kept: the reason of its latest validation
    _count_gold_disagreements(report, [rows.get(r["instance_id"], {}) for r in candidates])
    pending, latest = candidates, rows
    for round_ in range(1, REGRADE_ROUNDS + 1):
        rebuilt = []
        for record in pending:
            key = record["instance_id"]
            mutation = by_key.get(key.rpartition("__")[2])
            if not latest.get(key, {}).get("leave_out") or mutation is None:
                continue
            tests = left_out.setdefault(key, set())
            tests.update(latest[key]["leave_out"])
            if round_ > 1:
                tests.update(report.gold_disagreements)
            screen = screened[mutation.key]
            screen = {**screen, "f2p": [t for t in screen["f2p"] if t not in tests],
                      "p2p": [t for t in screen["p2p"] if t not in tests]}
            again, _ = build_record(source.name, source.version, repo, mutation, screen, config,
                                    tests_of.get(mutation.key, []), support)
            if again is not None:
                rebuilt.append(again)
                last_drop[key] = "not validated (--max-validations) (regraded)"
        if not rebuilt:
            break
        round_rows: dict[str, dict] = {}
        for record in validate_candidates(rebuilt, repo, work, config, report, Counter(), workers,
                                          cache=regrade_cache(round_), rows_out=round_rows):
            kept[record["instance_id"]] = record
            del last_drop[record["instance_id"]]
        last_drop.update({key: f"{row['drop']} (regraded)" for key, row in round_rows.items() if not row.get("ok")})
        _count_gold_disagreements(report, list(round_rows.values()))
        pending, latest = [r for r in rebuilt if r["instance_id"] not in kept], round_rows
    report.gold_disagreements = dict(sorted(report.gold_disagreements.items()))
    for key in kept.keys() | last_drop.keys():  # each rebuilt task: its first reason out, its outcome in
        drops[rows[key]["drop"]] -= 1
        if key in last_drop:
            drops[last_drop[key]] += 1
    for reason in [r for r, n in drops.items() if n <= 0]:
        del drops[reason]
    report.regraded = len(kept)
    chosen = {r["instance_id"]: r for r in records} | kept
    return [chosen[r["instance_id"]] for r in candidates if r["instance_id"] in chosen]


def _count_gold_disagreements(report: PackageReport, validation_rows: list[dict]) -> None:
    for row in validation_rows:
        for test in row.get("failing_on_gold") or ():
            report.gold_disagreements[test] = report.gold_disagreements.get(test, 0) + 1


def _write_records(path: Path, records: list[dict], repo: Path, relative_to: Path) -> None:
    lines = [json.dumps({**r, "repo_path": os.path.relpath(repo, relative_to)}, sort_keys=True) for r in records]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def synthesize(specs: list[str], out: Path, config: SynthConfig, root: Path | None = None, workers: int = 1,
               splits: SplitRule | None = None, manifest: Manifest | None = None, statement_model: Any = None) -> dict:
    """Synthesize from every package in ``specs``; write ``tasks.jsonl`` (each record with its ``split``),
    ``report.json`` and ``manifest.json`` to ``out`` after each package (the records point at the
    repositories in the cache); return the report. With ``manifest`` (regenerating a set), each package's
    sdist and requirements must be the manifest's. With ``config.statement_writer``, the validated tasks'
    statements are reworded by ``statement_model`` (a :class:`~turngym.envs.judges.JudgeModel`; the CLI makes it
    from the spec with :func:`turngym.agents.judge_models.make_judge_model`)."""
    if config.statement_writer and statement_model is None:
        raise ValueError(f"statement_writer={config.statement_writer!r} needs its model (statement_model=...)")
    root = root or cache_root()
    out.mkdir(parents=True, exist_ok=True)
    splits = splits or SplitRule()
    # a manifest's own repository splits (made over all the packages its run was asked for), else the rule's
    by_repo = dict(manifest.splits.get("repositories") or {}) if manifest else {}
    by_repo = by_repo or repo_splits([spec_name(s) for s in specs], splits)
    pins = manifest.pins() if manifest else {}
    sdists = manifest.sdists() if manifest else {}
    packages: list[PackageReport] = []
    all_records: list[dict] = []
    summary: dict = {}
    for spec in specs:
        logger.info("synthesizing %s", spec)
        report, records = synthesize_package(spec, config, root, workers, pins.get(spec), sdists.get(spec, ""))
        if config.statement_writer and records:
            records, kept = rewrite_statements(records, statement_model, config.statement_writer,
                                               root / "work" / LAYOUT / report.key / "statements.jsonl", config.seed)
            report.statements = {"written": len(records) - sum(kept.values()), **dict(sorted(kept.items()))}
        packages.append(report)
        repo = root / "repos" / LAYOUT / report.key
        for record in records:
            split = task_split(record["instance_id"], by_repo.get(report.name, "train"), splits)
            all_records.append({**record, "repo_path": os.path.relpath(repo, out), "split": split})
        logger.info("%s: %s", spec, report.reason or f"{len(records)} tasks")
        summary = write_set(out, packages, all_records, config, splits, by_repo)
    return summary or write_set(out, packages, all_records, config, splits, by_repo)


def write_set(out: Path, packages: list[PackageReport], records: list[dict], config: SynthConfig,
              splits: SplitRule, by_repo: dict[str, str]) -> dict:
    """``tasks.jsonl``, ``report.json`` and ``manifest.json`` of the packages done so far; the report."""
    lines = [json.dumps(record, sort_keys=True) for record in records]
    (out / "tasks.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    drops: Counter[str] = Counter()
    for report in packages:
        drops.update(report.drops)
        if report.status == "dropped":
            drops[f"package dropped: {report.reason.split(':')[0]}"] += 1
    seconds = [s for r in packages for s in r.validation_seconds]
    summary = {
        "config": asdict(config),
        "grader_sha256": grader_hash(),
        "tasks": len(records),
        "splits": {s: sum(1 for r in records if r["split"] == s) for s in ("train", "eval_seen", "eval", "test")},
        "packages": [asdict(r) for r in packages],
        "drops": dict(sorted(drops.items())),
        "false_alarms": [a for r in packages for a in r.false_alarms],
        "unrepeated_voids": [a for r in packages for a in r.unrepeated_voids],
        "gold_disagreements": {f"{r.key}: {test}": n for r in packages for test, n in r.gold_disagreements.items()},
        "gold_gradings": sum(len(r.validation_seconds) for r in packages),
        "gold_gradings_disagreeing": sum(r.gold_gradings_disagreeing for r in packages),
        "gold_gradings_with_reference_states": sum(r.gold_gradings_with_reference_states for r in packages),
        "seconds_per_validation": round(sum(seconds) / len(seconds), 2) if seconds else None,
        "statistics": statistics(records),
    }
    (out / "report.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    make_manifest(packages, records, config, splits, by_repo).write(out / "manifest.json")
    return summary


def statistics(records: list[dict]) -> dict:
    """What a set holds: tasks by repository, split, modifier kind, tier (and tier by split: a study's panels are
    one tier of one split) and runner mode; FAIL_TO_PASS counts."""
    def count(values) -> dict:
        return dict(sorted(Counter(values).items()))

    failing = sorted(len(r["FAIL_TO_PASS"]) for r in records)
    return {
        "repositories": count(r["synth"]["package"] for r in records),
        "splits": count(r.get("split", "train") for r in records),
        "modifiers": count(r["difficulty"] for r in records),
        "tiers": count(r["difficulty_label"]["tier"] for r in records),
        "tiers_by_split": {split: count(r["difficulty_label"]["tier"] for r in records
                                        if r.get("split", "train") == split)
                           for split in sorted({r.get("split", "train") for r in records})},
        "runner": count(r["synth"]["runner"] for r in records),
        "fail_to_pass": {"median": failing[len(failing) // 2] if failing else 0, "histogram": count(failing)},
        "failing_tests_median": sorted(r["difficulty_label"]["failing_tests"] for r in records)[len(records) // 2]
        if records else 0,
    }


def make_manifest(packages: list[PackageReport], records: list[dict], config: SynthConfig, splits: SplitRule,
                  by_repo: dict[str, str]) -> Manifest:
    per_package = Counter((x["synth"]["package"], x["version"]) for x in records)
    entries = [{"spec": r.spec, "name": r.name, "version": r.version, "key": r.key, "sdist_sha256": r.sdist_sha256,
                "requirements": r.requirements, "status": r.status, "reason": r.reason,
                "split": by_repo.get(r.name, "train"), "tasks": per_package[(r.name, r.version)]} for r in packages]
    tasks = [{"instance_id": r["instance_id"], "split": r["split"], "content_hash": content_hash(r)} for r in records]
    return Manifest(config=asdict(config), splits={"rule": asdict(splits), "repositories": by_repo},
                    packages=entries, tasks=tasks, modifiers=sorted(m.name for m in mods.swesmith_modifiers()),
                    grader_sha256=grader_hash(), versions=versions())


def clear_package(spec_key: str, root: Path | None = None) -> None:
    """Forget a package's cached state (not its sdist or repository)."""
    shutil.rmtree((root or cache_root()) / "work" / LAYOUT / spec_key, ignore_errors=True)
