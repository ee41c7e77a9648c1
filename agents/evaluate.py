"""Evaluation on held-out tasks: success with a 95 % confidence interval, per episode.

Every number is computed per *episode* (a truncated episode counts as not won; infrastructure
failures are counted separately so they are never silently read as agent failures). The report
records the task panel's fingerprint and the action protocol, since anchors disagree mostly
because of those two.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from turngym.agents.base import Agent
from turngym.agents.rollout import Trajectory, run_episodes
from turngym.envs.tasks import TaskSet
from turngym.envs.vector import make_pool


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion p = k / n:

        centre = (p + z^2 / 2n) / (1 + z^2 / n)
        half   = z * sqrt(p (1 - p) / n + z^2 / 4n^2) / (1 + z^2 / n)

    Unlike the normal approximation it stays inside [0, 1] and is sensible at k = 0 or k = n.
    """
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class Summary:
    episodes: int
    success_rate: float
    success_ci95: tuple[float, float]
    mean_return: float
    mean_turns: float
    invalid_action_rate: float  # invalid turns / all turns
    truncation_rate: float
    infrastructure_failures: int


def summarise(trajectories: Sequence[Trajectory]) -> Summary:
    n = len(trajectories)
    wins = sum(t.won for t in trajectories)
    turns = sum(t.num_turns for t in trajectories)
    return Summary(
        episodes=n,
        success_rate=wins / n if n else 0.0,
        success_ci95=wilson_interval(wins, n),
        mean_return=sum(t.episode_reward for t in trajectories) / n if n else 0.0,
        mean_turns=turns / n if n else 0.0,
        invalid_action_rate=sum(sum(t.invalid_actions) for t in trajectories) / turns if turns else 0.0,
        truncation_rate=sum(t.truncated for t in trajectories) / n if n else 0.0,
        infrastructure_failures=sum(t.infrastructure_failure for t in trajectories),
    )


@dataclass
class EvalReport:
    agent: str
    env_id: str
    env_kwargs: dict[str, Any]
    taskset: str
    taskset_fingerprint: str
    action_protocol: str | None
    seed: int
    overall: Summary
    by_difficulty: dict[str, Summary] = field(default_factory=dict)
    # The episodes the numbers summarise, in task order (not serialised: write_trajectories does that).
    trajectories: list[Trajectory] = field(default_factory=list, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "trajectories"}


def report_from(agent_name: str, env_id: str, env_kwargs: Mapping[str, Any], tasks: TaskSet, seed: int,
                trajectories: Sequence[Trajectory]) -> EvalReport:
    groups: dict[str, list[Trajectory]] = defaultdict(list)
    for trajectory in trajectories:
        groups[str(trajectory.task.get("difficulty"))].append(trajectory)
    protocols = {t.action_protocol for t in trajectories}
    return EvalReport(
        agent=agent_name,
        env_id=env_id,
        env_kwargs={k: v for k, v in env_kwargs.items() if k != "tasks"},
        taskset=tasks.name,
        taskset_fingerprint=tasks.fingerprint,
        action_protocol=protocols.pop() if len(protocols) == 1 else ",".join(sorted(map(str, protocols))),
        seed=seed,
        overall=summarise(trajectories),
        by_difficulty={k: summarise(v) for k, v in sorted(groups.items())},
        trajectories=list(trajectories),
    )


def evaluate(
    agent: Agent,
    env_id: str,
    tasks: TaskSet,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    num_workers: int = 0,
    batch: int = 1,
    seed: int = 0,
    trajectories_path: str | Path | None = None,
    progress: bool | str = True,
) -> EvalReport:
    """Play every task of ``tasks`` once with ``agent`` and summarise; the one evaluation entry point.

    ``num_workers > 0`` plays in that many worker processes (:class:`~turngym.envs.vector.EnvPool`);
    with 0, ``batch`` episodes play side by side in this process, which an LLM agent answers with
    one batched forward pass per turn. The same seed gives the same result whatever the number of
    workers. ``report.trajectories`` holds the episodes.
    """
    kwargs = dict(env_kwargs or {})
    kwargs.setdefault("tasks", tasks)
    size = min(num_workers or max(batch, 1), max(len(tasks), 1))
    pool = make_pool(env_id, size, env_kwargs=kwargs, num_workers=num_workers)
    label = progress if isinstance(progress, str) else (f"eval {agent.name}" if progress else False)
    try:
        trajectories = run_episodes(agent, pool, list(tasks), seed=seed, progress=label)
    finally:
        pool.close()
    if trajectories_path is not None:
        write_trajectories(trajectories, trajectories_path)
    return report_from(agent.name, env_id, kwargs, tasks, seed, trajectories)


def write_trajectories(trajectories: Sequence[Trajectory], path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        for trajectory in trajectories:
            handle.write(json.dumps(trajectory.to_dict()) + "\n")


def markdown_table(reports: Sequence[EvalReport], *, breakdown: bool = True) -> str:
    """A markdown table of reports: one row per agent (and per difficulty when there are several)."""
    header = ("| agent | protocol | tasks | episodes | success (95 % CI) | return | turns | invalid actions "
              "| truncated |")
    lines = [header, "|---|---|---|---:|---|---:|---:|---:|---:|"]
    for report in reports:
        rows = [("all", report.overall)]
        if breakdown and len(report.by_difficulty) > 1:
            rows += list(report.by_difficulty.items())
        for label, s in rows:
            name = report.agent if label == "all" else f"  {report.agent} / {label}"
            low, high = s.success_ci95
            lines.append(
                f"| {name} | {report.action_protocol} | {report.taskset} | {s.episodes} | "
                f"{100 * s.success_rate:.1f} % ({100 * low:.1f}-{100 * high:.1f}) | {s.mean_return:.3f} | "
                f"{s.mean_turns:.2f} | {100 * s.invalid_action_rate:.1f} % | {100 * s.truncation_rate:.1f} % |"
            )
    return "\n".join(lines)
