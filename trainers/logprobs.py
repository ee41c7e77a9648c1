"""Per-token log-probabilities of the sampled tokens, projected through the vocabulary only where a loss reads them.

A multi-turn episode is one long completion: the model's own commands (a few tokens a turn) between the
world's observations (most of the tokens), all after a prompt. TRL's fused LM head (``add_fused_lm_head``)
projects the positions whose label is not -100, but only on Triton devices; on CPU it projects *every*
position, prompt and observations included, and its labels mark every completion token anyway. The vocabulary
projection (49k entries for SmolLM2) and its backward then cost as much as the transformer's layers, for
positions whose log-probabilities the loss multiplies by zero.

:func:`scored_logprobs` runs the backbone once and sends through TRL's own chunked log-probability kernel
(``trl.kernels.ChunkedLogProbFunction``, the function TRL's compact path calls) only the positions ``scored``
marks, so each kept log-probability is TRL's number. It is a function of its own rather than a TRL option
because TRL 1.16 offers no way to choose the scored positions (bench/rl_step.py measures the saving).
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from trl.kernels import ChunkedLogProbFunction

CHUNK_SIZE = 32768  # vocabulary entries a tile of the kernel holds: TRL's own (_CHUNKED_LOGPROB_CHUNK_SIZE)
# Text-config fields that change TRL's head (a logit softcap or scale): such models keep TRL's full path.
SCALED_HEAD_FIELDS = ("final_logit_softcapping", "logit_scale", "output_multiplier", "lm_head_multiplier",
                      "logits_scaling")


def plain_head(causal_lm: Any) -> bool:
    """The model's logits are ``hidden @ W.T + b`` (no softcap, no scale), and its config is text-only."""
    config = causal_lm.config
    return config.get_text_config() is config and all(getattr(config, f, None) is None for f in SCALED_HEAD_FIELDS)


def scored_logprobs(causal_lm: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, scored: torch.Tensor,
                    temperature: float, *, compute_entropy: bool = False, fp32_head: bool = False,
                    ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probabilities (and entropies) of the last ``C = scored.size(1)`` tokens at the positions ``scored`` marks.

    For completion position j (sequence index t = T - C + j), with h_{t-1} the backbone's last hidden state
    before it and z = (W h_{t-1} + b) / temperature over the vocabulary:

        log pi(y_t | y_<t) = z[y_t] - logsumexp(z),     H_t = logsumexp(z) - sum_v softmax(z)_v z_v

    where ``scored[:, j]`` is true, and exactly 0 elsewhere (as TRL leaves unscored positions), so a loss
    that masks those positions has the same value and gradient as with TRL's full projection.
    Returns ``(logps, entropies or None)``, each ``(B, C)``. Run it under the trainer's autocast.
    """
    width = scored.size(1)
    hidden = causal_lm.base_model(input_ids=input_ids, attention_mask=attention_mask,
                                  use_cache=False).last_hidden_state[:, -width - 1: -1]
    head = causal_lm.get_output_embeddings()
    hidden, labels, scored = hidden.to(head.weight.device), input_ids[:, -width:].to(head.weight.device), scored.bool()
    kept = hidden[scored]
    autocast = torch.autocast(kept.device.type, enabled=False) if fp32_head else contextlib.nullcontext()
    with autocast:
        per_token = ChunkedLogProbFunction.apply(kept.float() if fp32_head else kept, head.weight, head.bias,
                                                 labels[scored], temperature, CHUNK_SIZE, None, 1.0,
                                                 ("log_probs", "entropy") if compute_entropy else ("log_probs",))
    # masked_scatter keeps the result connected to the model when nothing is scored (a zero gradient, no error).
    logps, entropy = (None if x is None else x.new_zeros(scored.shape).masked_scatter(scored, x)
                      for x in per_token[:2])
    return logps, entropy


def scored_logprobs_in_chunks(causal_lm: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                              scored: torch.Tensor, temperature: float, *, batch_size: int | None = None,
                              compute_entropy: bool = False, fp32_head: bool = False,
                              autocast: Any = contextlib.nullcontext) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`scored_logprobs` over ``batch_size`` rows at a time, each chunk under ``autocast()`` (the trainer's)."""
    batch_size = batch_size or input_ids.size(0)
    logps, entropies = [], []
    for rows in (slice(start, start + batch_size) for start in range(0, input_ids.size(0), batch_size)):
        with autocast():
            lp, entropy = scored_logprobs(causal_lm, input_ids[rows], attention_mask[rows], scored[rows], temperature,
                                          compute_entropy=compute_entropy, fp32_head=fp32_head)
        logps.append(lp)
        entropies.append(entropy)
    return torch.cat(logps), (torch.cat(entropies) if compute_entropy else None)
