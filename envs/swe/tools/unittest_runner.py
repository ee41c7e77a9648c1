"""Run unittest tests named by pytest-style ids and print one result line per test.

Runs inside the sandbox with the sandbox's own Python (the host's /usr/bin/python3 under bwrap,
the image's python3 under docker), so it uses the standard library only.

    python3 /opt/turngym/unittest_runner.py tests/test_a.py::TestA::test_x [more ids...]

Two processes (issue #15: code under test must not be able to forge its verdict):

* the **parent** never imports the code under test. It reads a nonce from the first line of
  standard input, makes itself non-dumpable (no ptrace, no ``/proc/<pid>/mem`` for processes of
  the same user), and prints every result line as ``<nonce> STATUS <id>``. The output of the tests
  reaches the log only through the parent, each line indented with ``| ``: printing a result line
  from a test cannot produce a line the grader reads;
* one **child** per test file (a fresh ``python3 -B -s`` process: no nonce in its memory, no
  bytecode read or written) imports and runs that file's tests and reports each result as a JSON
  line on a private pipe. The parent counts a child's results only if the child ends normally and
  reports every test it was given; anything else makes the file's unreported tests ``ERROR``.
  The child puts the repository on ``sys.path`` *after* the standard library (a ``json.py`` at the
  repository root cannot replace the standard library's), and checks after the run that
  unittest's result and test-case classes are the ones it started with (a neutered
  ``TestResult.addFailure`` makes the file's tests ``ERROR``).

What remains trusted (docs/worlds/swe.md, "Threat model"): code under test runs in the child, in
the same process as the test's assertions, so code written to target this runner (writing a forged
JSON line on the child's pipe, or weakening assertion helpers it calls) can still lie about the
tests of its own file.

Ids: ``path.py::Class::method``, ``path.py::Class``, ``path.py`` or a dotted unittest name. Files
run in the order of their first id, each test reported as soon as its file finishes.
"""

import json
import os
import subprocess
import sys
import threading

CHILD = "--child"


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


# --------------------------------------------------------------------------- the child
def _harness_snapshot(unittest):
    classes = (unittest.TestResult, unittest.TestCase, unittest.TestSuite, unittest.TestLoader)
    return {(cls.__name__, name): value for cls in classes for name, value in vars(cls).items()}


def child_main(result_fd):
    import traceback
    import unittest

    test_ids = json.loads(sys.stdin.readline())
    sys.stdin = open(os.devnull)  # noqa: SIM115 - the tests get an empty stdin
    report = os.fdopen(result_fd, "w", encoding="utf-8")
    cwd = os.getcwd()
    # the standard library first, then the repository: a module at the repository root cannot
    # shadow a standard-library module; the runner's own directory is not on the path
    script_dir = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != script_dir]
    stdlib = [i for i, p in enumerate(sys.path) if "-packages" not in p and p.startswith(sys.base_prefix)]
    sys.path.insert(stdlib[-1] + 1 if stdlib else 0, cwd)
    # everything the verdict needs is bound to locals before the code under test is imported:
    # patching this module's functions (status_of...) from a test changes nothing here
    classify, harness, dumps, result_class = status_of, _harness_snapshot, json.dumps, unittest.TestResult
    name_of = unittest_name
    snapshot = harness(unittest)
    loader = unittest.TestLoader()
    results = []
    for test_id in test_ids:
        result = result_class()
        try:
            loader.loadTestsFromName(name_of(test_id)).run(result)
            status = classify(result)
        except BaseException:  # noqa: BLE001 - an import error or a SystemExit in a test is a failed test
            traceback.print_exc()
            status = "ERROR"
        for _, text in result.errors + result.failures:
            sys.stderr.write(text)
        results.append([test_id, status])
    sys.stdout.flush()
    sys.stderr.flush()
    if harness(unittest) != snapshot:
        sys.stderr.write("turngym: the code under test modified unittest's classes; its results do not count\n")
        results = [[test_id, "ERROR"] for test_id in test_ids]
    for test_id, status in results:
        report.write(dumps({"id": test_id, "status": status}) + "\n")
    report.write(dumps({"end": len(results)}) + "\n")
    report.flush()
    os._exit(0)


# --------------------------------------------------------------------------- the parent
def _no_dump():
    """prctl(PR_SET_DUMPABLE, 0): processes of the same user can no longer ptrace us or read our memory."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def run_file(test_ids, emit):
    path = test_ids[0].partition("::")[0]
    if path.endswith(".py") and not os.path.isfile(path):  # nothing to import: no process needed
        emit(f"| turngym: {path} does not exist")
        return dict.fromkeys(test_ids, "ERROR")
    read_fd, write_fd = os.pipe()
    command = [sys.executable, "-B", "-s", "--check-hash-based-pycs", "always", os.path.abspath(__file__),
               CHILD, str(write_fd)]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               pass_fds=(write_fd,), close_fds=True)
    os.close(write_fd)
    process.stdin.write((json.dumps(test_ids) + "\n").encode())
    process.stdin.close()
    frames = []
    reader = threading.Thread(target=lambda: frames.append(_read_all(read_fd)), daemon=True)
    reader.start()
    output = process.stdout.read()
    code = process.wait()
    reader.join()
    frames = frames[0] if frames else b""
    for line in output.decode("utf-8", "replace").splitlines():
        emit("| " + line)
    statuses, ended = {}, None
    for raw in frames.decode("utf-8", "replace").splitlines():
        try:
            frame = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(frame, dict):
            continue
        if "end" in frame:
            ended = frame["end"]
        elif frame.get("id") in test_ids and frame.get("status") in ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL"):
            statuses[frame["id"]] = frame["status"]
    complete = code == 0 and ended == len(test_ids) and len(statuses) == len(set(test_ids))
    if not complete:
        emit(f"| turngym: the test process ended abnormally (exit {code}); its tests count as errors")
    return {t: (statuses[t] if complete else "ERROR") for t in test_ids}


def _read_all(fd):
    with os.fdopen(fd, "rb") as pipe:
        return pipe.read()


def main(test_ids):
    nonce = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.readline().strip()
    sys.stdin = open(os.devnull)  # noqa: SIM115
    _no_dump()
    prefix = (nonce + " ") if nonce else ""
    del nonce
    out = sys.stdout

    def emit(line):
        out.write(line + "\n")
        out.flush()

    groups = {}
    for test_id in dict.fromkeys(test_ids):
        groups.setdefault(file_of(test_id), []).append(test_id)
    for ids in groups.values():
        for test_id, status in run_file(ids, emit).items():
            emit("\n" + prefix + status + " " + test_id)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == CHILD:
        child_main(int(sys.argv[2]))
    sys.exit(main(sys.argv[1:]))
