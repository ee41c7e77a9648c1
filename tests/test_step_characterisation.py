"""Characterisation of one training step, recorded before the trainer was split into modules (issue 26).

For each algorithm, and for the features the step switches on (null control, dynamic sampling, TIS, the
history window, the KL in PPO's reward, a critic whose values are not 0), one step on fixed inputs (the
scripted Signals backend, the tiny seeded model): the advantages TRL's loss reads, the loss mask and its token
count, the loss, the critic's loss, targets and values, and the step's metrics; then, for PPO and turn-level
RLOO, two real optimizer steps (logged numbers and the weights). Every number must match the recording
(``step_characterisation.json``) to 1e-4 (what another CPU's float32 kernels differ by): a refactoring that
changes any of them changed behaviour.

Re-record only on purpose (a deliberate change of the numbers): ``TURNGYM_RECORD_STEP=1 pytest <this file>``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import pytest
import torch
from helpers_llm import scripted_signals_backend, tiny_llama, word_tokenizer

from turngym.envs.signals import signal_tasks
from turngym.trainers.config import TurnGymConfig
from turngym.trainers.trainer import TurnGymTrainer

pytestmark = pytest.mark.usefixtures("one_torch_thread")

RECORDING = Path(__file__).with_name("step_characterisation.json")
RECORD = os.environ.get("TURNGYM_RECORD_STEP") == "1"
SIGNALS = {"turns": 3, "colours": 2}
# float32 kernels sum in another order on another CPU (AVX2 against AVX-512): the recording replayed on an AVX2 EPYC
# differed by up to 6.4e-5 relative (a critic's explained variance) and 7.8e-7 absolute (an advantage of 9e-4 made
# by cancellation; losses of whitened advantages, about 1e-8, by 2.4e-8). A change of behaviour moves numbers by
# far more than that.
TOLERANCE = 1e-4  # relative
ABSOLUTE = 2e-6

# name: (config overrides, how the step is set up)
CASES: dict[str, dict] = {
    "ppo": {"algorithm": "ppo", "max_completion_length": 256},
    "grpo": {"algorithm": "grpo"},
    "rloo": {"algorithm": "rloo"},
    "turn_rloo": {"algorithm": "turn_rloo"},
    "turn_grpo": {"algorithm": "turn_grpo", "scale_rewards": "batch"},
    "gigpo": {"algorithm": "gigpo", "gamma": 0.95, "step_advantage_weight": 0.5},
    "ppo-values": {"algorithm": "ppo", "max_completion_length": 256, "_critic_head": True, "value_clip": 0.05},
    "ppo-raw-no-bootstrap": {"algorithm": "ppo", "max_completion_length": 256, "_critic_head": True,
                             "whiten_advantages": False, "lam": 0.9, "bootstrap_truncated": False, "gamma": 0.9},
    "ppo-null": {"algorithm": "ppo", "max_completion_length": 256, "_critic_head": True,
                 "shuffle_advantages": True},
    "ppo-kl-reward": {"algorithm": "ppo", "_saved": True, "beta": 0.5, "kl_penalty": "reward",
                      "whiten_advantages": False, "_critic_head": True},
    "ppo-warmup": {"algorithm": "ppo", "critic_warmup_steps": 1, "_critic_head": True},
    "turn_rloo-null": {"algorithm": "turn_rloo", "shuffle_advantages": True},
    "gigpo-null-step": {"algorithm": "gigpo", "shuffle_advantages": True, "shuffle_scope": "step"},
    "grpo-drop": {"algorithm": "grpo", "dynamic_sampling": "drop", "_silence_first_group": True},
    "turn_rloo-drop-null": {"algorithm": "turn_rloo", "dynamic_sampling": "drop", "shuffle_advantages": True,
                            "_silence_first_group": True},
    "turn_rloo-tis": {"algorithm": "turn_rloo", "tis_cap": 2.0},
    "turn_rloo-tis-2-updates": {"algorithm": "turn_rloo", "tis_cap": 1.5, "num_iterations": 2},
    "turn_rloo-kl-loss": {"algorithm": "turn_rloo", "_saved": True, "beta": 0.1},
    "turn_rloo-window": {"algorithm": "turn_rloo", "history_window": 1, "tis_cap": 2.0, "_saved": True,
                         "beta": 0.04},
    "turn_grpo-window-drop": {"algorithm": "turn_grpo", "history_window": 2, "dynamic_sampling": "drop",
                              "_silence_first_group": True, "steps_per_generation": 3,
                              "gradient_accumulation_steps": 3, "per_device_train_batch_size": 4,
                              "num_generations": 4},
}
TRAINED = {"ppo-train": {"algorithm": "ppo", "_critic_head": True, "max_steps": 2, "critic_learning_rate": 1e-2},
           "turn_rloo-train": {"algorithm": "turn_rloo", "max_steps": 2, "tis_cap": 2.0}}
# Logged keys that measure time, not behaviour.
UNTIMED = ("time", "runtime", "per_second", "total_flos")


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return word_tokenizer(tmp_path_factory.mktemp("words"))


@pytest.fixture(scope="module")
def recording():
    if RECORD:
        found: dict = {}
        yield found
        RECORDING.write_text("{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}"
                                                  for k, v in sorted(found.items())) + "\n}\n")
    else:
        yield json.loads(RECORDING.read_text())


def make_trainer(tmp_path: Path, tokenizer, case: dict) -> TurnGymTrainer:
    options = {k: v for k, v in case.items() if not k.startswith("_")}
    fields = {"output_dir": str(tmp_path / "run"), "env_id": "turngym/Signals-v0", "env_kwargs": SIGNALS,
              "reward_mode": "dense", "action_format": "last_line", "max_new_tokens_per_turn": 2,
              "num_generations": 4, "per_device_train_batch_size": 8, "max_steps": 1, "learning_rate": 1e-2,
              "logging_steps": 1, "report_to": "none", "save_strategy": "no", "max_completion_length": 64,
              "seed": 0, "disable_tqdm": True, "tis_cap": None, "episode_samples": 0}
    model = tiny_llama(len(tokenizer)).train()
    if case.get("_saved"):  # loaded from a folder: TRL builds the reference model from it (beta > 0)
        from transformers import AutoModelForCausalLM

        model.save_pretrained(tmp_path / "policy")
        model = AutoModelForCausalLM.from_pretrained(tmp_path / "policy").train()
    trainer = TurnGymTrainer(model, TurnGymConfig(**{**fields, **options}), tasks=signal_tasks("train", 8, **SIGNALS),
                             processing_class=tokenizer, backend=scripted_signals_backend(tokenizer))
    if case.get("_critic_head"):  # a value head that is not 0, so the values reach GAE and the value loss
        generator = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for name, parameter in trainer.critic.named_parameters():
                if "score" in name:
                    parameter.copy_(0.3 * torch.randn(parameter.shape, generator=generator))
    if case.get("_silence_first_group"):  # the step's first group scores 0 on every turn
        from tests.test_trainer import _silence_first_group

        _silence_first_group(trainer)
    return trainer


def numbers(tensor: torch.Tensor | None) -> list | None:
    return None if tensor is None else tensor.detach().float().tolist()


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value).encode()).hexdigest()


def gradients(model) -> list[list[float]]:
    """Per parameter: the sum and the sum of squares of its gradient (None: no gradient)."""
    return [[float(p.grad.double().sum()), float(p.grad.double().square().sum())] if p.grad is not None else None
            for p in model.parameters()]


def last_metrics(trainer: TurnGymTrainer) -> dict[str, float]:
    return {key: float(values[-1]) for key, values in trainer._metrics["train"].items() if values}


def one_step(trainer: TurnGymTrainer) -> dict:
    batch = next(iter(trainer.get_train_dataloader()))
    output = trainer._generate_and_score_completions(batch)
    mask = output["completion_mask"] * output["tool_mask"]
    record = {"advantages": numbers(output["advantages"]), "loss_mask": mask.tolist(),
              "num_items_in_batch": float(output["num_items_in_batch"]),
              "rows": digest([output["prompt_ids"].tolist(), output["completion_ids"].tolist(),
                              output["prompt_mask"].tolist(), output["completion_mask"].tolist()])}
    for key in ("old_per_token_logps", "ref_per_token_logps", "sampling_per_token_logps"):
        if output.get(key) is not None:
            record[key] = numbers(output[key] * mask)
    if "returns" in output:
        record["returns"] = numbers(output["returns"] * mask)
        record["old_values"] = numbers(output["old_values"] * mask)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by TRL's training loop
    trainer.model.zero_grad(set_to_none=True)
    loss = trainer._compute_loss(trainer.model, output)
    record["loss"] = float(loss)
    if loss.requires_grad:
        loss.backward()
    record["gradient"] = gradients(trainer.model)
    if trainer.critic.enabled:  # the value loss's backward ran inside the loss
        record["critic_gradient"] = gradients(trainer.critic)
    record["advantages_in_loss"] = numbers(output["advantages"])  # TIS weighs them in the loss's forward
    record["metrics"] = last_metrics(trainer)
    return record


def trained(trainer: TurnGymTrainer) -> dict:
    trainer.train()
    logged = [{k: float(v) for k, v in row.items() if isinstance(v, int | float) and not any(t in k for t in UNTIMED)}
              for row in trainer.state.log_history]
    weights = {"policy": [float(p.detach().double().abs().sum()) for p in trainer.model.parameters()]}
    if trainer.critic.enabled:
        weights["critic"] = [float(p.detach().double().abs().sum()) for p in trainer.critic.parameters()]
    return {"logged": logged, "weights": weights}


def assert_same(got, expected, where: str) -> None:
    """Equal structure; numbers equal to 1e-6 (absolute, or relative for large ones); NaN where NaN was."""
    if isinstance(expected, dict):
        assert isinstance(got, dict) and set(got) == set(expected), (
            f"{where}: keys differ: missing {sorted(set(expected) - set(got))}, new {sorted(set(got) - set(expected))}")
        for key in expected:
            assert_same(got[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), f"{where}: length {len(got)} != {len(expected)}"
        for i, (a, b) in enumerate(zip(got, expected, strict=True)):
            assert_same(a, b, f"{where}[{i}]")
    elif expected is None or isinstance(expected, str):
        assert got == expected, f"{where}: {got!r} != {expected!r}"
    elif isinstance(expected, float) and math.isnan(expected):
        assert isinstance(got, float) and math.isnan(got), f"{where}: {got} is not NaN"
    else:
        assert got == pytest.approx(expected, rel=TOLERANCE, abs=ABSOLUTE), f"{where}: {got} != {expected}"


def check(name: str, got: dict, recording: dict) -> None:
    got = json.loads(json.dumps(got))  # as recorded (NaN and inf included)
    if RECORD:
        recording[name] = got
        return
    assert name in recording, f"no recording for {name}: record with TURNGYM_RECORD_STEP=1"
    assert_same(got, recording[name], name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_step_is_the_recorded_one(tmp_path, tokenizer, recording, name):
    trainer = make_trainer(tmp_path, tokenizer, CASES[name])
    check(name, one_step(trainer), recording)


@pytest.mark.parametrize("name", sorted(TRAINED))
def test_two_optimizer_steps_are_the_recorded_ones(tmp_path, tokenizer, recording, name):
    trainer = make_trainer(tmp_path, tokenizer, TRAINED[name])
    check(name, trained(trainer), recording)
