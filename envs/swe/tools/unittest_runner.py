"""Run unittest tests named by pytest-style ids and print one result line per test.

Runs inside the sandbox with the sandbox's own Python (the host's /usr/bin/python3 under bwrap,
the image's python3 under docker), so it uses the standard library only.

    python3 /opt/turngym/unittest_runner.py tests/test_a.py::TestA::test_x [more ids...]

The first line of standard input is a nonce; every result line starts with it
(``<nonce> PASSED tests/test_a.py::TestA::test_x``), so code under test, which never sees the
nonce, cannot forge results by printing them. Ids: ``path.py::Class::method``, ``path.py::Class``,
``path.py`` or a dotted unittest name. Tests run in the order given, each reported as soon as it
finishes, so a test that hangs or kills the interpreter leaves the earlier results in place.
"""

import os
import sys
import traceback
import unittest


def unittest_name(test_id):
    """``tests/test_a.py::TestA::test_x`` -> ``tests.test_a.TestA.test_x``."""
    path, _, rest = test_id.partition("::")
    if path.endswith(".py"):
        path = path[: -len(".py")].replace("/", ".").replace(os.sep, ".")
    return ".".join([path] + [part for part in rest.split("::") if part])


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


def main(test_ids):
    nonce = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.readline().strip()
    sys.stdin = open(os.devnull)  # noqa: SIM115 - for the whole run; tests get an empty stdin, never the nonce
    report_fd = os.dup(1)
    prefix = (nonce + " ") if nonce else ""
    del nonce
    sys.path.insert(0, os.getcwd())
    loader = unittest.TestLoader()

    def report(status, test_id):
        sys.stdout.flush()
        sys.stderr.flush()
        os.write(report_fd, ("\n" + prefix + status + " " + test_id + "\n").encode("utf-8", "replace"))

    for test_id in test_ids:
        result = unittest.TestResult()
        try:
            loader.loadTestsFromName(unittest_name(test_id)).run(result)
            status = status_of(result)
        except BaseException:  # noqa: BLE001 - an import error or a SystemExit in a test is a failed test
            traceback.print_exc()
            status = "ERROR"
        for _, text in result.errors + result.failures:
            sys.stderr.write(text)
        report(status, test_id)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
