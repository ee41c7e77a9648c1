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

:func:`make_pool` also builds the pools whose worlds run elsewhere, with the same interface and the
same failure semantics (each is a :class:`~turngym.envs.pools.DeadlinePool` over its own transport): sessions
on ``turngym serve`` servers (``backend="remote"``) and Ray actors (``backend="ray"``); backends are
registered by name (:func:`~turngym.envs.pools.register_pool_backend`); see docs/scaling.md.
"""

from __future__ import annotations

import logging
import multiprocessing
import queue
import time
from collections import defaultdict, deque
from collections.abc import Callable, Mapping, Sequence
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING, Any

import gymnasium as gym
from gymnasium.vector import AsyncVectorEnv, AutoresetMode
from gymnasium.vector.async_vector_env import AsyncState, _async_worker
from gymnasium.vector.utils import CloudpickleWrapper

# The records and the batch API every pool shares (importable from here, where they were first defined).
from turngym.envs.pool_api import (
    DEFAULT_STEP_TIMEOUT,
    ENV_ERROR,
    BatchCalls,
    EnvFactory,
    Reply,
    StepResult,
    call_env,
    declared_step_timeout,
    failed_step,
)
from turngym.envs.pools import Call, CallKind, DeadlinePool, Failure, TransportBase, pool_backend, register_pool_backend

if TYPE_CHECKING:
    from turngym.envs.openenv.pool import RemotePool
    from turngym.envs.ray_pool import RayPool

logger = logging.getLogger(__name__)

ERROR_REPORT_WAIT = 10.0  # seconds a worker that raised gets to deliver its traceback
EXIT_GRACE = 5.0  # seconds a worker that raised gets to exit by itself before it is killed

__all__ = ["DEFAULT_STEP_TIMEOUT", "EnvPool", "LocalPool", "Reply", "StepResult", "check_server", "make_pool"]


class EnvPool(DeadlinePool, AsyncVectorEnv):
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
        AsyncVectorEnv.__init__(
            self,
            env_fns,
            shared_memory=False,
            copy=False,
            context=context,
            daemon=False,
            autoreset_mode=AutoresetMode.DISABLED,
        )
        step_timeout = float(step_timeout) if step_timeout is not None else self._declared_step_timeout()
        DeadlinePool.__init__(self, PipeTransport(self), step_timeout=step_timeout, reset_timeout=reset_timeout)

    def _declared_step_timeout(self) -> float:
        """60 s, or the longest ``max_step_seconds`` a worker's world declares, plus 30 s."""
        return declared_step_timeout(list(self.get_attr("max_step_seconds")))

    @classmethod
    def from_id(cls, env_id: str, num_workers: int, *, env_kwargs: Mapping[str, Any] | None = None,
                **pool_kwargs: Any) -> EnvPool:
        """A pool of ``num_workers`` copies of ``gymnasium.make(env_id, **env_kwargs)``."""
        kwargs = dict(env_kwargs or {})
        return cls([EnvFactory(env_id, kwargs) for _ in range(num_workers)], **pool_kwargs)

    def send(self, index: int, kind: CallKind | Call, payload: Any = None) -> None:
        """Start a ``"reset"`` (payload: reset kwargs) or ``"step"`` (payload: action) on one worker."""
        self._assert_is_running()
        if self._state != AsyncState.DEFAULT:
            raise RuntimeError(f"EnvPool is waiting for a pending {self._state.value}; finish it first")
        super().send(index, kind, payload)


