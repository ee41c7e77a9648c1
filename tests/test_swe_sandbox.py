"""Security and reliability of the SWE sandbox: what code inside it must not be able to do.

Every attack runs for real in the sandbox and must come back as an ordinary result (an exit code,
a kill reason) while the runner stays healthy. The bwrap cases run in the default suite (CI runs as
root with bubblewrap installed by the Makefile); the docker cases run with ``make test-docker``.
"""

from __future__ import annotations

import gc
import json
import os
import secrets
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import ClassVar

import psutil
import pytest

from turngym.agents.rollout import LIMIT_REASONS
from turngym.envs.swe import SandboxLimits, SWEEnv, swe_tasks
from turngym.envs.swe.sandbox import (
    PhaseTimeouts,
    SandboxSpec,
    backend_available,
    configure_concurrency,
    make_sandbox,
)
from turngym.envs.swe.sandbox import base as sandbox_base
from turngym.envs.swe.sandbox import docker as docker_backend
from turngym.envs.swe.sandbox.base import ExecResult, Sandbox, SandboxError, running_as_root
from turngym.envs.swe.sandbox.bwrap import CGROUP_PARENT, CGROUP_V1, cgroups_usable, reap_stale
from turngym.envs.swe.sandbox.seccomp import build_filter

REPO_ROOT = Path(__file__).resolve().parent.parent
LIMITS = SandboxLimits(memory_mb=256, max_processes=64, max_output_bytes=200_000, cpu_seconds=30, max_file_mb=64,
                       disk_mb=128)
