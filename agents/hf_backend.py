"""The Hugging Face transformers backend, and its continuous decoder.

* :class:`HFBackend`: batched generation on CPU or GPU. Each decoding step is one forward pass for every live
  episode (left padding), and each episode's KV cache is kept between turns, so a turn only encodes the new
  environment tokens instead of the whole history.
* :class:`HFDecoder`: iteration-level continuous batching over an :class:`HFBackend` (see
  :mod:`turngym.agents.decoding`). Joining re-packs the batch: each running row keeps its KV cache (copied into
  the new batch, not recomputed) and feeds its last sampled token in the pass that encodes the joiners' new
  tokens, so a join costs a cache copy and no extra forward pass. Each row samples from its own generator, seeded
  as in :meth:`HFBackend.generate`, so a turn's ids do not depend on which turns share its batch: continuous and
  lockstep rollouts sample the same ids (logprobs agree to float precision: padding changes the summation order).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from turngym.agents.generation import Finished, Generation, GenerationRequest, SamplingConfig, turn_seed

logger = logging.getLogger(__name__)


@dataclass
class _EpisodeCache:
    """The keys and values of ``ids``, kept where a batch computed them (no copy on unpacking).

    ``segments`` are ``(row, start, end)`` column ranges of row ``row`` in ``keys``/``values``,
    each ``(layers, batch, kv_heads, width, head_dim)``; together they hold ``len(ids)`` tokens.
    """

    ids: list[int]
    keys: Any
    values: Any
    segments: list[tuple[int, int, int]]


class HFBackend:
    """Batched generation with a Hugging Face causal LM and per-episode KV caches.

    Each call packs the live episodes into one static KV cache: every row holds that episode's
    cached keys and values, then its new tokens, left-padded; padding is masked out and position
    ids are each row's own. Every decoding step is one forward pass for the whole batch. The new
    tokens are encoded in a few passes over groups of rows with similar lengths
    (:func:`prefill_groups`), since padding a 20-token observation to a 200-token one costs as much
    compute as real tokens. Afterwards each row's cache stays where it is, for its next turn.

    transformers' ``generate`` does not serve here: it cannot resume per-row caches of different
    lengths, and re-encoding the whole history every turn made a 20-turn episode 10-15 s on CPU.

    Args:
        model: a causal LM (``AutoModelForCausalLM``) whose layers all attend to the whole context.
        pad_id: the id written at padded positions (masked; any valid id works).
        reuse_cache: keep each episode's KV cache between turns (off: re-encode the history).
        max_batch_size: split larger calls into chunks of this size.
        prefill_group_cost: the cost of one more prefill pass, in padded tokens (see
            :func:`prefill_groups`); ``None`` encodes every row in one pass.
    """

    def __init__(self, model: Any, *, pad_id: int = 0, reuse_cache: bool = True, max_batch_size: int | None = None,
                 prefill_group_cost: int | None = 32) -> None:
        self.model = model.eval()
        self.pad_id = int(pad_id)
        self.reuse_cache = reuse_cache
        self.max_batch_size = max_batch_size
        self.prefill_group_cost = prefill_group_cost
        self._caches: dict[Hashable, _EpisodeCache] = {}
        self._prefixes: list[_EpisodeCache] = []  # shared prefixes, see cache_prefix()
        self.forward_passes = 0  # counted for benchmarks and tests

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    def release(self, key: Hashable) -> None:
        self._caches.pop(key, None)

    def cache_prefix(self, ids: Sequence[int]) -> None:
        """Encode a prefix many episodes share (the system prompt) once; an episode's first turn
        then starts from its keys and values instead of encoding it again."""
        import torch

        ids = list(ids)
        if len(ids) < 2 or any(p.ids == ids for p in self._prefixes):
            return
        with torch.inference_mode():
            batch = _PackedBatch.build(self.model, [None], [ids], [1], 0, self.pad_id, self.device)
            self._prefill(batch)
            self._prefixes.append(batch.episode_cache(0, ids))

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingConfig,
                 stop_ids: Sequence[int]) -> list[Generation]:
        size = self.max_batch_size or max(1, len(requests))
        results: list[Generation] = []
        for start in range(0, len(requests), size):
            results += self._generate_batch(list(requests[start : start + size]), sampling, set(stop_ids))
        return results

    def _generate_batch(self, requests: list[GenerationRequest], sampling: SamplingConfig,
                        stop: set[int]) -> list[Generation]:
        import torch

        with torch.inference_mode():
            cached = [self._usable_cache(r) for r in requests]
            new = [r.ids[len(c.ids) :] if c else list(r.ids) for r, c in zip(requests, cached, strict=True)]
            groups = prefill_groups([len(x) for x in new], self.prefill_group_cost)
            order = [row for group in groups for row in group]  # the batch's rows, group after group
            requests = [requests[row] for row in order]
            batch = _PackedBatch.build(self.model, [cached[row] for row in order], [new[row] for row in order],
                                       [len(group) for group in groups], sampling.max_new_tokens, self.pad_id,
                                       self.device)
            logits = self._prefill(batch)
            generators = [_row_generator(r.seed, len(r.ids), self.device) for r in requests]
            sampled: list[list[int]] = [[] for _ in requests]
            logprobs: list[list[float]] = [[] for _ in requests]
            stopped = [False] * len(requests)
            active = [True] * len(requests)
            for step in range(sampling.max_new_tokens):
                tokens, token_logprobs = _sample(logits, sampling, generators, active)
                for row, live in enumerate(active):
                    if not live:
                        continue
                    sampled[row].append(tokens[row])
                    logprobs[row].append(token_logprobs[row])
                    if tokens[row] in stop:
                        stopped[row], active[row] = True, False
                    elif len(sampled[row]) >= sampling.max_new_tokens:
                        active[row] = False
                if not any(active):
                    break
                logits = self._forward(batch.cache, batch.decode_inputs(step, tokens, active))
            if self.reuse_cache:
                for row, request in enumerate(requests):
                    self._caches[request.key] = batch.episode_cache(row, request.ids + sampled[row][:-1])
            generations = {row: Generation(s, lp, st)
                           for row, s, lp, st in zip(order, sampled, logprobs, stopped, strict=True)}
            return [generations[row] for row in range(len(order))]

    def _prefill(self, batch: _PackedBatch) -> Any:
        """Encode every row's new tokens, one forward pass per group; the next-token logits per row."""
        import torch

        return torch.cat([self._forward(cache, inputs) for cache, inputs in batch.prefill_passes()])

    def _usable_cache(self, request: GenerationRequest) -> _EpisodeCache | None:
        """The episode's own cache, else the longest shared prefix of its ids, else None."""
        if not self.reuse_cache:
            return None
        cache = self._caches.get(request.key)
        if cache is not None:
            if _extends(request.ids, cache.ids):
                return cache
            logger.debug("episode %r: cached tokens are not a prefix of the request; re-encoding", request.key)
            self._caches.pop(request.key, None)
        shared = [p for p in self._prefixes if _extends(request.ids, p.ids)]
        return max(shared, key=lambda p: len(p.ids)) if shared else None

    def _forward(self, cache: Any, inputs: dict[str, Any]) -> Any:
        self.forward_passes += 1
        # A model prepared by accelerate for mixed precision has its forward wrapped in autocast
        # (kept under "_original_forward"). Generation runs the weights' own precision instead: the
        # static cache holds that dtype, and rollouts match a policy loaded from disk.
        forward = self.model.__dict__.get("_original_forward", self.model)
        out = forward(**inputs, past_key_values=cache, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1, :].float()


