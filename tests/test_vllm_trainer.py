"""RL with TRL's colocated vLLM on CPU, for real (marker ``vllm``; run with ``make test-vllm``).

``TurnGymTrainer(use_vllm=True, vllm_mode="colocate")``: TRL builds the engine, in the policy's dtype (fp32 here;
TRL alone would leave vLLM's bf16), turngym's rollout samples with it, and before each step's rollout the
policy's new weights reach it (turngym's sync: TRL's fails on vLLM's CPU build in fp32). TRL's importance-sampling
metrics then show the sampler-trainer gap: fp32 kernels apart, not a stale or bf16 engine.
"""

from __future__ import annotations

import importlib
import os

import pytest

pytestmark = pytest.mark.vllm

if os.environ.get("TURNGYM_REQUIRE_VLLM") == "1":  # make test-vllm: a broken vLLM install fails, never skips
    importlib.import_module("vllm")
else:
    pytest.importorskip("vllm", reason="vLLM is not installed here: run `make test-vllm`")

import torch
from transformers import TrainerCallback

from turngym.agents.models import DEFAULT_MODEL
from turngym.trainers.config import TurnGymConfig
from turngym.trainers.trainer import TurnGymTrainer


class WeightsMoved(TrainerCallback):
    """Records, after each optimizer step, how far one trained weight matrix moved from where training started."""

    def __init__(self, model, name: str = "layers.0.mlp.down_proj.weight") -> None:
        self.parameter = next(p for n, p in model.named_parameters() if name in n and p.requires_grad)
        self.start = self.parameter.detach().clone()
        self.moved: list[float] = []

    def on_step_end(self, args, state, control, **kwargs):
        self.moved.append(float((self.parameter.detach() - self.start).abs().max()))


def colocated_config(tmp_path, learning_rate: float = 1e-4, **lora) -> TurnGymConfig:
    return TurnGymConfig(
        model_name_or_path=DEFAULT_MODEL, env_id="turngym/Signals-v0", env_kwargs={"turns": 3, "colours": 2},
        num_train_tasks=8, num_eval_tasks=0, reward_mode="dense", max_turns=3, action_protocol="admissible_in_prompt",
        action_format="prefix", response_prefix="Action:", max_new_tokens_per_turn=4,  # SmolLM2 then wins some turns
        algorithm="grpo", num_generations=4, per_device_train_batch_size=16,
        learning_rate=learning_rate, beta=0.0, temperature=1.0, max_completion_length=256, max_steps=2, use_cpu=True,
        bf16=False, report_to="none", save_strategy="no", eval_strategy="no", logging_steps=1,
        output_dir=str(tmp_path), seed=0, use_vllm=True, vllm_mode="colocate", vllm_max_model_length=1024, **lora)


def train_and_check_the_engine_sampled_the_trained_policy(trainer: TurnGymTrainer, moved: WeightsMoved) -> None:
    trainer.add_callback(moved)
    trainer.train()
    assert moved.moved[0] > 1e-5, "step 1 left the policy unchanged: nothing to sync (every advantage was 0?)"
    steps = [h for h in trainer.state.log_history if "sampling/sampling_logp_difference/max" in h]
    assert len(steps) == 2
    for step in steps:
        print({k: v for k, v in step.items() if k.startswith("sampling/")})
    # Step 2 sampled with the weights after step 1 (synced), in fp32: vLLM's logprobs are the trainer's but for
    # kernels (~1e-5 nats). A stale engine (step 0's weights) or bf16 (~0.03 mean) is orders of magnitude off.
    last = steps[-1]
    assert last["sampling/sampling_logp_difference/max"] < 1e-3
    ratios = last["sampling/importance_sampling_ratio/min"], last["sampling/importance_sampling_ratio/max"]
    assert 0.999 < ratios[0] <= ratios[1] < 1.001


def test_colocated_vllm_trains_in_fp32_and_samples_the_updated_policy(tmp_path):
    trainer = TurnGymTrainer(args=colocated_config(tmp_path))
    assert trainer.vllm_generation.llm.llm_engine.model_config.dtype == torch.float32  # the policy's, not bf16
    train_and_check_the_engine_sampled_the_trained_policy(trainer, WeightsMoved(trainer.model))


def test_colocated_vllm_samples_the_policy_with_its_trained_lora_adapters_merged(tmp_path):
    """LoRA inside the trainer: the engine holds the base weights, so each sync merges the adapters (and unmerges
    them for the next step). The adapters start as the identity (B = 0), so a large step (lr 2e-2) is what makes a
    stale engine, one sampling the base model at step 2, show in the logprob gap. The config's default LoRA dropout
    (0) matters too: at TRL's 0.05 the loss scores a dropped-out policy, 0.055 nats from the sampler's on average."""
    trainer = TurnGymTrainer(args=colocated_config(tmp_path, learning_rate=2e-2, use_peft=True, lora_r=8,
                                                   lora_alpha=32, lora_target_modules=["all-linear"]))
    assert hasattr(trainer.accelerator.unwrap_model(trainer.model), "peft_config")
    moved = WeightsMoved(trainer.model, name="layers.0.mlp.down_proj.lora_B")
    train_and_check_the_engine_sampled_the_trained_policy(trainer, moved)
    base = trainer.accelerator.unwrap_model(trainer.model).get_base_model()
    assert not any(getattr(m, "merged", False) for m in base.modules()), "a sync left the adapters merged"
