"""Shared prefixes encoded once in a forward pass (Prefix Grouper): the loss's, the old policy's, the reference's.

A group's episodes start with the same prompt, and per-turn rows (``history_window``, rewritten histories, a
harness's calls) start with the same first prompt and often with the same earlier turns. TRL's forward pass encodes
every row whole, so a prompt of P tokens shared by G rows is encoded G times, and its activations are kept G times
for the backward pass. Here the rows become a tree of shared segments (:func:`prefix_tree`), each segment encoded
once, and the rows below it continue from its keys and values:

    rows  [p p p p a a a]          tree   [p p p p] ── [a a a]
          [p p p p b b]                             ├─ [b b]
          [p p p p c c c c]                         └─ [c c c c]

One forward call per depth of the tree (:func:`encode_tree`): the first encodes the top segments (the prompts); each
next one the segments below, every row attending to its parent's keys and values (gathered per row, so segments of
different parents share a call) and to its own, at the positions its tokens have in its own sequence. Gradients flow
through the gathered keys and values into the shared segment's computation once, so the gradient of any loss on
the rows' log-probabilities is the unshared one's: the same function, computed with fewer operations.

Every hidden state a row reads is the one the unshared pass computes for that row, up to floating-point rounding:
with rotary positions the attention between two tokens depends on their distance only, and a row's tokens keep
their order and distances (position ``i`` for its ``i``-th real token; TRL's path numbers the left padding too,
which rotary attention does not see). Models it cannot do exactly fall back to the unshared path
(:func:`sharing_obstacle`): other positional schemes, sliding-window or linear-attention layers, attention kernels
other than eager and SDPA, and reentrant gradient checkpointing. Under non-reentrant checkpointing (TRL's and
transformers' default) the checkpointed layers keep the segment cache for the call, which their replay rewrites
with the same keys and values (:class:`_SegmentLayer`).

Which passes share (``share_prefixes``, wired in trainers/trainer.py): every call of the trainer's
``_get_per_token_logps_and_entropies`` on a plain causal LM, which is the policy's loss forward, the old policy's
and the reference's logprobs and their per-turn recomputation; and PPO's critic (:class:`PrefixSharingCritic`).

:func:`shared_prefix_logprobs` is the drop-in for :func:`~turngym.trainers.logprobs.scored_logprobs_in_chunks`:
it returns None when nothing is shared (the caller takes its unshared path, so such a batch is computed exactly as
before) or the model cannot share. Nothing here imports TRL directly: the vocabulary projection is TRL's kernel,
reached through :mod:`turngym.trainers.logprobs`.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers.cache_utils import Cache, DynamicLayer

from turngym.trainers import logprobs as _logprobs
from turngym.trainers.critic import TokenCritic

# Below this many tokens saved (the segment's length times the rows beyond the first that read it), a shared segment
# is encoded with each of its rows instead: a short segment (a turn's "Action:") costs a forward call more than it
# saves. bench/prefix_sharing.py measures the cases this is set for.
MIN_SHARED_TOKENS = 32
ATTENTION_KERNELS = ("eager", "sdpa")  # the kernels that take a padding mask with holes and a cache


@dataclass
class Node:
    """A segment of the prefix tree: ``tokens`` at depths ``start`` .. ``start + len(tokens) - 1`` of every row
    below it; ``ends``: the rows whose sequence ends with it; ``children``: the segments that continue it."""

    start: int
    tokens: tuple[int, ...]
    ends: list[int] = field(default_factory=list)
    children: list[Node] = field(default_factory=list)

    @property
    def end(self) -> int:
        return self.start + len(self.tokens)

    def rows(self) -> list[int]:
        """Every row that reads this segment (ends here or below)."""
        return [*self.ends, *(r for child in self.children for r in child.rows())]


def _common_length(sequences: Sequence[Sequence[int]], depth: int) -> int:
    """The length of the longest common prefix of ``sequences`` from ``depth`` on."""
    first, length = sequences[0], min(len(s) for s in sequences) - depth
    for other in sequences[1:]:
        i = 0
        while i < length and first[depth + i] == other[depth + i]:
            i += 1
        length = i
    return length


def _split(sequences: Sequence[Sequence[int]], rows: list[int], depth: int) -> list[Node]:
    """The radix tree of ``rows``' sequences from ``depth`` on (they agree before it): one node per next token."""
    buckets: dict[int, list[int]] = {}
    for r in rows:
        if len(sequences[r]) > depth:
            buckets.setdefault(sequences[r][depth], []).append(r)
    nodes = []
    for members in buckets.values():
        if len(members) == 1:
            (r,) = members
            nodes.append(Node(depth, tuple(sequences[r][depth:]), [r]))
            continue
        end = depth + _common_length([sequences[r] for r in members], depth)
        nodes.append(Node(depth, tuple(sequences[members[0]][depth:end]),
                          [r for r in members if len(sequences[r]) == end],
                          _split(sequences, [r for r in members if len(sequences[r]) > end], end)))
    return nodes


