"""Where a long study stands: its planned stages (each with the file that marks it finished), how many are done and
the time left at the pace of the finished ones."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PlannedStage:
    """One stage of a study: its kind (``sft``, ``rl`` or ``eval``) and the file that marks it finished."""

    kind: str
    marker: Path

    @property
    def finished(self) -> bool:
        return self.marker.exists()

    def seconds(self) -> float | None:
        """How long the finished stage took (its last leg, if it was resumed); None if unfinished or untimed."""
        seconds = json.loads(self.marker.read_text()).get("seconds") if self.finished else None
        return None if seconds is None else float(seconds)


def time_left(finished: Mapping[str, Sequence[float]], kinds_left: Sequence[str]) -> float | None:
    """Seconds a study still needs at the pace of its finished stages, per kind of stage k:

        T_left = sum over stages s left of mean(seconds of the finished stages of kind(s))

    None while some kind left has no finished stage to measure (the first RL stage of a study, say)."""
    if any(not finished.get(kind) for kind in kinds_left):
        return None
    return sum(sum(finished[kind]) / len(finished[kind]) for kind in kinds_left)


def study_progress(plan: Sequence[PlannedStage]) -> str:
    """'stage 7 of 20; about 5.9 h left ...': where a long study stands, from its stages' markers on disk."""
    finished: dict[str, list[float]] = {}
    kinds_left = []
    for stage in plan:
        if not stage.finished:
            kinds_left.append(stage.kind)
        elif (seconds := stage.seconds()) is not None:
            finished.setdefault(stage.kind, []).append(seconds)
    done = len(plan) - len(kinds_left)
    line = f"study: stage {min(done + 1, len(plan))} of {len(plan)}"
    left = time_left(finished, kinds_left)
    if left is None:
        unmeasured = sorted({kind for kind in kinds_left if kind not in finished})
        return f"{line}; time left: estimated once a stage of each kind ({', '.join(unmeasured)}) has run"
    timed = sum(len(seconds) for seconds in finished.values())
    return f"{line}; about {duration(left)} left at the pace of the {timed} finished"


def duration(seconds: float) -> str:
    """62 -> '1 min', 7200 -> '2.0 h': the unit a person reads a long wait in."""
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{max(1, round(seconds / 60))} min"
