"""EnvPool: per-worker resets, partial steps, step timeouts and worker respawn."""

from __future__ import annotations

import gymnasium as gym
import pytest

from tests.helpers_pool import MisbehavingWorld, assert_one_episode_truncated
from turngym import envs
from turngym.envs.vector import EnvPool, LocalPool

envs.register("testpool/Misbehaving-v0", entry_point=MisbehavingWorld)


@pytest.fixture
def pool():
    env_pool = EnvPool.from_id("testpool/Misbehaving-v0", 2, step_timeout=3.0)
    yield env_pool
    env_pool.close(terminate=True)


@pytest.mark.timeout(120)
def test_user_registered_world_runs_in_workers_and_steps_only_live_episodes(pool):
    resets = pool.reset_some({0: None, 1: None})
    assert [resets[i][0] for i in (0, 1)] == ["ready", "ready"]
    results = pool.step_some({1: "hello"})
    assert list(results) == [1]
    assert results[1].observation == "echo hello"
    assert not results[1].terminated and not results[1].truncated


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("action", "reason"),
    [("sleep", "worker_timeout"), ("die", "worker_crash"), ("raise", "worker_error")],
)
def test_a_failing_worker_truncates_its_episode_and_is_respawned(pool, action, reason):
    pool.reset_some({0: None, 1: None})
    results = pool.step_some({0: action, 1: "win"})
    assert_one_episode_truncated(results, reason)
    assert pool.respawns == 1
    again = pool.reset_some({0: None})  # the respawned worker plays a new episode
    assert again[0][0] == "ready"
    assert pool.step_some({0: "win"})[0].info["won"]


@pytest.mark.timeout(120)
def test_every_worker_that_raises_reports_its_own_traceback_once(pool, caplog):
    """Both workers raise at once, round after round (each respawned worker raising again): each failure names its
    own error and its traceback is logged once. Before: a report read while looking for another worker's was dropped,
    and a worker killed as it reported could leave the shared error queue locked, losing every later traceback."""
    rounds = 4
    with caplog.at_level("ERROR", logger="turngym.envs.vector"):
        for _ in range(rounds):
            pool.reset_some({0: None, 1: None})
            results = pool.step_some({0: "raise", 1: "raise"})
            assert [results[i].info["worker_failure"] for i in (0, 1)] == ["RuntimeError: the world broke"] * 2
    traces = [r.getMessage() for r in caplog.records if "raised RuntimeError" in r.getMessage()]
    assert len(traces) == 2 * rounds and all('raise RuntimeError("the world broke")' in t for t in traces)
    assert pool.respawns == 2 * rounds


@pytest.mark.timeout(120)
def test_plain_async_vector_env_api_still_works(pool):
    observations, _infos = pool.reset(seed=0)
    assert list(observations) == ["ready", "ready"]
    observations, rewards, terminated, _truncated, _infos = pool.step(("win", "x"))
    assert list(terminated) == [True, False]
    assert list(rewards) == [1.0, 0.0]


def test_local_pool_has_the_same_interface():
    local = LocalPool([gym.make("testpool/Misbehaving-v0") for _ in range(2)])
    assert local.reset_some({0: None, 1: None})[1][0] == "ready"
    results = local.step_some({0: "win"})
    assert results[0].terminated and results[0].reward == 1.0
    local.close()


def test_workers_see_the_turngym_variables_of_when_the_pool_was_made(monkeypatch):
    """A forkserver worker inherits the fork server's environment (from the first pool), not the parent's of now:
    a served world's token set after that must still reach the new pool's workers."""
    import multiprocessing
    from multiprocessing import forkserver

    from turngym.envs.pool_api import EnvFactory

    monkeypatch.delenv("TURNGYM_SERVE_TOKEN", raising=False)
    forkserver.ensure_running()  # as the first pool of a process does, before the token is set
    monkeypatch.setenv("TURNGYM_SERVE_TOKEN", "set-after-the-fork-server-started")
    factory = EnvFactory("turngym/Signals-v0", {})
    assert "set-after" not in repr(factory)  # never in a report or a log
    with multiprocessing.get_context("forkserver").Pool(1) as workers:
        assert workers.apply(_token_seen_by, (factory,)) == "set-after-the-fork-server-started"


def _token_seen_by(factory):
    import os

    factory().close()
    return os.environ.get("TURNGYM_SERVE_TOKEN")
