"""A world's engine session, in this process or isolated in a child, behind one ``call``.

TextWorld and ALFWorld both drive a stateful engine session (an object that answers plain dicts).
:class:`EngineClient` starts it on first use, in a child process (:class:`~turngym.envs.isolation.IsolatedEngine`,
with per-call timeouts) or in this process, and :func:`failure_state` turns an engine failure into
the :class:`~turngym.envs.core.WorldState` that truncates the episode.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from turngym.envs.core import WorldState
from turngym.envs.isolation import EngineCrashed, EngineError, EngineTimeout, IsolatedEngine

logger = logging.getLogger(__name__)

ISOLATIONS = ("process", "none")
# Most specific first: EngineTimeout and EngineCrashed are EngineErrors.
_FAILURES = (
    (EngineTimeout, "engine_timeout", "The game engine stopped responding"),
    (EngineCrashed, "engine_crash", "The game engine crashed"),
    (EngineError, "engine_error", "The game engine raised an error"),
)


def check_isolation(isolation: str) -> str:
    if isolation not in ISOLATIONS:
        raise ValueError(f"engine_isolation must be 'process' or 'none', got {isolation!r}")
    return isolation


class EngineClient:
    """Calls an engine session's methods; ``isolation="process"`` runs it in a child process.

    Args:
        factory: importable callable that builds the session (a class or module-level function).
        isolation: ``"process"`` (timeouts; a hang or crash raises an :class:`EngineError`) or
            ``"none"`` (in-process: no timeouts, no protection).
        name: a label for logs and errors.
    """

    def __init__(self, factory: Callable[[], Any], *, isolation: str, name: str) -> None:
        self.isolation = check_isolation(isolation)
        if isolation == "process":
            # A private working directory: nothing the engine writes lands in the caller's.
            self._engine: Any = IsolatedEngine(factory, name=name, private_cwd=True)
        else:
            self._engine = factory()

    @property
    def pid(self) -> int | None:
        """The engine's process id (None in-process, or before the first call)."""
        return self._engine.pid if self.isolation == "process" else None

    def call(self, method: str, *args: Any, timeout: float) -> Any:
        if self.isolation == "process":
            return self._engine.call(method, *args, timeout=timeout)
        return getattr(self._engine, method)(*args)

    def close(self) -> None:
        self._engine.close()


def failure_state(error: EngineError, *, progress: float | None, task_id: str | None) -> WorldState:
    """The state that truncates an episode whose engine hung, crashed or raised."""
    reason, message = next((r, m) for kind, r, m in _FAILURES if isinstance(error, kind))
    logger.warning("%s on %s: %s", message, task_id, error)
    return WorldState(
        text=f"[turngym] {message}; the episode was truncated.",
        progress=progress,
        failure=reason,
        extra={"engine_failure": str(error).splitlines()[0]},
    )
