"""The ``docker`` backend, on the Docker SDK: one container per episode.

* ``network_mode="none"``; memory (swap included), CPU and pids limits; RLIMIT_CPU / FSIZE / core
  as container ulimits; all capabilities dropped but the few the runner's own set-up needs
  (processes of the sandbox user never hold any), and ``no-new-privileges``;
* commands run through ``docker exec`` as uid 65534 with the pinned environment, under
  ``timeout -s KILL`` as a backstop to the runner's own wall clock. As with bwrap, nothing
  outlives a command: when it ends, times out or floods its output, every process of the sandbox
  user in the container is killed (a fork bomb's children included);
* the image is the task's own (``image``: SWE-bench-style images hold the repository at
  ``/testbed``) or :data:`DEFAULT_IMAGE`, into which a local repository is copied at creation;
* the container's main process is ``sleep <lifetime>`` with ``auto_remove``, so a runner that is
  SIGKILLed leaves nothing behind for longer than the sandbox's lifetime;
* every container carries ownership labels (``turngym.owner`` = ``host/pid/session``, and each part
  on its own), and the first sandbox a process creates (then one every ``SWEEP_INTERVAL_S``)
  sweeps the daemon: :func:`sweep_stale` removes turngym containers whose owner on this host is
  dead, or was an earlier process with the same pid, and any turngym container past its lifetime;
* kernel channels (keyrings, nested user namespaces) are closed by Docker's default seccomp
  profile, which refuses ``keyctl``, ``add_key``, ``request_key`` and ``unshare``/``clone`` of
  namespaces to a container without ``CAP_SYS_ADMIN``, and by its masked ``/proc/keys``.

Images are built from a local root filesystem (no registry is needed): see ``docker/README.md``
and :func:`build_image`.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import queue
import secrets
import socket
import tarfile
import threading
import time
from pathlib import Path

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
    escape_controls,
    pid_alive,
)

logger = logging.getLogger(__name__)

DEFAULT_IMAGE = "turngym/swe-python:bookworm"
ROOTFS_IMAGE = "turngym/swe-rootfs:bookworm"
DOCKER_DIR = Path(__file__).resolve().parents[3] / "docker" / "swe"
TOOLS_DIR = Path(__file__).resolve().parent.parent / "tools"
LABEL = "turngym.sandbox"
INSTALL_HINT = (
    "Install Docker (Debian/Ubuntu: `sudo apt-get install docker.io`, then start the daemon: `sudo dockerd &` or "
    "`systemctl start docker`) and build the sandbox image with `make docker-image`; or use sandbox='bwrap'."
)
# Every command runs like this: under a backstop timeout, then every process it left behind (as the
# sandbox user: `kill -9 -1` spares only the caller) is killed, as bwrap's pid namespace does.
ONE_SHOT = 'timeout -s KILL "$1" bash -c "$2"; rc=$?; kill -9 -1 2>/dev/null; exit $rc'
# The runner's own set-up (copying the repository in, chown) runs as root; commands never do.
SETUP_CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETUID", "SETGID"]
OWNER_SESSION = secrets.token_hex(8)  # tells this process's containers from those of an earlier one with its pid
SWEEP_INTERVAL_S = 600.0
_sweep_lock = threading.Lock()
_last_sweep = {"at": None}


def owner_labels(lifetime_s: float) -> dict[str, str]:
    """The labels that say which process owns a container, and until when it may live."""
    host, pid = socket.gethostname(), str(os.getpid())
    return {LABEL: "1", "turngym.owner": f"{host}/{pid}/{OWNER_SESSION}", "turngym.owner_host": host,
            "turngym.owner_pid": pid, "turngym.owner_session": OWNER_SESSION,
            "turngym.expires_at": str(time.time() + lifetime_s)}


def _client(timeout: float):
    try:
        import docker
    except ImportError:
        raise SandboxUnavailable(
            "the docker backend needs the Docker SDK: `pip install docker`. " + INSTALL_HINT
        ) from None
    try:
        client = docker.from_env(timeout=max(math.ceil(timeout), 1))
        client.ping()
    except docker.errors.DockerException as error:
        raise SandboxUnavailable(f"no Docker daemon answers ({error}). {INSTALL_HINT}") from None
    return client


def check_available() -> None:
    """Raise :class:`SandboxUnavailable`, saying how to fix it, unless a Docker daemon answers."""
    _client(timeout=5).close()


def image_exists(name: str) -> bool:
    try:
        client = _client(timeout=5)
    except SandboxUnavailable:
        return False
    import docker

    try:
        client.images.get(name)
        return True
    except docker.errors.ImageNotFound:
        return False
    finally:
        client.close()


def _tar_of(directory: Path, *, owner: int, prefix: str = "") -> bytes:
    """A tar of ``directory``'s contents with one owner and plain modes (as the bwrap copy has)."""

    def normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = owner
        info.uname = info.gname = ""
        if not info.issym():
            info.mode = 0o755 if info.isdir() or info.mode & 0o100 else 0o644
        return info

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(directory.iterdir()):
            tar.add(path, arcname=prefix + path.name, filter=normalise)
    return buffer.getvalue()


