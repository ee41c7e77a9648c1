"""When an episode's turns run: a schedule plays the episodes of an :class:`~turngym.agents.episode_table.EpisodeTable`.

What an episode is (its reset, its turns recorded, its end) is the table's; a schedule decides only when the
agent acts and when the rollout waits for the worlds. Each built-in one is a module:

* :class:`Lockstep`: wait for every world, then one call to the agent for every waiting episode;
* :class:`Eager`: act on each answer as soon as it arrives;
* :class:`Continuous`: continuous batching, turns joining the model's running batch as their worlds answer.

A schedule of your own is a new module here with a class that has ``run(agent, table)``
(:class:`Schedule`), passed as ``run_episodes(..., schedule=YourSchedule())``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from turngym.agents.base import Agent
from turngym.agents.schedules.continuous import Continuous
from turngym.agents.schedules.eager import Eager
from turngym.agents.schedules.lockstep import Lockstep

if TYPE_CHECKING:
    from turngym.agents.episode_table import EpisodeTable

__all__ = ["Continuous", "Eager", "Lockstep", "Schedule", "schedule_for"]


class Schedule(Protocol):
    """Plays every episode of a table to its end, deciding when the agent acts and when the rollout waits for the
    worlds (what each answer and action does to an episode is the table's)."""

    def run(self, agent: Agent, table: EpisodeTable) -> None: ...


def schedule_for(agent: Agent, *, lockstep: bool | None = None, continuous: bool = False,
                 batch_window: float = 0.0) -> Lockstep | Continuous:
    """The built-in schedule :func:`~turngym.agents.rollout.run_episodes`' flags name: ``continuous``, else
    lockstep (by default for a batched agent), else eager."""
    if batch_window and not continuous:
        raise ValueError(f"batch_window is for continuous batching, got {batch_window} without continuous")
    if continuous:
        return Continuous(batch_window)
    return Lockstep() if (agent.batched if lockstep is None else lockstep) else Eager()
