"""One place builds a run: everything it needs besides TRL's trainer, from its config, before TRL's init.

:func:`assemble` reads a :class:`~turngym.trainers.config.TurnGymConfig` (and what the caller passes instead of
its defaults) and returns a :class:`Run`, in this order:

1. the policy and its tokenizer (loaded from a name, after an SFT warm start when ``sft_demos`` is set);
2. the worlds, each with its training tasks and held-out panel;
3. the LoRA config, and with it a value model for a critic, copied from the policy before TRL's adapters go in;
4. the rollout runner (:class:`~turngym.trainers.rollout.EpisodeRunner`) and the task keys TRL's dataset holds;
5. the curriculum and the task sampler (world weights, curriculum; None: TRL's own sampler).

:class:`~turngym.trainers.trainer.TurnGymTrainer` hands TRL the parts TRL takes (model, tokenizer, datasets, LoRA
config), then builds from the :class:`Run` what needs TRL's prepared model: the critic (:meth:`Run.critic`) and
the pipelined rollouts (:meth:`Run.pipeline`). The generation backend of the rollouts is ``backend`` (default: the
trained model itself, Hugging Face generation), or TRL's vLLM engine, which only exists after TRL's init
(:func:`~turngym.trainers.vllm_colocate.trl_vllm_sampler`); a sampler with weights of its own gets the trainer's
through a :class:`~turngym.agents.generation.WeightPublisher`. Nothing here imports TRL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from datasets import Dataset

from turngym.envs.tasks import TaskSet
from turngym.trainers.config import TurnGymConfig, lora_config
from turngym.trainers.critic import Critic, NoCritic, build_critic, value_model
from turngym.trainers.curriculum import SuccessCurriculum, TaskSampler, task_sampler
from turngym.trainers.harness import HarnessRunner
from turngym.trainers.pipeline import RolloutPipeline, VersionedPolicy, rollout_pipeline
from turngym.trainers.rollout import BackendFactory, EpisodeRunner
from turngym.trainers.sft import starting_policy
from turngym.trainers.worlds import World, given_tasks, parse_worlds, world_eval_tasks, world_train_tasks


@dataclass
class Run:
    """What a run is made of besides TRL's trainer (built by :func:`assemble`)."""

    args: TurnGymConfig
    model: Any  # the policy RL starts from
    tokenizer: Any
    worlds: list[World]  # each with its train_tasks and eval_tasks
    runner: EpisodeRunner | HarnessRunner  # plays the training episodes by task key
    keys: list[str]  # TRL's training prompts: task ids (one world) or world::task id keys, world after world
    curriculum: SuccessCurriculum | None
    task_sampler: TaskSampler | None  # None: TRL's RepeatSampler (each task once per epoch)
    peft_config: Any  # LoRA (None: full fine-tuning)
    value_model: Any  # a Critic, a value model for the default TokenCritic, or None (a copy of the policy's)
    backend: BackendFactory | None  # the caller's generation backend (None: Hugging Face, or TRL's vLLM engine)

    @property
    def estimator(self) -> Any:
        """The estimator ``algorithm`` names (its declared level and inputs are what the trainer acts on)."""
        return self.args.estimator

    @property
    def task_index(self) -> dict[str, int]:
        """Each task key's position in TRL's dataset (the curriculum's and the sampler's index)."""
        return {key: index for index, key in enumerate(self.keys)}

    @property
    def eval_tasks(self) -> TaskSet | None:
        """The held-out panel of a run with one world (with several, each world's ``eval_tasks``)."""
        return self.worlds[0].eval_tasks if len(self.worlds) == 1 else None

    def datasets(self) -> tuple[Dataset, Dataset | None]:
        """TRL's training and evaluation datasets: task keys as prompts (no held-out panel: no evaluation set)."""
        qualified = len(self.worlds) > 1
        held_out = [w.key(t.id, qualified=qualified) for w in self.worlds for t in (w.eval_tasks or ())]
        return (Dataset.from_dict({"prompt": self.keys}),
                Dataset.from_dict({"prompt": held_out}) if held_out else None)

    def critic(self, model: Any, processes: Any) -> Critic | NoCritic:
        """The run's critic on TRL's prepared ``model`` (:func:`~turngym.trainers.critic.build_critic`: NoCritic,
        every call a no-op, when the estimator needs no values)."""
        return build_critic(self.estimator.needs_values, model, self.args.critic_config, processes, self.value_model)

    def pipeline(self, model: Any, sampler: Any, *, backend: BackendFactory | None = None,
                 policy: VersionedPolicy | None = None) -> RolloutPipeline | None:
        """With ``max_staleness`` K > 0, the next K steps' rollouts play in a thread, in the task order ``sampler``
        (the trainer's) draws: on a copy of ``model``, or with ``backend`` (a factory) and ``policy`` (its
        versioned weights: TRL's vLLM engine, :func:`~turngym.trainers.vllm_colocate.pipelined_vllm`); None with
        K = 0."""
        if not self.args.max_staleness:
            return None
        return rollout_pipeline(self.args, self.worlds, self.tokenizer, backend or self.backend, model, sampler,
                                self.keys, policy=policy)


