"""Says, while a study runs, which stage is running, for how long, and what is left of it and of the whole study.

Two lines per stage on stdout, readable in a log file: when it starts (which stage of the plan, its expected time,
the study's time so far and left) and when it ends (how long it took). On a terminal, also a live status line
(tqdm, refreshed every second) above the stage's own progress bars:

    stage 5/20 · seed 0 (1/3) · ppo RL · step 3/8 · 2:01, about 2:40 left · study about 1.1 h left

The arithmetic is :mod:`turngym.recipes.study_progress`'s; the time left comes from the stages finished so far
(prior paces, labelled estimates, for kinds not yet run).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Self

from turngym.recipes.study_progress import PlannedStage, StudyEstimate, duration, estimate, left_note, stage_left


class StudyClock:
    """A study's stage lines and live status. ``begin`` when a stage starts (the previous one has then ended),
    ``progress`` as it advances, ``close`` (or leave the ``with`` block) when the study ends. ``enabled`` False: says
    nothing. ``live``: the status line (default: when stderr is a terminal)."""

    def __init__(self, plan: Sequence[PlannedStage], *, enabled: bool = True, live: bool | None = None,
                 clock: Callable[[], float] = time.monotonic, write: Callable[[str], None] | None = None) -> None:
        self.plan, self.enabled, self.clock = list(plan), enabled, clock
        self.live = enabled and (sys.stderr.isatty() if live is None else live)
        self.write = write or self._write
        self.started = self.stage_started = clock()
        self.study: StudyEstimate = estimate(self.plan)
        self.stage: PlannedStage | None = None
        self.position, self.expected = 0, 0.0  # the running stage's place in the plan and expected seconds
        # its progress: what it says ("step 3/8"), the step this leg began at, the fraction of the leg done
        self.step, self.first_step, self.done = "", None, 0.0
        self.bar: Any = None
        self.stopped = threading.Event()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- stage lines
    def begin(self, title: str) -> None:
        """A stage starts: the plan's first unfinished stage (the study runs them in the plan's order)."""
        if not self.enabled:
            return
        self.end()
        self.study = estimate(self.plan)
        self.stage, self.expected = self.study.left[0] if self.study.left else (None, 0.0)
        self.position = self.study.finished + 1
        self.stage_started, self.step, self.first_step, self.done = self.clock(), "", None, 0.0
        self.write(f"\n== {title}")
        if self.stage is not None:
            self.write(f"   study: stage {self.position} of {self.study.total} ({self.stage.name}): about "
                       f"{duration(self.expected)}; {duration(self.elapsed())} elapsed, "
                       f"{left_note(self.study, self.study.seconds_left)}")
            self._open_bar()
        self.refresh()

    def end(self) -> None:
        """The running stage's line, if it finished (a stage stopped by an error or Ctrl-C says nothing)."""
        stage, self.stage = self.stage, None
        if stage is None or not stage.finished:
            return
        took = self.clock() - self.stage_started
        self.study = estimate(self.plan)
        self.write(f"   finished stage {self.position} of {self.study.total} ({stage.name}) in {duration(took)} "
                   f"(expected {duration(self.expected)}); {duration(self.elapsed())} elapsed, "
                   f"{left_note(self.study, self.study.seconds_left)}")

    def close(self) -> None:
        """The last stage's line; the status line goes."""
        if not self.enabled:
            return
        self.end()
        self.stopped.set()
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    # ---------------------------------------------------------------- live status
    def progress(self, done: int, total: int, label: str) -> None:
        """The running stage has done ``done`` of ``total`` (steps, rounds); ``label`` says so ("step 3/8"). Its
        first call in a stage is where this leg began (a resumed stage's earlier steps are not this leg's pace)."""
        if self.first_step is None:
            self.first_step = done
        todo = total - self.first_step
        self.done = (done - self.first_step) / todo if todo > 0 else 0.0
        self.step = label
        self.refresh()

    def status(self) -> str:
        """The live line: the stage, its progress, its time so far and left, the study's time left."""
        if self.stage is None:
            return ""
        elapsed = self.clock() - self.stage_started
        left = stage_left(elapsed, self.expected, self.done)
        after = sum(seconds for _, seconds in self.study.left[1:])
        estimated = " (an estimate)" if self.study.estimated else ""
        parts = [f"stage {self.position}/{self.study.total}", self.stage.name, self.step,
                 f"{clock_time(elapsed)}, about {clock_time(left)} left", f"study about {duration(left + after)} left"]
        return " · ".join(part for part in parts if part) + estimated

    def refresh(self) -> None:
        if self.bar is not None:
            self.bar.set_description_str(self.status())

    def elapsed(self) -> float:
        return self.clock() - self.started

    def _open_bar(self) -> None:
        """The live status line and the thread that refreshes it every second (a terminal only)."""
        if not self.live or self.bar is not None:
            return
        from tqdm.auto import tqdm

        self.bar = tqdm(bar_format="{desc}", leave=False, dynamic_ncols=True, file=sys.stderr)
        threading.Thread(target=self._tick, name="study-clock", daemon=True).start()

    def _tick(self) -> None:
        while not self.stopped.wait(1.0):
            self.refresh()

    def _write(self, line: str) -> None:
        if self.bar is None:
            print(line, flush=True)
            return
        from tqdm.auto import tqdm

        tqdm.write(line, file=sys.stdout)  # above the status line, which is redrawn
        sys.stdout.flush()


def clock_time(seconds: float) -> str:
    """125 -> '2:05', 3725 -> '1:02:05'."""
    minutes, secs = divmod(max(0, round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def steps_callback(clock: StudyClock | None) -> Any:
    """A ``TrainerCallback`` telling ``clock`` each step of an RL stage (from the step it resumes at)."""
    from transformers import TrainerCallback

    class StageSteps(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.tell(state)

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.tell(state)

        @staticmethod
        def tell(state: Any) -> None:
            if clock is not None:
                clock.progress(state.global_step, state.max_steps, f"step {state.global_step}/{state.max_steps}")

    return StageSteps()
