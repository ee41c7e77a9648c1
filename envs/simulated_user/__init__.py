"""A world whose counterpart is a simulated user: ``turngym/SupportDesk-v0``.

The agent is a store's support agent; a customer with a private goal (:class:`UserGoal`) asks for a change to an
order and tells the details only when asked. The reward is a checkable end state: the store's records when the agent
closes the chat, compared with the goal's target. The customer is a :class:`UserSimulator`: :class:`RuleUser`
(deterministic, offline, the default) or :class:`ModelUser` (a chat model, seeded per episode and turn). See
docs/rewards.md, "A simulated-user world".
"""

from __future__ import annotations

from typing import Any

from turngym.envs.simulated_user.env import SupportDeskEnv
from turngym.envs.simulated_user.tasks import UserGoal, support_tasks, target_orders
from turngym.envs.simulated_user.users import ModelUser, RuleUser, UserSimulator, UserSimulatorError
from turngym.envs.tasks import TaskSet


def task_panel(split: str, n: int | None, env_kwargs: dict[str, Any], *, workers: int | None = None,
               progress: bool = True) -> TaskSet:
    """The panel of ``turngym/SupportDesk-v0``: :func:`support_tasks` (``n`` defaults to the world's ``num_tasks``,
    64)."""
    return support_tasks(split, n or env_kwargs.get("num_tasks", 64))


__all__ = ["ModelUser", "RuleUser", "SupportDeskEnv", "UserGoal", "UserSimulator", "UserSimulatorError",
           "support_tasks", "target_orders", "task_panel"]
