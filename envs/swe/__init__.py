"""The SWE world: fix bugs in real repositories inside a sandbox, rewarded by the repositories' tests.

``gymnasium.make("turngym/SWE-v0", split="eval")`` plays the shipped task set in the bwrap sandbox
(or docker, when a daemon and the image are there). See ``docs/swe.md``.
"""

from envs.swe.actions import ParsedAction, parse_action
from envs.swe.env import SWEEnv, oracle_actions
from envs.swe.grading import GradeReport, parse_test_log, pass_ratio_reward, resolved_reward
from envs.swe.instances import SWEInstance, load_instances, swe_taskset, write_jsonl
from envs.swe.sandbox import PhaseTimeouts, SandboxError, SandboxLimits, SandboxUnavailable
from envs.swe.taskset import shipped_instances, swe_tasks, validate

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
    "validate",
    "write_jsonl",
]
