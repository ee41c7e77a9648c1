"""The SWE world: fix bugs in real repositories inside a sandbox, rewarded by the repositories' tests.

``gymnasium.make("turngym/SWE-v0", split="eval")`` plays the shipped task set in the bwrap sandbox
(or docker, when a daemon and the image are there). See ``docs/worlds/swe.md``.
"""

from __future__ import annotations

from typing import Any

from turngym.envs.swe.actions import ParsedAction, parse_action
from turngym.envs.swe.env import SWEEnv
from turngym.envs.swe.grading import GradeReport, parse_test_log, pass_ratio_reward, resolved_reward
from turngym.envs.swe.instances import SWEInstance, load_instances, oracle_actions, swe_taskset, write_jsonl
from turngym.envs.swe.sandbox import PhaseTimeouts, SandboxError, SandboxLimits, SandboxUnavailable
from turngym.envs.swe.taskset import shipped_instances, swe_tasks, validate
from turngym.envs.tasks import TaskSet

__all__ = [
    "GradeReport",
    "ParsedAction",
    "PhaseTimeouts",
    "SWEEnv",
    "SWEInstance",
    "SandboxError",
    "SandboxLimits",
    "SandboxUnavailable",
    "load_instances",
    "oracle_actions",
    "parse_action",
    "parse_test_log",
    "pass_ratio_reward",
    "resolved_reward",
    "shipped_instances",
    "swe_tasks",
    "swe_taskset",
    "task_panel",
    "validate",
    "write_jsonl",
]


def task_panel(split: str, n: int | None, env_kwargs: dict[str, Any], *, workers: int | None = None,
               progress: bool = True) -> TaskSet:
    """The panel of ``turngym/SWE-v0``: the shipped task set's ``split`` (train or eval)."""
    return swe_tasks(split, n=n)
