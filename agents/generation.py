"""What every generation backend shares: token ids in, sampled token ids and their logprobs out.

A backend implements :class:`TokenBackend`: ``generate(requests, sampling, stop_ids)`` gets, for each live
episode, its whole token sequence so far and returns the ids sampled for the next turn with their
log-probabilities. Backends never see text, so what is trained is exactly what was sampled. A :class:`Decoder`
generates one iteration at a time, for continuous batching. A sampler that holds weights of its own gets the
trainer's through a :class:`WeightPublisher`. The backends:
:mod:`turngym.agents.hf_backend` (transformers), :mod:`turngym.agents.vllm_backend` (vLLM) and
:class:`~turngym.agents.backends.ScriptedBackend` (replies chosen by a function), all importable from
:mod:`turngym.agents.backends`.

Logprobs are ``log softmax(logits / T)`` at the sampled token (T = temperature, 1 when greedy),
the same quantity TRL's GRPO loss computes, before top-p/top-k truncation.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class SamplingConfig:
    """How to sample one turn. ``temperature=0`` is greedy."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 48

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")


@dataclass
class GenerationRequest:
    """One episode's turn: its full sequence so far, a key naming the episode, and a seed."""

    key: Hashable
    ids: list[int]
    seed: int = 0


@dataclass
class Generation:
    """What the model sampled for one turn."""

    ids: list[int]
    logprobs: list[float]
    stopped: bool  # True: ended with a stop token; False: hit max_new_tokens


class TokenBackend(Protocol):
    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingConfig,
                 stop_ids: Sequence[int]) -> list[Generation]: ...

    def release(self, key: Hashable) -> None:
        """Forget any state kept for the episode ``key`` (its KV cache)."""

    def cache_prefix(self, ids: Sequence[int]) -> None:
        """Prepare a prefix many episodes share (a no-op where the backend caches on its own)."""


class WeightPublisher(Protocol):
    """How the trainer's weights reach a sampler that holds its own: the one interface behind every weight update.

    ``publish(model, version)`` hands the sampler ``model``'s current weights, ``version`` optimizer steps into
    training (a sampler that tracks staleness records it; one that serves only the latest may ignore it). The
    implementations: :meth:`~turngym.agents.vllm_backend.VLLMBackend.publish` (a colocated vLLM engine),
    :class:`~turngym.trainers.pipeline.VersionedPolicy` (the pipelined rollouts' policy versions) and
    :class:`~turngym.trainers.vllm_colocate.TRLWeightSync` (TRL's own sync: a vLLM server, sharded weights). A
    sampler on the trained model itself (:class:`~turngym.agents.hf_backend.HFBackend`) needs none.
    """

    def publish(self, model: Any, version: int) -> None: ...


Finished = tuple[Hashable, Generation]  # (request key, what the model sampled for that turn)


class Decoder(Protocol):
    """Generation one iteration at a time, turns joining and leaving between iterations (continuous batching,
    :mod:`turngym.agents.decoding`)."""

    def add(self, request: GenerationRequest) -> None:
        """Queue one turn; it joins the batch at a coming :meth:`step`."""

    def step(self) -> list[Finished]:
        """One decoding iteration (one token for every running turn); the turns it finished."""

    @property
    def busy(self) -> bool:
        """Turns are queued or running."""


def turn_seed(seed: int, position: int) -> int:
    """The seed of one turn's sampling: the episode's seed and its length so far (63 bits), so a turn's sample does
    not depend on which other turns share its batch, and differs every turn."""
    return (seed * 1_000_003 + position) % 2**63


def request_seed(request: GenerationRequest) -> int:
    """:func:`turn_seed` of a request: its episode's seed and its length."""
    return turn_seed(request.seed, len(request.ids))
