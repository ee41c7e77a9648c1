"""Parallel episodes: gymnasium's AsyncVectorEnv plus what multi-turn rollouts need.

:class:`EnvPool` *is* an ``AsyncVectorEnv`` (autoreset disabled, no shared memory, text spaces),
so ``reset``/``step`` over all sub-environments work as in gymnasium. It adds only what
AsyncVectorEnv lacks for LLM rollouts, where episodes end at different turns and each starts on
its own task:

* :meth:`EnvPool.reset_some`: reset chosen sub-environments, each with its own task;
* :meth:`EnvPool.step_some`: step only the live episodes;
* a per-step timeout: a worker that does not answer in time is killed;
* respawning a dead or killed worker, whose episode comes back *truncated* with
  ``info["truncation_reason"] = "worker_timeout" | "worker_crash" | "worker_error"`` instead of
  an exception that loses the whole batch.

Worker processes use the ``forkserver`` start method, so a parent holding a model (or CUDA) is
never forked; as with any multiprocessing code, scripts that create a pool need an
``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import logging
import multiprocessing
import queue
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Any

import gymnasium as gym
from gymnasium.vector import AsyncVectorEnv, AutoresetMode
from gymnasium.vector.async_vector_env import AsyncState, _async_worker
from gymnasium.vector.utils import CloudpickleWrapper

logger = logging.getLogger(__name__)


@dataclass
class Reply:
    """The answer of one worker: ``kind`` is "reset" (value: (obs, info)) or "step" (a StepResult)."""

    index: int
    kind: str
    value: Any


@dataclass
class StepResult:
    """One sub-environment's answer to a step."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)


class _BatchCalls:
    """``reset_some``/``step_some`` on top of a pool's ``send``/``receive``."""

    def reset_some(
        self, options: Mapping[int, Mapping[str, Any] | None], seeds: Mapping[int, int | None] | None = None
    ) -> dict[int, tuple[str, dict[str, Any]]]:
        """Reset the listed workers, each with its own options (e.g. ``{"task": task}``)."""
        seeds = seeds or {}
        for index, opts in options.items():
            self.send(index, "reset", {"seed": seeds.get(index), "options": dict(opts or {})})
        return {reply.index: reply.value for reply in self.receive()}

    def step_some(self, actions: Mapping[int, str]) -> dict[int, StepResult]:
        """Step only the listed workers; a failed worker's episode comes back truncated."""
        for index, action in actions.items():
            self.send(index, "step", action)
        return {reply.index: reply.value for reply in self.receive()}


DEFAULT_STEP_TIMEOUT = 60.0


