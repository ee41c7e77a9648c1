"""``RemotePool``: the :class:`~turngym.envs.vector.EnvPool` interface over sessions on ``turngym serve`` servers.

Each worker is one OpenEnv session (one world) on a server; with several servers, workers are
dealt round-robin. The pool keeps EnvPool's semantics, so a rollout cannot tell the difference:

* ``send``/``receive`` (and ``reset_some``/``step_some``) with a deadline per call: ``step_timeout``
  (60 s, or the world's ``max_step_seconds`` plus 30 s, at most ``max_step_timeout``: a server cannot
  make its client wait forever) and ``reset_timeout``;
* a worker that fails is *respawned*: its session is dropped and a new one opened, and the step
  comes back truncated with ``info["truncation_reason"]``:
  ``worker_timeout`` (no answer before the deadline), ``env_disconnected`` (the connection was
  lost: the server died, restarted or became unreachable, or sent a message over the size limit) or
  ``worker_error`` (the world raised, or the server sent a number it may not: a reward that is not
  finite or beyond ``max_abs_reward``, 1e6 a turn; any number in its info that is not finite);
* an episode ends after ``max_turns`` turns at the latest (the server's own limit, at most the client's:
  ``max_turns``, else the ``env_kwargs``' ``max_turns``, else 100), truncated with
  ``truncation_reason="max_turns"``: a server cannot keep an episode going forever;
* observations longer than ``max_observation_chars`` are cut in the middle, with the usual marker;
* a failed reset raises, as in EnvPool (a bad task, or no server to reconnect to, is a setup error);
  a reset that finds its connection lost (the server restarted between episodes) first tries once
  more on a new session. A session never reconnects silently in the middle of an episode.

Every network call has a timeout; the sessions' sockets live on one event-loop thread that keeps
answering keepalive pings while the caller is busy generating. The server's token is ``token``, else
``$TURNGYM_SERVE_TOKEN``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from websockets.exceptions import ConnectionClosed

from turngym.envs.openenv.client import DEFAULT_CONNECT_TIMEOUT, EventLoopThread, RemoteSession, websocket_url
from turngym.envs.openenv.protocol import TurnGymState, jsonable
from turngym.envs.openenv.security import HIDDEN_PATH, looks_like_path
from turngym.envs.pool_api import (
    DEFAULT_MAX_REMOTE_TURNS,
    DEFAULT_STEP_TIMEOUT,
    MAX_ABS_REWARD,
    MAX_DECLARED_STEP_SECONDS,
    MAX_REMOTE_OBSERVATION_CHARS,
    StepResult,
    check_max_turns,
    declared_step_timeout,
    turn_limit,
)
from turngym.envs.pools import Call, DeadlinePool, Failure, TransportBase

logger = logging.getLogger(__name__)

# The world's own choices, checked against what the caller asks for even when it leaves them at their defaults.
_EFFECTIVE_DEFAULTS = {"reward_mode": "sparse", "action_protocol": "free_form", "max_turns": None}


class RemotePool(DeadlinePool):
    """``num_envs`` sessions on the ``turngym serve`` server(s) at ``servers``.

    Args:
        servers: one address (``ws://host:port``, ``host:port``, ``http://...``) or several.
        num_envs: sessions to open (each server must allow its share: ``--max-sessions``).
        env_id, env_kwargs: what the caller means to play; checked against the server's world, so
            a run never silently plays another world, reward mode or protocol. ``tasks`` is ignored
            (tasks travel with each reset).
        step_timeout, reset_timeout: deadlines, as in EnvPool.
        max_step_timeout: the latest step deadline a server's declared ``max_step_seconds`` may set
            (when ``step_timeout`` is None).
        connect_timeout: seconds to open one session.
        ping_interval, ping_timeout: WebSocket keepalive (see the server's docs).
        token: the servers' token (None: ``$TURNGYM_SERVE_TOKEN``, if set).
        max_observation_chars: longer observations from a server are cut, with the usual marker.
        max_abs_reward: a larger reward (in absolute value) from a server truncates the episode (``worker_error``).
        max_turns: the most turns an episode runs here, whatever the server says (it may end one earlier);
            None: ``env_kwargs["max_turns"]`` when given, else 100 (:data:`DEFAULT_MAX_REMOTE_TURNS`).
    """

    def __init__(self, servers: str | Sequence[str], num_envs: int, *, env_id: str | None = None,
                 env_kwargs: Mapping[str, Any] | None = None, step_timeout: float | None = None,
                 reset_timeout: float = 300.0, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
                 ping_interval: float = 20.0, ping_timeout: float = 20.0, token: str | None = None,
                 max_step_timeout: float = MAX_DECLARED_STEP_SECONDS,
                 max_observation_chars: int = MAX_REMOTE_OBSERVATION_CHARS,
                 max_abs_reward: float = MAX_ABS_REWARD, max_turns: int | None = None) -> None:
        urls = [servers] if isinstance(servers, str) else list(servers)
        if not urls:
            raise ValueError("RemotePool needs at least one server address")
        if num_envs < 1:
            raise ValueError(f"a pool needs at least one environment, got num_envs={num_envs}")
        self.servers = [websocket_url(url) for url in urls]
        self.num_envs = num_envs
        if not (isinstance(max_abs_reward, (int, float)) and max_abs_reward > 0):
            raise ValueError(f"max_abs_reward must be a positive number, got {max_abs_reward!r}")
        asked = (env_kwargs or {}).get("max_turns")
        self.max_turns = check_max_turns(max_turns if max_turns is not None else asked if asked is not None
                                         else DEFAULT_MAX_REMOTE_TURNS)
        self.connect_timeout = float(connect_timeout)
        # The pool's own deadlines (asyncio.wait_for around every call) are what times a call out; the
        # client's message timeout is only a backstop, above any deadline a world may declare.
        session_options = {"connect_timeout": connect_timeout, "ping_interval": ping_interval,
                           "ping_timeout": ping_timeout, "message_timeout": 24 * 3600.0, "token": token,
                           "max_observation_chars": max_observation_chars, "max_abs_reward": float(max_abs_reward)}
        sessions = SessionTransport(self.servers, num_envs, session_options, max_turns=self.max_turns)
        super().__init__(sessions, step_timeout=DEFAULT_STEP_TIMEOUT, reset_timeout=reset_timeout)
        states = sessions.open_all()
        self.server_state = states[0]
        self._check_world(states, env_id, env_kwargs)
        self.env_id = sessions.env_id = self.server_state.env_id
        self.step_timeout = (float(step_timeout) if step_timeout is not None else
                             declared_step_timeout([s.max_step_seconds for s in states], cap=max_step_timeout))
        if step_timeout is None and self.step_timeout < declared_step_timeout([s.max_step_seconds for s in states]):
            logger.warning("RemotePool: %s declares steps of up to %s s; the step deadline is capped at %g s "
                           "(pass max_step_timeout= to trust it)", self.servers[0], self.server_state.max_step_seconds,
                           self.step_timeout)

    def server_of(self, index: int) -> str:
        return self.transport.server_of(index)

    def close(self) -> None:
        for _, future in self._abandon_all():
            future.cancel()
        self.transport.close()

    def _check_world(self, states: list[TurnGymState], env_id: str | None,
                     env_kwargs: Mapping[str, Any] | None) -> None:
        served = {s.env_id for s in states}
        if len(served) > 1:
            self.close()
            raise ValueError(f"the servers {self.servers} serve different worlds: {sorted(served)}")
        problems = _mismatches(self.server_state, env_id, env_kwargs)
        if problems:
            self.close()
            raise ValueError(f"{self.servers[0]} serves {self.server_state.env_id} with other options than asked: "
                             f"{'; '.join(problems)}. Restart the server with the same options, or ask for its own")


class SessionTransport(TransportBase):
    """:class:`RemotePool`'s worlds: one OpenEnv session each, dealt round-robin over the servers, driven from
    one event-loop thread. A call's failure has already reopened its session (a reset that lost its
    connection tries once more on the new one); the pool's turn cap and the server's ``max_turns`` are
    applied to every answer (:meth:`accept`)."""

    def __init__(self, servers: list[str], size: int, session_options: dict[str, Any], *, max_turns: int) -> None:
        self.servers, self.size, self.max_turns = servers, size, max_turns
        self.session_options = session_options
        self.connect_timeout = float(session_options["connect_timeout"])
        self.env_id: str | None = None  # the served world, once checked: a reopened session must serve it too
        self.respawns = 0
        self._turns = [0] * size  # turns played in each worker's episode
        self._limits = [max_turns] * size  # and its turn limit
        self._loop = EventLoopThread()
        self._sessions: list[RemoteSession | None] = [None] * size

    def server_of(self, index: int) -> str:
        return self.servers[index % len(self.servers)]

    def name(self, index: int) -> str:
        return f"worker {index} ({self.server_of(index)})"

    # ----------------------------------------------------------------- the transport
    def submit(self, index: int, call: Call, timeout: float) -> concurrent.futures.Future:
        return self._loop.submit(self._call(index, call, timeout))

    def allowance(self, call: Call, timeout: float) -> float:
        # Reopening a session fits in the grace; a reset may try twice (see _call).
        return timeout * (2 if call.kind == "reset" else 1) + 2 * self.connect_timeout + 10.0

    def wait(self, handles: list[Any], timeout: float) -> list[Any]:
        done, _ = concurrent.futures.wait(handles, timeout=timeout, return_when=concurrent.futures.FIRST_COMPLETED)
        return list(done)

    def result(self, index: int, handle: concurrent.futures.Future) -> Any:
        return handle.result()

    def overdue(self, index: int, handle: concurrent.futures.Future) -> Any:
        handle.cancel()  # the call's own timeout did not fire in time (a stuck loop): give up on the session
        return super().overdue(index, handle)

    def respawn(self, index: int, failure: Failure) -> None:
        try:
            self._loop.run(self._respawn(index, failure), timeout=self.connect_timeout + 10.0)
        except TimeoutError:
            self._sessions[index] = None  # the next reset opens a new session

    def accept(self, index: int, call: Call, value: Any) -> Any:
        """A reset starts the turn count (the episode's limit: the server's ``max_turns``, at most the
        client's); a step at the limit that the server did not end comes back truncated (``max_turns``)."""
        if call.kind == "reset":
            self._turns[index] = 0
            self._limits[index] = turn_limit(value[1].get("max_turns"), self.max_turns)
            return value
        self._turns[index] += 1
        if value.terminated or value.truncated or self._turns[index] < self._limits[index]:
            return value
        info = {**value.info, "truncation_reason": "max_turns"}
        return StepResult(value.observation, value.reward, False, True, info)

    def close(self) -> None:
        if self._loop.loop.is_closed():
            return
        try:
            self._loop.run(self._close_all(), timeout=15.0)
        except TimeoutError:
            logger.warning("RemotePool: some sessions did not close within 15 s")
        finally:
            self._loop.close()

    def open_all(self) -> list[TurnGymState]:
        """Open every session at once (each server's first state); ConnectionError (every session closed
        again) if one fails."""
        try:
            return self._loop.run(self._open_all(), timeout=self.connect_timeout * 2 + 30.0)
        except BaseException:
            self._loop.close()
            raise

    # ----------------------------------------------------------------- on the event loop
    async def _call(self, index: int, call: Call, timeout: float) -> Any:
        """The answer, or a Failure after reopening the session."""
        session = self._sessions[index]
        if session is None:  # lost earlier and not reopened
            if call.kind == "step":
                return Failure("env_disconnected", f"the session on {self.server_of(index)} was lost", respawn=False)
            try:
                session = await self._open(index)
            except ConnectionError as error:
                return Failure("env_disconnected", str(error), respawn=False)
        for attempt in range(2):
            try:
                if call.kind == "reset":
                    return await asyncio.wait_for(session.reset(**call.payload), timeout)
                return await asyncio.wait_for(session.step(call.payload), timeout)
            except Exception as error:  # noqa: BLE001 - every failure of a remote world is reported as a truncation
                failure = Failure(*_failure(error, timeout), respawn=False)
                await self._respawn(index, failure)
            session = self._sessions[index]
            # A reset that lost its connection (the server restarted between episodes) tries once more,
            # on the new session; a step's episode is gone with its session.
            if call.kind == "step" or failure.reason != "env_disconnected" or session is None or attempt:
                return failure
        return failure

    async def _open(self, index: int) -> RemoteSession:
        session = RemoteSession(self.server_of(index), **self.session_options)
        state = await session.open()
        if self.env_id and state.env_id != self.env_id:
            await session.close()
            raise ConnectionError(f"{session.url} now serves {state.env_id}, not {self.env_id}")
        self._sessions[index] = session
        return session

    async def _respawn(self, index: int, failure: Failure) -> None:
        logger.warning("RemotePool worker %d (%s) failed (%s: %s); reconnecting", index, self.server_of(index),
                       failure.reason, failure.detail)
        old, self._sessions[index] = self._sessions[index], None
        if old is not None:
            await old.close()
        try:
            await self._open(index)
        except ConnectionError as error:  # the next reset tries again
            logger.warning("RemotePool worker %d could not reconnect: %s", index, error)
        self.respawns += 1

    async def _open_all(self) -> list[TurnGymState]:
        results = await asyncio.gather(*(self._open(i) for i in range(self.size)), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            await self._close_all()
            raise failures[0] if isinstance(failures[0], ConnectionError) else ConnectionError(str(failures[0]))
        return [session.state for session in results[: len(self.servers)]]  # each server's first session

    async def _close_all(self) -> None:
        sessions = [s for s in self._sessions if s is not None]
        self._sessions = [None] * self.size
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)


def _mismatches(state: TurnGymState, env_id: str | None, env_kwargs: Mapping[str, Any] | None) -> list[str]:
    """What the caller asks for that the served world does not do."""
    problems = []
    if env_id is not None and env_id != state.env_id:
        problems.append(f"env_id {env_id!r} (it serves {state.env_id!r})")
    served = {**_EFFECTIVE_DEFAULTS, **state.world_options}
    for key, wanted in jsonable({k: v for k, v in (env_kwargs or {}).items() if k != "tasks"}).items():
        if key not in served:
            problems.append(f"{key}={wanted!r} (the server leaves it at the world's default)")
        elif served[key] == HIDDEN_PATH and isinstance(wanted, str) and looks_like_path(wanted):
            continue  # a path of the server's, which it does not show: nothing to compare
        elif served[key] != wanted:
            problems.append(f"{key}={wanted!r} (the server's is {served[key]!r})")
    return problems


def _failure(error: BaseException, timeout: float) -> tuple[str, str]:
    """The truncation reason for a failed call, as EnvPool names its own."""
    if isinstance(error, TimeoutError):  # before OSError: TimeoutError is one
        return "worker_timeout", f"no answer within {timeout:.0f} s"
    if isinstance(error, (ConnectionClosed, ConnectionError, OSError)):
        return "env_disconnected", f"{type(error).__name__}: {error}"
    return "worker_error", str(error) if str(error).startswith("Server error") else f"{type(error).__name__}: {error}"
