"""An instance's repository inside a sandbox: set-up, change detection, the agent's diff, grading.

Every step is a shell script run through :meth:`Sandbox.exec` as the sandbox user, so it works the
same under every backend and never touches the host's file system through a path the agent
controls (a symlink planted in the repository cannot redirect the runner's writes).

Set-up makes the base commit: a repository without ``.git`` gets a deterministic snapshot commit
(fixed author and date), so a local task's ``base_commit`` is reproducible anywhere; a task's
``setup_patch`` is applied and committed on top. The base versions of the files the test patch
touches are read at set-up and kept by the runner.

Grading (SWE-bench's protocol): restore those files to their base versions (editing the tests
earns nothing), apply the task's ``test_patch``, run the tests, parse the log. Intermediate
gradings (dense rewards) run in a throwaway copy under ``/scratch``, which is deleted right after,
so the hidden tests never appear in the agent's working tree; the final grading runs in place.

The agent's patch (``info["patch"]``) is exactly the change the tests ran against: measured over
every file, ignored ones included, with the directories git cannot show removed before the tests,
and read back after a marker no file name can forge (:meth:`Workspace._grading_script`). What the
sandbox printed reaches a log record or an error message only through ``escape_controls``.
"""

from __future__ import annotations

import base64
import logging
import secrets
import shlex
import time

from turngym.envs.swe.grading import GradeReport, parse_test_log, patch_paths
from turngym.envs.swe.instances import SWEInstance
from turngym.envs.swe.sandbox.base import (
    AGENT_TREE,
    READ_ONLY_DIRS,
    SCRATCH,
    TOOLS,
    WORKDIR,
    ExecResult,
    Sandbox,
    SandboxError,
    escape_controls,
)
from turngym.envs.swe.test_command import protected_test_command, runs_only_the_runner

logger = logging.getLogger(__name__)

UNITTEST_RUNNER = f"{TOOLS}/unittest_runner.py"
TREE_TOOL = f"{TOOLS}/tree.py"
# in the grading sandbox (its own /scratch, never the agent's)
TEST_SCRIPT = f"{SCRATCH}/.turngym-tests.sh"
INDEX_FILE = f"{SCRATCH}/.turngym-index"
PATCH_FILE = f"{SCRATCH}/.turngym-patch"
# The base tree's Python sources, copied before the agent's files are laid over it, with the task's gold patch
# applied when the runner grades: the runner reads them before any code under test runs (and, the gold patch in them,
# deletes them) and judges strict equality's disputes on them (tools/judge.py). The base alone is the bugged code: a
# bug in the package's own `==`, or in code it calls, made the judge refuse the gold patch's honest pairs (120 of
# the 150 tests the scale set's validation found failing on gold: docs/benchmark-runs/swe-synth-scale-v1/gold-analysis).
PRISTINE_DIR = f"{SCRATCH}/.turngym-pristine"
GOLD_PATCH_FILE = "/tmp/turngym-gold.patch"
EMPTY_DIRS_FILE = "/tmp/turngym-empty-dirs"
EMPTY_DIRS_TOOL = "/tmp/turngym-empty-dirs.py"
# the patch comes back after this word and a nonce of each grading: no file name can forge it
PATCH_MARK = "TURNGYM_PATCH"
# A patch over this many bytes is not graded (reward 0, ``grading_error`` says why); one within it is
# reported whole. A cap that cut the patch silently let a big first file push the real change out of it.
MAX_PATCH_BYTES = 200_000
NEUTRAL_ATTRIBUTES = "* !text !eol !filter !diff !merge !ident !working-tree-encoding !export-subst"
# restored to their base versions wherever they are: files that configure the test runner itself, and the modules
# Python's site imports at start-up from any folder on sys.path (an editable install's .pth can put the agent's
# tree there: its sitecustomize.py ran inside the runner; red team, round 12)
PROTECTED_NAMES = ("conftest.py", "sitecustomize.py", "usercustomize.py")
# restored to their base versions: pytest.ini, and the read-only folders of the tests' requirements
PROTECTED_PATHS = ("pytest.ini", *READ_ONLY_DIRS)
TEST_DIR_NAMES = ("test", "tests", "testing")
GIT = (
    "git -c init.defaultBranch=main -c commit.gpgSign=false -c core.hooksPath=/dev/null "
    "-c core.quotePath=false -c safe.directory='*' -c user.name=turngym -c user.email=turngym@localhost"
)
# A fixed identity and date make the snapshot commit of a given tree the same sha everywhere.
FIXED_DATE = "GIT_AUTHOR_DATE='2000-01-01T00:00:00+0000' GIT_COMMITTER_DATE='2000-01-01T00:00:00+0000'"


