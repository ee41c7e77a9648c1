"""A learned critic for the estimators that need values (PPO's GAE, or your own): its config, protocol and default.

An estimator registered with ``needs=("values",)`` reads V from a :class:`Critic` and returns the targets the
critic regresses towards. Each step the trainer calls, in order:

    values(rows)                       V of every token's state, no gradient             (scoring)
    targets(rows, values, targets, m)  keep V_old and the targets on the rows; fit stats  (scoring)
    loss(rows, normalizer, backward)   the value loss's gradient, one micro-batch         (each micro-batch)
    step()                             the critic's optimizer step                        (each accumulation boundary)

and ``save``/``load`` with every checkpoint. :class:`NoCritic` stands in when the estimator needs no values (each
call a no-op), so the trainer calls these unconditionally (:func:`build_critic` decides). :class:`TokenCritic` is
the default: a token-classification head (one label) on a backbone, trained on the clipped value loss. Nothing
here imports TRL; the processes (accelerate's ``Accelerator``: ``prepare_model``, ``unwrap_model``, ``backward``,
``reduce``, ``gather``) are handed in.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol, runtime_checkable

import torch

from turngym.trainers.layouts import Rows, padded

CRITIC_DIR = "critic"  # the critic's weights, in a checkpoint or beside the saved policy
CRITIC_OPTIMIZER = "critic_optimizer.pt"


def _option(default: Any, text: str, flat: str | None = None, **extra: Any) -> Any:
    """A CriticConfig field: its default, the help ``text`` a run's config shows, and its flat name there (default:
    the same); ``extra`` goes to the metadata (``flat_default``: the run config's default, where None is allowed)."""
    return field(default=default, metadata={"help": text, **({"flat": flat} if flat else {}), **extra})


@dataclass
class CriticConfig:
    """The critic's settings, and those of PPO's GAE that reads it (``TurnGymConfig.critic_config``).

    Each field is declared here once: a run's config sets it under its flat name (``critic_learning_rate``,
    ``critic_rows_per_pass``, ``lam``...: :data:`FLAT_FIELDS`), in its critic group
    (:class:`~turngym.trainers.config.CriticOptions`, made from these fields), which fills this at construction.
    """

    lam: float = _option(0.95, "GAE lambda (PPO)")
    bootstrap_truncated: bool = _option(
        True, "PPO: a truncated episode (turn or time limit) ends with the critic's value of its last state instead "
              "of 0. With gamma=1 the critic can drift when nearly every episode is truncated and it cannot tell how "
              "far along an episode is; turn it off when the limit is part of the task (nothing follows it)")
    whiten_advantages: bool = _option(True, "PPO: normalise token advantages over the batch")  # its model tokens
    model_name_or_path: str | None = _option(  # None: a copy of the policy's backbone
        None, "PPO critic backbone (default: the policy's)", "critic_model_name_or_path")
    learning_rate: float = _option(  # a run's default (None) is 10x the policy's
        1e-5, "PPO critic learning rate (default: 10x learning_rate, the reference study's ratio: critic 5e-6 to 1e-5 "
              "for actor 5e-7 to 1e-6)", "critic_learning_rate", flat_default=None)
    warmup_steps: int = _option(
        0, "PPO: the first N optimizer steps train the critic only (the policy loss is skipped), so GAE starts from "
           "values that fit the returns; these steps still spend their episodes and count towards max_steps",
        "critic_warmup_steps")
    value_clip: float | None = _option(0.2, "PPO value clipping range (None: off)")  # of V - V_old in the loss
    max_grad_norm: float = _option(1.0, "PPO critic gradient clipping", "critic_max_grad_norm")
    rows_per_pass: int = _option(
        4, "PPO: episodes per critic forward/backward pass. The value loss is a sum over tokens, so the split is "
           "exact; only one pass's activations are held (one PPO step of the demo: 12.3 GB peak in one pass, 7.4 GB in "
           "passes of 4)", "critic_rows_per_pass")

    def __post_init__(self) -> None:
        if self.rows_per_pass < 1:
            raise ValueError(f"rows_per_pass (critic_rows_per_pass) must be >= 1, got {self.rows_per_pass}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps (critic_warmup_steps) must be >= 0, got {self.warmup_steps}")

    @classmethod
    def from_flat(cls, args: Any) -> CriticConfig:
        """The CriticConfig of a config with the flat fields (a TurnGymConfig)."""
        return cls(**{ours: getattr(args, flat) for flat, ours in FLAT_FIELDS.items()})


# TurnGymConfig's flat field -> its CriticConfig field (the flat names are what YAML configs and the CLI use)
FLAT_FIELDS = {spec.metadata.get("flat", spec.name): spec.name for spec in fields(CriticConfig)}


@runtime_checkable
class Critic(Protocol):
    """A learned value function V(s) for the estimators that need values; the trainer drives it (module docstring).

    ``rows`` is TRL's batch of rows (:mod:`turngym.trainers.layouts`); ``values`` has one column per completion
    token, V of the state before it, and one more, V of the state after the last one.
    """

    config: CriticConfig

    @classmethod
    def build(cls, policy: Any, config: CriticConfig, processes: Any, model: Any = None) -> Critic:
        """A critic for ``policy`` (``model``: a value model given by the user)."""
        ...

    def values(self, rows: Rows) -> torch.Tensor:
        """(B, C + 1) values, without gradients."""
        ...

    def targets(self, rows: Rows, values: torch.Tensor, targets: Sequence[Sequence[float]],
                masks: Sequence[Sequence[int]]) -> dict[str, float]:
        """Keep what the loss needs on ``rows`` (they are split into micro-batches with it); return fit metrics."""
        ...

    def loss(self, rows: Rows, normalizer: torch.Tensor | float,
             backward: Callable[[torch.Tensor], None]) -> dict[str, float]:
        """Accumulate the value loss's gradient over ``rows`` (``backward`` each part); return its metrics."""
        ...

    def step(self) -> None:
        """One optimizer step on the accumulated gradient."""
        ...

    def save(self, folder: str, *, optimizer: bool = True) -> None:
        """The critic (and its optimizer) into ``folder``."""
        ...

    def load(self, folder: str) -> None:
        """The critic and its optimizer from ``folder`` (a checkpoint); an error if it holds none."""
        ...


class NoCritic:
    """The :class:`Critic` of a run whose estimator needs no values: every call is a no-op (the null object).

    ``values`` gives None (what the estimators read without a critic), ``targets`` and ``loss`` no metrics,
    ``step``/``save``/``load`` nothing, and its ``warmup_steps`` of 0 never skips the policy loss. Code that
    asked ``trainer.critic is None`` asks ``isinstance(trainer.critic, NoCritic)`` or ``not trainer.critic.enabled``.
    """

    enabled = False  # TokenCritic's is True; a user's Critic without the attribute counts as enabled

    def __init__(self, config: CriticConfig | None = None) -> None:
        # no critic to warm up: the policy trains from the first step
        self.config = replace(config or CriticConfig(), warmup_steps=0)

    @classmethod
    def build(cls, policy: Any, config: CriticConfig, processes: Any, model: Any = None) -> NoCritic:
        return cls(config)

    def values(self, rows: Rows) -> None:
        return None

    def targets(self, rows: Rows, values: torch.Tensor | None, targets: Sequence[Sequence[float]],
                masks: Sequence[Sequence[int]]) -> dict[str, float]:
        return {}

    def loss(self, rows: Rows, normalizer: torch.Tensor | float,
             backward: Callable[[torch.Tensor], None]) -> dict[str, float]:
        return {}

    def step(self) -> None:
        pass

    def save(self, folder: str, *, optimizer: bool = True) -> None:
        pass

    def load(self, folder: str) -> None:
        pass  # a checkpoint's critic (if any) is not read: as before, a run without one ignores it

    def __repr__(self) -> str:
        return "NoCritic()"


def build_critic(needs_values: bool, policy: Any, config: CriticConfig, processes: Any, critic: Any = None) -> Any:
    """The one place that decides whether a run has a critic: :class:`NoCritic` when the estimator needs no
    values (a given ``critic`` is then unused), else ``critic`` when it is a :class:`Critic`, else a
    :class:`TokenCritic` (on ``critic``, a value model, when given)."""
    if not needs_values:
        return NoCritic(config)
    return critic if isinstance(critic, Critic) else TokenCritic.build(policy, config, processes, model=critic)


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor,
               clip: float | None, normalizer: torch.Tensor | float) -> tuple[torch.Tensor, torch.Tensor]:
    """Clipped value loss (PPO):

        L_V = 1/2 * sum_k m_k max((V_k - R_k)^2, (V_old,k + clip(V_k - V_old,k, -c, c) - R_k)^2) / N

    summed over model tokens (m = 1) and divided by ``normalizer`` N, the loss tokens of this
    micro-batch's share, so gradient accumulation and processes average as TRL's policy loss does.
    Returns (loss, fraction of tokens where the clipped term was the larger).
    """
    unclipped = (values - returns) ** 2
    if clip is None:
        return 0.5 * (unclipped * mask).sum() / normalizer, torch.zeros((), device=values.device)
    clipped_values = old_values + (values - old_values).clamp(-clip, clip)
    clipped = (clipped_values - returns) ** 2
    used_clip = (clipped > unclipped).float()
    loss = 0.5 * (torch.maximum(unclipped, clipped) * mask).sum() / normalizer
    return loss, (used_clip * mask).sum() / mask.sum().clamp(min=1.0)


