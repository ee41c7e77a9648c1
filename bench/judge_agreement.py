"""How well a judge model's score agrees with a world's true outcome, judged from the episode's transcript alone.

The judge is turngym's (:class:`~turngym.envs.judges.Judge`, frame and schema), called as the trainer's judge calls
it (:func:`~turngym.agents.judging.judge_trajectories` on the saved trajectories: the task text is the first
observation, the submission the transcript of actions and the world's answers). Its rubric (:data:`RUBRIC`) was
written before any score was seen. The analysis, fixed before the run:

* **pointwise** (each episode alone): over the episodes the judge scored (a failed judgement is no score, never a
  0, as in training), the AUC of the score against ``won`` (Mann-Whitney, ties count half), the accuracy of
  "won when the score is above the rubric's midpoint" (> 5 of 0..10), and Spearman's rho of the score with the
  episode's return; each with a 95 % percentile bootstrap interval over episodes (2,000 resamples; a resample
  with one class, or with constant scores, is skipped and counted). The failure rate, with its Wilson interval,
  and why they failed. Seconds per judgement: each call's wall time over the requests it held.
* **group** (RULER style): the plays of one task ranked together in one call. The saved evaluations hold one play
  per task and policy, so a group is the same task's episode from each file (two policies, a group of 2). Over
  the pairs with exactly one winner: the fraction the judge scores the winner above the loser (a tie counts
  half), with a bootstrap interval over pairs; the same fraction for the pointwise scores on those pairs.
* diagnostics, not rewards: a **lenient read** of the same pointwise replies (the first integer 0..10 after
  "score" anywhere in the reply, whatever the schema says), to see whether a signal hides behind the schema
  failures; and a **transcript string** ("*** The End ***" in the transcript), what a judge that only reads the
  game's own end message would score.

The subset: the first ``--per-file`` episodes of each file, in the file's order (task order).

    HF_HUB_OFFLINE=1 nice -n 10 .venv/bin/python bench/judge_agreement.py --per-file 30 \\
        --out docs/measurements/judge-agreement-textworld-q4.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

RUBRIC = ("The agent plays a text adventure and must complete the quest stated at the start. "
          "10: the agent completed the quest (the game says the quest is done: it ends the game with the full "
          "score). "
          "5: the agent made progress on the quest (it did some of the quest's steps, such as taking, unlocking or "
          "opening what the quest names) but did not complete it. "
          "0: no progress: only wasted, repeated or invalid actions.")
MIDPOINT = 5  # predicted won: a score above it (0..10 scale)
END_MARK = "*** The End ***"
DEFAULT_FILES = ("results/textworld-algorithms-pilot-world-q4/evals/base/seed0-held_out.jsonl",
                 "results/textworld-algorithms-pilot-world-q4/evals/sft-only/seed0-held_out.jsonl")
LENIENT = re.compile(r"score\D{0,12}?(\d{1,2})\b", re.IGNORECASE)


# ---------------------------------------------------------------------- statistics
def auc(scores: Sequence[float], won: Sequence[bool]) -> float | None:
    """P(a won episode's score > a lost one's), ties half; None without both classes."""
    positives = [s for s, w in zip(scores, won, strict=True) if w]
    negatives = [s for s, w in zip(scores, won, strict=True) if not w]
    if not positives or not negatives:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for k in range(start, end + 1):
            ranks[order[k]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho (average ranks for ties); None when either side is constant or shorter than 2."""
    if len(x) < 2:
        return None
    rx, ry = _ranks(x), _ranks(y)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sxx, syy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else None


def accuracy(scores: Sequence[float], won: Sequence[bool], threshold: float = 0.5) -> float | None:
    """The fraction where (score > threshold) equals won; None with no episode."""
    if not scores:
        return None
    return sum((s > threshold) == bool(w) for s, w in zip(scores, won, strict=True)) / len(scores)


