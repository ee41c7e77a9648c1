"""Task panels by env id: the tasks a trainer or an evaluation plays, for any registered world.

Built-in worlds have panel builders (TextWorld and ALFWorld games are generated and cached on
first use). A user's world is asked for its ``tasks`` attribute, so a custom :class:`TextEnv`
that is built with a :class:`~envs.tasks.TaskSet` needs nothing more.
"""

from __future__ import annotations

from typing import Any

from envs.tasks import TaskSet


def task_panel(env_id: str, split: str, n: int | None = None, env_kwargs: dict[str, Any] | None = None, *,
               workers: int | None = None, progress: bool = True) -> TaskSet:
    """The first ``n`` tasks of ``split`` for ``env_id`` (all of them when ``n`` is None)."""
    env_kwargs = dict(env_kwargs or {})
    if env_id == "turngym/TextWorld-v0":
        from envs.textworld import materialise, textworld_tasks

        tasks = textworld_tasks(env_kwargs.get("config", "w2-o3-q4"), split, n=n)
        return materialise(tasks, workers=workers, progress=progress)
    if env_id == "turngym/ALFWorld-v0":
        from envs.alfworld import alfworld_tasks, materialise

        return materialise(alfworld_tasks(split, n=n), workers=workers, progress=progress)
    if env_id == "turngym/SWE-v0":
        from envs.swe.taskset import swe_tasks

        return swe_tasks(split, n=n)
    if env_id == "turngym/Signals-v0":
        from envs.signals import signal_tasks

        options = {k: env_kwargs[k] for k in ("turns", "colours") if k in env_kwargs}
        return signal_tasks(split, n=n or env_kwargs.get("num_tasks", 64), **options)
    return _tasks_of_user_world(env_id, split, n, env_kwargs)


def _tasks_of_user_world(env_id: str, split: str, n: int | None, env_kwargs: dict[str, Any]) -> TaskSet:
    import envs

    env = envs.make(env_id, **env_kwargs)
    try:
        tasks = getattr(env.unwrapped, "tasks", None)
    finally:
        env.close()
    if not isinstance(tasks, TaskSet):
        raise ValueError(
            f"{env_id} has no task panel: build the env with tasks=TaskSet(...) (see README, 'Your own world'), "
            "or pass tasks to the trainer directly"
        )
    chosen = tasks.split(split)  # a KeyError naming the splits it has, never a silent mix of splits
    return chosen.take(n) if n else chosen
