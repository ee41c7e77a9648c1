"""The agent interface: one object acting in many episodes at once.

The rollout loop (:func:`turngym.agents.rollout.run_episodes`) drives an agent through four calls, so a
batched policy (one forward pass for every live episode) and a simple scripted policy share one
interface:

* ``begin(episode, observation, info)`` when an episode starts; ``info["sample"]`` is k when the
  episode is the k-th play (from 0) of the same task in this rollout (pass@k samples, a GRPO group);
* ``act(episodes) -> actions``, one action for each listed live episode; an agent may answer
  :class:`EndEpisode` instead, to end that episode as truncated (an LLM whose context is full);
* ``observe(episode, action, observation, reward, info)`` after each step;
* ``end(episode) -> record`` when it finishes; the record (an LLM agent's
  :class:`~turngym.agents.records.TokenRecord`, or ``None``) is stored on the trajectory.

An agent that decodes continuously (:class:`ContinuousAgent`: the LLM agent) also takes turns one at a time
and hands actions back as they finish (``submit``, ``advance``), for the continuous schedule.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from turngym.envs.tasks import stable_seed  # re-exported: agents and trainers import it from here

if TYPE_CHECKING:
    from turngym.agents.records import AgentRecord


@dataclass(frozen=True)
class EndEpisode:
    """Returned by ``act`` instead of an action: end this episode now, as truncated for ``reason``."""

    reason: str


@dataclass
class EpisodeView:
    """What a per-episode agent knows: the latest observation and info, and its own history."""

    observation: str
    info: dict[str, Any]
    actions: list[str] = field(default_factory=list)
    rng: np.random.Generator | None = None


class Agent(ABC):
    """Acts in many episodes at once; each live episode is named by an int chosen by the caller."""

    name: str = "agent"
    # True: the rollout gathers all live episodes and calls act() once for them (LLM batching).
    batched: bool = True
    # Tokens sampled so far over every episode, for progress bars (None: the agent samples no tokens).
    sampled_tokens: int | None = None

    @abstractmethod
    def begin(self, episode: int, observation: str, info: dict[str, Any]) -> None: ...

    @abstractmethod
    def act(self, episodes: Sequence[int]) -> list[str | EndEpisode]: ...

    def observe(self, episode: int, action: str, observation: str, reward: float, info: dict[str, Any]) -> None:
        """Called after each step of ``episode``."""

    def end(self, episode: int) -> AgentRecord | None:
        """Called once ``episode`` is over; returns what to keep with its trajectory (or ``None``)."""
        return None


class ContinuousAgent(Agent):
    """An agent that decodes continuously (continuous batching, :mod:`turngym.agents.schedules.continuous`):
    a turn joins the running generation as soon as its world answers, and leaves it with its action.

    * ``submit(episodes) -> ended``: queue the next turn of each listed episode; those that cannot go on
      come back at once, each with its :class:`EndEpisode`;
    * ``advance() -> [(episode, action)]``: one decoding iteration; the turns it finished;
    * ``decoding``: turns are queued or running (the rollout then polls the worlds instead of waiting).
    """

    @abstractmethod
    def submit(self, episodes: Sequence[int]) -> list[tuple[int, EndEpisode]]: ...

    @abstractmethod
    def advance(self) -> list[tuple[int, str]]: ...

    @property
    @abstractmethod
    def decoding(self) -> bool: ...


class PerEpisodeAgent(Agent):
    """An agent that decides for each episode on its own, from an :class:`EpisodeView`.

    Subclasses implement :meth:`choose`. Each episode gets its own random generator, seeded from
    the agent's seed, the task id and the sample number (``info["sample"]``, so repeated plays of a
    task are independent samples), so results do not depend on how episodes are scheduled.
    """

    batched = False  # decisions are independent: act on each episode as soon as it is ready

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._views: dict[int, EpisodeView] = {}

    @abstractmethod
    def choose(self, view: EpisodeView) -> str: ...

    def begin(self, episode: int, observation: str, info: dict[str, Any]) -> None:
        task_id = str((info.get("task") or {}).get("id"))
        sample = int(info.get("sample") or 0)  # sample 0 keeps the seed of a single play
        rng = np.random.default_rng(stable_seed(self.seed, task_id, *([sample] if sample else [])))
        self._views[episode] = EpisodeView(observation, info, rng=rng)

    def act(self, episodes: Sequence[int]) -> list[str]:
        actions = []
        for episode in episodes:
            view = self._views[episode]
            action = self.choose(view)
            view.actions.append(action)
            actions.append(action)
        return actions

    def observe(self, episode: int, action: str, observation: str, reward: float, info: dict[str, Any]) -> None:
        view = self._views[episode]
        view.observation, view.info = observation, {**view.info, **info}

    def end(self, episode: int) -> None:
        self._views.pop(episode, None)