BACKENDS = [
    pytest.param("bwrap", id="bwrap"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]


def skip_unless_available(backend: str) -> None:
    problem = backend_available(backend)
    if problem:
        pytest.skip(f"{backend} sandbox unavailable: {problem}")
    if backend == "docker":
        from turngym.envs.swe.sandbox import docker

        if not docker.image_exists(docker.DEFAULT_IMAGE):
            pytest.skip(f"docker image {docker.DEFAULT_IMAGE} is not built: run `make docker-image`")


@pytest.fixture
def repo(tmp_path) -> Path:
    directory = tmp_path / "repo"
    (directory / "pkg").mkdir(parents=True)
    (directory / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    return directory


@pytest.fixture(params=BACKENDS)
def sandbox(request, repo, tmp_path):
    skip_unless_available(request.param)
    spec = SandboxSpec(repo_dir=repo, limits=LIMITS, timeouts=PhaseTimeouts(exec=5.0), name="security", lifetime_s=600)
    with make_sandbox(request.param, spec, workspace_root=tmp_path / "sandboxes") as box:
        yield box
    assert box.closed


@pytest.fixture
def make_box(repo, tmp_path):
    """A started sandbox of a backend with given limits (closed after the test)."""
    made = []

    def factory(backend: str, limits: SandboxLimits = LIMITS, root: Path | None = None):
        skip_unless_available(backend)
        spec = SandboxSpec(repo_dir=repo, limits=limits, timeouts=PhaseTimeouts(exec=10.0), name="limits",
                           lifetime_s=600)
        box = make_sandbox(backend, spec, workspace_root=root or tmp_path / "sandboxes").start()
        made.append(box)
        return box

    yield factory
    for box in made:
        box.close()


def assert_healthy(box) -> None:
    """The sandbox still runs commands, and the runner itself is fine."""
    result = box.exec("echo healthy; cat /testbed/pkg/__init__.py", timeout=10)
    assert result.exit_code == 0 and result.output == "healthy\nVALUE = 1\n"


def host_processes_matching(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if marker in " ".join(process.info["cmdline"] or []):
            found.append(process)
    return found


# --------------------------------------------------------------------------- isolation
def test_no_network(sandbox):
    probe = textwrap.dedent("""\
        import socket
        for address in [("1.1.1.1", 53), ("pypi.org", 443), ("deb.debian.org", 80)]:
            try:
                socket.create_connection(address, timeout=3).close()
                print("CONNECTED", address)
            except OSError as error:
                print("blocked", address, type(error).__name__)
    """)
    result = sandbox.exec(f"python3 -c '{probe}'; cat /proc/net/dev")
    assert result.exit_code == 0, result.output
    assert "CONNECTED" not in result.output and result.output.count("blocked") == 3
    interfaces = {line.split(":")[0].strip() for line in result.output.splitlines() if ":" in line and "|" not in line}
    assert interfaces <= {"lo"}, interfaces  # only loopback exists
    assert_healthy(sandbox)


def test_cannot_read_root_home_or_secrets(sandbox, monkeypatch):
    monkeypatch.setenv("TURNGYM_TEST_SECRET", "hunter2-do-not-leak")
    command = (
        "env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; "
        f"ls /root /home {REPO_ROOT} 2>&1; cat /root/.bash_history /etc/shadow 2>&1; "
        "find / -xdev -name '*.pem' -path '*root*' 2>/dev/null | head; id"
    )
    result = sandbox.exec(command)
    assert "hunter2-do-not-leak" not in result.output
    assert "TURNGYM_TEST_SECRET" not in result.output
    assert "uid=65534" in result.output
    for path in ("/root", str(REPO_ROOT)):
        assert f"cannot open directory '{path}'" in result.output or f"cannot access '{path}'" in result.output
    caps = sandbox.exec("grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status")
    if sandbox.backend == "bwrap":  # docker keeps a bounding set for root's own set-up; 65534 holds none
        assert all(line.split()[1] == "0000000000000000" for line in caps.output.splitlines())
    else:
        assert all(line.split()[1] == "0000000000000000" for line in caps.output.splitlines() if "Bnd" not in line)
    assert_healthy(sandbox)


def test_cannot_write_outside_its_copy(sandbox, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    targets = ["/usr/bin/pwned", "/etc/pwned", "/pwned", "/opt/turngym/unittest_runner.py", f"{outside}/pwned",
               f"{REPO_ROOT}/pwned", "/root/pwned"]
    command = "; ".join(f"(echo x > {t}) 2>/dev/null && echo WROTE {t} || echo refused {t}" for t in targets)
    result = sandbox.exec(command + "; echo ok > /testbed/mine && echo WROTE-COPY", timeout=60)  # loaded CI cores
    assert "WROTE /" not in result.output, result.output
    assert result.output.count("refused") == len(targets) and "WROTE-COPY" in result.output
    assert not (outside / "pwned").exists() and not (REPO_ROOT / "pwned").exists()
    assert_healthy(sandbox)


# --------------------------------------------------------------------------- resource exhaustion
def test_fork_bomb(sandbox):
    result = sandbox.exec(":(){ :|:& };: ; sleep 987651", timeout=4)
    assert result.timed_out or result.exit_code != 0
    assert not host_processes_matching("987651")
    assert_healthy(sandbox)
    assert int(sandbox.exec("ps -e --no-headers | wc -l").output) < 10  # nothing of the bomb is left


@pytest.mark.parametrize("bomb", ["x = bytearray(8 * 1024 ** 3)", "l = []\nwhile True: l.append(bytearray(10 ** 7))"])
def test_memory_bomb(sandbox, bomb):
    result = sandbox.exec(f"python3 -c '{bomb}'", timeout=20)
    assert result.exit_code != 0 and not result.timed_out
    if sandbox.backend == "docker" or cgroups_usable():  # a cgroup limit: the kernel's OOM killer
        assert result.out_of_memory and result.exit_code == 137
        assert "ran out of memory (limit 256 MB)" in result.describe_kill(5, LIMITS)
    else:  # RLIMIT_AS: the allocation fails
        assert "MemoryError" in result.output
    assert_healthy(sandbox)


def test_a_gigabyte_of_output(sandbox):
    result = sandbox.exec("head -c 1000000000 /dev/zero | tr '\\0' x; echo never", timeout=60)
    assert result.output_limit_hit and not result.timed_out and result.exit_code is None
    assert len(result.output) <= LIMITS.max_output_bytes and set(result.output) == {"x"}
    assert "printed more than 200000 bytes" in result.describe_kill(60, LIMITS)
    assert_healthy(sandbox)


def test_a_disk_bomb_is_stopped(sandbox):
    result = sandbox.exec("head -c 200000000 /dev/zero > /testbed/big; ls -l /testbed/big", timeout=30)
    assert result.exit_code != 0 or "File size limit exceeded" in result.output
    size = int(sandbox.exec("stat -c %s /testbed/big").output or 0)
    assert size <= LIMITS.max_file_mb * 1024 * 1024
    sandbox.exec("rm -f /testbed/big")
    assert_healthy(sandbox)


def test_hang_past_the_wall_limit(sandbox):
    # ignores SIGTERM, detaches a grandchild into its own session, then hangs
    command = "trap '' TERM HUP; (setsid sleep 987652 &); nohup sleep 987653 >/dev/null 2>&1 & sleep 987654"
    start = time.monotonic()
    result = sandbox.exec(command, timeout=2)
    assert result.timed_out and result.exit_code is None
    assert time.monotonic() - start < 2 + 10  # killed promptly, not at the end of the sleep
    assert "did not finish within 2 s" in result.describe_kill(2, LIMITS)
    time.sleep(0.2)
    for marker in ("987652", "987653", "987654"):
        assert not host_processes_matching(marker), f"a process outlived its command: sleep {marker}"
    assert_healthy(sandbox)


def test_background_processes_do_not_outlive_their_command(sandbox):
    assert sandbox.exec("sleep 987655 & echo started").output == "started\n"
    time.sleep(0.2)
    assert not host_processes_matching("987655")


def test_pinned_environment(sandbox):
    result = sandbox.exec("echo $TZ $PYTHONHASHSEED; python3 -c 'import time; print(time.tzname[0])'; date +%Z")
    assert result.output.split() == ["UTC", "0", "UTC", "UTC"]


# --------------------------------------------------------------------------- through the env: clear observations
@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("python3 -c 'x = bytearray(8 * 1024 ** 3)'", None),
        ("yes", "printed more than 200000 bytes and was killed"),
        ("sleep 30", "did not finish within 3 s and was killed"),
        (":(){ :|:& };: ; sleep 30", "did not finish within 3 s and was killed"),
    ],
)
def test_attacks_come_back_as_observations(command, expected, tmp_path):
    skip_unless_available("bwrap")
    env = SWEEnv(tasks=swe_tasks("train", n=1), sandbox="bwrap", limits=LIMITS, timeouts={"exec": 3.0},
                 workspace_root=tmp_path)
    try:
        env.reset(seed=0)
        obs, _, terminated, truncated, info = env.step(f"```bash\n{command}\n```")
        assert not info["invalid_action"]
        if expected is None and cgroups_usable():  # OOM-killed at the cgroup's limit: the episode ends
            assert truncated and not terminated and info["truncation_reason"] == "oom_killed"
            assert "ran out of memory (limit 256 MB)" in obs and "episode was truncated" in obs
            assert "pass_ratio" in info  # graded, as every ending is
            return
        assert not (terminated or truncated)
        if expected is None:  # memory under rlimits: the allocation fails with MemoryError
            assert "MemoryError" in obs
        else:
            assert obs.startswith(f"[turngym] the command {expected}.")
        assert len(obs) <= env.max_observation_chars
        obs, *_ = env.step("```bash\necho still here\n```")
        assert "still here" in obs
    finally:
        env.close()


# --------------------------------------------------------------------------- reliability
def _cgroup_leaves_left(workspaces: set[str]) -> set[str]:
    """Those of these sandboxes' cgroup leaves (named after their workspaces) still there. Only the test's own:
    other xdist workers' sandboxes come and go meanwhile."""
    parent = CGROUP_V1 / "memory" / CGROUP_PARENT
    return {p.name for p in parent.iterdir() if p.is_dir()} & workspaces if parent.is_dir() else set()


def _mounts_under(root: Path) -> list[str]:
    return [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if str(root) in line]


def _docker_containers() -> list[str]:
    from turngym.envs.swe.sandbox.docker import LABEL, _client

    client = _client(timeout=10)
    try:
        return [c.name for c in client.containers.list(all=True, filters={"label": LABEL})]
    finally:
        client.close()


def second_task_of_each_repository(tasks) -> list:
    """The second task of each shipped repository (ids ``turngym__<repository>-<n>``), in the set's order: the fast
    suite's sandbox validation (test_swe_tasks.py) takes the first, so between them 12 tasks run in `make test`."""
    chosen, seen = [], {}
    for task in tasks:
        repository = task.id.rsplit("-", 1)[0]
        seen[repository] = seen.get(repository, 0) + 1
        if seen[repository] == 2:
            chosen.append(task)
    return chosen


# every shipped task under `slow`; one per repository in the fast suite, alternately solved and not
SCOPES = [pytest.param("one_per_repository", id="one-per-repository"),
          pytest.param("every", id="every", marks=pytest.mark.slow)]


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_episode_of_every_shipped_task_leaves_nothing_behind(backend, scope, tmp_path):
    """An episode of each task (26; 6 in the fast suite, one per repository), half solved by the walkthrough, half
    submitted untouched, each with a messy command first: no process, descriptor, mount, folder, cgroup leaf or
    container is left."""
    skip_unless_available(backend)
    root = tmp_path / "sandboxes"
    me = psutil.Process()
    children_before = {p.pid for p in me.children(recursive=True)}
    fds_before = me.num_fds()
    containers_before = _docker_containers() if backend == "docker" else []
    tasks = swe_tasks(None) if scope == "every" else second_task_of_each_repository(swe_tasks(None))
    env = SWEEnv(tasks=tasks, sandbox=backend, workspace_root=root, limits=LIMITS)
    messy = ("```bash\n(sleep 987656 &); echo x > /tmp/junk; echo y > /scratch/junk; "
             "mkdir -p build && touch build/out\n```")
    rewards, leaves = [], set()  # this env's cgroup leaves (workers running other tests make their own)
    try:
        for episode, task in enumerate(tasks):
            _, info = env.reset(options={"task": task})
            leaves.add(getattr(env.unwrapped._sandbox, "workspace", root).name)
            actions = [messy] + (info["walkthrough"] if episode % 2 == 0 else ["submit"])
            for action in actions:
                *_, terminated, _, info = env.step(action)
            assert terminated
            rewards.append(info["episode_reward"])
    finally:
        env.close()
    assert len(rewards) == len(tasks) >= (20 if scope == "every" else 6)
    assert rewards == [1.0 if e % 2 == 0 else 0.0 for e in range(len(tasks))]  # and every episode graded right
    gc.collect()
    assert {p.pid for p in me.children(recursive=True)} <= children_before
    assert not host_processes_matching("987656")
    assert me.num_fds() <= fds_before + 3
    assert not _mounts_under(root)
    assert not root.exists() or not any(root.iterdir())
    assert not _cgroup_leaves_left(leaves)
    if backend == "docker":
        assert _docker_containers() == containers_before


def test_an_env_dropped_without_close_still_tears_down(tmp_path):
    skip_unless_available("bwrap")
    root = tmp_path / "sandboxes"
    env = SWEEnv(tasks=swe_tasks("train", n=1), sandbox="bwrap", workspace_root=root)
    env.reset(seed=0)
    assert len(list(root.iterdir())) == 1
    del env
    gc.collect()
    assert not any(root.iterdir()) and not _mounts_under(root)


CRASHING_RUNNER = """
import os, signal, sys
from pathlib import Path
from turngym.envs.swe.sandbox import SandboxSpec, make_sandbox
spec = SandboxSpec(repo_dir=Path(sys.argv[1]), name="crash", lifetime_s=float(sys.argv[3]))
box = make_sandbox("bwrap", spec, workspace_root=Path(sys.argv[2])).start()
box.exec("echo started")
print("READY", flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no finaliser, no atexit: the sandbox is left behind
"""


def test_a_sigkilled_runners_sandbox_is_reaped_at_once(repo, tmp_path):
    """Its owner ran in this pid namespace and is gone: the next start reaps it, however long its lifetime."""
    skip_unless_available("bwrap")
    root = tmp_path / "sandboxes"
    child = subprocess.run([sys.executable, "-c", CRASHING_RUNNER, str(repo), str(root), "3600"],
                           capture_output=True, text=True, cwd=REPO_ROOT, timeout=60, check=False)
    assert child.returncode == -9 and "READY" in child.stdout, child.stderr
    left = list(root.iterdir())
    assert len(left) == 1  # the workspace (and its tmpfs and cgroups, as root) was left behind
    if running_as_root():
        assert _mounts_under(root)
        assert _cgroup_leaves_left({left[0].name}) or not (CGROUP_V1 / "memory" / CGROUP_PARENT).is_dir()
    assert reap_stale(root) == 1
    assert not any(root.iterdir()) and not _mounts_under(root)
    assert not _cgroup_leaves_left({left[0].name})
    assert os.path.exists(repo)  # the task's own repository is never touched


def _left_workspace(root: Path, name: str, owner_pid: int, owner: dict | None, expires_at: float) -> Path:
    workspace = root / name
    (workspace / "repo").mkdir(parents=True)
    meta = {"owner_pid": owner_pid, "expires_at": expires_at, "mounted": False, "cgroups": []}
    if owner is not None:
        meta["owner"] = owner
    (workspace / "meta.json").write_text(json.dumps(meta))
    return workspace


def test_a_left_sandbox_is_reaped_only_when_its_owner_is_certainly_gone(tmp_path):
    from turngym.envs.swe.sandbox.base import process_identity

    me = process_identity()
    assert me and me["pid_ns"].startswith("pid:[") and len(me["boot_id"]) == 36
    dead = subprocess.Popen(["true"])
    dead.wait()
    later = time.time() + 3600

    def owner(**changed):
        return {**me, **changed}

    kept = {
        # a live owner (this process), its lifetime over or not
        "live-owner": (os.getpid(), me, later),
        "live-owner-expired": (os.getpid(), me, 0),
        # pid 1 is alive: its /proc entry may be unreadable (ptrace rules), which never reads as gone
        "live-pid-1": (1, owner(start=me["start"]), later),
        # a dead pid, but the owner cannot be told gone: another pid namespace, another machine or boot sharing the
        # root (the first pid namespace has the same name on every host), or no identity (an older layout)
        "other-namespace": (dead.pid, owner(pid_ns="pid:[1]"), later),
        "other-boot": (dead.pid, owner(boot_id="0" * 8 + me["boot_id"][8:]), later),
        "no-identity": (dead.pid, None, later),
        "empty-identity": (dead.pid, {}, later),
    }
    reaped = {
        "dead-owner": (dead.pid, owner(start=1), later),
        # this process has the pid now, but it started after the owner recorded its start
        "pid-reused": (os.getpid(), owner(start=me["start"] - 1), later),
        "no-identity-expired": (dead.pid, None, 0),
    }
    for name, (pid, identity, expires_at) in {**kept, **reaped}.items():
        _left_workspace(tmp_path, name, pid, identity, expires_at)
    assert reap_stale(tmp_path) == len(reaped)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)


def test_a_workspace_with_no_metadata_is_reaped_only_when_old(tmp_path):
    """A runner killed between mkdir and the metadata leaves none; a runner writing it leaves a whole file or none."""
    from turngym.envs.swe.sandbox.bwrap import UNRECORDED_REAP_AFTER_S

    fresh, old, torn = tmp_path / "fresh", tmp_path / "old", tmp_path / "torn"
    for workspace in (fresh, old, torn):
        (workspace / "repo").mkdir(parents=True)
    (torn / "meta.json").write_text('{"owner_pid": ')
    for workspace in (old, torn):
        past = time.time() - UNRECORDED_REAP_AFTER_S - 60
        os.utime(workspace, (past, past))
    (tmp_path / "a-file").write_text("not a workspace")
    assert reap_stale(tmp_path) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "fresh"]


