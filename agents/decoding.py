"""Continuous batching: turns join and leave the generation batch between decoding steps.

A lockstep rollout asks the backend for every live episode's turn at once, so each turn waits for the slowest
world, and the model idles while worlds step. With continuous batching the rollout hands each turn over as soon
as its world answers (:meth:`Decoder.add`) and runs one decoding iteration at a time (:meth:`Decoder.step`),
polling the worlds in between: a turn joins the running batch at the next iteration, a finished turn leaves it
at once and its action goes to its world, which steps (in its worker process) while the model decodes the
others.

* :class:`~turngym.agents.hf_backend.HFDecoder`: iteration-level batching over
  :class:`~turngym.agents.hf_backend.HFBackend` (it lives with the backend whose caches it drives).
* :class:`TurnBatcher`: any :class:`~turngym.agents.generation.TokenBackend`: the turns waiting at an
  iteration are generated together in one call (batching per turn, not per token).

A backend may bring its own decoder (a ``decoder(sampling, stop_ids)`` method); :func:`decoder_for` picks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from turngym.agents.generation import Decoder, Finished, GenerationRequest, SamplingConfig, TokenBackend
from turngym.agents.hf_backend import HFBackend, HFDecoder

__all__ = ["Decoder", "Finished", "HFDecoder", "Join", "TurnBatcher", "decoder_for"]

Join = Literal["token", "turn"]


def decoder_for(backend: TokenBackend, sampling: SamplingConfig, stop_ids: Sequence[int], *,
                join: Join = "token") -> Decoder:
    """The backend's own decoder, :class:`HFDecoder` for an :class:`HFBackend`, else a :class:`TurnBatcher`.

    ``join="token"``: turns join the running batch between decoding steps; ``"turn"``: they wait until the
    running batch has finished (no re-packing; the worlds still step while the model decodes).
    """
    own = getattr(backend, "decoder", None)
    if callable(own):
        return own(sampling, stop_ids)
    if isinstance(backend, HFBackend):
        return HFDecoder(backend, sampling, stop_ids, max_wait=4 if join == "token" else None)
    return TurnBatcher(backend, sampling, stop_ids)


class TurnBatcher:
    """Continuous batching per turn for any backend: each :meth:`step` generates every queued turn in one call."""

    def __init__(self, backend: TokenBackend, sampling: SamplingConfig, stop_ids: Sequence[int]) -> None:
        self.backend, self.sampling, self.stop_ids = backend, sampling, list(stop_ids)
        self._waiting: list[GenerationRequest] = []

    def add(self, request: GenerationRequest) -> None:
        self._waiting.append(request)

    def step(self) -> list[Finished]:
        requests, self._waiting = self._waiting, []
        generations = self.backend.generate(requests, self.sampling, self.stop_ids) if requests else []
        return [(r.key, g) for r, g in zip(requests, generations, strict=True)]

    @property
    def busy(self) -> bool:
        return bool(self._waiting)