class DockerSandbox(Sandbox):
    backend = "docker"

    def __init__(self, spec: SandboxSpec, agent_container=None) -> None:
        super().__init__(spec)
        self.image = spec.image or DEFAULT_IMAGE
        self.client = _client(timeout=spec.timeouts.create)
        self.container = None
        self.agent_container = agent_container  # a grading sandbox: the container whose /testbed it grades

    def _grading_sandbox(self) -> DockerSandbox:
        spec = SandboxSpec(repo_dir=self.spec.repo_dir, image=self.spec.image,
                           lifetime_s=self.timeouts.create + 2 * self.timeouts.test + self.timeouts.teardown + 60.0,
                           limits=self.limits, timeouts=self.timeouts, name=f"grade-{self.spec.name}")
        return DockerSandbox(spec, agent_container=self.container)

    # ----------------------------------------------------------------- create / teardown
    def _create(self) -> None:
        import docker

        deadline = time.monotonic() + self.timeouts.create
        _sweep_now_and_then(self.client)
        try:
            self.client.images.get(self.image)
        except docker.errors.ImageNotFound:
            raise SandboxUnavailable(
                f"docker image {self.image} is not present (nothing can be pulled here). "
                "Build it: `make docker-image` (the default image), or see docker/README.md."
            ) from None
        limits = self.limits
        ulimits = [docker.types.Ulimit(name="cpu", soft=limits.cpu_seconds, hard=limits.cpu_seconds),
                   docker.types.Ulimit(name="fsize", soft=limits.max_file_mb << 20, hard=limits.max_file_mb << 20),
                   docker.types.Ulimit(name="core", soft=0, hard=0),
                   docker.types.Ulimit(name="nofile", soft=limits.max_open_files, hard=limits.max_open_files)]
        self.container = self.client.containers.run(
            self.image,
            command=["sleep", str(int(self.spec.lifetime_s))],
            name=f"turngym-{self.safe_name}-{secrets.token_hex(4)}",
            detach=True,
            auto_remove=True,
            init=True,
            network_mode="none",
            mem_limit=f"{limits.memory_mb}m",
            memswap_limit=f"{limits.memory_mb}m",
            pids_limit=limits.max_processes,
            nano_cpus=int(limits.cpus * 1e9) if limits.cpus else None,
            cap_drop=["ALL"],
            cap_add=SETUP_CAPABILITIES,
            security_opt=["no-new-privileges"],
            ulimits=ulimits,
            tmpfs={"/tmp": f"size={limits.disk_mb}m,mode=1777" if limits.disk_mb else "mode=1777"},
            environment=PINNED_ENV,
            working_dir="/",
            labels=owner_labels(self.spec.lifetime_s),
        )
        setup = f"mkdir -p {WORKDIR} {SCRATCH} {TOOLS} && chown {SANDBOX_UID}:{SANDBOX_UID} {WORKDIR} {SCRATCH}"
        self._root(setup)
        self.container.put_archive(TOOLS, _tar_of(TOOLS_DIR, owner=0))
        if self.spec.repo_dir is not None:
            self._root(f"find {WORKDIR} -mindepth 1 -delete")  # the default image's /testbed is empty anyway
            self.container.put_archive(WORKDIR, _tar_of(Path(self.spec.repo_dir), owner=SANDBOX_UID))
            for directory in READ_ONLY_DIRS:  # root's, read-only to the sandbox user
                path = f"{WORKDIR}/{directory}"
                self._root(f"if [ -d {path} ] && [ ! -L {path} ]; then "
                           f"chown -R 0:0 {path} && chmod -R a+rX,go-w {path}; fi")
        else:
            self._root(f"test -d {WORKDIR} && chown -R {SANDBOX_UID}:{SANDBOX_UID} {WORKDIR}")
        if self.agent_container is not None:  # the agent's tree, root-owned and read-only to the sandbox user
            parent = str(Path(AGENT_TREE).parent)
            self._root(f"mkdir -p {parent}")
            bits, _ = self.agent_container.get_archive(WORKDIR)  # a tar of /testbed (top directory "testbed")
            self.container.put_archive(parent, b"".join(bits))
            self._root(f"chown -R 0:0 {parent} && chmod -R a+rX,go-w {parent}")
        if time.monotonic() > deadline:
            raise SandboxError(f"creating sandbox {self.spec.name} took longer than {self.timeouts.create:g} s")

    def _root(self, command: str) -> None:
        """Run one of the runner's own set-up commands as root inside the container."""
        exit_code, output = self.container.exec_run(["bash", "-c", command], user="root")
        if exit_code != 0:
            raise SandboxError(f"sandbox set-up `{command}` failed ({exit_code}): "
                               f"{escape_controls(output.decode(errors='replace')[-1000:])}")

    def _handles(self) -> dict:
        return {"client": self.client, "container_id": self.container.id if self.container is not None else None,
                "timeout": self.timeouts.teardown}

    @staticmethod
    def _teardown_resources(handles: dict) -> None:
        import docker

        client, container_id = handles.get("client"), handles.get("container_id")
        if client is None:
            return
        client.api.timeout = handles.get("timeout", 60.0)  # the teardown phase's own limit per request
        if container_id is not None:
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                client.api.remove_container(container_id, force=True)
            deadline = time.monotonic() + handles.get("timeout", 60.0)
            while time.monotonic() < deadline:  # auto_remove finishes asynchronously
                try:
                    client.api.inspect_container(container_id)
                except docker.errors.NotFound:
                    break
                time.sleep(0.05)
        client.close()

    # ----------------------------------------------------------------- exec
    def _run(self, command: str, *, timeout: float, stdin: bytes | None, workdir: str) -> ExecResult:
        from docker.utils.socket import frames_iter

        api = self.client.api
        start = time.monotonic()
        backstop = str(math.ceil(timeout) + 5)  # in-container backstop to the runner's own clock
        exec_id = api.exec_create(self.container.id, ["bash", "-c", ONE_SHOT, "turngym", backstop, command],
                                  stdin=stdin is not None, user=f"{SANDBOX_UID}:{SANDBOX_UID}", workdir=workdir,
                                  environment=PINNED_ENV)["Id"]
        stream = api.exec_start(exec_id, socket=True)
        raw = getattr(stream, "_sock", stream)
        if stdin is not None:
            with contextlib.suppress(OSError):
                raw.sendall(stdin)
        with contextlib.suppress(OSError):
            raw.shutdown(socket.SHUT_WR)
        chunks: queue.Queue[bytes | None] = queue.Queue()

        def pump() -> None:
            try:
                for _, data in frames_iter(stream, tty=False):
                    chunks.put(data)
            except Exception:  # noqa: BLE001, S110 - a closed socket ends the stream
                pass
            chunks.put(None)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        output, size, timed_out, flooded = [], 0, False, False
        deadline = start + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:  # past the deadline, what was already read still counts (see bwrap's _collect)
                chunk = chunks.get(timeout=min(remaining, 1.0)) if remaining > 0 else chunks.get_nowait()
            except queue.Empty:
                if remaining <= 0:
                    timed_out = True
                    break
                continue
            if chunk is None:
                break
            output.append(chunk[: max(self.limits.max_output_bytes - size, 0)])
            size += len(chunk)
            if size > self.limits.max_output_bytes:
                flooded = True
                break
        if timed_out or flooded:
            self._kill_sandbox_processes()
        with contextlib.suppress(OSError):
            stream.close()
        reader.join(timeout=self.timeouts.teardown)
        exit_code = self._exit_code(exec_id)
        killed = timed_out or flooded
        return ExecResult(
            exit_code=None if killed else exit_code,
            output=b"".join(output).decode("utf-8", errors="replace"),
            timed_out=timed_out,
            output_limit_hit=flooded,
            out_of_memory=not killed and exit_code == 137 and self._oom_killed(),
            duration_s=time.monotonic() - start,
        )

    def _exit_code(self, exec_id: str) -> int | None:
        deadline = time.monotonic() + self.timeouts.teardown
        while time.monotonic() < deadline:
            info = self.client.api.exec_inspect(exec_id)
            if not info["Running"]:
                return info["ExitCode"]
            time.sleep(0.02)
        return None

    def _kill_sandbox_processes(self) -> None:
        """SIGKILL every process of the sandbox user in the container (``kill -9 -1`` as that user)."""
        with contextlib.suppress(Exception):  # the container may be gone already
            self.container.exec_run(["bash", "-c", "kill -9 -1"], user=f"{SANDBOX_UID}:{SANDBOX_UID}")

    def _oom_killed(self) -> bool:
        """Whether the kernel's OOM killer fired in this container (cgroup v1 with the cgroupfs driver)."""
        path = Path(f"/sys/fs/cgroup/memory/docker/{self.container.id}/memory.oom_control")
        with contextlib.suppress(OSError, ValueError):
            for row in path.read_text().splitlines():
                if row.startswith("oom_kill "):
                    return int(row.split()[1]) > 0
        return True  # exit 137 without a timeout: a SIGKILL from the OOM killer is the likely cause


