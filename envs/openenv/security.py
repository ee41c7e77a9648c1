"""What ``turngym serve`` assumes of its clients (hostile) and how it holds: tokens, idle sessions,
tasks and replies. docs/scaling.md ("Security") says what is defended and what is not.

* a token: ``--token`` or ``$TURNGYM_SERVE_TOKEN``, sent as ``Authorization: Bearer TOKEN`` on every
  HTTP request and WebSocket handshake (``/health`` excepted), compared in constant time; a server
  listening beyond loopback refuses to start without one (:func:`check_serving_token`);
* :class:`Guard`, the ASGI middleware in front of OpenEnv's app: the token, an idle timeout on every
  WebSocket session, no MCP endpoints and no attaching to another session;
* replies (:func:`public_task`, :func:`public_info`, :func:`hide_paths`): no walkthrough, gold patch,
  hidden tests, or paths in task payloads and world options, unless the server opts in
  (``--reveal-solutions``);
* client tasks (:func:`client_task`): only with ``--allow-client-tasks``, and even then never host
  paths, images or commands; TextWorld configs by name and seeds bounded, generated within a timeout.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qs

from turngym.envs.tasks import Task

logger = logging.getLogger(__name__)

TOKEN_ENV = "TURNGYM_SERVE_TOKEN"
MIN_TOKEN_CHARS = 16
DEFAULT_IDLE_TIMEOUT = 1800.0  # a client may think (generate) for half an hour between two messages
DEFAULT_GENERATION_TIMEOUT = 300.0
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
HIDDEN_PATH = "<server path>"


# ---------------------------------------------------------------------- tokens
def resolve_token(token: str | None = None) -> str | None:
    """``token``, else ``$TURNGYM_SERVE_TOKEN``, else None (an empty value counts as none)."""
    return token or os.environ.get(TOKEN_ENV) or None


def auth_headers(token: str | None = None) -> dict[str, str]:
    """The header a client sends: ``Authorization: Bearer TOKEN`` (``token`` or the environment's), or none."""
    token = resolve_token(token)
    return {"Authorization": f"Bearer {token}"} if token else {}


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is a loopback one (127.0.0.0/8, ::1, localhost)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except socket.gaierror:
        return False
    return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)


def check_serving_token(host: str, token: str | None) -> None:
    """ValueError unless the server may listen on ``host`` with ``token``: beyond loopback it needs one."""
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ValueError(f"the token is {len(token)} characters long; use at least {MIN_TOKEN_CHARS}, e.g. "
                         f"`export {TOKEN_ENV}=$(python -c 'import secrets; print(secrets.token_urlsafe(32))')`")
    if token is None and not is_loopback(host):
        raise ValueError(f"--host {host} is reachable from other machines: give the server a token (set "
                         f"{TOKEN_ENV}, or --token) and the same to its clients, or listen on 127.0.0.1")


