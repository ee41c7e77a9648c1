"""``TurnGymTrainer``: TRL's GRPOTrainer trained on whole multi-turn episodes, with our advantages.

This module is the adapter between turngym and TRL, and the only one that touches TRL's private methods (pinned
by ``tests/test_trl_contract.py``). Everything it hands over is built or computed elsewhere, without TRL:

- **assembly** (``__init__``): the run's parts (policy, worlds, rollout runner, curriculum and task sampler, LoRA,
  critic, pipeline) are built by :mod:`~turngym.trainers.assembly`; ``__init__`` hands TRL its share and wires
  TRL's vLLM engine (:mod:`~turngym.trainers.vllm_colocate`), whose weights arrive, as every sampler's do, through
  a :class:`~turngym.agents.generation.WeightPublisher`.

- **rollout** (``rollout_func``, TRL's public hook): :class:`~turngym.trainers.rollout.EpisodeRunner` plays one
  whole episode per task entry; :mod:`~turngym.trainers.layouts` turns the episodes into TRL's rows.
- **advantages** (overrides ``_generate_and_score_completions``): after TRL scores the rows, the estimator
  ``algorithm`` names (:mod:`~turngym.trainers.estimators`) runs on every process's episodes, with a critic's
  values when it needs them (:mod:`~turngym.trainers.critic`); its advantages replace TRL's.
- **loss** (overrides ``_compute_loss`` and ``_get_per_token_logps_and_entropies``): the critic's value loss,
  then TRL's clipped loss, whose forward pass projects only the model's tokens (:mod:`~turngym.trainers.logprobs`)
  and applies truncated importance sampling (:mod:`~turngym.trainers.tis`); with ``share_prefixes`` each prefix the
  rows share is encoded once in it, the old policy's, the reference's and the critic's
  (:mod:`~turngym.trainers.prefix_sharing`).
- **checkpoints** (overrides ``_save_checkpoint``, ``_load_optimizer_and_scheduler``; the sampler,
  ``_get_train_sampler``, for world weights and the curriculum): the critic and the curriculum's estimates.

Statistics are computed in :mod:`~turngym.trainers.metrics` and appended to TRL's step metrics here.
TRL 1.16 has no PPOTrainer (removed in PR #7020): PPO is the GAE estimator with our critic.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from accelerate.utils import gather_object, is_peft_model
from trl import GRPOTrainer
from trl.models import unwrap_model_for_generation
from trl.models.utils import disable_gradient_checkpointing
from trl.trainer.utils import use_adapter

from turngym.agents.generation import WeightPublisher
from turngym.envs.tasks import TaskSet
from turngym.trainers.assembly import assemble
from turngym.trainers.config import TurnGymConfig
from turngym.trainers.critic import Critic, NoCritic, TokenCritic
from turngym.trainers.episodes import Episode, group_keys
from turngym.trainers.estimators import (
    advantage_batch,
    check_kl_reference,
    step_advantages,
    step_entries,
    token_kl,
    turn_advantages,
)
from turngym.trainers.judged_steps import StepJudge
from turngym.trainers.layouts import per_turn_rows, recompute_logps, rollout_rows, whole_episode_rows
from turngym.trainers.logprobs import plain_head, scored_logprobs_in_chunks
from turngym.trainers.metrics import (
    EPISODE_SAMPLES,
    episode_metrics,
    episode_row,
    episode_sample,
    no_signal_advice,
    sample_table_row,
    write_episode_samples,
)
from turngym.trainers.pipeline import PublishWeights
from turngym.trainers.prefix_sharing import PrefixSharingCritic, shared_prefix_logprobs, sharing_obstacle
from turngym.trainers.rollout import BackendFactory, evaluate_worlds, rollout_seed
from turngym.trainers.tis import tis_applies, tis_weights
from turngym.trainers.vllm_colocate import pipelined_vllm, trl_vllm_sampler, vllm_in_policy_dtype
from turngym.trainers.worlds import train_tasks

# Re-exported from their modules: code written against the single trainer module imports them from here.
logger = logging.getLogger(__name__)

__all__ = ["EPISODE_SAMPLES", "TurnGymTrainer", "group_keys", "sample_table_row", "train_tasks", "turn_advantages"]


def episode_return(prompts: list, completions: list, episode: list[Episode], **_: Any) -> list[float]:
    """TRL reward function: the episode's return, computed by the world during the rollout."""
    return [e.episode_reward for e in episode]


