"""Evaluation on held-out tasks: success with a 95 % confidence interval, per episode, and pass@k.

Every number is computed per *episode* (a truncated episode counts as not won; infrastructure
failures are counted separately so they are never silently read as agent failures). The report
records the task panel's fingerprint and the action protocol, since anchors disagree mostly
because of those two.

With ``samples_per_task = n > 1`` every task is played n times (sampling at the agent's
temperature) and the report adds the unbiased pass@k estimator of Chen et al. (2021) for each
requested k <= n, with a bootstrap interval over tasks (:func:`~turngym.agents.intervals.pass_at_k_summary`).
Every interval lives in :mod:`turngym.agents.intervals`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from turngym.agents.base import Agent
from turngym.agents.intervals import PassAtK, pass_at_k_summary, wilson_interval
from turngym.agents.rollout import Trajectory, run_episodes
from turngym.envs.pool_api import ENV_ERROR_REASONS
from turngym.envs.tasks import TaskSet
from turngym.envs.vector import make_pool


def check_pass_at(samples_per_task: int, ks: Sequence[int]) -> None:
    """ValueError unless ``samples_per_task >= 1`` and every k of ``ks`` has 1 <= k <= ``samples_per_task``."""
    if samples_per_task < 1:
        raise ValueError(f"samples_per_task must be at least 1, got {samples_per_task}")
    too_big = [k for k in ks if not 1 <= k <= samples_per_task]
    if too_big:
        raise ValueError(f"pass@k needs 1 <= k <= samples_per_task ({samples_per_task}); got k = "
                         f"{', '.join(map(str, too_big))}: raise samples_per_task or lower k")


def passes_by_task(trajectories: Sequence[Trajectory]) -> dict[str, list[bool]]:
    """Each task's outcomes (won or not), in the order its samples were played."""
    passes: dict[str, list[bool]] = defaultdict(list)
    for trajectory in trajectories:
        passes[str(trajectory.task.get("id"))].append(trajectory.won)
    return dict(passes)


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
    env_errors: int = 0  # episodes the world's own exception (or its process's death) ended: ENV_ERROR_REASONS


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
        env_errors=sum(t.truncation_reason in ENV_ERROR_REASONS for t in trajectories),
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
    samples_per_task: int = 1
    pass_at_k: list[PassAtK] = field(default_factory=list)  # one per requested k, in increasing k
    # The episodes the numbers summarise, in task order (not serialised: write_trajectories does that).
    trajectories: list[Trajectory] = field(default_factory=list, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "trajectories"}


