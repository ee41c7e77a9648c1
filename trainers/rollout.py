"""The trainer's rollouts: the one rollout loop (``turngym.agents.rollout``), played by the policy in training.

Each training step plays one episode per entry of TRL's prompt list (a task id, repeated
``num_generations`` times in a row, so a group is consecutive) with an :class:`~turngym.agents.llm.LLMAgent`
whose backend generates with the current weights. Episodes keep the exact sampled ids; nothing
is re-tokenised between rollout and loss.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from turngym.agents.backends import HFBackend, TokenBackend
from turngym.agents.base import stable_seed
from turngym.agents.evaluate import EvalReport, evaluate
from turngym.agents.llm import LLMAgent, LLMAgentConfig
from turngym.agents.rollout import Trajectory, run_episodes
from turngym.envs.tasks import TaskSet
from turngym.envs.vector import EnvPool, LocalPool, make_pool
from turngym.trainers.config import TurnGymConfig, WorldOptions
from turngym.trainers.episodes import Episode

# Truncations after which the world's state is still good to bootstrap from (PPO's critic).
BOOTSTRAP_REASONS = ("max_turns", "time_limit")

BackendFactory = Callable[[Any], TokenBackend]  # (model to generate with) -> backend


class EpisodeRunner:
    """Plays training episodes by task id and returns :class:`Episode` records in order.

    Args:
        args: the run's config (world, sampling, caps).
        tasks: the tasks the prompts name.
        tokenizer: the policy's tokenizer (its chat template renders prompts and env turns).
        backend: builds the generation backend from the model to sample with; default: batched
            Hugging Face generation on that model (:class:`~turngym.agents.backends.HFBackend`).
    """

    def __init__(self, args: TurnGymConfig, tasks: TaskSet, tokenizer: Any,
                 backend: BackendFactory | None = None) -> None:
        self.args = args
        self.tasks = {task.id: task for task in tasks}
        self.tokenizer = tokenizer
        self.backend = backend or (lambda model: HFBackend(model, pad_id=tokenizer.pad_token_id))
        self._pool: EnvPool | LocalPool | None = None

    def play(self, task_ids: Sequence[str], model: Any, *, seed: int, first_episode: int = 0,
             progress: bool | str = False) -> tuple[list[Trajectory], list[Episode]]:
        """One episode per task id; sampling seeds derive from ``seed`` and the episode number."""
        unknown = sorted({t for t in task_ids if t not in self.tasks})
        if unknown:
            raise KeyError(f"the trainer's dataset names tasks it was not given: {unknown[:5]}")
        agent = LLMAgent(self.backend(model), self.tokenizer, self._agent_config(model, seed))
        pool = self._pool_for(len(task_ids))
        trajectories = run_episodes(agent, pool, [self.tasks[t] for t in task_ids], seed=self.args.seed,
                                    first_episode=first_episode, progress=progress)
        episodes = [self._episode(agent, trajectory) for trajectory in trajectories]
        return trajectories, episodes

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    # ------------------------------------------------------------------ helpers
    def _agent_config(self, model: Any, seed: int) -> LLMAgentConfig:
        args = self.args
        positions = getattr(getattr(model, "config", None), "max_position_embeddings", None) or 4096
        return args.agent_config(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k or 0,
                            max_completion_tokens=args.max_completion_length, max_context_tokens=positions, seed=seed)

    def _pool_for(self, size: int) -> EnvPool | LocalPool:
        """One environment per episode (in this process), so the whole batch generates in lockstep."""
        if self._pool is None or self._pool.num_envs != min(size, self.args.num_env_workers or size):
            self.close()
            self._pool = policy_pool(self.args, size)
        return self._pool

    def _episode(self, agent: LLMAgent, trajectory: Trajectory) -> Episode:
        episode = Episode.from_trajectory(trajectory)
        if (self.args.algorithm == "ppo" and self.args.bootstrap_truncated
                and trajectory.truncation_reason in BOOTSTRAP_REASONS):
            # The critic bootstraps from the state after the last turn: append the final observation
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
    """``size`` environments of the run's world: ``num_env_workers`` processes, or in this process."""
    kwargs = {**options.world_kwargs(), **({"tasks": tasks} if tasks is not None else {})}
    return make_pool(options.env_id, size, env_kwargs=kwargs, num_workers=options.num_env_workers or 0)


def evaluate_policy(model: Any, tokenizer: Any, options: WorldOptions, tasks: TaskSet, *, temperature: float = 0.0,
                    seed: int = 0, batch: int = 16, name: str = "policy", progress: bool | str = True) -> EvalReport:
    """Play every task once with ``model`` in the run's chat format, through the one evaluation
    entry point (:func:`turngym.agents.evaluate.evaluate`); ``report.trajectories`` holds the episodes.

    Greedy by default. Without env workers, up to ``batch`` episodes run side by side in this
    process, so each turn is one batched forward pass. The model's train/eval mode is restored.
    """
    was_training = model.training
    agent = LLMAgent(HFBackend(model, pad_id=tokenizer.pad_token_id or 0), tokenizer,
                     options.agent_config(temperature=temperature), name=name)
    try:
        return evaluate(agent, options.env_id, tasks, env_kwargs=options.world_kwargs(), seed=seed,
                        num_workers=options.num_env_workers or 0, batch=batch,
                        progress=f"eval {name}" if progress is True else progress)
    finally:
        model.train(was_training)
