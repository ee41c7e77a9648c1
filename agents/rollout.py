"""The one rollout loop: an agent plays many episodes over a pool of environments.

Every free worker starts the next task; the agent acts for the live episodes (in lockstep: all of them in one
call, one batched forward pass for an LLM; with continuous batching: each turn as soon as its world answers),
the live episodes step in parallel, finished ones are recorded and their workers take the next task.
Training, evaluation and the demo all use it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from turngym.agents.base import Agent, EndEpisode, stable_seed
from turngym.agents.records import AgentRecord, TokenRecord
from turngym.envs.tasks import Task
from turngym.envs.vector import Reply, StepResult

# Truncation reasons that are limits of the episode, not failures of the infrastructure.
LIMIT_REASONS = ("max_turns", "context_length", "time_limit")


class Pool(Protocol):
    """What the rollout needs of a pool: :class:`~turngym.envs.vector.EnvPool` or ``LocalPool``."""

    num_envs: int

    def send(self, index: int, kind: str, payload: Any) -> None: ...

    def receive(self, *, wait_all: bool = True, timeout: float | None = None) -> list[Reply]: ...


@dataclass
class Trajectory:
    """One finished episode: its text, its rewards and outcome, and the agent's ``record`` of it
    (an LLM agent's exact token ids, :class:`~turngym.agents.records.TokenRecord`)."""

    task: dict[str, Any]
    observations: list[str]  # the reset observation, then one per turn
    # The world's admissible commands at each observation (None where it has none): with the observation,
    # what identifies the state the agent acted in (GiGPO's anchor states, trainers/advantages.py).
    admissible_commands: list[list[str] | None] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    turn_rewards: list[float] = field(default_factory=list)
    invalid_actions: list[bool] = field(default_factory=list)
    won: bool = False
    terminated: bool = False
    truncated: bool = False
    truncation_reason: str | None = None
    action_protocol: str | None = None
    reward_mode: str | None = None
    max_turns: int | None = None
    optimal_length: int | None = None
    record: AgentRecord | None = None
    sample: int = 0  # the k-th play (from 0) of this task in its rollout: pass@k samples, a GRPO group

    @property
    def num_turns(self) -> int:
        return len(self.actions)

    @property
    def episode_reward(self) -> float:
        return float(sum(self.turn_rewards))

    @property
    def tokens(self) -> TokenRecord | None:
        """The exact token ids, when an LLM agent played the episode."""
        return self.record if isinstance(self.record, TokenRecord) else None

    @property
    def infrastructure_failure(self) -> bool:
        """Truncated by an engine or worker failure, not by a turn, time or context limit."""
        return self.truncation_reason not in (None, *LIMIT_REASONS)

    @property
    def outcome(self) -> str:
        """``won``; ``lost`` (ended by the world without a win); ``truncated`` (a turn, time or context limit);
        or ``failed`` (an infrastructure failure, not the agent's)."""
        if self.won:
            return "won"
        if self.truncated:
            return "failed" if self.infrastructure_failure else "truncated"
        return "lost"

    def to_dict(self, *, token_ids: bool = True) -> dict[str, Any]:
        """JSON-ready; ``token_ids=False`` keeps only the text of an LLM agent's record (its replies and
        parsed actions), not its token ids, logprobs and masks."""
        data = {**asdict(self), "episode_reward": self.episode_reward, "num_turns": self.num_turns,
                "outcome": self.outcome}
        if not token_ids and isinstance(self.record, TokenRecord):
            data["record"] = {key: data["record"][key] for key in TEXT_FIELDS}
        return data


# What ``Trajectory.to_dict(token_ids=False)`` keeps of a TokenRecord.
TEXT_FIELDS = ("replies", "actions", "forced_end_of_turn", "context_truncated")


def run_episodes(
    agent: Agent,
    pool: Pool,
    tasks: Sequence[Task],
    *,
    seed: int = 0,
    lockstep: bool | None = None,
    continuous: bool = False,
    batch_window: float = 0.0,
    progress: bool | str = False,
    first_episode: int = 0,
) -> list[Trajectory]:
    """Play one episode per task and return the trajectories in task order.

    How the agent's turns meet the worlds' steps (resets of finished workers always overlap with the other
    episodes' steps):

    * ``lockstep`` (default for a batched agent): wait for every in-flight reset and step, then ask the agent
      for all waiting episodes in one call (one batched forward pass for an LLM). Each turn waits for the
      slowest world, and the worlds wait while the model generates.
    * ``lockstep=False``: act on each answer as soon as it arrives, which keeps every worker busy (a
      per-episode agent: scripts, baselines).
    * ``continuous``: continuous batching, for an agent with ``submit``/``advance`` (the LLM agent,
      :mod:`turngym.agents.decoding`). A turn joins the model's running batch as soon as its world answers;
      a finished turn's action goes to its world at once, and the world steps (in its worker) while the model
      decodes the others. The pool is polled between decoding iterations. Same episodes as lockstep for the
      same seeds: each turn samples from its own generator.

      ``batch_window`` (seconds, continuous only): a turn whose world has answered waits up to this long for
      other worlds' answers, so they join the model together (fewer, larger generation calls: worth it when a
      call costs about the same at any batch size, as on a GPU); it never waits when no world is stepping.
      0 (the default): every answer joins at once.

    Reset seeds derive from ``seed`` and the task id, so the result does not depend on the
    number of workers or on scheduling. Episodes are numbered from ``first_episode`` (the agent
    seeds its sampling by episode number, so a trainer's processes number theirs globally).
    """
    from tqdm.auto import tqdm

    if batch_window < 0 or (batch_window and not continuous):
        raise ValueError(f"batch_window is for continuous batching and must be >= 0, got {batch_window}"
                         + ("" if continuous else " without continuous"))
    if continuous and not callable(getattr(agent, "submit", None)):
        raise ValueError(f"continuous batching needs an agent with submit()/advance() (the LLM agent); "
                         f"{type(agent).__name__} has none: use lockstep")
    lockstep = getattr(agent, "batched", True) if lockstep is None else lockstep
    pending = deque(zip(range(first_episode, first_episode + len(tasks)), tasks, _sample_numbers(tasks),
                        strict=True))
    free = deque(range(pool.num_envs))
    live: dict[int, tuple[int, Trajectory]] = {}  # worker -> (episode number, trajectory)
    worker_of: dict[int, int] = {}  # episode number -> worker
    actions: dict[int, str] = {}  # worker -> the action in flight
    done: dict[int, Trajectory] = {}
    stepping: set[int] = set()  # workers whose world has a reset or step in flight
    held: list[int] = []  # continuous: episodes whose world answered, waiting out the batching window
    held_since = 0.0
    description = progress if isinstance(progress, str) else f"{getattr(agent, 'name', 'agent')} episodes"
    bar = tqdm(total=len(tasks), desc=description, unit="ep", disable=not progress, leave=False)

    turns, shown_at = 0, [0.0]

    def show_turns() -> None:
        """Turns and sampled tokens on the bar (at most twice a second): it moves while a batch's episodes play."""
        if time.monotonic() - shown_at[0] < 0.5 and (pending or live):
            return
        shown_at[0] = time.monotonic()
        tokens = getattr(agent, "sampled_tokens", None)
        bar.set_postfix_str(f"turns {turns}" + (f", tokens {tokens:,}" if tokens is not None else ""), refresh=True)

    def finish(worker: int) -> None:
        episode, trajectory = live.pop(worker)
        del worker_of[episode]
        trajectory.record = agent.end(episode)
        done[episode] = trajectory
        free.append(worker)
        bar.update()

    def answered(reply: Reply) -> bool:
        """Record a world's answer; True when its episode goes on (the agent is to act)."""
        episode, trajectory = live[reply.index]
        if reply.kind == "reset":
            observation, info = reply.value
            _begin(trajectory, observation, info)
            agent.begin(episode, observation, {**info, "sample": trajectory.sample})
            return True
        nonlocal turns
        turns += 1
        step: StepResult = reply.value
        _record(trajectory, actions.pop(reply.index), step)
        agent.observe(episode, trajectory.actions[-1], step.observation, step.reward, step.info)
        if step.terminated or step.truncated:
            finish(reply.index)
            return False
        return True

    def dispatch(worker: int, action: str | EndEpisode) -> None:
        """Send the agent's action to its world, or end the episode the agent cannot go on with."""
        if isinstance(action, EndEpisode):  # the agent cannot go on (e.g. its context is full)
            trajectory = live[worker][1]
            trajectory.truncated, trajectory.terminated = True, False
            trajectory.truncation_reason = action.reason
            finish(worker)
            return
        actions[worker] = action
        send(worker, "step", action)

    def send(worker: int, kind: str, payload: Any) -> None:
        stepping.add(worker)
        pool.send(worker, kind, payload)

    def received(**kwargs: Any) -> list[Reply]:
        replies = pool.receive(**kwargs)
        stepping.difference_update(reply.index for reply in replies)
        return replies

    def receive_timeout() -> float | None:
        """Continuous: poll while the model decodes; wait out what is left of a held turn's window; else block
        for the next answer."""
        if agent.decoding:
            return 0.0
        if held:
            return max(0.0, held_since + batch_window - time.monotonic())
        return None

    try:
        while pending or live:
            while pending and free:
                worker, (episode, task, sample) = free.popleft(), pending.popleft()
                live[worker], worker_of[episode] = (episode, Trajectory(task=task.info(), observations=[],
                                                                        sample=sample)), worker
                send(worker, "reset", {"seed": stable_seed(seed, task.id) % 2**31, "options": {"task": task}})
            if continuous:
                replies = received(wait_all=False, timeout=receive_timeout())
                if not held:
                    held_since = time.monotonic()
                held += [live[r.index][0] for r in replies if answered(r)]
                window_open = stepping and time.monotonic() < held_since + batch_window
                ready, held = ([], held) if window_open else (held, [])
                for episode, action in agent.submit(ready) + agent.advance():
                    dispatch(worker_of[episode], action)
                if progress and replies:
                    show_turns()
                continue
            to_act = [reply.index for reply in received(wait_all=lockstep) if answered(reply)]
            if to_act:
                for worker, action in zip(to_act, agent.act([live[w][0] for w in to_act]), strict=True):
                    dispatch(worker, action)
            if progress:
                show_turns()
    finally:
        bar.close()
    return [done[first_episode + i] for i in range(len(tasks))]


def _sample_numbers(tasks: Sequence[Task]) -> list[int]:
    """For each position, how many earlier positions hold the same task: 0, 1, 2... per task."""
    seen: dict[str, int] = {}
    numbers = []
    for task in tasks:
        numbers.append(seen.get(task.id, 0))
        seen[task.id] = numbers[-1] + 1
    return numbers


def _begin(trajectory: Trajectory, observation: str, info: dict[str, Any]) -> None:
    trajectory.task = dict(info.get("task") or trajectory.task)
    trajectory.observations.append(observation)
    trajectory.admissible_commands.append(_commands(info))
    trajectory.action_protocol = info.get("action_protocol")
    trajectory.reward_mode = info.get("reward_mode")
    trajectory.max_turns = info.get("max_turns")
    trajectory.optimal_length = info.get("optimal_length")


def _record(trajectory: Trajectory, action: str, step: StepResult) -> None:
    trajectory.actions.append(action)
    trajectory.observations.append(step.observation)
    trajectory.admissible_commands.append(_commands(step.info))
    trajectory.turn_rewards.append(float(step.reward))
    trajectory.invalid_actions.append(bool(step.info.get("invalid_action")))
    trajectory.won = bool(step.info.get("won"))
    trajectory.terminated, trajectory.truncated = bool(step.terminated), bool(step.truncated)
    trajectory.truncation_reason = step.info.get("truncation_reason")


def _commands(info: dict[str, Any]) -> list[str] | None:
    commands = info.get("admissible_commands")
    return list(commands) if commands is not None else None
