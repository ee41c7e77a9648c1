"""Truncated importance sampling (TIS): the loss's tokens reweighted from the sampler's numbers to the trainer's.

The rollout samples in one numerical setup (fp32 HF generation, vLLM kernels) and the loss differentiates another
(bf16 autocast...), so the sampled tokens are slightly off-policy for the trainer. Each model token's advantage is
multiplied by

    w_k = min(exp(log pi_train(a_k) - log pi_sampler(a_k)), C)

(Yao et al. 2025, "Your efficient RL framework secretly brings you off-policy RL training"). w_k > 0 is a
constant of the loss, so -min(r A w, clip(r) A w) = w * -min(r A, clip(r) A): weighting the advantages is exactly
TRL's per-token loss times the ratio. log pi_train comes from whatever forward pass the caller has (the loss's own,
or TRL's at sampling time); nothing here runs a model or imports TRL.
"""

from __future__ import annotations

from typing import Any

import torch

from turngym.trainers.metrics import Processes


def truncated_importance_weights(trainer_logps: torch.Tensor, sampling_logps: torch.Tensor, mask: torch.Tensor,
                                 cap: float) -> tuple[torch.Tensor, torch.Tensor]:
    """w_k = min(exp(log pi_train(a_k) - log pi_sampler(a_k)), cap) on model tokens (mask = 1), else 1.

    A token whose sampling logprob is NaN (unknown) gets w = 1. Returns (capped weights, uncapped ratios), (B, T).
    """
    difference = torch.nan_to_num((trainer_logps - sampling_logps) * mask, nan=0.0)
    ratios = torch.exp(difference)
    return torch.where(mask.bool(), ratios.clamp(max=cap), torch.ones_like(ratios)), ratios


def tis_applies(cap: float | None, rows: dict[str, Any], *, corrected_elsewhere: bool = False) -> bool:
    """TIS is on (``cap``), the rows carry their sampling logprobs, and no one else corrects them (TRL's own
    vLLM correction, ``corrected_elsewhere``)."""
    return cap is not None and rows.get("sampling_per_token_logps") is not None and not corrected_elsewhere


def tis_weights(trainer_logps: torch.Tensor, rows: dict[str, Any], cap: float,
                processes: Processes) -> tuple[torch.Tensor, dict[str, float]]:
    """The capped weights of the rows' loss tokens (``completion_mask`` x ``tool_mask``) from the trainer's
    logprobs of the sampled tokens, and their statistics over every process's tokens: ``tis/logp_gap_mean``
    (mean |log pi_train - log pi_sampler|), ``tis/ratio_mean`` and ``tis/ratio_max`` (before the cap),
    ``tis/capped_fraction``."""
    sampling = rows["sampling_per_token_logps"]
    mask = rows["completion_mask"] * rows.get("tool_mask", torch.ones_like(rows["completion_mask"]))
    weights, ratios = truncated_importance_weights(trainer_logps, sampling, mask, cap)
    model_tokens = mask.bool() & ~torch.isnan(sampling)
    gap = (trainer_logps - sampling).abs()[model_tokens]
    stats = torch.stack([gap.sum(), ratios[model_tokens].sum(), (ratios[model_tokens] > cap).sum(),
                         model_tokens.sum()]).double()
    gap_sum, ratio_sum, capped, count = processes.reduce(stats, reduction="sum").tolist()
    ratio_max = ratios[model_tokens].max() if model_tokens.any() else torch.ones((), device=ratios.device)
    count = max(count, 1.0)
    return weights, {"tis/logp_gap_mean": gap_sum / count, "tis/ratio_mean": ratio_sum / count,
                     "tis/ratio_max": processes.gather(ratio_max.reshape(1).float()).max().item(),
                     "tis/capped_fraction": capped / count}
