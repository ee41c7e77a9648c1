"""Issue 47.4: every error one line, every crash counted. A YAML value of the wrong type names the file and the field;
a world that raises is counted (env_error) in the eval table, with its tracebacks in a log file, one line on the
console and a non-zero exit; the "no learning signal" advice names only remedies the protocol accepts. Played as a
user runs them: the CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import README_MODULE, REPO_ROOT
from tests.test_train_runs import command
from turngym.trainers.metrics import no_signal_advice

CRASHING_WORLD = f'''
import turngym
from {README_MODULE} import GuessNumber


class Crashing(GuessNumber):
    """The README's world with a bug: guessing 10 divides by zero."""

    def _execute(self, command):
        if command == "10":
            raise ZeroDivisionError("the world divided by zero")
        return super()._execute(command)


turngym.register("myorg/Crashing-v0", entry_point=Crashing)
'''


def turngym(folder: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(REPO_ROOT)])}
    return subprocess.run([sys.executable, "-m", "turngym.recipes.cli", *argv], capture_output=True, text=True,
                          timeout=300, env=env, cwd=folder, check=False)


def own_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "turngym" in line and ": error:" in line]


@pytest.mark.parametrize(("yaml_text", "message", "in_a_subprocess"), [
    ("env_id: turngym/Signals-v0\nmax_steps: [1, 2]\n", "field max_steps must be an integer, got a list ([1, 2])",
     True),  # as a user runs it; the other two in this process (a CLI start costs 6-20 s)
    ("env_id: turngym/Signals-v0\nenv_kwargs: [3]\n", "field env_kwargs must be a mapping, got a list ([3])", False),
    ("env_id: turngym/Signals-v0\nuse_vllm: {a: 1}\n", "field use_vllm must be true or false, got a mapping", False),
])
def test_a_yaml_value_of_the_wrong_type_names_the_file_and_the_field(tmp_path, yaml_text, message, in_a_subprocess,
                                                                     monkeypatch, capsys):
    (tmp_path / "run.yaml").write_text(yaml_text)
    argv = ["train", "--config", "run.yaml", "--output_dir", "out"]
    if in_a_subprocess:
        done = turngym(tmp_path, *argv)
        code, stderr = done.returncode, done.stderr
    else:
        from turngym.recipes.cli import main

        monkeypatch.chdir(tmp_path)
        try:
            code = main(argv)
        except SystemExit as stop:
            code = stop.code
        stderr = capsys.readouterr().err
    assert code == 2 and "Traceback" not in stderr
    (line,) = own_lines(stderr)
    assert line == f"turngym train: error: config file run.yaml: {message}" or line.startswith(
        f"turngym train: error: config file run.yaml: {message}")


def test_every_shipped_train_config_passes_the_type_check():
    import dataclasses

    import yaml

    from turngym.trainers.config import TurnGymConfig
    from turngym.trainers.config_cli import yaml_type_problems
    from turngym.trainers.sft import TurnGymSFTConfig

    checked = 0
    for config_class in (TurnGymConfig, TurnGymSFTConfig):
        known = {f.name for f in dataclasses.fields(config_class)} | {"env"}
        for path in sorted((REPO_ROOT / "recipes" / "configs").rglob("*.yaml")):
            data = yaml.safe_load(path.read_text())
            if isinstance(data, dict) and set(data) <= known:
                assert yaml_type_problems(data, config_class) == [], path
                checked += 1
    assert checked >= 10


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_world_that_raises_is_counted_and_exits_non_zero(readme_world, workers):
    (readme_world / "crashing.py").write_text(CRASHING_WORLD)
    done = turngym(readme_world, "eval", "--import", "crashing", "--env", "myorg/Crashing-v0", "--agent", "oracle",
                   "--episodes", "5", "--workers", workers, "--out", "results")
    assert done.returncode == 1
    header, _, row = done.stdout.splitlines()[:3]
    assert header.endswith("| truncated | env_error |")
    assert row.startswith("| oracle |") and row.endswith(" 5 |")  # every held-out game's binary search guesses 10
    assert "Traceback" not in done.stderr and "ZeroDivisionError" not in done.stderr
    (line,) = own_lines(done.stderr)
    assert line == ("turngym eval: error: the world raised in 5 of 5 episodes (env_error in the table; they count as "
                    "failures); tracebacks in results/env_errors.log")
    log = (readme_world / "results" / "env_errors.log").read_text()
    # the world's traceback once per crashed episode, in-process and from worker processes (each respawned worker's too)
    assert log.count("Traceback (most recent call last)") == 5
    assert log.count('raise ZeroDivisionError("the world divided by zero")') == 5


def test_no_crash_no_column_no_log(readme_world):
    done = turngym(readme_world, "eval", "--import", README_MODULE, "--env", "myorg/GuessNumber-v0", "--agent",
                   "oracle", "--episodes", "2", "--workers", "0", "--out", "results")
    assert done.returncode == 0 and "env_error" not in done.stdout
    assert not (readme_world / "results" / "env_errors.log").exists()


def test_under_tools_the_advice_never_names_a_response_prefix():
    metrics = {"episode/invalid_action_rate": 1.0, "advantages/frac_zero_groups": 1.0}
    tools = no_signal_advice(metrics, SimpleNamespace(sft_demos=0, action_protocol="tools", response_prefix="",
                                                      reward_mode="sparse"))
    assert "--response_prefix" not in tools and "--max_new_tokens_per_turn" in tools
    free = no_signal_advice(metrics, SimpleNamespace(sft_demos=0, action_protocol="free_form", response_prefix="",
                                                     reward_mode="sparse"))
    assert "--response_prefix 'Action:'" in free


def test_a_tools_run_without_signal_gives_advice_tools_accepts(readme_world, tiny_policy):
    argv = command(tiny_policy, "run", "--max_steps", "1", "--action_protocol", "tools", "--save_strategy", "no")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=readme_world, check=False,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(readme_world), str(REPO_ROOT)])})
    assert done.returncode == 0, done.stderr[-3000:]
    (advice,) = [line for line in done.stderr.splitlines() if "no learning signal" in line]
    assert "--response_prefix" not in advice and "--sft_demos 16" in advice
