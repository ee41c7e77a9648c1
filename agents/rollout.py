"""The one rollout loop: an agent plays many episodes over a pool of environments.

What an episode is lives in :mod:`turngym.agents.episode_table` (its :class:`Trajectory`, and the
:class:`EpisodeTable`: a free world starts the next task, each answer of a world is recorded and handed to the agent,
a finished episode keeps the agent's record); when its turns run is a schedule's (:mod:`turngym.agents.schedules`):
lockstep (all waiting episodes in one call, one batched forward pass for an LLM), eager (each turn as soon as its
world answers) or continuous batching (turns join and leave the model's running batch). Training, evaluation and
the demo all use :func:`run_episodes`.
"""

from __future__ import annotations

from collections.abc import Sequence

from turngym.agents.base import Agent
from turngym.agents.episode_table import LIMIT_REASONS, TEXT_FIELDS, TIME_LIMIT_REASONS, EpisodeTable, Pool, Trajectory
from turngym.agents.schedules import Schedule, schedule_for
from turngym.envs.tasks import Task

__all__ = ["LIMIT_REASONS", "TEXT_FIELDS", "TIME_LIMIT_REASONS", "EpisodeTable", "Pool", "Schedule", "Trajectory",
           "run_episodes"]


def run_episodes(
    agent: Agent,
    pool: Pool,
    tasks: Sequence[Task],
    *,
    seed: int = 0,
    lockstep: bool | None = None,
    continuous: bool = False,
    batch_window: float = 0.0,
    progress: bool | str = False,
    first_episode: int = 0,
    schedule: Schedule | None = None,
) -> list[Trajectory]:
    """Play one episode per task and return the trajectories in task order.

    How the agent's turns meet the worlds' steps (resets of finished workers always overlap with the other
    episodes' steps), :mod:`turngym.agents.schedules`:

    * ``lockstep`` (default for a batched agent): wait for every in-flight reset and step, then ask the agent
      for all waiting episodes in one call (one batched forward pass for an LLM). Each turn waits for the
      slowest world, and the worlds wait while the model generates.
    * ``lockstep=False``: act on each answer as soon as it arrives, which keeps every worker busy (a
      per-episode agent: scripts, baselines).
    * ``continuous``: continuous batching, for a :class:`~turngym.agents.base.ContinuousAgent` (the LLM agent,
      :mod:`turngym.agents.decoding`). A turn joins the model's running batch as soon as its world answers;
      a finished turn's action goes to its world at once, and the world steps (in its worker) while the model
      decodes the others. The pool is polled between decoding iterations. Same episodes as lockstep for the
      same seeds: each turn samples from its own generator.

      ``batch_window`` (seconds, continuous only): a turn whose world has answered waits up to this long for
      other worlds' answers, so they join the model together (fewer, larger generation calls: worth it when a
      call costs about the same at any batch size, as on a GPU); it never waits when no world is stepping.
      0 (the default): every answer joins at once.
    * ``schedule``: any other :class:`Schedule` (instead of the three flags).

    Reset seeds derive from ``seed`` and the task id, so the result does not depend on the
    number of workers or on scheduling. Episodes are numbered from ``first_episode`` (the agent
    seeds its sampling by episode number, so a trainer's processes number theirs globally).
    """
    if schedule is None:
        schedule = schedule_for(agent, lockstep=lockstep, continuous=continuous, batch_window=batch_window)
    elif lockstep is not None or continuous or batch_window:
        raise ValueError("pass a schedule or the lockstep/continuous/batch_window flags, not both")
    with EpisodeTable(agent, pool, tasks, seed=seed, first_episode=first_episode, progress=progress) as table:
        schedule.run(agent, table)
    return table.trajectories()
