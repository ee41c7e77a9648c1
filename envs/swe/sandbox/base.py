"""The sandbox interface: create, exec, teardown, each phase with its own timeout.

A :class:`Sandbox` holds a throwaway copy of one repository at :data:`WORKDIR` and runs shell
commands in it as an unprivileged user, with no network and with limits on CPU time, memory,
processes, wall clock and output size. Backends (``bwrap``, ``docker``) implement four methods;
everything above them (the SWE env, grading) only calls :meth:`Sandbox.exec`.

Lifetime: a sandbox is given ``lifetime_s`` at creation, which its owner computes as the rollout
deadline plus grading plus teardown, so the sandbox never expires under a running episode. It is
only a backstop: owners tear down explicitly (``close()``, also on error and at garbage collection),
and a sandbox whose owner was killed (SIGKILL, an unhandled SIGTERM) is reaped by the next start: at once when
its owner is certainly gone (:func:`owner_gone`), after its lifetime otherwise.

Concurrency: two process-wide bounds (:func:`configure_concurrency`, or the environment variables
``TURNGYM_SANDBOX_MAX_STARTS`` and ``TURNGYM_SANDBOX_MAX_EXECS``) cap how many sandboxes start at once
and how many commands (agent commands and grading runs alike) run at once in this process, so
many environments in one process queue instead of overloading the host. Waiting for a slot does not
count against a command's own timeout; waiting longer than ``wait_s`` raises :class:`SandboxError`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
import weakref
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

logger = logging.getLogger(__name__)

WORKDIR = "/testbed"  # where the repository lives inside every sandbox (SWE-bench's convention)
SCRATCH = "/scratch"  # writable, persistent across commands, outside the repository (grading copies)
TOOLS = "/opt/turngym"  # read-only helpers (the unittest runner)
AGENT_TREE = "/opt/turngym-agent/testbed"  # in a grading sandbox: the agent's working tree, read-only
SANDBOX_UID = 65534  # nobody: no capabilities, owns nothing outside its copy
# Folders of a repository that hold what its tests need (a synthesized task's installed requirements): read-only
# in every sandbox (bwrap binds them read-only; docker gives them to root) and never copied from the agent's tree
# at grading, so no command of the agent can change the code the tests import besides the repository's own.
READ_ONLY_DIRS = (".turngym-deps",)
# Pinned in every command, so test outcomes do not depend on the host (flaky tests under
# concurrency come from hash order and time zones).
PINNED_ENV = {
    "TZ": "UTC",
    "PYTHONHASHSEED": "0",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/tmp",
    "USER": "nobody",
    "TERM": "dumb",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "turngym",
    "GIT_AUTHOR_EMAIL": "turngym@localhost",
    "GIT_COMMITTER_NAME": "turngym",
    "GIT_COMMITTER_EMAIL": "turngym@localhost",
}


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def escape_controls(text: str) -> str:
    """Make control characters visible (``\\x1b``): terminal escapes (OSC 52 clipboard writes,
    screen clears, cursor moves) and bidirectional overrides in what a sandbox printed never reach
    an observation, a patch, a log record or an error message raw. Newlines and tabs stay."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                        else f"\\u{ord(m.group()):04x}", text)


class SandboxError(RuntimeError):
    """A sandbox could not be created, reached or torn down (not: the command failed)."""


class SandboxUnavailable(SandboxError):
    """The backend is not installed or not usable here; the message says how to fix it."""


