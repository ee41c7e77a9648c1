"""``turngym/OpenEnv-v0``: any OpenEnv server, played as a turngym world.

The reverse of ``turngym serve``: a :class:`~turngym.envs.core.TextEnv` whose episodes play on an
OpenEnv server (a ``turngym serve`` one, or any other), through OpenEnv's own client
(``openenv.core.GenericEnvClient``, one WebSocket session per world)::

    env = turngym.make("turngym/OpenEnv-v0", base_url="ws://127.0.0.1:8000")
    observation, info = env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step("stop")

How a turn maps onto OpenEnv:

* action: ``{action_field: text}`` (``"command"``, a turngym server's field, by default). Model output
  that is empty, huge, binary or multi-line is an invalid action here, before it travels; an action
  the server's schema rejects is an invalid action with the server's message.
* observation: a turngym server's ``text``; for another server, ``observation_field``, else the
  observation's only text field (or the first of :data:`TEXT_FIELDS`), else the whole observation
  as JSON; or ``render_observation(fields) -> str`` (see :func:`observation_text`).
* reward: ``reward_mode="dense"`` (default) passes the server's reward through, ``r_t``;
  ``"sparse"`` pays the episode's return ``sum_t r_t`` on its last turn. (The base class's dense
  reward is the potential difference ``phi_t - phi_{t-1}``; with ``phi_t = sum_{s<=t} r_s`` it is
  exactly ``r_t``, and the outcome of an episode is its return ``phi_T``.)
* end: ``done`` ends the episode, as *truncated* when the server says so (a turngym server's
  ``truncated`` / ``truncation_reason``, another server's ``metadata["truncated"]``), else as
  *terminated*: won when the metadata says ``won``, else lost.
* failures truncate the episode, never hang it (every call has a timeout): ``env_disconnected``
  (the connection was lost: the server died or became unreachable, or sent a message over
  ``max_message_mb``), ``env_timeout`` (no answer within ``step_timeout``), ``env_error`` (the
  server's world raised, or its reward was not a finite number). A session never reconnects in the
  middle of an episode; a reset that finds its connection lost opens a new session once.
* the server is not trusted: the step deadline it declares is capped (``max_step_timeout``), its
  observations are cut like any world's (``max_observation_chars``), its rewards must be finite and at
  most ``max_abs_reward`` (1e6) a turn, every other number it sends must be finite (else the episode is
  truncated, ``env_error``; a reset whose numbers are not fails), and its turn limit is at most
  ``max_turns_cap`` (100); the token (``token``, else ``$TURNGYM_SERVE_TOKEN``) goes to it as
  ``Authorization: Bearer``.

A turngym server's metadata passes through: ``won``, ``task``, ``reward_components`` (but ``outcome``,
``progress`` and ``invalid_penalty``, which this world computes itself from the server's rewards),
``truncation_reason``, the admissible commands, ``max_turns``, ``optimal_length`` and the world's
own info entries (``walkthrough``...); its task panels are this world's (:func:`task_panel`), so
``turngym eval --env turngym/OpenEnv-v0 --env-arg base_url=URL`` plays the server's held-out split.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

from openenv.core.generic_client import GenericEnvClient
from websockets.exceptions import ConnectionClosed

from turngym.envs.core import INFO_KEYS, TextEnv, WorldState
from turngym.envs.openenv.client import (
    DEFAULT_CONNECT_TIMEOUT,
    MAX_MESSAGE_MB,
    EventLoopThread,
    MalformedPanel,
    OneSession,
    _get_json,
    buffered_message,
    http_url,
    refused_token,
    served_panel,
    token_refusal,
    websocket_url,
)
from turngym.envs.openenv.protocol import jsonable
from turngym.envs.openenv.security import auth_headers
from turngym.envs.pool_api import (
    DEFAULT_MAX_REMOTE_TURNS,
    MAX_ABS_REWARD,
    MAX_DECLARED_STEP_SECONDS,
    answer_problems,
    check_max_turns,
    declared_step_timeout,
    is_number,
    refused_answer,
    turn_limit,
)
from turngym.envs.tasks import Task, TaskSet

logger = logging.getLogger(__name__)

ENV_ID = "turngym/OpenEnv-v0"
# The observation fields taken as the text when several fields are text (the first one found).
TEXT_FIELDS = ("text", "observation", "prompt", "message", "content", "output", "response", "stdout")
# Why an episode was truncated by this side (not by the server).
_FAILURE_TEXT = {
    "env_disconnected": "The connection to the OpenEnv server was lost",
    "env_timeout": "The OpenEnv server did not answer in time",
    "env_error": "The OpenEnv server's environment raised an error",
}
# The reward components this world computes itself (a server's under these names are not taken).
_OWN_COMPONENTS = frozenset({"outcome", "progress", "invalid_penalty"})
_SERVER_ERROR = re.compile(r"^Server error: (?P<message>.*) \(code: (?P<code>[A-Z_]+)\)$", re.DOTALL)


def observation_text(fields: Mapping[str, Any], field: str | None = None) -> str:
    """The text an agent reads from an OpenEnv observation (its fields; ``reward``, ``done`` and
    ``metadata`` are left out).

    ``field`` named: that field (as JSON when it is not a string); else the observation's only
    string field, or the first of :data:`TEXT_FIELDS` it has; else the whole observation as JSON.
    A named field the observation lacks gives the JSON too, so nothing is ever hidden from the agent.
    """
    fields = {k: v for k, v in fields.items() if k not in ("reward", "done", "metadata")}
    if field is not None:
        if field in fields:
            value = fields[field]
            return value if isinstance(value, str) else _as_json(value)
        return _as_json(fields)
    texts = [k for k, v in fields.items() if isinstance(v, str)]
    if len(texts) == 1:
        return fields[texts[0]]
    preferred = next((k for k in TEXT_FIELDS if k in texts), None)
    return fields[preferred] if preferred is not None else _as_json(fields)


def _as_json(value: Any) -> str:
    return json.dumps(jsonable(value), ensure_ascii=False, sort_keys=True)


def task_panel(split: str, n: int | None, env_kwargs: dict[str, Any], *, workers: int | None = None,
               progress: bool = True) -> TaskSet:
    """The panel of ``turngym/OpenEnv-v0``: the first ``n`` tasks of ``split`` as the server at
    ``env_kwargs["base_url"]`` serves them (a ``turngym serve`` server's task API, fingerprint checked)."""
    url = _require_base_url(env_kwargs.get("base_url"))
    timeout = float(env_kwargs.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT)) + 50.0
    try:
        return served_panel(url, split, n, timeout=timeout, token=env_kwargs.get("token"))
    except MalformedPanel as error:  # task dicts that are not turngym tasks
        raise ValueError(f"{ENV_ID}: the tasks {url} serves are not turngym tasks ({error}); only a `turngym serve` "
                         "server has a task panel; give tasks yourself (a task's payload goes to the server's reset "
                         "as keyword arguments)") from None


