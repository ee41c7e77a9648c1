"""DeadlinePool: one scripted scenario answers alike on every backend; typed calls; backends by name."""

from __future__ import annotations

import contextlib
import importlib.util

import pytest

from tests.conftest import REPO_ROOT
from tests.helpers_pool import MisbehavingWorld
from turngym import envs
from turngym.envs.pool_api import Reply, StepResult
from turngym.envs.pools import Call, pool_backends, register_pool_backend
from turngym.envs.vector import EnvPool, LocalPool, make_pool

MISBEHAVING = "testpool/Misbehaving-v0"
envs.register(MISBEHAVING, entry_point=MisbehavingWorld)
STEP_TIMEOUT = 3.0


@contextlib.contextmanager
def backend_pool(backend: str, tmp_path):
    """Two Misbehaving worlds on ``backend``, each in a worker of its own, steps timed out after 3 s."""
    if backend == "subprocess":
        pool = make_pool(MISBEHAVING, 2, backend="subprocess", step_timeout=STEP_TIMEOUT)
        try:
            yield pool
        finally:
            pool.close(terminate=True)
    elif backend == "ray":
        ray = pytest.importorskip("ray")
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            pool = make_pool(MISBEHAVING, 2, backend="ray", worlds_per_actor=1, step_timeout=STEP_TIMEOUT)
            try:
                yield pool
            finally:
                pool.close()
        finally:
            ray.shutdown()
    else:
        pytest.importorskip("openenv")
        from turngym.envs.openenv.server import ServerProcess

        module = tmp_path / "misbehaving_world.py"
        module.write_text("from tests.helpers_pool import MisbehavingWorld\nfrom turngym import envs\n"
                          f"envs.register({MISBEHAVING!r}, entry_point=MisbehavingWorld)\n")
        with ServerProcess(MISBEHAVING, max_sessions=6, panel_size=None, extra_args=["--import", str(module)],
                           environment={"PYTHONPATH": str(REPO_ROOT)}) as served:
            pool = make_pool(MISBEHAVING, 2, backend="remote", server=served.url, step_timeout=STEP_TIMEOUT,
                             connect_timeout=5.0)
            try:
                yield pool
            finally:
                pool.close()


def shown(reply: Reply) -> tuple:
    """A reply without the failure's free-text detail (each backend words its own error)."""
    if reply.kind == "reset":
        observation, _info = reply.value
        return reply.index, reply.kind, observation
    result: StepResult = reply.value
    reason = result.info.get("truncation_reason")
    observation = f"<failed: {reason}>" if "worker_failure" in result.info else result.observation
    return (reply.index, reply.kind, observation, result.reward, result.terminated, result.truncated, reason,
            result.info.get("won"))


def play_scenario(pool) -> list:
    """A slow step past its deadline, a world that raises, normal steps, then a worker that dies."""
    log: list = []
    pool.send(0, Call("reset", {"seed": None, "options": {}}))
    pool.send(1, "reset", {"seed": None, "options": {}})
    log += sorted(shown(r) for r in pool.receive())
    pool.send(0, Call("step", "sleep"))  # hangs: the deadline passes
    pool.send(1, Call("step", "echo"))
    first = pool.receive(wait_all=False)  # the live world answers long before the deadline
    log.append([shown(r) for r in first])
    log.append([shown(r) for r in pool.receive()])
    log.append(pool.respawns)
    log.append(sorted(pool.reset_some({0: None}).items()))
    results = pool.step_some({0: "raise", 1: "win"})  # the world raises; the other one wins
    log += [shown(Reply(i, "step", results[i])) for i in (0, 1)]
    pool.reset_some({0: None, 1: None})
    results = pool.step_some({0: "hello", 1: "win"})  # the respawned worker plays on
    log += [shown(Reply(i, "step", results[i])) for i in (0, 1)]
    log.append(pool.respawns)
    died = pool.step_some({0: "die"})[0]  # the world's process dies
    log.append((died.truncated, died.terminated, died.reward, "truncated" in died.observation))
    return log, died.info["truncation_reason"]


