"""docs/tools.md's worked example: a user's world with two tools, evaluated and trained by the commands written
there (a tiny policy and budget appended), and its calls checked by the world."""

from __future__ import annotations

import re
import shlex

import pytest

from tests.conftest import README_MODULE, REPO_ROOT

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TOOLS_MODULE = "docs_guess_tools"


def tools_world_code() -> str:
    blocks = re.findall(r"```python\n(.*?)```", (REPO_ROOT / "docs" / "tools.md").read_text(), flags=re.DOTALL)
    (block,) = [b for b in blocks if "class GuessNumberTools" in b]
    return block.replace("from guess_number import", f"from {README_MODULE} import")


@pytest.fixture
def tools_world(readme_world, monkeypatch):
    (readme_world / f"{TOOLS_MODULE}.py").write_text(tools_world_code())
    monkeypatch.delitem(__import__("sys").modules, TOOLS_MODULE, raising=False)
    return readme_world


def commands() -> list[list[str]]:
    return [[{"guess_tools": TOOLS_MODULE}.get(word, word) for word in shlex.split(line.split("#", 1)[1])]
            for line in tools_world_code().splitlines() if line.startswith("#   turngym ")]


def test_the_two_tools_world_checks_its_calls_and_the_oracle_wins_through_them(tools_world, capsys):
    import gymnasium as gym

    from turngym.envs import check_text_env
    from turngym.envs.tools import ToolCall
    from turngym.recipes.cli import main

    __import__(TOOLS_MODULE)
    env = gym.make("myorg/GuessNumberTools-v0", action_protocol="tools").unwrapped
    assert "the walkthrough wins" in check_text_env(env)
    _, info = env.reset(seed=1)
    assert [t["function"]["name"] for t in info["tools"]] == ["guess", "give_up"]
    for action, reason in ((ToolCall("guess", {"number": 30}), "30 is greater than the maximum of 20"),
                           (ToolCall("guess", {"n": 3}), "'number' is a required property"),
                           (ToolCall("command", {"command": "3"}), "unknown tool 'command'")):
        _, _, _, _, step = env.step(action.to_action())
        assert step["invalid_action"] and reason in step["invalid_reason"]
    *_, terminated, _, step = env.step(ToolCall("give_up", {}).to_action())
    assert terminated and step["lost"]
    evaluate = next(c for c in commands() if c[1] == "eval" and "oracle" in c)
    assert main([*evaluate[1:], "--episodes", "4", "--workers", "0"]) == 0
    table = capsys.readouterr().out
    assert re.search(r"\| oracle \| tools \|[^\n]*\| 100\.0 %", table)


def test_the_two_tools_world_trains_as_the_docs_say(tools_world, tiny_policy, capsys):
    from turngym.recipes.cli import main

    train = next(c for c in commands() if c[1] == "train")
    evaluate = next(c for c in commands() if c[1] == "eval" and "llm" in c)
    tiny = ["--model_name_or_path", str(tiny_policy), "--max_steps", "1", "--num_generations", "2",
            "--per_device_train_batch_size", "2", "--sft_demos", "2", "--max_completion_length", "512",
            "--report_to", "none", "--save_strategy", "no", "--disable_tqdm", "true", "--threads", "1",
            "--num_train_epochs", "1", "--max_new_tokens_per_turn", "128"]  # the tiny tokenizer's calls are long
    assert main(train[1:] + tiny) == 0
    output = tools_world / train[train.index("--output_dir") + 1]
    demos = (output / "sft-warm-start" / "sft_demos.json").read_text()
    assert re.search(r'"kept":\s*2\b', demos)  # both oracle demos rendered as calls, read back as the same calls
    assert main(evaluate[1:] + ["--episodes", "2", "--workers", "0", "--max-new-tokens", "128"]) == 0
    assert "| llm" in capsys.readouterr().out
