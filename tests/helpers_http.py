"""Loopback HTTP stand-ins for tests: a quiet JSON handler (chat-API servers), a server that drips bytes."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Self


class JSONHandler(BaseHTTPRequestHandler):
    """Answers with JSON bodies; logs nothing (test output stays readable)."""

    def answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


class DrippingServer:
    """An HTTP "server" on 127.0.0.1 that answers every request one byte every ``interval`` seconds,
    status line first, for at most ``total`` seconds (then it hangs up). A context manager; ``url``."""

    ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n[" + b" " * 99_999

    def __init__(self, interval: float = 0.5, total: float = 20.0) -> None:
        self.interval, self.total = interval, total
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.closed = threading.Event()
        threading.Thread(target=self._accept, name="dripping-server", daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                connection, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._drip, args=(connection,), daemon=True).start()

    def _drip(self, connection: socket.socket) -> None:
        with connection:
            connection.recv(65536)  # the request
            stop = time.monotonic() + self.total
            for byte in self.ANSWER:
                if self.closed.is_set() or time.monotonic() > stop:
                    return
                try:
                    connection.sendall(bytes([byte]))
                except OSError:  # the client gave up
                    return
                time.sleep(self.interval)

    def close(self) -> None:
        self.closed.set()
        self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
