"""Generation backends: token ids in, sampled token ids and their logprobs out.

Every backend implements :class:`~turngym.agents.generation.TokenBackend` (the protocol and its types live in
:mod:`turngym.agents.generation`): ``generate(requests, sampling, stop_ids)`` gets, for each live episode, its
whole token sequence so far and returns the ids sampled for the next turn with their log-probabilities. Backends
never see text, so what is trained is exactly what was sampled.

* :class:`HFBackend` (:mod:`turngym.agents.hf_backend`): Hugging Face transformers on CPU or GPU. Each decoding
  step is one forward pass for every live episode (left padding), and each episode's KV cache is kept between
  turns, so a turn only encodes the new environment tokens instead of the whole history.
* :class:`VLLMBackend` (:mod:`turngym.agents.vllm_backend`): vLLM (its CPU build or CUDA), a colocated
  ``vllm.LLM`` in the policy's dtype with weight sync, or TRL's ``VLLMClient`` (server mode).
* :class:`ScriptedBackend` (here): replays given replies; for tests and for the oracle-through-LLM check.

Logprobs are ``log softmax(logits / T)`` at the sampled token (T = temperature, 1 when greedy),
the same quantity TRL's GRPO loss computes, before top-p/top-k truncation.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from turngym.agents.generation import (
    Generation,
    GenerationRequest,
    SamplingConfig,
    TokenBackend,
    request_seed,
    turn_seed,
)
from turngym.agents.hf_backend import HFBackend, prefill_groups
from turngym.agents.vllm_backend import VLLMBackend, make_llm, sync_vllm_weights, vllm_parameters

__all__ = [
    "Generation",
    "GenerationRequest",
    "HFBackend",
    "SamplingConfig",
    "ScriptedBackend",
    "TokenBackend",
    "VLLMBackend",
    "make_llm",
    "prefill_groups",
    "request_seed",
    "sync_vllm_weights",
    "turn_seed",
    "vllm_parameters",
]


class ScriptedBackend:
    """Replays replies chosen by a function of the request (tests; the oracle-through-LLM check).

    ``reply(request) -> str | list[int]``: text is encoded with ``encode`` and ended with
    ``stop_ids[0]``; a list of ids is returned as is (stopped only if it ends with a stop id). Either is cut
    after its first stop id, as a sampling model would be.
    Logprobs are 0.
    """

    def __init__(self, reply: Callable[[GenerationRequest], str | list[int]],
                 encode: Callable[[str], list[int]]) -> None:
        self.reply, self.encode = reply, encode
        self.calls: list[int] = []  # batch size of each call

    def release(self, key: Hashable) -> None:
        """Nothing is cached."""

    def cache_prefix(self, ids: Sequence[int]) -> None:
        """Nothing is cached."""

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingConfig,
                 stop_ids: Sequence[int]) -> list[Generation]:
        self.calls.append(len(requests))
        results, stop = [], set(stop_ids)
        for request in requests:
            reply = self.reply(request)
            ids = self.encode(reply) + [stop_ids[0]] if isinstance(reply, str) else list(reply)
            first_stop = next((at + 1 for at, token in enumerate(ids) if token in stop), len(ids))
            ids = ids[: min(first_stop, sampling.max_new_tokens)]  # a model stops at its first stop id
            results.append(Generation(ids, [0.0] * len(ids), bool(ids) and ids[-1] in stop))
        return results