class ConcurrencyGate:
    """A counting semaphore whose bound can change while it is in use; records its peak.

    ``limit`` <= 0 means no bound. Used for the process-wide start and exec bounds."""

    def __init__(self, name: str, limit: int, wait_s: float = 3600.0) -> None:
        self.name = name
        self.limit = int(limit)
        self.wait_s = float(wait_s)
        self.active = 0
        self.peak = 0
        self._cond = threading.Condition()

    def configure(self, limit: int | None = None, wait_s: float | None = None) -> None:
        with self._cond:
            if limit is not None:
                self.limit = int(limit)
            if wait_s is not None:
                self.wait_s = float(wait_s)
            self.peak = self.active
            self._cond.notify_all()

    @contextlib.contextmanager
    def slot(self, what: str):
        with self._cond:
            ok = self._cond.wait_for(lambda: self.limit <= 0 or self.active < self.limit, timeout=self.wait_s)
            if not ok:
                raise SandboxError(f"no free sandbox {self.name} slot for {what} within {self.wait_s:g} s "
                                   f"({self.active} of {self.limit} in use)")
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            yield
        finally:
            with self._cond:
                self.active -= 1
                self._cond.notify()


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        logger.warning("ignoring %s=%r (not an integer)", name, os.environ.get(name))
        return default


_CPUS = os.cpu_count() or 2
STARTS = ConcurrencyGate("start", _env_int("TURNGYM_SANDBOX_MAX_STARTS", max(2, _CPUS)))
EXECS = ConcurrencyGate("exec", _env_int("TURNGYM_SANDBOX_MAX_EXECS", 4 * _CPUS))


def configure_concurrency(max_starts: int | None = None, max_execs: int | None = None,
                          wait_s: float | None = None) -> None:
    """Set this process's bounds on concurrent sandbox starts and concurrent commands (0: none).

    Defaults: ``max(2, cpus)`` starts and ``4 * cpus`` commands, or ``$TURNGYM_SANDBOX_MAX_STARTS`` and
    ``$TURNGYM_SANDBOX_MAX_EXECS``. ``wait_s`` (default 3600) is the longest a start or command waits
    for a slot before :class:`SandboxError`. The bounds are per process: each worker process of an
    ``EnvPool`` has its own."""
    STARTS.configure(max_starts, wait_s)
    EXECS.configure(max_execs, wait_s)


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandbox.

    Attributes:
        cpu_seconds: CPU time per process (RLIMIT_CPU); a busy loop is killed after it.
        memory_mb: memory of the whole sandbox (cgroup / container; RLIMIT_AS per process when
            no cgroup is available).
        max_processes: processes and threads at once (pids cgroup / container; RLIMIT_NPROC else).
        max_output_bytes: bytes one command may print before it is killed.
        max_file_mb: size of any one file a command writes (RLIMIT_FSIZE).
        disk_mb: size of the writable workspace (a tmpfs for bwrap when root; docker: not enforced);
            0 for no cap.
        cpus: CPU share (cgroup CFS quota / docker ``nano_cpus``); ``None`` for no cap.
        max_open_files: open file descriptors per process (RLIMIT_NOFILE).
    """

    cpu_seconds: int = 300
    memory_mb: int = 2048
    max_processes: int = 256
    max_output_bytes: int = 2_000_000
    max_file_mb: int = 512
    disk_mb: int = 2048
    cpus: float | None = 1.0
    max_open_files: int = 1024


@dataclass(frozen=True)
class PhaseTimeouts:
    """Wall-clock limits, in seconds, of each phase of a sandbox's life."""

    create: float = 120.0  # start the sandbox and copy the repository in
    exec: float = 120.0  # one agent command (the episode's deadline may cut it shorter)
    test: float = 600.0  # one grading run of the task's tests
    teardown: float = 60.0  # stop processes, remove files, containers, cgroups and mounts


@dataclass
class ExecResult:
    """What one command did. ``exit_code`` is ``None`` when the command was killed."""

    exit_code: int | None
    output: str  # stdout and stderr, interleaved, decoded with replacement characters
    timed_out: bool = False
    output_limit_hit: bool = False
    out_of_memory: bool = False
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def describe_kill(self, timeout: float, limits: SandboxLimits) -> str | None:
        """One line saying why the command was stopped, or ``None`` if it ended by itself."""
        if self.output_limit_hit:
            return f"the command printed more than {limits.max_output_bytes} bytes and was killed"
        if self.out_of_memory:
            return f"the command ran out of memory (limit {limits.memory_mb} MB) and was killed"
        if self.timed_out:
            return f"the command did not finish within {timeout:g} s and was killed"
        return None