def assemble(args: TurnGymConfig | None, model: Any = None, *, tasks: TaskSet | dict[str, TaskSet] | None = None,
             eval_tasks: TaskSet | dict[str, TaskSet] | None = None, tokenizer: Any = None, critic: Any = None,
             backend: BackendFactory | None = None, peft_config: Any = None) -> Run:
    """Build a run from ``args`` before TRL's init (see the module docstring); the arguments are
    :class:`~turngym.trainers.trainer.TurnGymTrainer`'s (``tokenizer`` its ``processing_class``)."""
    if args is None:
        raise ValueError("TurnGymTrainer needs args=TurnGymConfig(...)")
    args.resolve()  # imports, registry lookups, the curriculum's check (construction does none of them)
    if model is None or isinstance(model, str):
        model, loaded = starting_policy(args, model)
        tokenizer = tokenizer or loaded
    elif args.sft_demos:
        raise ValueError("sft_demos warm-starts the policy from its name or folder: pass model= as a string")
    if tokenizer is None:
        raise ValueError("pass processing_class= (the policy's tokenizer) with a model object")
    worlds = parse_worlds(args)
    for world, given, held in zip(worlds, given_tasks(worlds, tasks, "tasks"),
                                  given_tasks(worlds, eval_tasks, "eval_tasks"), strict=True):
        world.train_tasks = given if given is not None else world_train_tasks(world)
        world.eval_tasks = held if held is not None else world_eval_tasks(world)
    if peft_config is None:
        peft_config = lora_config(args)
    if peft_config is not None and args.estimator.needs_values and critic is None:
        # The critic stays a full model: copied from the policy before TRL injects the adapters into it.
        critic = value_model(model, args.critic_config.model_name_or_path)
    runner = HarnessRunner(args, worlds, tokenizer, backend) if args.harness else EpisodeRunner(args, worlds, tokenizer,
                                                                                               backend)
    keys = list(runner.tasks)
    curriculum = (SuccessCurriculum(len(keys), target=args.curriculum_target, floor=args.curriculum_floor)
                  if args.curriculum == "success" else None)
    weighted = len(worlds) > 1 and all(w.weight is not None for w in worlds)
    names = [w.name for w in worlds]
    sampler = task_sampler([names.index(runner.world_of[key].name) for key in keys],
                           [w.weight for w in worlds] if weighted else None, curriculum, group=args.num_generations,
                           generation_batch=args.generation_batch_size, seed=args.seed,
                           repeat=args.num_iterations * args.steps_per_generation)
    return Run(args, model, tokenizer, worlds, runner, keys, curriculum, sampler, peft_config, critic, backend)
