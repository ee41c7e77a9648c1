"""Learning on synthesized SWE tasks (issue 42, point 6): the task set a study of one difficulty tier trains on.

A synthesized set records each task's split when ``turngym swe synth`` writes it; a set written before its splits
were (or one a study wants split another way, e.g. a chosen repository held out) is re-split here by the
pipeline's own rule (:func:`~turngym.envs.swe.synth.manifest.repo_splits`: whole repositories held out for ``eval``
and ``test``; :func:`~turngym.envs.swe.synth.manifest.task_split`: a hashed share of a training repository's tasks
as ``eval_seen``), optionally keeping one difficulty tier::

    python -m turngym.recipes.swe_synth_learning ~/.cache/turngym/swe-synth/sets/scale-v1 \\
        --out ~/.cache/turngym/swe-synth/sets/pilot-easy --eval-repos cachetools --tier easy

The folder written holds ``tasks.jsonl`` (the records, ``split`` set, ``repo_path`` pointing at the source set's
repositories) and ``split.json`` (the rule, the source set's path and its ``set_sha256``, the counts). Then::

    turngym sft --config recipes/configs/swe-synth-sft.yaml        # SFT on the oracle's view/edit/submit demos
    turngym compare --config recipes/configs/compare/swe-synth-easy.yaml   # base, SFT-only, RL arms, by seed
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from turngym.envs.swe.synth.manifest import SplitRule, repo_splits, task_split
from turngym.envs.swe.synth.world import TIERS


def _package(record: dict[str, Any]) -> str:
    return (record.get("synth") or {}).get("package") or str(record["repo"]).split("/")[-1]


def split_set(source: str | Path, out: str | Path, *, eval_repos: Sequence[str] = (), test_repos: Sequence[str] = (),
              tier: str | None = None, rule: SplitRule | None = None) -> dict[str, Any]:
    """Write ``out/tasks.jsonl``: the records of the set at ``source`` (a folder or its ``tasks.jsonl``), split by
    repository (``eval_repos``/``test_repos`` by package name, else the rule's hash ranking) and, with ``tier``,
    only that tier's tasks. Returns what ``out/split.json`` records."""
    source = Path(source).expanduser()
    tasks_file = source / "tasks.jsonl" if source.is_dir() else source
    if tier is not None and tier not in TIERS:
        raise ValueError(f"tier must be one of {', '.join(TIERS)}, got {tier!r}")
    records = [json.loads(line) for line in tasks_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not records:
        raise ValueError(f"{tasks_file} holds no task")
    rule = rule or SplitRule(eval_repos=tuple(eval_repos), test_repos=tuple(test_repos))
    packages = sorted({_package(r) for r in records})
    unknown = sorted((set(rule.eval_repos) | set(rule.test_repos)) - set(packages))
    if unknown:
        raise ValueError(f"no package {', '.join(unknown)} in {tasks_file}; it has {', '.join(packages)}")
    by_repo = repo_splits(packages, rule)
    out = Path(out).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    kept = []
    for record in records:
        if tier is not None and (record.get("difficulty_label") or {}).get("tier") != tier:
            continue
        record = dict(record)
        record["split"] = task_split(record["instance_id"], by_repo[_package(record)], rule)
        if record.get("repo_path") and not os.path.isabs(record["repo_path"]):
            repo = (tasks_file.parent / record["repo_path"]).resolve()
            record["repo_path"] = os.path.relpath(repo, out.resolve())
        kept.append(record)
    if not kept:
        raise ValueError(f"no {tier} task in {tasks_file}")
    (out / "tasks.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in kept), encoding="utf-8")
    manifest = tasks_file.parent / "manifest.json"
    summary = {
        "source": str(tasks_file.resolve()),
        "source_set_sha256": json.loads(manifest.read_text()).get("set_sha256", "") if manifest.is_file() else "",
        "tier": tier, "rule": asdict(rule),  # SplitRule.from_dict reads it back
        "repositories": by_repo,
        "tasks": dict(sorted(Counter(f"{_package(r)}:{r['split']}" for r in kept).items())),
        "splits": dict(Counter(r["split"] for r in kept)),
    }
    (out / "split.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m turngym.recipes.swe_synth_learning",
                                     description="Re-split a synthesized SWE set by repository, keeping one tier.")
    parser.add_argument("source", help="a synthesized set's folder (or its tasks.jsonl)")
    parser.add_argument("--out", required=True, help="the folder of the new set")
    parser.add_argument("--eval-repos", default="", help="comma-separated packages held out as eval")
    parser.add_argument("--test-repos", default="", help="comma-separated packages reserved as test")
    parser.add_argument("--tier", choices=TIERS, help="keep only this difficulty tier")
    parser.add_argument("--task-share", type=float, default=SplitRule.task_share,
                        help="share of a training repository's tasks hashed into eval_seen")
    args = parser.parse_args(argv)
    names = lambda text: tuple(n for n in text.split(",") if n)
    rule = SplitRule(eval_repos=names(args.eval_repos), test_repos=names(args.test_repos), task_share=args.task_share)
    summary = split_set(args.source, args.out, tier=args.tier, rule=rule)
    print(json.dumps({k: summary[k] for k in ("tier", "repositories", "splits", "tasks")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