@dataclass
class _PackedBatch:
    """A batch of episodes laid out in one static KV cache, rows ordered by prefill group.

    Row i of a group whose longest new part is N_g tokens::

        [pad][cached c_i] | [pad][new n_i] | [decoded tokens]
                   P - N_g ^              P ^             P + max_new ^

    with P = max over groups of (N_g + the group's longest cached part). Each row's tokens are
    two contiguous runs, so its cache is kept as two column ranges rather than copied out.
    """

    model_config: Any
    keys: Any  # (layers, B, kv_heads, P + max_new, head_dim)
    values: Any
    mask: Any  # (B, W) long: 1 at real columns
    groups: list[tuple[int, int, int]]  # (first row, end row, N_g)
    cached_lengths: list[int]
    new_lengths: list[int]
    prompt_width: int  # P
    input_ids: Any  # (B, max N_g), left-padded per group
    positions: Any  # (B, max N_g) each new token's position
    next_position: list[int]
    cache: Any = None  # the StaticCache over every row, for decoding

    @classmethod
    def build(cls, model: Any, cached: list[_EpisodeCache | None], new: list[list[int]], group_sizes: list[int],
              max_new: int, pad_id: int, device: Any) -> _PackedBatch:
        import torch

        config = model.config.get_text_config(decoder=True)
        rows = len(new)
        c = [len(x.ids) if x else 0 for x in cached]
        n = [len(x) for x in new]
        bounds = [sum(group_sizes[:g]) for g in range(len(group_sizes) + 1)]
        groups = [(bounds[g], bounds[g + 1], max(n[bounds[g] : bounds[g + 1]])) for g in range(len(group_sizes))]
        prompt_width = max(width + max(c[first:end]) for first, end, width in groups)
        width = prompt_width + max_new
        num_kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        shape = (config.num_hidden_layers, rows, num_kv_heads, width, head_dim)
        dtype = next(model.parameters()).dtype
        # torch.empty, not zeros: every column is written below or by the forward passes, except
        # left padding and not-yet-decoded columns, which are zeroed (masked, but must be finite).
        keys, values = torch.empty(shape, dtype=dtype, device=device), torch.empty(shape, dtype=dtype, device=device)
        keys[:, :, :, prompt_width:] = 0
        values[:, :, :, prompt_width:] = 0
        mask = torch.zeros((rows, width), dtype=torch.long, device=device)
        new_width = max(n)
        input_ids = torch.full((rows, new_width), pad_id, dtype=torch.long, device=device)
        positions = torch.zeros((rows, new_width), dtype=torch.long, device=device)
        for first, end, group_width in groups:
            cached_end = prompt_width - group_width
            for row in range(first, end):
                keys[:, row, :, : cached_end - c[row]] = 0
                values[:, row, :, : cached_end - c[row]] = 0
                if cached[row] is not None:
                    _copy_segments(cached[row], keys, values, row, cached_end - c[row])
                mask[row, cached_end - c[row] : cached_end] = 1
                mask[row, prompt_width - n[row] : prompt_width] = 1
                input_ids[row, new_width - n[row] :] = torch.tensor(new[row], dtype=torch.long, device=device)
                positions[row, new_width - n[row] :] = torch.arange(c[row], c[row] + n[row], device=device)
        batch = cls(config, keys, values, mask, groups, c, n, prompt_width, input_ids, positions,
                    [c[row] + n[row] for row in range(rows)])
        batch.cache = batch._static_cache(slice(None), prompt_width)
        return batch

    def _static_cache(self, rows: slice, length: int) -> Any:
        """A transformers StaticCache over ``rows`` of this batch's tensors, ``length`` columns filled."""
        import torch
        from transformers import StaticCache
        from transformers.cache_utils import StaticLayer

        cache = StaticCache(config=self.model_config, max_cache_len=self.keys.shape[3])
        for index, layer in enumerate(cache.layers):
            if type(layer) is not StaticLayer:
                raise ValueError(f"HFBackend needs full-attention layers; layer {index} is a {type(layer).__name__} "
                                 "(sliding-window models are not supported here: use the vLLM backend)")
            keys, values = self.keys[index, rows], self.values[index, rows]
            # what StaticLayer.lazy_initialization sets, on tensors this batch owns
            layer.dtype, layer.device = keys.dtype, keys.device
            layer.batch_size, layer.num_heads, _, layer.k_head_dim = keys.shape
            layer.v_head_dim = values.shape[-1]
            layer.keys, layer.values = keys, values
            layer.cumulative_length = torch.tensor(length, device=keys.device)
            layer.is_initialized = True
        return cache

    def prefill_passes(self) -> Iterator[tuple[Any, dict[str, Any]]]:
        """One (cache, inputs) per group: the group's rows, their new tokens written at P - N_g ... P."""
        for first, end, group_width in self.groups:
            rows = slice(first, end)
            columns = slice(self.input_ids.shape[1] - group_width, None)
            yield self._static_cache(rows, self.prompt_width - group_width), {
                "input_ids": self.input_ids[rows, columns], "attention_mask": self.mask[rows],
                "position_ids": self.positions[rows, columns]}

    def decode_inputs(self, step: int, tokens: list[int], active: list[bool]) -> dict[str, Any]:
        import torch

        column = self.prompt_width + step
        device = self.mask.device
        self.mask[:, column] = torch.tensor(active, dtype=torch.long, device=device)
        ids = torch.tensor([t if a else 0 for t, a in zip(tokens, active, strict=True)], device=device).unsqueeze(1)
        positions = torch.tensor(self.next_position, device=device).unsqueeze(1)
        self.next_position = [p + int(a) for p, a in zip(self.next_position, active, strict=True)]
        return {"input_ids": ids, "attention_mask": self.mask, "position_ids": positions}

    def episode_cache(self, row: int, ids: list[int]) -> _EpisodeCache:
        """Row ``row``'s cache for ``ids``: its cached run, then its new and decoded tokens."""
        group_width = next(width for first, end, width in self.groups if first <= row < end)
        cached_end, c = self.prompt_width - group_width, self.cached_lengths[row]
        decoded = len(ids) - c - self.new_lengths[row]
        if decoded != int(self.mask[row, self.prompt_width :].sum()):  # the decoded tokens fed back, one column each
            raise RuntimeError(f"KV cache bookkeeping error: {len(ids)} tokens for row {row} "
                               f"({c} cached, {self.new_lengths[row]} new, {decoded} decoded)")
        segments = [(row, cached_end - c, cached_end)] if c else []
        segments.append((row, self.prompt_width - self.new_lengths[row], self.prompt_width + decoded))
        return _EpisodeCache(ids, self.keys, self.values, segments)


