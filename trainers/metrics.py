"""What a training step logs: per-episode statistics (never per token), episode samples as text, held-out numbers.

Every function here returns ``{name: value}``; the trainer appends each value to TRL's step metrics. Nothing here
imports TRL. Statistics over several processes take the gathered rows (``episode_row`` of every process's
episodes), so every process logs the same numbers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Hashable, Sequence
from typing import Any, Protocol

import torch

from turngym.trainers.episodes import Episode

EPISODE_SAMPLES = "episode_samples.jsonl"  # a few decoded episodes per step (TurnGymConfig.episode_samples)
LOGGED_TURNS = 8  # per-turn advantage statistics for turns 0..7


class Processes(Protocol):
    """The collectives the step's statistics need; accelerate's ``Accelerator`` is one."""

    num_processes: int

    def reduce(self, tensor: torch.Tensor, reduction: str = "sum") -> torch.Tensor: ...

    def gather(self, tensor: torch.Tensor) -> torch.Tensor: ...


def mean_per_turn(token_advantages: Sequence[float], episode: Episode) -> list[float]:
    """The mean advantage over each turn's model tokens."""
    sums, counts = [0.0] * episode.num_turns, [0] * episode.num_turns
    for a, turn, m in zip(token_advantages, episode.turn_index, episode.env_mask, strict=True):
        if m and turn < episode.num_turns:
            sums[turn] += a
            counts[turn] += 1
    return [s / c if c else 0.0 for s, c in zip(sums, counts, strict=True)]


def episode_row(episode: Episode, token_advantages: Sequence[float]) -> dict[str, Any]:
    """What one episode contributes to the step's statistics (small: every process gathers every row)."""
    return {"won": episode.won, "return": episode.episode_reward, "turns": episode.num_turns,
            "invalid": sum(episode.invalid_actions), "truncated": episode.truncated,
            "sampled": episode.num_model_tokens, "turn_advantages": mean_per_turn(token_advantages, episode),
            "world": episode.world}


def episode_metrics(rows: Sequence[dict[str, Any]], groups: Sequence[Hashable],
                    worlds: Sequence[str] = ()) -> dict[str, float]:
    """Per-episode means of the step's episodes (every process's ``episode_row``), per world when there are
    several (a world absent from the step logs only its share), and the advantages' statistics:
    ``advantages/frac_zero_groups`` (groups whose advantages are all 0) and each turn's mean and std."""
    metrics: dict[str, float] = {}
    for world in worlds if len(worlds) > 1 else ():
        mine = [r for r in rows if r["world"] == world]
        metrics[f"episode/share/{world}"] = len(mine) / max(len(rows), 1)
        for name, key in (("success", "won"), ("return", "return"), ("turns", "turns"),
                          ("truncated", "truncated")) if mine else ():
            metrics[f"episode/{name}/{world}"] = sum(r[key] for r in mine) / len(mine)
    n = max(len(rows), 1)
    turns = sum(r["turns"] for r in rows)
    metrics["episode/success"] = sum(r["won"] for r in rows) / n
    metrics["episode/return"] = sum(r["return"] for r in rows) / n
    metrics["episode/turns"] = turns / n
    metrics["episode/truncated"] = sum(r["truncated"] for r in rows) / n
    metrics["episode/sampled_tokens"] = sum(r["sampled"] for r in rows) / n
    metrics["episode/invalid_action_rate"] = sum(r["invalid"] for r in rows) / max(turns, 1)
    by_group: dict[Hashable, list[float]] = {}
    for row, group in zip(rows, groups, strict=True):
        by_group.setdefault(group, []).extend(row["turn_advantages"])
    zero = sum(all(abs(a) < 1e-8 for a in values) for values in by_group.values())
    metrics["advantages/frac_zero_groups"] = zero / max(len(by_group), 1)
    for turn in range(LOGGED_TURNS):
        values = [r["turn_advantages"][turn] for r in rows if len(r["turn_advantages"]) > turn]
        if values:
            mean = sum(values) / len(values)
            metrics[f"advantages/turn_{turn}/mean"] = mean
            metrics[f"advantages/turn_{turn}/std"] = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
    return metrics


def no_signal_advice(metrics: dict[str, float], args: Any) -> str | None:
    """One line when a step's episodes can teach nothing, with what to do; None when they can.

    Nothing to learn from: every action invalid (``episode/invalid_action_rate`` 1), or every group's advantages 0
    (``advantages/frac_zero_groups`` 1: each task's episodes all scored the same, so no comparison exists). The
    remedies named are those that apply to ``args`` (a TurnGymConfig): when every episode won, RL on tasks the
    warm start did not see, dense rewards or harder tasks; otherwise also an SFT warm start from the world's
    walkthroughs, the ``choose_index`` protocol, an answer prefix (under ``tools``, which refuses one: room for a
    whole call) and a larger model.
    """
    invalid, silent = metrics.get("episode/invalid_action_rate", 0.0), metrics.get("advantages/frac_zero_groups", 0.0)
    if invalid < 1.0 and silent < 1.0:
        return None
    dense = [] if getattr(args, "reward_mode", None) == "dense" else ["dense rewards (--reward_mode dense)"]
    demos = getattr(args, "sft_demos", 0)
    unseen = ([f"RL on tasks the warm start did not see (--skip_train_tasks {demos})"]
              if demos > getattr(args, "skip_train_tasks", 0) else [])
    if invalid < 1.0 and metrics.get("episode/success", 0.0) >= 1.0:
        why = "every episode won, so every advantage is 0"
        fixes = [*unseen, *dense, "harder tasks (--train_split, env_kwargs)"]
    else:
        why = " and ".join([f"{invalid:.0%} of actions invalid"] * (invalid >= 1.0)
                           + ["every task's episodes scored the same (all advantages 0)"] * (silent >= 1.0))
        warm_start = "an SFT warm start on the world's walkthroughs (--sft_demos 16)"
        fixes = unseen if demos else [warm_start]
        if getattr(args, "action_protocol", None) == "free_form":
            fixes.append("--action_protocol choose_index (answer with the number of an admissible command)")
        if getattr(args, "action_protocol", None) == "tools":  # tools refuses a response prefix: a call needs room
            fixes.append("room for a whole call (--max_new_tokens_per_turn 48 or more)")
        elif getattr(args, "response_prefix", None) == "":
            fixes.append("an answer prefix (--response_prefix 'Action:')")
        fixes += [*dense, "a larger model (--model_name_or_path)"]
    return (f"no learning signal in the first rollouts: {why}, so RL cannot learn from them. Try "
            f"{'; '.join(fixes)} (docs/training.md#no-learning-signal)")


