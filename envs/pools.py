"""One deadline pool under every backend: :class:`DeadlinePool` over a small :class:`Transport`.

What a pool promises, whatever runs its worlds, is written once here:

* **in-flight bookkeeping**: one call at a time per world, ``send`` starts it, ``receive`` collects it;
* **deadlines**: a reset gets ``reset_timeout``, a step ``step_timeout`` (a transport may allow more
  for its own reconnects: :meth:`Transport.allowance`);
* **failed calls**: a world that misses its deadline, dies or raises is respawned and its step comes back
  *truncated* (:func:`~turngym.envs.pool_api.failed_step`, ``info["truncation_reason"]`` one of
  ``worker_timeout``, ``worker_crash``, ``worker_error``, ``env_disconnected``); a failed reset raises (a
  bad task, or no world to reset, is a setup error);
* **the backend's own checks** on an answer (the turn cap of a server, say): :meth:`Transport.accept`,
  applied in one place.

A transport only moves :class:`Call` s and answers: :class:`~turngym.envs.vector.EnvPool`'s worker pipes,
:class:`~turngym.envs.openenv.pool.RemotePool`'s OpenEnv sessions, :class:`~turngym.envs.ray_pool.RayPool`'s
actors. Its ``result`` is the answer, or a :class:`Failure` (which says whether the pool must still respawn
the world), or :data:`RETRY` (the call was lost with a worker replaced for another world's sake: start it
again).

Backends are registered by name (:func:`register_pool_backend`) and built by
:func:`~turngym.envs.vector.make_pool`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, Protocol

from turngym.envs.pool_api import BatchCalls, Reply, failed_step
from turngym.envs.running_clock import RunningClock

CallKind = Literal["reset", "step"]
CALL_KINDS: tuple[CallKind, ...] = ("reset", "step")


@dataclass(frozen=True)
class Call:
    """One call on one world: ``"reset"`` (payload: reset kwargs) or ``"step"`` (payload: the action)."""

    kind: CallKind
    payload: Any = None

    def __post_init__(self) -> None:
        if self.kind not in CALL_KINDS:
            raise ValueError(f"kind must be 'reset' or 'step', got {self.kind!r}")


@dataclass(frozen=True)
class Failure:
    """Why a call failed (``reason`` is the step's ``truncation_reason``). ``respawn``: the pool must still
    replace the world (False: the transport already did, or nothing needs replacing)."""

    reason: str
    detail: str
    respawn: bool = True


TIMEOUT = Failure("worker_timeout", "no answer before the deadline")


class _Retry:
    def __repr__(self) -> str:
        return "RETRY"


RETRY: Any = _Retry()  # a transport's answer: the call was lost with a replaced worker; start it again


class Transport(Protocol):
    """What :class:`DeadlinePool` needs of a backend. ``handle`` is whatever ``submit`` returns (hashable)."""

    size: int
    respawns: int  # worlds replaced so far

    def submit(self, index: int, call: Call, timeout: float) -> Hashable:
        """Start ``call`` on world ``index`` (``timeout``: its deadline, for a transport that times calls itself)."""

    def wait(self, handles: list[Any], timeout: float) -> list[Any]:
        """Those of ``handles`` whose answer is in (waiting at most ``timeout`` seconds for one)."""

    def result(self, index: int, handle: Any) -> Any:
        """The answer of a ready call: the value, a :class:`Failure` or :data:`RETRY`."""

    def overdue(self, index: int, handle: Any) -> Any:
        """The deadline passed first: give the call up (a :class:`Failure` such as :data:`TIMEOUT`, or RETRY)."""

    def respawn(self, index: int, failure: Failure) -> None:
        """Replace world ``index``'s worker after ``failure`` (and count it in ``respawns``)."""

    def allowance(self, call: Call, timeout: float) -> float:
        """Seconds the pool waits for ``call`` whose deadline is ``timeout``."""

    def accept(self, index: int, call: Call, value: Any) -> Any:
        """A successful answer as the pool hands it back: a :class:`StepResult` for a step; the backend's checks."""

    def name(self, index: int) -> str:
        """World ``index`` in error messages ("worker 3")."""


class TransportBase:
    """Defaults of a :class:`Transport`: deadlines as given, answers as they come, timeouts respawned."""

    size: int = 0
    respawns: int = 0

    def overdue(self, index: int, handle: Any) -> Any:
        return TIMEOUT

    def allowance(self, call: Call, timeout: float) -> float:
        return timeout

    def accept(self, index: int, call: Call, value: Any) -> Any:
        return value

    def name(self, index: int) -> str:
        return f"worker {index}"


class DeadlinePool(BatchCalls):
    """``send``/``receive`` (and ``reset_some``/``step_some``) with deadlines and respawns over a transport.

    Subclasses (the pools) call ``DeadlinePool.__init__`` once their transport is ready.
    """

    def __init__(self, transport: Transport, *, step_timeout: float, reset_timeout: float) -> None:
        self.transport = transport
        self.step_timeout = float(step_timeout)
        self.reset_timeout = float(reset_timeout)
        self._in_flight: dict[int, tuple[Call, float, Any]] = {}  # world -> (call, deadline, handle)
        self._clock = RunningClock()  # deadlines count the time this process ran, not the time it was stopped

    @property
    def respawns(self) -> int:
        return self.transport.respawns

    def send(self, index: int, kind: CallKind | Call, payload: Any = None) -> None:
        """Start a ``"reset"`` (payload: reset kwargs) or ``"step"`` (payload: action) on one world."""
        call = kind if isinstance(kind, Call) else Call(kind, payload)
        if not 0 <= index < self.transport.size:
            raise IndexError(f"{self.transport.name(index)} does not exist (the pool has {self.transport.size})")
        if index in self._in_flight:
            raise RuntimeError(f"{self.transport.name(index)} is still busy with a {self._in_flight[index][0].kind}")
        timeout = self.reset_timeout if call.kind == "reset" else self.step_timeout
        deadline = self._clock.now() + self.transport.allowance(call, timeout)
        self._in_flight[index] = (call, deadline, self.transport.submit(index, call, timeout))

    def receive(self, *, wait_all: bool = True, timeout: float | None = None) -> list[Reply]:
        """Answers of in-flight calls: all of them, or (``wait_all=False``) at least one.

        ``timeout``: wait at most this many seconds, then return the answers in so far (``0``: only those
        already in; ``None``: as long as the calls' deadlines allow). A world that misses its deadline, dies or
        raises is respawned; a failed step comes back as a truncated
        :class:`~turngym.envs.pool_api.StepResult`, a failed reset raises.
        """
        replies: list[Reply] = []
        give_up = None if timeout is None else self._clock.now() + max(timeout, 0.0)
        while self._in_flight and (wait_all or not replies):
            deadline = min(d for _, d, _ in self._in_flight.values())
            if give_up is not None:
                deadline = min(deadline, give_up)
            by_handle = {handle: index for index, (_, _, handle) in self._in_flight.items()}
            ready = self._clock.wait(partial(self.transport.wait, list(by_handle)), deadline - self._clock.now())
            now = self._clock.now()
            answered = [by_handle[h] for h in ready]
            overdue = [i for i, (_, d, _) in self._in_flight.items() if d <= now and i not in answered]
            for index in answered + overdue:
                call, _, handle = self._in_flight.pop(index)
                outcome = (self.transport.result if index in answered else self.transport.overdue)(index, handle)
                reply = self._settle(index, call, outcome)
                if reply is not None:
                    replies.append(reply)
            if give_up is not None and now >= give_up:
                break
        return replies

    def _settle(self, index: int, call: Call, outcome: Any) -> Reply | None:
        """The reply for one finished call (None: it started again)."""
        if outcome is RETRY:
            self.send(index, call)
            return None
        if not isinstance(outcome, Failure):
            return Reply(index, call.kind, self.transport.accept(index, call, outcome))
        if outcome.respawn:
            self.transport.respawn(index, outcome)
        if call.kind == "reset":
            raise RuntimeError(f"reset failed on {self.transport.name(index)}: {outcome.reason}: {outcome.detail}")
        return Reply(index, call.kind, failed_step((outcome.reason, outcome.detail)))

    def _abandon_all(self) -> list[tuple[int, Any]]:
        """Forget every in-flight call (closing): their (world, handle)."""
        abandoned = [(index, handle) for index, (_, _, handle) in self._in_flight.items()]
        self._in_flight.clear()
        return abandoned


# ----------------------------------------------------------------- backends by name
PoolFactory = Callable[..., Any]
_BACKENDS: dict[str, PoolFactory] = {}


def register_pool_backend(name: str, factory: PoolFactory) -> None:
    """Make ``make_pool(..., backend=name)`` call ``factory(env_id, num_envs, *, env_kwargs, num_workers,
    server, **pool_kwargs)``; registering a name again replaces its factory."""
    if not name or not isinstance(name, str):
        raise ValueError(f"a pool backend needs a name, got {name!r}")
    _BACKENDS[name] = factory


def pool_backend(name: str) -> PoolFactory:
    """The factory registered as ``name``; ValueError listing the known ones when there is none."""
    try:
        return _BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown pool backend {name!r}; choose one of {', '.join(pool_backends())}") from None


def pool_backends() -> Sequence[str]:
    return tuple(_BACKENDS)
