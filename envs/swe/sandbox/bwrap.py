"""The ``bwrap`` backend: bubblewrap namespaces, cgroup v1 limits, an unprivileged uid.

Every command is a fresh ``bwrap`` process (as in mini-swe-agent, each command runs in a new
shell; ``cd`` does not persist):

* namespaces: a new network namespace with only loopback (no network), and new pid, ipc, uts and
  cgroup namespaces. When the command exits, or is killed, bwrap's pid 1 dies and the kernel kills
  every process left in the namespace: nothing outlives a command;
* file system: ``/usr`` read-only (the host's system, so the host's ``/usr/bin/python3`` runs the
  tests), a private ``/tmp``, ``/proc`` and ``/dev``, the throwaway repository copy at ``/testbed``
  and a scratch directory at ``/scratch``. ``/root``, ``/home``, ``/work`` and the rest of ``/etc``
  are not there; the environment is cleared;
* identity: as root, ``setpriv`` drops to uid 65534 with an empty bounding set and
  ``no_new_privs``. Without root, a user namespace maps the caller to uid 65534. (As root, bwrap's
  own ``--unshare-user --uid 65534`` would map the sandbox user to the host's uid 0, so it is not
  used: the sandbox user is the host's uid 65534, owning only its copy);
* kernel channels between episodes: a seccomp filter (:mod:`.seccomp`) makes the key management
  calls fail (uid 65534's user keyring is shared by every sandbox on the host) and refuses nested
  user namespaces; ``/proc/keys`` and ``/proc/key-users`` are masked by an empty file, as Docker
  masks them; ``--new-session`` puts the command in a new session (no TIOCSTI into the runner's
  terminal);
* channels between concurrent sandboxes: the same filter makes file locks no-ops, access
  notifications (inotify, fanotify, dnotify) absent and io_uring fail, so the host inodes every
  sandbox sees read-only (``/usr``, ``/dev/null``) carry no signal from one to another;
* limits: per sandbox, a cgroup v1 memory + pids + cpu group (root on a cgroup v1 host); per
  process, RLIMIT_CPU, RLIMIT_FSIZE (and RLIMIT_AS / RLIMIT_NPROC when there is no cgroup);
  output past ``max_output_bytes`` and the wall clock kill the command;
* disk: as root, the workspace is a tmpfs of ``disk_mb`` (writes past it fail with ENOSPC).

Why subprocess and not a library: no maintained Python binding of bubblewrap exists; its command
line is its API.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import platform
import secrets
import selectors
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from turngym.envs.swe.sandbox import seccomp
from turngym.envs.swe.sandbox.base import (
    AGENT_TREE,
    PINNED_ENV,
    READ_ONLY_DIRS,
    SANDBOX_UID,
    SCRATCH,
    TOOLS,
    WORKDIR,
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxSpec,
    SandboxUnavailable,
    owner_gone,
    pid_alive,
    process_identity,
    running_as_root,
)

logger = logging.getLogger(__name__)

TOOLS_DIR = Path(__file__).resolve().parent.parent / "tools"
CGROUP_V1 = Path("/sys/fs/cgroup")
CGROUP_PARENT = "turngym"
INSTALL_HINT = (
    "Install bubblewrap (Debian/Ubuntu: `sudo apt-get install bubblewrap`; `make install` does it when run "
    "as root), or use sandbox='docker'."
)


def default_root() -> Path:
    """Where workspaces live: ``$TURNGYM_SANDBOX_ROOT`` or ``<tmp>/turngym-sandboxes``."""
    return Path(os.environ.get("TURNGYM_SANDBOX_ROOT") or Path(os.environ.get("TMPDIR", "/tmp")) / "turngym-sandboxes")


def check_available() -> None:
    """Raise :class:`SandboxUnavailable`, saying how to fix it, unless bwrap can run here."""
    missing = [tool for tool in ("bwrap", "prlimit", "bash") if shutil.which(tool) is None]
    if running_as_root() and shutil.which("setpriv") is None:
        missing.append("setpriv")
    if missing:
        raise SandboxUnavailable(f"the bwrap sandbox needs {', '.join(missing)} on PATH. {INSTALL_HINT}")
    if not Path("/usr/bin/git").exists():
        raise SandboxUnavailable("the bwrap sandbox runs the host's /usr/bin/git inside: `apt-get install git`")
    if "--perms" not in _bwrap_help():
        raise SandboxUnavailable("bubblewrap is too old (--perms is needed: 0.5 or newer). " + INSTALL_HINT)


@functools.lru_cache(maxsize=1)
def _bwrap_help() -> str:
    result = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=10, check=False)
    return result.stdout + result.stderr


def cgroups_usable() -> bool:
    """Root on a cgroup v1 host with writable memory and pids controllers."""
    return running_as_root() and all(os.access(CGROUP_V1 / c, os.W_OK) for c in ("memory", "pids", "cpu"))


class BwrapSandbox(Sandbox):
    backend = "bwrap"

    def __init__(self, spec: SandboxSpec, root: Path | None = None, agent_tree: Path | None = None) -> None:
        super().__init__(spec)
        self.agent_tree = agent_tree  # a grading sandbox: the agent's repository, bound read-only
        check_available()
        if spec.repo_dir is None:
            raise SandboxError(
                f"task {spec.name} has no local repository: the bwrap backend copies a directory or archive "
                "into the sandbox. Give the task a repo_path, or run it with sandbox='docker' and its image."
            )
        self.root = Path(root) if root is not None else default_root()
        self.as_root = running_as_root()
        self.workspace: Path | None = None
        self.cgroups: dict[str, Path] = {}
        self.mounted = False
        self.read_only: list[str] = []  # READ_ONLY_DIRS the pristine copy has (decided once, at creation)

    def _grading_sandbox(self) -> BwrapSandbox:
        spec = SandboxSpec(repo_dir=self.spec.repo_dir, image=self.spec.image,
                           lifetime_s=self.timeouts.create + 2 * self.timeouts.test + self.timeouts.teardown + 60.0,
                           limits=self.limits, timeouts=self.timeouts, name=f"grade-{self.spec.name}")
        return BwrapSandbox(spec, root=self.root, agent_tree=self.workspace / "repo")

    # ----------------------------------------------------------------- create / teardown
    def _create(self) -> None:
        deadline = time.monotonic() + self.timeouts.create
        self.root.mkdir(parents=True, exist_ok=True, mode=0o711)
        reap_stale(self.root)
        self.workspace = self.root / f"{self.safe_name}-{secrets.token_hex(4)}"
        self.workspace.mkdir(mode=0o711)
        if self.as_root and self.limits.disk_mb:
            self._mount_tmpfs()
        self._write_meta()
        repo, scratch, etc = self.workspace / "repo", self.workspace / "scratch", self.workspace / "etc"
        shutil.copytree(self.spec.repo_dir, repo, symlinks=True)
        self.read_only = [d for d in READ_ONLY_DIRS if (repo / d).is_dir() and not (repo / d).is_symlink()]
        scratch.mkdir()
        etc.mkdir()
        (etc / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n"
                                    f"nobody:x:{SANDBOX_UID}:{SANDBOX_UID}:nobody:/tmp:/bin/bash\n")
        (etc / "group").write_text(f"root:x:0:\nnogroup:x:{SANDBOX_UID}:\n")
        (etc / "hosts").write_text("127.0.0.1 localhost sandbox\n::1 localhost\n")
        (etc / "empty").write_text("")  # masks /proc/keys and /proc/key-users
        _normalise_tree(repo, owner=SANDBOX_UID if self.as_root else None)
        _normalise_tree(scratch, owner=SANDBOX_UID if self.as_root else None)
        if cgroups_usable():
            self._make_cgroups()
            self._write_meta()
        if time.monotonic() > deadline:
            raise SandboxError(f"creating sandbox {self.spec.name} took longer than {self.timeouts.create:g} s")

    def _mount_tmpfs(self) -> None:
        options = f"size={self.limits.disk_mb}m,mode=0711,nosuid,nodev"
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "turngym-sandbox", str(self.workspace)],
                                capture_output=True, text=True, timeout=self.timeouts.create, check=False)
        if result.returncode == 0:
            self.mounted = True
        else:  # e.g. a container without CAP_SYS_ADMIN: the workspace stays on disk, RLIMIT_FSIZE still applies
            logger.warning("could not mount a tmpfs for the sandbox workspace (%s); disk use is not capped",
                           result.stderr.strip())

    def _make_cgroups(self) -> None:
        leaf = f"{CGROUP_PARENT}/{self.workspace.name}"
        for controller in ("memory", "pids", "cpu"):
            path = CGROUP_V1 / controller / leaf
            path.mkdir(parents=True, exist_ok=True)
            self.cgroups[controller] = path
        memory = self.limits.memory_mb * 1024 * 1024
        (self.cgroups["memory"] / "memory.limit_in_bytes").write_text(str(memory))
        with contextlib.suppress(OSError):  # absent when the kernel has no swap accounting
            (self.cgroups["memory"] / "memory.memsw.limit_in_bytes").write_text(str(memory))
        (self.cgroups["pids"] / "pids.max").write_text(str(self.limits.max_processes))
        if self.limits.cpus:
            period = 100_000
            (self.cgroups["cpu"] / "cpu.cfs_period_us").write_text(str(period))
            (self.cgroups["cpu"] / "cpu.cfs_quota_us").write_text(str(int(self.limits.cpus * period)))

    def _write_meta(self) -> None:
        meta = {
            "owner_pid": os.getpid(),
            "owner": process_identity(),
            "expires_at": time.time() + self.spec.lifetime_s,
            "mounted": self.mounted,
            "cgroups": [str(p) for p in self.cgroups.values()],
        }
        # whole or not at all: the reaper reads it at any time (a workspace with none is reaped only when old)
        partial = self.workspace / f".meta-{secrets.token_hex(4)}"
        partial.write_text(json.dumps(meta))
        os.replace(partial, self.workspace / "meta.json")

    def _handles(self) -> dict:
        return {"workspace": self.workspace, "cgroups": list(self.cgroups.values()), "mounted": self.mounted,
                "timeout": self.timeouts.teardown}

    @staticmethod
    def _teardown_resources(handles: dict) -> None:
        _teardown(handles.get("workspace"), handles.get("cgroups", []), handles.get("mounted", False),
                  handles.get("timeout", 60.0))

    # ----------------------------------------------------------------- exec
    def _command_line(self, command: str, workdir: str, seccomp_fd: int | None = None) -> list[str]:
        ws = self.workspace
        line = ["bwrap", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                "--die-with-parent", "--new-session", "--hostname", "sandbox"]
        if not self.as_root:
            line += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--cap-drop", "ALL"]
        # Directories bwrap creates are root-only (0700) unless told otherwise.
        line += ["--ro-bind", "/usr", "/usr", "--perms", "0755", "--dir", "/etc", "--perms", "0755", "--dir", "/opt"]
        for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            path = Path("/") / top
            if path.is_symlink():
                line += ["--symlink", os.readlink(path), f"/{top}"]
            elif path.is_dir():
                line += ["--ro-bind", str(path), f"/{top}"]
        for shared in ("/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d"):
            if Path(shared).exists():
                line += ["--ro-bind", shared, shared]
        for name in ("passwd", "group", "hosts"):
            line += ["--ro-bind", str(ws / "etc" / name), f"/etc/{name}"]
        line += ["--ro-bind", str(TOOLS_DIR), TOOLS, "--proc", "/proc", "--dev", "/dev",
                 "--ro-bind", str(ws / "etc" / "empty"), "/proc/keys",
                 "--ro-bind", str(ws / "etc" / "empty"), "/proc/key-users",
                 "--perms", "1777", *self._tmp_size(), "--tmpfs", "/tmp",
                 "--bind", str(ws / "repo"), WORKDIR, "--bind", str(ws / "scratch"), SCRATCH]
        for directory in self.read_only:  # over the writable copy: the tests' requirements stay as installed
            line += ["--ro-bind", str(ws / "repo" / directory), f"{WORKDIR}/{directory}"]
        if self.agent_tree is not None:
            line += ["--perms", "0755", "--dir", str(Path(AGENT_TREE).parent),
                     "--ro-bind", str(self.agent_tree), AGENT_TREE]
        if seccomp_fd is not None:
            line += ["--seccomp", str(seccomp_fd)]
        line += ["--chdir", workdir, "--clearenv"]
        for key, value in PINNED_ENV.items():
            line += ["--setenv", key, value]
        limits = self.limits
        line += ["--", "prlimit", f"--cpu={limits.cpu_seconds}", f"--fsize={limits.max_file_mb * 1024 * 1024}",
                 "--core=0", f"--nofile={limits.max_open_files}"]
        if not self.cgroups:
            line += [f"--as={limits.memory_mb * 1024 * 1024}", f"--nproc={limits.max_processes}"]
        line.append("--")
        if self.as_root:
            line += ["setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups",
                     "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
        return [*line, "/bin/bash", "-c", command]

    def _tmp_size(self) -> list[str]:
        """Cap the private /tmp at ``disk_mb`` where bwrap can (0.8 and newer); memory caps it anyway."""
        if not self.limits.disk_mb:  # 0: no cap (``--size 0`` would stop every command from starting)
            return []
        return ["--size", str(self.limits.disk_mb << 20)] if "--size" in _bwrap_help() else []

    def _run(self, command: str, *, timeout: float, stdin: bytes | None, workdir: str) -> ExecResult:
        program = seccomp.build_filter()
        if program is None:
            _warn_no_seccomp()
            read_fd = None
        else:  # bwrap reads the filter from a pipe (a few hundred bytes: the pipe buffer holds it)
            read_fd, write_fd = os.pipe()
            try:
                os.write(write_fd, program)
            finally:
                os.close(write_fd)
        try:
            return self._run_line(self._command_line(command, workdir, read_fd), timeout=timeout, stdin=stdin,
                                  pass_fds=() if read_fd is None else (read_fd,))
        finally:
            if read_fd is not None:
                os.close(read_fd)

    def _run_line(self, line: list[str], *, timeout: float, stdin: bytes | None, pass_fds: tuple) -> ExecResult:
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}  # bwrap itself sees none of the caller's secrets
        if self.cgroups:
            # Join the cgroups before bwrap starts, so every process of the command is counted.
            env["TURNGYM_CGROUP_PROCS"] = " ".join(str(p / "cgroup.procs") for p in self.cgroups.values())
            join = 'for f in $TURNGYM_CGROUP_PROCS; do echo $$ > "$f" || exit 125; done; exec "$@"'
            line = ["/bin/sh", "-c", join, "sh", *line]
        oom_before = self._oom_kills()
        failcnt_before = self._memory_failures()
        start = time.monotonic()
        process = subprocess.Popen(line, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True, close_fds=True, pass_fds=pass_fds)
        if stdin is not None:
            threading.Thread(target=_feed, args=(process.stdin, stdin), daemon=True).start()
        output, timed_out, flooded = _collect(process, timeout, self.limits.max_output_bytes,
                                              kill=lambda: self._kill(process))
        try:
            exit_code = process.wait(timeout=self.timeouts.teardown)
        except subprocess.TimeoutExpired:
            self._kill(process)
            exit_code = process.wait(timeout=self.timeouts.teardown)
        self._kill_cgroup_members()  # nothing should be left; make sure
        killed = timed_out or flooded
        oom_kills = self._oom_kills()
        if oom_kills is not None:  # the memory cgroup's oom_kill counter (kernel 4.13 and newer)
            out_of_memory = oom_kills > oom_before
        else:  # older kernels: killed by SIGKILL (bwrap reports 128 + 9) after the cgroup hit its limit
            out_of_memory = exit_code in (137, -signal.SIGKILL) and self._memory_failures() > failcnt_before
        return ExecResult(
            exit_code=None if killed or exit_code < 0 else exit_code,
            output=output.decode("utf-8", errors="replace"),
            timed_out=timed_out,
            output_limit_hit=flooded,
            out_of_memory=bool(out_of_memory),
            duration_s=time.monotonic() - start,
        )

    def _kill(self, process: subprocess.Popen) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # bwrap dies; --die-with-parent takes its namespace down
        self._kill_cgroup_members()

    def _kill_cgroup_members(self) -> None:
        for path in self.cgroups.values():
            _kill_members(path)

    def _oom_kills(self) -> int | None:
        """The cgroup's count of OOM kills; 0 without a memory cgroup, ``None`` if the kernel keeps none."""
        memory = self.cgroups.get("memory")
        if memory is None:
            return 0
        with contextlib.suppress(OSError, ValueError):
            for row in (memory / "memory.oom_control").read_text().splitlines():
                if row.startswith("oom_kill "):
                    return int(row.split()[1])
        return None

    def _memory_failures(self) -> int:
        """How often the cgroup's memory use hit its limit (``memory.failcnt``)."""
        memory = self.cgroups.get("memory")
        with contextlib.suppress(OSError, ValueError, TypeError):
            return int((memory / "memory.failcnt").read_text())
        return 0


