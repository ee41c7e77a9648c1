"""Clients of ``turngym serve``: OpenEnv's ``EnvClient`` for a turngym world, and its task panels.

* :class:`TurnGymClient`: an ``openenv.core.EnvClient`` (async; ``.sync()`` for blocking use) whose
  actions are commands and whose results carry the world's info (see :mod:`~turngym.envs.openenv.protocol`);
* :class:`RemoteSession`: one session as a pool drives it, answering ``(obs, info)`` and
  :class:`~turngym.envs.pool_api.StepResult` exactly as a local world would;
* :func:`served_panel`: a split's task panel, read from the server's task API, fingerprint checked.

Every client sends the server's token (``token=``, else ``$TURNGYM_SERVE_TOKEN``) as
``Authorization: Bearer TOKEN``, and trusts the server no more than the server trusts it: every
call has a deadline that a server dripping bytes cannot stretch, messages and observations are
bounded in size, and rewards must be finite numbers.

    with TurnGymClient(base_url="ws://127.0.0.1:8000").sync() as client:
        result = client.reset(task="signals/eval/10000")
        result = client.step("stop")
        print(result.observation.text, result.reward, result.metadata["won"])
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import http.client
import json
import logging
import socket
import threading
import time
from collections.abc import Coroutine, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from openenv.core.client_types import StepResult as OpenEnvStepResult
from openenv.core.env_client import EnvClient
from websockets.protocol import State as WebSocketState

from turngym.envs.openenv.protocol import TurnAction, TurnGymState, TurnObservation, jsonable
from turngym.envs.openenv.security import TOKEN_ENV, auth_headers
from turngym.envs.pool_api import (
    MAX_ABS_REWARD,
    MAX_REMOTE_OBSERVATION_CHARS,
    StepResult,
    answer_problems,
    is_number,
    refused_answer,
    untrusted_step,
    untrusted_text,
)
from turngym.envs.tasks import Task, TaskSet

logger = logging.getLogger(__name__)

DEFAULT_CONNECT_TIMEOUT = 10.0
# The largest WebSocket message taken from a server (a bigger one closes the session: env_disconnected).
MAX_MESSAGE_MB = 16.0
# The largest HTTP answer taken from a server (a task panel).
MAX_HTTP_BYTES = 64 * 1024 * 1024


class TurnGymClient(EnvClient[TurnAction, TurnObservation, TurnGymState]):
    """OpenEnv client of a served turngym world; ``step`` takes a :class:`TurnAction` or a plain str.

    ``token`` (else ``$TURNGYM_SERVE_TOKEN``) goes to the server as ``Authorization: Bearer TOKEN``;
    every other argument is OpenEnv's ``EnvClient``'s.
    """

    def __init__(self, base_url: str | None = None, *, token: str | None = None, **kwargs: Any) -> None:
        headers = {**auth_headers(token), **dict(kwargs.pop("headers", None) or {})}
        super().__init__(base_url, headers=headers or None, **kwargs)

    def _step_payload(self, action: TurnAction | str) -> dict[str, Any]:
        return {"command": action if isinstance(action, str) else action.command}

    def _parse_result(self, payload: dict[str, Any]) -> OpenEnvStepResult[TurnObservation]:
        fields = payload.get("observation", {})
        metadata = payload.get("metadata") or fields.get("metadata") or {}
        observation = TurnObservation(text=fields.get("text", ""), reward=payload.get("reward"),
                                      done=payload.get("done", False), metadata=metadata)
        return OpenEnvStepResult(observation=observation, reward=payload.get("reward"),
                                 done=payload.get("done", False), metadata=metadata)

    def _parse_state(self, payload: dict[str, Any]) -> TurnGymState:
        """The session's state; a ``max_step_seconds`` that is not a positive number is dropped, a larger
        one than 1e9 s (a 400-digit JSON integer, say) taken as 1e9 (clients cap it further). ValueError
        (one line) for a state that is not turngym's."""
        payload = dict(payload) if isinstance(payload, Mapping) else {}
        declared = payload.get("max_step_seconds")
        payload["max_step_seconds"] = float(min(declared, 1e9)) if is_number(declared) and declared > 0 else None
        try:
            return TurnGymState(**payload)
        except ValueError as error:  # pydantic's ValidationError
            raise ValueError(f"the server's session state is not a turngym state "
                             f"({str(error).splitlines()[1:3]})") from None


