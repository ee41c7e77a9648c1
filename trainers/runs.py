"""A training run's folder (``output_dir``): which run it holds, its checkpoints, and the callbacks that keep a run
resumable and readable: a checkpoint every few minutes (:class:`TimedCheckpoints`) and one line per step
(:class:`StepSummary`).

A run writes ``turngym_run.json`` (:data:`RUN_FILE`) when it starts: its id, its config (the fields that decide what
it trains) and the command. Every row of ``episode_samples.jsonl`` carries that id, so two runs never mix in one
folder; ``turngym train`` resumes a folder's run when the config is the same, refuses otherwise (``--resume``,
``--overwrite``), and clears the folder before an overwrite.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import ProgressCallback

logger = logging.getLogger(__name__)

RUN_FILE = "turngym_run.json"
SAMPLES_FILE = "episode_samples.jsonl"  # trainers.metrics.EPISODE_SAMPLES
# Fields that do not change what a run trains: a rerun that differs only in these is the same run.
NOT_THE_RUN = frozenset({"output_dir", "logging_dir", "resume_from_checkpoint", "overwrite_output_dir", "run_name",
                         "save_minutes", "disable_tqdm", "save_steps", "save_strategy", "save_total_limit",
                         "logging_steps", "report_to", "project", "trackio_space_id", "push_to_hub"})
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


def run_fields(config: Any) -> dict[str, Any]:
    """The fields of ``config`` (a TrainingArguments) that decide what the run trains, as JSON values."""
    values = config.to_dict() if hasattr(config, "to_dict") else dict(vars(config))
    return json.loads(json.dumps({k: v for k, v in values.items() if k not in NOT_THE_RUN}, default=str))


@dataclass
class RunFolder:
    """What ``output_dir`` holds: the run file's record (or None), its checkpoints by step, and any other files."""

    path: Path
    record: dict[str, Any] | None = None
    checkpoints: dict[int, Path] = field(default_factory=dict)
    other_files: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, output_dir: str | Path) -> RunFolder:
        path = Path(output_dir).expanduser()
        folder = cls(path)
        if not path.is_dir():
            return folder
        for item in sorted(path.iterdir()):
            match = _CHECKPOINT.match(item.name)
            if match and item.is_dir():
                folder.checkpoints[int(match.group(1))] = item
            elif item.name == RUN_FILE:
                try:
                    folder.record = json.loads(item.read_text())
                except (OSError, json.JSONDecodeError):
                    folder.record = {}
            else:
                folder.other_files.append(item.name)
        return folder

    @property
    def holds_run(self) -> bool:
        """A run (finished, stopped or of an older turngym) left something here to lose: a checkpoint, samples or a
        saved model. (A run file alone, of a run that stopped before its first step, is not worth a refusal.)"""
        markers = {SAMPLES_FILE, "model.safetensors", "adapter_model.safetensors", "trainer_state.json"}
        return bool(self.checkpoints) or bool(markers & set(self.other_files))

    @property
    def latest(self) -> tuple[int, Path] | None:
        """The newest checkpoint (step, folder), or None."""
        return max(self.checkpoints.items()) if self.checkpoints else None

    def total_steps(self) -> int | None:
        """The run's planned steps, from its newest checkpoint's trainer state."""
        latest = self.latest
        try:
            return int(json.loads((latest[1] / "trainer_state.json").read_text())["max_steps"]) if latest else None
        except (OSError, ValueError, KeyError):
            return None

    def same_run(self, config: Any) -> bool:
        """``config`` trains what the folder's run trains (its run file says so)."""
        return bool(self.record) and self.record.get("config") == run_fields(config)

    def describe(self, total: int | None = None) -> str:
        """``checkpoint-4, step 4 of 14`` (``total``: the planned steps, default the checkpoint's) or
        ``no checkpoint``."""
        latest = self.latest
        if latest is None:
            return "no checkpoint"
        total = total if total and total > 0 else self.total_steps()
        return f"{latest[1].name}, step {latest[0]}" + (f" of {total}" if total else "")

    def clear(self) -> None:
        """Delete everything in the folder (the folder stays)."""
        for item in self.path.iterdir():
            if item.is_dir() and not item.is_symlink():
                shutil.rmtree(item)
            else:
                item.unlink()
        self.record, self.checkpoints, self.other_files = None, {}, []


def start_run(output_dir: str | Path, config: Any, command: list[str], *, run_id: str | None = None) -> str:
    """Write the run file (a new id unless ``run_id``, a resumed run's); returns the id."""
    path = Path(output_dir).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    run_id = run_id or uuid.uuid4().hex[:12]
    record = {"run_id": run_id, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "command": command, "config": run_fields(config)}
    (path / RUN_FILE).write_text(json.dumps(record, indent=1))
    return run_id


def finish_run(output_dir: str | Path, step: int) -> None:
    """Mark the run in ``output_dir`` finished at ``step`` (a rerun of the same config then says so)."""
    path = Path(output_dir) / RUN_FILE
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    record["finished"] = step
    path.write_text(json.dumps(record, indent=1))


def run_id_of(output_dir: str | Path) -> str | None:
    """The id of the run that writes to ``output_dir`` (its run file's), or None."""
    try:
        return json.loads((Path(output_dir) / RUN_FILE).read_text()).get("run_id")
    except (OSError, ValueError, AttributeError):
        return None