def _collapse(nodes: list[Node], min_shared: int) -> list[Node]:
    """Segments that save fewer than ``min_shared`` tokens are merged into what reads them (bottom-up): each child
    starts with the segment, each row that ended on it gets a segment of its own."""
    out = []
    for node in nodes:
        node.children = _collapse(node.children, min_shared)
        uses = len(node.children) + len(node.ends)
        if uses < 2 or (uses - 1) * len(node.tokens) >= min_shared:
            out.append(node)
            continue
        for child in node.children:
            child.start, child.tokens = node.start, node.tokens + child.tokens
            out.append(child)
        out.extend(Node(node.start, node.tokens, [r]) for r in node.ends)
    return out


def prefix_tree(sequences: Sequence[Sequence[int]], min_shared: int = MIN_SHARED_TOKENS) -> list[Node]:
    """The rows' shared prefixes as a forest: each node a segment that every row below it has at the same depths.

    Rows with the same first tokens share a node up to where they part (their longest common prefix), recursively;
    a row that is a prefix of another ends on an inner node (an earlier turn's context and reply, inside a later
    turn's context); equal rows end on the same node. A segment saving fewer than ``min_shared`` tokens is not
    shared (:data:`MIN_SHARED_TOKENS`). Each row ends on exactly one node. Empty rows are left out.
    """
    return _collapse(_split(sequences, [r for r, s in enumerate(sequences) if s], 0), min_shared)


def shares(forest: Sequence[Node]) -> bool:
    """Does any segment of the forest serve more than one row (else the tree is the rows themselves)?"""
    return any(node.children or len(node.ends) > 1 for node in forest)


def levels(forest: list[Node]) -> list[list[Node]]:
    """The nodes by depth in the tree: the roots, their children, and so on (each level is one forward call)."""
    out, level = [], forest
    while level:
        out.append(level)
        level = [child for node in level for child in node.children]
    return out


# ---------------------------------------------------------------------------------------------------- the model side
def _backbone(causal_lm: Any) -> Any:
    return causal_lm.base_model