def without_dropout(model: Any) -> Any:
    """Every dropout probability of ``model`` set to 0, in its config and in its modules (in place).

    The critic is a regression: dropout noise in its values and targets (the token-classification
    head alone adds p = 0.1 by default) keeps it from fitting the returns in a few steps, and
    GAE would read noisy values. Zeroing the probabilities, rather than running the critic in eval
    mode, makes it dropout-free whatever mode anyone puts it in, and keeps what train mode does
    besides (gradient checkpointing, for one, is only active in train mode).
    """
    config = getattr(model, "config", None)
    for name, value in (vars(config).items() if config is not None else ()):
        if "dropout" in name and isinstance(value, float) and not isinstance(value, bool):
            setattr(config, name, 0.0)
    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            module.p = 0.0
        if isinstance(getattr(module, "attention_dropout", None), float):
            module.attention_dropout = 0.0  # attention modules read the probability at each forward
    return model


def value_model(policy: Any, name_or_path: str | None = None) -> Any:
    """A value model with one value per token: a token-classification head (one label) on a backbone.

    From ``name_or_path`` when given; otherwise a copy of the policy's own backbone, with a
    zero-initialised value head so the first values are 0. Dropout-free (:func:`without_dropout`).
    """
    from transformers import AutoConfig, AutoModelForTokenClassification

    if name_or_path:
        from turngym.agents.models import resolve_model

        path = resolve_model(name_or_path)
        config = AutoConfig.from_pretrained(path)
        config.num_labels, config.classifier_dropout = 1, 0.0  # the head's dropout would default to 0.1
        critic = AutoModelForTokenClassification.from_pretrained(path, config=config)
    else:
        config = copy.deepcopy(policy.config)
        config.num_labels = 1
        config.classifier_dropout = 0.0  # the head's dropout would default to 0.1
        critic = AutoModelForTokenClassification.from_config(config)
        critic.base_model.load_state_dict(policy.base_model.state_dict())
    head = critic.score if hasattr(critic, "score") else critic.classifier
    torch.nn.init.zeros_(head.weight)
    if head.bias is not None:
        torch.nn.init.zeros_(head.bias)
    critic.config.pad_token_id = policy.config.pad_token_id
    return without_dropout(critic).to(dtype=next(policy.parameters()).dtype)