# --------------------------------------------------------------------------- helpers
@functools.lru_cache(maxsize=1)
def _warn_no_seccomp() -> None:
    logger.warning("no seccomp filter for %s: key management calls, nested user namespaces, io_uring, file "
                   "locks and access notifications are not blocked in the bwrap sandbox", platform.machine())


def _feed(pipe, data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, OSError):
        pipe.write(data)
    with contextlib.suppress(BrokenPipeError, OSError):
        pipe.close()


def _collect(process: subprocess.Popen, timeout: float, max_bytes: int, kill) -> tuple[bytes, bool, bool]:
    """Read the merged output until EOF; kill on the wall clock or past ``max_bytes``."""
    chunks: list[bytes] = []
    size = 0
    timed_out = flooded = False
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            # past the deadline, output already written is still read, without waiting: a command that ended
            # while this process was not running (stopped, or starved on a loaded machine) did not time out
            if not selector.select(timeout=max(0.0, min(remaining, 1.0))):
                if remaining <= 0:
                    timed_out = True
                    break
                continue
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                break
            chunks.append(chunk[: max(max_bytes - size, 0)])
            size += len(chunk)
            if size > max_bytes:
                flooded = True
                break
    if timed_out or flooded:
        kill()
    process.stdout.close()
    return b"".join(chunks), timed_out, flooded