def sharing_obstacle(causal_lm: Any, *, checkpointing: dict[str, Any] | None = None) -> str | None:
    """Why the model cannot run a row from a shared segment's keys and values and give the unshared pass's numbers,
    or None when it can: a causal LM with rotary positions, full attention in every layer, an eager or SDPA attention
    kernel, and no reentrant gradient checkpointing while it trains with gradients (it runs a layer without
    gradients, which the keys and values handed to the rows below need). ``checkpointing``: the run's
    ``gradient_checkpointing_kwargs`` when it turns checkpointing on later (else the model's layers are read)."""
    config = causal_lm.config
    if config.get_text_config() is not config:
        return "a multimodal model"
    if not hasattr(_backbone(causal_lm), "rotary_emb"):
        return "a model without rotary positions"
    if getattr(config, "_attn_implementation", None) not in ATTENTION_KERNELS:
        return f"attention kernel {getattr(config, '_attn_implementation', None)!r} (eager and sdpa take a cache)"
    layer_types = getattr(config, "layer_types", None)
    if layer_types is not None:
        if any(kind != "full_attention" for kind in layer_types):
            return "layers other than full attention (sliding window, linear attention)"
    elif getattr(config, "sliding_window", None) is not None and getattr(config, "use_sliding_window", True):
        return "sliding-window attention"
    checkpointed = _checkpointed(causal_lm) if causal_lm.training and torch.is_grad_enabled() else []
    options = [checkpointing] if checkpointing is not None else [
        getattr(getattr(m, "_gradient_checkpointing_func", None), "keywords", {}) for m in checkpointed]
    if any(o.get("use_reentrant") is not False for o in options):
        return "reentrant gradient checkpointing (use_reentrant: false shares)"
    return None


def _checkpointed(causal_lm: Any) -> list[Any]:
    """The model's layers that gradient checkpointing wraps (none when it is off)."""
    return [m for m in causal_lm.modules()
            if getattr(m, "gradient_checkpointing", False) is True and hasattr(type(m), "_can_checkpoint_with_cache")]


@contextlib.contextmanager
def _checkpointed_layers_keep_the_cache(causal_lm: Any) -> Any:
    """Under gradient checkpointing, transformers runs a layer without its cache (the backward pass's replay would
    write it twice). :class:`_SegmentLayer` writes the same keys and values however often it runs, so the
    checkpointed layers may keep it: their ``_can_checkpoint_with_cache``, set on each layer, for this call only."""
    layers = _checkpointed(causal_lm) if torch.is_grad_enabled() else []
    saved = [m.__dict__.get("_can_checkpoint_with_cache") for m in layers]
    for m in layers:
        m._can_checkpoint_with_cache = True
    try:
        yield
    finally:
        for m, before in zip(layers, saved, strict=True):
            if before is None:
                del m._can_checkpoint_with_cache
            else:
                m._can_checkpoint_with_cache = before


def can_share(causal_lm: Any) -> bool:
    """:func:`sharing_obstacle` finds none."""
    return sharing_obstacle(causal_lm) is None


class _SegmentLayer(DynamicLayer):
    """One layer's keys and values for a call: the parent segments' (fixed), then the call's own. Writing the own
    ones replaces them (the replay of a checkpointed layer writes the same again), never appends twice."""

    def __init__(self, keys: torch.Tensor | None = None, values: torch.Tensor | None = None) -> None:
        super().__init__()
        self.past = (keys, values)
        if keys is not None:
            self.keys, self.values, self.device, self.is_initialized = keys, values, keys.device, True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = self.past
        self.keys = key_states if keys is None else torch.cat([keys, key_states], dim=-2)
        self.values = value_states if values is None else torch.cat([values, value_states], dim=-2)
        self.device, self.is_initialized = key_states.device, True
        return self.keys, self.values


def _cache_argument(backbone: Any) -> str:
    """transformers 5 renamed ``past_key_values`` to ``cache``."""
    return "cache" if "cache" in inspect.signature(backbone.forward).parameters else "past_key_values"


@dataclass
class EncodedTree:
    """The hidden states :func:`encode_tree` computed: one (rows, width, hidden) tensor per level, and where each
    node's segment sits in them."""

    hidden: list[torch.Tensor]
    places: dict[int, tuple[int, int]]  # id(node) -> (level, row in that level's call)
    paths: dict[int, list[Node]]  # row -> the nodes from its root to the node it ends on

    def flat(self) -> torch.Tensor:
        """Every level's hidden states as one (positions, hidden) tensor, in the order :meth:`index` counts."""
        return torch.cat([h.reshape(-1, h.size(-1)) for h in self.hidden])

    def index(self, row: int, depths: range) -> torch.Tensor:
        """Where in :meth:`flat` the hidden states of ``row`` at ``depths`` (positions of its sequence) are."""
        offsets = [0]
        for h in self.hidden:
            offsets.append(offsets[-1] + h.size(0) * h.size(1))
        parts = []
        for node in self.paths[row]:
            low, high = max(node.start, depths.start), min(node.end, depths.stop)
            if low >= high:
                continue
            level, place = self.places[id(node)]
            base = offsets[level] + place * self.hidden[level].size(1) - node.start
            parts.append(torch.arange(base + low, base + high))
        return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.long)