class PipeTransport(TransportBase):
    """:class:`EnvPool`'s worker processes, each speaking gymnasium's AsyncVectorEnv pipe protocol.

    The workers run gymnasium's ``_async_worker`` (the one AsyncVectorEnv starts, so ``reset``/``step`` over
    all workers work as in gymnasium); a worker that raised has left its loop, so every failure respawns it.
    tests/test_gymnasium_contract.py pins that private function's signature and replies.
    """

    def __init__(self, vec: AsyncVectorEnv) -> None:
        self.vec = vec
        self.size = vec.num_envs
        self.respawns = 0
        self.reports: defaultdict[int, deque[tuple[Any, ...]]] = defaultdict(deque)  # error reports, by worker

    def submit(self, index: int, call: Call, timeout: float) -> Connection:
        pipe = self.vec.parent_pipes[index]
        try:
            pipe.send((call.kind, call.payload))
        except (BrokenPipeError, OSError):
            pass  # the dead worker is reported by result()
        return pipe

    def wait(self, handles: list[Any], timeout: float) -> list[Any]:
        return wait(handles, timeout=timeout)

    def result(self, index: int, handle: Connection) -> Any:
        try:
            payload, success = handle.recv()
        except (EOFError, OSError, BrokenPipeError):
            return Failure("worker_crash", f"exit code {self.vec.processes[index].exitcode}")
        return payload if success else Failure("worker_error", self._pop_error(index))

    def overdue(self, index: int, handle: Connection) -> Any:
        try:
            answered = handle.poll(0)  # an answer at the deadline still counts
        except (EOFError, OSError):
            answered = True  # result() reports the crash
        return self.result(index, handle) if answered else super().overdue(index, handle)

    def accept(self, index: int, call: Call, value: Any) -> Any:
        return StepResult(*value[:4], info=value[4]) if call.kind == "step" else value

    def _pop_error(self, index: int) -> str:
        """What worker ``index`` raised, its traceback logged once."""
        report = self._error_report(index)
        if report is None:
            return "the environment raised an exception"
        kind, message, trace = report
        logger.error("worker %d raised %s: %s\n%s", index, kind.__name__, message, trace)
        return f"{kind.__name__}: {message}"

    def _error_report(self, index: int) -> tuple[Any, ...] | None:
        """Worker ``index``'s report from the workers' shared error queue: put before its failure reply, flushed by
        the time it exits. Other workers' reports read on the way are kept for them (each is read once)."""
        deadline = time.monotonic() + ERROR_REPORT_WAIT
        while not self.reports[index] and time.monotonic() < deadline:
            alive = self.vec.processes[index].is_alive()  # gone before this read: its report (flushed at exit) is in
            try:
                worker, *report = self.vec.error_queue.get(timeout=0.1)
            except queue.Empty:
                if not alive:
                    break  # exited with nothing left to flush
                continue
            self.reports[worker].append(tuple(report))
        return self.reports[index].popleft() if self.reports[index] else None

    def respawn(self, index: int, failure: Failure) -> None:
        vec = self.vec
        logger.warning("EnvPool worker %d failed (%s: %s); respawning it", index, failure.reason, failure.detail)
        process = vec.processes[index]
        if failure.reason == "worker_error":
            # It is leaving its loop: killed now, its queue thread could die holding the error queue's shared write
            # lock, and no worker's report would ever arrive again.
            process.join(timeout=EXIT_GRACE)
        if process.is_alive():
            process.kill()
        process.join(timeout=10)
        vec.parent_pipes[index].close()
        ctx = multiprocessing.get_context(vec.context)
        parent_pipe, child_pipe = ctx.Pipe()
        # The arguments AsyncVectorEnv.__init__ gives each worker, by name (pinned by the contract test).
        arguments = {"index": index, "env_fn": CloudpickleWrapper(vec.env_fns[index]), "pipe": child_pipe,
                     "parent_pipe": parent_pipe, "shared_memory": None, "error_queue": vec.error_queue,
                     "autoreset_mode": vec.autoreset_mode, "semaphore": None}
        process = ctx.Process(target=vec.worker or _async_worker, name=f"Worker<{type(vec).__name__}>-{index}",
                              kwargs=arguments)
        process.daemon = vec.daemon
        process.start()
        child_pipe.close()
        vec.parent_pipes[index], vec.processes[index] = parent_pipe, process
        self.respawns += 1


class LocalPool(BatchCalls):
    """The :class:`EnvPool` interface over environments in this process: no workers, no timeouts.

    Useful for debugging, for tests, and for worlds whose own engine is already isolated.
    """

    def __init__(self, environments: Sequence[gym.Env]) -> None:
        self.envs = list(environments)
        self.num_envs = len(self.envs)
        self._done: list[Reply] = []

    @classmethod
    def from_id(cls, env_id: str, num_workers: int = 1, *, env_kwargs: Mapping[str, Any] | None = None) -> LocalPool:
        return cls([EnvFactory(env_id, dict(env_kwargs or {}))() for _ in range(num_workers)])

    def send(self, index: int, kind: CallKind | Call, payload: Any = None) -> None:
        call = kind if isinstance(kind, Call) else Call(kind, payload)
        try:
            value = call_env(self.envs[index], call.kind, call.payload)
        except Exception as error:
            if call.kind != "step" or not isinstance(call.payload, str):  # a reset, or the caller's own bug
                raise
            # The world's bug ends its episode (truncated, env_error), not the batch; as a worker process's would.
            logger.exception("world %d raised %s", index, type(error).__name__)
            value = failed_step((ENV_ERROR, f"{type(error).__name__}: {error}"))
        self._done.append(Reply(index, call.kind, value))

    def receive(self, *, wait_all: bool = True, timeout: float | None = None) -> list[Reply]:
        replies, self._done = self._done, []  # every call ran when it was sent
        return replies

    def close(self) -> None:
        for env in self.envs:
            env.close()