class OneSession:
    """Mixin for an OpenEnv client bound to one session: it never reconnects behind the caller's back.

    OpenEnv's client reopens a dropped WebSocket on the next call, which on the server is a *new*
    session with a fresh world; a pool or an episode must see the lost session instead
    (``env_disconnected``). (``_connect_async``, ``_ws`` and ``_ws_url`` are openenv 0.10's, pinned by
    the ``serve`` extra.) Put it before the client class: ``class C(OneSession, EnvClient)``.
    """

    _opened = False

    async def _connect_async(self):
        if self._opened and (self._ws is None or self._ws.state in (WebSocketState.CLOSING, WebSocketState.CLOSED)):
            raise ConnectionError(f"the connection to {self._ws_url} was lost, and its session with it")
        client = await super()._connect_async()
        self._opened = True
        return client


class _SessionClient(OneSession, TurnGymClient):
    """turngym's typed client, bound to one session (:class:`OneSession`)."""


def websocket_url(server: str) -> str:
    """``ws://host:port`` from ``host:port``, ``http(s)://...`` or ``ws(s)://...`` (no path)."""
    text = server.strip().rstrip("/")
    if "://" not in text:
        text = f"ws://{text}"
    parts = urlsplit(text)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    if scheme not in ("ws", "wss") or not parts.hostname or parts.path not in ("", "/ws"):
        raise ValueError(f"expected a server address like ws://host:8000 or host:8000, got {server!r}")
    return urlunsplit((scheme, parts.netloc, "", "", ""))


def http_url(server: str) -> str:
    """The HTTP address of the same server (for its task API)."""
    url = websocket_url(server)
    return "http" + url[2:]


class EventLoopThread:
    """An asyncio loop in a daemon thread. Sessions' sockets live there, so their keepalive pings
    are answered while the caller's thread is busy (a model generating for minutes)."""

    def __init__(self, name: str = "turngym-openenv") -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, coroutine: Coroutine[Any, Any, Any], timeout: float) -> Any:
        """Run ``coroutine`` on the loop and wait for it; TimeoutError after ``timeout`` seconds."""
        future = self.submit(coroutine)
        try:
            return future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout:.0f} s") from None

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()


async def buffered_message(client: Any) -> str:
    """A message an OpenEnv server sent ``client`` before it closed the socket ("" if none).

    A full server sends its CAPACITY_REACHED refusal and closes at once; when the client sees the close
    first, the refusal still waits in the socket's buffer.
    """
    connection = getattr(client, "_ws", None)
    if connection is None:
        return ""
    try:
        return str(await asyncio.wait_for(connection.recv(), 0.5))
    except Exception:  # noqa: BLE001 - nothing buffered, or the socket is gone: no refusal to report
        return ""


def refused_token(error: BaseException) -> bool:
    """Whether a failed WebSocket handshake was the server refusing the token (HTTP 401 or 403)."""
    text = str(error)
    return "HTTP 401" in text or "HTTP 403" in text


def token_refusal(url: str) -> str:
    return (f"{url} refused this client's token: set {TOKEN_ENV} (or pass token=...) to the token the server "
            "was started with")


