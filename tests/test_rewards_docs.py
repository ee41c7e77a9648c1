"""docs/rewards.md's worked examples, evaluated and trained by the commands written there (a tiny policy, a tiny
budget appended): a world a judge grades, and a world whose customer a model plays. The tiny judge's replies are never
verdicts, so every episode must come out flagged ``judge_failed``, with the world's own reward, never a silent judge
score of 0. The tiny customer's replies are noise, but the records decide: the oracle must still win every episode."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.usefixtures("one_torch_thread")
MODULE = "docs_explain"


def doc_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (REPO_ROOT / "docs" / "rewards.md").read_text(), flags=re.DOTALL)


def world_code() -> str:
    (block,) = [b for b in doc_blocks() if "class Explain" in b]
    return block


def commands(code: str | None = None, name: str = "explain", module: str = MODULE) -> list[list[str]]:
    """The ``turngym`` commands written in a block's comments, its module's name replaced by ``module``."""
    return [[{name: module}.get(word, word) for word in shlex.split(line.split("#", 1)[1])]
            for line in (code or world_code()).splitlines() if line.startswith("#   turngym ")]


@pytest.fixture
def explain_world(tmp_path, monkeypatch, tiny_policy):
    (tmp_path / f"{MODULE}.py").write_text(world_code())
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JUDGE", str(tiny_policy))
    return tmp_path


def test_the_docs_judged_world_is_evaluated_and_trained_by_its_commands(explain_world, tiny_policy, capsys):
    from turngym.recipes.cli import main

    evaluate, train, after = commands()
    assert evaluate[1] == "eval" and train[1] == "train" and after[1] == "eval"
    assert main([*evaluate[1:], "--episodes", "1", "--workers", "0"]) == 0
    out = capsys.readouterr().out
    assert "| oracle" in out and "| random" in out
    records = [json.loads(line) for path in (explain_world / "runs" / "explain-eval").rglob("*.jsonl")
               for line in path.read_text().splitlines() if line.strip()]
    assert records and all(r["reward_components"].get("judge_failed") == 1.0 for r in records)
    assert all("judge" not in r["reward_components"] and r["episode_reward"] == 0.0 for r in records)
    tiny = ["--model_name_or_path", str(tiny_policy), "--max_steps", "1", "--num_generations", "2",
            "--per_device_train_batch_size", "2", "--max_completion_length", "128", "--report_to", "none",
            "--save_strategy", "no", "--disable_tqdm", "true", "--threads", "1", "--num_train_epochs", "1",
            "--max_new_tokens_per_turn", "16"]
    assert main(train[1:] + tiny) == 0
    # GDPO through the trainer: the rollout's reward components reach the estimator (the tiny judge reports none:
    # every judgement failed, so only the world's own components are there to weight)
    gdpo = [*train[1:], "--algorithm", "gdpo", "--component_weights", '{"outcome": 1, "judge_failed": 0.1}',
            "--output_dir", "runs/explain-gdpo"]
    assert main(gdpo + tiny) == 0
    assert main([*after[1:], "--episodes", "1", "--workers", "0", "--max-new-tokens", "16"]) == 0
    assert "| llm" in capsys.readouterr().out


def test_the_docs_trl_snippet_builds_two_reward_functions(monkeypatch):
    from turngym.agents import judge_models

    (block,) = [b for b in doc_blocks() if "trl_reward_function" in b]
    monkeypatch.setattr(judge_models, "make_judge_model", lambda spec: judge_models.OpenAIJudgeModel(
        spec.split(":", 1)[1], client=object()))
    scope: dict = {}
    exec(block, scope)  # noqa: S102 - the documentation's own snippet
    assert [f.__name__ for f in scope["reward_funcs"]] == ["judge_pointwise", "judge_group"]


SUPPORT = "docs_support"


@pytest.fixture
def support_world(tmp_path, monkeypatch, tiny_policy):
    (block,) = [b for b in doc_blocks() if "SupportDeskEnv" in b]
    (tmp_path / f"{SUPPORT}.py").write_text(block)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, SUPPORT, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUSTOMER", str(tiny_policy))
    return block


def test_the_docs_simulated_user_world_is_evaluated_and_trained_by_its_commands(support_world, tiny_policy, capsys):
    from turngym.recipes.cli import main

    evaluate, train, after = commands(support_world, "support", SUPPORT)
    assert evaluate[1] == "eval" and train[1] == "train" and after[1] == "eval"
    assert main([*evaluate[1:], "--episodes", "3", "--workers", "0"]) == 0
    assert re.search(r"\| oracle \| free_form \| support/eval \| 3 \| 100.0 %", capsys.readouterr().out)
    records = [json.loads(line) for path in Path("runs/support-eval").glob("oracle.jsonl")
               for line in path.read_text().splitlines() if line.strip()]
    said = [o for r in records for o in r["observations"] if o.startswith("Customer: ")]
    assert len(records) == 3 and said  # the model customer answered the oracle's questions, and the records decided
    tiny = ["--model_name_or_path", str(tiny_policy), "--max_steps", "1", "--num_generations", "2",
            "--per_device_train_batch_size", "2", "--max_completion_length", "128", "--report_to", "none",
            "--save_strategy", "no", "--disable_tqdm", "true", "--threads", "1", "--num_train_epochs", "1",
            "--max_new_tokens_per_turn", "16", "--max_turns", "3"]
    assert main(train[1:] + tiny) == 0
    assert main([*after[1:], "--episodes", "1", "--workers", "0", "--max-new-tokens", "16", "--max-turns", "3"]) == 0
    assert "| llm" in capsys.readouterr().out
