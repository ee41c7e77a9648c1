"""``TurnGymTrainer``: multi-turn PPO, GRPO, the RLOO family and GiGPO on TRL's GRPOTrainer.

One training step, top to bottom:

1. TRL's sampler hands each process task ids, each repeated ``num_generations`` times in a row
   (a group). ``rollout_func`` plays one whole episode per entry with the current weights
   (:class:`~turngym.trainers.rollout.EpisodeRunner`) and returns the exact ids, the sampling logprobs and
   ``env_mask``, which TRL keeps as its tool mask: environment tokens stay out of the loss.
2. TRL scores the episodes with one reward function, the episode return, and computes its own
   episode-level advantages. We replace them (``_generate_and_score_completions``) with per-token
   advantages from the estimator ``algorithm`` names (``turngym.trainers.estimators``, looked up once),
   computed on *every* process's episodes (gathered), so a group split across processes is baselined whole.
3. An estimator with a critic (PPO): the critic's values for every token give GAE advantages and value
   targets; the critic takes its own optimizer step on the clipped value loss next to TRL's policy step.
4. TRL's clipped-ratio loss, logging and checkpointing do the rest. The critic is saved with every
   checkpoint and restored on resume.

TRL 1.16 has no PPOTrainer (removed in PR #7020), so the critic lives here, in the same trainer.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import random
import warnings
from collections.abc import Hashable, Sequence
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy
import torch
from accelerate.utils import gather_object, is_peft_model
from datasets import Dataset
from trl import GRPOTrainer
from trl.models import unwrap_model_for_generation
from trl.models.utils import disable_gradient_checkpointing
from trl.trainer.utils import use_adapter

from turngym.agents.base import stable_seed
from turngym.agents.evaluate import summarise
from turngym.envs.tasks import TaskSet
from turngym.trainers import advantages as adv
from turngym.trainers.config import TurnGymConfig
from turngym.trainers.curriculum import SuccessCurriculum, TaskSampler
from turngym.trainers.episodes import Episode
from turngym.trainers.estimators import AdvantageBatch, get_estimator
from turngym.trainers.layouts import padded, per_turn_rows, recompute_logps, rollout_rows, whole_episode_rows
from turngym.trainers.logprobs import plain_head, scored_logprobs
from turngym.trainers.metrics import (
    EPISODE_SAMPLES,
    episode_metrics,
    episode_row,
    episode_sample,
    eval_metrics,
    sample_table_row,
    write_episode_samples,
)
from turngym.trainers.rollout import BackendFactory, EpisodeRunner, evaluate_policy, rollout_seed
from turngym.trainers.tis import tis_applies, tis_weights, truncated_importance_weights
from turngym.trainers.worlds import World, given_tasks, parse_worlds, world_eval_tasks, world_train_tasks

# Re-exported from their modules: code written against the single trainer module imports them from here.
__all__ = ["EPISODE_SAMPLES", "TurnGymTrainer", "group_keys", "sample_table_row", "train_tasks",
           "truncated_importance_weights", "turn_advantages"]

CRITIC_DIR = "critic"
CRITIC_OPTIMIZER = "critic_optimizer.pt"
CURRICULUM_STATE = "curriculum.json"  # the curriculum's success estimates, saved with each checkpoint


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
                    gamma: float = 1.0, scale: adv.Scale | str | bool = "group", alone: str = "return",
                    states: Sequence[Sequence[Hashable]] | None = None,
                    step_weight: float = 1.0) -> list[list[float]]:
    """One advantage per turn of every episode from the registered critic-free estimator ``algorithm``, with
    the config fields it reads given here (``scale``: ``scale_rewards``; ``alone``: ``turn_baseline_alone``;
    ``step_weight``: ``step_advantage_weight``; ``states``: the anchor states, default all unknown).

    Episode-level estimators (``grpo``, ``rloo``) give every turn the episode's advantage;
    turn-level ones (``turn_grpo``, ``turn_rloo``, ``gigpo``) one per turn. The trainer itself calls the
    estimator with its config.
    """
    estimator = get_estimator(algorithm)
    if estimator.needs_critic:
        raise ValueError(f"no turn advantages for algorithm {algorithm!r}: its advantages come from a critic")
    settings = SimpleNamespace(gamma=gamma, scale_rewards=adv.Scale.of(scale), turn_baseline_alone=alone,
                               step_advantage_weight=step_weight)
    batch = AdvantageBatch([list(r) for r in turn_rewards], list(groups),
                           [list(s) for s in states] if states is not None else [[None] * len(r) for r in turn_rewards])
    return estimator(batch, settings)


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


def train_tasks(args: TurnGymConfig) -> TaskSet:
    """The training tasks of a run with one world: ``num_train_tasks`` tasks of ``train_split`` after its first
    ``skip_train_tasks`` (:func:`~turngym.trainers.worlds.world_train_tasks`)."""
    worlds = parse_worlds(args)
    if len(worlds) > 1:
        raise ValueError("this run has several worlds: their tasks are world_train_tasks(world) for each")
    return world_train_tasks(worlds[0])


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
        tasks: the training tasks (default: ``args.train_split`` of ``args.env_id``'s panel); with several
            ``worlds``, a mapping world name -> TaskSet (a world left out builds its own).
        eval_tasks: held-out tasks that ``evaluate()`` plays (default: ``args.eval_split``, if set); with
            several worlds, a mapping world name -> TaskSet, as ``tasks``.
        processing_class: the policy's tokenizer (loaded with the model when ``model`` is a name).
        critic: PPO's critic (default: a copy of the policy's backbone with a value head).
        backend: builds the rollout's generation backend from the model to sample with (default:
            batched Hugging Face generation; vLLM when ``use_vllm``).
    """

    _tag_names: ClassVar[list[str]] = ["trl", "turngym"]
    _loss_inputs: dict[str, Any] | None = None  # the micro-batch, while its loss runs (_compute_loss)

    def __init__(self, model: Any = None, args: TurnGymConfig | None = None, *,
                 tasks: TaskSet | dict[str, TaskSet] | None = None,
                 eval_tasks: TaskSet | dict[str, TaskSet] | None = None, processing_class: Any = None,
                 critic: Any = None,
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
        self.worlds: list[World] = parse_worlds(args)
        for world, given, held in zip(self.worlds, given_tasks(self.worlds, tasks, "tasks"),
                                      given_tasks(self.worlds, eval_tasks, "eval_tasks"), strict=True):
            world.train_tasks = given if given is not None else world_train_tasks(world)
            world.eval_tasks = held if held is not None else world_eval_tasks(world)
        self.eval_tasks = self.worlds[0].eval_tasks if len(self.worlds) == 1 else None  # one world: evaluate() reads it
        self.estimator = args.estimator  # the one lookup: the rest reads its properties
        if peft_config is None:
            peft_config = lora_config(args)
        if peft_config is not None and self.estimator.needs_critic and critic is None:
            # The critic stays a full model: copied from the policy before TRL injects the adapters into it.
            critic = build_critic(model, args.critic_model_name_or_path)
        self.runner = EpisodeRunner(args, self.worlds, processing_class, backend)
        keys = list(self.runner.tasks)  # task ids (one world) or world::task id keys, world after world
        self.task_index = {key: index for index, key in enumerate(keys)}
        self.curriculum = (SuccessCurriculum(len(keys), target=args.curriculum_target, floor=args.curriculum_floor)
                           if args.curriculum == "success" else None)
        dataset = Dataset.from_dict({"prompt": keys})
        qualified = len(self.worlds) > 1
        held_out = [w.key(t.id, qualified=qualified) for w in self.worlds for t in (w.eval_tasks or ())]
        held_out = Dataset.from_dict({"prompt": held_out}) if held_out else None
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
        if self.estimator.needs_critic:
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

    # ------------------------------------------------------------------ which tasks
    def _get_train_sampler(self, dataset: Any = None) -> Any:
        """TRL's ``RepeatSampler`` (each task once per epoch), unless the worlds have weights or a curriculum is
        on: then one :class:`~turngym.trainers.curriculum.TaskSampler` for the run, with the same layout (groups
        of ``num_generations`` in a row) and draws that follow them."""
        weighted = len(self.worlds) > 1 and all(w.weight is not None for w in self.worlds)
        if self.curriculum is None and not weighted:
            return super()._get_train_sampler(dataset)
        if getattr(self, "_task_sampler", None) is None:
            world_number = {w.name: i for i, w in enumerate(self.worlds)}
            self._task_sampler = TaskSampler(
                [world_number[self.runner.world_of[key].name] for key in self.task_index],
                [w.weight for w in self.worlds] if weighted else None, mini_repeat_count=self.num_generations,
                batch_size=self.args.generation_batch_size // self.num_generations,
                repeat_count=self.num_iterations * self.args.steps_per_generation, seed=self.args.seed,
                curriculum=self.curriculum)
        return self._task_sampler

    def _update_curriculum(self, keys: Sequence[str], won: Sequence[bool], groups: Sequence[Hashable]) -> None:
        """Each group's success rate into the curriculum (every process sees the same gathered episodes, so
        every process's sampler draws the same tasks)."""
        by_group: dict[Hashable, list[bool]] = {}
        for group, outcome in zip(groups, won, strict=True):
            by_group.setdefault(group, []).append(outcome)
        first = {group: keys[i] for i, group in reversed(list(enumerate(groups)))}
        for group, outcomes in by_group.items():
            self.curriculum.update(self.task_index[first[group]], sum(outcomes) / len(outcomes))
        seen = ~numpy.isnan(self.curriculum.success)
        self._metrics["train"]["curriculum/tasks_seen"].append(float(seen.mean()))
        if seen.any():
            self._metrics["train"]["curriculum/success_mean"].append(float(self.curriculum.success[seen].mean()))

    # ------------------------------------------------------------------ rollout
    def _rollout(self, prompts: list[str], trainer: Any) -> dict[str, list]:
        """TRL's ``rollout_func``: one episode per prompt (a task key), in order.

        Besides the ids TRL needs, the typed :class:`Episode` records go out under ``"episode"``:
        TRL merges extra keys into each input row, where the reward function and
        :meth:`_generate_and_score_completions` read them back. With a history window, TRL gets each
        episode's first turn as a stand-in row, and :meth:`_per_turn_rows` replaces the rows with one per turn.
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
        return rollout_rows(episodes, per_turn=bool(self.args.history_window))

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
        # An episode's group is its task key (the task id, or world::task id with several worlds).
        everyone = gather_object([(e.group, e.turn_rewards, e.anchor_states, e.won) for e in episodes])
        num_generations = self.num_generations if mode == "train" else self.num_generations_eval
        keys = [key for key, _, _, _ in everyone]
        groups = group_keys(keys, num_generations)  # refuses a group of two tasks (or two worlds)
        if mode == "train" and self.curriculum is not None:
            self._update_curriculum(keys, [won for _, _, _, won in everyone], groups)
        everyone = [(key, rewards, states) for key, rewards, states, _ in everyone]
        start = self.accelerator.process_index * len(episodes)
        dropped: list[bool] = [False] * len(everyone)
        if self.estimator.needs_critic:
            token_advantages = self._ppo_targets(output, episodes, mode)
            if self.args.shuffle_advantages:  # the null control, over this process's model tokens
                token_advantages = _shuffled_over_model_tokens(
                    token_advantages, episodes, groups[start: start + len(episodes)], self.args.shuffle_scope,
                    self._null_rng(self.accelerator.process_index))
        else:
            batch = AdvantageBatch([r for _, r, _ in everyone], groups, [s for _, _, s in everyone])
            per_turn = self.estimator(batch, self.args)
            for name, value in batch.metrics.items():
                self._metrics[mode][name].append(float(value))
            if self.args.dynamic_sampling == "drop":  # decided on the honest advantages, before any shuffle
                silent = zero_signal_groups(per_turn, groups)
                dropped = [group in silent for group in groups]
                self._metrics[mode]["dynamic_sampling/dropped_groups"].append(float(len(silent)))
                self._metrics[mode]["dynamic_sampling/dropped_fraction"].append(len(silent) / max(len(set(groups)), 1))
            if self.args.shuffle_advantages:  # the null control, over every (episode, turn) of the step that is kept
                kept = [i for i, d in enumerate(dropped) if not d]
                rows = [per_turn[i] for i in kept]
                cells = (adv.group_turn_cells([groups[i] for i in kept], [range(len(r)) for r in rows])
                         if self.args.shuffle_scope == "group" else None)
                for i, row in zip(kept, adv.shuffle_advantages(rows, self._null_rng(), cells), strict=True):
                    per_turn[i] = row
            per_turn = per_turn[start: start + len(episodes)]
            token_advantages = [adv.spread_over_tokens(a, e.turn_index, e.env_mask)
                                for a, e in zip(per_turn, episodes, strict=True)]
        if self.args.history_window:  # one row per turn, each on its own context
            self._per_turn_rows(output, episodes, per_turn, dropped[start: start + len(episodes)], mode)
        else:
            whole_episode_rows(output, token_advantages, dropped[start: start + len(episodes)], recount=any(dropped),
                               gather=self.accelerator.gather)
        self._log_episodes(episodes, token_advantages, groups, mode)
        weights = self._importance_weights(output, mode)
        if weights is not None:
            output["advantages"] = output["advantages"] * weights
        return output

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

    def _null_rng(self, *salt: Any) -> random.Random:
        """The null control's generator: the same on every process (unless salted), new at every step."""
        return random.Random(stable_seed(self.args.seed, "shuffle_advantages", self.state.global_step, *salt))

    def _tis_applies(self, inputs: dict[str, Any]) -> bool:
        return tis_applies(self.args.tis_cap, inputs, corrected_elsewhere=self.use_vllm
                           and self.vllm_importance_sampling_correction)

    def _importance_weights(self, output: dict[str, Any], mode: str) -> torch.Tensor | None:
        """TIS weights (:mod:`turngym.trainers.tis`) when the trainer's logprobs are known at scoring time (TRL
        computed them: ``num_iterations > 1``); otherwise the loss's own forward pass gives them
        (:meth:`_get_per_token_logps_and_entropies`), so TIS costs no extra forward pass. TRL 1.16 has this
        correction only when it generates with vLLM itself."""
        if not self._tis_applies(output) or output.get("old_per_token_logps") is None:
            return None
        return self._tis_weights(output["old_per_token_logps"], output, mode)

    def _tis_weights(self, trainer_logps: torch.Tensor, inputs: dict[str, Any], mode: str) -> torch.Tensor:
        weights, metrics = tis_weights(trainer_logps, inputs, self.args.tis_cap, self.accelerator)
        self._log(mode, metrics)
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

    # ------------------------------------------------------------------ per-token log-probabilities
    def _get_per_token_logps_and_entropies(self, model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                                           logits_to_keep: int, batch_size: int | None = None,
                                           compute_entropy: bool = False, compute_aux_loss: bool = False,
                                           pixel_values: Any = None, image_grid_thw: Any = None, num_images: Any = None,
                                           pixel_attention_mask: Any = None, spatial_shapes: Any = None,
                                           num_tiles: Any = None, image_sizes: Any = None, token_type_ids: Any = None,
                                           mm_token_type_ids: Any = None, image_position_ids: Any = None) -> tuple:
        """TRL's log-probabilities, projected through the vocabulary only at the completion positions read.

        Those are the loss's mask (completion and tool mask: the model's own tokens) while :meth:`_compute_loss`
        runs, else every completion token; other positions are 0, as in TRL (:mod:`turngym.trainers.logprobs`).
        Multimodal inputs, a MoE aux loss, a scaled head or a wrapped model (DDP, FSDP, DeepSpeed, whose own
        forward must run) take TRL's path unchanged.

        In the loss, with TIS on and no trainer logprobs from sampling time (``num_iterations = 1``), these
        detached logprobs are the ones TRL's ratio uses as "old", so the loss's advantages are weighted by
        TIS from them here: TRL reads the advantages only after this call returns.
        """
        extra = (pixel_values, image_grid_thw, num_images, pixel_attention_mask, spatial_shapes, num_tiles,
                 image_sizes, token_type_ids, mm_token_type_ids, image_position_ids)
        inputs, causal_lm = self._loss_inputs, self._directly_callable(model)
        if causal_lm is None or compute_aux_loss or any(x is not None for x in extra):
            logps, entropies, aux_loss = super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss,
                *extra)
        else:
            logps, entropies, aux_loss = self._scored_logps(causal_lm, input_ids, attention_mask, logits_to_keep,
                                                            batch_size, compute_entropy, inputs)
        if inputs is not None and self._tis_applies(inputs) and inputs.get("old_per_token_logps") is None:
            mode = "train" if self.model.training else "eval"
            inputs["advantages"] = inputs["advantages"] * self._tis_weights(logps.detach(), inputs, mode)
        return logps, entropies, aux_loss

    def _scored_logps(self, causal_lm: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                      logits_to_keep: int, batch_size: int | None, compute_entropy: bool,
                      inputs: dict[str, Any] | None) -> tuple:
        """:func:`scored_logprobs` in chunks of ``batch_size`` rows: the loss's tokens, else the completion's."""
        scored = attention_mask[:, -logits_to_keep:].bool()
        if inputs is not None:
            scored = scored & (inputs["completion_mask"] * inputs.get("tool_mask", 1)).bool()
        batch_size = batch_size or input_ids.size(0)
        logps, entropies = [], []
        for rows in (slice(start, start + batch_size) for start in range(0, input_ids.size(0), batch_size)):
            with self.accelerator.autocast():
                lp, entropy = scored_logprobs(causal_lm, input_ids[rows], attention_mask[rows], scored[rows],
                                              self.temperature, compute_entropy=compute_entropy,
                                              fp32_head=self.args.cast_lm_head_to_fp32)
            logps.append(lp)
            entropies.append(entropy)
        return torch.cat(logps), (torch.cat(entropies) if compute_entropy else None), None

    def _directly_callable(self, model: Any) -> Any:
        """The causal LM under ``model`` (through PEFT) whose backbone and head may be called apart, or None."""
        if self.accelerator.unwrap_model(model) is not model or self.is_deepspeed_enabled or self.is_fsdp_enabled:
            return None
        causal_lm = model.get_base_model() if is_peft_model(model) else model
        return causal_lm if hasattr(causal_lm, "base_model") and plain_head(causal_lm) else None

    # ------------------------------------------------------------------ loss and critic step
    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        if self.critic is not None and self.model.training:
            self._critic_backward(inputs)
            if self.state.global_step < self.args.critic_warmup_steps:
                # Critic warm-up: the policy loss is skipped (no forward pass), so no policy parameter gets
                # a gradient and the optimizer leaves them all as they are (AdamW skips grad=None).
                self._metrics["train"]["critic/warmup"].append(1.0)
                return torch.zeros((), device=self.accelerator.device, requires_grad=True)
        with contextlib.ExitStack() as stack:
            self._loss_inputs = inputs  # its forward projects only the loss's tokens, and applies TIS
            stack.callback(setattr, self, "_loss_inputs", None)
            if self.args.kl_penalty == "reward":  # the KL is already in the rewards: keep it out of the loss
                beta, self.beta = self.beta, 0.0
                stack.callback(setattr, self, "beta", beta)
            return super()._compute_loss(model, inputs)

    def _critic_backward(self, inputs: dict[str, Any]) -> None:
        """The value loss's gradient, ``critic_rows_per_pass`` episodes at a time.

        L_V is a sum over tokens divided by a fixed normalizer, so the passes' gradients add up to the
        whole batch's exactly, while the activations kept for backward are those of one pass only.
        """
        prompt_width, width = inputs["prompt_ids"].size(1), inputs["completion_ids"].size(1)
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        attention = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        mask = inputs["completion_mask"] * inputs["tool_mask"]
        # The share of the generation batch's loss tokens one micro-batch stands for (as TRL's DAPO loss).
        normalizer = (inputs["num_items_in_batch"].clamp(min=1.0) / self.accelerator.num_processes
                      * self.current_gradient_accumulation_steps / self.args.steps_per_generation)
        total = clipped_tokens = torch.zeros((), device=ids.device)
        step = self.args.critic_rows_per_pass
        for rows in (slice(start, start + step) for start in range(0, ids.size(0), step)):
            values = self._critic_values(self.critic, ids[rows], attention[rows])[:, prompt_width - 1:][:, :width]
            loss, clipped = value_loss(values, inputs["old_values"][rows], inputs["returns"][rows], mask[rows],
                                       self.args.value_clip, normalizer)
            self.accelerator.backward(loss)
            total = total + loss.detach()
            clipped_tokens = clipped_tokens + clipped.detach() * mask[rows].sum()
        clip_fraction = clipped_tokens / mask.sum().clamp(min=1.0)
        metrics = self._metrics["train"]
        metrics["critic/value_loss"].append(self.accelerator.gather(total).mean().item())
        metrics["critic/clip_fraction"].append(self.accelerator.gather(clip_fraction).mean().item())

    def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> torch.Tensor:
        loss = super().training_step(model, inputs, num_items_in_batch)
        if self.critic is not None and self._step % self.current_gradient_accumulation_steps == 0:
            torch.nn.utils.clip_grad_norm_(self.critic.parameters(), self.args.critic_max_grad_norm)
            self.critic_optimizer.step()
            self.critic_optimizer.zero_grad(set_to_none=True)
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
        self._log(mode, episode_metrics(rows, groups, [w.name for w in self.worlds]))
        if mode == "train" and self.args.episode_samples and self.accelerator.is_main_process:
            first = min(self.args.episode_samples, len(episodes))  # the main process's rows come first in `rows`
            step = self.state.global_step + 1  # the optimizer step these episodes are trained in
            records = [episode_sample(e, r["turn_advantages"], step, g)
                       for e, r, g in zip(episodes[:first], rows[:first], groups[:first], strict=True)]
            write_episode_samples(self.args.output_dir, records, step, trackio="trackio" in (self.args.report_to or []))

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
            played = []
            for world, tasks in panels:
                report = evaluate_policy(self.accelerator.unwrap_model(self.model), self.processing_class,
                                         world.options, tasks, temperature=self.args.eval_temperature,
                                         seed=self.args.seed, history_window=self.args.history_window,
                                         progress=f"held-out evaluation{f' ({world.name})' if len(panels) > 1 else ''}")
                played += report.trajectories
                if len(self.worlds) > 1:
                    metrics.update(eval_metrics(report.overall, metric_key_prefix, f"/{world.name}"))
            metrics.update(eval_metrics(summarise(played), metric_key_prefix))  # every panel's episodes pooled
            self.log(metrics)
        self.accelerator.wait_for_everyone()
        return metrics

    # ------------------------------------------------------------------ checkpoints
    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        super()._save_checkpoint(model, trial)
        if not self.args.should_save:
            return
        folder = os.path.join(self._get_output_dir(trial=trial), f"checkpoint-{self.state.global_step}")
        if self.curriculum is not None:
            with open(os.path.join(folder, CURRICULUM_STATE), "w") as handle:
                json.dump(self.curriculum.state_dict(), handle)
        if self.critic is not None:
            self.save_critic(folder)

    def _load_curriculum(self, checkpoint: str | None) -> None:
        """The curriculum's success estimates from a checkpoint. The tasks drawn after a resume still differ from
        an uninterrupted run's: the draws TRL replays to skip the finished steps read the restored estimates."""
        path = os.path.join(checkpoint, CURRICULUM_STATE) if checkpoint else None
        if self.curriculum is not None and path and os.path.isfile(path):
            with open(path) as handle:
                self.curriculum.load_state_dict(json.load(handle))

    def save_critic(self, folder: str) -> None:
        """Critic weights (``critic/``) and its optimizer state, next to the policy's."""
        self.accelerator.unwrap_model(self.critic).save_pretrained(os.path.join(folder, CRITIC_DIR))
        torch.save(self.critic_optimizer.state_dict(), os.path.join(folder, CRITIC_OPTIMIZER))

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        super()._load_optimizer_and_scheduler(checkpoint)
        self._load_curriculum(checkpoint)
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


def _shuffled_over_model_tokens(token_advantages: list[list[float]], episodes: list[Episode], groups: Sequence[Any],
                                scope: str, rng: random.Random) -> list[list[float]]:
    """:func:`~turngym.trainers.advantages.shuffle_advantages` over the model tokens only (env tokens keep 0); with
    ``scope="group"`` within each (group, turn index) cell, so each group keeps its token sum at every turn."""
    on_model = [[a for a, m in zip(row, e.env_mask, strict=True) if m]
                for row, e in zip(token_advantages, episodes, strict=True)]
    turns = [[t for t, m in zip(e.turn_index, e.env_mask, strict=True) if m] for e in episodes]
    cells = adv.group_turn_cells(groups, turns) if scope == "group" else None
    dealt = [iter(row) for row in adv.shuffle_advantages(on_model, rng, cells)]
    return [[next(values) if m else 0.0 for m in e.env_mask] for values, e in zip(dealt, episodes, strict=True)]
