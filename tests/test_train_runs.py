"""Issue 47.1 and 47.6: `turngym train` into a folder that holds a run resumes it or refuses in one line, runs never
mix in one folder, Ctrl-C stops with one line that says what was saved and how to resume, and every step prints one
summary line. Played as a user runs them: the CLI in a subprocess, reruns into the same folder, SIGINT to the
process group (as a terminal's Ctrl-C sends it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import README_MODULE, REPO_ROOT

SLOW_WORLD = f'''
import os
import time

import turngym
from {README_MODULE} import GuessNumber


class SlowGuess(GuessNumber):
    """The README's world, slowed down (0.2 s to start an episode; 1 s while a file `slow` is in the folder it runs
    in), so that a run is still going when it is stopped, however loaded the machine."""

    def _start(self, task):
        time.sleep(1.0 if os.path.exists("slow") else 0.2)
        return super()._start(task)


turngym.register("myorg/SlowGuess-v0", entry_point=SlowGuess)
'''


def command(policy: Path, out: str = "run", *extra: str, world: str = README_MODULE,
            env_id: str = "myorg/GuessNumber-v0") -> list[str]:
    return [sys.executable, "-m", "turngym.recipes.cli", "train", "--import", world, "--env_id", env_id,
            "--model_name_or_path", str(policy), "--output_dir", out, "--num_generations", "2",
            "--per_device_train_batch_size", "4", "--num_train_tasks", "2", "--max_turns", "2",
            "--max_new_tokens_per_turn", "2", "--max_completion_length", "64", "--action_format", "last_line",
            "--report_to", "none", "--disable_tqdm", "true", "--threads", "1", *extra]


def environment(folder: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(REPO_ROOT)])}


def train(folder: Path, argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=500, env=environment(folder), cwd=folder,
                          check=False)


def messages(stderr: str) -> list[str]:
    """turngym's own lines (not library warnings, weight loading bars or TRL's metric dicts)."""
    return [line for line in stderr.splitlines() if line.startswith("turngym ")]


def samples(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "run" / "episode_samples.jsonl").read_text().splitlines()]


@pytest.mark.slow  # three CLI runs: 30-70 s; the Ctrl-C test below reruns the same command in the fast suite
def test_a_rerun_of_the_same_command_says_finished_and_another_config_is_refused(readme_world, tiny_policy):
    first = train(readme_world, command(tiny_policy, "run", "--max_steps", "2", "--save_steps", "1"))
    assert first.returncode == 0, first.stderr
    summary = [line for line in first.stderr.splitlines() if line.startswith("step ")]
    assert [line.split(":")[0] for line in summary] == ["step 1/2", "step 2/2"]  # one line per step
    assert all("success" in line and "return" in line and "invalid" in line and line.endswith(" s")
               for line in summary)
    assert "{'loss'" not in first.stdout + first.stderr  # the line replaces transformers' metrics dict
    run = json.loads((readme_world / "run" / "turngym_run.json").read_text())
    assert run["finished"] == 2 and {row["run"] for row in samples(readme_world)} == {run["run_id"]}

    same = train(readme_world, command(tiny_policy, "run", "--max_steps", "2", "--save_steps", "1"))
    assert same.returncode == 0 and "holds this run, finished at step 2" in same.stdout

    other = train(readme_world, command(tiny_policy, "run", "--max_steps", "2", "--learning_rate", "3e-4"))
    assert other.returncode == 2
    (line,) = messages(other.stderr)
    assert line.startswith("turngym train: error: --output_dir run holds another run (checkpoint-2, step 2 of 2")
    assert "learning_rate" in line and "--resume" in line and "--overwrite" in line


@pytest.mark.slow  # three CLI runs: 40-80 s; resuming is in the fast suite through Ctrl-C (below) and test_trainer.py
def test_resume_continues_the_run_and_overwrite_clears_the_folder(readme_world, tiny_policy):
    first = train(readme_world, command(tiny_policy, "run", "--max_steps", "1", "--save_steps", "1"))
    assert first.returncode == 0, first.stderr
    run_id = json.loads((readme_world / "run" / "turngym_run.json").read_text())["run_id"]

    longer = train(readme_world, command(tiny_policy, "run", "--max_steps", "2", "--save_steps", "1", "--resume"))
    assert longer.returncode == 0, longer.stderr
    assert "turngym train: resuming from checkpoint-1, step 1 of 2" in messages(longer.stderr)
    assert [row["step"] for row in samples(readme_world)] == [1] * 4 + [2] * 4
    assert {row["run"] for row in samples(readme_world)} == {run_id}  # the same run, continued

    fresh = train(readme_world, command(tiny_policy, "run", "--max_steps", "1", "--overwrite"))
    assert fresh.returncode == 0, fresh.stderr
    assert any(m.startswith("turngym train: --overwrite: deleted the run in run (checkpoint-2")
               for m in messages(fresh.stderr))
    new_id = json.loads((readme_world / "run" / "turngym_run.json").read_text())["run_id"]
    assert new_id != run_id and {row["run"] for row in samples(readme_world)} == {new_id}
    assert [row["step"] for row in samples(readme_world)] == [1] * 4
    assert not (readme_world / "run" / "checkpoint-2").exists()  # cleared before the new run


def _default_sigint() -> None:
    """A child started by a shell in the background inherits SIGINT ignored, and Python then never turns Ctrl-C into
    KeyboardInterrupt: give the run the default handling a terminal's foreground process has."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_prints_one_line_and_the_same_command_resumes(readme_world, tiny_policy):
    (readme_world / "slow_guess.py").write_text(SLOW_WORLD)
    (readme_world / "slow").touch()  # slower while it is to be stopped: the signal must find it running
    argv = command(tiny_policy, "run", "--max_steps", "8", "--save_steps", "1", world="slow_guess",
                   env_id="myorg/SlowGuess-v0")
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=environment(readme_world), cwd=readme_world, start_new_session=True,
                               preexec_fn=_default_sigint)  # noqa: PLW1509 - one call, no lock held
    deadline = time.monotonic() + 120
    while not (readme_world / "run" / "checkpoint-1").is_dir() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.3)
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C in a terminal: the whole process group
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    (line,) = [m for m in messages(stderr) if "stopped" in m]
    assert line.startswith("turngym train: stopped at step ") and "; saved checkpoint-" in line
    assert line.endswith(" --resume") and "resume with: turngym train --import slow_guess" in line
    saved = int(line.split("saved checkpoint-")[1].split(" ")[0])
    assert (readme_world / "run" / f"checkpoint-{saved}").is_dir() and saved < 8

    (readme_world / "slow").unlink()
    again = train(readme_world, argv)  # the same command again: it resumes
    assert again.returncode == 0, again.stderr
    assert f"turngym train: resuming from checkpoint-{saved}, step {saved} of 8" in messages(again.stderr)
    steps = [row["step"] for row in samples(readme_world)]
    assert steps == sorted(steps) and steps[-1] == 8  # the stopped run's rows after its checkpoint were dropped
    assert len(steps) == 4 * 8 and len({row["run"] for row in samples(readme_world)}) == 1