def _require_base_url(base_url: Any) -> str:
    if not base_url:
        raise ValueError(f"{ENV_ID} needs base_url, the address of an OpenEnv server, e.g. "
                         "base_url='ws://127.0.0.1:8000' (command line: --env-arg base_url=ws://127.0.0.1:8000; "
                         "serve a world with `turngym serve turngym/Signals-v0 --port 8000`)")
    return websocket_url(str(base_url))


class _SessionClient(OneSession, GenericEnvClient):
    """OpenEnv's generic client, bound to one session (:class:`~turngym.envs.openenv.client.OneSession`)."""


class OpenEnvWorld(TextEnv):
    """A world played on an OpenEnv server (see the module docstring).

    Args:
        base_url: the server's address (``ws://host:port``, ``http://host:port`` or ``host:port``).
        action_field: the field of the server's action that carries the agent's text.
        observation_field: the field of the server's observation shown to the agent (None: see
            :func:`observation_text`).
        render_observation: ``fields -> str`` (or ``"module:function"``), rendering an observation
            as text instead; it gets the observation's fields without ``reward``/``done``/``metadata``.
        reset_kwargs: extra keyword arguments of every reset (a server's own reset options).
        split: a turngym server's split that a reset without a task (and without ``tasks``) draws
            from; None: the server draws from its first split. Other servers have no split to draw from.
        connect_timeout: seconds to open a session (and read the server's schema and state).
        reset_timeout: seconds a reset may take (a world that generates its game at reset is slow).
        step_timeout: seconds a step may take; None: 60, or a turngym server's ``max_step_seconds``
            plus 30, at most ``max_step_timeout``.
        ping_interval, ping_timeout: WebSocket keepalive; a server silent for ``ping_timeout`` is gone.
        token: the server's token, sent as ``Authorization: Bearer``; None: ``$TURNGYM_SERVE_TOKEN``
            (prefer it: world options may be recorded with results).
        max_message_mb: a larger message from the server closes the session (``env_disconnected``).
        reward_mode: ``"dense"`` (default): the server's turn rewards; ``"sparse"``: their sum on the
            last turn. Other options are :class:`~turngym.envs.core.TextEnv`'s.
        max_abs_reward: a larger reward (in absolute value) from the server truncates the episode
            (``env_error``): returns and advantages stay finite.
        max_turns_cap: the longest turn limit taken from the server (its ``max_turns``, else 2x its
            ``optimal_length``, else 50); ``max_turns``, when given, is this world's own limit instead.
    """

    world_name = "openenv"
    action_hint = "Reply with one action."

    def __init__(self, *, base_url: str | None = None, action_field: str = "command",
                 observation_field: str | None = None,
                 render_observation: Callable[[dict[str, Any]], str] | str | None = None,
                 reset_kwargs: Mapping[str, Any] | None = None, split: str | None = None,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT, reset_timeout: float = 300.0,
                 step_timeout: float | None = None, ping_interval: float = 20.0, ping_timeout: float = 20.0,
                 token: str | None = None, max_step_timeout: float = MAX_DECLARED_STEP_SECONDS,
                 max_message_mb: float = MAX_MESSAGE_MB, reward_mode: str = "dense",
                 max_abs_reward: float = MAX_ABS_REWARD, max_turns_cap: int = DEFAULT_MAX_REMOTE_TURNS,
                 **kwargs: Any) -> None:
        super().__init__(reward_mode=reward_mode, **kwargs)
        self.url = _require_base_url(base_url)
        for name, seconds in (("connect_timeout", connect_timeout), ("reset_timeout", reset_timeout),
                              ("step_timeout", step_timeout), ("ping_interval", ping_interval),
                              ("ping_timeout", ping_timeout), ("max_step_timeout", max_step_timeout),
                              ("max_message_mb", max_message_mb), ("max_abs_reward", max_abs_reward)):
            if seconds is not None and not (is_number(seconds, 1e12) and seconds > 0):
                raise ValueError(f"{ENV_ID}: {name} must be a positive number of seconds, got {seconds!r}"
                                 if name != "max_abs_reward" else f"{ENV_ID}: {name} must be a positive number, "
                                 f"got {seconds!r}")
        self.max_abs_reward = float(max_abs_reward)
        self.max_turns_cap = check_max_turns(max_turns_cap, f"{ENV_ID}: max_turns_cap")
        if not isinstance(action_field, str) or not action_field:
            raise ValueError(f"{ENV_ID}: action_field must be the name of a field, got {action_field!r}")
        self.action_field = action_field
        self.observation_field = observation_field
        self.render_observation = _renderer(render_observation)
        self.reset_kwargs = dict(reset_kwargs or {})
        self.split = split
        self.connect_timeout = float(connect_timeout)
        self.reset_timeout = float(reset_timeout)
        self._token = token
        self._session_options = {"connect_timeout_s": self.connect_timeout, "message_timeout_s": 24 * 3600.0,
                                 "websocket_ping_interval_s": ping_interval, "websocket_ping_timeout_s": ping_timeout,
                                 "max_message_size_mb": float(max_message_mb), "headers": auth_headers(token) or None}
        self._loop = EventLoopThread(name="turngym-openenv-world")
        self._client: _SessionClient | None = None
        self._server_return = 0.0  # phi_t: the sum of the server's rewards so far this episode
        self._server_max_turns: int | None = None
        self._server_task: dict[str, Any] | None = None
        self._reset_seed: int | None = None
        try:
            self.server_state = self._open()
            self._check_schema()
        except BaseException:
            self._close_world()
            raise
        # A turngym server names its world in its state (TurnGymState).
        self.served_env_id: str | None = self.server_state.get("env_id") or None
        self.is_turngym_server = bool(self.served_env_id) and "turngym_version" in self.server_state
        declared = self.server_state.get("max_step_seconds") if self.is_turngym_server else None
        self.step_timeout = (float(step_timeout) if step_timeout is not None
                             else declared_step_timeout([declared], cap=max_step_timeout))
        # What a pool's step deadline follows (this plus its margin): this world always answers first.
        self.max_step_seconds = self.step_timeout

    # ----------------------------------------------------------------- gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self._reset_seed = seed
        return super().reset(seed=seed, options=options)

    def default_max_turns(self, optimal_length: int | None) -> int:
        """A turngym server's own turn limit, else the base class's default; at most ``max_turns_cap``."""
        return min(self._server_max_turns or super().default_max_turns(optimal_length), self.max_turns_cap)

    # ----------------------------------------------------------------- world hooks
    def _start(self, task: Task | None) -> WorldState:
        # Seeded from this env's generator when no seed is given: a seeded first reset fixes every episode.
        seed = self._reset_seed if self._reset_seed is not None else int(self.np_random.integers(2**31))
        request: dict[str, Any] = {"seed": seed, **self.reset_kwargs}
        if task is not None:
            request.update({"task": task.to_dict()} if self.is_turngym_server else jsonable(task.payload))
        result = self._reset(request)
        self._server_return = 0.0
        observation, metadata = self._parts(result)
        problems = self._problems(None, observation, metadata, reward_required=False)
        if problems:
            raise RuntimeError(f"{ENV_ID}: {self.url} answered the reset with {refused_answer(problems)}")
        info = _mapping(metadata.get("info")) if self.is_turngym_server else {}
        task = info.get("task")  # the task the server drew, when none was given
        self._server_task = dict(task) if isinstance(task, Mapping) and isinstance(task.get("id"), str) else None
        max_turns = info.get("max_turns")
        self._server_max_turns = turn_limit(max_turns, self.max_turns_cap) if max_turns is not None else None
        optimal = info.get("optimal_length")
        optimal = optimal if isinstance(optimal, int) and not isinstance(optimal, bool) and optimal > 0 else None
        return WorldState(text=self._text(observation), progress=0.0,
                          admissible_commands=_commands(info.get("admissible_commands")),
                          optimal_length=optimal, extra=self._passed_through(observation, metadata))

    def _execute(self, command: str) -> WorldState:
        if self._client is None:
            return self._failure("env_disconnected", f"the session on {self.url} was lost")
        payload = {self.action_field: command}
        try:
            result = self._call(lambda client: client.step(payload), self.step_timeout)
        except Exception as error:  # noqa: BLE001 - every failure of a remote world is reported, never raised
            return self._failed_step(error)
        observation, metadata = self._parts(result)
        reward = 0.0 if result.reward is None else result.reward
        problems = self._problems(reward, observation, metadata)
        if problems:
            return self._failure("env_error", refused_answer(problems))
        reward = float(reward)
        self._server_return += reward
        done = result.done is True
        if self.is_turngym_server:
            info = _mapping(metadata.get("info"))
            truncated = metadata.get("truncated") is True
            won = metadata.get("won") is True
            lost = info.get("lost") is True or (done and not truncated and not won)
            components = {k: v for k, v in _numbers(info.get("reward_components")).items() if k not in _OWN_COMPONENTS}
            return WorldState(
                text=self._text(observation), progress=self._server_return, won=won, lost=lost,
                admissible_commands=_commands(info.get("admissible_commands")),
                invalid=info.get("invalid_action") is True, components=components,
                extra=self._passed_through(observation, metadata),
                failure=(metadata.get("truncation_reason") or "server_truncated") if truncated else None)
        truncated = done and metadata.get("truncated") is True
        won = done and metadata.get("won") is True
        return WorldState(text=self._text(observation), progress=self._server_return, won=won,
                          lost=done and not won and not truncated, extra=self._passed_through(observation, metadata),
                          failure=(str(metadata.get("truncation_reason") or "server_truncated")) if truncated else None)

    def _finish(self, state: WorldState, truncation: str | None) -> WorldState:
        state.outcome = self._server_return  # phi_T: dense pays r_T, sparse the whole return
        return state

    def _task_info(self) -> dict[str, str | None]:
        if self._task is None and self._server_task is not None:
            return {key: self._server_task.get(key) for key in ("id", "split", "difficulty")}
        return super()._task_info()

    def _resolve_task(self, task: Task | str | Mapping[str, Any] | None) -> Task | None:
        if isinstance(task, str) and self.tasks is None and self.is_turngym_server:
            return self._served_task(task)
        if task is None and self.tasks is None and self.split is not None and self.is_turngym_server:
            # drawn from by seed
            self.tasks = served_panel(self.url, self.split, timeout=self.reset_timeout, token=self._token)
        return super()._resolve_task(task)

    def _close_world(self) -> None:
        if getattr(self, "_loop", None) is not None:
            self._drop_session()
            self._loop.close()

    # ----------------------------------------------------------------- the session
    def _call(self, method: Callable[[_SessionClient], Any], timeout: float) -> Any:
        """``await method(client)`` on the session's event loop; TimeoutError after ``timeout`` seconds."""
        client = self._client

        async def bounded() -> Any:
            async def call() -> Any:
                return await method(client)

            return await asyncio.wait_for(call(), timeout)

        return self._loop.run(bounded(), timeout + 5.0)  # the outer limit is a backstop for a stuck loop

    def _open(self) -> dict[str, Any]:
        """Open a session and read the server's state; ConnectionError (one line, with the reason) if that fails."""
        self._client = _SessionClient(base_url=self.url, **self._session_options)
        try:
            self._call(lambda client: client.connect(), self.connect_timeout)
            state = self._call(lambda client: client.state(), self.connect_timeout)
        except Exception as error:  # noqa: BLE001 - told apart below
            refusal = self._refusal() if isinstance(error, (ConnectionError, OSError)) else ""
            self._drop_session()
            if refused_token(error):
                raise ConnectionError(f"{ENV_ID}: {token_refusal(self.url)}") from None
            raise ConnectionError(self._why_unreachable(error, refusal)) from None
        return dict(state) if isinstance(state, Mapping) else {}

    def _refusal(self) -> str:
        """The server's message left in the socket when it closed (a full server's refusal), or ""."""
        try:
            return self._call(buffered_message, 2.0)
        except Exception:  # noqa: BLE001 - the loop or socket is gone: no refusal to report
            return ""

    def _why_unreachable(self, error: BaseException, refusal: str = "") -> str:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        if isinstance(error, TimeoutError):
            return f"{ENV_ID}: {self.url} did not answer within {self.connect_timeout:.0f} s"
        if "CAPACITY_REACHED" in refusal:
            message = refusal
        if "CAPACITY_REACHED" in message:
            return (f"{ENV_ID}: {self.url} has no free session ({message}); start it with a larger --max-sessions "
                    "or make fewer worlds")
        return (f"{ENV_ID}: no OpenEnv server answers at {self.url} ({message}); start one (e.g. `turngym serve "
                "turngym/Signals-v0 --port 8000`) or check base_url")

    def _drop_session(self) -> None:
        client, self._client = self._client, None
        if client is None or self._loop.loop.is_closed():
            return
        async def close() -> None:
            await asyncio.wait_for(client.close(), 5.0)

        try:
            self._loop.run(close(), 10.0)
        except (Exception, asyncio.CancelledError) as error:  # noqa: BLE001 - best effort: the socket may be gone
            logger.debug("closing the session on %s: %s", self.url, error)

    def _reset(self, request: dict[str, Any]) -> Any:
        """Reset on the session; a session lost between episodes is reopened once (the same world must answer)."""
        for attempt in range(2):
            if self._client is None:
                self._reopen()
            try:
                return self._call(lambda client: client.reset(**request), self.reset_timeout)
            except TimeoutError:
                self._drop_session()
                raise TimeoutError(f"{ENV_ID}: {self.url} did not answer a reset within "
                                   f"{self.reset_timeout:.0f} s") from None
            except (ConnectionClosed, ConnectionError, OSError) as error:
                self._drop_session()
                if attempt:
                    raise ConnectionError(f"{ENV_ID}: the connection to {self.url} was lost during a reset "
                                          f"({error})") from None
            except RuntimeError as error:  # the server's error frame
                raise RuntimeError(f"{ENV_ID}: {self.url} could not reset ({error})") from None
        raise AssertionError("unreachable")

    def _reopen(self) -> None:
        state = self._open()
        if self.served_env_id and state.get("env_id") != self.served_env_id:
            self._drop_session()
            raise ConnectionError(f"{ENV_ID}: {self.url} now serves {state.get('env_id') or 'another world'}, "
                                  f"not {self.served_env_id}")

    def _check_schema(self) -> None:
        """The server's /schema must have ``action_field`` (and ``observation_field``): a one-line error now,
        rather than every action refused later. Servers without /schema are taken on trust."""
        try:
            schema = _get_json(f"{http_url(self.url)}/schema", self.connect_timeout, token=self._token)
        except (ValueError, ConnectionError) as error:
            logger.info("%s: no /schema on %s (%s); the action field is not checked", ENV_ID, self.url, error)
            return
        action = (schema or {}).get("action") or {}
        fields = sorted(set(action.get("properties") or {}) - {"metadata"})
        if fields and self.action_field not in fields:
            raise ValueError(f"{ENV_ID}: the actions of {self.url} have the fields {fields}, not "
                             f"{self.action_field!r}: pass action_field=NAME (--env-arg action_field=NAME)")
        others = sorted(set(action.get("required") or []) - {self.action_field})
        if others:
            raise ValueError(f"{ENV_ID}: the actions of {self.url} also require {others}; this world fills "
                             f"one text field ({self.action_field!r})")
        observed = sorted(set(((schema or {}).get("observation") or {}).get("properties") or {})
                          - {"metadata", "reward", "done"})
        if self.observation_field is not None and observed and self.observation_field not in observed:
            raise ValueError(f"{ENV_ID}: the observations of {self.url} have the fields {observed}, not "
                             f"{self.observation_field!r}")

    def _served_task(self, task_id: str) -> Task:
        """A task of the server's panels, by id (for ``reset(options={"task": "id"})`` without a task set)."""
        base = http_url(self.url)
        try:
            name = _get_json(f"{base}/list_environments", self.connect_timeout, token=self._token)[0]
            splits = [s["name"] for s in _get_json(f"{base}/{name}/splits", self.connect_timeout, token=self._token)]
        except (KeyError, TypeError, IndexError) as error:
            raise MalformedPanel(f"{self.url}'s task API does not list its splits ({type(error).__name__}: "
                                 f"{str(error)[:100]})") from None
        for split in splits:
            for task in served_panel(self.url, split, timeout=self.reset_timeout, token=self._token):
                if task.id == task_id:
                    return task
        raise KeyError(f"task {task_id!r} is in none of the splits {splits} that {self.url} serves")

    # ----------------------------------------------------------------- results
    def _failed_step(self, error: BaseException) -> WorldState:
        match = _SERVER_ERROR.match(str(error)) if isinstance(error, RuntimeError) else None
        if match and match.group("code") in ("VALIDATION_ERROR", "INVALID_JSON"):
            # The server refused the action itself; its session, and the episode, go on.
            reason = f"the server refused it: {match.group('message')}"
            previous = self._state
            return WorldState(text=f"Invalid action: {reason}. {self._hint()}", invalid=True,
                              admissible_commands=previous.admissible_commands if previous else None,
                              extra={"invalid_reason": reason})
        if isinstance(error, TimeoutError):  # before OSError: TimeoutError is one
            reason, detail = "env_timeout", f"no answer within {self.step_timeout:.0f} s"
        elif isinstance(error, (ConnectionClosed, ConnectionError, OSError)):
            reason, detail = "env_disconnected", f"{type(error).__name__}: {error}"
        else:
            reason, detail = "env_error", match.group("message") if match else f"{type(error).__name__}: {error}"
        if reason != "env_error":  # the socket is gone or out of step: the next reset opens a new session
            self._drop_session()
        return self._failure(reason, detail)

    def _failure(self, reason: str, detail: str) -> WorldState:
        task = self._task.id if self._task is not None else None
        logger.warning("%s on %s (task %s): %s: %s", ENV_ID, self.url, task, reason, detail)
        return WorldState(text=f"[turngym] {_FAILURE_TEXT[reason]} ({detail}); the episode was truncated.",
                          failure=reason, extra={"openenv_failure": str(detail).splitlines()[0] if detail else reason})

    def _problems(self, reward: Any, observation: Mapping[str, Any], metadata: Mapping[str, Any], *,
                  reward_required: bool = True) -> list[str]:
        """What is wrong with the numbers of the server's answer (:func:`~turngym.envs.pool_api.answer_problems`):
        a turngym server's rewards, components and info; another server's reward, observation and metadata."""
        if self.is_turngym_server:
            return answer_problems(reward, metadata, max_abs_reward=self.max_abs_reward,
                                   reward_required=reward_required)
        fields = {k: v for k, v in observation.items() if k not in ("reward", "done", "metadata")}
        return answer_problems(reward, {"observation": fields, "metadata": metadata},
                               max_abs_reward=self.max_abs_reward, reward_required=reward_required)

    @staticmethod
    def _parts(result: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """The observation's fields and the metadata of an OpenEnv result."""
        observation = result.observation if isinstance(result.observation, Mapping) else {}
        metadata = result.metadata or observation.get("metadata") or {}
        return dict(observation), dict(metadata) if isinstance(metadata, Mapping) else {}

    def _text(self, observation: Mapping[str, Any]) -> str:
        if self.render_observation is None:
            return observation_text(observation, self.observation_field)
        fields = {k: v for k, v in observation.items() if k not in ("reward", "done", "metadata")}
        text = self.render_observation(fields)
        if not isinstance(text, str):
            raise TypeError(f"render_observation must return str, got {type(text).__name__}")
        return text

    def _passed_through(self, observation: Mapping[str, Any], metadata: Mapping[str, Any]) -> dict[str, Any]:
        """Info entries from the server: a turngym world's own (walkthrough...); another server's
        observation fields and metadata."""
        if not self.is_turngym_server:
            fields = {k: v for k, v in observation.items() if k not in ("reward", "done", "metadata")}
            return {"openenv_observation": jsonable(fields), "openenv_metadata": jsonable(metadata)}
        info = _mapping(metadata.get("info"))
        extra = {k: v for k, v in info.items() if k not in INFO_KEYS}
        if info.get("invalid_action") and info.get("invalid_reason"):
            extra["invalid_reason"] = info["invalid_reason"]
        return extra


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _commands(value: Any) -> list[str] | None:
    return [str(c) for c in value] if isinstance(value, list) else None


def _numbers(value: Any) -> dict[str, float]:
    items = value.items() if isinstance(value, Mapping) else ()
    return {str(k): float(v) for k, v in items if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _renderer(render: Callable[[dict[str, Any]], str] | str | None) -> Callable[[dict[str, Any]], str] | None:
    if render is None or callable(render):
        return render
    from turngym.envs.registry import _load

    found = _load(str(render), "render_observation")
    if not callable(found):
        raise TypeError(f"render_observation {render!r} is not a function")
    return found