def test_the_sandbox_metadata_names_its_owner(make_box):
    from turngym.envs.swe.sandbox.base import process_identity

    box = make_box("bwrap")
    meta = json.loads((box.workspace / "meta.json").read_text())
    assert meta["owner_pid"] == os.getpid() and meta["owner"] == process_identity()
    assert not list(box.workspace.glob(".meta-*"))  # written whole, through a rename


# --------------------------------------------------------------------------- issue #15: kernel channels
KEYRING_PROBE = """
import ctypes, platform, sys
ADD_KEY, KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
mode, name = sys.argv[1], sys.argv[2].encode()
for ring in (-4, -3, -5):  # the user, session and user-session keyrings
    if mode == "write":
        key = libc.syscall(ADD_KEY, b"user", name, b"payload-" + name, ctypes.c_size_t(8 + len(name)), ring)
        print("ADDED" if key > 0 else "add_key refused", ring, ctypes.get_errno())
    else:
        key = libc.syscall(KEYCTL, 10, ring, b"user", name, 0)  # KEYCTL_SEARCH
        if key > 0:
            buffer = ctypes.create_string_buffer(256)
            size = libc.syscall(KEYCTL, 11, key, buffer, 256)  # KEYCTL_READ
            print("FOUND", ring, buffer.raw[: max(size, 0)])
        else:
            print("not found", ring, ctypes.get_errno())
print(open("/proc/keys").read())
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_kernel_keyring_carries_nothing_between_episodes(backend, make_box, tmp_path):
    """uid 65534's user keyring is one kernel object for every sandbox on the host: a key one episode
    writes would be readable by the next one. The key management calls fail in the sandbox."""
    name = f"turngym-probe-{secrets.token_hex(4)}"
    first = make_box(backend)
    written = first.exec(f"python3 -c {_quote(KEYRING_PROBE)} write {name}")
    assert written.exit_code == 0, written.output
    assert "ADDED" not in written.output and written.output.count("add_key refused") == 3
    first.close()
    second = make_box(backend)
    read = second.exec(f"python3 -c {_quote(KEYRING_PROBE)} read {name}")
    assert read.exit_code == 0, read.output
    assert "FOUND" not in read.output and name not in read.output  # neither the payload nor the key's name
    assert_healthy(second)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


NAMESPACE_PROBE = """
import ctypes, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
print("unshare(CLONE_NEWUSER):", libc.unshare(0x10000000), ctypes.get_errno())
done = []
thread = threading.Thread(target=done.append, args=(1,))
thread.start(); thread.join()
print("thread:", done, "process:", subprocess.run(["true"]).returncode)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_nested_user_namespaces(backend, make_box):
    """A user namespace inside the sandbox would hand the command capabilities over namespaces of its own."""
    box = make_box(backend)
    result = box.exec(f"unshare -U -r id; echo unshare=$?; unshare --user --map-root-user --fork id; "
                      f"python3 -c {_quote(NAMESPACE_PROBE)}")
    assert "uid=0" not in result.output, result.output
    assert "unshare=1" in result.output and "unshare(CLONE_NEWUSER): -1 1" in result.output
    assert "thread: [1] process: 0" in result.output  # threads and processes still start (clone3 -> clone)
    assert_healthy(box)


