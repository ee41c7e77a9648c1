"""``TurnGymTrainer``: multi-turn PPO, GRPO and the RLOO family on TRL's GRPOTrainer.

One training step, top to bottom:

1. TRL's sampler hands each process task ids, each repeated ``num_generations`` times in a row
   (a group). ``rollout_func`` plays one whole episode per entry with the current weights
   (:class:`~turngym.trainers.rollout.EpisodeRunner`) and returns the exact ids, the sampling logprobs and
   ``env_mask``, which TRL keeps as its tool mask: environment tokens stay out of the loss.
2. TRL scores the episodes with one reward function, the episode return, and computes its own
   episode-level advantages. We replace them (``_generate_and_score_completions``) with per-token
   advantages from ``turngym.trainers.advantages``, computed on *every* process's episodes (gathered), so
   a group split across processes is baselined whole.
3. PPO only: the critic's values for every token give GAE advantages and value targets; the critic
   takes its own optimizer step on the clipped value loss next to TRL's policy step.
4. TRL's clipped-ratio loss, logging and checkpointing do the rest. The critic is saved with every
   checkpoint and restored on resume.

TRL 1.16 has no PPOTrainer (removed in PR #7020), so the critic lives here, in the same trainer.
"""

from __future__ import annotations

import copy
import os
import random
import warnings
from collections.abc import Hashable, Sequence
from typing import Any, ClassVar

import torch
from accelerate.utils import gather_object
from datasets import Dataset
from trl import GRPOTrainer
from trl.models import unwrap_model_for_generation
from trl.models.utils import disable_gradient_checkpointing

from turngym.agents.base import stable_seed
from turngym.envs.tasks import TaskSet
from turngym.trainers import advantages as adv
from turngym.trainers.config import TurnGymConfig
from turngym.trainers.episodes import Episode
from turngym.trainers.rollout import BackendFactory, EpisodeRunner, evaluate_policy, rollout_seed

CRITIC_DIR = "critic"
CRITIC_OPTIMIZER = "critic_optimizer.pt"
LOGGED_TURNS = 8  # per-turn advantage statistics for turns 0..7


def episode_return(prompts: list, completions: list, episode: list[Episode], **_: Any) -> list[float]:
    """TRL reward function: the episode's return, computed by the world during the rollout."""
    return [e.episode_reward for e in episode]


# ---------------------------------------------------------------------- pure helpers
def group_keys(task_ids: Sequence[str], num_generations: int) -> list[Hashable]:
    """Group of each episode in TRL's global order: ``num_generations`` consecutive entries.

    Each group must be one task, which TRL's RepeatSampler guarantees; a mismatch means the data
    order was broken, so it fails loudly instead of baselining across tasks.
    """
    keys = []
    for index, task_id in enumerate(task_ids):
        group = index // num_generations
        if task_ids[group * num_generations] != task_id:
            raise RuntimeError(f"group {group} mixes tasks {task_ids[group * num_generations]!r} and {task_id!r}")
        keys.append(group)
    return keys


def turn_advantages(algorithm: str, turn_rewards: Sequence[Sequence[float]], groups: Sequence[Hashable], *,
                    gamma: float = 1.0, scale: str = "group", alone: str = "return") -> list[list[float]]:
    """One advantage per turn of every episode, for the critic-free algorithms.

    Episode-level estimators (``grpo``, ``rloo``) give every turn the episode's advantage;
    turn-level ones (``turn_grpo``, ``turn_rloo``) baseline each turn's return-to-go.
    """
    scale = {True: "group", False: "none"}.get(scale, scale)  # TRL's scale_rewards also takes a bool
    if algorithm in ("grpo", "rloo"):
        returns = [sum(r) for r in turn_rewards]
        per_episode = (adv.episode_grpo(returns, groups, scale) if algorithm == "grpo"
                       else adv.episode_rloo(returns, groups))
        return [[a] * len(r) for a, r in zip(per_episode, turn_rewards, strict=True)]
    if algorithm == "turn_rloo":
        return adv.turn_rloo(turn_rewards, groups, gamma, alone)
    if algorithm == "turn_grpo":
        return adv.turn_grpo(turn_rewards, groups, gamma, scale=scale)
    raise ValueError(f"no turn advantages for algorithm {algorithm!r}")


