"""Security and reliability of the SWE sandbox: what code inside it must not be able to do.

Every attack runs for real in the sandbox and must come back as an ordinary result (an exit code,
a kill reason) while the runner stays healthy. The bwrap cases run in the default suite (CI runs as
root with bubblewrap installed by the Makefile); the docker cases run with ``make test-docker``.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from turngym.envs.swe import SandboxLimits, SWEEnv, swe_tasks
from turngym.envs.swe.sandbox import PhaseTimeouts, SandboxSpec, backend_available, make_sandbox
from turngym.envs.swe.sandbox.base import running_as_root
from turngym.envs.swe.sandbox.bwrap import CGROUP_PARENT, CGROUP_V1, cgroups_usable, reap_stale

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
    result = sandbox.exec(command + "; echo ok > /testbed/mine && echo WROTE-COPY")
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
        assert not (terminated or truncated) and not info["invalid_action"]
        if expected is None:  # memory: OOM-killed (cgroup) or MemoryError (rlimit)
            assert "ran out of memory" in obs or "MemoryError" in obs
        else:
            assert obs.startswith(f"[turngym] the command {expected}.")
        assert len(obs) <= env.max_observation_chars
        obs, *_ = env.step("```bash\necho still here\n```")
        assert "still here" in obs
    finally:
        env.close()


# --------------------------------------------------------------------------- reliability
def _cgroup_leaves() -> set[str]:
    parent = CGROUP_V1 / "memory" / CGROUP_PARENT
    return {p.name for p in parent.iterdir() if p.is_dir()} if parent.is_dir() else set()


def _mounts_under(root: Path) -> list[str]:
    return [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if str(root) in line]


def _docker_containers() -> list[str]:
    from turngym.envs.swe.sandbox.docker import LABEL, _client

    client = _client(timeout=10)
    try:
        return [c.name for c in client.containers.list(all=True, filters={"label": LABEL})]
    finally:
        client.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_fifty_episodes_leave_nothing_behind(backend, tmp_path):
    skip_unless_available(backend)
    root = tmp_path / "sandboxes"
    me = psutil.Process()
    children_before = {p.pid for p in me.children(recursive=True)}
    fds_before = me.num_fds()
    cgroups_before = _cgroup_leaves()
    containers_before = _docker_containers() if backend == "docker" else []
    tasks = swe_tasks(None)
    env = SWEEnv(tasks=tasks, sandbox=backend, workspace_root=root, limits=LIMITS)
    messy = ("```bash\n(sleep 987656 &); echo x > /tmp/junk; echo y > /scratch/junk; "
             "mkdir -p build && touch build/out\n```")
    rewards = []
    try:
        for episode in range(50):
            _, info = env.reset(options={"task": tasks[episode % len(tasks)]})
            actions = [messy] + (info["walkthrough"] if episode % 2 == 0 else ["submit"])
            for action in actions:
                *_, terminated, _, info = env.step(action)
            assert terminated
            rewards.append(info["episode_reward"])
    finally:
        env.close()
    assert rewards == [1.0 if e % 2 == 0 else 0.0 for e in range(50)]  # and every episode graded right
    gc.collect()
    assert {p.pid for p in me.children(recursive=True)} <= children_before
    assert not host_processes_matching("987656")
    assert me.num_fds() <= fds_before + 3
    assert not _mounts_under(root)
    assert not root.exists() or not any(root.iterdir())
    assert _cgroup_leaves() <= cgroups_before
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
spec = SandboxSpec(repo_dir=Path(sys.argv[1]), name="crash", lifetime_s=0.5)
box = make_sandbox("bwrap", spec, workspace_root=Path(sys.argv[2])).start()
box.exec("echo started")
print("READY", flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no finaliser, no atexit: the sandbox is left behind
"""


def test_a_sigkilled_runner_is_reaped_after_the_sandbox_lifetime(repo, tmp_path):
    skip_unless_available("bwrap")
    root = tmp_path / "sandboxes"
    cgroups_before = _cgroup_leaves()
    child = subprocess.run([sys.executable, "-c", CRASHING_RUNNER, str(repo), str(root)], capture_output=True,
                           text=True, cwd=REPO_ROOT, timeout=60, check=False)
    assert child.returncode == -9 and "READY" in child.stdout, child.stderr
    left = list(root.iterdir())
    assert len(left) == 1  # the workspace (and its tmpfs and cgroups, as root) was left behind
    if running_as_root():
        assert _mounts_under(root)
    time.sleep(0.6)  # past its lifetime
    assert reap_stale(root) == 1
    assert not any(root.iterdir()) and not _mounts_under(root)
    assert _cgroup_leaves() <= cgroups_before
    assert os.path.exists(repo)  # the task's own repository is never touched