def make_pool(env_id: str, num_envs: int, *, env_kwargs: Mapping[str, Any] | None = None, num_workers: int = 0,
              backend: str = "process", server: str | Sequence[str] | None = None,
              **pool_kwargs: Any) -> EnvPool | LocalPool | RemotePool | RayPool:
    """The one pool factory: ``num_envs`` environments that play side by side.

    ``backend="process"`` (the default): with ``num_workers > 0`` they are worker processes (an
    :class:`EnvPool` of ``min(num_envs, num_workers)``, with step deadlines and respawns); with 0 they
    live in this process (a :class:`LocalPool`), which an LLM agent prefers: every live episode's turn
    is then one batched forward pass without inter-process traffic. ``backend="subprocess"`` and
    ``backend="local"`` ask for one of the two whatever ``num_workers`` says.

    ``backend="remote"``: ``min(num_envs, num_workers or num_envs)`` sessions on the ``turngym serve``
    server(s) at ``server`` (:class:`~turngym.envs.openenv.pool.RemotePool`); the world and its options
    are the server's, and ``env_id``/``env_kwargs`` are checked against them.

    ``backend="ray"``: ``min(num_envs, num_workers or num_envs)`` worlds in Ray actors placed by CPU
    resources on the Ray cluster, ``worlds_per_actor`` in each (default 1; :class:`~turngym.envs.ray_pool.RayPool`).

    Other backends are registered by name (:func:`~turngym.envs.pools.register_pool_backend`). The pools
    answer alike (:class:`~turngym.envs.pools.DeadlinePool`): same deadlines, a failed worker is replaced
    and its episode comes back truncated with ``info["truncation_reason"]``.
    """
    if num_envs < 1:
        raise ValueError(f"a pool needs at least one environment, got num_envs={num_envs}")
    if num_workers < 0:
        raise ValueError(f"num_workers must be >= 0 (0: in this process), got {num_workers}")
    factory = pool_backend(backend)
    check_server(backend, server)
    return factory(env_id, num_envs, env_kwargs=env_kwargs, num_workers=num_workers, server=server, **pool_kwargs)


def check_server(backend: str, server: str | Sequence[str] | None, *,
                 names: tuple[str, str] = ("backend", "server")) -> None:
    """A server goes with the ``remote`` backend, and only with it: the one statement of that rule (``names``: what
    the caller calls the two options, e.g. a run config's ``env_backend`` and ``env_server``)."""
    backend_name, server_name = names
    if backend == "remote" and not server:
        raise ValueError(f"{backend_name}='remote' needs the server's address ({server_name}), e.g. ws://host:8000 "
                         "(start one with `turngym serve ENV_ID`)")
    if server is not None and backend != "remote":
        raise ValueError(f"{server_name} ({server}) is only used by {backend_name}='remote', not {backend!r}")


def _local(env_id: str, num_envs: int, *, env_kwargs: Mapping[str, Any] | None, num_workers: int, server: Any,
           **pool_kwargs: Any) -> LocalPool:
    return LocalPool.from_id(env_id, num_envs, env_kwargs=env_kwargs)  # no workers: no deadlines to set


def _subprocess(env_id: str, num_envs: int, *, env_kwargs: Mapping[str, Any] | None, num_workers: int, server: Any,
                **pool_kwargs: Any) -> EnvPool:
    return EnvPool.from_id(env_id, min(num_envs, num_workers or num_envs), env_kwargs=env_kwargs, **pool_kwargs)


def _process(env_id: str, num_envs: int, *, num_workers: int, **options: Any) -> EnvPool | LocalPool:
    return (_subprocess if num_workers else _local)(env_id, num_envs, num_workers=num_workers, **options)


def _remote(env_id: str, num_envs: int, *, env_kwargs: Mapping[str, Any] | None, num_workers: int,
            server: str | Sequence[str], **pool_kwargs: Any) -> RemotePool:
    from turngym.envs.openenv.pool import RemotePool

    size = min(num_envs, num_workers or num_envs)
    return RemotePool(server, size, env_id=env_id, env_kwargs=env_kwargs, **pool_kwargs)


def _ray(env_id: str, num_envs: int, *, env_kwargs: Mapping[str, Any] | None, num_workers: int, server: Any,
         **pool_kwargs: Any) -> RayPool:
    from turngym.envs.ray_pool import RayPool

    return RayPool.from_id(env_id, min(num_envs, num_workers or num_envs), env_kwargs=env_kwargs, **pool_kwargs)


for _name, _factory in (("process", _process), ("local", _local), ("subprocess", _subprocess), ("remote", _remote),
                        ("ray", _ray)):
    register_pool_backend(_name, _factory)