def bootstrap(items: Sequence[Any], statistic: Callable[[Sequence[Any]], float | None], *, resamples: int = 2000,
              seed: int = 0) -> dict[str, Any]:
    """The statistic on ``items`` and its 95 % percentile bootstrap interval (resampling items); resamples where it
    is undefined are skipped and counted."""
    value = statistic(items) if items else None
    if value is None:
        return {"value": None, "low": None, "high": None, "skipped": resamples}
    rng = random.Random(seed)
    draws = []
    for _ in range(resamples):
        sample = [items[rng.randrange(len(items))] for _ in items]
        got = statistic(sample)
        if got is not None:
            draws.append(got)
    draws.sort()
    if not draws:
        return {"value": value, "low": None, "high": None, "skipped": resamples}
    low, high = draws[int(0.025 * (len(draws) - 1))], draws[math.ceil(0.975 * (len(draws) - 1))]
    return {"value": value, "low": low, "high": high, "skipped": resamples - len(draws)}


def wilson(k: int, n: int) -> list[float]:
    from turngym.agents.intervals import wilson_interval

    return list(wilson_interval(k, n))


# ---------------------------------------------------------------------- data
def load_episodes(path: str | Path, label: str | None = None, limit: int | None = None) -> list[Any]:
    """The first ``limit`` trajectories of a saved evaluation (``.jsonl``, one trajectory dict a line), in order;
    each gets ``source`` (``label`` or the file's folder name)."""
    from turngym.agents.rollout import Trajectory

    names = {f.name for f in fields(Trajectory)} - {"record"}
    out = []
    with open(path) as handle:
        for line in handle:
            if limit is not None and len(out) >= limit:
                break
            if line.strip():
                row = json.loads(line)
                trajectory = Trajectory(**{k: v for k, v in row.items() if k in names})
                trajectory.source = label or Path(path).parent.name  # type: ignore[attr-defined]
                out.append(trajectory)
    return out


def lenient_score(reply: str) -> int | None:
    """The first integer 0..10 after "score" in a reply, whatever its form (a diagnostic, never a reward)."""
    found = LENIENT.search(reply or "")
    value = int(found.group(1)) if found else None
    return value if value is not None and value <= 10 else None


def _reason(failed: str | None) -> str | None:
    if failed is None:
        return None
    return re.sub(r"\(.*", "", failed.split(": ", 1)[-1]).strip()[:80]


# ---------------------------------------------------------------------- the measurement
def _timed(judge: Any, trajectories: list[Any], kind: str) -> tuple[list[Any], float, int]:
    from turngym.agents.judging import judge_trajectories

    before = judge.requests
    started = time.perf_counter()
    verdicts = judge_trajectories(judge, trajectories, kind=kind, mode="component", rubric=RUBRIC)
    return verdicts, time.perf_counter() - started, judge.requests - before


def pointwise_summary(rows: list[dict[str, Any]], seconds: float, requests: int, *, resamples: int) -> dict[str, Any]:
    judged = [r for r in rows if r["score"] is not None]
    failed = len(rows) - len(judged)
    lenient = [r for r in rows if r["lenient"] is not None]
    return {
        "episodes": len(rows), "won": sum(r["won"] for r in rows), "judged": len(judged),
        "judged_won": sum(r["won"] for r in judged),
        "failed": failed, "failure_rate": failed / len(rows) if rows else None,
        "failure_rate_wilson95": wilson(failed, len(rows)),
        "failure_reasons": dict(Counter(_reason(r["failed"]) for r in rows if r["failed"]).most_common(6)),
        "auc": bootstrap(judged, lambda s: auc([r["score"] for r in s], [r["won"] for r in s]), resamples=resamples),
        "accuracy_at_midpoint": bootstrap(judged, lambda s: accuracy([r["score"] for r in s], [r["won"] for r in s]),
                                          resamples=resamples),
        "spearman_return": bootstrap(judged, lambda s: spearman([r["score"] for r in s], [r["return"] for r in s]),
                                     resamples=resamples),
        "score_counts": dict(sorted(Counter(r["raw"] for r in judged).items())),
        "seconds": seconds, "requests": requests, "seconds_per_judgement": seconds / requests if requests else None,
        "lenient_read": {
            "read": len(lenient),
            "auc": bootstrap(lenient, lambda s: auc([r["lenient"] for r in s], [r["won"] for r in s]),
                             resamples=resamples),
            "score_counts": dict(sorted(Counter(r["lenient"] for r in lenient).items())),
        },
    }


