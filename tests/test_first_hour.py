"""A new user's first hour: the run says when its first rollouts can teach nothing (and what to do), an SFT
warm start from the world's walkthroughs in the train command itself, rollout progress that moves."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest

from turngym.agents.backends import ScriptedBackend
from turngym.agents.llm import LLMAgent, LLMAgentConfig
from turngym.agents.rollout import run_episodes
from turngym.envs.signals import signal_tasks
from turngym.envs.vector import LocalPool
from turngym.trainers.metrics import no_signal_advice

pytestmark = pytest.mark.usefixtures("one_torch_thread")

FREE_FORM = SimpleNamespace(sft_demos=0, skip_train_tasks=0, action_protocol="free_form", response_prefix="Action:",
                            reward_mode="sparse")


def test_advice_only_when_nothing_can_be_learned():
    for invalid, tied in ((0.9, 0.5), (0.0, 0.99)):
        metrics = {"episode/invalid_action_rate": invalid, "advantages/frac_zero_groups": tied}
        assert no_signal_advice(metrics, FREE_FORM) is None
    invalid = no_signal_advice({"episode/invalid_action_rate": 1.0, "advantages/frac_zero_groups": 0.5}, FREE_FORM)
    assert invalid.startswith("no learning signal in the first rollouts: 100% of actions invalid, so RL")
    tied = no_signal_advice({"episode/invalid_action_rate": 0.2, "advantages/frac_zero_groups": 1.0}, FREE_FORM)
    assert "every task's episodes scored the same" in tied and "invalid" not in tied.split("Try")[0]


def test_advice_names_only_the_remedies_not_taken():
    metrics = {"episode/invalid_action_rate": 1.0, "advantages/frac_zero_groups": 1.0}
    everything = no_signal_advice(metrics, SimpleNamespace(sft_demos=0, action_protocol="free_form",
                                                           response_prefix="", reward_mode="sparse"))
    assert all(fix in everything for fix in ("--sft_demos 16", "--action_protocol choose_index",
                                             "--response_prefix 'Action:'", "--reward_mode dense", "a larger model"))
    taken = no_signal_advice(metrics, SimpleNamespace(sft_demos=8, action_protocol="choose_index",
                                                      response_prefix="Action:", reward_mode="dense"))
    assert not any(fix in taken for fix in ("--sft_demos", "choose_index", "--response_prefix", "--reward_mode"))
    assert "a larger model" in taken


def test_when_every_episode_won_the_advice_is_dense_rewards_or_harder_tasks():
    """A warm-started policy that wins every training episode: nothing to compare, and a warm start, a protocol or
    a larger model would not help."""
    won = {"episode/invalid_action_rate": 0.0, "advantages/frac_zero_groups": 1.0, "episode/success": 1.0}
    advice = no_signal_advice(won, FREE_FORM)
    assert "every episode won, so every advantage is 0" in advice
    assert "--reward_mode dense" in advice and "harder tasks" in advice
    assert not any(fix in advice for fix in ("--sft_demos", "choose_index", "larger model", "--skip_train_tasks"))
    warmed = no_signal_advice(won, SimpleNamespace(**{**vars(FREE_FORM), "sft_demos": 8, "reward_mode": "dense"}))
    assert "RL on tasks the warm start did not see (--skip_train_tasks 8)" in warmed and "--reward_mode" not in warmed


def test_the_rollout_bar_counts_turns_and_tokens(tokenizer, capsys):
    agent = LLMAgent(ScriptedBackend(lambda request: "Action: 1", tokenizer.encode), tokenizer,
                     LLMAgentConfig(max_new_tokens=8))
    pool = LocalPool.from_id("turngym/Signals-v0", 2)
    played = run_episodes(agent, pool, list(signal_tasks("train", n=2, turns=3)), progress="rollouts")
    shown = capsys.readouterr().err
    turns = sum(t.num_turns for t in played)
    assert f"turns {turns}, tokens {agent.sampled_tokens:,}" in shown and agent.sampled_tokens > 0 and turns >= 6


def train_readme_world(tmp_path, tiny_policy, **overrides):
    from turngym.trainers.config import TurnGymConfig
    from turngym.trainers.trainer import TurnGymTrainer

    fields = {"output_dir": str(tmp_path / "run"), "model_name_or_path": str(tiny_policy),
              "env_id": "myorg/GuessNumber-v0", "imports": ["readme_guess_number"], "max_steps": 1,
              "num_generations": 2, "per_device_train_batch_size": 4, "num_train_tasks": 2, "max_turns": 2,
              "max_new_tokens_per_turn": 2, "max_completion_length": 64, "action_format": "last_line",
              "report_to": "none", "save_strategy": "no", "disable_tqdm": True, "logging_steps": 1, **overrides}
    trainer = TurnGymTrainer(args=TurnGymConfig(**fields))
    trainer.train()
    return trainer


def test_a_first_step_without_signal_says_what_to_do(readme_world, tiny_policy, caplog):
    """The tiny policy cannot win a guess in two turns: every group ties, and the run says so, once."""
    with caplog.at_level(logging.WARNING, logger="turngym.trainers.trainer"):
        trainer = train_readme_world(readme_world, tiny_policy, max_steps=2)
    first = next(row for row in trainer.state.log_history if "advantages/frac_zero_groups" in row)
    assert first["advantages/frac_zero_groups"] == 1.0
    warned = [r.getMessage() for r in caplog.records if "no learning signal" in r.getMessage()]
    assert len(warned) == 1 and "--sft_demos 16" in warned[0]


def test_sft_demos_warm_starts_the_policy_before_rl(readme_world, tiny_policy):
    """--sft_demos N: SFT on the oracle's first N train tasks, in the RL run's chat format, saved under the run's
    folder; RL starts from it (its weights differ from the base's), and a resumed run reuses it."""
    from safetensors.torch import load_file

    longer = {"max_turns": None, "max_new_tokens_per_turn": 4, "max_completion_length": 256}  # binary search: 4 turns
    trainer = train_readme_world(readme_world, tiny_policy, sft_demos=3, learning_rate=0.0, **longer)
    warm = readme_world / "run" / "sft-warm-start"
    stats = json.loads((warm / "sft_demos.json").read_text())
    assert stats["kept"] == 3
    started_from = load_file(warm / "model.safetensors")
    base = load_file(tiny_policy / "model.safetensors")
    policy = trainer.accelerator.unwrap_model(trainer.model).state_dict()
    name = next(n for n in started_from if n.endswith("mlp.down_proj.weight"))
    assert policy[name].equal(started_from[name]) and not started_from[name].equal(base[name])
    (warm / "model.safetensors").unlink()  # a reused folder is not trained again: loading it would now fail
    with pytest.raises(OSError):
        train_readme_world(readme_world, tiny_policy, sft_demos=3, learning_rate=0.0, **longer)


def test_sft_demos_needs_the_model_by_name(tiny_policy, tmp_path):
    from turngym.trainers.config import TurnGymConfig
    from turngym.trainers.trainer import TurnGymTrainer

    config = TurnGymConfig(output_dir=str(tmp_path), model_name_or_path=str(tiny_policy), env_id="turngym/Signals-v0",
                           sft_demos=2, report_to="none")
    with pytest.raises(ValueError, match="sft_demos warm-starts the policy from its name"):
        TurnGymTrainer(object(), args=config, processing_class=object())


def test_train_needs_a_world_not_a_model_name():
    """The README's command names the world only: the policy defaults to SmolLM2. A bare command still stops."""
    from turngym.recipes.commands.common import UsageError
    from turngym.recipes.commands.training import _require_something_to_run

    _require_something_to_run(["--env_id", "myorg/GuessNumber-v0"], "turngym train", "x.yaml")
    _require_something_to_run(["--config", "x.yaml"], "turngym train", "x.yaml")
    with pytest.raises(UsageError, match="at least --env_id"):
        _require_something_to_run(["--learning_rate", "1e-5"], "turngym train", "x.yaml")


def test_your_world_trained_as_the_readme_says(readme_world, tiny_policy, capsys):
    """The README's train and eval commands for its own world, verbatim but for a tiny policy and a tiny budget
    appended (later options win): the warm start, RL from it, and the trained policy's evaluation all run."""
    import shlex

    from tests.conftest import README_MODULE, readme_world_code
    from turngym.recipes.cli import main

    commands = [shlex.split(line.split("#", 1)[1]) for line in readme_world_code().splitlines()
                if line.startswith("#   turngym ")]
    train = next(c for c in commands if c[1] == "train" and "--sft_demos" in c)
    evaluate = next(c for c in commands if c[1] == "eval" and "llm" in c)
    rename = {"guess_number": README_MODULE}
    tiny = ["--model_name_or_path", str(tiny_policy), "--max_steps", "1", "--num_generations", "2",
            "--per_device_train_batch_size", "2", "--sft_demos", "2", "--max_new_tokens_per_turn", "4",
            "--max_completion_length", "256", "--report_to", "none", "--save_strategy", "no", "--disable_tqdm",
            "true", "--threads", "1", "--num_train_epochs", "1"]
    assert main([rename.get(word, word) for word in train[1:]] + tiny) == 0
    output = readme_world / train[train.index("--output_dir") + 1]
    assert (output / "sft-warm-start" / "sft_demos.json").is_file() and (output / "model.safetensors").is_file()
    assert main([rename.get(word, word) for word in evaluate[1:]] + ["--episodes", "2", "--max-new-tokens", "4",
                                                                     "--workers", "0"]) == 0
    assert "| llm" in capsys.readouterr().out


def test_a_busy_machine_gets_a_threads_hint(capsys, monkeypatch):
    import torch

    from turngym.recipes.commands.common import set_threads

    monkeypatch.setattr("os.cpu_count", lambda: 2)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert set_threads(None, load=0.5) is None
        hint = set_threads(None, load=3.0)
        assert "load 3.0 on 2 cores" in hint and "--threads 1" in hint and hint in capsys.readouterr().err
        assert set_threads(1, load=3.0) is None and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)
