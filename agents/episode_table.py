"""What an episode is, whatever the schedule: its :class:`Trajectory`, and the :class:`EpisodeTable` of a rollout.

The table holds the episodes of one rollout and the worlds they play on: a free world starts the next task, each
answer of a world is recorded on its trajectory and handed to the agent, an action goes to its world, and a
finished episode keeps the agent's record and frees its world. When the turns run is a schedule's business
(:mod:`turngym.agents.schedules`); :func:`turngym.agents.rollout.run_episodes` puts the two together.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from types import TracebackType
from typing import Any, Protocol, Self

from turngym.agents.base import Agent, EndEpisode, stable_seed
from turngym.agents.records import AgentRecord, TokenRecord
from turngym.envs.pools import Call
from turngym.envs.tasks import Task
from turngym.envs.vector import Reply, StepResult

# Truncations by the episode's own turn or time budget: the world's state is still good (PPO bootstraps from it).
# "wall_clock" is the SWE world's (its limit from reset); "time_limit" a remote server's.
TIME_LIMIT_REASONS = ("max_turns", "time_limit", "wall_clock")
# Truncation reasons that are limits of the episode, not failures of the infrastructure: the budgets above, the
# model's context, and a sandbox's memory limit that the agent's own command ran into ("oom_killed").
LIMIT_REASONS = (*TIME_LIMIT_REASONS, "context_length", "oom_killed")


class Pool(Protocol):
    """What the rollout needs of a pool (:class:`~turngym.envs.pools.DeadlinePool`'s, ``LocalPool``'s): a typed
    :class:`~turngym.envs.pools.Call` starts on one world, ``receive`` collects the answers."""

    num_envs: int

    def send(self, index: int, call: Call, /) -> None: ...

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
    # The world's info["reward_components"], each summed over the episode's turns (finite numbers only): what
    # GDPO combines (trainers/advantages.component_grpo); a failed judgement shows as judge_failed = 1.
    reward_components: dict[str, float] = field(default_factory=dict)

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


@dataclass
class LiveEpisode:
    """An episode being played: its number (the agent's name for it), its trajectory so far, and the action its
    world is stepping."""

    number: int
    trajectory: Trajectory
    action: str | None = None


class EpisodeTable:
    """The episodes of one rollout and the worlds they play on, whatever the schedule.

    ``pending``: (number, task, sample) not started yet, in order; ``free``: worlds with no episode; ``live``:
    world -> the episode it plays; ``done``: number -> finished trajectory. A schedule calls :meth:`begin` (the
    free worlds reset for the next tasks), :meth:`receive` (the worlds' answers, recorded), :meth:`act` (an action
    goes to its world); :meth:`record` and :meth:`finish` keep what an episode is.
    """

    def __init__(self, agent: Agent, pool: Pool, tasks: Sequence[Task], *, seed: int = 0, first_episode: int = 0,
                 progress: bool | str = False) -> None:
        from tqdm.auto import tqdm

        self.agent, self.pool, self.seed = agent, pool, seed
        self.numbers = range(first_episode, first_episode + len(tasks))
        self.pending = deque(zip(self.numbers, tasks, _sample_numbers(tasks), strict=True))
        self.free = deque(range(pool.num_envs))
        self.live: dict[int, LiveEpisode] = {}  # world -> its episode
        self.world_of: dict[int, int] = {}  # episode number -> its world
        self.done: dict[int, Trajectory] = {}
        self.stepping: set[int] = set()  # worlds with a reset or step in flight
        self.turns = 0
        description = progress if isinstance(progress, str) else f"{agent.name} episodes"
        self.bar = tqdm(total=len(tasks), desc=description, unit="ep", disable=not progress, leave=False)
        self.shown_at = 0.0

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.bar.close()

    @property
    def playing(self) -> bool:
        """Tasks wait or episodes play."""
        return bool(self.pending or self.live)

    def trajectories(self) -> list[Trajectory]:
        """The finished episodes in task order."""
        return [self.done[number] for number in self.numbers]

    def begin(self) -> None:
        """Every free world starts the next task (its reset seeded by the rollout's seed and the task id)."""
        while self.pending and self.free:
            world, (number, task, sample) = self.free.popleft(), self.pending.popleft()
            self.live[world] = LiveEpisode(number, Trajectory(task=task.info(), observations=[], sample=sample))
            self.world_of[number] = world
            reset = {"seed": stable_seed(self.seed, task.id) % 2**31, "options": {"task": task}}
            self.send(world, Call("reset", reset))

    def receive(self, *, wait_all: bool = True, timeout: float | None = None) -> list[int]:
        """Record the worlds' answers (:meth:`Pool.receive`'s); the episodes whose agent is to act, in answer order."""
        replies = self.pool.receive(wait_all=wait_all, timeout=timeout)
        self.stepping.difference_update(reply.index for reply in replies)
        to_act = [self.live[reply.index].number for reply in replies if self.record(reply)]
        if replies:
            self.show_turns()
        return to_act

    def record(self, reply: Reply) -> bool:
        """One world's answer, on its trajectory and to the agent; True when the episode goes on (the agent acts)."""
        live = self.live[reply.index]
        if reply.kind == "reset":
            observation, info = reply.value
            _begin(live.trajectory, observation, info)
            self.agent.begin(live.number, observation, {**info, "sample": live.trajectory.sample})
            return True
        self.turns += 1
        step: StepResult = reply.value
        action, live.action = live.action, None
        _record(live.trajectory, action, step)
        self.agent.observe(live.number, action, step.observation, step.reward, step.info)
        if step.terminated or step.truncated:
            self.finish(reply.index)
            return False
        return True

    def act(self, episode: int, action: str | EndEpisode) -> None:
        """Send the agent's action to the episode's world, or end the episode the agent cannot go on with."""
        world = self.world_of[episode]
        if isinstance(action, EndEpisode):  # the agent cannot go on (e.g. its context is full)
            trajectory = self.live[world].trajectory
            trajectory.truncated, trajectory.terminated = True, False
            trajectory.truncation_reason = action.reason
            self.finish(world)
            return
        self.live[world].action = action
        self.send(world, Call("step", action))

    def finish(self, world: int) -> None:
        """The episode on ``world`` is over: its trajectory keeps the agent's record, and the world is free."""
        live = self.live.pop(world)
        del self.world_of[live.number]
        live.trajectory.record = self.agent.end(live.number)
        self.done[live.number] = live.trajectory
        self.free.append(world)
        self.bar.update()

    def send(self, world: int, call: Call) -> None:
        self.stepping.add(world)
        self.pool.send(world, call)

    def show_turns(self) -> None:
        """Turns and sampled tokens on the bar (at most twice a second): it moves while a batch's episodes play."""
        if self.bar.disable or (time.monotonic() - self.shown_at < 0.5 and self.playing):
            return
        self.shown_at = time.monotonic()
        tokens = self.agent.sampled_tokens
        self.bar.set_postfix_str(f"turns {self.turns}" + (f", tokens {tokens:,}" if tokens is not None else ""),
                                 refresh=True)


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
    components = step.info.get("reward_components")
    for name, value in (components.items() if isinstance(components, dict) else ()):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            trajectory.reward_components[str(name)] = trajectory.reward_components.get(str(name), 0.0) + float(value)


def _commands(info: dict[str, Any]) -> list[str] | None:
    commands = info.get("admissible_commands")
    return list(commands) if commands is not None else None
