"""A synthesized set as tasks of the SWE world, split as its records say (train, eval_seen, eval, test).

    from turngym.envs.swe.synth.world import synth_tasks
    tasks = synth_tasks("~/.cache/turngym/swe-synth/sets/scale-v1")          # every split
    env = gymnasium.make("turngym/SWE-v0", tasks=tasks.split("train"))

``turngym eval`` and ``turngym train`` reach it as a world of its own, ``turngym/SWE-synth-v0`` (the SWE world on
the set ``task_file`` names), registered when this module is imported:

    turngym eval --import turngym.envs.swe.synth.world --env turngym/SWE-synth-v0 --agent oracle \\
        --env-arg task_file=~/.cache/turngym/swe-synth/sets/scale-v1 --split eval --episodes 20
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from turngym.envs.registry import register
from turngym.envs.swe.env import SWEEnv
from turngym.envs.swe.instances import WORLD, SWEInstance, tree_hash
from turngym.envs.tasks import Task, TaskSet, canonical_json, sha256_text

ENV_ID = "turngym/SWE-synth-v0"
ENV_VARIABLE = "TURNGYM_SWE_TASKS"
TIERS = ("easy", "medium", "hard")  # the pipeline's difficulty_label["tier"]


def _tasks_file(path: str | Path) -> Path:
    path = Path(path).expanduser()
    found = path / "tasks.jsonl" if path.is_dir() else path
    if not found.is_file():
        raise FileNotFoundError(f"no synthesized set at {path}: give its folder or its tasks.jsonl "
                                "(turngym swe synth --out DIR writes them)")
    return found


def synth_tasks(path: str | Path, split: str | None = None, tier: str | None = None) -> TaskSet:
    """The tasks of a synthesized set (its folder or ``tasks.jsonl``), or one of its splits; with ``tier``, only the
    tasks of that difficulty tier (``difficulty_label["tier"]``: ``easy``, ``medium`` or ``hard``)."""
    found = _tasks_file(path)
    tasks = _load(str(found.resolve()), found.stat().st_mtime_ns)
    tasks = tasks if split is None else tasks.split(split)
    if tier is None:
        return tasks
    if tier not in TIERS:
        raise ValueError(f"tier must be one of {', '.join(TIERS)}, got {tier!r}")
    kept = tuple(t for t in tasks if (t.payload.get("difficulty_label") or {}).get("tier") == tier)
    if not kept:
        raise KeyError(f"task set {tasks.name!r} has no {tier} tasks")
    return TaskSet(name=f"{tasks.name}:{tier}", version=tasks.version, tasks=kept)


@lru_cache(maxsize=4)
def _load(path: str, mtime_ns: int) -> TaskSet:
    del mtime_ns  # part of the cache key: a rewritten set is read again
    folder = Path(path).parent
    manifest = folder / "manifest.json"
    version = json.loads(manifest.read_text(encoding="utf-8")).get("set_sha256", "")[:12] if manifest.is_file() else ""
    trees: dict[str, str] = {}
    tasks = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        split = record.get("split") or "train"
        instance = SWEInstance.from_record(record, base_dir=folder)
        tasks.append(_task(instance, split, trees))
    return TaskSet(name=f"swe-synth:{folder.name}", version=version or "1", tasks=tuple(tasks))


def _task(instance: SWEInstance, split: str, trees: dict[str, str]) -> Task:
    """:meth:`SWEInstance.to_task`, each repository's tree hashed once (a set has ~100 tasks per repository)."""
    record = instance.to_record()
    repo = instance.repo_path or ""
    if repo not in trees:
        trees[repo] = tree_hash(Path(repo)) if repo and Path(repo).is_dir() else ""
    content = {k: v for k, v in record.items() if k != "repo_path"}
    return Task(world=WORLD, id=instance.instance_id, split=split, difficulty=instance.difficulty, payload=record,
                content_hash=sha256_text(canonical_json(content) + trees[repo]))


class SynthSWEEnv(SWEEnv):
    """``turngym/SWE-v0`` on a synthesized set: ``task_file`` (or ``$TURNGYM_SWE_TASKS``) is its folder or
    ``tasks.jsonl``; ``split`` keeps one of its splits (default: all of them, so a panel can take any with
    ``--split``); ``tier`` keeps one difficulty tier (``--env-arg tier=easy``)."""

    def __init__(self, task_file: str | None = None, split: str | None = None, tier: str | None = None,
                 **kwargs: Any) -> None:
        if kwargs.get("tasks") is None:
            path = task_file or os.environ.get(ENV_VARIABLE)
            if not path:
                raise ValueError(f"SynthSWEEnv needs its set: --env-arg task_file=DIR (or ${ENV_VARIABLE}=DIR), "
                                 "DIR written by `turngym swe synth --out DIR`")
            kwargs["tasks"] = synth_tasks(path, split, tier)
        super().__init__(**kwargs)


def task_panel(split: str, n: int | None, env_kwargs: dict[str, Any], *, workers: int | None = None,
               progress: bool = True) -> TaskSet:
    """The panel of ``turngym/SWE-synth-v0``: the first ``n`` tasks of ``split`` of the set ``task_file`` names (of
    the ``tier`` env argument's tier, when given). A ``split`` env argument, the one split the world then holds, is
    the panel's split (a study's extra panel reaches ``eval_seen`` so: ``panels: {seen: {env_kwargs: {split:
    eval_seen}}}``)."""
    path = env_kwargs.get("task_file") or os.environ.get(ENV_VARIABLE)
    if not path:
        raise ValueError(f"{ENV_ID} needs its set: --env-arg task_file=DIR (or ${ENV_VARIABLE}=DIR)")
    tasks = synth_tasks(path, env_kwargs.get("split") or split, env_kwargs.get("tier"))
    return tasks.take(n) if n is not None and n < len(tasks) else tasks


register(ENV_ID, entry_point=SynthSWEEnv, task_panel=task_panel)
