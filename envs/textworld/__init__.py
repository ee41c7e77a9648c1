"""TextWorld: generated text adventure games (``turngym/TextWorld-v0``)."""

from envs.textworld.env import TextWorldEnv
from envs.textworld.generation import (
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
    "textworld_tasks",
]
