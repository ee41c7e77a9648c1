"""Judging a rollout's finished episodes together: one batched call for all of them, or RULER-style ranking per group.

:class:`~turngym.envs.judges.JudgedEnv` judges each episode in its world as it ends (one call per episode). After a
rollout, :func:`judge_trajectories` judges every finished :class:`~turngym.agents.rollout.Trajectory` at once:
``kind="pointwise"`` in batches of the judge's ``batch_size``; ``kind="group"`` ranks the episodes of each task (the
plays of one task in the rollout: a GRPO group) in one call each, so the scores are relative within the group, which
is what group-relative estimators compare. The verdict goes where JudgedEnv puts it: the trajectory's
``reward_components[component]`` (or ``judge_failed = 1`` with the reason in the returned verdict), and with
``mode="replace"`` / ``"add"`` the last turn's reward.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from turngym.agents.rollout import Trajectory
from turngym.envs.judges import Judge, Rubric, Submission, Verdict, transcript

RubricSource = Rubric | str | Callable[[Mapping[str, Any]], Rubric | str | None] | None


def judge_trajectories(judge: Judge, trajectories: Sequence[Trajectory], *, kind: str = "pointwise",
                       mode: str = "component", weight: float = 1.0, component: str = "judge",
                       rubric: RubricSource = None) -> list[Verdict]:
    """Judge ``trajectories`` (finished, with at least one turn) and record each verdict on its trajectory.

    ``rubric``: a Rubric (or criteria text) for all, a function of the trajectory's ``task`` (id, split,
    difficulty) giving one, or None (the judge's). ``mode``: ``"component"`` (only ``reward_components``),
    ``"replace"`` (the last turn's reward is set so that the return is ``weight`` x the score) or ``"add"``
    (``weight`` x the score added to it). A failed verdict changes no reward and sets ``judge_failed = 1``.
    """
    if kind not in ("pointwise", "group"):
        raise ValueError(f"kind must be 'pointwise' or 'group', got {kind!r}")
    if mode not in ("component", "replace", "add"):
        raise ValueError(f"mode must be 'component', 'replace' or 'add', got {mode!r}")
    submissions = [_submission(t, rubric) for t in trajectories]
    if kind == "pointwise":
        verdicts = judge.pointwise(submissions)
    else:
        groups: dict[Any, list[int]] = {}
        for index, trajectory in enumerate(trajectories):
            groups.setdefault(trajectory.task.get("id"), []).append(index)
        verdicts = [None] * len(trajectories)  # type: ignore[list-item]
        ranked = judge.rank([[submissions[i] for i in members] for members in groups.values()])
        for members, group in zip(groups.values(), ranked, strict=True):
            for i, verdict in zip(members, group, strict=True):
                verdicts[i] = verdict
    for trajectory, verdict in zip(trajectories, verdicts, strict=True):
        _record(trajectory, verdict, mode, weight, component)
    return list(verdicts)


def _submission(trajectory: Trajectory, rubric: RubricSource) -> Submission:
    if not trajectory.observations or not trajectory.actions:
        raise ValueError(f"episode of task {trajectory.task.get('id')!r} has no turn to judge")
    found = rubric(trajectory.task) if callable(rubric) else rubric
    return Submission(trajectory.observations[0], transcript(trajectory.observations, trajectory.actions),
                      Rubric.of(found) if found is not None else None)


def _record(trajectory: Trajectory, verdict: Verdict, mode: str, weight: float, component: str) -> None:
    if not verdict.ok:
        trajectory.reward_components["judge_failed"] = trajectory.reward_components.get("judge_failed", 0.0) + 1.0
        return
    score = float(verdict.score)
    trajectory.reward_components[component] = score
    if mode == "component" or not trajectory.turn_rewards:
        return
    if mode == "replace":
        trajectory.turn_rewards[-1] = weight * score - sum(trajectory.turn_rewards[:-1])
    else:
        trajectory.turn_rewards[-1] += weight * score