@dataclass(frozen=True)
class LossForward:
    """The model TRL's loss hands its forward pass, with the micro-batch that forward needs (loss mask, advantages
    for TIS), as an argument, not trainer state. TRL's loss uses ``model`` nowhere else (tests/test_trl_contract)."""

    model: Any
    inputs: dict[str, Any]


class TurnGymTrainer(GRPOTrainer):
    """GRPOTrainer whose samples are whole multi-turn episodes, with per-token advantages.

    Args:
        model: the policy (a model, or a Hub name / local folder; default ``args.model_name_or_path``).
        args: a :class:`~turngym.trainers.config.TurnGymConfig`.
        tasks: the training tasks (default: ``args.train_split`` of ``args.env_id``'s panel); with several
            ``worlds``, a mapping world name -> TaskSet (a world left out builds its own).
        eval_tasks: held-out tasks that ``evaluate()`` plays (default: ``args.eval_split``, if set); with
            several worlds, a mapping world name -> TaskSet, as ``tasks``.
        processing_class: the policy's tokenizer (loaded with the model when ``model`` is a name).
        critic: for an estimator that needs values: a :class:`~turngym.trainers.critic.Critic`, or a value model
            (token classification, one label) for the default :class:`~turngym.trainers.critic.TokenCritic`
            (default: a copy of the policy's backbone with a zero value head).
        backend: builds the rollout's generation backend from the model to sample with (default:
            batched Hugging Face generation; vLLM when ``use_vllm``).
    """

    _tag_names: ClassVar[list[str]] = ["trl", "turngym"]
    def __init__(self, model: Any = None, args: TurnGymConfig | None = None, *,
                 tasks: TaskSet | dict[str, TaskSet] | None = None,
                 eval_tasks: TaskSet | dict[str, TaskSet] | None = None, processing_class: Any = None,
                 critic: Any = None, backend: BackendFactory | None = None, callbacks: list | None = None,
                 peft_config: Any = None) -> None:
        # Everything but TRL's trainer, built before TRL's init (trainers/assembly.py); this only wires TRL.
        run = assemble(args, model, tasks=tasks, eval_tasks=eval_tasks, tokenizer=processing_class, critic=critic,
                       backend=backend, peft_config=peft_config)
        self.worlds, self.runner, self.estimator = run.worlds, run.runner, run.estimator
        self.step_judge = StepJudge.of(run.args)
        self.eval_tasks, self.curriculum, self.task_sampler, self.task_index = (run.eval_tasks, run.curriculum,
                                                                                run.task_sampler, run.task_index)
        train_dataset, eval_dataset = run.datasets()
        with warnings.catch_warnings(), vllm_in_policy_dtype(run.model, args):
            # rollout_func is TRL's documented hook; its "experimental" notice is for this call only
            # (TRL_EXPERIMENTAL_SILENCE would silence every experimental TRL feature of the process).
            warnings.filterwarnings("ignore", message="You are using 'rollout_func'", category=UserWarning)
            super().__init__(model=run.model, reward_funcs=[episode_return], args=args, train_dataset=train_dataset,
                             eval_dataset=eval_dataset, processing_class=run.tokenizer, rollout_func=self._rollout,
                             callbacks=callbacks, peft_config=run.peft_config)
        self.publisher: WeightPublisher | None = self._sample_with_vllm(backend) if self.use_vllm else None
        if args.share_prefixes:
            self._check_prefix_sharing()
        self._check_reference()
        self.critic: Critic | NoCritic = run.critic(self.model, self.accelerator)
        if args.share_prefixes and type(self.critic) is TokenCritic:  # the value model shares prefixes too
            self.critic = PrefixSharingCritic.of(self.critic)
        on_engine = (pipelined_vllm(self.vllm_generation, self.publisher, self.model, processes=args.world_size,
                                    sharded=self.is_deepspeed_enabled or self.is_fsdp_enabled)
                     if self.use_vllm and backend is None and args.max_staleness else (None, None))
        self.pipeline = run.pipeline(self.model, self._get_train_sampler(self.train_dataset),  # K > 0: in a thread
                                     backend=on_engine[0], policy=on_engine[1])
        if self.pipeline is not None:
            self.add_callback(PublishWeights(self.pipeline))

    def _check_prefix_sharing(self) -> None:
        """share_prefixes on a model whose forward passes cannot share (:func:`~turngym.trainers.prefix_sharing.
        sharing_obstacle`): say so once; every row is then encoded whole, as with it off."""
        causal_lm = self._directly_callable(self.model)
        checkpointing = ((self.args.gradient_checkpointing_kwargs or {"use_reentrant": False})  # transformers' default
                         if self.args.gradient_checkpointing else None)
        reason = ("a sharded model (DeepSpeed, FSDP) or one without a plain head" if causal_lm is None else
                  sharing_obstacle(causal_lm, checkpointing=checkpointing))
        if reason:
            logger.warning("share_prefixes has no effect with %s: every row is encoded whole", reason)

    @property
    def critic_optimizer(self) -> Any:
        """The critic's optimizer (None with :class:`~turngym.trainers.critic.NoCritic`)."""
        return getattr(self.critic, "optimizer", None)

    def _check_reference(self) -> None:
        """With ``beta > 0``, the KL's reference is the policy RL starts from (sharded parameters: not checked)."""
        if self.ref_model is not None and not (self.is_deepspeed_enabled or self.is_fsdp_enabled):
            check_kl_reference(self.accelerator.unwrap_model(self.ref_model), self.accelerator.unwrap_model(self.model),
                               self.beta)

    # ------------------------------------------------------------------ which tasks
    def _get_train_sampler(self, dataset: Any = None) -> Any:
        """TRL's ``RepeatSampler`` (each task once per epoch), or the run's TaskSampler (weights, curriculum)."""
        return self.task_sampler if self.task_sampler is not None else super()._get_train_sampler(dataset)

    # ------------------------------------------------------------------ rollout hand-over
    def _rollout(self, prompts: list[str], trainer: Any) -> dict[str, list]:
        """TRL's ``rollout_func``: one episode per prompt (a task key), in order, as TRL's rows
        (:func:`~turngym.trainers.layouts.rollout_rows`: the :class:`Episode` records go out under ``"episode"``)."""
        if self.pipeline is not None and self.model.training:
            played = self.pipeline.take(self.state.global_step // self.pipeline.steps_per_batch, prompts,
                                        self.accelerator.unwrap_model(self.model))
            self._log("train", played.metrics)
            self._judge(played.episodes)
            return rollout_rows(played.episodes, per_turn=self.args.per_turn_layout)
        first = self.accelerator.process_index * len(prompts)  # global episode numbers seed sampling
        with (
            unwrap_model_for_generation(self.model_wrapped, self.accelerator,
                                        gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                                        gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs) as model,
            torch.no_grad(),
        ):
            was_training = model.training
            try:
                shown = not self.args.disable_tqdm and self.accelerator.is_main_process
                _, episodes = self.runner.play(prompts, model,
                                               seed=rollout_seed(self.args.seed, self.state.global_step),
                                               first_episode=first,
                                               progress=shown and f"rollouts of step {self.state.global_step + 1}")
            finally:
                model.train(was_training)  # the generation backend switches to eval mode
        self._judge(episodes)
        return rollout_rows(episodes, per_turn=self.args.per_turn_layout)

    def _judge(self, episodes: list[Episode]) -> None:
        """``judge``: the step's episodes judged before their rewards are read (each group ranked in one call, or
        pointwise), the scores in their returns and reward components (:mod:`turngym.trainers.judged_steps`)."""
        if self.step_judge is not None:
            mode = "train" if self.model.training else "eval"
            self._log(mode, self.step_judge.judge_episodes(episodes))

    def _sample_with_vllm(self, backend: BackendFactory | None) -> WeightPublisher:
        """TRL's vLLM engine samples the rollouts (unless ``backend`` was given), and TRL's weight sync
        (``vllm_generation.sync_weights``, called before a rollout when the step changed) goes through the engine's
        :class:`~turngym.agents.generation.WeightPublisher` (:mod:`~turngym.trainers.vllm_colocate`)."""
        sampler, publisher = trl_vllm_sampler(self.vllm_generation,
                                              sharded=self.is_deepspeed_enabled or self.is_fsdp_enabled)
        if backend is None:
            self.runner.backend = sampler
        self.vllm_generation.sync_weights = self._publish_weights
        return publisher

    def _publish_weights(self) -> None:
        """The trainer's weights after ``global_step`` optimizer steps, to TRL's vLLM engine; with pipelined rollouts
        nothing: the pipeline owns the engine's weights (loaded at its sampler's safe points, by version)."""
        if getattr(self, "pipeline", None) is not None:
            return
        self.publisher.publish(self.accelerator.unwrap_model(self.model), self.state.global_step)

    # ------------------------------------------------------------------ advantage hand-over
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        """TRL scores the rows (its episode-level advantages, the logprobs it needs); ours replace its advantages.

        The estimator sees every process's episodes (gathered: a group split across processes is compared
        whole), with the critic's values and the KL in the reward when it reads tokens;
        :func:`~turngym.trainers.estimators.step_advantages` applies dynamic sampling and the null control; the
        layout writes this process's rows.
        """
        output = super()._generate_and_score_completions(inputs)
        mode = "train" if self.model.training else "eval"
        episodes: list[Episode] = [row["episode"] for row in inputs]  # put there by TRL from _rollout's output
        values = self.critic.values(output)  # None from NoCritic
        kl = None
        if self.args.kl_penalty == "reward" and self.beta != 0.0:  # the KL to the reference goes in the reward
            kl, kl_mean = token_kl(output.get("old_per_token_logps"), output["ref_per_token_logps"], episodes)
            self._log(mode, {"kl_in_reward": kl_mean})
        entries = gather_object(step_entries(episodes, self.estimator, values, kl, self.beta))
        # An episode's group is its task key (the task id, or world::task id with several worlds).
        keys = [e.key for e in entries]
        groups = group_keys(keys, self.num_generations if mode == "train" else self.num_generations_eval)
        if mode == "train" and self.curriculum is not None:
            self._log(mode, self.curriculum.record([self.task_index[k] for k in keys], [e.won for e in entries],
                                                   groups))
        start = self.accelerator.process_index * len(episodes)
        step = step_advantages(self.estimator, advantage_batch(entries, groups), self.args, episodes,
                               slice(start, start + len(episodes)), step=self.state.global_step,
                               process=self.accelerator.process_index)
        self._log(mode, step.metrics)
        self._log(mode, self.critic.targets(output, values, step.value_targets, [e.env_mask for e in episodes]))
        if self.args.per_turn_layout or self._history_rewritten(episodes):  # a row per turn, on its own context
            self._per_turn_rows(output, episodes, step.turns, step.dropped, mode)
        else:
            whole_episode_rows(output, step.tokens, step.dropped, recount=step.any_dropped,
                               gather=self.accelerator.gather)
        self._log_episodes(episodes, step.tokens, groups, mode)
        if self._tis_applies(output) and output.get("old_per_token_logps") is not None:
            # TRL computed the trainer's logprobs at sampling time (num_iterations > 1): TIS now. Otherwise the
            # loss's own forward pass gives them (_get_per_token_logps_and_entropies): no extra forward pass.
            output["advantages"] = output["advantages"] * self._tis_weights(output["old_per_token_logps"], output,
                                                                           mode)
        return output

    def _history_rewritten(self, episodes: list[Episode]) -> bool:
        """A rewritten history (``history`` strip_thinking or compact) gave some episode, on any process, a context
        other than the sequence before a turn: the step then trains one row per turn. The same on every process."""
        if self.args.history == "append":
            return False
        local = torch.tensor([float(any(e.history_rewritten for e in episodes))], device=self.accelerator.device)
        return bool(self.accelerator.gather(local).max().item())

    def _per_turn_rows(self, output: dict[str, Any], episodes: list[Episode], per_turn: list[list[float]],
                       dropped: Sequence[bool], mode: str) -> None:
        """History window: one row per model turn replaces TRL's stand-ins (:func:`~turngym.trainers.layouts.
        per_turn_rows`), and TRL's forward passes on the stand-ins (the old policy's logprobs, the reference's)
        are made again on the new rows."""
        ends = {*self.eos_token_ids, self._tokenizer.pad_token_id} if self.mask_truncated_completions else None
        added = per_turn_rows(output, episodes, per_turn, dropped, pad_id=self._tokenizer.pad_token_id, ends=ends,
                              multiple_of=self.args.steps_per_generation if mode == "train" else 1,
                              pad_to_multiple_of=self.pad_to_multiple_of, gather=self.accelerator.gather)
        if added is None:
            return
        if mode == "train":  # TRL counted the stand-in rows' tokens
            self.state.num_input_tokens_seen += self.accelerator.gather(added.reshape(1)).sum().item()
        batch_size = self.args.per_device_train_batch_size if mode == "train" else self.args.per_device_eval_batch_size

        def forward(key: str, ids: torch.Tensor, attention: torch.Tensor, width: int) -> torch.Tensor:
            with torch.no_grad(), disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
                if key == "old_per_token_logps" or self.ref_model is not None:
                    model = self.model if key == "old_per_token_logps" else self.ref_model
                    return self._get_per_token_logps_and_entropies(model, ids, attention, width, batch_size)[0]
                unwrapped = self.accelerator.unwrap_model(self.model)  # LoRA: the policy with its adapters off (TRL's)
                with use_adapter(unwrapped, adapter_name="ref" if "ref" in unwrapped.peft_config else None):
                    return self._get_per_token_logps_and_entropies(self.model, ids, attention, width, batch_size)[0]

        recompute_logps(output, forward)

    # ------------------------------------------------------------------ the loss hook
    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        """The critic's value loss first (its own backward, in passes), then TRL's policy loss; during the critic's
        warm-up (``critic_warmup_steps``) the policy loss is skipped."""
        if self.model.training:  # NoCritic: no metrics, and no warm-up
            # The share of the generation batch's loss tokens one micro-batch stands for (as TRL's DAPO loss).
            normalizer = (inputs["num_items_in_batch"].clamp(min=1.0) / self.accelerator.num_processes
                          * self.current_gradient_accumulation_steps / self.args.steps_per_generation)
            self._log("train", self.critic.loss(inputs, normalizer, self.accelerator.backward))
            if self.state.global_step < self.critic.config.warmup_steps:
                # No policy forward pass: no policy parameter gets a gradient, and AdamW skips them (grad=None).
                self._log("train", {"critic/warmup": 1.0})
                return torch.zeros((), device=self.accelerator.device, requires_grad=True)
            if self.args.skip_zero_advantage_batches and self._policy_loss_is_zero(inputs):
                self._log("train", {"policy/skipped_zero_advantages": 1.0})
                return self._zero_policy_gradient()
            self._log("train", {"policy/skipped_zero_advantages": 0.0})
        with contextlib.ExitStack() as stack:
            if self.args.kl_penalty == "reward":  # the KL is already in the rewards: keep it out of the loss
                beta, self.beta = self.beta, 0.0  # TRL reads self.beta inside its loss; restored on exit
                stack.callback(setattr, self, "beta", beta)
            # TRL hands `model` only to the forward pass: the micro-batch travels with it (LossForward).
            return super()._compute_loss(LossForward(model, inputs), inputs)

    def _policy_loss_is_zero(self, inputs: dict[str, Any]) -> bool:
        """Whether TRL's policy loss on this micro-batch is exactly 0, and so its gradient, with no forward pass.

        TRL's loss is L = Σ_t ℓ_t · m_t / N + β · KL + c_aux · aux − c_H · H, and each of its per-token terms is the
        advantage times a finite factor: −min(r_t A_t, clip(r_t) A_t) (grpo, dapo, bnpo, dr_grpo, luspo), −clip(r_t) A_t
        log π_t (cispo), −φ(w) A_t log π_t (vespo), −σ-shaped(r_t) A_t (sapo). With every A_t = 0, β = 0 (or the KL
        in the reward, already in A), no MoE aux loss and no entropy bonus, L = 0 and ∇L = 0 whatever the weights.
        One process only: under DDP, DeepSpeed or FSDP every rank must run its backward to sync."""
        if self.accelerator.num_processes > 1 or self.is_deepspeed_enabled or self.is_fsdp_enabled:
            return False
        if self.beta != 0.0 and self.args.kl_penalty != "reward":
            return False
        if self.aux_loss_enabled or getattr(self, "_entropy_bonus_enabled", False):
            return False
        return not bool(inputs["advantages"].any())

    def _zero_policy_gradient(self) -> torch.Tensor:
        """The step's zero gradient without its passes: each trainable weight gets a gradient of zeros (not None,
        which AdamW would skip, leaving its moments undecayed), so the optimizer's step and state are the ones the
        full pass's exactly-zero gradient gives; the loss returned is a zero the backward pass ignores."""
        for parameter in self.model.parameters():
            if parameter.requires_grad and parameter.grad is None:
                parameter.grad = torch.zeros_like(parameter)
        return torch.zeros((), device=self.accelerator.device, requires_grad=True)

    def _get_per_token_logps_and_entropies(self, model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                                           logits_to_keep: int, batch_size: int | None = None,
                                           compute_entropy: bool = False, compute_aux_loss: bool = False,
                                           pixel_values: Any = None, image_grid_thw: Any = None, num_images: Any = None,
                                           pixel_attention_mask: Any = None, spatial_shapes: Any = None,
                                           num_tiles: Any = None, image_sizes: Any = None, token_type_ids: Any = None,
                                           mm_token_type_ids: Any = None, image_position_ids: Any = None) -> tuple:
        """TRL's log-probabilities, projected through the vocabulary only at the completion positions read.

        Those are the loss's mask (completion and tool mask: the model's own tokens) when ``model`` is the
        :class:`LossForward` :meth:`_compute_loss` hands TRL, else every completion token; other positions are 0,
        as in TRL (:mod:`turngym.trainers.logprobs`).
        Multimodal inputs, a MoE aux loss, a scaled head or a wrapped model (DDP, FSDP, DeepSpeed, whose own
        forward must run) take TRL's path unchanged.
        With ``share_prefixes``, each prefix the rows share is encoded once
        (:mod:`turngym.trainers.prefix_sharing`: the same numbers up to rounding, and the same gradients).

        In the loss, with TIS on and no trainer logprobs from sampling time (``num_iterations = 1``), these
        detached logprobs are the ones TRL's ratio uses as "old", so the loss's advantages are weighted by
        TIS from them here: TRL reads the advantages only after this call returns.
        """
        extra = (pixel_values, image_grid_thw, num_images, pixel_attention_mask, spatial_shapes, num_tiles,
                 image_sizes, token_type_ids, mm_token_type_ids, image_position_ids)
        inputs = model.inputs if isinstance(model, LossForward) else None
        model = model.model if isinstance(model, LossForward) else model
        causal_lm = self._directly_callable(model)
        if causal_lm is None or compute_aux_loss or any(x is not None for x in extra):
            logps, entropies, aux_loss = super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss,
                *extra)
        else:
            scored = attention_mask[:, -logits_to_keep:].bool()  # the loss's tokens, else the completion's
            if inputs is not None:
                scored = scored & (inputs["completion_mask"] * inputs.get("tool_mask", 1)).bool()
            options = {"batch_size": batch_size, "compute_entropy": compute_entropy,
                       "fp32_head": self.args.cast_lm_head_to_fp32, "autocast": self.accelerator.autocast}
            # share_prefixes: each prefix rows share encoded once (None: nothing shared, or a model that cannot)
            shared = (shared_prefix_logprobs(causal_lm, input_ids, attention_mask, scored, self.temperature, **options)
                      if self.args.share_prefixes else None)
            logps, entropies = shared or scored_logprobs_in_chunks(causal_lm, input_ids, attention_mask, scored,
                                                                   self.temperature, **options)
            aux_loss = None
        if inputs is not None and self._tis_applies(inputs) and inputs.get("old_per_token_logps") is None:
            mode = "train" if self.model.training else "eval"
            inputs["advantages"] = inputs["advantages"] * self._tis_weights(logps.detach(), inputs, mode)
        return logps, entropies, aux_loss

    def _directly_callable(self, model: Any) -> Any:
        """The causal LM under ``model`` (through PEFT) whose backbone and head may be called apart, or None."""
        if self.accelerator.unwrap_model(model) is not model or self.is_deepspeed_enabled or self.is_fsdp_enabled:
            return None
        causal_lm = model.get_base_model() if is_peft_model(model) else model
        return causal_lm if hasattr(causal_lm, "base_model") and plain_head(causal_lm) else None

    def _tis_applies(self, rows: dict[str, Any]) -> bool:
        return tis_applies(self.args.tis_cap, rows,
                           corrected_elsewhere=self.use_vllm and self.vllm_importance_sampling_correction)

    def _tis_weights(self, trainer_logps: torch.Tensor, rows: dict[str, Any], mode: str) -> torch.Tensor:
        weights, metrics = tis_weights(trainer_logps, rows, self.args.tis_cap, self.accelerator)
        self._log(mode, metrics)
        return weights

    def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> torch.Tensor:
        loss = super().training_step(model, inputs, num_items_in_batch)
        if self._step % self.current_gradient_accumulation_steps == 0:
            self.critic.step()  # at the policy's accumulation boundary (TRL counts micro-batches in _step)
        return loss

    # ------------------------------------------------------------------ metrics
    def _log(self, mode: str, metrics: dict[str, float]) -> None:
        """Append each value to TRL's step metrics (averaged and logged at the next logging step)."""
        for name, value in metrics.items():
            self._metrics[mode][name].append(float(value))

    def _log_episodes(self, episodes: list[Episode], token_advantages: list[list[float]],
                      groups: list[Hashable], mode: str) -> None:
        """Per-episode metrics (:func:`~turngym.trainers.metrics.episode_metrics`) over every process's episodes,
        and the step's first ``episode_samples`` episodes as text (main process)."""
        rows = gather_object([episode_row(e, a) for e, a in zip(episodes, token_advantages, strict=True)])
        metrics = episode_metrics(rows, groups, [w.name for w in self.worlds])
        self._log(mode, metrics)
        advice = no_signal_advice(metrics, self.args) if mode == "train" and self.state.global_step == 0 else None
        if advice and self.accelerator.is_main_process:
            logger.warning(advice)
        if mode == "train" and self.args.episode_samples and self.accelerator.is_main_process:
            first = min(self.args.episode_samples, len(episodes))  # the main process's rows come first in `rows`
            step = self.state.global_step + 1  # the optimizer step these episodes are trained in
            records = [episode_sample(e, r["turn_advantages"], step, g)
                       for e, r, g in zip(episodes[:first], rows[:first], groups[:first], strict=True)]
            write_episode_samples(self.args.output_dir, records, step, trackio="trackio" in (self.args.report_to or []))

    # ------------------------------------------------------------------ held-out evaluation
    def evaluate(self, eval_dataset: Any = None, ignore_keys: Any = None,
                 metric_key_prefix: str = "eval") -> dict[str, float]:
        """Play every held-out task once with the current policy (``eval_temperature``), per episode.

        Runs on the main process only; reported as ``eval/success`` (with its 95 % Wilson interval),
        ``eval/return``, ``eval/turns`` and ``eval/invalid_action_rate``. With several worlds, each world's
        panel plays in its own chat format and is reported as ``eval/success/<world>``... too; the unsuffixed
        metrics pool every panel's episodes.
        """
        panels = ([(w, w.eval_tasks) for w in self.worlds if w.eval_tasks] if len(self.worlds) > 1
                  else [(self.worlds[0], self.eval_tasks)] if self.eval_tasks else [])
        if not panels:
            return {}
        metrics: dict[str, float] = {}
        if self.accelerator.is_main_process:
            metrics = evaluate_worlds(self.accelerator.unwrap_model(self.model), self.processing_class, panels,
                                      self.args, metric_key_prefix, per_world=len(self.worlds) > 1)
            self.log(metrics)
        self.accelerator.wait_for_everyone()
        return metrics

    # ------------------------------------------------------------------ checkpoint hooks
    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        super()._save_checkpoint(model, trial)
        if not self.args.should_save:
            return
        folder = os.path.join(self._get_output_dir(trial=trial), f"checkpoint-{self.state.global_step}")
        if self.curriculum is not None:
            self.curriculum.save(folder)
        self.critic.save(folder)

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        super()._load_optimizer_and_scheduler(checkpoint)
        self._load_curriculum(checkpoint)
        if checkpoint is not None:
            self.critic.load(checkpoint)

    def _load_curriculum(self, checkpoint: str | None) -> None:
        if checkpoint is not None and self.curriculum is not None:
            self.curriculum.load(checkpoint)

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        super().save_model(output_dir, _internal_call)
        if not _internal_call and self.args.should_save:
            self.critic.save(output_dir or self.args.output_dir, optimizer=False)

    def train(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().train(*args, **kwargs)
        finally:
            self.runner.close()
            if self.pipeline is not None:
                self.pipeline.close()
