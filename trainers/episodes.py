"""The Episode: what crosses from rollouts into the trainers.

An episode is held once: the rollout's :class:`~turngym.agents.rollout.Trajectory` (text, turn
rewards, outcome) with the LLM agent's :class:`~turngym.agents.records.TokenRecord` (exact ids) on
it. :class:`Episode` is a typed view of that pair plus the episode's *group* (the episodes played
on the same task, which the group-relative estimators compare); it copies nothing.

One episode is one training sequence: ``prompt_ids`` then ``completion_ids`` (assistant turns and
environment turns, in order), with ``env_mask`` (1 on sampled tokens, the only ones in the loss),
the turn of every token, where each turn ends, the sampling logprobs, and the outcome.

An episode played with a history window (``TurnGymConfig.history_window``) trains as one sample per
turn instead (:meth:`Episode.turn_samples`): turn t's sample is the context the model was given at
turn t and the ids it sampled there, so what is trained on is still exactly what was sampled. So does an
episode whose history was rewritten (``TurnGymConfig.history``: strip_thinking, compact;
:attr:`Episode.history_rewritten`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from turngym.agents.records import TokenRecord, TurnSample
from turngym.agents.rollout import Trajectory


@dataclass
class Episode:
    """A trajectory played by an LLM agent, as a training sample of ``group``."""

    trajectory: Trajectory
    group: Hashable

    def __post_init__(self) -> None:
        if self.trajectory.tokens is None:
            kind = type(self.trajectory.record).__name__ if self.trajectory.record is not None else "no record"
            raise ValueError(f"this trajectory has {kind}, not a TokenRecord: train with an LLMAgent, "
                             "not a text-only or chat-API agent")

    @classmethod
    def from_trajectory(cls, trajectory: Trajectory, group: Hashable | None = None) -> Episode:
        """The episode of ``trajectory``; its group defaults to the task id."""
        return cls(trajectory, group if group is not None else trajectory.task.get("id"))

    @classmethod
    def from_ids(cls, *, prompt_ids: list[int], completion_ids: list[int], env_mask: list[int], turn_index: list[int],
                 turn_ends: list[int], logprobs: list[float], turn_rewards: list[float], group: Hashable = 0,
                 task: dict[str, Any] | None = None, won: bool = False, terminated: bool = False,
                 truncated: bool = False, truncation_reason: str | None = None) -> Episode:
        """An episode from token ids made elsewhere (a hand-written test case, another system's rollout)."""
        tokens = TokenRecord(prompt_ids=list(prompt_ids), completion_ids=list(completion_ids), env_mask=list(env_mask),
                             logprobs=list(logprobs), turn_index=list(turn_index), turn_ends=list(turn_ends))
        trajectory = Trajectory(task=dict(task or {}), observations=[], turn_rewards=list(turn_rewards), won=won,
                                terminated=terminated, truncated=truncated, truncation_reason=truncation_reason,
                                invalid_actions=[False] * len(turn_rewards), record=tokens)
        return cls(trajectory, group)

    # ------------------------------------------------------------------ the token sequence
    @property
    def tokens(self) -> TokenRecord:
        return self.trajectory.tokens  # type: ignore[return-value] - checked in __post_init__

    @property
    def prompt_ids(self) -> list[int]:
        return self.tokens.prompt_ids

    @property
    def completion_ids(self) -> list[int]:
        return self.tokens.completion_ids

    @property
    def env_mask(self) -> list[int]:
        return self.tokens.env_mask

    @property
    def logprobs(self) -> list[float]:
        return self.tokens.logprobs

    @property
    def turn_index(self) -> list[int]:
        return self.tokens.turn_index

    @property
    def turn_ends(self) -> list[int]:
        return self.tokens.turn_ends

    @property
    def num_model_tokens(self) -> int:
        return sum(self.env_mask)

    @property
    def history_window(self) -> int | None:
        """K when the agent saw only the first prompt and the last K turns (then each turn is its own sample)."""
        return self.tokens.history_window

    @property
    def history_rewritten(self) -> bool:
        """Some turn was given a context other than the sequence before it (``history`` strip_thinking or compact
        rewrote it): the episode is never one sequence, and trains per turn."""
        return self.tokens.rewritten

    def turn_samples(self) -> list[TurnSample]:
        """One sample per model turn: the exact context turn t was sampled from, and its sampled ids."""
        return [self.tokens.turn_sample(turn) for turn in range(self.num_turns)]

    # ------------------------------------------------------------------ the outcome
    @property
    def task(self) -> dict[str, Any]:
        return self.trajectory.task

    @property
    def world(self) -> str | None:
        """The world entry the episode was played in, in a run with several (``TurnGymConfig.worlds``)."""
        return self.task.get("world")

    @property
    def turn_rewards(self) -> list[float]:
        """One reward per model turn. A turn the agent played but the world never answered (the
        episode ended on the agent's context limit) earns 0."""
        rewards = list(self.trajectory.turn_rewards)
        return rewards + [0.0] * (len(self.turn_ends) - len(rewards))

    @property
    def episode_reward(self) -> float:
        return self.trajectory.episode_reward

    @property
    def num_turns(self) -> int:
        return len(self.turn_ends)

    @property
    def won(self) -> bool:
        return self.trajectory.won

    @property
    def terminated(self) -> bool:
        return self.trajectory.terminated

    @property
    def truncated(self) -> bool:
        return self.trajectory.truncated

    @property
    def truncation_reason(self) -> str | None:
        return self.trajectory.truncation_reason

    @property
    def invalid_actions(self) -> list[bool]:
        return self.trajectory.invalid_actions

    @property
    def anchor_states(self) -> list[str | None]:
        """One key per model turn: the state the agent acted in at that turn (GiGPO's anchor state),
        :func:`state_key` of the observation before the turn and the admissible commands there. Equal keys
        within a task group are the same state as far as the agent could tell. A turn with no recorded
        observation (a record made elsewhere, :meth:`from_ids`) gets None: an unknown state, never grouped."""
        observations, commands = self.trajectory.observations, self.trajectory.admissible_commands
        return [state_key(observations[turn], commands[turn] if turn < len(commands) else None)
                if turn < len(observations) else None for turn in range(self.num_turns)]

    # ------------------------------------------------------------------ checks
    def validate(self) -> None:
        """Check the record's invariants; a broken one would train on the wrong tokens."""
        n = len(self.completion_ids)
        if not (len(self.env_mask) == len(self.turn_index) == len(self.logprobs) == n):
            raise ValueError("completion_ids, env_mask, turn_index and logprobs must have one entry per token")
        if len(self.trajectory.turn_rewards) > len(self.turn_ends):
            raise ValueError(f"{len(self.trajectory.turn_rewards)} turn rewards for {len(self.turn_ends)} model turns")
        for turn, end in enumerate(self.turn_ends):
            if not (0 <= end < n and self.env_mask[end] == 1 and self.turn_index[end] == turn):
                raise ValueError(f"turn {turn} ends at token {end}, which is not a sampled token of that turn")
        contexts = self.tokens.contexts
        if contexts is not None and len(contexts) != self.num_turns:
            raise ValueError(f"{len(contexts)} kept contexts for {self.num_turns} model turns")


def state_key(observation: str, admissible_commands: Sequence[str] | None = None) -> str:
    """A short stable key of a state: the SHA-1 of the observation text and the sorted admissible commands.

    Stable across processes and runs (not Python's salted ``hash``), so keys gathered from every process
    compare equal; sorted, so the commands' order does not split a state.
    """
    commands = sorted(admissible_commands) if admissible_commands is not None else None
    text = json.dumps([observation, commands], ensure_ascii=False)
    return hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()[:16]


def episodes_from(trajectories: Sequence[Trajectory], groups: Sequence[Hashable] | None = None) -> list[Episode]:
    """Validated episodes from trajectories; by default the group is the task id."""
    groups = groups if groups is not None else [None] * len(trajectories)
    episodes = [Episode.from_trajectory(t, g) for t, g in zip(trajectories, groups, strict=True)]
    for episode in episodes:
        episode.validate()
    return episodes


def group_keys(task_ids: Sequence[str], num_generations: int) -> list[Hashable]:
    """Group of each episode in TRL's global order: ``num_generations`` consecutive entries.

    Each group must be one task, which TRL's RepeatSampler guarantees; a mismatch means the data
    order was broken, so it fails loudly instead of baselining across tasks.
    """
    keys = []
    for index, task_id in enumerate(task_ids):
        group = index // num_generations
        if task_ids[group * num_generations] != task_id:
            raise RuntimeError(f"group {group} mixes tasks {task_ids[group * num_generations]!r} and {task_id!r}")
        keys.append(group)
    return keys