class RemoteSession:
    """One world on a ``turngym serve`` server (one WebSocket session), used from an event loop.

    Args:
        server: the server's address (``ws://host:port``).
        connect_timeout: seconds to open the connection and get the session's state.
        message_timeout: the longest wait for any answer (a pool's own deadlines are shorter).
        ping_interval, ping_timeout: WebSocket keepalive; a server that stops answering pings for
            ``ping_timeout`` seconds is taken as gone.
        token: the server's token (None: ``$TURNGYM_SERVE_TOKEN``, if set).
        max_observation_chars: longer observations are cut in the middle, with the usual marker.
        max_message_mb: a larger message from the server closes the session.
        max_abs_reward: a larger reward (in absolute value) in a step truncates the episode.
    """

    def __init__(self, server: str, *, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
                 message_timeout: float = 600.0, ping_interval: float = 20.0, ping_timeout: float = 20.0,
                 token: str | None = None, max_observation_chars: int = MAX_REMOTE_OBSERVATION_CHARS,
                 max_message_mb: float = MAX_MESSAGE_MB, max_abs_reward: float = MAX_ABS_REWARD) -> None:
        self.url = websocket_url(server)
        self.connect_timeout = connect_timeout
        self.max_observation_chars = int(max_observation_chars)
        self.max_abs_reward = float(max_abs_reward)
        self.state: TurnGymState | None = None  # the session's state when it opened
        self.client = _SessionClient(base_url=self.url, token=token, connect_timeout_s=connect_timeout,
                                    message_timeout_s=message_timeout, websocket_ping_interval_s=ping_interval,
                                    websocket_ping_timeout_s=ping_timeout, max_message_size_mb=max_message_mb)

    async def open(self) -> TurnGymState:
        """Connect and read the session's state; ConnectionError (with the reason) when that fails."""
        try:
            await asyncio.wait_for(self._connect(), self.connect_timeout)
            state = await asyncio.wait_for(self._state(), self.connect_timeout)
        except TimeoutError:
            await self.close()
            raise ConnectionError(f"{self.url} did not answer within {self.connect_timeout:.0f} s") from None
        except (ConnectionError, OSError) as error:
            # A full server sends its refusal and closes at once; if the close is seen first, the refusal
            # still waits in the socket's buffer.
            refusal = await buffered_message(self.client)
            await self.close()
            if refused_token(error):
                raise ConnectionError(token_refusal(self.url)) from None
            if "CAPACITY_REACHED" not in refusal:
                raise ConnectionError(f"no turngym server answers at {self.url} ({error})") from None
            raise ConnectionError(f"{self.url} has no free session ({refusal}); start it with a larger "
                                  "--max-sessions or ask for fewer environments") from None
        except ValueError as error:  # a state that is not turngym's
            await self.close()
            raise ConnectionError(f"{self.url}: {error}") from None
        except RuntimeError as error:  # the server's error frame, e.g. when it is full
            await self.close()
            if "CAPACITY_REACHED" in str(error):
                raise ConnectionError(f"{self.url} has no free session ({error}); start it with a larger "
                                      "--max-sessions or ask for fewer environments") from None
            raise ConnectionError(f"{self.url} refused the session: {error}") from None
        if not state.env_id:
            await self.close()
            raise ConnectionError(f"{self.url} is an OpenEnv server, but not a turngym one (its state names no world)")
        self.state = state
        return state

    async def _connect(self) -> None:
        await self.client.connect()

    async def _state(self) -> TurnGymState:
        return await self.client.state()

    async def reset(self, seed: int | None = None, options: Mapping[str, Any] | None = None) -> tuple[str, dict]:
        """The server's first observation and info; ValueError when its numbers are not finite (a reset cannot
        be truncated: it fails, as a reset the server refused does)."""
        result = await self.client.reset(seed=seed, options=jsonable(dict(options or {})))
        metadata = result.metadata if isinstance(result.metadata, Mapping) else {}
        info = metadata.get("info") if isinstance(metadata.get("info"), Mapping) else {}
        problems = answer_problems(None, {**metadata, "info": info}, max_abs_reward=self.max_abs_reward,
                                   reward_required=False)
        if problems:
            raise ValueError(f"{self.url}: {refused_answer(problems)}")
        return untrusted_text(result.observation.text, self.max_observation_chars), dict(info)

    async def step(self, action: str) -> StepResult:
        """The server's answer, checked (:func:`~turngym.envs.pool_api.untrusted_step`): a reward that is
        not a finite number or beyond ``max_abs_reward``, or any other number in the metadata that is not
        finite, truncates the episode (``worker_error``); a long observation is cut."""
        result = await self.client.step(TurnAction(command=action))
        metadata = result.metadata if isinstance(result.metadata, Mapping) else {}
        info = metadata.get("info") if isinstance(metadata.get("info"), Mapping) else {}
        reward = 0.0 if result.reward is None else result.reward
        answer = StepResult(result.observation.text, reward, metadata.get("terminated") is True,
                            metadata.get("truncated") is True, dict(info))
        return untrusted_step(answer, max_observation_chars=self.max_observation_chars,
                              max_abs_reward=self.max_abs_reward, metadata=metadata)

    async def close(self) -> None:
        try:
            await asyncio.wait_for(self.client.close(), 5.0)
        except (Exception, asyncio.CancelledError) as error:  # noqa: BLE001 - best effort: the socket may be gone
            logger.debug("closing the session on %s: %s", self.url, error)