# ---------------------------------------------------------------------- episodes as text
def episode_sample(episode: Episode, turn_advantages: Sequence[float], step: int, group: Hashable) -> dict[str, Any]:
    """One line of ``episode_samples.jsonl``: the episode's text (:meth:`Trajectory.to_dict` without token ids),
    the training step, its group, and one advantage per model turn."""
    return {"step": step, "group": str(group), **episode.trajectory.to_dict(token_ids=False),
            "turn_advantages": [round(float(a), 6) for a in turn_advantages]}


def sample_table_row(record: dict[str, Any], width: int = 160) -> dict[str, Any]:
    """An :func:`episode_sample` as one row of trackio's table: the outcome and a turn-by-turn transcript."""
    def short(text: Any) -> str:
        text = " ".join(str(text).split())
        return text if len(text) <= width else text[:width - 1] + "…"

    rewards, advantages, invalid = record["turn_rewards"], record["turn_advantages"], record["invalid_actions"]
    lines = []
    for turn, action in enumerate(record["actions"]):
        reward = rewards[turn] if turn < len(rewards) else 0.0
        advantage = f" A {advantages[turn]:+.3f}" if turn < len(advantages) else ""
        flag = " (invalid)" if turn < len(invalid) and invalid[turn] else ""
        observation = record["observations"][turn + 1] if turn + 1 < len(record["observations"]) else ""
        lines.append(f"{turn + 1}. {short(action)}{flag} | r {reward:+.2f}{advantage} | {short(observation)}")
    outcome = record["outcome"] + (f" ({record['truncation_reason']})" if record["truncated"] else "")
    return {"step": record["step"], "task": str(record["task"].get("id")), "group": record["group"],
            "outcome": outcome, "return": record["episode_reward"], "turns": record["num_turns"],
            "transcript": "\n".join(lines)}


def write_episode_samples(output_dir: str, records: Sequence[dict[str, Any]], step: int, *, trackio: bool) -> None:
    """:func:`episode_sample` records appended to ``output_dir/episode_samples.jsonl`` (``turngym view`` renders
    it), each with the id of the run that wrote it (``run``, from ``turngym_run.json``; None outside ``turngym train``),
    and one trackio table for the step when ``trackio`` (the run opened by transformers' TrackioCallback)."""
    from turngym.trainers.runs import run_id_of

    os.makedirs(output_dir, exist_ok=True)
    run = run_id_of(output_dir)  # the run that writes here (turngym_run.json): rows of two runs never look alike
    with open(os.path.join(output_dir, EPISODE_SAMPLES), "a") as handle:
        handle.writelines(json.dumps({"run": run, **record}) + "\n" for record in records)
    if trackio:
        import trackio as tracker

        if tracker.context_vars.current_run.get() is not None:
            tracker.log({"episodes/samples": tracker.Table(data=[sample_table_row(r) for r in records]),
                         "train/global_step": step})


def eval_metrics(summary: Any, prefix: str, suffix: str = "") -> dict[str, float]:
    """The held-out metrics of one :class:`~turngym.agents.evaluate.Summary` (``suffix``: ``/<world>``)."""
    return {f"{prefix}/success{suffix}": summary.success_rate,
            f"{prefix}/success_ci95_low{suffix}": summary.success_ci95[0],
            f"{prefix}/success_ci95_high{suffix}": summary.success_ci95[1],
            f"{prefix}/return{suffix}": summary.mean_return,
            f"{prefix}/turns{suffix}": summary.mean_turns,
            f"{prefix}/invalid_action_rate{suffix}": summary.invalid_action_rate}


def staleness_metrics(staleness: Sequence[int], max_staleness: int, *, trainer_wait_s: float,
                      sampler_wait_s: float) -> dict[str, float]:
    """A pipelined step's staleness histogram (share of episodes k versions old, k = 0..K; an episode's
    staleness is the step it trains at minus the oldest version of its turns) and the idle time of each side:
    the trainer waiting for the batch, the sampler waiting for a policy."""
    count = max(len(staleness), 1)
    metrics = {f"pipeline/staleness_{k}": sum(s == k for s in staleness) / count for k in range(max_staleness + 1)}
    metrics.update({"pipeline/staleness_mean": sum(staleness) / count, "pipeline/staleness_max": float(max(staleness,
                    default=0)), "pipeline/trainer_wait_s": trainer_wait_s,
                    "pipeline/sampler_wait_s": sampler_wait_s})
    return metrics