# Where backends differ by design. A world's process is its worker (process, ray) or the server, whose death
# loses every session on it; a world that raises is rebuilt inside its Ray actor, which is not replaced.
DEATH = {"subprocess": "worker_crash", "ray": "worker_crash", "remote": "env_disconnected"}
RESPAWNS_AFTER_ERROR = {"subprocess": 2, "ray": 1, "remote": 2}


def _available_backends() -> list:
    """subprocess, remote (with openenv) and ray (with ray; under `make test-slow`: a Ray cluster's start-up is
    paid by tests/test_ray_pool.py in the fast suite)."""
    backends = ["subprocess"] + (["remote"] if importlib.util.find_spec("openenv") else [])
    return backends + ([pytest.param("ray", marks=pytest.mark.slow)] if importlib.util.find_spec("ray") else [])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", _available_backends())
def test_one_scenario_answers_alike_on_every_backend(tmp_path, backend):
    expected = [
        (0, "reset", "ready"), (1, "reset", "ready"),
        [(1, "step", "echo echo", 0.0, False, False, None, False)],
        [(0, "step", "<failed: worker_timeout>", 0.0, False, True, "worker_timeout", False)],
        1,
        [(0, ("ready", None))],
        (0, "step", "<failed: worker_error>", 0.0, False, True, "worker_error", False),
        (1, "step", "you win", 1.0, True, False, None, True),
        (0, "step", "echo hello", 0.0, False, False, None, False),
        (1, "step", "you win", 1.0, True, False, None, True),
        "respawns",
        (True, False, 0.0, True),
    ]
    with backend_pool(backend, tmp_path) as pool:
        log, death = play_scenario(pool)
    log[5] = [(index, (observation, None)) for index, (observation, _info) in log[5]]
    assert log[10] == RESPAWNS_AFTER_ERROR[backend]
    log[10] = "respawns"
    assert log == expected
    assert death == DEATH[backend]


def test_calls_are_typed_and_a_bad_kind_or_index_is_refused():
    assert Call("step", "look") == Call("step", "look")
    with pytest.raises(ValueError, match="kind must be 'reset' or 'step', got 'stpe'"):
        Call("stpe", "look")
    local = LocalPool([MisbehavingWorld() for _ in range(2)])
    local.send(0, Call("reset", {}))
    local.send(1, "reset", {})
    assert [(r.index, r.kind, r.value[0]) for r in local.receive()] == [(0, "reset", "ready"), (1, "reset", "ready")]
    local.close()


@pytest.mark.timeout(120)
def test_deadline_pool_bookkeeping_errors():
    pool = EnvPool.from_id(MISBEHAVING, 1, step_timeout=STEP_TIMEOUT)
    try:
        with pytest.raises(IndexError, match="worker 1 does not exist"):
            pool.send(1, "reset", {})
        pool.send(0, "reset", {})
        with pytest.raises(RuntimeError, match="worker 0 is still busy with a reset"):
            pool.send(0, "step", "look")
        assert pool.receive()[0].value[0] == "ready"
    finally:
        pool.close(terminate=True)


def test_backends_are_registered_by_name_and_an_unknown_one_lists_them():
    assert {"process", "local", "subprocess", "remote", "ray"} <= set(pool_backends())
    with pytest.raises(ValueError, match="unknown pool backend 'grpc'; choose one of process, local, subprocess"):
        make_pool(MISBEHAVING, 2, backend="grpc")
    assert isinstance(make_pool(MISBEHAVING, 2, backend="local", num_workers=2), LocalPool)
    made = []
    register_pool_backend("test-recorder", lambda env_id, n, **options: made.append((env_id, n, options)) or "pool")
    assert make_pool(MISBEHAVING, 3, backend="test-recorder", tasks=4) == "pool"
    assert made == [(MISBEHAVING, 3, {"env_kwargs": None, "num_workers": 0, "server": None, "tasks": 4})]
