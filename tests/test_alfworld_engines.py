"""ALFWorld engine failures: a hang, a crash or an error truncates the episode; a fresh engine plays on.

The failing sessions live here, at module level, because the isolated engine's child process
imports its factory by name (``tests.test_alfworld_engines:HangingSession``).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest

from turngym.envs.alfworld import ALFWorldEnv, alfworld_tasks, materialise
from turngym.envs.alfworld.engine import ALFWorldSession


class HangingSession(ALFWorldSession):
    def step(self, command: str) -> dict[str, Any]:
        if command == "hang now":
            time.sleep(3600)
        return super().step(command)


class CrashingSession(ALFWorldSession):
    def step(self, command: str) -> dict[str, Any]:
        if command == "crash now":
            os.kill(os.getpid(), signal.SIGSEGV)
        return super().step(command)


class RaisingSession(ALFWorldSession):
    def step(self, command: str) -> dict[str, Any]:
        if command == "raise now":
            raise RuntimeError("injected engine error")
        return super().step(command)


@pytest.fixture(scope="module")
def panel():
    return materialise(alfworld_tasks("eval_seen", n=2), workers=2, progress=False)


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("session", "command", "reason"),
    [
        # the hang and the error under slow: TextWorld's engine tests play all three in the fast suite
        pytest.param(HangingSession, "hang now", "engine_timeout", id="hang", marks=pytest.mark.slow),
        pytest.param(CrashingSession, "crash now", "engine_crash", id="crash"),
        pytest.param(RaisingSession, "raise now", "engine_error", id="error", marks=pytest.mark.slow),
    ],
)
def test_engine_failure_truncates_the_episode_and_the_engine_restarts(
    engine_pythonpath, panel, session, command, reason
):
    env = ALFWorldEnv(tasks=panel, session_factory=session, step_timeout=3.0, reward_mode="dense")
    try:
        _, info = env.reset(options={"task": panel[0]})
        env.step(info["walkthrough"][0])  # the engine works before the failure
        engine_pid = env._engine.pid  # white box: the failed engine process must be gone
        obs, reward, terminated, truncated, info = env.step(command)
        assert (terminated, truncated, reward) == (False, True, 0.0)
        assert info["truncation_reason"] == reason and info["engine_failure"]
        assert "truncated" in obs and info["won"] is False and info["turn"] == 2
        if reason != "engine_error":
            with pytest.raises(ProcessLookupError):
                os.kill(engine_pid, 0)
        with pytest.raises(RuntimeError):
            env.step("look")
        for task in panel:  # a fresh engine plays whole episodes again
            _, info = env.reset(options={"task": task})
            for action in info["walkthrough"]:
                *_, terminated, truncated, info = env.step(action)
            assert terminated and not truncated and info["won"] and info["episode_reward"] == pytest.approx(1.0)
    finally:
        env.close()


def test_in_process_engine_plays_too(panel):
    env = ALFWorldEnv(tasks=panel, engine_isolation="none")
    try:
        _, info = env.reset(options={"task": panel[1]})
        for action in info["walkthrough"]:
            *_, terminated, _, info = env.step(action)
        assert terminated and info["won"]
    finally:
        env.close()
