"""Where a long study stands: its planned stages (each with the file that marks it finished and the work it does), how
many are done and the time left, at the pace of the finished ones (or a prior pace, labelled an estimate, for a kind
of stage none of which has finished yet). Pure arithmetic; :mod:`turngym.recipes.study_clock` says it while a study
runs."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from turngym.recipes.study_config import Arm

# Seconds per unit of a stage's work before any stage of its kind has finished, measured on the demo (SmolLM2-135M
# on TextWorld, 2 CPU cores; docs/results.md): an SFT demo (its epochs included), an RL episode (its share of the
# step's update and of the learning curve's evaluations), an evaluated episode. Only ever shown as an estimate.
PRIOR_SECONDS_PER_UNIT = {"sft": 5.0, "rl": 2.5, "eval": 1.0}
DONE = "done.json"


@dataclass(frozen=True)
class PlannedStage:
    """One stage of a study: its kind (``sft``, ``rl`` or ``eval``), the file that marks it finished, its work in
    ``units`` (SFT demos, RL episodes, evaluated episodes) and its ``name`` ("seed 0 (1/3) · ppo RL")."""

    kind: str
    marker: Path
    units: float = 1.0
    name: str = ""

    @property
    def finished(self) -> bool:
        return self.marker.exists()

    def seconds(self) -> float | None:
        """How long the finished stage took (its last leg, if it was resumed); None if unfinished or untimed."""
        seconds = json.loads(self.marker.read_text()).get("seconds") if self.finished else None
        return None if seconds is None else float(seconds)


@dataclass(frozen=True)
class Pace:
    """Seconds per unit of work for one kind of stage; ``measured`` False: the prior, an estimate."""

    seconds_per_unit: float
    measured: bool


def paces(timed: Iterable[tuple[str, float, float]],
          priors: Mapping[str, float] = PRIOR_SECONDS_PER_UNIT) -> dict[str, Pace]:
    """Per kind of stage, from its finished stages' ``(kind, seconds, units)``:

        pace(kind) = sum of their seconds / sum of their units

    and the prior (``measured`` False) for a kind none of whose stages has finished."""
    seconds: dict[str, float] = defaultdict(float)
    units: dict[str, float] = defaultdict(float)
    for kind, stage_seconds, stage_units in timed:
        seconds[kind] += stage_seconds
        units[kind] += stage_units
    known = {kind: Pace(prior, measured=False) for kind, prior in priors.items()}
    return known | {kind: Pace(seconds[kind] / units[kind], measured=True) for kind in units if units[kind] > 0}


def expected_seconds(stage: PlannedStage, pace: Mapping[str, Pace]) -> float:
    """A stage's expected time: its units at its kind's pace."""
    return stage.units * pace[stage.kind].seconds_per_unit


def stage_left(elapsed: float, expected: float, done: float = 0.0) -> float:
    """Seconds the running stage still needs, ``elapsed`` seconds in. ``done``: the fraction of its work done since it
    (re)started (its steps, its rounds); with some done, at its own pace, ``elapsed * (1 - done) / done``; before
    that, what is left of its expected time, ``max(expected - elapsed, 0)``."""
    if done > 0:
        return elapsed * (1.0 - min(done, 1.0)) / done
    return max(expected - elapsed, 0.0)


@dataclass(frozen=True)
class StudyEstimate:
    """Where a study stands by its markers: stages finished of all, the expected seconds of each unfinished stage (in
    the plan's order) and the kinds among them whose pace is still the prior."""

    finished: int
    total: int
    left: tuple[tuple[PlannedStage, float], ...]
    estimated: tuple[str, ...]
    timed: int  # finished stages with a recorded time, the measured paces' sample

    @property
    def seconds_left(self) -> float:
        return sum(seconds for _, seconds in self.left)


def estimate(plan: Sequence[PlannedStage], priors: Mapping[str, float] = PRIOR_SECONDS_PER_UNIT) -> StudyEstimate:
    """The :class:`StudyEstimate` of ``plan`` from its stages' markers on disk."""
    timed = [(stage.kind, seconds, stage.units) for stage in plan if (seconds := stage.seconds()) is not None]
    pace = paces(timed, priors)
    unfinished = [stage for stage in plan if not stage.finished]
    estimated = tuple(sorted({stage.kind for stage in unfinished if not pace[stage.kind].measured}))
    return StudyEstimate(finished=len(plan) - len(unfinished), total=len(plan), estimated=estimated, timed=len(timed),
                         left=tuple((stage, expected_seconds(stage, pace)) for stage in unfinished))


def left_note(study: StudyEstimate, seconds: float) -> str:
    """'about 1.2 h left at the pace of the 4 finished', or, with a prior pace in it, 'about 1.2 h left (an estimate
    for rl, eval until a stage of each has run)'."""
    if not study.left:
        return "no stage left"
    if study.estimated:
        return f"about {duration(seconds)} left (an estimate for {', '.join(study.estimated)} until a stage of each " \
               "has run)"
    return f"about {duration(seconds)} left at the pace of the {study.timed} finished"


def study_progress(plan: Sequence[PlannedStage]) -> str:
    """'study: stage 7 of 20; about 5.9 h left ...': where a long study stands, from its stages' markers on disk."""
    study = estimate(plan)
    where = f"study: stage {min(study.finished + 1, study.total)} of {study.total}"
    return f"{where}; {left_note(study, study.seconds_left)}"


def duration(seconds: float) -> str:
    """42 -> '42 s', 62 -> '1 min', 7200 -> '2.0 h': the unit a person reads a wait in."""
    if seconds < 59.5:
        return f"{max(0, round(seconds))} s"
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{round(seconds / 60)} min"


class StagePlan:
    """A study's stage plan (``Study`` inherits it; it uses its folders, config and arms)."""

    out: Path
    config: Any
    arms: list[Arm]

    def stage_plan(self) -> list[PlannedStage]:
        """Every stage :meth:`run` runs, in its order (an SFT warm start shared by arms once, reused evaluations not
        at all), each with the file that marks it finished. An RFT arm's training counts as an ``rl`` stage."""
        plan, seen = [], set()
        for seed in self.config.seeds:
            for arm in self.arms:
                for stage in self.arm_stages(arm, seed):
                    if stage.marker not in seen:
                        seen.add(stage.marker)
                        plan.append(stage)
        return plan

    def arm_stages(self, arm: Arm, seed: int) -> list[PlannedStage]:
        """One arm's stages for one seed, in order: its SFT warm start, its RL (or RFT) run, its evaluations
        (none for a :meth:`seed_independent` arm after the first seed: the first seed's stand for it)."""
        stages, seeds, evaluation = [], self.config.seeds, self.config.evaluation
        at = f"seed {seed} ({seeds.index(seed) + 1}/{len(seeds)})"
        if arm.demos:
            stages.append(PlannedStage("sft", self.out / f"seed{seed}" / f"sft-{arm.demos}demos" / DONE, arm.demos,
                                       f"{at} · SFT on {arm.demos} demos"))
        if arm.trains_rl:
            stages.append(PlannedStage("rl", self.out / f"seed{seed}" / arm.label / DONE, arm.episodes,
                                       f"{at} · {arm.label} {'RL' if self.rft_entry(arm) is None else 'RFT'}"))
        if seed == seeds[0] or not self.seed_independent(arm):
            stages += [PlannedStage("eval", self.out / "evals" / arm.label / f"seed{seed}-{panel}.json",
                                    evaluation.panel_size(panel) * evaluation.samples_per_task,
                                    f"{at} · eval {arm.label} on {panel}") for panel in self.panel_names()]
        return stages

    def finished(self, arm: Arm) -> bool:
        """Whether every stage of ``arm`` has finished for every seed of the study."""
        return all(stage.finished for seed in self.config.seeds for stage in self.arm_stages(arm, seed))
