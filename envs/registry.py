"""Registration of text worlds under gymnasium ids.

Built-in worlds live in the ``turngym/`` namespace. A user's world is a small
:class:`~envs.core.TextEnv` subclass plus one :func:`register` call; ``gymnasium.make(id)`` then
works as for any gymnasium environment (see the README's worked example).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

NAMESPACE = "turngym"
_TEXT_WORLDS: set[str] = set()


def register(id: str, entry_point: str | Callable[..., gym.Env], **kwargs: Any) -> None:  # noqa: A002 - gymnasium's name
    """Register a text world.

    Args:
        id: ``"namespace/Name-vN"``, e.g. ``"myorg/GuessNumber-v0"``.
        entry_point: a :class:`~envs.core.TextEnv` subclass, or ``"module.path:ClassName"``.
        **kwargs: default constructor arguments; ``gymnasium.make(id, **overrides)`` overrides them.
    """
    from envs.core import TextEnv

    if isinstance(entry_point, type) and not issubclass(entry_point, TextEnv):
        raise TypeError(f"{entry_point.__name__} is not a TextEnv subclass; text worlds subclass envs.TextEnv")
    if "/" not in id:
        raise ValueError(f"text world ids carry a namespace, e.g. 'myorg/{id}'")
    # Turn limits are the env's own business (max_turns), so no TimeLimit wrapper is added.
    gym.register(id=id, entry_point=entry_point, kwargs=kwargs)
    _TEXT_WORLDS.add(id)


def text_world_ids(namespace: str | None = None) -> list[str]:
    """Ids registered through :func:`register`, optionally only those of one namespace."""
    return sorted(i for i in _TEXT_WORLDS if namespace is None or i.startswith(f"{namespace}/"))


def make(id: str, **kwargs: Any) -> gym.Env:  # noqa: A002
    """``gymnasium.make`` with a clear error for ids that were never registered."""
    if id not in gym.registry:
        known = ", ".join(text_world_ids()) or "none"
        raise gym.error.NameNotFound(
            f"no environment {id!r}; registered text worlds: {known}. "
            "Import the module that registers it first (built-in worlds: `import envs`)."
        )
    return gym.make(id, **kwargs)
