"""Loopback HTTP stand-ins for tests: a quiet JSON handler (chat-API servers), a server that drips bytes, a
server whose answers a test scripts (by the path's last segment)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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
    status line first, for at most ``total`` seconds (then it hangs up). A context manager; ``url``.
    ``http10``: an HTTP/1.0 answer without a length, whose body ends only when the server hangs up; its
    status line and headers come at once, then the body drips."""

    ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n[" + b" " * 99_999
    ANSWER_10 = b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n[" + b" " * 99_999

    def __init__(self, interval: float = 0.5, total: float = 20.0, *, http10: bool = False) -> None:
        self.interval, self.total = interval, total
        self.answer = self.ANSWER_10 if http10 else self.ANSWER
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
            answer = self.answer
            if answer is self.ANSWER_10:
                head, _, answer = answer.partition(b"\r\n\r\n")
                connection.sendall(head + b"\r\n\r\n")
            for byte in answer:
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


class ScriptedServer:
    """An HTTP server on 127.0.0.1 answering every GET or POST whose path ends in ``/NAME`` with
    ``answers[NAME]`` (raw bytes, as JSON), 404 otherwise. A context manager; ``url``."""

    def __init__(self, answers: Mapping[str, bytes]) -> None:
        answers = dict(answers)

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                body = answers.get(self.path.rstrip("/").rsplit("/", 1)[-1])
                self.send_response(404 if body is None else 200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            do_GET = do_POST = _answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, name="scripted-http", daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