def _sweep_now_and_then(client) -> None:
    """:func:`sweep_stale` at this process's first sandbox, then at most every ``SWEEP_INTERVAL_S``."""
    with _sweep_lock:
        now = time.monotonic()
        if _last_sweep["at"] is not None and now - _last_sweep["at"] < SWEEP_INTERVAL_S:
            return
        _last_sweep["at"] = now
    try:
        sweep_stale(client)
    except Exception:  # a failed sweep must never stop a sandbox from starting
        logger.exception("sweeping stale turngym containers failed")


def is_stale(labels: dict, *, now: float, host: str, pid: int, session: str, alive=pid_alive) -> bool:
    """Whether a turngym container (by its labels) is left over and may be removed.

    Past its lifetime: always (its ``sleep`` has ended; nobody can use it). Before: only when its
    owner ran on this host and is dead, or had this process's pid in an earlier process (another
    session). Containers of live owners, and of other hosts sharing the daemon, are left alone."""
    try:
        expires_at = float(labels.get("turngym.expires_at", "inf"))
        owner_pid = int(labels.get("turngym.owner_pid", "0"))
    except ValueError:
        return False
    if expires_at < now:
        return True
    if labels.get("turngym.owner_host") != host or owner_pid <= 0:
        return False  # another machine's (or an unlabelled) container: only its lifetime ends it
    if owner_pid == pid:
        return labels.get("turngym.owner_session") != session
    return not alive(owner_pid)