def _b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def test_dirs(test_paths: list[str]) -> list[str]:
    """What grading restores wholesale: for each test file, its top-most directory named like a test
    directory (``tests/``, ``pkg/tests/``, ``testing/``, ``test_*/``), or the file itself when none is.

    ``tools/integrity.py`` has its own copy: it runs in the sandbox on the standard library alone, so it cannot
    import this module (tests/test_swe_integrity.py holds the two equal)."""
    found: list[str] = []
    for path in test_paths:
        parts = path.strip("/").split("/")
        cut = next((i + 1 for i, part in enumerate(parts[:-1])
                    if part in TEST_DIR_NAMES or part.startswith("test")), len(parts))
        directory = "/".join(parts[:cut])
        if directory and directory not in found:
            found.append(directory)
    return found


# Directories without a file under them are graded (an empty ``yaml/`` imports as a namespace
# package) but git cannot show them. ``list FILE`` writes the base's empty directories; ``prune FILE``
# then removes every other empty directory, deepest first, so the graded tree is the base plus the
# patch. Iterative: a tree thousands of levels deep does not recurse.
EMPTY_DIRS = """
import os, sys
def dirs():
    stack, found = [b"."], []
    while stack:
        top = stack.pop()
        found.append(top)
        with os.scandir(top) as entries:
            stack += [e.path for e in entries if e.is_dir(follow_symlinks=False) and e.path != b"./.git"]
    return found
mode, name = sys.argv[1:3]
if mode == "list":
    with open(name, "wb") as out:
        out.write(b"\\0".join(d for d in dirs() if not os.listdir(d)))
else:
    with open(name, "rb") as kept:
        keep = set(kept.read().split(b"\\0"))
    for d in reversed(dirs()):
        if d != b"." and d not in keep and not os.listdir(d):
            os.rmdir(d)
"""


def _patch_from(output: str, marker: str) -> tuple[str, int]:
    """``(patch, its whole size in bytes)`` from the line that starts with ``marker`` (a nonce: set-up
    output that quotes the agent's file names, e.g. a copy error, cannot hold it): the size, then the
    base64 of at most :data:`MAX_PATCH_BYTES` of the patch."""
    for line in output.splitlines():
        if line.startswith(marker + " "):
            size, _, payload = line[len(marker) + 1 :].strip().partition(" ")
            try:
                patch = base64.b64decode(payload.strip(), validate=True).decode("utf-8", "replace")
                return patch, int(size)
            except ValueError:
                return "", 0
    return "", 0


def patch_over_limit(head: str, size: int) -> str:
    """What ``info["patch"]`` shows of a patch over :data:`MAX_PATCH_BYTES`: its head and a marker
    that says the whole size and that it was not graded."""
    return (f"{head}\n[turngym: the patch is {size} bytes, over the {MAX_PATCH_BYTES}-byte limit; only its "
            f"first {MAX_PATCH_BYTES} bytes are shown, and it was not graded]\n")


