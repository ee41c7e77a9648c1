"""The trainer's rollouts: the one rollout loop (``turngym.agents.rollout``), played by the policy in training.

Each training step plays one episode per entry of TRL's prompt list (a task key, repeated
``num_generations`` times in a row, so a group is consecutive) with an :class:`~turngym.agents.llm.LLMAgent`
whose backend generates with the current weights. Episodes keep the exact sampled ids; nothing
is re-tokenised between rollout and loss. With several worlds (``TurnGymConfig.worlds``) each world's
episodes play in its own pool with its own chat format, one world after the other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from turngym.agents.backends import HFBackend, TokenBackend
from turngym.agents.base import stable_seed
from turngym.agents.evaluate import EvalReport, evaluate
from turngym.agents.llm import LLMAgent, LLMAgentConfig
from turngym.agents.rollout import TIME_LIMIT_REASONS, Trajectory, run_episodes
from turngym.envs.tasks import TaskSet
from turngym.envs.vector import EnvPool, LocalPool, make_pool
from turngym.trainers.config import TurnGymConfig, WorldOptions
from turngym.trainers.episodes import Episode
from turngym.trainers.worlds import World, world_name

BackendFactory = Callable[[Any], TokenBackend]  # (model to generate with) -> backend


class EpisodeRunner:
    """Plays training episodes by task key and returns :class:`Episode` records in order.

    Args:
        args: the run's config (world, sampling, caps).
        tasks: the tasks the prompts name: a TaskSet of the run's one world (keys are task ids), or the
            run's :class:`~turngym.trainers.worlds.World` list, each with its ``train_tasks`` (keys are
            ``world::task id`` when there are several).
        tokenizer: the policy's tokenizer (its chat template renders prompts and env turns).
        backend: builds the generation backend from the model to sample with; default: batched
            Hugging Face generation on that model (:class:`~turngym.agents.backends.HFBackend`).
    """

    def __init__(self, args: TurnGymConfig, tasks: TaskSet | Sequence[World], tokenizer: Any,
                 backend: BackendFactory | None = None) -> None:
        self.args = args
        if isinstance(tasks, TaskSet):
            tasks = [World(world_name(args.env_id), args, train_tasks=tasks)]
        self.worlds = list(tasks)
        qualified = len(self.worlds) > 1
        self.tasks = {w.key(t.id, qualified=qualified): t for w in self.worlds for t in (w.train_tasks or ())}
        self.world_of = {w.key(t.id, qualified=qualified): w for w in self.worlds for t in (w.train_tasks or ())}
        self.tokenizer = tokenizer
        self.backend = backend or (lambda model: HFBackend(model, pad_id=tokenizer.pad_token_id))
        self._pools: dict[str, EnvPool | LocalPool] = {}

    def play(self, task_ids: Sequence[str], model: Any, *, seed: int, first_episode: int = 0,
             progress: bool | str = False) -> tuple[list[Trajectory], list[Episode]]:
        """One episode per task key, in order; sampling seeds derive from ``seed`` and the episode number
        (numbered from ``first_episode``, world after world)."""
        unknown = sorted({t for t in task_ids if t not in self.tasks})
        if unknown:
            raise KeyError(f"the trainer's dataset names tasks it was not given: {unknown[:5]}")
        trajectories: list[Trajectory | None] = [None] * len(task_ids)
        episodes: list[Episode | None] = [None] * len(task_ids)
        number = first_episode
        for world in self.worlds:
            positions = [i for i, key in enumerate(task_ids) if self.world_of[key] is world]
            if not positions:
                continue
            agent = LLMAgent(self.backend(model), self.tokenizer, self._agent_config(model, seed, world))
            played = run_episodes(agent, self._pool_for(len(positions), world),
                                  [self.tasks[task_ids[i]] for i in positions], seed=self.args.seed,
                                  first_episode=number, progress=progress,
                                  **world.options.schedule_kwargs())
            number += len(positions)
            for position, trajectory in zip(positions, played, strict=True):
                if len(self.worlds) > 1:
                    trajectory.task["world"] = world.name
                trajectories[position] = trajectory
                episodes[position] = self._episode(agent, trajectory, task_ids[position])
        return trajectories, episodes  # type: ignore[return-value] - every position is filled

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools = {}

    # ------------------------------------------------------------------ helpers
    def _agent_config(self, model: Any, seed: int, world: World | None = None) -> LLMAgentConfig:
        args, options = self.args, (world or self.worlds[0]).options
        positions = getattr(getattr(model, "config", None), "max_position_embeddings", None) or 4096
        return options.agent_config(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k or 0,
                                    max_completion_tokens=args.max_completion_length, max_context_tokens=positions,
                                    seed=seed, history_window=args.history_window, **args.history_options())

    def _pool_for(self, size: int, world: World | None = None) -> EnvPool | LocalPool:
        """One environment per episode (in this process), so the whole batch generates in lockstep."""
        world = world or self.worlds[0]
        pool = self._pools.get(world.name)
        if pool is None or pool.num_envs != min(size, world.options.num_env_workers or size):
            if pool is not None:
                pool.close()
            pool = self._pools[world.name] = policy_pool(world.options, size)
        return pool

    def _episode(self, agent: LLMAgent, trajectory: Trajectory, key: str | None = None) -> Episode:
        episode = Episode.from_trajectory(trajectory, key)
        if (self.args.estimator.needs_values and self.args.critic_config.bootstrap_truncated
                and trajectory.truncation_reason in TIME_LIMIT_REASONS):  # the world's state is still good
            # A value estimator bootstraps from the state after the last turn: append the final observation
            # (environment tokens, out of the loss) when it fits under the completion cap.
            delta = agent.chat.env_delta_ids(trajectory.observations[-1])
            cap = self.args.max_completion_length
            if cap is None or len(episode.completion_ids) + len(delta) <= cap:
                episode.tokens.add_env_turn(delta)
        episode.validate()
        return episode


def rollout_seed(base_seed: int, step: int) -> int:
    """The sampling seed of one training step (episodes then differ by their global number)."""
    return stable_seed(base_seed, "rollout", step) % 2**62


def policy_pool(options: WorldOptions, size: int, tasks: TaskSet | None = None) -> EnvPool | LocalPool:
    """``size`` environments of the run's world: ``num_env_workers`` processes, or in this process (or
    elsewhere: ``env_backend`` ray or remote)."""
    kwargs = {**options.world_kwargs(), **({"tasks": tasks} if tasks is not None else {})}
    return make_pool(options.env_id, size, env_kwargs=kwargs, num_workers=options.num_env_workers or 0,
                     **options.pool_options())


def evaluate_policy(model: Any, tokenizer: Any, options: WorldOptions, tasks: TaskSet, *, temperature: float = 0.0,
                    seed: int = 0, batch: int = 16, name: str = "policy", progress: bool | str = True,
                    samples_per_task: int = 1, pass_at: Sequence[int] | None = None,
                    history_window: int | None = None, backend: TokenBackend | None = None,
                    history: Mapping[str, Any] | None = None) -> EvalReport:
    """Play every task once (or ``samples_per_task`` times, for pass@k) with ``model`` in the run's chat format,
    through the one evaluation entry point (:func:`turngym.agents.evaluate.evaluate`); ``report.trajectories``
    holds the episodes. ``history_window``: the context the policy was trained with (default: ``options``'s, if
    it has one, else the whole episode); ``history``: the agent's history fields (``history``,
    ``compact_budget_tokens``...; default: ``options``'s, if it has them, else append-only).

    Greedy by default. Without env workers, up to ``batch`` episodes run side by side in this
    process, so each turn is one batched forward pass. The model's train/eval mode is restored. ``backend``: what
    generates (default: ``model`` itself, :class:`HFBackend`), e.g. a vLLM engine holding ``model``'s weights.
    """
    was_training = model.training
    window = history_window if history_window is not None else getattr(options, "history_window", None)
    if history is None:
        history = options.history_options() if hasattr(options, "history_options") else {}
    backend = backend if backend is not None else HFBackend(model, pad_id=tokenizer.pad_token_id or 0)
    agent = LLMAgent(backend, tokenizer,
                     options.agent_config(temperature=temperature, history_window=window, **history), name=name)
    try:
        return evaluate(agent, options.env_id, tasks, env_kwargs=options.world_kwargs(), seed=seed,
                        num_workers=options.num_env_workers or 0, batch=batch,
                        progress=f"eval {name}" if progress is True else progress,
                        samples_per_task=samples_per_task, pass_at=pass_at, pool_options=options.pool_options(),
                        **options.schedule_kwargs())
    finally:
        model.train(was_training)


def evaluate_worlds(model: Any, tokenizer: Any, panels: Sequence[tuple[World, TaskSet]], args: TurnGymConfig,
                    prefix: str, *, per_world: bool) -> dict[str, float]:
    """Every held-out panel played once (``eval_temperature``) with ``model``, each world in its own chat
    format: the pooled metrics, and with ``per_world`` each world's too (``<prefix>/success/<world>``...)."""
    from turngym.agents.evaluate import summarise
    from turngym.trainers.metrics import eval_metrics

    metrics: dict[str, float] = {}
    played: list[Trajectory] = []
    for world, tasks in panels:
        report = evaluate_policy(model, tokenizer, world.options, tasks, temperature=args.eval_temperature,
                                 seed=args.seed, history_window=args.history_window,
                                 history=args.history_options(),
                                 progress=f"held-out evaluation{f' ({world.name})' if len(panels) > 1 else ''}")
        played += report.trajectories
        if per_world:
            metrics.update(eval_metrics(report.overall, prefix, f"/{world.name}"))
    metrics.update(eval_metrics(summarise(played), prefix))  # every panel's episodes pooled
    return metrics