def _copy_segments(source: _EpisodeCache, keys: Any, values: Any, row: int, start: int) -> None:
    """Copy ``source``'s keys and values, every layer at once, into ``row`` from column ``start``."""
    for source_row, first, end in source.segments:
        stop = start + end - first
        keys[:, row, :, start:stop] = source.keys[:, source_row, :, first:end]
        values[:, row, :, start:stop] = source.values[:, source_row, :, first:end]
        start = stop


def prefill_groups(lengths: Sequence[int], group_cost: int | None) -> list[list[int]]:
    """Split rows into groups encoded in separate passes, minimising padded tokens plus a cost per pass.

    With rows sorted by length, a group is a run ``j..k-1`` and costs ``(k - j) * n_(k-1) + g``:
    every row padded to the group's longest, plus ``g`` token-equivalents for one more forward
    pass. Dynamic programming over the sorted rows finds the cheapest split:
    ``best[k] = min_j best[j] + (k - j) * n_(k-1) + g``. ``group_cost=None`` keeps one group.
    """
    rows = list(range(len(lengths)))
    if group_cost is None or len(rows) < 2:
        return [rows]
    order = sorted(rows, key=lambda row: lengths[row])
    best, start = [0] * (len(order) + 1), [0] * (len(order) + 1)
    for k in range(1, len(order) + 1):
        longest = lengths[order[k - 1]]
        best[k], start[k] = min((best[j] + (k - j) * longest + group_cost, j) for j in range(k))
    groups, k = [], len(order)
    while k:
        groups.append(sorted(order[start[k] : k]))
        k = start[k]
    return groups[::-1]


