"""A model judging each training step's episodes, between the rollout and the estimator (``judge`` in the config).

With ``judge_kind: group`` (the default) the plays of one task in the step (a GRPO group) are shown to the judge
together and scored relative to each other in one call, ART's RULER: relative scores are what group-relative
estimators compare, and one call per group costs less than one per episode. ``pointwise`` scores each episode
alone. The score s in [0, 1] goes into the episode's return as ``judge_mode`` says::

    add:        R <- R + w s        replace:  R <- w s        component:  R unchanged (s logged only)

always on the last turn's reward (so turn-level estimators credit it to every turn through the return-to-go), and
into ``reward_components["judge"]`` (GDPO weights it on its own). A failed judgement (no verdict in the schema, a
timeout) changes no reward and is flagged ``judge_failed``; with ``judge_failed: drop`` the groups holding one leave
the loss (:func:`~turngym.trainers.estimators.step_advantages`).

With several training processes each judges its own share of the step; a group split across processes is then
ranked in parts (on one process, the CPU case, groups are whole).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from turngym.agents.judging import judge_trajectories
from turngym.envs.judges import Judge, Rubric

DEFAULT_CRITERIA = ("The agent reaches the task's goal; among attempts that do, fewer wasted, repeated or invalid "
                    "actions is better; an attempt that makes progress beats one that does not.")


class StepJudge:
    """Judges a step's episodes with ``judge`` (see the module doc)."""

    def __init__(self, judge: Judge, *, kind: str = "group", mode: str = "add", weight: float = 1.0) -> None:
        self.judge, self.kind, self.mode, self.weight = judge, kind, mode, weight

    @classmethod
    def of(cls, args: Any) -> StepJudge | None:
        """The run's judge (None without ``judge``): its model loaded from the spec."""
        if not getattr(args, "judge", None):
            return None
        from turngym.agents.judge_models import make_judge_model

        model = make_judge_model(args.judge, base_url=args.judge_base_url)
        judge = Judge(model, rubric=Rubric.of(args.judge_rubric or DEFAULT_CRITERIA), timeout=args.judge_timeout)
        return cls(judge, kind=args.judge_kind, mode=args.judge_mode, weight=args.judge_weight)

    def judge_episodes(self, episodes: Sequence[Any]) -> dict[str, float]:
        """Judge ``episodes`` (their trajectories' rewards and components change in place); the step's metrics."""
        started = time.monotonic()
        playable = [e.trajectory for e in episodes if e.trajectory.actions and e.trajectory.observations]
        for trajectory in (e.trajectory for e in episodes if not (e.trajectory.actions and e.trajectory.observations)):
            trajectory.reward_components["judge_failed"] = 1.0  # nothing to judge: an episode with no turn
        verdicts = judge_trajectories(self.judge, playable, kind=self.kind, mode=self.mode, weight=self.weight)
        scores = [float(v.score) for v in verdicts if v.ok]
        return {"judge/score": sum(scores) / len(scores) if scores else math.nan,
                "judge/failed": 1 - len(scores) / max(len(episodes), 1),
                "judge/seconds": time.monotonic() - started}