def encode_tree(backbone: Any, forest: list[Node], device: Any) -> EncodedTree:
    """The backbone's last hidden states of every segment of ``forest``, one forward call per level.

    Level k's call takes each segment (right-padded to the level's longest) with the keys and values of its parent's
    call row (their padding masked out), at positions ``start .. start + len - 1``: the depths its tokens have in
    every row below it. Keys and values are kept only while the next level needs them."""
    argument = _cache_argument(backbone)
    by_level = levels(forest)
    hidden, places = [], {}
    past: list[tuple[torch.Tensor, torch.Tensor]] | None = None
    past_mask: torch.Tensor | None = None
    for k, nodes in enumerate(by_level):
        width = max(len(n.tokens) for n in nodes)
        ids = torch.zeros(len(nodes), width, dtype=torch.long)
        mask = torch.zeros(len(nodes), width, dtype=torch.long)
        for i, node in enumerate(nodes):
            ids[i, : len(node.tokens)] = torch.tensor(node.tokens)
            mask[i, : len(node.tokens)] = 1
            places[id(node)] = (k, i)
        ids, mask = ids.to(device), mask.to(device)
        positions = torch.tensor([n.start for n in nodes], device=device).unsqueeze(1) + torch.arange(width,
                                                                                                      device=device)
        more = k + 1 < len(by_level)
        cache = None
        if past is not None:
            parents = torch.tensor([places[id(parent)][1] for parent in by_level[k - 1] for _ in parent.children],
                                   device=device)
            cache = Cache(layers=[_SegmentLayer(keys.index_select(0, parents), values.index_select(0, parents))
                                  for keys, values in past])
            mask = torch.cat([past_mask.index_select(0, parents), mask], dim=1)
        elif more:
            cache = Cache(layers=[_SegmentLayer() for _ in range(backbone.config.num_hidden_layers)])
        output = backbone(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=cache is not None,
                          **{argument: cache})
        hidden.append(output.last_hidden_state)
        past = [(layer.keys, layer.values) for layer in cache.layers] if more else None
        past_mask = mask if more else None
    paths: dict[int, list[Node]] = {}

    def walk(node: Node, above: list[Node]) -> None:
        path = [*above, node]
        for r in node.ends:
            paths[r] = path
        for child in node.children:
            walk(child, path)

    for root in forest:
        walk(root, [])
    return EncodedTree(hidden, places, paths)


def contiguous(attention_mask: torch.Tensor) -> bool:
    """Is every row's mask one block of ones (padding only before and after it), as TRL's rows are (a left-padded
    prompt, then a right-padded completion)? Then a row's real tokens keep their distances without the padding."""
    mask = attention_mask.bool()
    first, count = mask.int().argmax(1, keepdim=True), mask.sum(1, keepdim=True)
    position = torch.arange(mask.size(1), device=mask.device)
    return bool((((position >= first) & (position < first + count)) == mask).all())


def _rows(input_ids: torch.Tensor, attention_mask: torch.Tensor,
          width: int) -> tuple[list[list[int]], list[int]] | None:
    """Each row's real tokens (prompt then completion) and its prompt's length, when the rows are laid out as TRL's
    (:func:`contiguous`) with a prompt of at least one token; else None."""
    if attention_mask.size(1) <= width or not bool(attention_mask[:, -width - 1].bool().all()):
        return None
    if not contiguous(attention_mask):
        return None
    ids, real = input_ids.tolist(), attention_mask.bool().tolist()
    sequences = [[t for t, m in zip(row, keep, strict=True) if m] for row, keep in zip(ids, real, strict=True)]
    return sequences, attention_mask[:, :-width].sum(1).tolist()


