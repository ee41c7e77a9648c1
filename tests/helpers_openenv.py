"""OpenEnv servers that are not turngym's: a plain one for ``turngym/OpenEnv-v0`` tests, a hostile one.

``GuessWordEnvironment``: guess the secret word in three tries. Its action is ``{"message": str}``
(not ``command``), its observation ``{"reply": str, "tries_left": int}``; reward 1 and
``metadata["won"]`` on the right word. ``"hang"`` never answers, ``"raise"`` raises, and a guess
longer than 40 characters fails the action's validation.

Run as ``python -m tests.helpers_openenv`` (from the repository root): it listens on a free port of
127.0.0.1 and prints ``listening on ws://127.0.0.1:PORT``. :class:`GenericServer` does that in a
child process.

:class:`HostileServer`: a "turngym server" written by an attacker, raw WebSocket frames in a thread of
the test (tests/test_serve_security.py).
"""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from turngym.envs.openenv.server import ChildServer

SECRET = "lantern"
TRIES = 3


class GuessAction(Action):
    message: str = Field(..., max_length=40, description="a guess (longer ones are refused by the schema)")


class GuessObservation(Observation):
    reply: str = Field(default="")
    tries_left: int = Field(default=TRIES)


class GuessWordEnvironment(Environment[GuessAction, GuessObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State()
        self.tries_left = TRIES

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> GuessObservation:
        self._state = State(episode_id=episode_id, step_count=0)
        self.tries_left = TRIES
        return GuessObservation(reply=f"Guess my word (seed {seed}).", tries_left=self.tries_left)

    def step(self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any) -> GuessObservation:
        if action.message == "hang":
            time.sleep(3600)
        if action.message == "raise":
            raise RuntimeError("the guessing game broke")
        self._state.step_count += 1
        self.tries_left -= 1
        if action.message == SECRET:
            return GuessObservation(reply="Yes!", tries_left=self.tries_left, reward=1.0, done=True,
                                    metadata={"won": True})
        return GuessObservation(reply=f"No, not {action.message}.", tries_left=self.tries_left, reward=0.0,
                                done=self.tries_left == 0)

    @property
    def state(self) -> State:
        return self._state


class GenericServer(ChildServer):
    """The GuessWord server in a child process (a context manager); ``url`` once it listens."""

    def __init__(self, timeout: float = 120.0) -> None:
        super().__init__([sys.executable, "-m", "tests.helpers_openenv"],
                         ready=re.compile(r"^listening on (?P<url>\S+)"),
                         cwd=str(Path(__file__).resolve().parent.parent), startup_timeout=timeout)


class HostileServer:
    """A raw WebSocket server on 127.0.0.1 posing as ``turngym serve`` (a context manager; ``url``).

    Its state declares ``max_step_seconds`` and a turngym world; ``answer(kind, message)`` gives the
    raw text of the reply to each ``reset`` and ``step`` (None: no reply, ever). Replies are whatever
    an attacker writes: ``observation()`` writes NaN and Infinity as JSON's non-standard literals.
    """

    def __init__(self, answer: Callable[[str, dict[str, Any]], str | None], *, max_step_seconds: Any = None,
                 env_id: str = "turngym/Signals-v0") -> None:
        from websockets.sync.server import serve

        self.answer = answer
        self.state = {"episode_id": None, "step_count": 0, "env_id": env_id, "world_options": {},
                      "max_step_seconds": max_step_seconds, "task": None, "turn": 0, "done": True,
                      "turngym_version": "6.6.6"}
        self.server = serve(self._session, "127.0.0.1", 0, max_size=None, compression=None)
        self.url = f"ws://127.0.0.1:{self.server.socket.getsockname()[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="hostile-server", daemon=True)
        self.thread.start()

    def _session(self, connection: Any) -> None:
        for raw in connection:
            message = json.loads(raw)
            kind = message.get("type")
            if kind == "close":
                return
            reply = json.dumps({"type": "state", "data": self.state}) if kind == "state" else self.answer(kind, message)
            if reply is not None:
                connection.send(reply)

    def close(self) -> None:
        self.server.shutdown()
        self.thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def observation(text: str, reward: Any = 0.0, *, done: bool = False, info: dict[str, Any] | None = None,
                metadata: dict[str, Any] | None = None) -> str:
    """The raw text of an observation frame, as a turngym server's (``NaN`` and ``Infinity`` as such; a huge
    ``int`` as its digits). ``metadata`` adds entries to the metadata's top level."""
    info = {"turn_reward": reward, "episode_reward": None, "won": False, "invalid_action": False, **(info or {})}
    metadata = {"terminated": done, "truncated": False, "truncation_reason": None, "won": False, "info": info,
                **(metadata or {})}
    data = {"observation": {"text": text, "metadata": metadata}, "reward": reward, "done": done, "metadata": metadata}
    return json.dumps({"type": "observation", "data": data})


def main() -> None:
    import uvicorn

    app = create_app(GuessWordEnvironment, GuessAction, GuessObservation, env_name="guess_word",
                     max_concurrent_envs=8)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(f"listening on ws://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    main()
