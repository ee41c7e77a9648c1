"""The Episode record: the one thing that crosses from rollouts into the trainers.

One episode is one training sequence: ``prompt_ids`` then ``completion_ids`` (assistant turns and
environment turns, in order), with ``env_mask`` (1 on sampled tokens, the only ones in the loss),
the turn of every token, where each turn ends, the sampling logprobs, and the outcome: turn
rewards, terminated/truncated and why. A *group* is the episodes played on the same task, which
the group-relative estimators compare.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.rollout import Trajectory


@dataclass
class Episode:
    group: Hashable
    task: dict[str, Any]
    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    turn_index: list[int]
    turn_ends: list[int]
    logprobs: list[float]
    turn_rewards: list[float]
    won: bool
    terminated: bool
    truncated: bool
    truncation_reason: str | None = None
    invalid_actions: list[bool] = field(default_factory=list)

    @property
    def episode_reward(self) -> float:
        return float(sum(self.turn_rewards))

    @property
    def num_turns(self) -> int:
        return len(self.turn_rewards)

    @property
    def num_model_tokens(self) -> int:
        return sum(self.env_mask)

    @classmethod
    def from_trajectory(cls, trajectory: Trajectory, group: Hashable | None = None) -> Episode:
        """Build from a rollout trajectory of an :class:`~agents.llm.LLMAgent`.

        A turn the agent played but the world never answered (the episode ended on the agent's
        context limit) earns 0; turns beyond the agent's record cannot happen.
        """
        tokens = trajectory.agent_data.get("tokens")
        if tokens is None:
            raise ValueError("this trajectory has no token record: train with an LLMAgent, not a text-only agent")
        rewards = list(trajectory.turn_rewards) + [0.0] * (len(tokens["turn_ends"]) - len(trajectory.turn_rewards))
        return cls(
            group=group if group is not None else trajectory.task.get("id"),
            task=dict(trajectory.task),
            prompt_ids=list(tokens["prompt_ids"]),
            completion_ids=list(tokens["completion_ids"]),
            env_mask=list(tokens["env_mask"]),
            turn_index=list(tokens["turn_index"]),
            turn_ends=list(tokens["turn_ends"]),
            logprobs=list(tokens["logprobs"]),
            turn_rewards=rewards,
            won=trajectory.won,
            terminated=trajectory.terminated,
            truncated=trajectory.truncated,
            truncation_reason=trajectory.truncation_reason,
            invalid_actions=list(trajectory.invalid_actions),
        )

    def append_environment_tokens(self, ids: list[int]) -> None:
        """Append context the model did not sample (e.g. the final observation, for a critic to
        bootstrap from): masked out of the loss, counted in the last turn."""
        turn = self.turn_index[-1] if self.turn_index else 0
        self.completion_ids += ids
        self.env_mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)
        self.turn_index += [turn] * len(ids)

    def validate(self) -> None:
        """Check the record's invariants; a broken one would train on the wrong tokens."""
        n = len(self.completion_ids)
        if not (len(self.env_mask) == len(self.turn_index) == len(self.logprobs) == n):
            raise ValueError("completion_ids, env_mask, turn_index and logprobs must have one entry per token")
        if len(self.turn_ends) != len(self.turn_rewards):
            raise ValueError(f"{len(self.turn_ends)} turn ends for {len(self.turn_rewards)} turn rewards")
        for turn, end in enumerate(self.turn_ends):
            if not (0 <= end < n and self.env_mask[end] == 1 and self.turn_index[end] == turn):
                raise ValueError(f"turn {turn} ends at token {end}, which is not a sampled token of that turn")


def episodes_from(trajectories: Sequence[Trajectory], groups: Sequence[Hashable] | None = None) -> list[Episode]:
    """Episodes from trajectories; by default the group is the task id."""
    groups = groups if groups is not None else [None] * len(trajectories)
    episodes = [Episode.from_trajectory(t, g) for t, g in zip(trajectories, groups, strict=True)]
    for episode in episodes:
        episode.validate()
    return episodes
