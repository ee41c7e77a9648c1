"""Playing TextWorld episodes with a generation backend, for the real-vLLM tests (test_vllm.py on CPU, test_gpu.py)."""

from __future__ import annotations

import torch

from turngym.agents.backends import HFBackend
from turngym.agents.llm import LLMAgent, LLMAgentConfig, reply_format
from turngym.agents.rollout import run_episodes
from turngym.envs.vector import LocalPool

ENV_ID = "turngym/TextWorld-v0"
MAX_TURNS = 4


def textworld_panel(n: int = 4):
    from turngym.envs.textworld import materialise, textworld_tasks

    return materialise(textworld_tasks("w2-o3-q4", "eval", n=n), workers=1, progress=False)


def agent_config(**overrides) -> LLMAgentConfig:
    action_format, response_prefix = reply_format(ENV_ID)
    settings = {"action_format": action_format, "response_prefix": response_prefix, "temperature": 0.0,
                "max_new_tokens": 24, "seed": 0}
    return LLMAgentConfig(**{**settings, **overrides})


def play(backend, tokenizer, tasks, config: LLMAgentConfig):
    pool = LocalPool.from_id(ENV_ID, len(tasks), env_kwargs={"tasks": tasks, "max_turns": MAX_TURNS})
    try:
        return run_episodes(LLMAgent(backend, tokenizer, config), pool, list(tasks), seed=0)
    finally:
        pool.close()


def hf_backend(model, tokenizer) -> HFBackend:
    return HFBackend(model, pad_id=tokenizer.pad_token_id)


def model_logprobs(model, record) -> list[float]:
    """The trainer's logprobs (HF, teacher-forced, T = 1) at the record's sampled tokens (env_mask 1)."""
    ids = torch.tensor([record.prompt_ids + record.completion_ids], device=model.device)
    with torch.no_grad():
        logits = model(ids).logits[0, len(record.prompt_ids) - 1 : -1].float()
    targets = torch.tensor(record.completion_ids, device=logits.device)[:, None]
    chosen = torch.log_softmax(logits, -1).gather(-1, targets)[:, 0]
    return [float(lp) for lp, mask in zip(chosen, record.env_mask, strict=True) if mask]


def sampled_logprobs(record) -> list[float]:
    return [lp for lp, mask in zip(record.logprobs, record.env_mask, strict=True) if mask]


def turns_sampled(record) -> list[list[int]]:
    """The model's ids of each turn, read back from the record (env_mask 1)."""
    return [[token for token, mask, index in zip(record.completion_ids, record.env_mask, record.turn_index,
                                                  strict=True) if mask and index == turn]
            for turn in range(len(record.turn_ends))]


class EngineOutputs:
    """A ``vllm.LLM`` that keeps the token ids of every completion as they left the engine (``RequestOutput``), so
    a test compares what the record trains on with what vLLM itself sampled, not with the backend's reading."""

    def __init__(self, llm) -> None:
        self.llm, self.sampled = llm, []

    def generate(self, prompts, params, **kwargs):
        outputs = self.llm.generate(prompts, params, **kwargs)
        self.sampled.extend(list(output.outputs[0].token_ids) for output in outputs)
        return outputs


class ClientOutputs:
    """TRL's ``VLLMClient`` keeping the token ids of every completion as the server sent them (server mode's
    ``EngineOutputs``)."""

    def __init__(self, client) -> None:
        self.client, self.sampled = client, []

    def generate(self, **kwargs):
        output = self.client.generate(**kwargs)
        self.sampled.extend(list(ids) for ids in output["completion_ids"])
        return output


def greedy_turn(backend, tokenizer, tasks) -> list[int]:
    """The first turn's sampled ids on the first task (greedy)."""
    record = play(backend, tokenizer, tasks.take(1), agent_config())[0].record
    return record.completion_ids[: record.turn_ends[0] + 1]


def forbid_first_token(model, tokenizer, tasks) -> int:
    """Change ``model`` so its greedy first token on the first task cannot stay: that token's head row gets a
    logit of -100 there (SmolLM2 ties the head to the embeddings); one MLP is scaled too (packed weights)."""
    record = play(hf_backend(model, tokenizer), tokenizer, tasks.take(1), agent_config())[0].record
    token = record.completion_ids[0]
    with torch.no_grad():
        hidden = model.model(torch.tensor([record.prompt_ids], device=model.device)).last_hidden_state[0, -1].float()
        row = model.get_output_embeddings().weight[token]
        row -= ((row.float() @ hidden + 100.0) / (hidden @ hidden) * hidden).to(row.dtype)
        for parameter in model.model.layers[5].mlp.parameters():
            parameter.mul_(1.25)
    return token


def sampled_logprob_gaps(backend, model, tokenizer, tasks) -> list[float]:
    """Play ``tasks`` at temperature 1 through ``backend`` (a ``VLLMBackend``, colocated or server mode); check the
    record holds exactly the ids that left vLLM, and return |vLLM's logprob - the model's teacher-forced one| for
    every sampled token."""
    from turngym.agents.backends import VLLMBackend

    if backend.llm is not None:
        outputs = EngineOutputs(backend.llm)
        recording = VLLMBackend(llm=outputs)
    else:
        outputs = ClientOutputs(backend.client)
        recording = VLLMBackend(client=outputs)
    trajectories = play(recording, tokenizer, tasks, agent_config(temperature=1.0))
    recorded = [turn for t in trajectories for turn in turns_sampled(t.record)]
    # a turn that hit max_new_tokens gets an end-of-turn token that was not sampled (masked out): never here
    assert sorted(map(tuple, recorded)) == sorted(map(tuple, outputs.sampled))
    return [abs(a - b) for t in trajectories
            for a, b in zip(sampled_logprobs(t.record), model_logprobs(model, t.record), strict=True)]


def greedy_logprob_gaps_against_hf(backend, model, tokenizer, tasks) -> list[float]:
    """Play ``tasks`` greedily through ``backend`` and through the HF backend; check the episodes are the same token
    for token (and multi-turn), and return |logprob gap| for every sampled token."""
    config = agent_config()
    hf = play(hf_backend(model, tokenizer), tokenizer, tasks, config)
    ours = play(backend, tokenizer, tasks, config)
    gaps = []
    for mine, theirs in zip(ours, hf, strict=True):
        assert mine.record.prompt_ids == theirs.record.prompt_ids
        assert mine.record.completion_ids == theirs.record.completion_ids, mine.task["id"]
        assert mine.record.env_mask == theirs.record.env_mask
        assert (mine.actions, mine.turn_rewards, mine.won) == (theirs.actions, theirs.turn_rewards, theirs.won)
        gaps += [abs(a - b) for a, b in zip(sampled_logprobs(mine.record), sampled_logprobs(theirs.record),
                                            strict=True)]
    assert sum(t.num_turns for t in ours) >= 2 * len(tasks)  # multi-turn episodes, not one-liners
    return gaps


def check_sampling_with_split_prefills(backend) -> None:
    """Eight 1500-token prompts (12k tokens) overflow one step's 4096-token budget, so prefills are split: vLLM's
    CPU build then rewinds per-request generators, which CPU generators cannot do; no request may carry a seed."""
    from turngym.agents.backends import GenerationRequest, SamplingConfig

    requests = [GenerationRequest(key, [1] + [100 + key + i % 500 for i in range(1500)], seed=key) for key in range(8)]
    generations = backend.generate(requests, SamplingConfig(temperature=1.0, max_new_tokens=2), stop_ids=[2])
    assert [len(g.ids) for g in generations] == [2] * 8 and all(len(g.logprobs) == 2 for g in generations)