def test_the_step_line_beside_a_progress_bar(capsys):
    """With tqdm's bar (the default), the line is written above it, in place of the metrics dict."""
    from types import SimpleNamespace

    from turngym.trainers.runs import StepProgress

    progress = StepProgress()
    state = SimpleNamespace(global_step=3, max_steps=14, is_world_process_zero=True, is_local_process_zero=True)
    progress.on_log(None, state, None, logs={"episode/success": 0.25, "episode/return": 0.25,
                                             "episode/invalid_action_rate": 0.125, "loss": 0.1})
    progress.on_log(None, state, None, logs={"train_runtime": 12.0})  # the final summary: no line
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("step 3/14: success 25.0 %, return 0.250, invalid 12.5 %, ") and line.endswith(" s")


@pytest.mark.parametrize(("minutes", "saves"), [(5.0, [False, False, True, False]), (0.0, [False] * 4)])
def test_a_checkpoint_every_few_minutes(tmp_path, minutes, saves):
    from types import SimpleNamespace

    from turngym.trainers.runs import TimedCheckpoints

    now = [0.0]
    callback = TimedCheckpoints(minutes, clock=lambda: now[0])
    seen = []
    args = SimpleNamespace(output_dir=str(tmp_path))
    for step, minute in enumerate((1, 4, 6, 7), 1):
        now[0] = 60.0 * minute
        state, control = SimpleNamespace(global_step=step, is_world_process_zero=True), SimpleNamespace(
            should_save=False)
        callback.on_step_end(args, state, control)
        seen.append(control.should_save)
        if control.should_save:
            callback.on_save(args, state, control)
    assert seen == saves


def test_only_the_newest_timed_checkpoint_is_kept(tmp_path):
    """Each checkpoint is the whole training state: timed ones replace each other; save_steps' stay."""
    from types import SimpleNamespace

    from turngym.trainers.runs import TimedCheckpoints

    now = [0.0]
    callback = TimedCheckpoints(5.0, clock=lambda: now[0])
    args = SimpleNamespace(output_dir=str(tmp_path))
    for step, minute, by_steps in ((1, 6, False), (2, 7, True), (3, 12, False), (4, 18, False)):
        now[0] = 60.0 * minute
        state = SimpleNamespace(global_step=step, is_world_process_zero=True)
        control = SimpleNamespace(should_save=by_steps)  # step 2: save_steps asked for it first
        callback.on_step_end(args, state, control)
        if control.should_save:
            (tmp_path / f"checkpoint-{step}").mkdir()  # what the trainer saves
            callback.on_save(args, state, control)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-2", "checkpoint-4"]


def test_what_counts_as_a_run_in_a_folder(tmp_path):
    from turngym.trainers.runs import RUN_FILE, RunFolder

    (tmp_path / RUN_FILE).write_text('{"run_id": "abc"}')  # a run that stopped before its first step
    assert not RunFolder.read(tmp_path).holds_run
    (tmp_path / "episode_samples.jsonl").write_text("{}\n")
    assert RunFolder.read(tmp_path).holds_run and RunFolder.read(tmp_path).describe() == "no checkpoint"
    (tmp_path / "checkpoint-3").mkdir()
    (tmp_path / "checkpoint-12").mkdir()
    assert RunFolder.read(tmp_path).describe(14) == "checkpoint-12, step 12 of 14"  # by step, not by name