def padded(rows: Sequence[Sequence[float]], width: int, device: Any = None) -> torch.Tensor:
    """Right-pad rows with 0 to ``width`` (TRL right-pads completions the same way)."""
    out = torch.zeros(len(rows), width, dtype=torch.float32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.float32)
    return out.to(device) if device is not None else out


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

    PPO's critic is a regression: dropout noise in its values and targets (the token-classification
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


def truncated_importance_weights(trainer_logps: torch.Tensor, sampling_logps: torch.Tensor, mask: torch.Tensor,
                                 cap: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Truncated importance sampling (TIS) weights for tokens sampled by another engine than the trainer's:

        w_k = min(exp(log pi_train(a_k) - log pi_sampler(a_k)), C)     on model tokens (mask = 1), else 1

    The rollout samples with one numerical setup (fp32 HF generation, vLLM kernels) and the loss
    differentiates another (bf16 autocast...), so the tokens are slightly off-policy for the trainer;
    w_k reweights each token's policy-gradient term towards the trainer's distribution, and the cap C
    bounds the variance (Yao et al. 2025, "Your efficient RL framework secretly brings you off-policy
    RL training"). A token whose sampling logprob is NaN (unknown) gets w = 1.
    Returns (capped weights, uncapped ratios), both (B, T).
    """
    difference = torch.nan_to_num((trainer_logps - sampling_logps) * mask, nan=0.0)
    ratios = torch.exp(difference)
    return torch.where(mask.bool(), ratios.clamp(max=cap), torch.ones_like(ratios)), ratios


def train_tasks(args: TurnGymConfig) -> TaskSet:
    """The training tasks: ``num_train_tasks`` tasks of ``train_split`` after its first ``skip_train_tasks``."""
    from turngym.envs.panels import task_panel

    skip, count = args.skip_train_tasks, args.num_train_tasks
    tasks = task_panel(args.env_id, args.train_split, count + skip if count else None, args.world_kwargs())
    if not skip:
        return tasks
    if skip >= len(tasks):
        raise ValueError(f"skip_train_tasks={skip} leaves no task of the {len(tasks)} in split {args.train_split!r}")
    return TaskSet(name=f"{tasks.name}[{skip}:]", version=tasks.version, tasks=tuple(tasks)[skip:])


def lora_config(args: TurnGymConfig) -> Any:
    """The ``peft.LoraConfig`` of ``args``'s LoRA fields (TRL's ModelConfig names), through TRL's own
    ``get_peft_config``; None when ``use_peft`` is off."""
    if not args.use_peft:
        return None
    from trl import ModelConfig, get_peft_config

    return get_peft_config(ModelConfig(
        use_peft=True, lora_r=args.lora_r, lora_alpha=args.lora_alpha, lora_dropout=args.lora_dropout,
        lora_target_modules=args.lora_target_modules, lora_modules_to_save=args.lora_modules_to_save))


def zero_signal_groups(per_turn: Sequence[Sequence[float]], groups: Sequence[Hashable],
                       tolerance: float = 1e-8) -> set[Hashable]:
    """Groups in which every turn of every episode has advantage 0 (|A| <= ``tolerance``).

    Such a group (every episode of the task scored alike, e.g. all lost) adds no policy gradient; DAPO's
    dynamic sampling (Yu et al. 2025) keeps it out of the batch so that it does not dilute the step.
    """
    signal: dict[Hashable, bool] = {}
    for row, group in zip(per_turn, groups, strict=True):
        signal[group] = signal.get(group, False) or any(abs(a) > tolerance for a in row)
    return {group for group, has in signal.items() if not has}


def build_critic(policy: Any, name_or_path: str | None = None) -> Any:
    """A critic with one value per token: a token-classification head (one label) on a backbone.

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


# ---------------------------------------------------------------------- the trainer
class TurnGymTrainer(GRPOTrainer):
    """GRPOTrainer whose samples are whole multi-turn episodes, with per-token advantages.

    Args:
        model: the policy (a model, or a Hub name / local folder; default ``args.model_name_or_path``).
        args: a :class:`~turngym.trainers.config.TurnGymConfig`.
        tasks: the training tasks (default: ``args.train_split`` of ``args.env_id``'s panel).
        eval_tasks: held-out tasks that ``evaluate()`` plays (default: ``args.eval_split``, if set).
        processing_class: the policy's tokenizer (loaded with the model when ``model`` is a name).
        critic: PPO's critic (default: a copy of the policy's backbone with a value head).
        backend: builds the rollout's generation backend from the model to sample with (default:
            batched Hugging Face generation; vLLM when ``use_vllm``).
    """

    _tag_names: ClassVar[list[str]] = ["trl", "turngym"]

    def __init__(self, model: Any = None, args: TurnGymConfig | None = None, *, tasks: TaskSet | None = None,
                 eval_tasks: TaskSet | None = None, processing_class: Any = None, critic: Any = None,
                 backend: BackendFactory | None = None, callbacks: list | None = None,
                 peft_config: Any = None) -> None:
        if args is None:
            raise ValueError("TurnGymTrainer needs args=TurnGymConfig(...)")
        if model is None or isinstance(model, str):
            from turngym.agents.models import load_policy

            model, tokenizer = load_policy(model or args.model_name_or_path)
            processing_class = processing_class or tokenizer
        if processing_class is None:
            raise ValueError("pass processing_class= (the policy's tokenizer) with a model object")
        if tasks is None:
            tasks = train_tasks(args)
        if eval_tasks is None and args.eval_split:
            from turngym.envs.panels import task_panel

            eval_tasks = task_panel(args.env_id, args.eval_split, args.num_eval_tasks, args.world_kwargs())
        self.eval_tasks = eval_tasks
        if peft_config is None:
            peft_config = lora_config(args)
        if peft_config is not None and args.algorithm == "ppo" and critic is None:
            # The critic stays a full model: copied from the policy before TRL injects the adapters into it.
            critic = build_critic(model, args.critic_model_name_or_path)
        self.runner = EpisodeRunner(args, tasks, processing_class, backend)
        dataset = Dataset.from_dict({"prompt": [task.id for task in tasks]})
        held_out = Dataset.from_dict({"prompt": [task.id for task in eval_tasks]}) if eval_tasks else None
        with warnings.catch_warnings():
            # rollout_func is TRL's documented hook; its "experimental" notice is for this call only
            # (TRL_EXPERIMENTAL_SILENCE would silence every experimental TRL feature of the process).
            warnings.filterwarnings("ignore", message="You are using 'rollout_func'", category=UserWarning)
            super().__init__(model=model, reward_funcs=[episode_return], args=args, train_dataset=dataset,
                             eval_dataset=held_out, processing_class=processing_class, rollout_func=self._rollout,
                             callbacks=callbacks, peft_config=peft_config)
        if backend is None and self.use_vllm:
            self.runner.backend = self._vllm_backend
        self._check_reference()
        self.critic = self.critic_optimizer = None
        if args.algorithm == "ppo":
            critic = (without_dropout(critic) if critic is not None
                      else build_critic(self.model, args.critic_model_name_or_path))
            self.critic = self.accelerator.prepare_model(critic)
            # A plain optimizer, stepped by hand at each accumulation boundary: accelerate's wrapper
            # would skip steps outside its own accumulation context, which the critic is not in.
            self.critic_optimizer = torch.optim.AdamW(self.critic.parameters(), lr=args.critic_learning_rate)

    def _check_reference(self) -> None:
        """With ``beta > 0`` the KL's reference must be the policy RL starts from (e.g. the SFT checkpoint).

        TRL builds the reference model again from ``model.config._name_or_path``; a policy object whose
        weights differ from that folder would silently be pulled towards another model. (With LoRA there
        is no reference model: the policy with its adapters disabled is the starting model.)
        """
        if self.ref_model is None or self.is_deepspeed_enabled or self.is_fsdp_enabled:
            return  # no reference, or sharded parameters that cannot be compared here
        reference = dict(self.accelerator.unwrap_model(self.ref_model).named_parameters())
        for name, parameter in self.accelerator.unwrap_model(self.model).named_parameters():
            other = reference.get(name)
            # Compared in the reference's dtype: a recipe may load it in bf16 next to an fp32 policy.
            if other is None or other.shape != parameter.shape or not torch.equal(other,
                                                                                    parameter.detach().to(other.dtype)):
                raise ValueError(
                    f"the KL reference (beta={self.beta}) loaded from {self.ref_model.config._name_or_path!r} differs "
                    f"from the policy being trained ({name}): save the starting policy (e.g. the SFT checkpoint) and "
                    "pass its folder as model_name_or_path, so the reference is the policy RL starts from")

    # ------------------------------------------------------------------ rollout
    def _rollout(self, prompts: list[str], trainer: Any) -> dict[str, list]:
        """TRL's ``rollout_func``: one episode per prompt (a task id), in order.

        Besides the ids TRL needs, the typed :class:`Episode` records go out under ``"episode"``:
        TRL merges extra keys into each input row, where the reward function and
        :meth:`_generate_and_score_completions` read them back.
        """
        first = self.accelerator.process_index * len(prompts)  # global episode numbers seed sampling
        with (
            unwrap_model_for_generation(self.model_wrapped, self.accelerator,
                                        gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                                        gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs) as model,
            torch.no_grad(),
        ):
            was_training = model.training
            try:
                _, episodes = self.runner.play(prompts, model,
                                               seed=rollout_seed(self.args.seed, self.state.global_step),
                                               first_episode=first)
            finally:
                model.train(was_training)  # the generation backend switches to eval mode
        return {
            "prompt_ids": [e.prompt_ids for e in episodes],
            "completion_ids": [e.completion_ids for e in episodes],
            "logprobs": [e.logprobs for e in episodes],
            "env_mask": [e.env_mask for e in episodes],
            "episode": episodes,
        }

    def _vllm_backend(self, model: Any) -> Any:
        from turngym.agents.backends import VLLMBackend

        generation = self.vllm_generation
        llm = getattr(generation, "llm", None)
        return VLLMBackend(llm=llm) if llm is not None else VLLMBackend(client=generation.vllm_client)

    # ------------------------------------------------------------------ advantages
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        mode = "train" if self.model.training else "eval"
        episodes: list[Episode] = [row["episode"] for row in inputs]  # put there by TRL from _rollout's output
        everyone = gather_object([(e.task.get("id"), e.turn_rewards) for e in episodes])
        num_generations = self.num_generations if mode == "train" else self.num_generations_eval
        groups = group_keys([task for task, _ in everyone], num_generations)
        width, device = output["completion_ids"].size(1), output["completion_ids"].device
        start = self.accelerator.process_index * len(episodes)
        dropped: list[bool] = [False] * len(everyone)
        if self.args.algorithm == "ppo":
            token_advantages = self._ppo_targets(output, episodes, mode)
            if self.args.shuffle_advantages:  # the null control, over this process's model tokens
                token_advantages = _shuffled_over_model_tokens(token_advantages, episodes, self._null_rng(
                    self.accelerator.process_index))
        else:
            per_turn = turn_advantages(self.args.algorithm, [r for _, r in everyone], groups, gamma=self.args.gamma,
                                       scale=self.args.scale_rewards, alone=self.args.turn_baseline_alone)
            if self.args.dynamic_sampling == "drop":  # decided on the honest advantages, before any shuffle
                silent = zero_signal_groups(per_turn, groups)
                dropped = [group in silent for group in groups]
                self._metrics[mode]["dynamic_sampling/dropped_groups"].append(float(len(silent)))
                self._metrics[mode]["dynamic_sampling/dropped_fraction"].append(len(silent) / max(len(set(groups)), 1))
            if self.args.shuffle_advantages:  # the null control, over every (episode, turn) of the step that is kept
                kept = [i for i, d in enumerate(dropped) if not d]
                for i, row in zip(kept, adv.shuffle_advantages([per_turn[i] for i in kept], self._null_rng()),
                                  strict=True):
                    per_turn[i] = row
            per_turn = per_turn[start: start + len(episodes)]
            token_advantages = [adv.spread_over_tokens(a, e.turn_index, e.env_mask)
                                for a, e in zip(per_turn, episodes, strict=True)]
        output["advantages"] = padded(token_advantages, width, device)
        if any(dropped):
            self._drop_from_loss(output, dropped[start: start + len(episodes)])
        self._log_episodes(episodes, token_advantages, groups, mode)
        weights = self._importance_weights(output, mode)
        if weights is not None:
            output["advantages"] = output["advantages"] * weights
        return output

    def _drop_from_loss(self, output: dict[str, Any], dropped: Sequence[bool]) -> None:
        """Dynamic sampling ('drop'): this process's rows of zero-signal groups leave the loss mask (``tool_mask``,
        which TRL multiplies into the completion mask), so they add neither policy gradient nor KL, and the token
        count TRL normalises by (``num_items_in_batch``, loss_type dapo/cispo; the micro-batch's mask, bnpo) no
        longer counts them. loss_type grpo and dr_grpo still count the rows themselves (as zeros)."""
        keep = torch.tensor([0 if d else 1 for d in dropped], device=output["completion_ids"].device)
        output["tool_mask"] = output["tool_mask"] * keep.unsqueeze(1).to(output["tool_mask"].dtype)
        output["num_items_in_batch"] = self.accelerator.gather(
            (output["completion_mask"] * output["tool_mask"]).sum()).sum()

    def _null_rng(self, *salt: Any) -> random.Random:
        """The null control's generator: the same on every process (unless salted), new at every step."""
        return random.Random(stable_seed(self.args.seed, "shuffle_advantages", self.state.global_step, *salt))

    def _importance_weights(self, output: dict[str, Any], mode: str) -> torch.Tensor | None:
        """TIS weights (:func:`truncated_importance_weights`) for this step's tokens, and their metrics.

        TRL 1.16 has this correction (``vllm_importance_sampling_correction``, mode ``token_truncate``),
        but only when TRL itself generates with vLLM: with ``rollout_func`` and our HF backend it neither
        computes the trainer's logprobs at sampling time (``old_per_token_logps`` is skipped when
        ``num_iterations = 1``) nor applies the ratio. So we compute them with TRL's own
        ``_get_per_token_logps_and_entropies`` (one extra forward pass without gradients) and fold the
        weights into the per-token advantages: w > 0 is constant per token, so
        -min(r A w, clip(r) A w) = w * -min(r A, clip(r) A), exactly TRL's per-token loss times its ratio.
        When TRL's own vLLM correction is on, it applies instead and this returns None.
        """
        cap, sampling = self.args.tis_cap, output.get("sampling_per_token_logps")
        if cap is None or sampling is None or (self.use_vllm and self.vllm_importance_sampling_correction):
            return None
        trainer_logps = output.get("old_per_token_logps")
        if trainer_logps is None:
            ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
            attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
            batch_size = (self.args.per_device_train_batch_size if mode == "train"
                          else self.args.per_device_eval_batch_size)
            with torch.no_grad(), disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
                trainer_logps, _, _ = self._get_per_token_logps_and_entropies(
                    self.model, ids, attention, output["completion_ids"].size(1), batch_size=batch_size)
        mask = output["completion_mask"] * output.get("tool_mask", torch.ones_like(output["completion_mask"]))
        weights, ratios = truncated_importance_weights(trainer_logps, sampling, mask, cap)
        model_tokens = mask.bool() & ~torch.isnan(sampling)
        gap = (trainer_logps - sampling).abs()[model_tokens]
        stats = torch.stack([gap.sum(), ratios[model_tokens].sum(), (ratios[model_tokens] > cap).sum(),
                             model_tokens.sum()]).double()
        gap_sum, ratio_sum, capped, count = self.accelerator.reduce(stats, reduction="sum").tolist()
        ratio_max = ratios[model_tokens].max() if model_tokens.any() else torch.ones((), device=ratios.device)
        count = max(count, 1.0)
        metrics = self._metrics[mode]
        metrics["tis/logp_gap_mean"].append(gap_sum / count)  # mean |log pi_train - log pi_sampler|
        metrics["tis/ratio_mean"].append(ratio_sum / count)  # before the cap
        metrics["tis/ratio_max"].append(self.accelerator.gather(ratio_max.reshape(1).float()).max().item())
        metrics["tis/capped_fraction"].append(capped / count)
        return weights

    def _ppo_targets(self, output: dict[str, Any], episodes: list[Episode], mode: str) -> list[list[float]]:
        """GAE advantages from the critic's values; stores value targets in ``output`` for the critic step."""
        args = self.args
        prompt_width, width = output["prompt_ids"].size(1), output["completion_ids"].size(1)
        ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        with torch.no_grad():
            every_value = self._critic_values(self.critic, ids, attention)
        values = every_value[:, prompt_width - 1: prompt_width - 1 + width]  # V of the state before each token
        kl = self._kl_in_reward(output, episodes)
        token_advantages, targets = [], []
        for row, episode in enumerate(episodes):
            length = len(episode.completion_ids)
            rewards = adv.token_rewards(episode.turn_rewards, episode.turn_ends, length)
            if kl is not None:
                rewards = [r - args.beta * k * m for r, k, m in zip(rewards, kl[row], episode.env_mask, strict=False)]
            bootstrap = episode.truncated and args.bootstrap_truncated
            last_value = float(every_value[row, prompt_width + length - 1]) if bootstrap else 0.0
            a, g = adv.token_gae(rewards, values[row, :length].tolist(), episode.env_mask, args.gamma, args.lam,
                                 last_value)
            token_advantages.append(a)
            targets.append(g)
        mask = padded([e.env_mask for e in episodes], width, values.device)
        returns = padded(targets, width, values.device)
        self._log_critic_fit(values, returns, mask, mode)
        output["old_values"] = values.detach()
        output["returns"] = returns
        if args.whiten_advantages:
            token_advantages = self._whiten(token_advantages, episodes)
        return token_advantages

    def _kl_in_reward(self, output: dict[str, Any], episodes: list[Episode]) -> list[list[float]] | None:
        """Per-token log pi(a|s) - log pi_ref(a|s) at sampling, when the KL penalty goes in the reward."""
        if self.args.kl_penalty != "reward" or self.beta == 0.0:
            return None
        policy = output.get("old_per_token_logps")
        policy = policy.tolist() if policy is not None else [e.logprobs for e in episodes]
        reference = output["ref_per_token_logps"].tolist()
        kl = [[p - r for p, r in zip(ps, rs, strict=False)] for ps, rs in zip(policy, reference, strict=True)]
        model_tokens = [(k, m) for row, e in zip(kl, episodes, strict=True)
                        for k, m in zip(row, e.env_mask, strict=False)]
        self._metrics["train" if self.model.training else "eval"]["kl_in_reward"].append(
            sum(k for k, m in model_tokens if m) / max(1, sum(m for _, m in model_tokens)))
        return kl

    def _whiten(self, token_advantages: list[list[float]], episodes: list[Episode]) -> list[list[float]]:
        """(A - mean) / (std + eps) over every process's model tokens."""
        values = [a for row, e in zip(token_advantages, episodes, strict=True)
                  for a, m in zip(row, e.env_mask, strict=True) if m]
        stats = torch.tensor([sum(values), sum(v * v for v in values), len(values)], dtype=torch.float64,
                             device=self.accelerator.device)
        total, squares, count = self.accelerator.reduce(stats, reduction="sum").tolist()
        mean = total / max(count, 1.0)
        std = max(squares / max(count, 1.0) - mean * mean, 0.0) ** 0.5
        return [[(a - mean) / (std + adv.EPSILON) if m else 0.0 for a, m in zip(row, e.env_mask, strict=True)]
                for row, e in zip(token_advantages, episodes, strict=True)]

    @staticmethod
    def _critic_values(critic: Any, ids: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
        return critic(input_ids=ids, attention_mask=attention).logits[..., 0].float()

    # ------------------------------------------------------------------ loss and critic step
    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        if self.critic is not None and self.model.training:
            self._critic_backward(inputs)
            if self.state.global_step < self.args.critic_warmup_steps:
                # Critic warm-up: the policy loss is skipped (no forward pass), so no policy parameter gets
                # a gradient and the optimizer leaves them all as they are (AdamW skips grad=None).
                self._metrics["train"]["critic/warmup"].append(1.0)
                return torch.zeros((), device=self.accelerator.device, requires_grad=True)
        if self.args.kl_penalty == "reward":  # the KL is already in the rewards: keep it out of the loss
            beta, self.beta = self.beta, 0.0
            try:
                return super()._compute_loss(model, inputs)
            finally:
                self.beta = beta
        return super()._compute_loss(model, inputs)

    def _critic_backward(self, inputs: dict[str, Any]) -> None:
        prompt_width, width = inputs["prompt_ids"].size(1), inputs["completion_ids"].size(1)
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        attention = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        values = self._critic_values(self.critic, ids, attention)[:, prompt_width - 1: prompt_width - 1 + width]
        mask = inputs["completion_mask"] * inputs["tool_mask"]
        # The share of the generation batch's loss tokens one micro-batch stands for (as TRL's DAPO loss).
        normalizer = (inputs["num_items_in_batch"].clamp(min=1.0) / self.accelerator.num_processes
                      * self.current_gradient_accumulation_steps / self.args.steps_per_generation)
        loss, clipped = value_loss(values, inputs["old_values"], inputs["returns"], mask, self.args.value_clip,
                                   normalizer)
        self.accelerator.backward(loss)
        metrics = self._metrics["train"]
        metrics["critic/value_loss"].append(self.accelerator.gather(loss.detach()).mean().item())
        metrics["critic/clip_fraction"].append(self.accelerator.gather(clipped.detach()).mean().item())

    def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> torch.Tensor:
        loss = super().training_step(model, inputs, num_items_in_batch)
        if self.critic is not None and self._step % self.current_gradient_accumulation_steps == 0:
            torch.nn.utils.clip_grad_norm_(self.critic.parameters(), self.args.critic_max_grad_norm)
            self.critic_optimizer.step()
            self.critic_optimizer.zero_grad(set_to_none=True)
        return loss

    # ------------------------------------------------------------------ metrics
    def _log_episodes(self, episodes: list[Episode], token_advantages: list[list[float]],
                      groups: list[Hashable], mode: str) -> None:
        """Per-episode metrics (never per token or per step), gathered from every process."""
        rows = gather_object([
            {"won": e.won, "return": e.episode_reward, "turns": e.num_turns, "invalid": sum(e.invalid_actions),
             "truncated": e.truncated, "sampled": e.num_model_tokens, "turn_advantages": _mean_per_turn(a, e)}
            for e, a in zip(episodes, token_advantages, strict=True)
        ])
        metrics = self._metrics[mode]
        n = max(len(rows), 1)
        turns = sum(r["turns"] for r in rows)
        metrics["episode/success"].append(sum(r["won"] for r in rows) / n)
        metrics["episode/return"].append(sum(r["return"] for r in rows) / n)
        metrics["episode/turns"].append(turns / n)
        metrics["episode/truncated"].append(sum(r["truncated"] for r in rows) / n)
        metrics["episode/sampled_tokens"].append(sum(r["sampled"] for r in rows) / n)
        metrics["episode/invalid_action_rate"].append(sum(r["invalid"] for r in rows) / max(turns, 1))
        by_group: dict[Hashable, list[float]] = {}
        for row, group in zip(rows, groups, strict=True):
            by_group.setdefault(group, []).extend(row["turn_advantages"])
        zero = sum(all(abs(a) < 1e-8 for a in values) for values in by_group.values())
        metrics["advantages/frac_zero_groups"].append(zero / max(len(by_group), 1))
        for turn in range(LOGGED_TURNS):
            values = [r["turn_advantages"][turn] for r in rows if len(r["turn_advantages"]) > turn]
            if values:
                mean = sum(values) / len(values)
                metrics[f"advantages/turn_{turn}/mean"].append(mean)
                variance = sum((v - mean) ** 2 for v in values) / len(values)
                metrics[f"advantages/turn_{turn}/std"].append(variance ** 0.5)

    def _log_critic_fit(self, values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, mode: str) -> None:
        """Explained variance 1 - Var(R - V) / Var(R) over every process's model tokens."""
        stats = torch.stack([
            mask.sum(), (returns * mask).sum(), (returns ** 2 * mask).sum(),
            ((returns - values) * mask).sum(), ((returns - values) ** 2 * mask).sum(),
        ]).double()
        count, r1, r2, d1, d2 = self.accelerator.reduce(stats, reduction="sum").tolist()
        count = max(count, 1.0)
        variance = r2 / count - (r1 / count) ** 2
        residual = d2 / count - (d1 / count) ** 2
        self._metrics[mode]["critic/explained_variance"].append(1.0 - residual / variance if variance > 1e-12 else 0.0)
        self._metrics[mode]["critic/value_mean"].append(float((values * mask).sum() / mask.sum().clamp(min=1.0)))

    # ------------------------------------------------------------------ held-out evaluation
    def evaluate(self, eval_dataset: Any = None, ignore_keys: Any = None,
                 metric_key_prefix: str = "eval") -> dict[str, float]:
        """Play every held-out task once with the current policy (``eval_temperature``), per episode.

        Runs on the main process only; reported as ``eval/success`` (with its 95 % Wilson interval),
        ``eval/return``, ``eval/turns`` and ``eval/invalid_action_rate``.
        """
        if not self.eval_tasks:
            return {}
        metrics: dict[str, float] = {}
        if self.accelerator.is_main_process:
            report = evaluate_policy(self.accelerator.unwrap_model(self.model), self.processing_class, self.args,
                                    self.eval_tasks, temperature=self.args.eval_temperature, seed=self.args.seed,
                                    progress="held-out evaluation")
            summary = report.overall
            metrics = {f"{metric_key_prefix}/success": summary.success_rate,
                       f"{metric_key_prefix}/success_ci95_low": summary.success_ci95[0],
                       f"{metric_key_prefix}/success_ci95_high": summary.success_ci95[1],
                       f"{metric_key_prefix}/return": summary.mean_return,
                       f"{metric_key_prefix}/turns": summary.mean_turns,
                       f"{metric_key_prefix}/invalid_action_rate": summary.invalid_action_rate}
            self.log(metrics)
        self.accelerator.wait_for_everyone()
        return metrics

    # ------------------------------------------------------------------ checkpoints
    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        super()._save_checkpoint(model, trial)
        if self.critic is None or not self.args.should_save:
            return
        folder = os.path.join(self._get_output_dir(trial=trial), f"checkpoint-{self.state.global_step}")
        self.save_critic(folder)

    def save_critic(self, folder: str) -> None:
        """Critic weights (``critic/``) and its optimizer state, next to the policy's."""
        self.accelerator.unwrap_model(self.critic).save_pretrained(os.path.join(folder, CRITIC_DIR))
        torch.save(self.critic_optimizer.state_dict(), os.path.join(folder, CRITIC_OPTIMIZER))

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        super()._load_optimizer_and_scheduler(checkpoint)
        if self.critic is None or checkpoint is None:
            return
        folder = os.path.join(checkpoint, CRITIC_DIR)
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"checkpoint {checkpoint} has no critic ({CRITIC_DIR}/): "
                                    "was it saved by a non-PPO run?")
        from transformers import AutoModelForTokenClassification

        saved = AutoModelForTokenClassification.from_pretrained(folder)
        self.accelerator.unwrap_model(self.critic).load_state_dict(saved.state_dict())
        state = torch.load(os.path.join(checkpoint, CRITIC_OPTIMIZER), map_location=self.accelerator.device,
                           weights_only=True)
        self.critic_optimizer.load_state_dict(state)

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        super().save_model(output_dir, _internal_call)
        if self.critic is not None and not _internal_call and self.args.should_save:
            folder = os.path.join(output_dir or self.args.output_dir, CRITIC_DIR)
            self.accelerator.unwrap_model(self.critic).save_pretrained(folder)

    def train(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().train(*args, **kwargs)
        finally:
            self.runner.close()


def _mean_per_turn(token_advantages: list[float], episode: Episode) -> list[float]:
    """The mean advantage over each turn's model tokens."""
    sums, counts = [0.0] * episode.num_turns, [0] * episode.num_turns
    for a, turn, m in zip(token_advantages, episode.turn_index, episode.env_mask, strict=True):
        if m and turn < episode.num_turns:
            sums[turn] += a
            counts[turn] += 1
    return [s / c if c else 0.0 for s, c in zip(sums, counts, strict=True)]


def _shuffled_over_model_tokens(token_advantages: list[list[float]], episodes: list[Episode],
                                rng: random.Random) -> list[list[float]]:
    """:func:`~turngym.trainers.advantages.shuffle_advantages` over the model tokens only (env tokens keep 0)."""
    on_model = [[a for a, m in zip(row, e.env_mask, strict=True) if m]
                for row, e in zip(token_advantages, episodes, strict=True)]
    dealt = [iter(row) for row in adv.shuffle_advantages(on_model, rng)]
    return [[next(values) if m else 0.0 for m in e.env_mask] for values, e in zip(dealt, episodes, strict=True)]
