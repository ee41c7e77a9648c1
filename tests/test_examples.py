"""examples/turn_rloo_minimal.py: the one-file turn-level RLOO learns Signals; a null control does not."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from tests.helpers_scripts import load_script

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def example():
    module = load_script("examples/turn_rloo_minimal.py")
    yield module
    del sys.modules[module.__name__]


@pytest.fixture(scope="module")
def policy(tmp_path_factory) -> Path:
    """A 2-layer Llama over a word-level tokenizer of the Signals vocabulary (as tests/test_trainer.py)."""
    from tests.helpers_llm import tiny_llama, word_tokenizer

    directory = tmp_path_factory.mktemp("signals-policy")
    tiny_llama(len(word_tokenizer(directory))).save_pretrained(directory)
    return directory


def make_args(example, policy: Path, **overrides):
    # One sampled token per turn (the turn is closed with an unsampled end-of-turn token, out of the loss).
    return example.Args(**{"model": str(policy), "steps": 40, "max_new_tokens": 1, **overrides})


def mean_return(history: list[dict], steps: slice) -> float:
    window = history[steps]
    return sum(h["return"] for h in window) / len(window)


@pytest.fixture(scope="module")
def learned(example, policy) -> dict:
    return example.train(make_args(example, policy))


def test_the_example_learns_the_signals_rule(learned):
    before, after, history = learned["before"], learned["after"], learned["history"]
    print(f"held-out success {before:.2f} -> {after:.2f}")
    assert len(history) == 40
    assert before <= 0.1  # a random tiny model rarely even answers with a command
    assert after >= 0.8 and after >= before + 0.3
    assert mean_return(history, slice(-5, None)) >= mean_return(history, slice(0, 5)) + 0.4
    assert any(h["clip_fraction"] > 0 for h in history)  # the second epoch is off-policy: the clip acts


@pytest.mark.slow  # a second 40-step run; the study's null arm (tests/test_recipes.py) shuffles in the fast suite
def test_shuffled_advantages_do_not_learn(example, policy, learned):
    """Null control: the same run with A_{i,t} permuted across the batch keeps its starting skill,
    so the gain above comes from advantages that belong to their actions."""
    null = example.train(make_args(example, policy, shuffle_advantages=True))
    print(f"null control: held-out success {null['before']:.2f} -> {null['after']:.2f}")
    assert null["before"] == learned["before"]  # same model, same greedy evaluation
    assert null["after"] <= null["before"] + 0.15
    assert mean_return(null["history"], slice(-5, None)) <= 0.15
    assert learned["after"] >= null["after"] + 0.6


def test_the_first_update_starts_on_policy(example, policy):
    """With the sampling weights, the recomputed logprobs equal the sampled ones (ratio 1 on every
    model token): the loss then is exactly -mean(A), here -1, and nothing is clipped. A shifted
    position, a prompt token or an environment token in the mask would break it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from turngym.envs.signals import signal_tasks
    from turngym.envs.vector import LocalPool

    args = make_args(example, policy, max_new_tokens=2)  # 2 tokens: some turns end on a sampled end-of-turn
    tokenizer = AutoTokenizer.from_pretrained(policy)
    model = AutoModelForCausalLM.from_pretrained(policy)
    pool = LocalPool.from_id("turngym/Signals-v0", 8, env_kwargs={"turns": 3, "colours": 2, "max_turns": 3})
    episodes = example.play(model, tokenizer, pool, list(signal_tasks("train", 8)), args, temperature=1.0)
    pool.close()
    ones = [[1.0] * len(e.completion_ids) for e in episodes]
    batch = example.pad_batch(episodes, ones, tokenizer.pad_token_id)
    assert batch["mask"].sum() == sum(sum(e.env_mask) for e in episodes) > 0
    with torch.no_grad():
        loss, clip_fraction = example.clipped_loss(model, batch, args)
    assert loss.item() == pytest.approx(-1.0, abs=1e-4)
    assert clip_fraction == 0.0


def test_runs_are_deterministic(example, policy):
    first, second = (example.train(make_args(example, policy, steps=3)) for _ in range(2))
    assert first["history"] == second["history"]


def test_command_line_flags(example):
    args = example.parse_args(["--model", "m", "--steps", "3", "--group-size", "6", "--lr", "0.01",
                               "--shuffle-advantages"])
    assert (args.model, args.steps, args.group_size, args.lr, args.shuffle_advantages) == ("m", 3, 6, 0.01, True)
    assert example.parse_args(["--model", "m"]) == example.Args(model="m")
    assert example.parse_args([]).model == "HuggingFaceTB/SmolLM2-135M-Instruct"  # the embedded model by default
