"""Task panels by env id: the tasks a trainer or an evaluation plays, for any registered world.

Each world registers its own panel builder (``register(id, entry_point, task_panel=...)``, see
:mod:`turngym.envs.registry` for its signature); the built-in ones generate and cache TextWorld and
ALFWorld games on first use. A world without one is asked for its ``tasks`` attribute, so a custom
:class:`~turngym.envs.core.TextEnv` that is built with a :class:`~turngym.envs.tasks.TaskSet` needs
nothing more.
"""

from __future__ import annotations

import inspect
from typing import Any

from turngym.envs.tasks import TaskSet


def task_panel(env_id: str, split: str, n: int | None = None, env_kwargs: dict[str, Any] | None = None, *,
               first: int = 0, workers: int | None = None, progress: bool = True) -> TaskSet:
    """The first ``n`` tasks of ``split`` for ``env_id`` (all of them when ``n`` is None), or with ``first`` the
    ``n`` from the ``first``-th on (named ``<split>[first:first+n]``, as :meth:`TaskSet.take` names them).

    ``env_kwargs`` are the options the world is made with; the panel follows the ones that shape
    its tasks (TextWorld's ``config``, Signals' ``turns``...). A panel builder that takes ``first`` generates
    only those tasks (:mod:`turngym.envs.registry`); any other is asked for ``first + n`` and sliced.
    """
    from turngym.envs.registry import panel_of, require_registered

    require_registered(env_id)
    if n is not None and n < 1:
        raise ValueError(f"a task panel needs at least one task, got n={n}")
    if first < 0:
        raise ValueError(f"first must be 0 or more, got {first}")
    env_kwargs = dict(env_kwargs or {})
    builder = panel_of(env_id)
    wanted = None if n is None else first + n
    takes_first = first and builder is not None and "first" in inspect.signature(builder).parameters
    if builder is None:
        tasks = _tasks_of_user_world(env_id, split, wanted, env_kwargs)
    elif takes_first:
        tasks = builder(split, n, env_kwargs, first=first, workers=workers, progress=progress)
    else:
        tasks = builder(split, wanted, env_kwargs, workers=workers, progress=progress)
    if not isinstance(tasks, TaskSet):
        raise TypeError(f"the task panel of {env_id} returned {type(tasks).__name__}, not a TaskSet")
    return tasks.take(n, start=first) if first and not takes_first else tasks


def eval_split(env_id: str, env_kwargs: dict[str, Any] | None = None) -> str:
    """The held-out split of a world: ``"eval"`` for a world with a registered panel (ALFWorld reads it
    as eval_seen); for a world with its own ``tasks``, ``"eval"`` if it has one, else its only split
    besides ``"train"``."""
    from turngym.envs.registry import panel_of

    if panel_of(env_id) is not None:
        return "eval"
    tasks = world_tasks(env_id, env_kwargs)
    splits = tasks.splits if tasks is not None else ()
    held_out = [s for s in splits if s != "train"]
    if "eval" in splits or not splits:
        return "eval"
    if len(held_out) == 1:
        return held_out[0]
    raise ValueError(f"{env_id} has no 'eval' split; choose one of its splits {splits} with --split")


def world_tasks(env_id: str, env_kwargs: dict[str, Any] | None = None) -> TaskSet | None:
    """The ``tasks`` a world is built with by default (its ``tasks`` attribute), or None."""
    from turngym import envs

    env = envs.make(env_id, **dict(env_kwargs or {}))
    try:
        tasks = getattr(env.unwrapped, "tasks", None)
    finally:
        env.close()
    return tasks if isinstance(tasks, TaskSet) else None


def _tasks_of_user_world(env_id: str, split: str, n: int | None, env_kwargs: dict[str, Any]) -> TaskSet:
    tasks = world_tasks(env_id, env_kwargs)
    if tasks is None:
        raise ValueError(
            f"{env_id} has no task panel: build the env with tasks=TaskSet(...) (see README, 'Your own world'), "
            "register it with task_panel=..., or pass tasks to the trainer directly"
        )
    chosen = tasks.split(split)  # a KeyError naming the splits it has, never a silent mix of splits
    return chosen.take(n) if n and n < len(chosen) else chosen


def task_templates(tasks: TaskSet) -> dict[str, str] | None:
    """Each task's quest template, for worlds that define one, else None.

    TextWorld: the walkthrough with entity names replaced by their types
    (:func:`~turngym.envs.textworld.generation.quest_template`): two games that share it ask for the same
    plan over other objects.
    """
    if not len(tasks) or any(task.world != "textworld" for task in tasks):
        return None
    from turngym.envs.textworld.generation import task_files

    return {task.id: task_files(task).template for task in tasks}


def template_overlap(train: TaskSet, held_out: TaskSet) -> dict[str, Any]:
    """How many held-out tasks share a quest template with a training task (:func:`task_templates`).

    Not an error: a small world has few templates, so held-out games repeat training plans over other
    objects, and a study's reader should know how many do. Returns the counts, the fraction and the most
    shared templates; ``{"templates": None}`` for a world without templates.
    """
    train_templates, held_templates = task_templates(train), task_templates(held_out)
    if train_templates is None or held_templates is None:
        return {"templates": None, "held_out": len(held_out), "train": len(train)}
    known = set(train_templates.values())
    shared = [template for template in held_templates.values() if template in known]
    counts: dict[str, int] = {}
    for template in shared:
        counts[template] = counts.get(template, 0) + 1
    return {
        "templates": len(set(held_templates.values())), "held_out": len(held_out), "train": len(train),
        "train_templates": len(known), "shared": len(shared),
        "shared_fraction": len(shared) / len(held_out) if len(held_out) else 0.0,
        "most_shared": sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:5],
    }
