"""``turngym generate``: generate (and hash) TextWorld or ALFWorld games ahead of a run."""

from __future__ import annotations

import argparse
from pathlib import Path

from turngym.recipes.commands.common import POSITIVE


def cmd_generate(args: argparse.Namespace) -> int:
    if args.world == "alfworld":
        from turngym.envs.alfworld import alfworld_tasks, materialise

        tasks = materialise(alfworld_tasks(args.split, n=args.n), workers=args.workers)
    else:
        from turngym.envs.textworld import materialise, textworld_tasks

        tasks = materialise(textworld_tasks(args.config, args.split, n=args.n), workers=args.workers)
    print(f"{len(tasks)} games ready for {tasks.name} (fingerprint {tasks.fingerprint})")
    if args.manifest:
        Path(args.manifest).write_text(tasks.to_jsonl())
        print(f"manifest written to {args.manifest}")
    return 0


def add(sub) -> None:
    p = sub.add_parser("generate", help="generate and cache TextWorld or ALFWorld games")
    p.add_argument("--world", default="textworld", choices=["textworld", "alfworld"])
    p.add_argument("--config", default="w2-o3-q4")
    p.add_argument("--split", default="eval", choices=["train", "eval", "all", "eval_seen", "eval_unseen"],
                   help="ALFWorld: train, eval_seen (= eval), eval_unseen or all")
    p.add_argument("-n", type=POSITIVE, default=None, help="first n seeds of each split")
    p.add_argument("--workers", type=POSITIVE, default=None)
    p.add_argument("--manifest", help="write the task set (ids and content hashes) as JSONL")
    p.set_defaults(func=cmd_generate)
