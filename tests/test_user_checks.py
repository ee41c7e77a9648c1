"""Issue 47.6: what a demanding user expects. `turngym check` shows exactly what the model will see (the rendered
first prompt and its token count, the tools, the first turn's delta); `turngym eval --compare` sets two saved
evaluations side by side, paired by task, with the intervals `turngym compare` uses; game generation says what it
prepares and that it is a one-time cost. (The one-line summary per training step: tests/test_train_runs.py.) Played
as a user runs them: the CLI in a subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import README_MODULE, REPO_ROOT
from tests.test_tools_docs import TOOLS_MODULE, tools_world_code

RULE = "-" * 80


def turngym(folder: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(REPO_ROOT)])}
    return subprocess.run([sys.executable, "-m", "turngym.recipes.cli", *argv], capture_output=True, text=True,
                          timeout=300, env=env, cwd=folder, check=False)


def blocks(text: str) -> list[str]:
    """The texts printed between two rules."""
    return re.findall(rf"{RULE}\n(.*?)\n{RULE}", text, flags=re.DOTALL)


def test_check_shows_the_first_prompt_its_tokens_and_the_first_delta(readme_world, tiny_policy):
    from transformers import AutoTokenizer

    done = turngym(readme_world, "check", "--import", README_MODULE, "--env", "myorg/GuessNumber-v0", "--model",
                   str(tiny_policy))
    assert done.returncode == 0, done.stderr[-3000:]
    prompt, delta = blocks(done.stdout)
    count = int(re.search(r"first prompt \((\d+) tokens\)", done.stdout).group(1))
    tokenizer = AutoTokenizer.from_pretrained(tiny_policy)
    assert len(tokenizer(prompt, add_special_tokens=False)["input_ids"]) == count  # the ids, shown as text
    assert "I am thinking of a number between 1 and 20." in prompt and prompt.endswith("Action:")
    assert "tools: none" in done.stdout
    assert "turn 1: a reply of" in done.stdout and "parsed as '10' (valid)" in done.stdout  # the expert's first guess
    assert re.search(r"No, (higher|lower)\.", delta) and delta.rstrip().endswith("Action:")
    appended = int(re.search(r"the world's answer appends (\d+) tokens", done.stdout).group(1))
    assert len(tokenizer(delta, add_special_tokens=False)["input_ids"]) == appended


def test_check_shows_the_worlds_tools_and_the_tool_message(readme_world, tiny_policy):
    (readme_world / f"{TOOLS_MODULE}.py").write_text(tools_world_code())
    done = turngym(readme_world, "check", "--import", TOOLS_MODULE, "--env", "myorg/GuessNumberTools-v0",
                   "--protocol", "tools", "--model", str(tiny_policy), "--max-new-tokens", "200")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "tools (2; calls read in the hermes syntax):" in done.stdout
    prompt, delta = blocks(done.stdout)
    assert '"name": "guess"' in prompt and '"name": "give_up"' in prompt  # SmolLM2's template: in the system message
    assert "(valid)" in done.stdout and "<|im_start|>tool" in delta and re.search(r"No, (higher|lower)\.", delta)
    short = turngym(readme_world, "check", "--import", TOOLS_MODULE, "--env", "myorg/GuessNumberTools-v0",
                    "--protocol", "tools", "--model", str(tiny_policy), "--max-new-tokens", "8")
    assert "cut at 8 tokens (--max-new-tokens)" in short.stdout and "invalid" in short.stdout


@pytest.fixture
def two_evaluations(readme_world) -> Path:
    for agent in ("oracle", "random"):
        done = turngym(readme_world, "eval", "--import", README_MODULE, "--env", "myorg/GuessNumber-v0", "--agent",
                       agent, "--episodes", "5", "--workers", "0", "--out", f"runs/{agent}")
        assert done.returncode == 0, done.stderr[-3000:]
    return readme_world


def test_eval_compares_two_saved_evaluations_paired_by_task(two_evaluations):
    import json

    from turngym.agents.intervals import paired_comparison

    done = turngym(two_evaluations, "eval", "--compare", "runs/oracle", "runs/random/random.jsonl")
    assert done.returncode == 0, done.stderr
    header, _, row = done.stdout.splitlines()[:3]
    assert header.startswith("| a | b | tasks | success a (95 % CI) | success b (95 % CI) | a - b (95 % CI)")
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[:4] == ["oracle", "random", "5", "100.0 % (56.6-100.0)"]
    won = {}
    for agent in ("oracle", "random"):
        rows = [json.loads(line) for line in (two_evaluations / "runs" / agent / f"{agent}.jsonl").read_text()
                .splitlines()]
        won[agent] = {r["task"]["id"]: float(r["won"]) for r in rows}
    expected = paired_comparison({0: won["oracle"]}, {0: won["random"]})  # the function turngym compare uses
    assert cells[5].startswith(f"{100 * expected['mean']:+.1f} points")
    assert cells[6:] == [str(expected["gained"]), str(expected["lost"])]
    assert "t over tasks (one seed" in done.stdout and "McNemar exact p" in done.stdout


def test_eval_compare_errors_are_one_line(two_evaluations):
    done = turngym(two_evaluations, "eval", "--compare", "runs", "runs/random")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("turngym eval: error: --compare runs: a folder must hold exactly one trajectories file")
    missing = turngym(two_evaluations, "eval", "--compare", "runs/nope.jsonl", "runs/random")
    assert missing.returncode == 2 and "no such file or folder" in missing.stderr


def test_game_generation_says_what_it_prepares_and_that_it_is_paid_once(tmp_path, capsys):
    from turngym.envs.textworld.generation import generate_games

    generate_games([("w1-o1-q1", 5)], root=tmp_path)
    shown = capsys.readouterr().err
    assert "generating 1 TextWorld w1-o1-q1 games (0 cached; a one-time cost, kept in " in shown
    generate_games([("w1-o1-q1", 5)], root=tmp_path)  # cached: nothing to say, nothing to wait for
    assert "generating" not in capsys.readouterr().err