@dataclass(frozen=True)
class SandboxSpec:
    """What a sandbox is created from.

    Attributes:
        repo_dir: a local directory holding the repository (already extracted); copied into
            :data:`WORKDIR`. ``None`` means the image already holds it there (SWE-bench images).
        image: the docker image (ignored by bwrap).
        lifetime_s: the sandbox expires after this (a backstop; see the module docstring).
        limits, timeouts: see :class:`SandboxLimits` and :class:`PhaseTimeouts`.
        name: a label used in logs, container names and temp directories.
    """

    repo_dir: Path | None
    image: str | None = None
    lifetime_s: float = 3600.0
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    timeouts: PhaseTimeouts = field(default_factory=PhaseTimeouts)
    name: str = "swe"


class Sandbox(ABC):
    """One live sandbox. Use it as a context manager, or call :meth:`start` and :meth:`close`.

    ``close`` is idempotent and also runs when the object is garbage-collected or the interpreter
    exits, so teardown always runs unless the process is SIGKILLed (then ``reap_stale`` cleans up).
    """

    backend: str = "base"

    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec
        self.limits = spec.limits
        self.timeouts = spec.timeouts
        self.started_at: float | None = None
        self._finalizer: weakref.finalize | None = None

    # ----------------------------------------------------------------- backend hooks
    @abstractmethod
    def _create(self) -> None:
        """Create the sandbox and put the repository at WORKDIR (within ``timeouts.create``)."""

    @abstractmethod
    def _run(self, command: str, *, timeout: float, stdin: bytes | None, workdir: str) -> ExecResult:
        """Run ``bash -c command``; kill everything it started when it ends or times out."""

    @staticmethod
    @abstractmethod
    def _teardown_resources(handles: dict) -> None:
        """Release everything in ``handles`` (must not reference ``self``: it runs in a finaliser)."""

    def _handles(self) -> dict:
        """What teardown needs; captured by the finaliser, so it must not hold ``self``."""
        return {}

    @abstractmethod
    def _grading_sandbox(self) -> Sandbox:
        """An unstarted sandbox of the same backend and spec (a pristine copy of the repository) in
        which the working tree of this one is visible, read-only, at :data:`AGENT_TREE`, and none
        of this one's writable state (/testbed, /scratch) is."""

    def grading_sandbox(self) -> Sandbox:
        """A fresh, started sandbox to grade this one's working tree in (close it after grading)."""
        if self.started_at is None or self.closed:
            raise SandboxError(f"sandbox {self.spec.name} is not running")
        try:
            return self._grading_sandbox().start()
        except SandboxError:
            raise
        except Exception as error:
            raise SandboxError(f"creating a grading sandbox for {self.spec.name} failed: {error}") from error

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> Self:
        start = time.monotonic()
        try:
            with STARTS.slot(f"starting {self.spec.name}"):
                self._create()
        except BaseException as error:
            self._teardown_resources(self._handles())
            if isinstance(error, Exception) and not isinstance(error, SandboxError):
                raise SandboxError(f"creating {self.backend} sandbox {self.spec.name} failed: {error}") from error
            raise
        self._finalizer = weakref.finalize(self, _teardown_quietly, type(self)._teardown_resources, self._handles())
        self.started_at = time.monotonic()
        logger.debug("%s sandbox %s created in %.0f ms", self.backend, self.spec.name, 1000 * (self.started_at - start))
        return self

    def exec(
        self,
        command: str,
        *,
        timeout: float | None = None,
        stdin: bytes | None = None,
        workdir: str = WORKDIR,
    ) -> ExecResult:
        """Run one shell command (``bash -c``) in the sandbox as the unprivileged sandbox user.

        Never raises because of what the command did: timeouts, output floods, memory
        exhaustion and crashes come back in the :class:`ExecResult`.
        """
        if self.started_at is None or self.closed:
            raise SandboxError(f"sandbox {self.spec.name} is not running (start() it first, or it was closed)")
        timeout = self.timeouts.exec if timeout is None else timeout
        try:
            with EXECS.slot(f"a command in {self.spec.name}"):
                return self._run(command, timeout=max(timeout, 0.001), stdin=stdin, workdir=workdir)
        except SandboxError:
            raise
        except Exception as error:  # the backend itself failed (daemon gone, OS error): not the command
            raise SandboxError(f"{self.backend} sandbox {self.spec.name} failed to run a command: {error}") from error

    @property
    def safe_name(self) -> str:
        """The spec's name, restricted to characters safe in paths and container names."""
        return "".join(c if c.isalnum() or c in "-_." else "_" for c in self.spec.name)[:50]

    @property
    def closed(self) -> bool:
        return self._finalizer is not None and not self._finalizer.alive

    def close(self) -> None:
        """Tear down (idempotent): kill processes, remove the copy, the container, cgroups, mounts."""
        if self._finalizer is not None:
            self._finalizer()  # runs the teardown once; later calls do nothing

    def __enter__(self) -> Self:
        return self.start() if self.started_at is None else self

    def __exit__(self, *exc) -> None:
        self.close()