class Workspace:
    """The repository of ``instance`` inside ``sandbox``.

    Args:
        sandbox: a started sandbox holding the repository at ``/testbed``.
        instance: the task.
        test_timeout: seconds one grading run may take.
    """

    def __init__(self, sandbox: Sandbox, instance: SWEInstance, test_timeout: float) -> None:
        self.sandbox = sandbox
        self.instance = instance
        self.test_timeout = test_timeout
        self.test_paths = patch_paths(instance.test_patch)
        self.base_commit: str | None = None
        self._base_files: dict[str, bytes | None] = {}
        self._last_tree: str | None = None

    # ----------------------------------------------------------------- set-up
    def prepare(self, timeout: float, *, remember: bool = True) -> str:
        """Make the base commit, remember the base test files; return the base commit's sha."""
        instance = self.instance
        lines = ["set -eo pipefail", f"cd {WORKDIR}", f"export {FIXED_DATE}"]
        apply_setup = ":"
        if instance.setup_patch:
            lines.append(f"printf '%s' {_b64(instance.setup_patch)} | base64 -d > /tmp/turngym-setup.patch")
            apply_setup = f"{GIT} apply --whitespace=nowarn /tmp/turngym-setup.patch"
        base = shlex.quote(instance.base_commit)
        # Without .git, the setup patch goes into the one snapshot commit: no history shows the bug.
        lines += [
            "if [ ! -e .git ]; then",
            f"  {apply_setup}",
            f"  {GIT} init -q && {GIT} add -A && {GIT} commit -q --allow-empty -m 'turngym base'",
            "else",
            f"  if [ -n {base} ] && [ \"$({GIT} rev-parse HEAD)\" != {base} ]; then {GIT} checkout -q -f {base}; fi",
            (
                f"  if [ -s /tmp/turngym-setup.patch ]; then {apply_setup} && {GIT} add -A && "
                f"{GIT} commit -q -m 'turngym setup'; fi"
            ),
            "fi",
        ]
        lines.append(f"printf 'BASE %s\\n' \"$({GIT} rev-parse HEAD)\"")
        for path in self.test_paths:
            quoted = shlex.quote(path)
            lines.append(f"if [ -f {quoted} ]; then printf 'FILE %s\\n' {shlex.quote(_b64(path))}; "
                         f"base64 -w0 {quoted}; printf '\\n'; else printf 'NONE %s\\n' {shlex.quote(_b64(path))}; fi")
        result = self._script("\n".join(lines), timeout)
        if not result.ok:
            raise SandboxError(f"setting up {instance.instance_id} failed (exit {result.exit_code}):\n"
                               f"{escape_controls(result.output[-2000:])}")
        rows = result.output.splitlines()
        for index, row in enumerate(rows):
            kind, _, value = row.partition(" ")
            if kind == "BASE":
                self.base_commit = value.strip()
            elif kind in ("FILE", "NONE"):
                path = base64.b64decode(value).decode()
                self._base_files[path] = base64.b64decode(rows[index + 1]) if kind == "FILE" else None
        if not self.base_commit:
            raise SandboxError(f"setting up {instance.instance_id} printed no base commit:\n"
                               f"{escape_controls(result.output[-2000:])}")
        if instance.base_commit and instance.base_commit != self.base_commit:
            logger.warning("%s: the repository's base commit is %s, the task says %s",
                           instance.instance_id, self.base_commit, instance.base_commit)
        if remember:
            self._last_tree = self.source_tree()
        return self.base_commit

    # ----------------------------------------------------------------- during the episode
    def tree_arguments(self) -> str:
        """The tree tool's ``--protect`` options: the test directories and the test-runner files."""
        args = [f"--protect {shlex.quote(p)}" for p in (*test_dirs(self.test_paths), *PROTECTED_PATHS)]
        args += [f"--protect-name {shlex.quote(n)}" for n in PROTECTED_NAMES]
        return " ".join(args)

    def source_tree(self) -> str | None:
        """A fingerprint of the working tree, test directories, .git and bytecode excluded (None on failure).

        Computed by the tree tool, not git: the agent's .git (its config, filters, hooks) plays no
        part, and FIFOs or sockets in the tree are skipped, never read."""
        command = f"python3 -I -B {TREE_TOOL} digest {WORKDIR} {self.tree_arguments()}"
        result = self.sandbox.exec(command, timeout=self.sandbox.timeouts.exec)
        return result.output.strip().splitlines()[-1] if result.ok and result.output.strip() else None

    def sources_changed(self) -> bool:
        """Whether the source files changed since the last call (or set-up)."""
        tree = self.source_tree()
        changed = tree is None or tree != self._last_tree
        self._last_tree = tree
        return changed

    # ----------------------------------------------------------------- grading
    def test_command(self) -> str:
        template = protected_test_command(self.instance.test_cmd, self.instance.instance_id,
                                          self.instance.unprotected_test_cmd)
        tests = " ".join(shlex.quote(t) for t in self.instance.test_ids)
        files = " ".join(shlex.quote(p) for p in self.test_paths)
        return template.replace("{tests}", tests).replace("{test_files}", files)

    def grade(self, *, in_place: bool | None = None) -> GradeReport:
        """Grade the working tree in a fresh sandbox; never raises on test failure.

        A new sandbox of the same backend starts from the pristine repository (the agent's /testbed
        and /scratch are not mounted in it; its tree is visible read-only). There: the base commit
        is made again, the agent's files are copied over it without .git, bytecode, special files,
        the test directories and test-runner files (so those stay exactly as in the base, extra
        files removed), the agent's patch is computed with git and no user configuration or
        attributes, the hidden tests are applied, and the test command runs. ``in_place`` is
        accepted for compatibility and ignored: every grading, dense or final, is the same.
        """
        del in_place
        start = time.monotonic()
        command = self.test_command()
        grader = self.sandbox.grading_sandbox()
        try:
            fresh = Workspace(grader, self.instance, test_timeout=self.test_timeout)
            fresh.prepare(timeout=grader.timeouts.create, remember=False)
            marker = f"{PATCH_MARK}_{secrets.token_hex(16)}"
            prepared = fresh._script(fresh._grading_script(command, marker), self.test_timeout)
            patch, size = _patch_from(prepared.output, marker)
            if prepared.ok and size > MAX_PATCH_BYTES:  # fail closed: what is not reported whole is not graded
                error = f"the patch is {size} bytes, over the {MAX_PATCH_BYTES}-byte limit: it was not graded"
                return self._report({}, prepared.output, error, start, patch_over_limit(patch, size), truncated=True)
            if not prepared.ok:
                killed = prepared.describe_kill(self.test_timeout, grader.limits)
                error = ("the test patch did not apply" if "TURNGYM_TEST_PATCH" in prepared.output
                         else f"grading set-up failed: {killed}" if killed else "grading set-up failed")
                logger.warning("%s: %s:\n%s", self.instance.instance_id, error,
                               escape_controls(prepared.output[-2000:]))
                over = size > MAX_PATCH_BYTES
                return self._report({}, prepared.output, error, start, patch_over_limit(patch, size) if over else patch,
                                    truncated=over)
            nonce = secrets.token_hex(16)
            states = self.instance.reference_states if self._gives_gold_reference(command) else ()
            run = grader.exec(f"bash {TEST_SCRIPT}", workdir=WORKDIR, timeout=self.test_timeout,
                              stdin=" ".join((nonce, *states)).encode() + b"\n")
            prefix = nonce if UNITTEST_RUNNER in command else ""
            statuses = parse_test_log(run.output, self.instance.test_ids, prefix=prefix)
            error = run.describe_kill(self.test_timeout, grader.limits)
            return self._report(statuses, run.output, error, start, patch)
        finally:
            grader.close()

    def _gives_gold_reference(self, command: str) -> bool:
        """Whether the runner gets the gold patch's reference tree, and with it the task's reference states (sent
        after the nonce on its standard input, never written to disk): only when ``command`` is one bare call of
        the runner and the task has a gold patch (:meth:`_gold_reference_lines`)."""
        return runs_only_the_runner(command) and bool(self.instance.patch.strip())

    def _gold_reference_lines(self, command: str) -> list[str]:
        """Set-up lines that apply the gold patch's Python files to the reference tree, when the command is one bare
        call of the runner (it deletes the tree before any code under test runs; anything before it, a build step
        say, would run the agent's code with the answer on disk: red team, 2026-12-02) and the task has a gold
        patch. One that does not apply leaves the base, as before."""
        if not self._gives_gold_reference(command):
            return []
        return [
            f"printf '%s' {_b64(self.instance.patch)} | base64 -d > {GOLD_PATCH_FILE} || exit 90",
            (f"(cd {PRISTINE_DIR} && {GIT} apply --include='*.py' --whitespace=nowarn {GOLD_PATCH_FILE}) "
             ">/dev/null 2>&1 || echo 'turngym: the gold patch does not apply to the reference tree: "
             "the judge uses the base'"),
            f"rm -f {GOLD_PATCH_FILE} || exit 90",
        ]

    def _grading_script(self, command: str, marker: str) -> str:
        """Set-up of a grading: the agent's files over the base, the patch measured, the hidden tests.

        The patch is the diff between two trees of every file, ignored ones included (``add -A -f``):
        the base as set up, and the tree the tests run against. A ``.gitignore`` the agent wrote
        hides nothing, nested ``.git`` entries (submodules) make no directory opaque, and the
        directories git cannot show (empty ones) are removed, so the patch is exactly what is graded.
        """
        index = f"GIT_INDEX_FILE={INDEX_FILE}"
        gold_reference = self._gold_reference_lines(command)
        lines = [
            "set -o pipefail",
            f"cd {WORKDIR} || exit 90",
            "export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 GIT_ATTR_NOSYSTEM=1",
            # highest-precedence attributes: no filter, eol conversion or diff driver from the tree
            f"mkdir -p .git/info && printf '%s\\n' {shlex.quote(NEUTRAL_ATTRIBUTES)} > .git/info/attributes || exit 90",
            "find . -path ./.git -prune -o -name .git -prune -exec rm -rf -- {} + || exit 90",  # submodules
            f"printf '%s' {_b64(EMPTY_DIRS)} | base64 -d > {EMPTY_DIRS_TOOL} || exit 90",
            f"python3 -I -B {EMPTY_DIRS_TOOL} list {EMPTY_DIRS_FILE} || exit 90",
            f"base_tree=$({index} {GIT} add -A -f >/dev/null 2>&1 && {index} {GIT} write-tree) || exit 90",
            f"rm -rf {PRISTINE_DIR} && python3 -I -B {TREE_TOOL} sources {WORKDIR} {PRISTINE_DIR} || exit 90",
            *gold_reference,
            (f"python3 -I -B {TREE_TOOL} copy {AGENT_TREE} {WORKDIR} {self.tree_arguments()} "
             "|| echo 'turngym: some files of the working tree could not be copied'"),
            f"python3 -I -B {EMPTY_DIRS_TOOL} prune {EMPTY_DIRS_FILE} || exit 90",
            (f"{index} {GIT} add -A -f >/dev/null 2>&1 && "
             f"{index} {GIT} diff --cached --no-color --binary \"$base_tree\" > {PATCH_FILE} || exit 90"),
            (f"printf '\\n%s %s ' {marker} \"$(wc -c < {PATCH_FILE})\"; "
             f"head -c {MAX_PATCH_BYTES} {PATCH_FILE} | base64 -w0; printf '\\n'"),
        ]
        if self.instance.test_patch.strip():
            lines.append(f"printf '%s' {_b64(self.instance.test_patch)} | base64 -d > /tmp/turngym-test.patch")
            lines.append(f"{GIT} apply --whitespace=nowarn /tmp/turngym-test.patch "
                         "|| patch --batch --forward -p1 -i /tmp/turngym-test.patch "
                         "|| { echo TURNGYM_TEST_PATCH_FAILED; exit 91; }")
        # The test command goes in a script file, as SWE-bench's eval.sh: thousands of test ids
        # would exceed the kernel's limit on one command-line argument.
        discard = "export TURNGYM_PRISTINE_DISCARD=1\n" if gold_reference else ""
        script = f"export TURNGYM_PRISTINE={PRISTINE_DIR}\n{discard}{command}"
        lines.append(f"printf '%s' {_b64(script)} | base64 -d > {TEST_SCRIPT}")
        return "\n".join(lines)

    def _report(self, statuses: dict[str, str], log: str, error: str | None, start: float,
                patch: str = "", truncated: bool = False) -> GradeReport:
        full = parse_test_log("", self.instance.test_ids) | statuses
        return GradeReport(
            statuses=full,
            fail_to_pass=self.instance.fail_to_pass,
            pass_to_pass=self.instance.pass_to_pass,
            log=log,
            error=error,
            duration_s=time.monotonic() - start,
            patch=patch,
            patch_truncated=truncated,
        )

    def _script(self, script: str, timeout: float) -> ExecResult:
        """Run a multi-line script (fed on stdin: scripts may exceed the kernel's argument size limit)."""
        return self.sandbox.exec("bash -s", stdin=script.encode(), timeout=timeout)