class MalformedPanel(ValueError):
    """A server's task API answered something that is not a turngym task panel (the message says what)."""


def served_panel(server: str, split: str, n: int | None = None, *, timeout: float = 60.0,
                 token: str | None = None) -> TaskSet:
    """The first ``n`` tasks (all when None) of ``split`` as the server at ``server`` serves them.

    The task set keeps the server's name and version, so it has the fingerprint a local
    ``task_panel`` of the same world would have (unless the server keeps parts of its tasks to itself,
    as a SWE world's gold patches and tests); the whole panel's fingerprint is checked. ``timeout``
    bounds each of the three requests as a whole, however slowly the server sends its answer.

    Raises ConnectionError when the server cannot be reached (or refuses the token), ValueError when it
    serves no such split, and :class:`MalformedPanel` (a ValueError naming the server and what was wrong)
    for an answer that is not a task panel: not JSON, nested too deeply, fields missing or of the wrong
    type, or another number of tasks than asked for.
    """
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
        raise ValueError(f"n must be a non-negative integer or None, got {n!r}")
    base = http_url(server)
    names = _get_json(f"{base}/list_environments", timeout, token=token)
    if not isinstance(names, list) or not names or not all(isinstance(name, str) and name for name in names):
        raise MalformedPanel(f"{server} lists no environment at /list_environments (got {_glimpse(names)})")
    name = names[0]
    if "/" in name or name in (".", ".."):
        raise MalformedPanel(f"{server} names its environment {name[:60]!r}, which is not a path segment")
    answer = _get_json(f"{base}/{name}/splits", timeout, token=token)
    if not isinstance(answer, list) or not all(isinstance(d, Mapping) and isinstance(d.get("name"), str)
                                               for d in answer):
        raise MalformedPanel(f"{server}'s /{name}/splits is not a list of splits with names "
                             f"(got {_glimpse(answer)})")
    descriptors = {d["name"]: d for d in answer}
    if split not in descriptors:
        raise ValueError(f"{server} serves no split {split!r}; it serves {sorted(descriptors)[:20]}")
    descriptor = descriptors[split]
    size = descriptor.get("num_tasks")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise MalformedPanel(f"{server}'s split {split!r} has num_tasks={_glimpse(size)}, not a count")
    for key in ("taskset", "version", "fingerprint"):
        if not isinstance(descriptor.get(key), str):
            raise MalformedPanel(f"{server}'s split {split!r} has {key}={_glimpse(descriptor.get(key))}, not a string")
    stop = size if n is None else min(n, size)
    body = {"split": split, "start": 0, "stop": stop}
    answer = _get_json(f"{base}/{name}/task_range", timeout, body, token=token)
    rows = answer.get("tasks") if isinstance(answer, Mapping) else None
    if not isinstance(rows, list):
        raise MalformedPanel(f"{server}'s /{name}/task_range has no list of tasks (got {_glimpse(answer)})")
    if len(rows) != stop:
        raise MalformedPanel(f"{server} answered {len(rows)} tasks of {split!r} for the {stop} asked for")
    try:
        tasks = tuple(_served_task(row, split) for row in rows)
        panel = TaskSet(descriptor["taskset"], descriptor["version"], tasks)
        fingerprint = panel.fingerprint
    except (KeyError, TypeError, ValueError, AssertionError, RecursionError) as error:
        raise MalformedPanel(f"{server}'s tasks of {split!r} are not turngym tasks ({type(error).__name__}: "
                             f"{str(error)[:200]})") from None
    if stop == size and fingerprint != descriptor["fingerprint"]:
        raise ValueError(f"the tasks of {split!r} from {server} do not match the fingerprint it announces "
                         f"({fingerprint} != {descriptor['fingerprint'][:80]})")
    return panel


