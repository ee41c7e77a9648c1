"""Which command grades an SWE task: turngym's runner, whatever pytest command line the record names.

SWE-bench, SWE-Gym and SWE-smith records name plain pytest calls (``pytest --no-header -rA --tb=no -p
no:cacheprovider``, ``pytest -rA {tests}``, ``pytest --disable-warnings --color=no --tb=no --verbose``).
Graded from its own log, such a command is decided by whatever the code under test prints (a ``print``
of ``PASSED`` lines, a plugin from ``pyproject.toml``). So every pytest command line, whatever its options,
is graded through the runner (``tools/unittest_runner.py --pytest``), which keeps only the plugins it
names with ``-p``; the options that shape the log, select tests or configure pytest are turngym's to set.
Any other command is refused unless the record opts in (``"unprotected_test_cmd": true``).

The line is read with :mod:`shlex` (quotes, ``-p NAME`` / ``-pNAME``, ``--opt=value`` / ``--opt value``),
with shell operators split out: ``cd sub && pytest`` is not a plain pytest call, and is refused.
"""

from __future__ import annotations

import logging
import os
import re
import shlex

logger = logging.getLogger(__name__)

RUNNER_PATH = "/opt/turngym/unittest_runner.py"
# pytest through turngym's runner (envs/swe/tools, mounted read-only at /opt/turngym in every sandbox).
DEFAULT_TEST_CMD = f"python3 {RUNNER_PATH} --pytest {{tests}}"
PLACEHOLDERS = ("{tests}", "{test_files}")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")
_PYTHON = re.compile(r"python(?:3(?:\.\d+)?)?")
_SHELL_OPERATOR = re.compile(r"[();<>|&]+")


class UnprotectedTestCommand(ValueError):
    """A task's test command whose log, and so its grade, the code under test could write."""


def _words(command: str) -> list[str] | None:
    """``command`` split as the shell would, operators as words of their own; None if it cannot be split."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote
        return None


def pytest_plugins(command: str) -> list[str] | None:
    """The plugins (``-p NAME``) of a plain pytest call, or None when ``command`` is not one.

    A plain call: optional ``NAME=value`` assignments, then ``pytest``, ``py.test`` or ``python[3] -m pytest``,
    then options and positional words (tests, placeholders), and no shell operator. ``-p no:NAME`` is dropped:
    the runner disables what it must itself."""
    words = _words(command)
    if not words or any(_SHELL_OPERATOR.fullmatch(w) for w in words):
        return None
    while words and _ASSIGNMENT.fullmatch(words[0]):
        words = words[1:]
    if words[:1] and os.path.basename(words[0]) in ("pytest", "py.test"):
        rest = words[1:]
    elif len(words) >= 3 and _PYTHON.fullmatch(os.path.basename(words[0])) and words[1:3] == ["-m", "pytest"]:
        rest = words[3:]
    else:
        return None
    plugins: list[str] = []
    index = 0
    while index < len(rest):
        word = rest[index]
        if word == "-p":
            if index + 1 == len(rest):
                return None
            plugins.append(rest[index + 1])
            index += 2
            continue
        if word.startswith("-p") and not word.startswith("--"):
            plugins.append(word[2:])
        index += 1
    return [p for p in dict.fromkeys(plugins) if not p.startswith("no:")]


def runs_only_the_runner(command: str) -> bool:
    """Whether ``command`` is one bare call of the runner: optional ``NAME=value`` assignments, ``python[3]`` with
    options, then :data:`RUNNER_PATH`, and no shell operator. Nothing else runs before it, so nothing of the code
    under test runs before the runner's ``main()`` (the grading gives such a call the gold tree as its reference)."""
    words = _words(command)
    if not words or any(_SHELL_OPERATOR.fullmatch(w) for w in words):
        return False
    while words and _ASSIGNMENT.fullmatch(words[0]):
        words = words[1:]
    if not words or not _PYTHON.fullmatch(os.path.basename(words[0])):
        return False
    words = words[1:]
    while words and words[0].startswith("-") and words[0] not in ("-c", "-m"):
        words = words[1:]
    return words[:1] == [RUNNER_PATH]


def protected_test_command(test_cmd: str | None, instance_id: str = "", allow_unprotected: bool = False) -> str:
    """The command a grading runs: turngym's runner, whose verdicts the code under test cannot print.

    No ``test_cmd``, or any plain pytest call (options, plugins, placeholders or none):
    :data:`DEFAULT_TEST_CMD` with the call's ``-p`` plugins. A command that already runs the runner is kept.
    Any other raises :class:`UnprotectedTestCommand`, unless ``allow_unprotected`` (the record's
    ``"unprotected_test_cmd": true``): then it is kept, with a warning that its log decides the grade."""
    if not test_cmd:
        return DEFAULT_TEST_CMD
    if RUNNER_PATH in test_cmd:  # the task's own call of the runner (a conda activation before it, say)
        return test_cmd
    plugins = pytest_plugins(test_cmd)
    if plugins is not None:
        named = "".join(f"-p {shlex.quote(p)} " for p in plugins)
        return f"python3 {RUNNER_PATH} --pytest {named}{{tests}}"
    if not allow_unprotected:
        raise UnprotectedTestCommand(
            f"{instance_id or 'an SWE task'}: test_cmd {test_cmd!r} does not run through turngym's runner, so the "
            "code under test could print its own verdicts; use a plain pytest call or the runner "
            f"({DEFAULT_TEST_CMD!r}), or set \"unprotected_test_cmd\": true in the record to grade from its log anyway")
    logger.warning("%s: test_cmd %r does not run through turngym's runner (%s): the tests' own output decides the "
                   "grade, so the code under test can forge it", instance_id, test_cmd, RUNNER_PATH)
    return test_cmd
