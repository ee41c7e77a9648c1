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
"""

from __future__ import annotations

import base64
import logging
import secrets
import shlex
import time

from turngym.envs.swe.grading import GradeReport, parse_test_log, patch_paths
from turngym.envs.swe.instances import DEFAULT_TEST_CMD, SWEInstance
from turngym.envs.swe.sandbox.base import SCRATCH, TOOLS, WORKDIR, ExecResult, Sandbox, SandboxError

logger = logging.getLogger(__name__)

UNITTEST_RUNNER = f"{TOOLS}/unittest_runner.py"
GRADE_DIR = f"{SCRATCH}/.turngym-grade"
TEST_SCRIPT = f"{SCRATCH}/.turngym-tests.sh"
INDEX_FILE = f"{SCRATCH}/.turngym-index"  # a private git index: the agent's own index is left alone
GIT = (
    "git -c init.defaultBranch=main -c commit.gpgSign=false -c core.hooksPath=/dev/null "
    "-c core.quotePath=false -c safe.directory='*' -c user.name=turngym -c user.email=turngym@localhost"
)
# A fixed identity and date make the snapshot commit of a given tree the same sha everywhere.
FIXED_DATE = "GIT_AUTHOR_DATE='2000-01-01T00:00:00+0000' GIT_COMMITTER_DATE='2000-01-01T00:00:00+0000'"


def _b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


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
    def prepare(self, timeout: float) -> str:
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
                               f"{result.output[-2000:]}")
        rows = result.output.splitlines()
        for index, row in enumerate(rows):
            kind, _, value = row.partition(" ")
            if kind == "BASE":
                self.base_commit = value.strip()
            elif kind in ("FILE", "NONE"):
                path = base64.b64decode(value).decode()
                self._base_files[path] = base64.b64decode(rows[index + 1]) if kind == "FILE" else None
        if not self.base_commit:
            raise SandboxError(f"setting up {instance.instance_id} printed no base commit:\n{result.output[-2000:]}")
        if instance.base_commit and instance.base_commit != self.base_commit:
            logger.warning("%s: the repository's base commit is %s, the task says %s",
                           instance.instance_id, self.base_commit, instance.base_commit)
        self._last_tree = self.source_tree()
        return self.base_commit

    # ----------------------------------------------------------------- during the episode
    def source_tree(self) -> str | None:
        """The git tree hash of the working tree, the task's test files excluded (None if git fails)."""
        excludes = " ".join(shlex.quote(f":(exclude){p}") for p in self.test_paths)
        command = (f"export GIT_INDEX_FILE={INDEX_FILE}; {GIT} add -A -- . {excludes} >/dev/null 2>&1 "
                   f"&& {GIT} write-tree")
        result = self.sandbox.exec(command, timeout=self.sandbox.timeouts.exec)
        return result.output.strip() if result.ok else None

    def sources_changed(self) -> bool:
        """Whether the source files changed since the last call (or set-up)."""
        tree = self.source_tree()
        changed = tree is None or tree != self._last_tree
        self._last_tree = tree
        return changed

    def diff(self) -> str:
        """The agent's changes against the base commit, new files included (SWE-bench's model_patch)."""
        command = (f"export GIT_INDEX_FILE={INDEX_FILE}; {GIT} add -A >/dev/null 2>&1 && "
                   f"{GIT} diff --cached --no-color --binary {shlex.quote(self.base_commit or 'HEAD')}")
        result = self.sandbox.exec(command, timeout=self.sandbox.timeouts.exec)
        return result.output if result.ok else ""

    # ----------------------------------------------------------------- grading
    def test_command(self) -> str:
        template = self.instance.test_cmd or DEFAULT_TEST_CMD
        tests = " ".join(shlex.quote(t) for t in self.instance.test_ids)
        files = " ".join(shlex.quote(p) for p in self.test_paths)
        return template.replace("{tests}", tests).replace("{test_files}", files)

    def grade(self, *, in_place: bool) -> GradeReport:
        """Restore the test files, apply the test patch, run the tests; never raises on test failure."""
        start = time.monotonic()
        directory = WORKDIR if in_place else GRADE_DIR
        command = self.test_command()
        try:
            prepared = self._script(self._grading_script(directory, in_place, command), self.test_timeout)
            if not prepared.ok:
                error = ("the test patch did not apply" if "TURNGYM_TEST_PATCH" in prepared.output
                         else "grading set-up failed")
                logger.warning("%s: %s:\n%s", self.instance.instance_id, error, prepared.output[-2000:])
                return self._report({}, prepared.output, error, start)
            nonce = secrets.token_hex(16)
            run = self.sandbox.exec(f"bash {TEST_SCRIPT}", workdir=directory, timeout=self.test_timeout,
                                    stdin=f"{nonce}\n".encode())
            prefix = nonce if UNITTEST_RUNNER in command else ""
            statuses = parse_test_log(run.output, self.instance.test_ids, prefix=prefix)
            error = run.describe_kill(self.test_timeout, self.sandbox.limits)
            return self._report(statuses, run.output, error, start)
        finally:
            self.sandbox.exec(f"rm -rf {GRADE_DIR} {TEST_SCRIPT}", timeout=self.sandbox.timeouts.teardown)

    def _grading_script(self, directory: str, in_place: bool, command: str) -> str:
        lines = ["set -o pipefail"]
        if not in_place:
            lines.append(f"rm -rf {GRADE_DIR} && cp -a {WORKDIR} {GRADE_DIR} || exit 90")
        lines.append(f"cd {directory} || exit 90")
        for path, content in self._base_files.items():
            quoted = shlex.quote(path)
            lines.append(f"rm -rf -- {quoted}")
            if content is not None:
                lines.append(f"mkdir -p -- \"$(dirname -- {quoted})\" && "
                             f"printf '%s' {_b64(content)} | base64 -d > {quoted}")
        if self.instance.test_patch.strip():
            lines.append(f"printf '%s' {_b64(self.instance.test_patch)} | base64 -d > /tmp/turngym-test.patch")
            lines.append(f"{GIT} apply --whitespace=nowarn /tmp/turngym-test.patch "
                         "|| patch --batch --forward -p1 -i /tmp/turngym-test.patch "
                         "|| { echo TURNGYM_TEST_PATCH_FAILED; exit 91; }")
        # The test command goes in a script file, as SWE-bench's eval.sh: thousands of test ids
        # would exceed the kernel's limit on one command-line argument.
        lines.append(f"printf '%s' {_b64(command)} | base64 -d > {TEST_SCRIPT}")
        return "\n".join(lines)

    def _report(self, statuses: dict[str, str], log: str, error: str | None, start: float) -> GradeReport:
        full = parse_test_log("", self.instance.test_ids) | statuses
        return GradeReport(
            statuses=full,
            fail_to_pass=self.instance.fail_to_pass,
            pass_to_pass=self.instance.pass_to_pass,
            log=log,
            error=error,
            duration_s=time.monotonic() - start,
        )

    def _script(self, script: str, timeout: float) -> ExecResult:
        """Run a multi-line script (fed on stdin: scripts may exceed the kernel's argument size limit)."""
        return self.sandbox.exec("bash -s", stdin=script.encode(), timeout=timeout)