class EnvPool(_BatchCalls, AsyncVectorEnv):
    """AsyncVectorEnv with per-env task resets, partial steps, step timeouts and worker respawn.

    Args:
        env_fns: one callable per worker that builds its environment.
        step_timeout: seconds a worker may take to answer a step (a reset gets ``reset_timeout``).
            ``None``: 60 s, or the workers' ``max_step_seconds`` plus a margin when a world
            declares a longer one (the SWE world's sandboxed commands and gradings).
        reset_timeout: seconds a reset may take (it may generate a game first).
        context: multiprocessing start method for workers.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        *,
        step_timeout: float | None = None,
        reset_timeout: float = 300.0,
        context: str = "forkserver",
    ) -> None:
        # daemon=False: a worker may start an engine process of its own (daemons may not).
        super().__init__(
            env_fns,
            shared_memory=False,
            copy=False,
            context=context,
            daemon=False,
            autoreset_mode=AutoresetMode.DISABLED,
        )
        self.step_timeout = float(step_timeout) if step_timeout is not None else self._declared_step_timeout()
        self.reset_timeout = float(reset_timeout)
        self.respawns = 0
        self._in_flight: dict[int, tuple[str, float]] = {}  # worker -> (call kind, deadline)

    def _declared_step_timeout(self) -> float:
        """60 s, or the longest ``max_step_seconds`` a worker's world declares, plus 30 s."""
        declared = [h for h in self.get_attr("max_step_seconds") if h]
        return max([DEFAULT_STEP_TIMEOUT, *(float(h) + 30.0 for h in declared)])

    @classmethod
    def from_id(cls, env_id: str, num_workers: int, *, env_kwargs: Mapping[str, Any] | None = None,
                **pool_kwargs: Any) -> EnvPool:
        """A pool of ``num_workers`` copies of ``gymnasium.make(env_id, **env_kwargs)``."""
        kwargs = dict(env_kwargs or {})
        return cls([_EnvFactory(env_id, kwargs) for _ in range(num_workers)], **pool_kwargs)

    # ----------------------------------------------------------------- partial calls
    def send(self, index: int, kind: str, payload: Any) -> None:
        """Start a ``"reset"`` (payload: reset kwargs) or ``"step"`` (payload: action) on one worker."""
        self._require_idle()
        if index in self._in_flight:
            raise RuntimeError(f"worker {index} is still busy with a {self._in_flight[index][0]}")
        timeout = self.reset_timeout if kind == "reset" else self.step_timeout
        self._in_flight[index] = (kind, time.monotonic() + timeout)
        try:
            self.parent_pipes[index].send((kind, payload))
        except (BrokenPipeError, OSError):
            pass  # the dead worker is reported by receive()

    def receive(self, *, wait_all: bool = True) -> list[Reply]:
        """Answers of in-flight calls: all of them, or (``wait_all=False``) at least one.

        A worker that misses its deadline or dies is respawned; a failed step comes back as a
        truncated :class:`StepResult`, a failed reset raises (a bad task is a setup error).
        """
        replies: list[Reply] = []
        while self._in_flight and (wait_all or not replies):
            deadline = min(d for _, d in self._in_flight.values())
            pipes = {self.parent_pipes[i]: i for i in self._in_flight}
            ready = wait(list(pipes), timeout=max(deadline - time.monotonic(), 0))
            now = time.monotonic()
            finished = [pipes[p] for p in ready] + [i for i, (_, d) in self._in_flight.items() if d <= now]
            for index in dict.fromkeys(finished):
                kind, _ = self._in_flight.pop(index)
                ok, value = self._receive(index, 0)
                if kind == "reset" and not ok:
                    raise RuntimeError(f"reset failed on worker {index}: {value[0]}: {value[1]}")
                if kind == "step":
                    value = StepResult(*value[:4], info=value[4]) if ok else _failed_step(value)
                replies.append(Reply(index, kind, value))
        return replies

    # ----------------------------------------------------------------- plumbing
    def _require_idle(self) -> None:
        self._assert_is_running()
        if self._state != AsyncState.DEFAULT:
            raise RuntimeError(f"EnvPool is waiting for a pending {self._state.value}; finish it first")

    def _receive(self, index: int, timeout: float) -> tuple[bool, Any]:
        """(True, payload) or (False, failure reason) after respawning the worker."""
        pipe = self.parent_pipes[index]
        try:
            if not pipe.poll(timeout):
                return False, self._respawn(index, "worker_timeout", "no answer before the deadline")
            payload, success = pipe.recv()
        except (EOFError, OSError, BrokenPipeError):
            return False, self._respawn(index, "worker_crash", f"exit code {self.processes[index].exitcode}")
        if not success:
            return False, self._respawn(index, "worker_error", self._pop_error(index))
        return True, payload

    def _pop_error(self, index: int) -> str:
        try:
            while True:
                worker, kind, message, trace = self.error_queue.get(timeout=1.0)
                if worker == index:
                    logger.error("worker %d raised %s: %s\n%s", index, kind.__name__, message, trace)
                    return f"{kind.__name__}: {message}"
        except queue.Empty:
            return "the environment raised an exception"

    def _respawn(self, index: int, reason: str, detail: str) -> tuple[str, str]:
        logger.warning("EnvPool worker %d failed (%s: %s); respawning it", index, reason, detail)
        process = self.processes[index]
        if process.is_alive():
            process.kill()
        process.join(timeout=10)
        self.parent_pipes[index].close()
        ctx = multiprocessing.get_context(self.context)
        parent_pipe, child_pipe = ctx.Pipe()
        process = ctx.Process(
            target=self.worker or _async_worker,
            name=f"Worker<{type(self).__name__}>-{index}",
            args=(
                index,
                CloudpickleWrapper(self.env_fns[index]),
                child_pipe,
                parent_pipe,
                None,
                self.error_queue,
                self.autoreset_mode,
                None,
            ),
        )
        process.daemon = self.daemon
        process.start()
        child_pipe.close()
        self.parent_pipes[index], self.processes[index] = parent_pipe, process
        self.respawns += 1
        return reason, detail