def test_the_seccomp_filter_is_well_formed():
    program = build_filter("x86_64")
    assert len(program) % 8 == 0 and 12 <= len(program) // 8 <= 64  # struct sock_filter rows, BPF_MAXINSNS
    assert build_filter("aarch64") != program and build_filter("riscv64") is None


# --------------------------------------------------------------------------- issue #15: limits and teardown
def test_no_disk_cap_still_starts(make_box):
    box = make_box("bwrap", SandboxLimits(**{**LIMITS.__dict__, "disk_mb": 0}))
    result = box.exec("echo x > /tmp/x && echo x > /testbed/x && cat /tmp/x /testbed/x")
    assert result.exit_code == 0 and result.output == "x\nx\n", result.output
    assert_healthy(box)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_open_files_limit_is_enforced(backend, make_box):
    box = make_box(backend, SandboxLimits(**{**LIMITS.__dict__, "max_open_files": 64}))
    probe = ("import os\nfiles = []\ntry:\n    for _ in range(500): files.append(open('/dev/null'))\n"
             "except OSError as error: print('refused after', len(files), error.errno)\nelse: print('opened 500')")
    result = box.exec(f"ulimit -n; python3 -c {_quote(probe)}")
    assert result.output.splitlines()[0] == "64", result.output
    assert "refused after" in result.output and "opened 500" not in result.output
    assert int(result.output.split("refused after")[1].split()[0]) < 64  # EMFILE before 64 descriptors
    assert_healthy(box)


