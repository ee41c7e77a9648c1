"""What ``turngym serve`` assumes of its clients (hostile) and how it holds: tokens, idle sessions,
tasks and replies. docs/scaling.md ("Security") says what is defended and what is not.

* a token: ``--token`` or ``$TURNGYM_SERVE_TOKEN``, sent as ``Authorization: Bearer TOKEN`` on every
  HTTP request and WebSocket handshake (``/health`` excepted), compared in constant time; a server
  listening beyond loopback refuses to start without one (:func:`check_serving_token`);
* :class:`Guard`, the ASGI middleware in front of OpenEnv's app: the token, an idle timeout on every
  WebSocket session, only the session's own messages (reset, step, state, close: no MCP), no MCP
  endpoints, no attaching to another session, and a bound on requests and sessions served at once;
* :func:`header_deadline_protocol`: connections that send no whole request in time are closed (slowloris);
* replies (:func:`public_task`, :func:`public_info`, :func:`hide_paths`): no walkthrough, gold patch,
  hidden tests, or paths in task payloads and world options, unless the server opts in
  (``--reveal-solutions``);
* client tasks (:func:`client_task`): only with ``--allow-client-tasks``, and even then never host
  paths, images or commands (every field screened, after normalisation); TextWorld configs by name and
  of bounded size, seeds bounded, generated within a timeout (the generator's process group killed).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unicodedata
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

from turngym.envs.serving import (  # noqa: F401 - the token rules live there, shared with the proxy
    MIN_TOKEN_CHARS,
    TOKEN_ENV,
    auth_headers,
    bearer_matches,
    check_serving_token,
    header_deadline_protocol,
    http_settings,
    is_loopback,
    resolve_token,
)
from turngym.envs.tasks import Task

logger = logging.getLogger(__name__)

DEFAULT_IDLE_TIMEOUT = 1800.0  # a client may think (generate) for half an hour between two messages
DEFAULT_GENERATION_TIMEOUT = 300.0
DEFAULT_HEADER_TIMEOUT = 10.0  # a client sends a request's headers at once; a slow or silent one is dropped
MAX_CLIENT_TASK_BYTES = 64 * 1024
MAX_SEED = 2**31 - 1

# Info entries that give an episode away (the oracle's actions, the grading's hidden tests).
SOLUTION_INFO_KEYS = frozenset({"walkthrough", "expert_plan", "tests", "gold_patch", "solution"})
# Task payload entries that are the answer (gold patch, hidden tests) or the host's (paths, images, commands).
SECRET_PAYLOAD_KEYS = frozenset({
    "patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS", "hints_text", "gold_patch", "solution", "walkthrough",
    "repo_path", "image", "image_name", "test_cmd", "setup_patch",
})
# Keys a client's task may never carry: whatever names a file, an image or something to run on the host.
_HOST_KEY = re.compile(r"path|dir|file|image|cmd|command|script|exec|url|root|patch|mount|volume", re.IGNORECASE)
_TEXTWORLD_CONFIG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
# wX-oY-qZ (no leading zeros): a client's TextWorld config, within the bounds below.
_CLIENT_CUSTOM_CONFIG = re.compile(r"w([1-9][0-9]*)-o(0|[1-9][0-9]*)-q([1-9][0-9]*)")
# The largest wX-oY-qZ a client may ask the server to generate (the reference configs are w2..w8, o3..o12,
# q4..q8): generation time and memory grow fast beyond them.
CLIENT_TEXTWORLD_BOUNDS = {"world_size": 16, "nb_objects": 24, "quest_length": 12}
# The other TextWorld configs a client may name (besides the served panels' own): fixed-size games.
_CLIENT_OTHER_CONFIG = re.compile(r"simple-(dense|balanced|sparse)(-(detailed|brief|none))?"
                                  r"|(coin|treasure)-([1-9]|[1-2][0-9]|30)")
# A client task's names: ASCII words separated by '/', no '.' or '..' component, no leading '/'.
_TASK_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_+=,.:-]*(?:/[A-Za-z0-9_][A-Za-z0-9_+=,.:-]*)*")
_SPLIT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,31}")
_CONTENT_HASH = re.compile(r"[0-9a-f]{8,128}")
_PAYLOAD_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_TASK_FIELDS = frozenset({"world", "id", "split", "difficulty", "payload", "content_hash"})
HIDDEN_PATH = "<server path>"


# ---------------------------------------------------------------------- replies
def normalised(text: str) -> str:
    """``text`` as a file system or a URL parser might read it: percent-decoded (twice over at most),
    NFKC-normalised (full-width ``／`` is ``/``, ``․․`` is ``..``), surrounding whitespace stripped."""
    for _ in range(3):
        decoded = unquote(text)
        if decoded == text:
            break
        text = decoded
    return unicodedata.normalize("NFKC", text).strip()


def looks_like_path(text: str) -> bool:
    """An absolute, home or explicitly relative (``./x``) path, a Windows drive, a URL, or anything with a
    ``..`` component, once :func:`normalised` (`` /etc``, ``%2e%2e/x`` and ``／etc`` are paths too)."""
    text = normalised(text)
    return (text.startswith(("/", "~", "\\", "./", ".\\")) or re.match(r"^[A-Za-z]:[\\/]", text) is not None
            or "://" in text or re.search(r"(^|[\\/])\.\.([\\/]|$)", text) is not None)


def hide_paths(value: Any) -> Any:
    """``value`` (JSON data) with every string that looks like a path replaced by ``<server path>``."""
    if isinstance(value, str):
        return HIDDEN_PATH if looks_like_path(value) else value
    if isinstance(value, Mapping):
        return {key: hide_paths(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [hide_paths(item) for item in value]
    return value


def public_payload(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A task payload as clients see it: no answers, no host paths, images or commands."""
    return hide_paths({key: value for key, value in payload.items() if key not in SECRET_PAYLOAD_KEYS})


