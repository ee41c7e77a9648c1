"""Run a stateful engine in a child process, so a hang or a crash cannot take the caller down.

Game engines such as frotz (inside jericho) run C code in-process: a freeze blocks the Python
interpreter (no signal handler runs) and a segfault kills it, trainer included. An
:class:`IsolatedEngine` keeps the engine object in a child process, calls its methods over a pipe
with a timeout, and kills the child when a call does not return in time.

Why not ``multiprocessing.Pool`` or ``concurrent.futures``: their workers cannot be killed one task
at a time, and the engine must keep its state between calls.
"""

from __future__ import annotations

import ctypes
import importlib
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from turngym.envs.running_clock import poll_within

logger = logging.getLogger(__name__)


class EngineError(RuntimeError):
    """The engine raised an exception; the message carries the child's traceback."""


class EngineTimeout(EngineError):
    """A call did not return within its timeout; the child was killed."""


class EngineCrashed(EngineError):
    """The child process died during a call (segfault, abort, out of memory...)."""


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies, so no engine (or synthesis worker) is orphaned."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the pipe's EOF still ends the loop
        pass


def _serve(factory_path: str, fd: int) -> None:
    die_with_parent()
    conn = Connection(fd)
    engine = _import(factory_path)()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            break
        if message is None:
            break
        method, args = message
        try:
            conn.send(("ok", getattr(engine, method)(*args)))
        except Exception as error:  # noqa: BLE001 - every engine error is reported to the parent
            conn.send(("error", f"{type(error).__name__}: {error}", traceback.format_exc()))
    close = getattr(engine, "close", None)
    if callable(close):
        close()


def _import(path: str) -> Callable[[], Any]:
    module_name, _, attribute = path.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    return target


def factory_path(factory: Callable[[], Any] | str) -> str:
    """``"module:qualname"`` of an importable factory (a class or a module-level function)."""
    if isinstance(factory, str):
        return factory
    module, qualname = getattr(factory, "__module__", None), getattr(factory, "__qualname__", "")
    if not module or module == "__main__" or "<locals>" in qualname:
        raise ValueError(
            f"engine factory {factory!r} must be importable (defined at module level in a module, "
            "not in __main__ or inside a function), because the engine process imports it"
        )
    return f"{module}:{qualname}"


class IsolatedEngine:
    """An object living in a child process, with per-call timeouts.

    The child is a fresh ``python -m turngym.envs.isolation`` process talking over a socket pair. Unlike
    multiprocessing's ``spawn``/``forkserver`` it never re-imports the caller's ``__main__``
    script, and unlike ``fork`` it never copies a parent that holds threads, a model or CUDA state.

    Args:
        factory: importable callable (or ``"module:qualname"``) that builds the engine in the child.
        name: a label for logs and errors.
    """

    def __init__(self, factory: Callable[[], Any] | str, *, name: str = "turngym-engine",
                 private_cwd: bool = False) -> None:
        self.factory = factory_path(factory)
        self.name = name
        self.private_cwd = private_cwd
        self._workdir: tempfile.TemporaryDirectory | None = None
        self._process: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._owner_pid = os.getpid()

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        if self.alive:
            return
        parent_sock, child_sock = socket.socketpair()
        if self.private_cwd:
            self._workdir = tempfile.TemporaryDirectory(prefix="turngym-engine-")
        with child_sock:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "turngym.envs.isolation", str(child_sock.fileno()), self.factory],
                pass_fds=(child_sock.fileno(),),
                stdin=subprocess.DEVNULL,
                cwd=self._workdir.name if self._workdir else None,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
            )
        self._conn = Connection(parent_sock.detach())

    def call(self, method: str, *args: Any, timeout: float) -> Any:
        """Call ``engine.method(*args)`` in the child; raise EngineTimeout/EngineCrashed/EngineError."""
        self.start()
        try:
            self._conn.send((method, args))
            ready = poll_within(self._conn.poll, timeout)  # time this process was stopped does not count
        except (BrokenPipeError, EOFError, OSError) as error:
            self.kill()
            raise EngineCrashed(f"{self.name} died before answering {method}(): {error}") from None
        if not ready:
            self.kill()
            raise EngineTimeout(f"{self.name} did not answer {method}() within {timeout:g}s and was killed")
        try:
            reply = self._conn.recv()
        except (EOFError, OSError):
            exitcode = self._process.wait(timeout=5) if self._process is not None else None
            self.kill()
            raise EngineCrashed(f"{self.name} died during {method}() (exit code {exitcode})") from None
        if reply[0] == "ok":
            return reply[1]
        raise EngineError(f"{self.name} raised in {method}(): {reply[1]}\n--- engine traceback ---\n{reply[2]}")

    def kill(self) -> None:
        """Stop the child at once (SIGKILL) and forget it; the next call starts a fresh one."""
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()
            self._process.wait(timeout=5)
        if self._conn is not None:
            self._conn.close()
        if self._workdir is not None:
            self._workdir.cleanup()
        self._process, self._conn, self._workdir = None, None, None

    def close(self, timeout: float = 2.0) -> None:
        """Ask the child to close its engine and exit; kill it if it does not in time."""
        if self._process is None:
            return
        try:
            if self._process.poll() is None:
                self._conn.send(None)
                self._process.wait(timeout=timeout)
        except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
            pass
        self.kill()

    def __del__(self) -> None:
        if os.getpid() == getattr(self, "_owner_pid", None):
            try:
                self.kill()
            except Exception:  # noqa: BLE001, S110 - never raise from a finaliser
                pass


if __name__ == "__main__":
    _serve(sys.argv[2], int(sys.argv[1]))