def _teardown_quietly(teardown, handles: dict) -> None:
    try:
        teardown(handles)
    except Exception:
        logger.exception("sandbox teardown failed: %s", handles)


def running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def pid_alive(pid: int) -> bool:
    """Whether a process exists (owners of left-over sandboxes are checked before reaping)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def process_identity() -> dict[str, str | int]:
    """``{"boot_id", "pid_ns", "start"}`` of this process: the kernel's boot (a random id, so another machine or a
    reboot never matches), its pid namespace, and its start time in clock ticks since boot, which together tell it
    from a later process given the same pid. ``{}`` where /proc cannot say, or is another pid namespace's (its
    ``self`` is not this pid): then no sandbox of this process is reaped before its lifetime."""
    try:
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")
        pid, start = _pid_and_start(Path("/proc/self/stat").read_text())
    except (OSError, ValueError, IndexError):
        return {}
    if pid != os.getpid() or not boot_id:
        return {}
    return {"boot_id": boot_id, "pid_ns": namespace, "start": start}


def _pid_and_start(stat: str) -> tuple[int, int]:
    """``(pid, start time)`` from a /proc/PID/stat line (fields 1 and 22; the name in parentheses may hold spaces)."""
    head, tail = stat.rsplit(")", 1)
    return int(head.split("(", 1)[0]), int(tail.split()[19])


def owner_gone(pid: int, identity: dict) -> bool:
    """Whether the process that recorded ``identity`` (:func:`process_identity`) as ``pid`` has certainly ended:
    it ran on this boot of this machine, in this pid namespace, and no process has that pid now (``kill(pid, 0)``,
    which hidepid and ptrace rules do not hide) or the one that has it started later. False whenever it cannot be
    told (no identity recorded, another machine or namespace, a /proc entry this process may not read): then only a
    lifetime ends what it left. The owner is the process that created the sandbox: one handed to a forked child
    that outlives its creator is reaped once the creator is gone."""
    mine = process_identity()
    if not identity or not mine or any(identity.get(k) != mine[k] for k in ("boot_id", "pid_ns")):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        pass  # another user's live process: only its start time can tell
    try:
        found, start = _pid_and_start(Path(f"/proc/{pid}/stat").read_text())
    except FileNotFoundError:
        return not pid_alive(pid)  # it ended between the two looks, or /proc hides it (hidepid): ask again
    except (OSError, ValueError, IndexError):
        return False
    return found == pid and start > int(identity.get("start", start))