def bearer_matches(header: bytes | str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``Bearer token`` (compared in constant time)."""
    if header is None:
        return False
    value = header.encode("latin-1", "replace") if isinstance(header, str) else header
    scheme, _, given = value.strip().partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), token.encode())


# ---------------------------------------------------------------------- replies
def looks_like_path(text: str) -> bool:
    """An absolute or home path, a Windows drive, a URL, or anything with a ``..`` component."""
    return (text.startswith(("/", "~", "\\")) or re.match(r"^[A-Za-z]:[\\/]", text) is not None
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
def client_task(value: Mapping[str, Any], *, worlds: Iterable[str], generation_timeout: float) -> Task:
    """A task a client sent (servers started with ``--allow-client-tasks``), checked: ValueError if it names
    a host path, an image, a command, a world the server does not play, or a TextWorld game out of bounds.
    A TextWorld game is generated here, within ``generation_timeout`` seconds."""
    if len(json.dumps(value, default=str)) > MAX_CLIENT_TASK_BYTES:
        raise ValueError(f"a task may have at most {MAX_CLIENT_TASK_BYTES} bytes of JSON")
    try:
        task = Task.from_dict(value)
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"not a task ({type(error).__name__}: {error}): send a task id, or a dict with world, "
                         "id, split and payload") from None
    worlds = sorted(set(worlds))
    if worlds and task.world not in worlds:
        raise ValueError(f"task {task.id!r} belongs to world {task.world!r}; this server plays {worlds}")
    problems = host_references(task.payload)
    if problems:
        raise ValueError(f"task {task.id!r} is refused: a client's task may not name host paths, images or "
                         f"commands ({'; '.join(problems[:5])})")
    if task.world == "textworld":
        config, seed = textworld_game(task.payload)
        generate_textworld(config, seed, generation_timeout)
    return task


def host_references(value: Any, where: str = "payload", depth: int = 0) -> list[str]:
    """Why ``value`` (a client's JSON data) reaches into the host: keys like ``repo_path`` or ``image``,
    strings that are paths. Empty when it does not."""
    if depth > 8:
        return [f"{where} is nested too deeply"]
    if isinstance(value, str):
        return [f"{where} is a path ({value[:60]!r})"] if looks_like_path(value) or "\x00" in value else []
    problems: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str) or _HOST_KEY.search(key) or key in SECRET_PAYLOAD_KEYS:
                problems.append(f"{where} has the key {key!r}")
            problems += host_references(item, f"{where}.{key}", depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            problems += host_references(item, f"{where}[{i}]", depth + 1)
    return problems


def textworld_game(payload: Mapping[str, Any]) -> tuple[str, int]:
    """A TextWorld task payload's (config, seed), checked: a config name (never a path), a seed in range."""
    from turngym.envs.textworld.generation import GameConfig

    if set(payload) != {"config", "seed"}:
        raise ValueError(f"a TextWorld task's payload is {{'config': NAME, 'seed': N}}, got the keys {sorted(payload)}")
    config, seed = payload["config"], payload["seed"]
    if not isinstance(config, str) or not _TEXTWORLD_CONFIG.fullmatch(config):
        raise ValueError(f"TextWorld config {config!r} is not a config name (e.g. w2-o3-q4)")
    GameConfig.parse(config)  # a name textworld knows, with its own error message
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"a TextWorld seed is an integer between 0 and {MAX_SEED}, got {seed!r}")
    return config, seed


def generate_textworld(config: str, seed: int, timeout: float) -> None:
    """Generate (and cache) the TextWorld game (config, seed) in a child process, killed after ``timeout`` s.

    The same child as ``generation.generate_game`` runs, which then finds the game cached.
    """
    from turngym.envs.textworld.generation import game_directory

    if (game_directory(config, seed) / "meta.json").exists():
        return
    command = [sys.executable, "-m", "turngym.envs.textworld.generation", config, str(seed), ""]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"generating TextWorld {config} seed {seed} took more than {timeout:g} s "
                           "(the server's --generation-timeout)") from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise ValueError(f"generating TextWorld {config} seed {seed} failed: "
                         f"{lines[-1] if lines else f'exit code {done.returncode}'}")


# ---------------------------------------------------------------------- the ASGI guard
class Guard:
    """ASGI middleware in front of the OpenEnv app (see the module docstring).

    Args:
        app: the OpenEnv FastAPI app.
        token: the bearer token every request and handshake needs (None: none needed).
        idle_timeout: seconds a WebSocket session may wait for its client's next message before it is
            closed (code 1001) and its slot freed.
        open_paths: paths served without the token (a liveness probe).
        closed_prefixes: paths that are not served at all (404).
    """

    def __init__(self, app: Any, *, token: str | None, idle_timeout: float,
                 open_paths: Iterable[str] = ("/health",), closed_prefixes: Iterable[str] = ("/mcp",)) -> None:
        if idle_timeout <= 0:
            raise ValueError(f"--idle-timeout must be positive, got {idle_timeout}")
        self.app = app
        self.token = token
        self.idle_timeout = float(idle_timeout)
        self.open_paths = frozenset(open_paths)
        self.closed_prefixes = tuple(closed_prefixes)

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
        if kind == "websocket":
            if "session_id" in parse_qs(scope.get("query_string", b"").decode("latin-1")):
                await _deny(scope, receive, send, 403, "attaching to an existing session is not served; "
                            "every connection is a session of its own")
                return
            await self._session(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: dict[str, Any]) -> bool:
        header = next((value for name, value in scope.get("headers", []) if name.lower() == b"authorization"), None)
        return bearer_matches(header, self.token)

    async def _session(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """The app's WebSocket session, closed when its client stays silent for ``idle_timeout`` seconds."""
        idle = False

        async def bounded_receive() -> dict[str, Any]:
            nonlocal idle
            try:
                return await asyncio.wait_for(receive(), self.idle_timeout)
            except TimeoutError:
                idle = True
                client = scope.get("client")
                logger.info("closing the session of %s: no message for %g s", client, self.idle_timeout)
                return {"type": "websocket.disconnect", "code": 1001, "reason": "idle"}

        async def send_with_reason(message: dict[str, Any]) -> None:
            if idle and message.get("type") == "websocket.close":
                message = {**message, "code": 1001, "reason": f"idle for more than {self.idle_timeout:g} s"}
            await send(message)

        await self.app(scope, bounded_receive, send_with_reason)


async def _deny(scope: dict[str, Any], receive: Any, send: Any, status: int, detail: str,
                headers: Mapping[str, str] | None = None) -> None:
    """An HTTP error response; for a WebSocket handshake, the same response instead of the upgrade."""
    from starlette.responses import JSONResponse

    if scope["type"] == "websocket" and "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008, "reason": detail[:120]})  # HTTP 403 to the client
        return
    await JSONResponse({"detail": detail}, status_code=status, headers=dict(headers or {}))(scope, receive, send)
