"""Where an ALFWorld task's game comes from: the offline generator or the official data.

This module sits above :mod:`turngym.envs.alfworld.generation` and
:mod:`turngym.envs.alfworld.official` (official imports generation's file layout), so neither of
them imports the other's caller.
"""

from __future__ import annotations

from pathlib import Path

from turngym.envs.alfworld.generation import GameFiles, GameSpec, generate_game, generate_games
from turngym.envs.alfworld.official import is_official, official_content_hash, official_files
from turngym.envs.tasks import Task, TaskSet


def materialise(
    tasks: TaskSet, *, workers: int | None = None, progress: bool = True, data_dir: str | Path | None = None
) -> TaskSet:
    """Generate every game of ``tasks``; return the set with content hashes (splits re-checked).

    Official games (``data_dir``, default ``$ALFWORLD_DATA``) are hashed, not generated.
    """
    generated = [t for t in tasks if not is_official(t)]
    hashes = generate_games([GameSpec.from_payload(t.payload) for t in generated], workers=workers, progress=progress)
    by_id = {t.id: hashes[GameSpec.from_payload(t.payload)] for t in generated}
    by_id.update({t.id: official_content_hash(t, data_dir) for t in tasks if is_official(t)})
    return tasks.with_content_hashes(by_id)


def task_files(task: Task, data_dir: str | Path | None = None) -> GameFiles:
    """The files of a task: generated on first use, or the official trial under ``data_dir``."""
    if is_official(task):
        return official_files(task, data_dir)
    return generate_game(GameSpec.from_payload(task.payload))