def _served_task(row: Any, split: str) -> Task:
    """One task of a served panel, its fields checked (ValueError says which is wrong)."""
    if not isinstance(row, Mapping):
        raise TypeError(f"a task is a JSON object, got {_glimpse(row)}")
    for key in ("world", "id", "split"):
        if not isinstance(row.get(key), str) or not row[key]:
            raise ValueError(f"a task's {key} is {_glimpse(row.get(key))}, not a name")
    if row["split"] != split:
        raise ValueError(f"task {row['id'][:60]!r} belongs to split {row['split'][:30]!r}, not {split!r}")
    if not isinstance(row.get("difficulty", ""), str) or not isinstance(row.get("payload", {}), Mapping):
        raise TypeError(f"task {row['id'][:60]!r} has a difficulty that is not a string or a payload that is "
                        "not an object")
    if row.get("content_hash") is not None and not isinstance(row["content_hash"], str):
        raise TypeError(f"task {row['id'][:60]!r} has a content_hash that is not a string")
    return Task.from_dict(row)


def _glimpse(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:50]}... ({type(value).__name__})"


def _get_json(url: str, timeout: float, body: Mapping[str, Any] | None = None, *, token: str | None = None) -> Any:
    """GET (or POST ``body``) ``url`` and decode its JSON answer, all within ``timeout`` seconds.

    ValueError for an HTTP error (ConnectionError for a refused token), ConnectionError when nothing
    answers in time or the answer is larger than :data:`MAX_HTTP_BYTES`.
    """
    try:
        status, data = _http_request(url, timeout, body, token)
    except TimeoutError:
        raise ConnectionError(f"{url} did not answer within {timeout:g} s") from None
    except (OSError, http.client.HTTPException) as error:
        raise ConnectionError(f"no turngym server answers at {url} ({error or type(error).__name__})") from None
    if status in (401, 403):
        raise ConnectionError(token_refusal(url))
    if status >= 400:
        raise ValueError(f"{url}: HTTP {status}: {data.decode(errors='replace')[:300]}")
    try:
        return json.loads(data)
    except RecursionError:
        raise MalformedPanel(f"{url} answered JSON nested too deeply to read") from None
    except ValueError:  # not JSON, or an integer of more than 4300 digits
        raise MalformedPanel(f"{url} answered something that is not JSON ({data[:80]!r})") from None


def _http_request(url: str, timeout: float, body: Mapping[str, Any] | None, token: str | None) -> tuple[int, bytes]:
    """(status, body) of one request. A watchdog shuts the socket at the deadline, so the whole exchange
    (connect, headers, body) ends within ``timeout`` even if the server sends a byte at a time.

    The socket is kept here as well as on the connection: for an answer that ends when the server hangs up
    (HTTP/1.0, ``Connection: close``) http.client hands the socket to the response and sets
    ``connection.sock`` to None, which left the watchdog nothing to shut while the body dripped."""
    parts = urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname, parts.port, timeout=timeout)
    deadline = time.monotonic() + timeout
    expired = threading.Event()
    held: list[socket.socket] = []  # the connection's socket once connected, whoever holds it then

    def expire() -> None:
        expired.set()
        for sock in {id(s): s for s in (connection.sock, *held) if s is not None}.values():
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    watchdog = threading.Timer(timeout, expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json", **auth_headers(token)}
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        connection.request("POST" if data is not None else "GET", path or "/", body=data, headers=headers)
        if connection.sock is not None:
            held.append(connection.sock)
        if expired.is_set():  # the deadline passed while connecting or sending: the socket may not be shut yet
            raise TimeoutError
        response = connection.getresponse()
        chunks, size = [], 0
        while chunk := response.read1(65536):
            size += len(chunk)
            if size > MAX_HTTP_BYTES:
                raise ValueError(f"{url} answered more than {MAX_HTTP_BYTES // 2**20} MiB")
            chunks.append(chunk)
        if expired.is_set() or time.monotonic() > deadline:
            raise TimeoutError
        return response.status, b"".join(chunks)
    except (OSError, http.client.HTTPException):
        if expired.is_set():
            raise TimeoutError from None
        raise
    finally:
        watchdog.cancel()
        connection.close()