class _EnvFactory:
    """Picklable ``gymnasium.make`` call.

    It carries the parent's EnvSpec, because a worker is a fresh process: a world that the user
    registered in their script would be unknown to the worker's registry.
    """

    def __init__(self, env_id: str, kwargs: dict[str, Any]) -> None:
        from turngym import envs  # noqa: F401 - registers the built-in worlds

        self.spec = gym.spec(env_id)
        self.kwargs = kwargs

    def __call__(self) -> gym.Env:
        return gym.make(self.spec, **self.kwargs)


def _failed_step(failure: tuple[str, str]) -> StepResult:
    reason, detail = failure
    info = {
        "truncation_reason": reason,
        "worker_failure": detail,
        "turn_reward": 0.0,
        "won": False,
        "invalid_action": False,
    }
    text = f"[turngym] The environment worker failed ({reason}: {detail}); the episode was truncated."
    return StepResult(text, 0.0, False, True, info)


class LocalPool(_BatchCalls):
    """The :class:`EnvPool` interface over environments in this process: no workers, no timeouts.

    Useful for debugging, for tests, and for worlds whose own engine is already isolated.
    """

    def __init__(self, environments: Sequence[gym.Env]) -> None:
        self.envs = list(environments)
        self.num_envs = len(self.envs)
        self._done: list[Reply] = []

    @classmethod
    def from_id(cls, env_id: str, num_workers: int = 1, *, env_kwargs: Mapping[str, Any] | None = None) -> LocalPool:
        return cls([_EnvFactory(env_id, dict(env_kwargs or {}))() for _ in range(num_workers)])

    def send(self, index: int, kind: str, payload: Any) -> None:
        env = self.envs[index]
        if kind == "reset":
            self._done.append(Reply(index, kind, env.reset(**payload)))
        else:
            observation, reward, terminated, truncated, info = env.step(payload)
            self._done.append(Reply(index, kind, StepResult(observation, float(reward), terminated, truncated, info)))

    def receive(self, *, wait_all: bool = True) -> list[Reply]:
        replies, self._done = self._done, []
        return replies

    def close(self) -> None:
        for env in self.envs:
            env.close()


def make_pool(env_id: str, num_envs: int, *, env_kwargs: Mapping[str, Any] | None = None, num_workers: int = 0,
              **pool_kwargs: Any) -> EnvPool | LocalPool:
    """The one pool factory: ``num_envs`` environments that play side by side.

    With ``num_workers > 0`` they are worker processes (an :class:`EnvPool` of
    ``min(num_envs, num_workers)``, with step deadlines and respawns); with 0 they live in this
    process (a :class:`LocalPool`), which an LLM agent prefers: every live episode's turn is then one
    batched forward pass without inter-process traffic.
    """
    if num_envs < 1:
        raise ValueError(f"a pool needs at least one environment, got num_envs={num_envs}")
    if num_workers < 0:
        raise ValueError(f"num_workers must be >= 0 (0: in this process), got {num_workers}")
    if num_workers:
        return EnvPool.from_id(env_id, min(num_envs, num_workers), env_kwargs=env_kwargs, **pool_kwargs)
    return LocalPool.from_id(env_id, num_envs, env_kwargs=env_kwargs)
