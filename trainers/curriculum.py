"""Which tasks a training step plays: world shares and a success-rate curriculum, in TRL's group order.

TRL's ``RepeatSampler`` deals every task once per epoch, in a shuffled order. :class:`TaskSampler` keeps its
layout (each drawn task repeated ``num_generations`` times in a row: one group; a generation batch of B
distinct tasks, repeated ``num_iterations x steps_per_generation`` times) but draws the B tasks, without
replacement, with

    P(i) = q_i / sum_j q_j                                     without world weights
    P(i) = share(w(i)) * q_i / sum_{j in w(i)} q_j             with weights: share(w) = weight_w / sum_v weight_v

where w(i) is task i's world (``worlds[].weight``: each world keeps its share of the groups, and the
curriculum only reorders the draws inside it) and q_i the curriculum's priority of task i (1 without a
curriculum: the uniform draw of TRL). :class:`SuccessCurriculum` prioritises the tasks whose recent success rate is near
a target (0.5 by default: the tasks a group can still learn from, where the group's episodes disagree).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Hashable, Iterator, Sequence

import numpy as np
from torch.utils.data import Sampler

SMOOTHING = 0.5  # alpha of the success rate's moving average
CURRICULUM_STATE = "curriculum.json"  # the success estimates, saved with each checkpoint


class SuccessCurriculum:
    """Per-task success estimates and the priorities they give.

    After each group of task i (its episodes' success rate r):

        s_i <- r                            the first time
        s_i <- s_i + alpha (r - s_i)        afterwards (alpha = 0.5)

    and the priority of task i is

        q_i = floor + (1 - floor) * (1 - |s_i - target| / max(target, 1 - target))

    1 at s_i = target, ``floor`` at the far end; a task never played has q_i = 1, so every task is tried
    before the estimates steer the draw, and ``floor > 0`` keeps solved and hopeless tasks in the mix.
    """

    def __init__(self, num_tasks: int, *, target: float = 0.5, floor: float = 0.1) -> None:
        if not 0.0 < target < 1.0:
            raise ValueError(f"curriculum_target must be strictly between 0 and 1, got {target}")
        if not 0.0 < floor <= 1.0:
            raise ValueError(f"curriculum_floor must be in (0, 1], got {floor}")
        self.target, self.floor = target, floor
        self.success = np.full(num_tasks, np.nan)  # s_i; NaN: never played

    def update(self, index: int, rate: float) -> None:
        """Fold one group's success rate ``rate`` of task ``index`` into its estimate."""
        previous = self.success[index]
        self.success[index] = rate if math.isnan(previous) else previous + SMOOTHING * (rate - previous)

    def priorities(self) -> np.ndarray:
        """q_i for every task."""
        distance = np.abs(self.success - self.target) / max(self.target, 1.0 - self.target)
        q = self.floor + (1.0 - self.floor) * (1.0 - distance)
        return np.where(np.isnan(self.success), 1.0, q)

    def state_dict(self) -> dict[str, list[float]]:
        return {"success": [None if math.isnan(s) else float(s) for s in self.success]}

    def load_state_dict(self, state: dict[str, list[float | None]]) -> None:
        self.success = np.array([np.nan if s is None else s for s in state["success"]], dtype=float)

    def record(self, indices: Sequence[int], won: Sequence[bool], groups: Sequence[Hashable]) -> dict[str, float]:
        """Each group's success rate (the episodes of task ``indices[i]``, grouped by ``groups``) into the estimates;
        returns ``curriculum/tasks_seen`` (the share of tasks played) and ``curriculum/success_mean``."""
        by_group: dict[Hashable, list[bool]] = {}
        for group, outcome in zip(groups, won, strict=True):
            by_group.setdefault(group, []).append(outcome)
        first = {group: indices[i] for i, group in reversed(list(enumerate(groups)))}
        for group, outcomes in by_group.items():
            self.update(first[group], sum(outcomes) / len(outcomes))
        seen = ~np.isnan(self.success)
        metrics = {"curriculum/tasks_seen": float(seen.mean())}
        if seen.any():
            metrics["curriculum/success_mean"] = float(self.success[seen].mean())
        return metrics

    def save(self, folder: str) -> None:
        with open(os.path.join(folder, CURRICULUM_STATE), "w") as handle:
            json.dump(self.state_dict(), handle)

    def load(self, folder: str) -> None:
        """The estimates saved in ``folder``, if it has them. The tasks drawn after a resume still differ from an
        uninterrupted run's: the draws TRL replays to skip the finished steps read the restored estimates."""
        path = os.path.join(folder, CURRICULUM_STATE)
        if os.path.isfile(path):
            with open(path) as handle:
                self.load_state_dict(json.load(handle))


class TaskSampler(Sampler[int]):
    """Dataset indices in TRL's ``RepeatSampler`` layout, drawn by world share and curriculum priority.

    Args:
        task_worlds: the world (0, 1, ...) of each dataset index.
        weights: one weight per world (None: no world shares; the priorities alone, over every task).
        mini_repeat_count: ``num_generations`` (a group).
        batch_size: distinct tasks per generation batch.
        repeat_count: times each generation batch is repeated (``num_iterations x steps_per_generation``).
        seed: the draws' seed; the same seed and the same curriculum updates give the same tasks.
        curriculum: the priorities q_i (None: q_i = 1). It is read at every draw, so the updates of one
            step steer the next steps' tasks.
    """

    def __init__(self, task_worlds: Sequence[int], weights: Sequence[float] | None, *, mini_repeat_count: int,
                 batch_size: int, repeat_count: int = 1, seed: int = 0,
                 curriculum: SuccessCurriculum | None = None) -> None:
        self.task_worlds = np.asarray(task_worlds, dtype=int)
        self.num_samples = len(self.task_worlds)
        num_worlds = int(self.task_worlds.max()) + 1 if self.num_samples else 0
        counts = np.bincount(self.task_worlds, minlength=num_worlds)
        if weights is not None and (len(weights) != num_worlds or any(w <= 0 for w in weights) or any(counts == 0)):
            raise ValueError(f"need one weight > 0 per world and a task in every world; weights {list(weights)}, "
                             f"tasks per world {counts.tolist()}")
        if batch_size > self.num_samples:
            raise ValueError(f"a generation batch of {batch_size} distinct tasks needs at least that many tasks, "
                             f"the run has {self.num_samples}")
        self.shares = None if weights is None else np.asarray(weights, dtype=float) / float(np.sum(weights))
        self.mini_repeat_count, self.batch_size, self.repeat_count = mini_repeat_count, batch_size, repeat_count
        self.curriculum = curriculum
        self.rng = np.random.default_rng(seed)

    def probabilities(self) -> np.ndarray:
        """P(i) for every dataset index (see the module docstring)."""
        q = self.curriculum.priorities() if self.curriculum is not None else np.ones(self.num_samples)
        if self.shares is None:
            return q / q.sum()
        per_world = np.bincount(self.task_worlds, weights=q, minlength=len(self.shares))
        return self.shares[self.task_worlds] * q / per_world[self.task_worlds]

    def draw(self) -> list[int]:
        """One generation batch's distinct tasks."""
        p = self.probabilities()
        return self.rng.choice(self.num_samples, size=self.batch_size, replace=False, p=p / p.sum()).tolist()

    def __iter__(self) -> Iterator[int]:
        for _ in range(self.num_samples // self.batch_size):
            chunk = self.draw()  # drawn when TRL asks for this batch: the latest success estimates count
            for _ in range(self.repeat_count):
                for index in chunk:
                    for _ in range(self.mini_repeat_count):
                        yield index

    def __len__(self) -> int:
        return (self.num_samples // self.batch_size) * self.batch_size * self.mini_repeat_count * self.repeat_count


def task_sampler(task_worlds: Sequence[int], weights: Sequence[float] | None, curriculum: SuccessCurriculum | None,
                 *, group: int, generation_batch: int, repeat: int, seed: int) -> TaskSampler | None:
    """One :class:`TaskSampler` for a run with world ``weights`` (several worlds) or a ``curriculum``, with TRL's
    layout (groups of ``group`` in a row, each batch ``repeat`` times); None when neither is set (TRL's own
    ``RepeatSampler`` serves)."""
    if curriculum is None and weights is None:
        return None
    return TaskSampler(task_worlds, weights, mini_repeat_count=group, batch_size=generation_batch // group,
                       repeat_count=repeat, seed=seed, curriculum=curriculum)
