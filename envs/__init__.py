"""turngym worlds: the text-environment contract, the registry, tasks, and parallel execution.

``import envs`` registers the built-in worlds, so that
``gymnasium.make("turngym/TextWorld-v0", config="w2-o3-q4")`` works.
"""

from envs.core import (
    INFO_KEYS,
    ActionProtocol,
    AnyText,
    RewardMode,
    TextEnv,
    WorldState,
    dense_turn_reward,
    sparse_turn_reward,
)
from envs.registry import NAMESPACE, make, register, text_world_ids
from envs.tasks import SplitOverlapError, Task, TaskSet, assert_disjoint

register(f"{NAMESPACE}/TextWorld-v0", entry_point="envs.textworld.env:TextWorldEnv")
register(f"{NAMESPACE}/Signals-v0", entry_point="envs.signals:SignalsEnv")
register(f"{NAMESPACE}/SWE-v0", entry_point="envs.swe.env:SWEEnv")
register(f"{NAMESPACE}/ALFWorld-v0", entry_point="envs.alfworld.env:ALFWorldEnv")

__all__ = [
    "INFO_KEYS",
    "NAMESPACE",
    "ActionProtocol",
    "AnyText",
    "RewardMode",
    "SplitOverlapError",
    "Task",
    "TaskSet",
    "TextEnv",
    "WorldState",
    "assert_disjoint",
    "dense_turn_reward",
    "make",
    "register",
    "sparse_turn_reward",
    "text_world_ids",
]