DEPTH = 1500


def test_a_deep_directory_tree_is_torn_down_and_reaped(make_box, tmp_path):
    """An agent can build a tree deeper than Python's recursion limit: teardown, and the reaping of a
    dead runner's workspace holding one, must still remove it and never stop later sandboxes."""
    root = tmp_path / "sandboxes"
    try:
        box = make_box("bwrap", root=root)
        deep = "/".join(["d"] * DEPTH)
        result = box.exec(f"mkdir -p {deep} && cd {deep} && pwd | tr -cd / | wc -c")
        assert result.exit_code == 0 and int(result.output) == DEPTH + 1, result.output  # /testbed/d/.../d
        box.close()
        assert not any(root.iterdir())
        # a workspace left by a runner that died, holding such a tree
        left = root / "dead-runner-0000"
        (left / "repo").mkdir(parents=True)
        subprocess.run(["mkdir", "-p", deep], cwd=left / "repo", check=True)  # os.makedirs itself recurses
        dead = subprocess.Popen(["true"])
        dead.wait()
        (left / "meta.json").write_text(json.dumps({"owner_pid": dead.pid, "expires_at": 0, "mounted": False,
                                                    "cgroups": []}))
        assert reap_stale(root) == 1
        assert not left.exists()
        assert_healthy(make_box("bwrap", root=root))
    finally:  # a failing run must not leave a tree that pytest's own clean-up (shutil.rmtree) cannot remove
        subprocess.run(["rm", "-rf", str(root)], check=False)