def pair_summary(pairs: list[tuple[dict[str, Any], dict[str, Any]]], key: str, *, resamples: int) -> dict[str, Any]:
    """Over pairs with exactly one winner: how often ``key`` scores the winner above the loser (ties half)."""
    decisive = [(a, b) if a["won"] else (b, a) for a, b in pairs if a["won"] != b["won"]]
    scored = [(w, lo) for w, lo in decisive if w[key] is not None and lo[key] is not None]

    def agree(sample: Sequence[tuple[dict[str, Any], dict[str, Any]]]) -> float | None:
        if not sample:
            return None
        return sum((w[key] > lo[key]) + 0.5 * (w[key] == lo[key]) for w, lo in sample) / len(sample)

    return {"pairs_with_one_winner": len(decisive), "scored": len(scored),
            "winner_above_loser": bootstrap(scored, agree, resamples=resamples)}


def measure(judge: Any, episodes: list[Any], *, kinds: Sequence[str] = ("pointwise", "group"), resamples: int = 2000,
            log: Callable[[str], None] = print, checkpoint: Callable[[dict[str, Any]], None] | None = None
            ) -> dict[str, Any]:
    """Judge ``episodes`` (trajectories with ``source``) and summarise the agreement (see the module doc)."""
    rows = [{"source": t.source, "task": t.task.get("id"), "won": bool(t.won), "return": t.episode_reward,
             "turns": t.num_turns, "end_mark": END_MARK in "\n".join(t.observations[1:]),
             "score": None, "raw": None, "failed": None, "lenient": None, "reply": None, "group_score": None,
             "group_failed": None} for t in episodes]
    report: dict[str, Any] = {"judge": judge.name, "rubric": RUBRIC, "midpoint": MIDPOINT,
                              "max_new_tokens": judge.max_new_tokens, "episodes": rows,
                              "sources": dict(Counter(r["source"] for r in rows)),
                              "transcript_string_auc": auc([float(r["end_mark"]) for r in rows],
                                                           [r["won"] for r in rows])}
    if "pointwise" in kinds:
        log(f"pointwise: {len(episodes)} episodes ...")
        verdicts, seconds, requests = _timed(judge, episodes, "pointwise")
        for row, verdict in zip(rows, verdicts, strict=True):
            row.update(score=verdict.score, raw=verdict.raw, failed=verdict.failed, reply=(verdict.reply or "")[:160],
                       lenient=lenient_score(verdict.reply or ""))
            row["lenient"] = None if row["lenient"] is None else row["lenient"] / 10
        report["pointwise"] = pointwise_summary(rows, seconds, requests, resamples=resamples)
        log(f"pointwise: {seconds:.0f} s, {report['pointwise']['failed']}/{len(rows)} failed")
        if checkpoint:
            checkpoint(report)
    if "group" in kinds:
        by_task: dict[Any, list[int]] = {}
        for index, row in enumerate(rows):
            by_task.setdefault(row["task"], []).append(index)
        groups = [members for members in by_task.values() if len(members) >= 2]
        members = [i for group in groups for i in group]
        log(f"group: {len(groups)} groups of the same task ...")
        if groups:
            verdicts, seconds, requests = _timed(judge, [episodes[i] for i in members], "group")
            for i, verdict in zip(members, verdicts, strict=True):
                rows[i].update(group_score=verdict.score, group_failed=verdict.failed)
        else:
            seconds, requests = 0.0, 0
        pairs = [(rows[g[0]], rows[g[1]]) for g in groups if len(g) == 2]
        failed_groups = sum(any(rows[i]["group_failed"] for i in g) for g in groups)
        report["group"] = {
            "groups": len(groups), "failed": failed_groups, "failure_rate": failed_groups / len(groups) if groups
            else None, "failure_rate_wilson95": wilson(failed_groups, len(groups)),
            "failure_reasons": dict(Counter(_reason(rows[g[0]]["group_failed"]) for g in groups
                                            if rows[g[0]]["group_failed"]).most_common(6)),
            "seconds": seconds, "calls": requests, "seconds_per_call": seconds / requests if requests else None,
            "ranked": pair_summary(pairs, "group_score", resamples=resamples),
            "pointwise_on_the_same_pairs": pair_summary(pairs, "score", resamples=resamples),
        }
        log(f"group: {seconds:.0f} s, {failed_groups}/{len(groups)} failed")
    return report