def report_from(agent_name: str, env_id: str, env_kwargs: Mapping[str, Any], tasks: TaskSet, seed: int,
                trajectories: Sequence[Trajectory], *, samples_per_task: int = 1,
                pass_at: Sequence[int] = ()) -> EvalReport:
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
        samples_per_task=samples_per_task,
        pass_at_k=[pass_at_k_summary(passes_by_task(trajectories), k, seed=seed) for k in sorted(set(pass_at))],
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
    samples_per_task: int = 1,
    pass_at: Sequence[int] | None = None,
    pool_options: Mapping[str, Any] | None = None,
    continuous: bool = False,
    batch_window: float = 0.0,
) -> EvalReport:
    """Play every task of ``tasks`` ``samples_per_task`` times with ``agent`` and summarise; the one
    evaluation entry point.

    ``num_workers > 0`` plays in that many worker processes (:class:`~turngym.envs.vector.EnvPool`);
    with 0, ``batch`` episodes play side by side in this process, which an LLM agent answers with
    one batched forward pass per turn. The same seed gives the same result whatever the number of
    workers. ``report.trajectories`` holds the episodes (all tasks' first samples, then the second...).

    ``samples_per_task = n > 1`` plays each task n times as independent samples (an LLM agent seeds
    its sampling by episode, a baseline by task and sample number; give an LLM a temperature > 0, or
    its n greedy samples are the same) and reports pass@k for each k of ``pass_at`` (default: 1 and
    n); the success rate is then pooled over all n x T episodes, which is pass@1.

    ``pool_options`` go to :func:`~turngym.envs.vector.make_pool`, e.g. ``{"backend": "remote",
    "server": "ws://host:8000"}`` to play a world served by ``turngym serve`` (docs/scaling.md).
    ``continuous``, ``batch_window``: continuous batching for an LLM agent
    (:func:`~turngym.agents.rollout.run_episodes`).
    """
    if pass_at is None:
        pass_at = sorted({1, samples_per_task}) if samples_per_task > 1 else []
    check_pass_at(samples_per_task, pass_at)
    kwargs = dict(env_kwargs or {})
    kwargs.setdefault("tasks", tasks)
    plays = [task for _ in range(samples_per_task) for task in tasks]  # sample-major: sample 0 is a single run's
    size = min(num_workers or max(batch, 1), max(len(plays), 1))
    pool = make_pool(env_id, size, env_kwargs=kwargs, num_workers=num_workers, **dict(pool_options or {}))
    label = progress if isinstance(progress, str) else (f"eval {agent.name}" if progress else False)
    try:
        trajectories = run_episodes(agent, pool, plays, seed=seed, progress=label, continuous=continuous,
                                    batch_window=batch_window)
    finally:
        pool.close()
    if trajectories_path is not None:
        write_trajectories(trajectories, trajectories_path)
    return report_from(agent.name, env_id, kwargs, tasks, seed, trajectories, samples_per_task=samples_per_task,
                       pass_at=pass_at)


def write_trajectories(trajectories: Sequence[Trajectory], path: str | Path, *, token_ids: bool = True) -> None:
    """One JSON line per trajectory (``token_ids=False``: the text only, see :meth:`Trajectory.to_dict`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        for trajectory in trajectories:
            handle.write(json.dumps(trajectory.to_dict(token_ids=token_ids)) + "\n")


def markdown_table(reports: Sequence[EvalReport], *, breakdown: bool = True) -> str:
    """A markdown table of reports: one row per agent (and per difficulty when there are several); then,
    when a report has pass@k, one row per agent with each pass@k and its bootstrap interval."""
    crashes = any(r.overall.env_errors for r in reports)  # a column of its own only when a world raised
    header = ("| agent | protocol | tasks | episodes | success (95 % CI) | return | turns | invalid actions "
              "| truncated |" + (" env_error |" if crashes else ""))
    lines = [header, "|---|---|---|---:|---|---:|---:|---:|---:|" + ("---:|" if crashes else "")]
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
                + (f" {s.env_errors} |" if crashes else "")
            )
    ks = sorted({p.k for report in reports for p in report.pass_at_k})
    if ks:
        lines += ["", "| agent | tasks | samples per task | " + " | ".join(f"pass@{k} (95 % CI)" for k in ks) + " |",
                  "|---|---|---:|" + "---|" * len(ks)]
        for report in reports:
            by_k = {p.k: p for p in report.pass_at_k}
            cells = [pass_at_k_cell(by_k[k]) if k in by_k else "-" for k in ks]
            lines.append(f"| {report.agent} | {report.taskset} | {report.samples_per_task} | {' | '.join(cells)} |")
    pass_note = " pass@k's interval is a bootstrap over tasks (Wilson's where every task passed, or none did)."
    lines += ["", "Success intervals are Wilson's, which treat every episode as independent: right for one policy "
              "playing each task once; too narrow over several training seeds (`turngym compare` uses a seeds x "
              "tasks interval) or several samples per task." + (pass_note if ks else "")]
    return "\n".join(lines)


def pass_at_k_cell(p: PassAtK | Mapping[str, Any]) -> str:
    """``61.3 % (52.0-70.1)``: a pass@k estimate and its 95 % interval, in percent."""
    estimate, (low, high) = (p.estimate, p.ci95) if isinstance(p, PassAtK) else (p["estimate"], p["ci95"])
    return f"{100 * estimate:.1f} % ({100 * low:.1f}-{100 * high:.1f})"
