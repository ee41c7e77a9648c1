"""turngym worlds: the text-environment contract, the registry, tasks, and parallel execution.

``import turngym`` registers the built-in worlds, so that
``gymnasium.make("turngym/TextWorld-v0", config="w2-o3-q4")`` works.
"""

from turngym.envs.checker import TextEnvContractError, check_text_env
from turngym.envs.core import (
    INFO_KEYS,
    ActionProtocol,
    AnyText,
    RewardMode,
    TextEnv,
    WorldState,
    dense_turn_reward,
    sparse_turn_reward,
)
from turngym.envs.registry import NAMESPACE, make, register, text_world_ids
from turngym.envs.tasks import SplitOverlapError, Task, TaskSet, assert_disjoint

# Entry points and task panels are "module:name" strings: registering imports no world engine.
register(f"{NAMESPACE}/TextWorld-v0", entry_point="turngym.envs.textworld.env:TextWorldEnv",
         task_panel="turngym.envs.textworld:task_panel")
register(f"{NAMESPACE}/Signals-v0", entry_point="turngym.envs.signals:SignalsEnv",
         task_panel="turngym.envs.signals:task_panel")
register(f"{NAMESPACE}/SWE-v0", entry_point="turngym.envs.swe.env:SWEEnv", task_panel="turngym.envs.swe:task_panel")
register(f"{NAMESPACE}/ALFWorld-v0", entry_point="turngym.envs.alfworld.env:ALFWorldEnv",
         task_panel="turngym.envs.alfworld:task_panel")
# A support desk whose customer is a simulated user with a private goal (docs/rewards.md).
register(f"{NAMESPACE}/SupportDesk-v0", entry_point="turngym.envs.simulated_user.env:SupportDeskEnv",
         task_panel="turngym.envs.simulated_user:task_panel")
# Any world with a long-tailed step latency injected (benchmarks of rollout schedules).
register(f"{NAMESPACE}/Latency-v0", entry_point="turngym.envs.latency:latency_world",
         task_panel="turngym.envs.latency:task_panel")
# Any OpenEnv server as a world (needs base_url; the serve extra): docs/scaling.md.
register(f"{NAMESPACE}/OpenEnv-v0", entry_point="turngym.envs.openenv.world:OpenEnvWorld",
         task_panel="turngym.envs.openenv.world:task_panel")

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
    "TextEnvContractError",
    "WorldState",
    "assert_disjoint",
    "check_text_env",
    "dense_turn_reward",
    "make",
    "register",
    "sparse_turn_reward",
    "text_world_ids",
]
