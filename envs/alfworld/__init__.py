"""ALFWorld: household tasks in ALFRED's scenes as text games (``turngym/ALFWorld-v0``)."""

from __future__ import annotations

from typing import Any

from turngym._extras import require
from turngym.envs.tasks import TaskSet

require("alfworld", extra="alfworld", feature="turngym/ALFWorld-v0")

# The check above runs before the engine is imported.

from turngym.envs.alfworld.env import ALFWorldEnv
from turngym.envs.alfworld.games import materialise, task_files
from turngym.envs.alfworld.generation import (
    SPLIT_SIZES,
    TASK_TYPES,
    GameFiles,
    GameSpec,
    alfworld_tasks,
    generate_game,
    generate_games,
)
from turngym.envs.alfworld.official import official_tasks

__all__ = [
    "SPLIT_SIZES",
    "TASK_TYPES",
    "ALFWorldEnv",
    "GameFiles",
    "GameSpec",
    "alfworld_tasks",
    "generate_game",
    "generate_games",
    "materialise",
    "official_tasks",
    "task_files",
    "task_panel",
]


def task_panel(split: str, n: int | None, env_kwargs: dict[str, Any], *, workers: int | None = None,
               progress: bool = True) -> TaskSet:
    """The panel of ``turngym/ALFWorld-v0``: generated games (or, with ``source="official"``, ALFWorld's
    own from ``data_dir``), restricted to ``task_types`` when the world is."""
    types = env_kwargs.get("task_types")
    if env_kwargs.get("source") == "official":
        tasks = official_tasks(split, env_kwargs.get("data_dir"), n=n, task_types=types)
    else:
        tasks = alfworld_tasks(split, n=n, task_types=types)
    return materialise(tasks, workers=workers, progress=progress, data_dir=env_kwargs.get("data_dir"))
