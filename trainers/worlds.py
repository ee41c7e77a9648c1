"""Several worlds in one run: each world's tasks, for ``TurnGymConfig.worlds``.

Each entry names a world (``name``, default: the env id's last part) and overrides any world option of
the run's config (``env_id``, ``env_kwargs``, ``num_train_tasks``, ``max_turns``, ``eval_split``...; the
top-level fields are the defaults); ``weight`` is its share of the groups (see
:class:`~turngym.trainers.curriculum.TaskSampler`)::

    worlds:
      - {name: signals-short, env_id: turngym/Signals-v0, env_kwargs: {turns: 3}, num_train_tasks: 32, weight: 1}
      - {name: signals-long, env_id: turngym/Signals-v0, env_kwargs: {turns: 8}, num_train_tasks: 32, weight: 3}

The entries are parsed and checked with the config (:func:`~turngym.trainers.config_worlds.parse_worlds`, re-exported
here). A task is named by its *key*, ``"<world>::<task id>"`` (task ids of two worlds may be equal); TRL's
dataset holds keys, so a group (``num_generations`` plays of one key) is always one task of one world.
A run with one world keeps plain task ids as keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from turngym.envs.tasks import TaskSet
from turngym.trainers.config_worlds import KEY_SEPARATOR, World, parse_worlds, world_name

__all__ = ["KEY_SEPARATOR", "World", "given_tasks", "parse_worlds", "train_tasks", "world_eval_tasks", "world_name",
           "world_train_tasks"]


def world_train_tasks(world: World) -> TaskSet:
    """The world's training tasks: ``num_train_tasks`` tasks of ``train_split`` after its first
    ``skip_train_tasks``."""
    from turngym.envs.panels import task_panel

    options, skip = world.options, world.skip_train_tasks
    count = options.num_train_tasks
    tasks = task_panel(options.env_id, options.train_split, count + skip if count else None, options.world_kwargs())
    if not skip:
        return tasks
    if skip >= len(tasks):
        raise ValueError(f"skip_train_tasks={skip} leaves no task of the {len(tasks)} in split "
                         f"{options.train_split!r} of {world.name}")
    return TaskSet(name=f"{tasks.name}[{skip}:]", version=tasks.version, tasks=tuple(tasks)[skip:])


def world_eval_tasks(world: World) -> TaskSet | None:
    """The world's held-out panel: ``num_eval_tasks`` tasks of ``eval_split`` (None when it is unset)."""
    from turngym.envs.panels import task_panel

    options = world.options
    if not options.eval_split:
        return None
    return task_panel(options.env_id, options.eval_split, options.num_eval_tasks, options.world_kwargs())


def given_tasks(worlds: Sequence[World], tasks: TaskSet | Mapping[str, TaskSet] | None,
                what: str) -> list[TaskSet | None]:
    """Tasks passed to the trainer, one entry per world (None: build the world's own): a TaskSet for a run
    with one world, a mapping ``world name -> TaskSet`` for several."""
    if tasks is None:
        return [None] * len(worlds)
    if isinstance(tasks, TaskSet):
        if len(worlds) > 1:
            raise ValueError(f"{what}: a run with several worlds takes a mapping world name -> TaskSet, "
                             f"not one TaskSet (worlds: {[w.name for w in worlds]})")
        return [tasks]
    unknown = sorted(set(tasks) - {w.name for w in worlds})
    if unknown:
        raise ValueError(f"{what} names worlds {unknown} that the run does not have: {[w.name for w in worlds]}")
    return [tasks.get(w.name) for w in worlds]


def train_tasks(args: Any) -> TaskSet:
    """The training tasks of a run with one world: ``num_train_tasks`` tasks of ``train_split`` after its first
    ``skip_train_tasks`` (:func:`world_train_tasks`)."""
    worlds = parse_worlds(args)
    if len(worlds) > 1:
        raise ValueError("this run has several worlds: their tasks are world_train_tasks(world) for each")
    return world_train_tasks(worlds[0])