def _kill_members(cgroup: Path) -> None:
    """SIGKILL every process in a cgroup v1 group, until it is empty (a fork bomb respawns)."""
    for _ in range(50):
        try:
            pids = [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def _normalise_tree(path: Path, owner: int | None) -> None:
    """Give the copy plain permissions (so its git snapshot is the same everywhere) and an owner."""
    for directory, dirnames, filenames in os.walk(path):
        entries = [(directory, True)] + [(os.path.join(directory, n), False) for n in filenames]
        entries += [(os.path.join(directory, n), False) for n in dirnames if os.path.islink(os.path.join(directory, n))]
        for entry, is_dir in entries:
            if os.path.islink(entry):
                if owner is not None:
                    os.lchown(entry, owner, owner)
                continue
            executable = is_dir or os.stat(entry).st_mode & 0o100
            os.chmod(entry, 0o755 if executable else 0o644)
            if owner is not None:
                os.chown(entry, owner, owner)


def _teardown(workspace: Path | None, cgroups: list[Path], mounted: bool, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for path in cgroups:
        _kill_members(path)
    for path in cgroups:
        while True:
            try:
                path.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:  # still busy: processes are exiting
                if time.monotonic() > deadline:
                    logger.error("could not remove cgroup %s within %g s", path, timeout)
                    break
                _kill_members(path)
                time.sleep(0.05)
    if workspace is None:
        return
    if mounted:
        result = subprocess.run(["umount", str(workspace)], capture_output=True, text=True, timeout=timeout,
                                check=False)
        if result.returncode != 0:  # busy: detach it, the kernel frees it when the last user goes
            subprocess.run(["umount", "-l", str(workspace)], capture_output=True, timeout=timeout, check=False)
    remove_tree(workspace, timeout)


def remove_tree(path: Path, timeout: float = 60.0) -> None:
    """``rm -rf`` that survives what an agent can build: a tree thousands of directories deep makes
    ``shutil.rmtree`` recurse past Python's limit (RecursionError); coreutils' ``rm`` walks it with fts."""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        pass
    if os.path.lexists(path):
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], capture_output=True, timeout=timeout,
                       check=False)