def sweep_stale(client, *, now: float | None = None, host: str | None = None, pid: int | None = None,
                session: str | None = None, alive=pid_alive) -> list[str]:
    """Remove stale turngym containers (:func:`is_stale`); return their names.

    ``client`` is a ``docker.DockerClient`` or anything with ``containers.list(all=, filters=)``
    returning objects with ``labels``, ``name`` and ``remove(force=)``."""
    now = time.time() if now is None else now
    host = socket.gethostname() if host is None else host
    pid = os.getpid() if pid is None else pid
    session = OWNER_SESSION if session is None else session
    removed = []
    for container in client.containers.list(all=True, filters={"label": LABEL}):
        labels = container.labels or {}
        if not is_stale(labels, now=now, host=host, pid=pid, session=session, alive=alive):
            continue
        logger.warning("removing stale sandbox container %s (owner %s)", container.name,
                       labels.get("turngym.owner") or labels.get("turngym.owner_pid"))
        try:
            container.remove(force=True)
        except Exception as error:  # noqa: BLE001 - already gone (auto_remove) or the daemon refused
            logger.debug("could not remove %s: %s", container.name, error)
            continue
        removed.append(container.name)
    return removed


# --------------------------------------------------------------------------- images
def build_image(tag: str = DEFAULT_IMAGE, *, repo_dir: Path | None = None, base: str | None = None,
                timeout: float = 600.0) -> str:
    """Build a sandbox image from ``docker/swe/Dockerfile`` on ``base`` (a local root filesystem).

    With ``repo_dir``, the repository is baked in at ``/testbed``: a per-task image, as
    SWE-bench ships them (``docker/swe/task.Dockerfile``). Returns the image id.
    """
    base = base or (DEFAULT_IMAGE if repo_dir is not None else ROOTFS_IMAGE)
    client = _client(timeout=timeout)
    try:
        client.images.get(base)
    except Exception:  # noqa: BLE001 - docker.errors.ImageNotFound, imported lazily
        raise SandboxUnavailable(f"base image {base} is missing: `make docker-image` builds it "
                                 "(debootstrap + docker import; no registry needed)") from None
    dockerfile = "task.Dockerfile" if repo_dir is not None else "Dockerfile"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(DOCKER_DIR / dockerfile, arcname="Dockerfile")
        tar.add(TOOLS_DIR / "unittest_runner.py", arcname="unittest_runner.py")
        if repo_dir is not None:
            with tarfile.open(fileobj=io.BytesIO(_tar_of(Path(repo_dir), owner=SANDBOX_UID, prefix="repo/"))) as repo:
                for member in repo.getmembers():
                    tar.addfile(member, repo.extractfile(member) if member.isfile() else None)
    buffer.seek(0)
    image, _ = client.images.build(fileobj=buffer, custom_context=True, tag=tag, rm=True,
                                   buildargs={"BASE": base})
    client.close()
    logger.info("built docker image %s (%s)", tag, image.short_id)
    return image.id


if __name__ == "__main__":  # python -m turngym.envs.swe.sandbox.docker [tag]: build the default image
    import sys

    logging.basicConfig(level=logging.INFO)
    build_image(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_IMAGE)