def public_task(task: Task) -> Task:
    """``task`` as the task API lists it (see :func:`public_payload`); unchanged when nothing is secret."""
    payload = public_payload(task.payload)
    if payload == task.payload:
        return task
    return Task(task.world, task.id, task.split, task.difficulty, payload, task.content_hash)


def public_info(info: Mapping[str, Any]) -> dict[str, Any]:
    """An info dict as clients see it: no solution entries (:data:`SOLUTION_INFO_KEYS`). The other entries
    are the world's own, as it reports them (the agent's command, its observation...), left unchanged."""
    return {key: value for key, value in info.items() if key not in SOLUTION_INFO_KEYS}


# ---------------------------------------------------------------------- client tasks
def client_task(value: Mapping[str, Any], *, worlds: Iterable[str], generation_timeout: float,
                served_configs: Iterable[str] = ()) -> Task:
    """A task a client sent (servers started with ``--allow-client-tasks``), checked: ValueError if it names
    a host path, an image, a command, a world the server does not play, or a TextWorld game out of bounds.

    Every field is screened: ``id`` (and ``difficulty``) are ASCII names like ``mine/1`` (no ``.``/``..``
    component, no leading ``/``), ``split`` a word, ``content_hash`` hex, no other fields; the payload's
    keys are ASCII identifiers (no look-alike letters) and none names a path, an image or a command; no
    string in it is a path (:func:`looks_like_path`, after :func:`normalised`). A TextWorld game is
    generated here, within ``generation_timeout`` seconds (``served_configs``: configs the server plays anyway).
    """
    try:
        size = len(json.dumps(value, default=str))
    except (ValueError, RecursionError):
        raise ValueError("a task must be plain JSON data, nested at most 8 deep") from None
    if size > MAX_CLIENT_TASK_BYTES:
        raise ValueError(f"a task may have at most {MAX_CLIENT_TASK_BYTES} bytes of JSON")
    extra = sorted(str(key)[:40] for key in value if key not in _TASK_FIELDS)
    if extra:
        raise ValueError(f"a task has the fields {sorted(_TASK_FIELDS)}, not {extra[:5]}")
    try:
        task = Task.from_dict(value)
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"not a task ({type(error).__name__}: {error}): send a task id, or a dict with world, "
                         "id, split and payload") from None
    problems = _task_field_problems(task)
    if problems:
        raise ValueError(f"task {str(task.id)[:60]!r} is refused: {'; '.join(problems)}")
    worlds = sorted(set(worlds))
    if worlds and task.world not in worlds:
        raise ValueError(f"task {task.id!r} belongs to world {task.world!r}; this server plays {worlds}")
    problems = host_references(task.payload)
    if problems:
        raise ValueError(f"task {task.id!r} is refused: a client's task may not name host paths, images or "
                         f"commands ({'; '.join(problems[:5])})")
    if task.world == "textworld":
        config, seed = textworld_game(task.payload, served_configs=served_configs)
        generate_textworld(config, seed, generation_timeout)
    return task