def _extends(ids: list[int], prefix: list[int]) -> bool:
    """``prefix`` is a strict prefix of ``ids`` (at least one new token is left to encode)."""
    return len(prefix) < len(ids) and ids[: len(prefix)] == prefix


def _row_generator(seed: int, position: int, device: Any) -> Any:
    """A generator per row, seeded by the episode's seed and its length (:func:`turn_seed`): sampling does not
    depend on which other episodes share the batch."""
    import torch

    generator = torch.Generator(device=device)
    generator.manual_seed(turn_seed(seed, position))
    return generator


def _sample(logits: Any, sampling: SamplingConfig, generators: list[Any],
            active: list[bool]) -> tuple[list[int], list[float]]:
    """Sample one token per active row; return the tokens and ``log softmax(logits / T)`` at them."""
    import torch

    temperature = sampling.temperature if sampling.temperature > 0 else 1.0
    scaled = logits / temperature
    logprobs = torch.log_softmax(scaled, dim=-1)
    if sampling.temperature == 0:
        tokens = scaled.argmax(dim=-1)
    else:
        filtered = _top_k_top_p(scaled, sampling.top_k, sampling.top_p)
        cdf = torch.softmax(filtered, dim=-1).cumsum(dim=-1)
        # one uniform draw per row from the row's own generator, then the inverse CDF for the batch
        draws = torch.cat([torch.rand(1, generator=g, device=logits.device) for g in generators]).unsqueeze(-1)
        tokens = torch.searchsorted(cdf, draws * cdf[:, -1:]).squeeze(-1).clamp_(max=cdf.shape[-1] - 1)
    chosen = logprobs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    return tokens.tolist(), chosen.tolist()


def _top_k_top_p(logits: Any, top_k: int, top_p: float) -> Any:
    import torch

    if top_k and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
        cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
        drop = cumulative - torch.softmax(sorted_logits, dim=-1) >= top_p  # keep the token that crosses top_p
        logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return logits


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
