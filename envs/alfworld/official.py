"""The official ALFWorld games, for users who have them (``alfworld-download``'s ``$ALFWORLD_DATA``).

The layout is ALFWorld's: ``$ALFWORLD_DATA/json_2.1.1/{train,valid_seen,valid_unseen}/<task>/<trial>/``
with ``traj_data.json`` and ``game.tw-pddl`` in each trial folder. Games are selected as
``AlfredTWEnv.collect_game_files`` selects them: one of the six task types, no ``movable`` or
``Sliced`` trials, and a game file marked ``solvable``. turngym's splits map to ALFWorld's:
``train`` -> ``train``, ``eval_seen`` -> ``valid_seen`` (ALFWorld's eval in-distribution),
``eval_unseen`` -> ``valid_unseen`` (out-of-distribution).

A task stores its trial folder relative to the data directory, so a panel's identity does not
depend on where the data lives. The planner's plan (the oracle's walkthrough) is computed on first
use and cached next to the generated games, keyed by the game's content hash.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

from turngym.envs.alfworld.generation import (
    SPLITS,
    TASK_TYPES,
    GameFiles,
    alfworld_version,
    canonical_split,
    game_content_hash,
)
from turngym.envs.tasks import Task, TaskSet
from turngym.envs.textworld.generation import cache_root

OFFICIAL_SPLITS = {"train": "train", "eval_seen": "valid_seen", "eval_unseen": "valid_unseen"}
_TASK_SENTENCE = re.compile(r"Your task is to: (.*?)\.?\"", re.DOTALL)


def default_data_dir() -> Path:
    """``$ALFWORLD_DATA``, or alfworld's own default ``~/.cache/alfworld``."""
    return Path(os.environ.get("ALFWORLD_DATA", Path.home() / ".cache" / "alfworld")).expanduser()


def _split_dir(data_dir: Path, split: str) -> Path:
    return data_dir / "json_2.1.1" / OFFICIAL_SPLITS[split]


def is_official(task: Task) -> bool:
    return task.payload.get("source") == "official"


def official_tasks(
    split: str = "train",
    data_dir: str | Path | None = None,
    n: int | None = None,
    task_types: Iterable[str] | None = None,
) -> TaskSet:
    """The official games of a split (or ``"all"``), in path order; ``n`` keeps the first n per split."""
    data_dir = Path(data_dir).expanduser() if data_dir else default_data_dir()
    chosen = set(task_types or TASK_TYPES)
    tasks = []
    for name in SPLITS if split == "all" else (canonical_split(split),):
        root = _split_dir(data_dir, name)
        if not root.is_dir():
            raise FileNotFoundError(
                f"no official ALFWorld data at {root}: set data_dir= or $ALFWORLD_DATA to the folder that "
                "holds json_2.1.1/ (alfworld-download writes it), or use the generated games (source='generated')"
            )
        found = 0
        for traj_file in sorted(root.glob("**/traj_data.json")):
            trial = traj_file.parent
            relative = trial.relative_to(root).as_posix()
            if "movable" in relative or "Sliced" in relative or not (trial / "game.tw-pddl").exists():
                continue
            task_type = json.loads(traj_file.read_text())["task_type"]
            if task_type not in chosen or not json.loads((trial / "game.tw-pddl").read_text()).get("solvable"):
                continue
            tasks.append(
                Task(
                    world="alfworld",
                    id=f"alfworld/official/{name}/{relative}",
                    split=name,
                    difficulty=task_type,
                    payload={"source": "official", "split_dir": OFFICIAL_SPLITS[name], "path": relative},
                )
            )
            found += 1
            if n is not None and found >= n:
                break
    version = f"alfworld-{alfworld_version()}/official"
    return TaskSet(name=f"alfworld/official/{split}", version=version, tasks=tuple(tasks))


def _trial_dir(task: Task, data_dir: str | Path | None) -> Path:
    data_dir = Path(data_dir).expanduser() if data_dir else default_data_dir()
    return data_dir / "json_2.1.1" / task.payload["split_dir"] / task.payload["path"]


def official_content_hash(task: Task, data_dir: str | Path | None = None) -> str:
    return game_content_hash(json.loads((_trial_dir(task, data_dir) / "game.tw-pddl").read_text()))


def plan_file(content_hash: str) -> Path:
    return cache_root() / "alfworld-official-plans" / f"{content_hash}.json"


def official_files(task: Task, data_dir: str | Path | None = None) -> GameFiles:
    """The trial's files; ``walkthrough`` is empty until the planner's plan has been cached."""
    directory = _trial_dir(task, data_dir)
    if not (directory / "game.tw-pddl").exists():
        raise FileNotFoundError(f"official ALFWorld game {task.id} is missing: {directory / 'game.tw-pddl'}")
    game = json.loads((directory / "game.tw-pddl").read_text())
    traj_data = json.loads((directory / "traj_data.json").read_text())
    content_hash = game_content_hash(game)
    cached_plan = plan_file(content_hash)
    sentence = _TASK_SENTENCE.search(game["grammar"])
    return GameFiles(
        directory=directory,
        task_type=traj_data["task_type"],
        goal=sentence.group(1) if sentence else "",
        pddl_params=traj_data["pddl_params"],
        content_hash=content_hash,
        walkthrough=tuple(json.loads(cached_plan.read_text())["plan"]) if cached_plan.exists() else (),
        expert_plan=tuple(game.get("walkthrough") or ()),  # alfworld-generate stores its expert's run
        scene=traj_data.get("scene", {}).get("scene_num"),
    )


def save_plan(files: GameFiles, plan: list[str]) -> None:
    """Cache the planner's plan of an official game (written atomically)."""
    path = plan_file(files.content_hash)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(f".{os.getpid()}.tmp")
    scratch.write_text(json.dumps({"plan": plan}))
    os.replace(scratch, path)