def sequences(rows: Rows) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's whole sequence, prompt then completion: (ids, attention mask)."""
    return (torch.cat([rows["prompt_ids"], rows["completion_ids"]], dim=1),
            torch.cat([rows["prompt_mask"], rows["completion_mask"]], dim=1))


class TokenCritic(torch.nn.Module):
    """The default :class:`Critic`: V for the state before every token from a value model (:func:`value_model`),
    trained with its own AdamW on the clipped value loss (:func:`value_loss`), ``rows_per_pass`` rows at a time.

    A module, so ``parameters()`` are the value model's; ``optimizer`` is stepped by hand at each accumulation
    boundary (accelerate's wrapper would skip steps outside its own accumulation context, which the critic is not in).
    """

    enabled = True

    def __init__(self, model: Any, config: CriticConfig, processes: Any) -> None:
        super().__init__()
        self.model, self.config, self.processes = model, config, processes
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.learning_rate)

    @classmethod
    def build(cls, policy: Any, config: CriticConfig, processes: Any, model: Any = None) -> TokenCritic:
        """A copy of the policy's backbone with a zero value head (or ``config.model_name_or_path``'s, or
        ``model``, made dropout-free), prepared for the processes (DDP under several GPUs)."""
        model = without_dropout(model) if model is not None else value_model(policy, config.model_name_or_path)
        return cls(processes.prepare_model(model), config, processes)

    def forward(self, ids: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
        """V at every position of the sequences, (B, T), in fp32."""
        return self.model(input_ids=ids, attention_mask=attention).logits[..., 0].float()

    def values(self, rows: Rows) -> torch.Tensor:
        prompt_width, width = rows["prompt_ids"].size(1), rows["completion_ids"].size(1)
        with torch.no_grad():
            every = self(*sequences(rows))
        return every[:, prompt_width - 1: prompt_width + width]  # position p predicts token p + 1: V before it

    def targets(self, rows: Rows, values: torch.Tensor, targets: Sequence[Sequence[float]],
                masks: Sequence[Sequence[int]]) -> dict[str, float]:
        """``old_values`` and ``returns`` on the rows; the fit over every process's model tokens:
        ``critic/explained_variance`` = 1 - Var(R - V) / Var(R) and ``critic/value_mean``."""
        width = rows["completion_ids"].size(1)
        values = values[:, :width]
        mask, returns = padded(masks, width, values.device), padded(targets, width, values.device)
        stats = torch.stack([
            mask.sum(), (returns * mask).sum(), (returns ** 2 * mask).sum(),
            ((returns - values) * mask).sum(), ((returns - values) ** 2 * mask).sum(),
        ]).double()
        count, r1, r2, d1, d2 = self.processes.reduce(stats, reduction="sum").tolist()
        count = max(count, 1.0)
        variance = r2 / count - (r1 / count) ** 2
        residual = d2 / count - (d1 / count) ** 2
        rows["old_values"], rows["returns"] = values.detach(), returns
        return {"critic/explained_variance": 1.0 - residual / variance if variance > 1e-12 else 0.0,
                "critic/value_mean": float((values * mask).sum() / mask.sum().clamp(min=1.0))}

    def loss(self, rows: Rows, normalizer: torch.Tensor | float,
             backward: Callable[[torch.Tensor], None]) -> dict[str, float]:
        """The value loss's gradient, ``rows_per_pass`` rows at a time.

        L_V is a sum over tokens divided by a fixed normalizer, so the passes' gradients add up to the
        whole batch's exactly, while the activations kept for backward are those of one pass only.
        Returns ``critic/value_loss`` and ``critic/clip_fraction``, averaged over the processes.
        """
        prompt_width, width = rows["prompt_ids"].size(1), rows["completion_ids"].size(1)
        ids, attention = sequences(rows)
        mask = rows["completion_mask"] * rows["tool_mask"]
        total = clipped_tokens = torch.zeros((), device=ids.device)
        step = self.config.rows_per_pass
        for part in (slice(start, start + step) for start in range(0, ids.size(0), step)):
            values = self(ids[part], attention[part])[:, prompt_width - 1:][:, :width]
            loss, clipped = value_loss(values, rows["old_values"][part], rows["returns"][part], mask[part],
                                       self.config.value_clip, normalizer)
            backward(loss)
            total = total + loss.detach()
            clipped_tokens = clipped_tokens + clipped.detach() * mask[part].sum()
        clip_fraction = clipped_tokens / mask.sum().clamp(min=1.0)
        return {"critic/value_loss": self.processes.gather(total).mean().item(),
                "critic/clip_fraction": self.processes.gather(clip_fraction).mean().item()}

    def step(self) -> None:
        torch.nn.utils.clip_grad_norm_(self.parameters(), self.config.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def save(self, folder: str, *, optimizer: bool = True) -> None:
        """Weights in ``folder/critic/`` (loadable with ``AutoModelForTokenClassification``), the optimizer's
        state in ``folder/critic_optimizer.pt``."""
        self.processes.unwrap_model(self.model).save_pretrained(os.path.join(folder, CRITIC_DIR))
        if optimizer:
            torch.save(self.optimizer.state_dict(), os.path.join(folder, CRITIC_OPTIMIZER))

    def load(self, folder: str) -> None:
        path = os.path.join(folder, CRITIC_DIR)
        if not os.path.isdir(path):
            raise FileNotFoundError(f"checkpoint {folder} has no critic ({CRITIC_DIR}/): was it saved by a run "
                                    "without one (an algorithm that needs no values)?")
        from transformers import AutoModelForTokenClassification

        saved = AutoModelForTokenClassification.from_pretrained(path)
        self.processes.unwrap_model(self.model).load_state_dict(saved.state_dict())
        state = torch.load(os.path.join(folder, CRITIC_OPTIMIZER), map_location=self.processes.device,
                           weights_only=True)
        self.optimizer.load_state_dict(state)