def _task_field_problems(task: Task) -> list[str]:
    """What is wrong with a client task's names (see :func:`client_task`)."""
    problems = []
    for name, value, pattern, limit, required in (
            ("world", task.world, _SPLIT, 32, True), ("id", task.id, _TASK_ID, 200, True),
            ("split", task.split, _SPLIT, 32, True), ("difficulty", task.difficulty, _TASK_ID, 64, False),
            ("content_hash", task.content_hash, _CONTENT_HASH, 128, False)):
        if value in (None, "") and not required:
            continue
        if not isinstance(value, str) or len(value) > limit or not pattern.fullmatch(value):
            problems.append(f"its {name} {str(value)[:60]!r} is not a plain name (ASCII letters, digits and "
                            f"'_-.:', {'words separated by /, ' if pattern is _TASK_ID else ''}at most {limit})")
    if not isinstance(task.payload, Mapping):
        problems.append("its payload is not a JSON object")
    return problems


def host_references(value: Any, where: str = "payload", depth: int = 0) -> list[str]:
    """Why ``value`` (a client's JSON data) reaches into the host: keys like ``repo_path`` or ``image`` (or keys
    that are not plain ASCII identifiers, which could pass for them), strings that are paths. Empty when it
    does not."""
    if depth > 8:
        return [f"{where} is nested too deeply"]
    if isinstance(value, str):
        bad = looks_like_path(value) or any(unicodedata.category(c) == "Cc" and c not in "\t\n" for c in value)
        return [f"{where} is a path ({value[:60]!r})"] if bad else []
    problems: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if (not isinstance(key, str) or not _PAYLOAD_KEY.fullmatch(key) or _HOST_KEY.search(key)
                    or key in SECRET_PAYLOAD_KEYS):
                problems.append(f"{where} has the key {key!r}")
            problems += host_references(item, f"{where}.{key}", depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            problems += host_references(item, f"{where}[{i}]", depth + 1)
    return problems


def textworld_game(payload: Mapping[str, Any], *, served_configs: Iterable[str] = ()) -> tuple[str, int]:
    """A TextWorld task payload's (config, seed), checked: a config name (never a path) the server plays, or
    one of bounded size (:data:`CLIENT_TEXTWORLD_BOUNDS`; no leading zeros, so one game has one name), and
    a seed in range."""
    from turngym.envs.textworld.generation import GameConfig

    if set(payload) != {"config", "seed"}:
        raise ValueError(f"a TextWorld task's payload is {{'config': NAME, 'seed': N}}, got the keys {sorted(payload)}")
    config, seed = payload["config"], payload["seed"]
    if not isinstance(config, str) or not _TEXTWORLD_CONFIG.fullmatch(config):
        raise ValueError(f"TextWorld config {config!r} is not a config name (e.g. w2-o3-q4)")
    GameConfig.parse(config)  # a name textworld knows, with its own error message
    if config not in set(served_configs):
        custom = _CLIENT_CUSTOM_CONFIG.fullmatch(config)
        if custom:
            sizes = dict(zip(CLIENT_TEXTWORLD_BOUNDS, (int(g) for g in custom.groups()), strict=True))
            over = [f"{key} {sizes[key]} > {bound}" for key, bound in CLIENT_TEXTWORLD_BOUNDS.items()
                    if sizes[key] > bound]
            if over:
                raise ValueError(f"TextWorld config {config!r} is too large for a client's task ({', '.join(over)}; "
                                 f"at most w{CLIENT_TEXTWORLD_BOUNDS['world_size']}-"
                                 f"o{CLIENT_TEXTWORLD_BOUNDS['nb_objects']}-q{CLIENT_TEXTWORLD_BOUNDS['quest_length']})")
        elif not _CLIENT_OTHER_CONFIG.fullmatch(config):
            raise ValueError(f"TextWorld config {config!r} is not one a client's task may name: wX-oY-qZ without "
                             "leading zeros (at most w16-o24-q12), simple-*, coin-L or treasure-L (L <= 30), or "
                             "a config the server serves")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"a TextWorld seed is an integer between 0 and {MAX_SEED}, got {seed!r}")
    return config, seed