# --------------------------------------------------------------------------- issue #15: scale
class _CountingSandbox(Sandbox):
    """A backend that only counts how many of its starts and commands run at once."""

    backend = "counting"
    lock = threading.Lock()
    running: ClassVar[dict[str, int]] = {"start": 0, "exec": 0}
    peak: ClassVar[dict[str, int]] = {"start": 0, "exec": 0}

    @classmethod
    def _enter(cls, phase):
        with cls.lock:
            cls.running[phase] += 1
            cls.peak[phase] = max(cls.peak[phase], cls.running[phase])
        time.sleep(0.05)
        with cls.lock:
            cls.running[phase] -= 1

    def _create(self):
        self._enter("start")

    def _run(self, command, *, timeout, stdin, workdir):
        self._enter("exec")
        return ExecResult(exit_code=0, output="")

    @staticmethod
    def _teardown_resources(handles):
        pass

    def _grading_sandbox(self):
        return _CountingSandbox(self.spec)


@pytest.mark.parametrize(("max_starts", "max_execs"), [(1, 3), (2, 2)])
def test_concurrent_starts_and_commands_never_exceed_their_bounds(max_starts, max_execs):
    _CountingSandbox.peak = {"start": 0, "exec": 0}
    old = (sandbox_base.STARTS.limit, sandbox_base.EXECS.limit, sandbox_base.STARTS.wait_s)
    configure_concurrency(max_starts=max_starts, max_execs=max_execs)
    errors = []

    def episode():
        try:
            with _CountingSandbox(SandboxSpec(repo_dir=None, name="count")) as box:
                for _ in range(3):
                    box.exec("true")
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    try:
        threads = [threading.Thread(target=episode) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        configure_concurrency(*old)
    assert not errors
    assert _CountingSandbox.peak == {"start": max_starts, "exec": max_execs}  # reached, never exceeded


def test_a_command_that_waits_too_long_for_a_slot_fails_cleanly():
    old = (sandbox_base.STARTS.limit, sandbox_base.EXECS.limit, sandbox_base.STARTS.wait_s)
    configure_concurrency(max_execs=1, wait_s=0.01)
    try:
        with _CountingSandbox(SandboxSpec(repo_dir=None, name="busy")) as box:
            with sandbox_base.EXECS.slot("a long test run"), pytest.raises(SandboxError, match="no free sandbox exec"):
                box.exec("true")
            assert box.exec("true").ok
    finally:
        configure_concurrency(*old)


class _FakeContainer:
    def __init__(self, name, labels, removed):
        self.name, self.labels, self._removed = name, labels, removed

    def remove(self, force=False):
        assert force
        self._removed.append(self.name)


class _FakeDocker:
    """The part of ``docker.DockerClient`` the sweep uses."""

    def __init__(self, labelled: dict[str, dict]):
        self.removed: list[str] = []
        self.containers = self
        self._all = [_FakeContainer(name, labels, self.removed) for name, labels in labelled.items()]

    def list(self, all=False, filters=None):
        assert all and filters == {"label": docker_backend.LABEL}
        return [c for c in self._all if docker_backend.LABEL in c.labels]


def test_the_docker_sweep_removes_only_stale_containers(monkeypatch):
    now, host, me, session = 1000.0, "runner-a", 4242, "s-mine"
    alive = {4242, 777}

    def labels(owner_host, pid, owner_session="s-other", expires=2000.0):
        return {docker_backend.LABEL: "1", "turngym.owner": f"{owner_host}/{pid}/{owner_session}",
                "turngym.owner_host": owner_host, "turngym.owner_pid": str(pid),
                "turngym.owner_session": owner_session, "turngym.expires_at": str(expires)}

    client = _FakeDocker({
        "mine": labels(host, me, session),
        "earlier-process-same-pid": labels(host, me, "s-before"),
        "dead-owner": labels(host, 999),
        "live-owner": labels(host, 777),
        "other-host-dead-pid": labels("runner-b", 999),
        "other-host-expired": labels("runner-b", 777, expires=10.0),
        "expired-live-owner": labels(host, 777, expires=10.0),
        "legacy-expired": {docker_backend.LABEL: "1", "turngym.owner_pid": "999", "turngym.expires_at": "10"},
        "legacy-live": {docker_backend.LABEL: "1", "turngym.owner_pid": "999", "turngym.expires_at": "5000"},
        "not-turngym": {"turngym.owner_pid": "999", "turngym.expires_at": "10"},
    })
    removed = docker_backend.sweep_stale(client, now=now, host=host, pid=me, session=session,
                                         alive=lambda pid: pid in alive)
    assert sorted(removed) == sorted(client.removed) == sorted([
        "earlier-process-same-pid", "dead-owner", "other-host-expired", "expired-live-owner", "legacy-expired"])


def test_docker_containers_are_labelled_with_their_owner():
    labels = docker_backend.owner_labels(lifetime_s=60)
    host, pid, session = labels["turngym.owner"].split("/")
    assert labels[docker_backend.LABEL] == "1" and pid == labels["turngym.owner_pid"] == str(os.getpid())
    assert host == labels["turngym.owner_host"] and session == labels["turngym.owner_session"]
    assert time.time() < float(labels["turngym.expires_at"]) <= time.time() + 60
    assert not docker_backend.is_stale(labels, now=time.time(), host=host, pid=os.getpid(), session=session)


def test_an_oom_kill_ends_the_episode_with_a_clear_reason(tmp_path):
    skip_unless_available("bwrap")
    if not cgroups_usable():
        pytest.skip("the OOM killer needs a memory cgroup (root on a cgroup v1 host); rlimits raise MemoryError")
    env = SWEEnv(tasks=swe_tasks("train", n=1), sandbox="bwrap", limits={**LIMITS.__dict__, "memory_mb": 96},
                 workspace_root=tmp_path)
    try:
        env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step(
            "```bash\npython3 -c 'l = []\nwhile True: l.append(bytearray(10 ** 7))'\n```")
        assert truncated and not terminated and info["truncation_reason"] == "oom_killed"
        assert info["truncation_reason"] in LIMIT_REASONS  # the agent's own command: a limit, not a failure
        assert "ran out of memory (limit 96 MB)" in obs and "the episode was truncated" in obs
        assert info["pass_ratio"] == 0.0 and reward == 0.0  # graded: the bug is still there
    finally:
        env.close()


def test_output_a_command_wrote_before_its_deadline_counts_even_when_it_is_read_after():
    """A command that ended while the reader was not running (a stopped process, a starved one on a loaded machine)
    did not time out: what it wrote is read past the deadline, without waiting. One still running is killed."""
    from turngym.envs.swe.sandbox.bwrap import _collect

    ended = subprocess.Popen(["printf", "all done"], stdout=subprocess.PIPE)
    ended.wait()  # it ended; the reader only looks after its deadline
    killed = []
    assert _collect(ended, -5.0, 100, lambda: killed.append(1)) == (b"all done", False, False) and not killed
    running = subprocess.Popen(["sleep", "30"], stdout=subprocess.PIPE)
    try:
        assert _collect(running, 0.2, 100, lambda: killed.append(1)) == (b"", True, False) and killed
    finally:
        running.kill()
        running.wait()
