"""What turngym's HTTP servers (``turngym serve``, ``turngym proxy``) share about their clients: a bearer token
beyond loopback, compared in constant time, and connections that send no whole request in time closed.

Kept apart from :mod:`turngym.envs.openenv.security` (which needs OpenEnv) so that a server without OpenEnv (the
proxy) holds its clients to the same rules.
"""

from __future__ import annotations

import asyncio
import errno
import hmac
import ipaddress
import logging
import os
import socket
from typing import Any

logger = logging.getLogger(__name__)

TOKEN_ENV = "TURNGYM_SERVE_TOKEN"
MIN_TOKEN_CHARS = 16


def resolve_token(token: str | None = None, variable: str = TOKEN_ENV) -> str | None:
    """``token``, else ``$variable`` (``TURNGYM_SERVE_TOKEN``), else None (an empty value counts as none)."""
    return token or os.environ.get(variable) or None


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


def check_serving_token(host: str, token: str | None, variable: str = TOKEN_ENV) -> None:
    """ValueError unless the server may listen on ``host`` with ``token``: beyond loopback it needs one
    (``variable``: the environment variable the server reads it from)."""
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ValueError(f"the token is {len(token)} characters long; use at least {MIN_TOKEN_CHARS}, e.g. "
                         f"`export {variable}=$(python -c 'import secrets; print(secrets.token_urlsafe(32))')`")
    if token is None and not is_loopback(host):
        raise ValueError(f"--host {host} is reachable from other machines: give the server a token (set "
                         f"{variable}, or --token) and the same to its clients, or listen on 127.0.0.1")


def bearer_matches(header: bytes | str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``Bearer token`` (compared in constant time)."""
    if header is None:
        return False
    value = header.encode("latin-1", "replace") if isinstance(header, str) else header
    scheme, _, given = value.strip().partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), token.encode())


#: Seconds a kept-alive connection may sit idle after a response before the server closes it. Longer than the
#: clients' own limit (httpx, which openai's client runs on, drops a connection idle for 5 s), so a client never
#: sends its next request on a connection the server is closing at that moment: with uvicorn's default (also 5 s)
#: a busy client sometimes did, and got a ReadError (the proxy's 1000-call test on loaded cores).
KEEP_ALIVE_SECONDS = 15.0


def http_settings(header_timeout: float) -> dict[str, Any]:
    """uvicorn.Config's HTTP arguments for turngym's servers: :func:`header_deadline_protocol` and a keep-alive
    longer than any client's (:data:`KEEP_ALIVE_SECONDS`)."""
    protocol = header_deadline_protocol(header_timeout)
    return {"http": protocol, "timeout_keep_alive": protocol.idle_timeout}


def header_deadline_protocol(timeout: float) -> type:
    """uvicorn's h11 HTTP protocol, closing a connection that has not sent a whole request's headers within
    ``timeout`` seconds of opening (or within ``max(timeout, KEEP_ALIVE_SECONDS)`` of its previous response: a
    kept-alive connection's idle time must outlast the client's, see :data:`KEEP_ALIVE_SECONDS`).

    Why not uvicorn's own settings: ``timeout_keep_alive`` only starts after a first response and any byte
    cancels it, so a connection that sends nothing, or drips a header line every few seconds, stays open
    forever (slowloris); uvicorn 0.54 and h11 have no timeout for reading a request's headers. Such
    connections hold no request (the app only sees whole requests, and the token is checked there), but
    each holds a socket, so they are closed here.
    """
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderDeadlineProtocol(H11Protocol):
        header_timeout = float(timeout)
        idle_timeout = max(float(timeout), KEEP_ALIVE_SECONDS)  # after a response: outlast the client's keep-alive
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm(self.idle_timeout)  # the next request on a kept-alive connection

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def handle_websocket_upgrade(self, event: Any) -> None:
            self._disarm()  # the handshake is in: the WebSocket protocol (and the idle timeout) take over
            super().handle_websocket_upgrade(event)

        def _arm(self, seconds: float | None = None) -> None:
            self._disarm()
            if not self.transport.is_closing():
                self._deadline = self.loop.call_later(self.header_timeout if seconds is None else seconds,
                                                      self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            self._deadline = None
            serving = self.cycle is not None and not self.cycle.response_complete
            if serving or self.transport.is_closing() or self.transport.get_protocol() is not self:
                return
            logger.info("closing the connection of %s: no whole request in time (%g s, or %g s after a "
                        "response)", self.client, self.header_timeout, self.idle_timeout)
            self.transport.close()

    return HeaderDeadlineProtocol


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free one), or a ValueError that says why not."""
    if not 0 <= port <= 65535:
        raise ValueError(f"--port must be between 0 and 65535, got {port}")
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror as error:
        raise ValueError(f"--host {host!r} is not an address of this machine ({error.strerror})") from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            raise ValueError(f"port {port} on {host} is already in use; stop what listens there or choose another "
                             "--port (--port 0 picks a free one)") from None
        raise ValueError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    return sock
