"""TextWorld: generated text adventure games (``turngym/TextWorld-v0``)."""

from __future__ import annotations

from typing import Any

from turngym._extras import require
from turngym.envs.tasks import TaskSet

require("textworld", extra="textworld", feature="turngym/TextWorld-v0")

# The check above runs before the engine is imported.

from turngym.envs.textworld.env import TextWorldEnv
from turngym.envs.textworld.generation import (
    REFERENCE_CONFIGS,
    GameConfig,
    GameFiles,
    generate_game,
    generate_games,
    materialise,
    textworld_tasks,
)

__all__ = [
    "REFERENCE_CONFIGS",
    "GameConfig",
    "GameFiles",
    "TextWorldEnv",
    "generate_game",
    "generate_games",
    "materialise",
    "task_panel",
    "textworld_tasks",
]


def task_panel(split: str, n: int | None, env_kwargs: dict[str, Any], *, first: int = 0,
               workers: int | None = None, progress: bool = True) -> TaskSet:
    """The panel of ``turngym/TextWorld-v0``: the games of ``env_kwargs["config"]`` (default w2-o3-q4), the ``n``
    from the ``first``-th on, generated and hashed (only those: a game is seconds of CPU)."""
    tasks = textworld_tasks(env_kwargs.get("config", "w2-o3-q4"), split, n=None if n is None else first + n)
    return materialise(tasks.take(n, start=first) if first else tasks, workers=workers, progress=progress)