def _interval(entry: dict[str, Any]) -> str:
    if entry["value"] is None:
        return "undefined"
    if entry["low"] is None:
        return f"{entry['value']:.3f}"
    return f"{entry['value']:.3f} [{entry['low']:.3f}, {entry['high']:.3f}]"


def summary_lines(report: dict[str, Any]) -> list[str]:
    lines = [(f"judge {report['judge']} (max {report['max_new_tokens']} new tokens); episodes {report['sources']}; "
             f"transcript string '{END_MARK}' AUC {report['transcript_string_auc']}")]
    p = report.get("pointwise")
    if p:
        low, high = p["failure_rate_wilson95"]
        lines += [(f"pointwise: {p['judged']}/{p['episodes']} judged ({p['judged_won']} won of {p['won']}); failed "
                  f"{p['failed']} ({p['failure_rate']:.0%}, 95% {low:.0%}-{high:.0%}): {p['failure_reasons']}"),
                  (f"  AUC {_interval(p['auc'])}; accuracy at > {MIDPOINT} {_interval(p['accuracy_at_midpoint'])}; "
                  f"Spearman with return {_interval(p['spearman_return'])}; scores {p['score_counts']}"),
                  f"  {p['seconds']:.0f} s for {p['requests']} requests: {p['seconds_per_judgement'] or 0:.1f} s each",
                  (f"  lenient read: {p['lenient_read']['read']} read, AUC {_interval(p['lenient_read']['auc'])}, "
                  f"scores {p['lenient_read']['score_counts']}")]
    g = report.get("group")
    if g:
        lines += [(f"group of 2 (same task, both files): {g['groups']} groups, failed {g['failed']} "
                  f"({(g['failure_rate'] or 0):.0%}): {g['failure_reasons']}; {g['seconds']:.0f} s, "
                  f"{g['seconds_per_call'] or 0:.1f} s a call"),
                  (f"  winner above loser: ranked {_interval(g['ranked']['winner_above_loser'])} over "
                  f"{g['ranked']['scored']}/{g['ranked']['pairs_with_one_winner']} pairs; pointwise on the same pairs "
                  f"{_interval(g['pointwise_on_the_same_pairs']['winner_above_loser'])}")]
    return lines


def main(argv: Sequence[str] | None = None, *, model: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", nargs="+", default=list(DEFAULT_FILES), help="saved evaluations (.jsonl)")
    parser.add_argument("--per-file", type=int, default=None, help="the first N episodes of each file (default all)")
    parser.add_argument("--judge", default="hf:HuggingFaceTB/SmolLM2-135M-Instruct", help="hf:, vllm: or openai:")
    parser.add_argument("--kinds", nargs="+", choices=["pointwise", "group"], default=["pointwise", "group"])
    parser.add_argument("--max-new-tokens", type=int, default=256, help="the Judge's (and the trainer's) default")
    parser.add_argument("--batch-size", type=int, default=16, help="the Judge's default")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (a shared machine: 1)")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--out", default=None, help="the report as JSON")
    args = parser.parse_args(argv)

    from turngym.envs.judges import Judge

    episodes = [t for path in args.episodes for t in load_episodes(path, limit=args.per_file)]
    if model is None:
        import torch

        from turngym.agents.judge_models import make_judge_model

        torch.set_num_threads(args.threads)
        model = make_judge_model(args.judge)
    judge = Judge(model, timeout=24 * 3600, batch_size=args.batch_size, max_new_tokens=args.max_new_tokens)

    def write(report: dict[str, Any]) -> None:
        if args.out:
            report = {**report, "command": "python bench/judge_agreement.py " + " ".join(argv or sys.argv[1:]),
                      "files": args.episodes, "per_file": args.per_file, "load_average": os.getloadavg()[0]}
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(report, indent=1, default=str) + "\n")

    report = measure(judge, episodes, kinds=args.kinds, resamples=args.resamples,
                     log=lambda line: print(line, flush=True), checkpoint=write)
    write(report)
    print("\n".join(summary_lines(report)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