def keep_samples_up_to(output_dir: str | Path, step: int) -> int:
    """Drop the rows of ``episode_samples.jsonl`` after ``step`` (a resumed run plays those steps again); returns
    how many were dropped."""
    path = Path(output_dir) / SAMPLES_FILE
    if not path.is_file():
        return 0
    kept, dropped = [], 0
    for line in path.read_text().splitlines():
        try:
            later = json.loads(line).get("step", 0) > step
        except (ValueError, AttributeError):
            later = False
        if later:
            dropped += 1
        else:
            kept.append(line)
    path.write_text("".join(f"{line}\n" for line in kept))
    return dropped


class TimedCheckpoints(TrainerCallback):
    """A checkpoint at the end of the first step that ends ``minutes`` after the last one (or the start), besides
    ``save_steps``: a run longer than a few minutes can always be resumed. Only the newest of these timed checkpoints
    is kept (each is the whole training state: the policy, its optimizer, the critic), never one of ``save_steps``'."""

    def __init__(self, minutes: float, clock=time.monotonic) -> None:
        self.seconds, self.clock = 60.0 * minutes, clock
        self.last = clock()
        self.pending: int | None = None  # the step whose save this callback asked for
        self.previous: Path | None = None  # the last timed checkpoint kept

    def on_train_begin(self, args, state, control, **kwargs):
        self.last = self.clock()

    def on_step_end(self, args, state, control, **kwargs):
        if self.seconds > 0 and self.clock() - self.last >= self.seconds and not control.should_save:
            control.should_save = True
            self.pending = state.global_step
        return control

    def on_save(self, args, state, control, **kwargs):
        self.last = self.clock()
        if self.pending is None or self.pending != state.global_step:
            return  # a save_steps checkpoint: kept, as save_total_limit says
        self.pending = None
        saved = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if self.previous is not None and self.previous != saved and state.is_world_process_zero:
            shutil.rmtree(self.previous, ignore_errors=True)
        self.previous = saved


class StepSummary(TrainerCallback):
    """One line per logged training step on stderr, in place of transformers' metrics dict (``PrinterCallback``):
    ``step 3/14: success 25.0 %, return 0.250, invalid 12.5 %, 41.2 s``."""

    def __init__(self, stream=None, clock=time.monotonic) -> None:
        self.stream, self.clock = stream, clock
        self.last = clock()

    def on_train_begin(self, args, state, control, **kwargs):
        self.last = self.clock()

    def line(self, state, logs: dict[str, Any] | None) -> str | None:
        """The step's line (or a held-out evaluation's), or None for other logs (the final summary)."""
        logs = logs or {}
        if isinstance(logs.get("eval/success"), (int, float)):  # a held-out evaluation during training
            found = f"eval at step {state.global_step}: success {100 * logs['eval/success']:.1f} %"
            found += "".join(f", {label} {logs[key]:.3f}" for key, label in (("eval/return", "return"),)
                             if isinstance(logs.get(key), (int, float)))
            worlds = sorted(key.split("/", 2)[2] for key, value in logs.items()  # each world's panel, by name
                            if key.startswith("eval/success/") and isinstance(value, (int, float)))
            return found + "".join(f"; {world} {100 * logs['eval/success/' + world]:.1f} %" for world in worlds)
        if "episode/success" not in logs and "reward" not in logs:
            return None
        now = self.clock()
        seconds, self.last = now - self.last, now
        return f"step {state.global_step}/{state.max_steps}: {summary_cells(logs)}, {seconds:.1f} s"

    def on_log(self, args, state, control, logs=None, **kwargs):
        line = self.line(state, logs)
        if line and state.is_world_process_zero:
            print(line, file=self.stream or sys.stderr, flush=True)


class StepProgress(ProgressCallback):
    """transformers' progress bar with :class:`StepSummary`'s line per step written above it, in place of the
    metrics dict."""

    def __init__(self) -> None:
        super().__init__()
        self.summary = StepSummary()

    def on_train_begin(self, args, state, control, **kwargs):
        super().on_train_begin(args, state, control, **kwargs)
        self.summary.on_train_begin(args, state, control)

    def on_log(self, args, state, control, logs=None, **kwargs):
        line = self.summary.line(state, logs)
        if line and state.is_world_process_zero:
            from tqdm.auto import tqdm

            tqdm.write(line, file=sys.stderr)


def step_lines(trainer: Any) -> None:
    """Give ``trainer`` one summary line per step in place of transformers' metrics dicts: the progress bar keeps
    its place (:class:`StepProgress`), or, without it (``disable_tqdm``), :class:`StepSummary` prints."""
    from transformers.trainer_callback import PrinterCallback

    if any(isinstance(c, ProgressCallback) for c in trainer.callback_handler.callbacks):
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(StepProgress())
    else:
        trainer.remove_callback(PrinterCallback)
        trainer.add_callback(StepSummary())


def summary_cells(logs: dict[str, Any]) -> str:
    """``success 25.0 %, return 0.250, invalid 12.5 %`` from a step's logged metrics (what is there)."""
    cells = []
    for key, label, percent in (("episode/success", "success", True), ("episode/return", "return", False),
                                ("episode/invalid_action_rate", "invalid", True)):
        value = logs.get(key, logs.get("reward") if label == "return" else None)
        if value is not None:
            cells.append(f"{label} {100 * value:.1f} %" if percent else f"{label} {value:.3f}")
    return ", ".join(cells) or "no episode metrics"
