"""Continuous batching: turns join and leave the generation batch between decoding steps.

A lockstep rollout asks the backend for every live episode's turn at once, so each turn waits for the slowest
world, and the model idles while worlds step. With continuous batching the rollout hands each turn over as soon
as its world answers (:meth:`Decoder.add`) and runs one decoding iteration at a time (:meth:`Decoder.step`),
polling the worlds in between: a turn joins the running batch at the next iteration, a finished turn leaves it
at once and its action goes to its world, which steps (in its worker process) while the model decodes the
others.

* :class:`HFDecoder`: iteration-level batching over :class:`~turngym.agents.backends.HFBackend`. Joining
  re-packs the batch: each running row keeps its KV cache (copied into the new batch, not recomputed) and
  feeds its last sampled token in the pass that encodes the joiners' new tokens, so a join costs a cache copy
  and no extra forward pass. Each row samples from its own generator, seeded as in
  :meth:`HFBackend.generate <turngym.agents.backends.HFBackend.generate>`, so a turn's ids do not depend on
  which turns share its batch: continuous and lockstep rollouts sample the same ids (logprobs agree to float
  precision: padding changes the summation order).
* :class:`TurnBatcher`: any :class:`~turngym.agents.backends.TokenBackend`: the turns waiting at an
  iteration are generated together in one call (batching per turn, not per token).

A backend may bring its own decoder (a ``decoder(sampling, stop_ids)`` method); :func:`decoder_for` picks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from turngym.agents.backends import (
    Generation,
    GenerationRequest,
    HFBackend,
    SamplingConfig,
    TokenBackend,
    _EpisodeCache,
    _PackedBatch,
    _row_generator,
    _sample,
    prefill_groups,
)

Finished = tuple[Hashable, Generation]  # (request key, what the model sampled for that turn)
Join = Literal["token", "turn"]


class Decoder(Protocol):
    """Generation one iteration at a time, turns joining and leaving between iterations."""

    def add(self, request: GenerationRequest) -> None:
        """Queue one turn; it joins the batch at a coming :meth:`step`."""

    def step(self) -> list[Finished]:
        """One decoding iteration (one token for every running turn); the turns it finished."""

    @property
    def busy(self) -> bool:
        """Turns are queued or running."""


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


@dataclass
class _Row:
    """A turn in the batch: its request, its own generator, what it has sampled."""

    request: GenerationRequest
    generator: Any
    sampled: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    running: bool = True

    def cached_ids(self) -> list[int]:
        """The ids whose keys and values the batch holds (the last sampled token is not fed yet)."""
        return self.request.ids + self.sampled[:-1]


class HFDecoder:
    """Iteration-level continuous batching over an :class:`HFBackend`'s packed static caches.

    Joining policy: queued turns are admitted when the batch is empty, when at least ``join_ratio`` times the
    running turns are queued, or when the oldest has waited ``max_wait`` iterations; every admission re-packs
    the batch once (a KV copy of the running turns), so joins are gathered rather than made one by one.
    ``max_wait=None``: only into an empty batch (joining per turn: no re-packing). At most
    ``backend.max_batch_size`` turns run at once.
    """

    def __init__(self, backend: HFBackend, sampling: SamplingConfig, stop_ids: Sequence[int], *,
                 join_ratio: float = 0.25, max_wait: int | None = 4) -> None:
        self.backend, self.sampling, self.stop = backend, sampling, set(stop_ids)
        self.join_ratio, self.max_wait = join_ratio, max_wait
        self._waiting: deque[tuple[GenerationRequest, int]] = deque()  # (request, iteration it was queued at)
        self._rows: list[_Row] = []  # in the packed batch's row order
        self._batch: _PackedBatch | None = None
        self._decoded = 0  # decoding passes since the batch was packed
        self._iteration = 0
        self.repacks = 0  # counted for benchmarks and tests

    def add(self, request: GenerationRequest) -> None:
        self._waiting.append((request, self._iteration))

    @property
    def busy(self) -> bool:
        return bool(self._waiting) or any(row.running for row in self._rows)

    def step(self) -> list[Finished]:
        import torch

        self._iteration += 1
        with torch.inference_mode():
            if self._should_admit():
                logits = self._pack()
            elif any(row.running for row in self._rows):
                logits = self._decode()
            else:
                return []
            running = [row.running for row in self._rows]
            tokens, logprobs = _sample(logits, self.sampling, [row.generator for row in self._rows], running)
        finished = []
        for index, row in enumerate(self._rows):
            if row.running:
                row.sampled.append(tokens[index])
                row.logprobs.append(logprobs[index])
                if tokens[index] in self.stop or len(row.sampled) >= self.sampling.max_new_tokens:
                    finished.append(self._leave(index))
        return finished

    # ------------------------------------------------------------------ one iteration's parts
    def _should_admit(self) -> bool:
        running = sum(row.running for row in self._rows)
        capacity = (self.backend.max_batch_size or len(self._waiting) + running) - running
        if not self._waiting or capacity <= 0:
            return False
        if not running or self.max_wait is None:
            return not running
        oldest_wait = self._iteration - self._waiting[0][1]
        return len(self._waiting) >= self.join_ratio * running or oldest_wait >= self.max_wait

    def _pack(self) -> Any:
        """A new batch of the running rows (each feeds its last sampled token) and the admitted turns (each
        encodes what its cache lacks); the next-token logits of every row."""
        backend = self.backend
        kept = [i for i, row in enumerate(self._rows) if row.running]
        rows = [self._rows[i] for i in kept]
        cached: list[_EpisodeCache | None] = [self._batch.episode_cache(i, self._rows[i].cached_ids()) for i in kept]
        new = [[row.sampled[-1]] for row in rows]
        limit = backend.max_batch_size or len(self._waiting) + len(rows)
        while self._waiting and len(rows) < limit:
            request, _ = self._waiting.popleft()
            cache = backend._usable_cache(request)
            rows.append(_Row(request, _row_generator(request.seed, len(request.ids), backend.device)))
            cached.append(cache)
            new.append(list(request.ids[len(cache.ids):]) if cache else list(request.ids))
        groups = prefill_groups([len(x) for x in new], backend.prefill_group_cost)
        order = [i for group in groups for i in group]
        room = max(self.sampling.max_new_tokens - len(row.sampled) for row in rows)
        self._batch = _PackedBatch.build(backend.model, [cached[i] for i in order], [new[i] for i in order],
                                         [len(group) for group in groups], room, backend.pad_id, backend.device)
        self._rows, self._decoded = [rows[i] for i in order], 0
        self.repacks += 1
        return backend._prefill(self._batch)

    def _decode(self) -> Any:
        """One pass feeding every running row its last sampled token (finished rows are masked)."""
        running = [row.running for row in self._rows]
        tokens = [row.sampled[-1] if row.running else 0 for row in self._rows]
        logits = self.backend._forward(self._batch.cache, self._batch.decode_inputs(self._decoded, tokens, running))
        self._decoded += 1
        return logits

    def _leave(self, index: int) -> Finished:
        """Row ``index``'s turn is over: it leaves the batch, its cache kept for its episode's next turn."""
        row = self._rows[index]
        row.running = False
        if self.backend.reuse_cache:
            self.backend._caches[row.request.key] = self._batch.episode_cache(index, row.cached_ids())
        return row.request.key, Generation(row.sampled, row.logprobs, row.sampled[-1] in self.stop)
