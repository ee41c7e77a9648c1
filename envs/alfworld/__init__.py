"""ALFWorld: household tasks in ALFRED's scenes as text games (``turngym/ALFWorld-v0``)."""

from envs.alfworld.env import ALFWorldEnv
from envs.alfworld.generation import (
    SPLIT_SIZES,
    TASK_TYPES,
    GameFiles,
    GameSpec,
    alfworld_tasks,
    generate_game,
    generate_games,
    materialise,
)
from envs.alfworld.official import official_tasks

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
]
