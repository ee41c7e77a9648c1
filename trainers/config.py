"""Configs: typed groups of fields, composed into dataclasses extending TRL's, readable from YAML and
overridable on the command line.

A run's fields come in groups, each a dataclass: :class:`WorldOptions` (what is played and the agent's chat
format, shared with SFT so a warm start and the RL run after it see the same chat format),
:class:`RolloutOptions` (which tasks, how episodes become samples, evaluation and samples kept),
:class:`EstimatorOptions` (the advantage estimator and the loss's corrections), :class:`CriticOptions` (the
critic and PPO's GAE: they fill a :class:`~turngym.trainers.critic.CriticConfig`) and :class:`LoraOptions` (TRL's
``ModelConfig`` LoRA names). :class:`TurnGymConfig` is all of them plus TRL's ``GRPOConfig``.

Choices are ``Literal`` types: the command line's parser lists them (``invalid choice``) and one check,
:func:`~turngym.trainers.config_fields.check_choices`, covers YAML values and Python construction. Construction
validates the fields (and fixes the device); :meth:`TurnGymConfig.resolve`, called before use, does what touches the
outside world: imports and registry lookups.

Besides this module: the world group and the entries of several worlds (``config_worlds.py``), the checks of single
fields (``config_fields.py``) and the command line's parser, :class:`~turngym.trainers.config_cli.ConfigParser`
(``config_cli.py``). The critic group is made from :class:`~turngym.trainers.critic.CriticConfig`'s fields.

    turngym train --config recipes/configs/signals-grpo.yaml --algorithm turn_rloo --learning_rate 1e-5
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, make_dataclass
from dataclasses import fields as dataclass_fields
from typing import Any, Literal, TypeVar, get_type_hints

from trl import GRPOConfig

from turngym.trainers.advantages import Scale
from turngym.trainers.config_fields import CHOICE_NOTES, check_choices, group_of
from turngym.trainers.config_harness import HarnessOptions
from turngym.trainers.config_judge import JudgeOptions
from turngym.trainers.config_worlds import (
    ENTRY_FIELDS,
    KEY_SEPARATOR,
    PER_RUN_FIELDS,
    ActionFormatName,
    ActionProtocolName,
    EnvBackend,
    RewardModeName,
    World,
    WorldOptions,
    parse_worlds,
    world_name,
)
from turngym.trainers.critic import CriticConfig
from turngym.trainers.estimators import Algorithm, Estimator, estimator_names, get_estimator, resolve_algorithm

# Re-exported: the world group and the field checks live in config_worlds.py and config_fields.py (the CLI parser,
# ConfigParser, in config_cli.py, which imports this module).
__all__ = ["ALGORITHMS", "CHOICE_NOTES", "ENTRY_FIELDS", "GROUPS", "KEY_SEPARATOR", "PER_RUN_FIELDS",
           "ActionFormatName", "ActionProtocolName", "CriticOptions", "EnvBackend", "EstimatorOptions",
           "HarnessOptions", "JudgeOptions", "LoraOptions",
           "RewardModeName", "RolloutOptions", "TurnGymConfig", "World", "WorldOptions", "check_choices",
           "cpu_computes_bf16", "fix_device", "group_of", "lora_config", "parse_worlds", "world_name"]

ALGORITHMS = tuple(a.value for a in Algorithm)  # the built-in estimators; trainers/estimators.py registers more

G = TypeVar("G")


@dataclass
class RolloutOptions:
    """Which tasks are played and how, how episodes become training samples, evaluation, the samples kept."""

    skip_train_tasks: int = field(
        default=0, metadata={"help": "skip the first N tasks of train_split (e.g. the SFT demos' games, which are "
                                     "the split's first num_demos tasks), so RL trains on other games"})
    worlds: list[dict[str, Any]] | str | None = field(
        default=None, metadata={"help": "several worlds in one run: a list of entries {name, env_id, env_kwargs, "
                                        "num_train_tasks, weight, ...} (any world option; the top-level ones are the "
                                        "defaults; JSON on the command line). A group is one task of one world; "
                                        "metrics and held-out evaluation are also reported per world"})
    curriculum: Literal["off", "success"] = field(
        default="off", metadata={"help": "'success': draw tasks by priority, highest for those whose recent group "
                                         "success rate is near curriculum_target (never-played tasks first); 'off': "
                                         "TRL's uniform draw (or the worlds' weights)"})
    curriculum_target: float = field(default=0.5, metadata={"help": "curriculum: the success rate prioritised"})
    curriculum_floor: float = field(
        default=0.1, metadata={"help": "curriculum: the lowest priority, relative to 1 at the target (keeps solved and "
                                       "hopeless tasks in the mix)"})
    history_window: int | None = field(
        default=None, metadata={"help": "context of long episodes: the model sees the first prompt (system prompt, "
                                        "first observation) and the last K turns only, and each turn trains as its "
                                        "own sample on exactly that context; None: the whole episode, one sample"})
    history: Literal["append", "strip_thinking", "compact"] = field(
        default="append", metadata={"help": "what the model is given of its earlier turns: 'append' (as sampled), "
                                            "'strip_thinking' (replies without their <think> reasoning, as Qwen3's "
                                            "template), 'compact' (the oldest turns summarised past "
                                            "compact_budget_tokens); a rewritten turn trains as its own sample on "
                                            "exactly the context it was given (docs/agents.md)"})
    compact_budget_tokens: int | None = field(
        default=None, metadata={"help": "history compact: the context size past which the oldest turns are "
                                        "summarised"})
    compact_summary: Literal["rule", "policy"] = field(
        default="rule", metadata={"help": "history compact: 'rule' (the dropped turns' actions listed) or 'policy' "
                                          "(the policy writes the summary; its tokens are context, never trained)"})
    compact_summary_tokens: int = field(
        default=128, metadata={"help": "history compact: the summary's length cap in tokens"})
    share_prefixes: bool = field(
        default=False, metadata={"help": "the loss's forward pass (and the old policy's and reference's) encodes each "
                                         "prefix that rows share once (a group's prompt, per-turn rows' history) "
                                         "instead of once per row: the same log-probabilities and gradients, fewer "
                                         "operations (docs/training.md)"})
    skip_zero_advantage_batches: bool = field(
        default=True, metadata={"help": "a micro-batch whose advantages are all 0, with no KL term, aux loss or "
                                        "entropy bonus in the loss, has a loss and gradient of exactly 0: the "
                                        "policy's forward and backward passes are skipped and the optimizer steps "
                                        "on zero gradients, so the weights are the same (one process; "
                                        "docs/training.md#no-learning-signal)"})
    max_staleness: int = field(
        default=0, metadata={"help": "K > 0: the next K steps' rollouts play while a step trains"})
    partial_rollouts: bool = field(default=False, metadata={"help": "K > 0: new weights between turns"})
    eval_temperature: float = field(
        default=0.4, metadata={"help": "sampling temperature on held-out tasks (the reference study's)"})
    episode_samples: int = field(
        default=4, metadata={"help": "episodes per step kept as text, with turn advantages, in "
                                     "output_dir/episode_samples.jsonl and trackio; 0: off"})
    save_minutes: float = field(
        default=5.0, metadata={"help": "checkpoint every X min too, 0: off"})


@dataclass
class EstimatorOptions:
    """The advantage estimator and what the loss does with its advantages."""

    # A str field (an Algorithm after resolve()), so a name registered by a module in `imports` passes the
    # command line's parser too.
    algorithm: str = field(
        default=Algorithm.TURN_RLOO.value,
        metadata={"help": ", ".join(ALGORITHMS) + " or your own (docs/training.md)"})
    step_advantage_weight: float = field(
        default=1.0, metadata={"help": "gigpo's omega: A = A_episode + omega * A_step"})
    component_weights: dict[str, float] | str | None = field(
        default=None, metadata={"help": "gdpo: the reward components to combine, {name: weight} (JSON on the command "
                                        "line), e.g. {\"outcome\": 1, \"judge\": 0.5}; each is normalised within its "
                                        "group before the weighted sum (docs/rewards.md)"})
    gamma: float = field(default=1.0, metadata={"help": "discount over turns (PPO: over tokens' turn rewards)"})
    turn_baseline_alone: Literal["return", "zero"] = field(
        default="return", metadata={"help": "turn_rloo, for a turn t that no other episode of the group reached: "
                                            "'return' (baseline 0, so the advantage is the episode's own "
                                            "return-to-go G_t: plain REINFORCE) or 'zero' (advantage 0: no signal "
                                            "without a comparison)"})
    kl_penalty: Literal["loss", "reward"] = field(
        default="loss", metadata={"help": "where beta's KL to the reference goes: 'loss' or 'reward' (PPO)"})
    tis_cap: float | None = field(
        default=2.0, metadata={"help": "truncated importance sampling: advantages weighted by min(exp(logp_trainer"
                                       " - logp_sampler), tis_cap); None: off (vLLM: TRL's own correction, if on)"})
    shuffle_advantages: bool = field(
        default=False, metadata={"help": "null control: permute the step's advantages with a seeded generator, "
                                         "within each cell of shuffle_scope, so updates carry no signal"})
    shuffle_scope: Literal["group", "step"] = field(
        default="group", metadata={"help": "the null control's cells: 'group' permutes within each group and turn "
                                           "index (every group keeps its sum; tied groups stay at 0: the fair null); "
                                           "'step' deals every advantage of the step across groups (harsher: it "
                                           "moves advantages onto groups the real arm leaves alone)"})
    dynamic_sampling: Literal["off", "drop"] = field(
        default="off", metadata={"help": "DAPO's dynamic sampling (critic-free): 'drop' takes groups whose "
                                         "advantages are all 0 out of the loss (dynamic_sampling/dropped_groups)"})


def flat_group(config: type, name: str, doc: str) -> type:
    """A dataclass of ``config``'s fields under their flat names (``metadata["flat"]``, else the same), with their
    help; a ``metadata["flat_default"]`` replaces the default, and allows None."""
    hints, specs = get_type_hints(config), []
    for spec in dataclass_fields(config):
        kind, default = hints[spec.name], spec.default
        if "flat_default" in spec.metadata:
            kind, default = kind | None, spec.metadata["flat_default"]
        specs.append((spec.metadata.get("flat", spec.name), kind, field(default=default,
                                                                           metadata={"help": spec.metadata["help"]})))
    return make_dataclass(name, specs, namespace={"__doc__": doc, "__module__": __name__})


# The critic's options are declared once, in CriticConfig (trainers/critic.py): this group is made from its fields.
CriticOptions = flat_group(CriticConfig, "CriticOptions", (
    "The critic of the estimators that need values (PPO's), and PPO's GAE, under the flat names YAML configs and the "
    "command line use; they fill ``TurnGymConfig.critic_config``, a :class:`~turngym.trainers.critic.CriticConfig`, "
    "whose fields they are (``critic.FLAT_FIELDS`` maps the names)."))


@dataclass
class LoraOptions:
    """The policy: LoRA, with TRL's ``ModelConfig`` field names (``lora_config`` hands them to TRL's
    ``get_peft_config``) and an SFT warm start (:func:`turngym.trainers.sft.warm_start`)."""

    use_peft: bool = field(
        default=False, metadata={"help": "train a LoRA adapter instead of every weight (the saved policy is the "
                                         "adapter); PPO's critic stays a full model"})
    lora_r: int = field(default=16, metadata={"help": "LoRA rank (use_peft)"})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha (use_peft)"})
    # 0, not TRL's 0.05: the loss must score the policy that sampled. Dropout made the trainer's log-probs differ from
    # the sampler's by 0.055 nats on average (IS ratios 0.47-1.94) after one LoRA step (tests/test_vllm_trainer.py).
    lora_dropout: float = field(default=0.0, metadata={"help": "LoRA dropout (use_peft; 0: score what was sampled)"})
    lora_target_modules: list[str] | None = field(
        default=None, metadata={"help": "modules that get adapters, e.g. q_proj v_proj, or all-linear (use_peft; "
                                        "default: PEFT's choice for the architecture)"})
    lora_modules_to_save: list[str] | None = field(
        default=None, metadata={"help": "modules trained in full next to the adapters, e.g. lm_head (use_peft)"})
    sft_demos: int = field(
        default=0, metadata={"help": "N > 0: first an SFT warm start on the oracle's first N train tasks (the world's"
                                     " walkthroughs)"})


# The groups of TurnGymConfig, in the order `turngym train --help` shows them: (class, title, description).
GROUPS: tuple[tuple[type, str, str], ...] = (
    (WorldOptions, "world", "the world, its tasks, the agent's chat format (as in turngym sft)"),
    (RolloutOptions, "rollout", "tasks drawn, episodes as samples, evaluation, samples kept"),
    (EstimatorOptions, "estimator", "the advantage estimator and the loss's corrections"),
    (CriticOptions, "critic", "the critic and PPO's GAE: they fill args.critic_config"),
    (LoraOptions, "model", "the policy: LoRA (TRL ModelConfig's names), an SFT warm start"),
    (HarnessOptions, "harness", "a user's own agent loop, trained through the OpenAI-compatible proxy"),
    (JudgeOptions, "judge", "a model judging each step's episodes (RULER-style group ranking, or pointwise)"),
)


CPU_BF16_VARIABLE = "TURNGYM_CPU_BF16"  # "1"/"0": overrides the detection (the test suite sets "0")


def cpu_computes_bf16() -> bool:
    """Does this CPU compute bf16 natively (AVX512-BF16 or AMX), with torch's oneDNN to use it?

    ``TURNGYM_CPU_BF16=1|0`` overrides the answer."""
    import torch

    forced = os.environ.get(CPU_BF16_VARIABLE, "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    native = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    return bool(native and torch.backends.mkldnn.is_available())


def fix_device(config: Any) -> None:
    """CPU runs work out of the box: without CUDA, ``use_cpu``; on CPU never fp16, and bf16 autocast by default
    where the CPU computes bf16 natively (:func:`cpu_computes_bf16`), as TRL's default does on accelerators.

    It must run before ``TrainingArguments.__post_init__``, which refuses bf16 without an accelerator.
    """
    import torch

    if not torch.cuda.is_available() and not config.use_cpu:
        config.use_cpu = True
    if config.use_cpu:
        # bf16 runs the fp32 weights under CPU autocast (mixed precision): a training step of SmolLM2 is 2.6x
        # faster on AVX512-BF16 (docs/benchmarks.md). Rollouts keep the fp32 weights; TIS corrects the gap.
        if config.bf16 is None:
            config.bf16 = cpu_computes_bf16()
        if config.bf16 and not torch.backends.mkldnn.is_available():
            raise ValueError("bf16=True on CPU needs torch's oneDNN (mkldnn) backend; drop bf16 or run on a GPU")
        config.bf16 = bool(config.bf16)
        config.fp16 = False


# TurnGymConfig keeps every field flat, as one dataclass, rather than holding the groups as nested objects:
# TRL's GRPOTrainer reads GRPOConfig's fields from `args` directly, YAML configs and `TurnGymConfig(**fields)` give
# flat names, and TrlParser/HfArgumentParser parse one flat dataclass into exactly the object the trainer takes.
# The groups are its bases (so each field is declared once, in its group) and `options(Group)` is a group's view.
@dataclass
class TurnGymConfig(WorldOptions, RolloutOptions, EstimatorOptions, CriticOptions, LoraOptions, HarnessOptions,
                    JudgeOptions, GRPOConfig):
    """Multi-turn RL on whole episodes: GRPO's config plus the groups world, rollout, estimator, critic and model.

    ``num_generations`` episodes of the same task form a group. ``max_completion_length`` caps the
    tokens after the prompt of an episode (model and environment tokens together); the episode
    ends as truncated (``context_length``) before it would pass the cap.

    Construction validates the fields on their own (:meth:`validate`) and fixes the device for CPU runs (before
    ``GRPOConfig.__post_init__``, which needs it); it imports no user module and looks nothing up. :meth:`resolve`
    imports ``imports``, looks the world and the estimator up in their registries and checks the curriculum:
    the trainer calls it, and so does :attr:`estimator`. The critic's flat fields fill ``critic_config``, a
    :class:`~turngym.trainers.critic.CriticConfig`.
    """

    def __post_init__(self) -> None:
        self.validate()
        self._given_reply_format = (self.action_format, self.response_prefix)  # before the world's defaults
        self._resolved = False
        # The device fix stays here, before GRPOConfig's (TrainingArguments') __post_init__, which refuses bf16
        # without CUDA: a CPU run's config could not be built otherwise. It imports torch only, looks nothing up.
        fix_device(self)
        super().__post_init__()
        self.scale_rewards = Scale.of(self.scale_rewards)

    def validate(self) -> None:
        """Checks of the fields on their own: choices, ranges, the options that exclude each other. Imports
        nothing, looks nothing up (the parts that do are :meth:`resolve`'s)."""
        self._validate_world()
        check_choices(self)
        if self.critic_learning_rate is None:
            self.critic_learning_rate = 10 * self.learning_rate
        self.critic_config = CriticConfig.from_flat(self)  # the flat critic fields as one typed group, checked there
        for name, floor in (("skip_train_tasks", 0), ("sft_demos", 0)):
            if getattr(self, name) < floor:
                raise ValueError(f"{name} must be >= {floor}, got {getattr(self, name)}")
        self.component_weights = parse_component_weights(self.component_weights)
        if self.tis_cap is not None and self.tis_cap <= 0:
            raise ValueError(f"tis_cap must be positive (or None: off), got {self.tis_cap}")
        if self.save_minutes < 0:
            raise ValueError(f"save_minutes must be >= 0 (0: off), got {self.save_minutes}")
        if self.episode_samples < 0:
            raise ValueError(f"episode_samples must be >= 0 (0: off), got {self.episode_samples}")
        self._validate_pipeline()
        self._validate_harness()
        self.validate_judge()
        if isinstance(self.lora_target_modules, list) and len(self.lora_target_modules) == 1:
            self.lora_target_modules = self.lora_target_modules[0]  # "all-linear" is a string to PEFT (as ModelConfig)
        if isinstance(self.worlds, str):
            try:
                self.worlds = json.loads(self.worlds)
            except json.JSONDecodeError as error:
                raise ValueError(f"worlds must be a JSON list of entries, got {self.worlds!r} ({error})") from None
        if self.history_window is not None:
            if self.history_window < 1:
                raise ValueError(
                    f"history_window must be >= 1 turn (None: the whole episode), got {self.history_window}")
            if self.use_vllm and self.vllm_importance_sampling_correction:
                raise ValueError("history_window with use_vllm: set vllm_importance_sampling_correction=False "
                                 "(turngym's tis_cap corrects the per-turn samples instead)")
        self._validate_history()

    def _validate_history(self) -> None:
        """``history`` and its compaction settings agree (the agent's own check), and a rewritten history's per-turn
        samples are not corrected by TRL's vLLM importance sampling (tis_cap does it)."""
        from turngym.agents.histories import check_history

        check_history(self.history, window=self.history_window, budget=self.compact_budget_tokens,
                      summary=self.compact_summary, summary_tokens=self.compact_summary_tokens)
        if self.history != "append" and self.use_vllm and self.vllm_importance_sampling_correction:
            raise ValueError(f"history {self.history} with use_vllm: set vllm_importance_sampling_correction=False "
                             "(turngym's tis_cap corrects the per-turn samples instead)")

    def history_options(self) -> dict[str, Any]:
        """The agent's history fields (``LLMAgentConfig``'s names), for rollouts and held-out evaluation."""
        return {name: getattr(self, name)
                for name in ("history", "compact_budget_tokens", "compact_summary", "compact_summary_tokens")}

    def _validate_harness(self) -> None:
        """A harness's calls train per turn, in one world, on-policy, sampled by turngym's backend."""
        self.validate_harness()
        if self.harness is None:
            return
        excluded = {"several worlds": bool(self.worlds), "max_staleness > 0": self.max_staleness > 0,
                    "use_vllm (TRL's engine; give the study's vLLM backend instead)": self.use_vllm}
        named = [name for name, on in excluded.items() if on]
        if named:
            raise ValueError(f"harness does not work with {', '.join(named)}")

    @property
    def per_turn_layout(self) -> bool:
        """Each turn trains as its own sample on its own context (a history window, or a harness's calls)."""
        return self.history_window is not None or self.harness is not None

    def _validate_pipeline(self) -> None:
        """max_staleness > 0 plays rollouts ahead in a thread (HF or vLLM, one process or several): a sampler whose
        draws are known ahead (no curriculum), one world, and TIS on (stale tokens need their correction)."""
        if self.max_staleness < 0:
            raise ValueError(f"max_staleness must be >= 0 (0: on-policy), got {self.max_staleness}")
        if self.max_staleness == 0:
            if self.partial_rollouts:
                raise ValueError("partial_rollouts needs max_staleness >= 1 (0 never updates weights mid-rollout)")
            return
        excluded = {  # each with why, in one line
            "curriculum": (self.curriculum != "off", "its draws depend on results not in yet"),
            "several worlds": (bool(self.worlds), "the read-ahead of their weighted task sampler is untested"),
            "tis_cap None": (self.tis_cap is None, "stale tokens need TIS's correction"),
        }
        named = [f"{name} ({why})" for name, (on, why) in excluded.items() if on]
        if named:
            raise ValueError(f"max_staleness > 0 does not work with {', '.join(named)}: set max_staleness 0, or "
                             "change them")

    def resolve(self) -> TurnGymConfig:
        """Imports and registry lookups, in that order (once; returns ``self``). Construction does none of it:
        the trainer, ``turngym train`` and the study call it before use, and :attr:`estimator` when it is read.

        ``imports`` (one may register the world or the estimator); ``env_id`` registered and its options
        accepted, the reply format filled in; ``algorithm`` a registered estimator, with the options that need or
        exclude a critic agreeing with it; each entry of ``worlds``; the curriculum built once (its settings
        checked).
        """
        if getattr(self, "_resolved", False):
            return self
        self._resolve_world()
        self._resolve_algorithm()
        parse_worlds(self)
        if self.curriculum == "success":
            from turngym.trainers.curriculum import SuccessCurriculum

            SuccessCurriculum(0, target=self.curriculum_target, floor=self.curriculum_floor)  # checks both
        if self.per_turn_layout and get_estimator(self.algorithm).needs_tokens:
            cause = "history_window" if self.history_window is not None else "a harness"
            raise ValueError(f"{cause} trains each turn as its own sample; {self.algorithm} reads the whole "
                             "episode's tokens (its critic needs the episode as one sequence): use an algorithm "
                             "without a critic or no window")
        if self.history != "append" and get_estimator(self.algorithm).needs_tokens:
            raise ValueError(f"history {self.history} trains a rewritten turn as its own sample; {self.algorithm} "
                             "reads the whole episode's tokens (its critic): use an algorithm without a critic or "
                             "history append")
        self._resolved = True
        return self

    def options(self, group: type[G]) -> G:
        """The view of one group (``WorldOptions``, ``RolloutOptions``, ``EstimatorOptions``, ``CriticOptions``,
        ``LoraOptions``): a new instance with this config's values."""
        return group(**{f.name: getattr(self, f.name) for f in dataclass_fields(group)})

    @property
    def world_options(self) -> WorldOptions:
        return self.options(WorldOptions)

    @property
    def rollout_options(self) -> RolloutOptions:
        return self.options(RolloutOptions)

    @property
    def estimator_options(self) -> EstimatorOptions:
        return self.options(EstimatorOptions)

    @property
    def estimator(self) -> Estimator:
        """The registered estimator ``algorithm`` names (:mod:`turngym.trainers.estimators`); resolves the config
        first (``imports`` may register it)."""
        return get_estimator(self.resolve().algorithm)

    def _resolve_algorithm(self) -> None:
        """``algorithm`` is registered (an error lists the choices), and the options that need or exclude a
        critic agree with it."""
        self.algorithm = resolve_algorithm(self.algorithm)
        with_critic = [name for name in estimator_names() if get_estimator(name).needs_values]
        if get_estimator(self.algorithm).needs_values:
            if self.dynamic_sampling != "off":
                raise ValueError(f"dynamic_sampling drops groups with all-zero advantages: it is for the group-based "
                                 f"algorithms, not {self.algorithm} (with a critic), whose GAE advantages are never "
                                 "all 0")
            return
        if self.kl_penalty == "reward":
            raise ValueError("kl_penalty='reward' needs per-token rewards: it is for an algorithm with a critic "
                             f"({', '.join(with_critic)}), not {self.algorithm}")
        if self.critic_warmup_steps:
            raise ValueError(f"critic_warmup_steps trains the critic: it is for an algorithm with one "
                             f"({', '.join(with_critic)}), not {self.algorithm}")


def lora_config(args: TurnGymConfig) -> Any:
    """The ``peft.LoraConfig`` of ``args``'s LoRA fields (TRL's ModelConfig names), through TRL's own
    ``get_peft_config``; None when ``use_peft`` is off."""
    if not args.use_peft:
        return None
    from trl import ModelConfig, get_peft_config

    return get_peft_config(ModelConfig(
        use_peft=True, lora_r=args.lora_r, lora_alpha=args.lora_alpha, lora_dropout=args.lora_dropout,
        lora_target_modules=args.lora_target_modules, lora_modules_to_save=args.lora_modules_to_save))


def parse_component_weights(value: dict[str, float] | str | None) -> dict[str, float] | None:
    """``component_weights`` as {component: finite weight}: a mapping, or its JSON (the command line's)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            raise ValueError(f'component_weights must be a JSON object such as {{"outcome": 1, "judge": 0.5}}, got '
                             f"{value!r} ({error})") from None
    if not isinstance(value, dict) or not value or not all(
            isinstance(k, str) and isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w)
            for k, w in value.items()):
        raise ValueError(f"component_weights must map component names to finite numbers, got {value!r}")
    return {k: float(w) for k, w in value.items()}
