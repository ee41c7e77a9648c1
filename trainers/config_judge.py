"""The judge group of the run's config: a model judges each step's episodes between the rollout and the estimator
(RULER-style ranking of each group, or one score per episode; docs/rewards.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

JudgeKind = Literal["group", "pointwise"]
JudgeMode = Literal["component", "replace", "add"]


@dataclass
class JudgeOptions:
    """``judge`` names the judge model; each training step's episodes are judged after their rollout."""

    judge: str | None = field(
        default=None, metadata={"help": "the judge of each step's episodes: 'hf:NAME' (or a folder), "
                                        "'vllm:NAME' or 'openai:MODEL' (judge_base_url); None: no judge"})
    judge_kind: JudgeKind = field(
        default="group", metadata={"help": "group: the plays of one task ranked together in one call (RULER, "
                                           "relative scores for group-relative estimators); pointwise: one score each"})
    judge_mode: JudgeMode = field(
        default="add", metadata={"help": "the score (0-1) x judge_weight: added to the episode's return (add), "
                                         "replacing it (replace), or only logged as a reward component (component)"})
    judge_weight: float = field(default=1.0, metadata={"help": "the judge's score's weight in the return"})
    judge_rubric: str | None = field(
        default=None, metadata={"help": "the rubric's criteria (what a good episode does); default: the judge's"})
    judge_base_url: str | None = field(
        default=None, metadata={"help": "judge openai:MODEL: the endpoint (default $OPENAI_BASE_URL)"})
    judge_timeout: float = field(default=600.0, metadata={"help": "seconds one judge call (a batch) may take"})
    judge_failed: Literal["keep", "drop"] = field(
        default="keep", metadata={"help": "an episode whose judgement failed: keep it with the world's reward "
                                          "(flagged judge_failed), or drop it from the loss"})

    def validate_judge(self) -> None:
        if self.judge_timeout <= 0:
            raise ValueError(f"judge_timeout must be > 0 seconds, got {self.judge_timeout}")
        if self.judge is not None and self.judge_mode != "component" and self.judge_weight == 0:
            raise ValueError("judge_weight 0 with judge_mode add/replace gives the judge no say: use "
                             "judge_mode component to only log its scores")
