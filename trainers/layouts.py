"""How the step's episodes become the rows TRL's loss reads: one row per episode, or one per turn.

TRL's batch is a dict of tensors, one row per sample: ``prompt_ids``/``prompt_mask`` (left-padded),
``completion_ids``/``completion_mask`` (right-padded), ``tool_mask`` (1 where a completion token is in the loss),
``advantages`` (one per completion token), the per-token logprobs of the sampler (``sampling_per_token_logps``), of
the policy at sampling time (``old_per_token_logps``) and of the reference (``ref_per_token_logps``), and the
loss's token count over every process (``num_items_in_batch``).

- **Whole episode** (the default): row i is episode i, the prompt then every turn, the model's and the world's
  tokens alike. ``env_mask`` (the model's tokens) is TRL's tool mask, so the world's tokens stay out of the loss.
- **Per turn** (``history_window: K``; and any step where a ``history`` of strip_thinking or compact rewrote some
  episode's context): row (i, t) is turn t of episode i: the exact context the model was given at turn t (the
  first prompt and the last K turns, or the context the history made) and the ids it sampled there
  (:meth:`~turngym.trainers.episodes.Episode.turn_samples`). TRL builds one stand-in row per such episode (its
  first turn); :func:`per_turn_rows` replaces every row, and :func:`recompute_logps` redoes, with a forward pass
  handed in, the logprobs TRL computed on the stand-ins.

Nothing here imports TRL or runs a model.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from typing import Any

import torch

from turngym.trainers.episodes import Episode

Rows = dict[str, Any]  # TRL's batch of rows, as above
# forward(key, ids, attention, width): without gradients, the per-token logprobs of the last `width` tokens that
# `key` names ("old_per_token_logps": the policy's, "ref_per_token_logps": the reference's).
Forward = Callable[[str, torch.Tensor, torch.Tensor, int], torch.Tensor]
Gather = Callable[[torch.Tensor], torch.Tensor]  # one tensor from every process, concatenated


def pad(rows: Sequence[Sequence[Any]], value: Any, side: str, dtype: torch.dtype, *, multiple: int | None = None,
        device: Any = None) -> torch.Tensor:
    """Rows padded with ``value`` on ``side`` ("left" or "right") to the longest, rounded up to a ``multiple``
    (as TRL's ``pad``).

    Written here, not imported: the modules behind the adapter import no TRL (tests/test_trl_contract.py), and
    torch's ``pad_sequence`` neither rounds to a multiple nor takes an empty batch. Tested equal to TRL's."""
    width = max((len(r) for r in rows), default=0)
    if multiple:
        width += -width % multiple
    out = torch.full((len(rows), width), value, dtype=dtype)
    for i, row in enumerate(rows):
        start = width - len(row) if side == "left" else 0
        out[i, start: start + len(row)] = torch.tensor(list(row), dtype=dtype)
    return out.to(device) if device is not None else out


def padded(rows: Sequence[Sequence[float]], width: int, device: Any = None) -> torch.Tensor:
    """Right-pad float rows with 0 to ``width`` (TRL right-pads completions the same way)."""
    out = torch.zeros(len(rows), width, dtype=torch.float32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.float32)
    return out.to(device) if device is not None else out


def rollout_rows(episodes: Sequence[Episode], *, per_turn: bool) -> Rows:
    """What ``rollout_func`` hands TRL: each episode's ids, sampling logprobs and ``env_mask``, and the
    :class:`Episode` records under ``"episode"`` (TRL puts one on each input row, where the reward function and
    the advantages read it back). Per turn, and for an episode whose history was rewritten (never one sequence),
    the episode's first turn stands in for it (its prompt alone if it played none) until :func:`per_turn_rows`
    replaces the rows."""
    episodes = list(episodes)
    rows = [_first_turn_row(e) if per_turn or e.history_rewritten else
            (e.prompt_ids, e.completion_ids, e.logprobs, e.env_mask) for e in episodes]
    return {"prompt_ids": [r[0] for r in rows], "completion_ids": [r[1] for r in rows],
            "logprobs": [r[2] for r in rows], "env_mask": [r[3] for r in rows], "episode": episodes}


def _first_turn_row(episode: Episode) -> tuple[list[int], list[int], list[float], list[int]]:
    """(prompt, completion, logprobs, env_mask) of the episode's first turn as its own sample."""
    first = episode.turn_samples()[:1]
    if not first:
        return episode.prompt_ids, [], [], []
    return first[0].prompt_ids, first[0].completion_ids, first[0].logprobs, [1] * len(first[0].completion_ids)


def drop_rows(rows: Rows, dropped: Sequence[bool]) -> None:
    """Dynamic sampling: the dropped rows leave the loss mask (``tool_mask``, which TRL multiplies into the
    completion mask), so they add neither policy gradient nor KL."""
    keep = torch.tensor([0 if d else 1 for d in dropped], device=rows["completion_ids"].device)
    rows["tool_mask"] = rows["tool_mask"] * keep.unsqueeze(1).to(rows["tool_mask"].dtype)


def count_loss_tokens(rows: Rows, gather: Gather) -> None:
    """``num_items_in_batch``: the loss's tokens on every process, which TRL normalises by (loss types dapo and
    cispo; bnpo reads the micro-batch's mask; grpo and dr_grpo count rows, a dropped one as zeros)."""
    rows["num_items_in_batch"] = gather((rows["completion_mask"] * rows["tool_mask"]).sum()).sum()


def whole_episode_rows(rows: Rows, token_advantages: Sequence[Sequence[float]], dropped: Sequence[bool], *,
                       recount: bool, gather: Gather) -> None:
    """One row per episode: its token advantages (0 on the world's tokens and the padding). The rows of a dropped
    group leave the loss; ``recount`` (a group of the step was dropped, on any process) counts its tokens again."""
    rows["advantages"] = padded(token_advantages, rows["completion_ids"].size(1), rows["completion_ids"].device)
    if recount:
        drop_rows(rows, dropped)
        count_loss_tokens(rows, gather)


def per_turn_rows(rows: Rows, episodes: Sequence[Episode], per_turn: Sequence[Sequence[float]],
                  dropped: Sequence[bool], *, pad_id: int, ends: Container[int] | None, multiple_of: int = 1,
                  pad_to_multiple_of: int | None = None, gather: Gather) -> torch.Tensor | None:
    """One row per model turn in place of TRL's stand-in rows.

    Row (i, t): prompt = the exact context turn t of episode i was sampled from, completion = the ids sampled at
    turn t, every one in the loss with the turn's advantage A_{i,t} and its sampling logprob. Out of the loss: a
    dropped group's rows, and (``ends`` given: TRL's ``mask_truncated_completions``) a turn that did not end on one
    of ``ends``. Copies of the first row, out of the loss, pad the rows to a multiple of ``multiple_of`` (TRL splits
    the batch in ``steps_per_generation`` parts and would drop a remainder).

    Returns the change in this process's input tokens (TRL counted the stand-ins'), or None when no episode played
    a turn (the stand-ins stay, out of the loss). The policy's and reference's logprobs are then stale:
    :func:`recompute_logps`.
    """
    samples = [(i, sample) for i, e in enumerate(episodes) for sample in e.turn_samples()]
    device = rows["completion_ids"].device
    if not samples:
        rows["tool_mask"] = torch.zeros_like(rows["completion_mask"])
        rows["advantages"] = torch.zeros_like(rows["completion_mask"], dtype=torch.float32)
        rows["num_items_in_batch"] = gather(rows["tool_mask"].sum()).sum()
        return None
    in_loss = [not dropped[i] for i, _ in samples]
    if ends is not None:
        in_loss = [keep and s.completion_ids[-1] in ends for keep, (_, s) in zip(in_loss, samples, strict=True)]
    filler = -len(samples) % multiple_of
    samples, in_loss = samples + [samples[0]] * filler, in_loss + [False] * filler
    before = rows["prompt_mask"].sum() + rows["completion_mask"].sum()

    def stack(values: list[list], value: Any, side: str, dtype: torch.dtype) -> torch.Tensor:
        return pad(values, value, side, dtype, multiple=pad_to_multiple_of, device=device)

    prompts, completions = [s.prompt_ids for _, s in samples], [s.completion_ids for _, s in samples]
    rows["prompt_ids"] = stack(prompts, pad_id, "left", torch.long)
    rows["prompt_mask"] = stack([[1] * len(p) for p in prompts], 0, "left", torch.long)
    rows["completion_ids"] = stack(completions, pad_id, "right", torch.long)
    rows["completion_mask"] = stack([[1] * len(c) for c in completions], 0, "right", torch.long)
    rows["tool_mask"] = rows["completion_mask"] * torch.tensor(in_loss, device=device).long().unsqueeze(1)
    rows["advantages"] = stack([[per_turn[i][s.turn]] * len(s.completion_ids) for i, s in samples], 0.0, "right",
                               torch.float32)
    if "sampling_per_token_logps" in rows:
        rows["sampling_per_token_logps"] = stack([s.logprobs for _, s in samples], 0.0, "right", torch.float32)
    count_loss_tokens(rows, gather)
    return rows["prompt_mask"].sum() + rows["completion_mask"].sum() - before


def recompute_logps(rows: Rows, forward: Forward) -> None:
    """The per-token logprobs TRL made on other rows (the policy's at sampling time, the reference's), made again
    on these rows with ``forward``."""
    ids = torch.cat([rows["prompt_ids"], rows["completion_ids"]], dim=1)
    attention = torch.cat([rows["prompt_mask"], rows["completion_mask"]], dim=1)
    for key in ("old_per_token_logps", "ref_per_token_logps"):
        if key in rows:
            rows[key] = forward(key, ids, attention, rows["completion_ids"].size(1))