def generate_textworld(config: str, seed: int, timeout: float) -> None:
    """Generate (and cache) the TextWorld game (config, seed) in a child process, killed after ``timeout`` s.

    The same child as ``generation.generate_game`` runs, which then finds the game cached. It runs in a
    process group of its own: at the deadline the whole group (the generator's compilers included) gets
    SIGTERM (the child then removes its scratch folder), then SIGKILL; a scratch folder left behind even
    then is removed here.
    """
    from turngym.envs.textworld.generation import game_directory

    directory = game_directory(config, seed)
    if (directory / "meta.json").exists():
        return
    command = _generator_command(config, seed)
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    scratch_before = _scratch_folders(directory, seed)
    with tempfile.TemporaryFile() as errors:
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors, env=environment,
                                 start_new_session=True)
        try:
            returncode = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(child)
            for leftover in _scratch_folders(directory, seed) - scratch_before:
                shutil.rmtree(leftover, ignore_errors=True)
            raise TimeoutError(f"generating TextWorld {config} seed {seed} took more than {timeout:g} s "
                               "(the server's --generation-timeout)") from None
        finally:
            if child.poll() is None:  # interrupted while waiting: never leave the generator behind
                _kill_group(child)
        errors.seek(0)
        lines = errors.read()[-4096:].decode(errors="replace").strip().splitlines()
    if returncode != 0:
        raise ValueError(f"generating TextWorld {config} seed {seed} failed: "
                         f"{lines[-1] if lines else f'exit code {returncode}'}")


def _generator_command(config: str, seed: int) -> list[str]:
    """The child that generates a game (``generation.generate_game``'s)."""
    return [sys.executable, "-m", "turngym.envs.textworld.generation", config, str(seed), ""]


def _scratch_folders(directory: Path, seed: int) -> set[Path]:
    """The generator's scratch folders for ``seed`` next to ``directory`` (``generation._generate_here``'s)."""
    return set(directory.parent.glob(f".{seed}-*")) if directory.parent.is_dir() else set()