UNRECORDED_REAP_AFTER_S = 3600.0  # creating a sandbox takes seconds; its metadata is written right after mkdir


def _unrecorded(workspace: Path, now: float) -> dict | None:
    """Metadata to reap a workspace that has none, once it is older than :data:`UNRECORDED_REAP_AFTER_S`
    (a tmpfs may be mounted on it; its cgroups are unknown, and were made only after the metadata): else None."""
    try:
        if (not workspace.is_dir() or workspace.is_symlink()
                or now - workspace.stat().st_mtime < UNRECORDED_REAP_AFTER_S):
            return None
    except OSError:
        return None
    return {"owner_pid": 0, "expires_at": 0, "mounted": os.path.ismount(workspace), "cgroups": []}


def reap_stale(root: Path) -> int:
    """Remove workspaces (and their cgroups and mounts) left by owners that are gone: at once when the owner ran in
    this pid namespace and has certainly ended (SIGKILL, SIGTERM, the OOM killer; :func:`.base.owner_gone`),
    otherwise once their lifetime is over and their pid is free."""
    reaped = 0
    if not root.is_dir():
        return 0
    now = time.time()
    for workspace in root.iterdir():
        try:
            meta = json.loads((workspace / "meta.json").read_text())
        except (OSError, ValueError):
            meta = _unrecorded(workspace, now)  # its runner died between mkdir and the metadata
            if meta is None:
                continue
        if meta["owner_pid"] and not owner_gone(meta["owner_pid"], meta.get("owner", {})) and (
                meta["expires_at"] > now or pid_alive(meta["owner_pid"])):
            continue  # a live owner's, or one whose owner cannot be told dead (another pid namespace)
        logger.warning("reaping sandbox %s left behind by process %s", workspace.name, meta["owner_pid"])
        try:  # one workspace that cannot be removed must never stop new sandboxes from starting
            _teardown(workspace, [Path(p) for p in meta["cgroups"]], meta["mounted"], timeout=30.0)
        except Exception:
            logger.exception("could not reap sandbox %s", workspace.name)
            continue
        reaped += 1
    return reaped