def _head(causal_lm: Any, kept: torch.Tensor, labels: torch.Tensor, temperature: float, compute_entropy: bool,
          fp32_head: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """TRL's chunked log-probability kernel on the kept hidden states (as :func:`~turngym.trainers.logprobs.
    scored_logprobs`)."""
    head = causal_lm.get_output_embeddings()
    kept, labels = kept.to(head.weight.device), labels.to(head.weight.device)
    autocast = torch.autocast(kept.device.type, enabled=False) if fp32_head else contextlib.nullcontext()
    with autocast:
        per_token = _logprobs.ChunkedLogProbFunction.apply(
            kept.float() if fp32_head else kept, head.weight, head.bias, labels, temperature, _logprobs.CHUNK_SIZE,
            None, 1.0, ("log_probs", "entropy") if compute_entropy else ("log_probs",))
    return per_token[0], (per_token[1] if compute_entropy else None)


def _tree_logprobs(causal_lm: Any, forest: list[Node], sequences: list[list[int]], prompt_lengths: list[int],
                   completion_ids: torch.Tensor, scored: torch.Tensor, temperature: float, compute_entropy: bool,
                   fp32_head: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`~turngym.trainers.logprobs.scored_logprobs` of these rows, computed on their prefix tree."""
    with _checkpointed_layers_keep_the_cache(causal_lm):
        encoded = encode_tree(_backbone(causal_lm), forest, completion_ids.device)
    width = scored.size(1)
    scored = scored.bool() & (torch.arange(width, device=scored.device)
                              < torch.tensor([len(s) - p for s, p in zip(sequences, prompt_lengths, strict=True)],
                                             device=scored.device).unsqueeze(1))
    columns = scored.cpu()
    index = []
    for r, (sequence, prompt) in enumerate(zip(sequences, prompt_lengths, strict=True)):
        # completion column j is token prompt + j, predicted by the hidden state one position before it
        every = encoded.index(r, range(prompt - 1, len(sequence) - 1))
        index.append(every[columns[r, : len(every)]])
    flat = encoded.flat()
    kept = flat[torch.cat(index).to(flat.device)]
    logps, entropy = _head(causal_lm, kept, completion_ids[scored], temperature, compute_entropy, fp32_head)
    logps = logps.new_zeros(scored.shape).masked_scatter(scored.to(logps.device), logps)
    if entropy is not None:
        entropy = entropy.new_zeros(scored.shape).masked_scatter(scored.to(entropy.device), entropy)
    return logps, entropy


def shared_prefix_logprobs(causal_lm: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                           scored: torch.Tensor, temperature: float, *, batch_size: int | None = None,
                           compute_entropy: bool = False, fp32_head: bool = False,
                           autocast: Callable[[], Any] = contextlib.nullcontext,
                           min_shared: int = MIN_SHARED_TOKENS) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """:func:`~turngym.trainers.logprobs.scored_logprobs_in_chunks` with each shared prefix encoded once, or None
    (the caller's unshared path) when the model cannot share (:func:`can_share`), the rows are not laid out as TRL's
    (left-padded prompts, right-padded completions) or no prefix saves ``min_shared`` tokens.

    ``batch_size`` rows at a time (as the unshared path): the rows are first sorted by their tokens, so rows with a
    common prefix fall in the same part; a part that shares nothing is computed by the unshared path, exactly.
    The log-probabilities (and entropies) are the unshared path's up to rounding, at the same positions (``scored``;
    0 elsewhere), with the same gradients.
    """
    width = scored.size(1)
    if width == 0 or not can_share(causal_lm):
        return None
    rows = _rows(input_ids, attention_mask, width)
    if rows is None:
        return None
    sequences, prompt_lengths = rows
    count = input_ids.size(0)
    batch_size = batch_size or count
    order = sorted(range(count), key=sequences.__getitem__) if batch_size < count else list(range(count))
    parts = [order[start: start + batch_size] for start in range(0, count, batch_size)]
    forests = [prefix_tree([sequences[r] for r in part], min_shared) for part in parts]
    if not any(shares(forest) for forest in forests):
        return None
    logps, entropies = [], []
    for part, forest in zip(parts, forests, strict=True):
        rows_here = torch.tensor(part, device=input_ids.device)
        with autocast():
            if shares(forest):
                lp, entropy = _tree_logprobs(causal_lm, forest, [sequences[r] for r in part],
                                             [prompt_lengths[r] for r in part], input_ids[rows_here, -width:],
                                             scored[rows_here], temperature, compute_entropy, fp32_head)
            else:
                lp, entropy = _logprobs.scored_logprobs(causal_lm, input_ids[rows_here], attention_mask[rows_here],
                                                        scored[rows_here], temperature,
                                                        compute_entropy=compute_entropy, fp32_head=fp32_head)
        logps.append(lp)
        entropies.append(entropy)
    back = torch.tensor(sorted(range(count), key=order.__getitem__), device=input_ids.device)  # inverse of order
    logps_all = torch.cat(logps).index_select(0, back.to(logps[0].device))
    entropy_all = torch.cat(entropies).index_select(0, back.to(entropies[0].device)) if compute_entropy else None
    return logps_all, entropy_all


# ---------------------------------------------------------------------------------------------------- the critic
def shared_prefix_hidden(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, *,
                         min_shared: int = MIN_SHARED_TOKENS) -> torch.Tensor | None:
    """The backbone's last hidden states, (rows, width, hidden), at every real position of the rows (0 on the
    padding), each prefix the rows share encoded once; None as :func:`shared_prefix_logprobs` (the caller's unshared
    path). ``model``: a causal LM or a token-classification model on the same backbones."""
    if sharing_obstacle(model) is not None or not contiguous(attention_mask):
        return None
    real = attention_mask.bool()
    sequences = [[t for t, m in zip(row, keep, strict=True) if m]
                 for row, keep in zip(input_ids.tolist(), real.tolist(), strict=True)]
    forest = prefix_tree(sequences, min_shared)
    if not shares(forest):
        return None
    with _checkpointed_layers_keep_the_cache(model):
        encoded = encode_tree(_backbone(model), forest, input_ids.device)
    flat = encoded.flat()
    gather = torch.full(attention_mask.shape, flat.size(0), dtype=torch.long)  # the padding reads a row of zeros
    for r, (sequence, first) in enumerate(zip(sequences, real.int().argmax(1).tolist(), strict=True)):
        if sequence:
            gather[r, first: first + len(sequence)] = encoded.index(r, range(len(sequence)))
    return torch.cat([flat, flat.new_zeros(1, flat.size(1))])[gather.to(flat.device)]


class PrefixSharingCritic(TokenCritic):
    """The default critic (:class:`~turngym.trainers.critic.TokenCritic`) whose value model encodes each prefix its
    rows share once (``share_prefixes``): V at every real position as the unshared pass's, up to rounding, with the
    same gradients. A wrapped value model (DDP) or one that cannot share runs unshared."""

    @classmethod
    def of(cls, critic: TokenCritic) -> PrefixSharingCritic:
        """The same value model, config and processes (a fresh optimizer: call it before the first step)."""
        return cls(critic.model, critic.config, critic.processes)

    def forward(self, ids: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
        if self.processes.unwrap_model(self.model) is self.model:
            hidden = shared_prefix_hidden(self.model, ids, attention)
            if hidden is not None:  # the token-classification head (its dropout is 0: critic.without_dropout)
                head = self.model.score if hasattr(self.model, "score") else self.model.classifier
                return head(hidden)[..., 0].float()
        return super().forward(ids, attention)
