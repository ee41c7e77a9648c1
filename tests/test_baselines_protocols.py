"""Issue 47.2: a baseline means something under every protocol. Under ``--protocol tools`` the random agent picks
among the world's own calls (``info["admissible_calls"]``, from ``TextEnv._command_call``), as the oracle's
walkthrough does; a baseline whose every action was invalid says so. Played as a user runs them: the CLI in a
subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import README_MODULE, REPO_ROOT
from tests.test_tools_docs import TOOLS_MODULE, tools_world_code

REFUSING_WORLD = f'''
import turngym
from {README_MODULE} import GuessNumber


class Refusing(GuessNumber):
    """Lists numbers as admissible but refuses every command: nothing a baseline does reaches the world."""

    def _validate_command(self, command):
        return "this world accepts nothing"


turngym.register("myorg/Refusing-v0", entry_point=Refusing)
'''


def turngym(folder: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(REPO_ROOT)])}
    return subprocess.run([sys.executable, "-m", "turngym.recipes.cli", *argv], capture_output=True, text=True,
                          timeout=300, env=env, cwd=folder, check=False)


def row(table: str, agent: str) -> list[str]:
    (line,) = [line for line in table.splitlines() if line.startswith(f"| {agent} |")]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_random_plays_the_worlds_own_tools_under_the_tools_protocol(readme_world):
    (readme_world / f"{TOOLS_MODULE}.py").write_text(tools_world_code())
    done = turngym(readme_world, "eval", "--import", TOOLS_MODULE, "--env", "myorg/GuessNumberTools-v0",
                   "--protocol", "tools", "--agent", "random", "--episodes", "5", "--workers", "0")
    assert done.returncode == 0, done.stderr
    cells = row(done.stdout, "random")
    assert cells[1] == "tools"
    assert cells[7] == "0.0 %", done.stdout  # every call is a guess(number) the world accepts
    assert "warning" not in done.stderr


def test_the_admissible_calls_are_the_worlds_calls(readme_world):
    import gymnasium as gym

    (readme_world / f"{TOOLS_MODULE}.py").write_text(tools_world_code())
    __import__(TOOLS_MODULE)
    env = gym.make("myorg/GuessNumberTools-v0", action_protocol="tools").unwrapped
    _, info = env.reset(seed=0)
    assert len(info["admissible_calls"]) == 20 and '"name": "guess"' in info["admissible_calls"][0]
    _, _, _, _, step = env.step(info["admissible_calls"][3])
    assert not step["invalid_action"] and step["admissible_calls"] == info["admissible_calls"]
    _, free = gym.make("myorg/GuessNumberTools-v0").unwrapped.reset(seed=0)
    assert "admissible_calls" not in free  # only under the tools protocol


@pytest.mark.parametrize("protocol", ["free_form", "tools"])
def test_a_baseline_whose_every_action_is_invalid_warns(readme_world, protocol):
    (readme_world / "refusing.py").write_text(REFUSING_WORLD)
    done = turngym(readme_world, "eval", "--import", "refusing", "--env", "myorg/Refusing-v0", "--protocol",
                   protocol, "--agent", "random", "--episodes", "2", "--workers", "0")
    assert done.returncode == 0, done.stderr
    assert row(done.stdout, "random")[7] == "100.0 %"
    assert re.search(r"warning: every action of the random baseline was invalid \(" + protocol, done.stderr)
