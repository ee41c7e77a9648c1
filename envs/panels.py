"""Task panels by env id: the tasks a trainer or an evaluation plays, for any registered world.

Each world registers its own panel builder (``register(id, entry_point, task_panel=...)``, see
:mod:`turngym.envs.registry` for its signature); the built-in ones generate and cache TextWorld and
ALFWorld games on first use. A world without one is asked for its ``tasks`` attribute, so a custom
:class:`~turngym.envs.core.TextEnv` that is built with a :class:`~turngym.envs.tasks.TaskSet` needs
nothing more.
"""

from __future__ import annotations

from typing import Any

from turngym.envs.tasks import TaskSet


def task_panel(env_id: str, split: str, n: int | None = None, env_kwargs: dict[str, Any] | None = None, *,
               workers: int | None = None, progress: bool = True) -> TaskSet:
    """The first ``n`` tasks of ``split`` for ``env_id`` (all of them when ``n`` is None).

    ``env_kwargs`` are the options the world is made with; the panel follows the ones that shape
    its tasks (TextWorld's ``config``, Signals' ``turns``...).
    """
    from turngym.envs.registry import panel_of, require_registered

    require_registered(env_id)
    if n is not None and n < 1:
        raise ValueError(f"a task panel needs at least one task, got n={n}")
    env_kwargs = dict(env_kwargs or {})
    builder = panel_of(env_id)
    if builder is None:
        return _tasks_of_user_world(env_id, split, n, env_kwargs)
    tasks = builder(split, n, env_kwargs, workers=workers, progress=progress)
    if not isinstance(tasks, TaskSet):
        raise TypeError(f"the task panel of {env_id} returned {type(tasks).__name__}, not a TaskSet")
    return tasks


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