def _kill_group(child: subprocess.Popen) -> None:
    """SIGTERM to ``child``'s process group, SIGKILL after 2 s if it is still there; then reap the child."""
    for sig, grace in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(child.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            child.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        if sig == signal.SIGTERM:  # the child is gone; its grandchildren may not be
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        break
    if child.poll() is None:
        child.wait()


# ---------------------------------------------------------------------- the ASGI guard
# The WebSocket messages a turngym session takes: what OpenEnv's clients (EnvClient, GenericEnvClient) send.
# OpenEnv's /ws also takes "mcp" messages, whose JSON-RPC methods create sessions outside the cap and close
# any session by its id (openenv/session/create, openenv/session/close): never passed on.
SESSION_MESSAGES = frozenset({"reset", "step", "state", "close"})


class Guard:
    """ASGI middleware in front of the OpenEnv app (see the module docstring).

    Args:
        app: the OpenEnv FastAPI app.
        token: the bearer token every request and handshake needs (None: none needed).
        idle_timeout: seconds a WebSocket session may wait for its client's next message before it is
            closed (code 1001) and its slot freed.
        open_paths: paths served without the token (a liveness probe).
        closed_prefixes: paths that are not served at all (404).
        max_active: requests and WebSocket sessions served at once, counted once their headers are in and
            their token checked (more get 503). None: no limit.

    A WebSocket message whose ``type`` is not one of :data:`SESSION_MESSAGES` (or that is not a JSON
    object, or is binary) is answered with an error here and never reaches the app.
    """

    def __init__(self, app: Any, *, token: str | None, idle_timeout: float,
                 open_paths: Iterable[str] = ("/health",), closed_prefixes: Iterable[str] = ("/mcp",),
                 max_active: int | None = None) -> None:
        if idle_timeout <= 0:
            raise ValueError(f"--idle-timeout must be positive, got {idle_timeout}")
        self.app = app
        self.token = token
        self.idle_timeout = float(idle_timeout)
        self.open_paths = frozenset(open_paths)
        self.closed_prefixes = tuple(closed_prefixes)
        self.max_active = max_active
        self.active = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):  # lifespan
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if self.token is not None and path not in self.open_paths and not self._authorized(scope):
            await _deny(scope, receive, send, 401, "this server needs a token: send 'Authorization: Bearer TOKEN' "
                        f"(turngym's clients send ${TOKEN_ENV})", {"WWW-Authenticate": "Bearer"})
            return
        if path.startswith(self.closed_prefixes):
            await _deny(scope, receive, send, 404, f"{path} is not served here")
            return
        if kind == "websocket" and "session_id" in parse_qs(scope.get("query_string", b"").decode("latin-1")):
            await _deny(scope, receive, send, 403, "attaching to an existing session is not served; "
                        "every connection is a session of its own")
            return
        if self.max_active is not None and self.active >= self.max_active:
            await _deny(scope, receive, send, 503, f"the server is busy ({self.active} requests and sessions); "
                        "try again later")
            return
        self.active += 1
        try:
            if kind == "websocket":
                await self._session(scope, receive, send)
            else:
                await self.app(scope, receive, send)
        finally:
            self.active -= 1

    def _authorized(self, scope: dict[str, Any]) -> bool:
        header = next((value for name, value in scope.get("headers", []) if name.lower() == b"authorization"), None)
        return bearer_matches(header, self.token)

    async def _session(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """The app's WebSocket session: only :data:`SESSION_MESSAGES` reach it, and it is closed when its
        client stays silent for ``idle_timeout`` seconds."""
        idle = False

        async def bounded_receive() -> dict[str, Any]:
            nonlocal idle
            while True:
                try:
                    message = await asyncio.wait_for(receive(), self.idle_timeout)
                except TimeoutError:
                    idle = True
                    client = scope.get("client")
                    logger.info("closing the session of %s: no message for %g s", client, self.idle_timeout)
                    return {"type": "websocket.disconnect", "code": 1001, "reason": "idle"}
                refusal = refused_message(message)
                if refusal is None:
                    return message
                # The app waits in receive(): nothing else sends on this socket now.
                await send({"type": "websocket.send", "text": json.dumps({"type": "error", "data": refusal})})

        async def send_with_reason(message: dict[str, Any]) -> None:
            if idle and message.get("type") == "websocket.close":
                message = {**message, "code": 1001, "reason": f"idle for more than {self.idle_timeout:g} s"}
            await send(message)

        await self.app(scope, bounded_receive, send_with_reason)


def refused_message(message: Mapping[str, Any]) -> dict[str, str] | None:
    """Why a WebSocket message may not reach the app (an OpenEnv error's data), or None when it may.

    Only text frames holding a JSON object whose ``type`` is one of :data:`SESSION_MESSAGES` pass.
    """
    if message.get("type") != "websocket.receive":
        return None  # connect, disconnect
    text = message.get("text")
    if text is None:
        return {"message": "binary frames are not served: send JSON text", "code": "INVALID_JSON"}
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as error:  # not JSON, nested too deeply, an integer of 4300+ digits
        return {"message": f"Invalid JSON: {str(error)[:200]}", "code": "INVALID_JSON"}
    kind = data.get("type") if isinstance(data, dict) else None
    if kind not in SESSION_MESSAGES:
        shown = kind[:40] if isinstance(kind, str) else type(data).__name__
        return {"message": f"Unknown message type: {shown} (this server takes {sorted(SESSION_MESSAGES)})",
                "code": "UNKNOWN_TYPE"}
    return None


async def _deny(scope: dict[str, Any], receive: Any, send: Any, status: int, detail: str,
                headers: Mapping[str, str] | None = None) -> None:
    """An HTTP error response; for a WebSocket handshake, the same response instead of the upgrade."""
    from starlette.responses import JSONResponse

    if scope["type"] == "websocket" and "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008, "reason": detail[:120]})  # HTTP 403 to the client
        return
    await JSONResponse({"detail": detail}, status_code=status, headers=dict(headers or {}))(scope, receive, send)
