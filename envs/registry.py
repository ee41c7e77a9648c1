"""Registration of text worlds under gymnasium ids, with each world's task panel.

Built-in worlds live in the ``turngym/`` namespace. A user's world is a small
:class:`~turngym.envs.core.TextEnv` subclass plus one :func:`register` call; ``gymnasium.make(id)`` then
works as for any gymnasium environment (see the README's worked example).

A world may register a *task panel*: the function that lists its tasks for a split, which the
trainer, evaluation and the CLI call through :func:`turngym.envs.panels.task_panel`. Its signature::

    def my_panel(split: str, n: int | None, env_kwargs: dict, *, workers: int | None, progress: bool) -> TaskSet

``n`` is the number of tasks wanted (``None``: all of the split), ``env_kwargs`` the options the world
is made with (so a panel can follow them, e.g. TextWorld's ``config``), ``workers`` and
``progress`` are hints for panels that generate content. A panel that generates its tasks may also take
``first: int`` (the tasks from the ``first``-th on), so a later study's fresh panel (tasks 200-399, say) costs
only the games it plays; one without it is asked for ``first + n`` tasks and sliced. A world without a panel is
asked for its ``tasks`` attribute (a :class:`~turngym.envs.tasks.TaskSet`) instead.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium as gym

from turngym.envs.tasks import TaskSet

NAMESPACE = "turngym"
TaskPanel = Callable[..., TaskSet]
_TEXT_WORLDS: set[str] = set()
_TASK_PANELS: dict[str, str | TaskPanel] = {}


class UnknownWorldError(gym.error.NameNotFound, ValueError):
    """An env id that no module registered (``gymnasium.make`` raises NameNotFound for it too)."""


def register(id: str, entry_point: str | Callable[..., gym.Env], *,  # gymnasium's argument names
             task_panel: str | TaskPanel | None = None, **kwargs: Any) -> None:
    """Register a text world.

    Args:
        id: ``"namespace/Name-vN"``, e.g. ``"myorg/GuessNumber-v0"``.
        entry_point: a :class:`~turngym.envs.core.TextEnv` subclass, or ``"module.path:ClassName"``.
        task_panel: the world's task panel (see the module docstring), or ``"module.path:function"``,
            imported only when a panel is asked for. ``None``: the world's ``tasks`` attribute.
        **kwargs: default constructor arguments; ``gymnasium.make(id, **overrides)`` overrides them.
    """
    from turngym.envs.core import TextEnv

    if isinstance(entry_point, type) and not issubclass(entry_point, TextEnv):
        raise TypeError(f"{entry_point.__name__} is not a TextEnv subclass; text worlds subclass envs.TextEnv")
    if "/" not in id:
        raise ValueError(f"text world ids carry a namespace, e.g. 'myorg/{id}'")
    if task_panel is not None and not (callable(task_panel) or _is_import_path(task_panel)):
        raise TypeError(f"task_panel must be a function or a 'module.path:function' string, got {task_panel!r}")
    # Turn limits are the env's own business (max_turns), so no TimeLimit wrapper is added.
    gym.register(id=id, entry_point=entry_point, kwargs=kwargs)
    _TEXT_WORLDS.add(id)
    if task_panel is None:
        _TASK_PANELS.pop(id, None)
    else:
        _TASK_PANELS[id] = task_panel


def text_world_ids(namespace: str | None = None) -> list[str]:
    """Ids registered through :func:`register`, optionally only those of one namespace."""
    return sorted(i for i in _TEXT_WORLDS if namespace is None or i.startswith(f"{namespace}/"))


def panel_of(env_id: str) -> TaskPanel | None:
    """The task panel ``env_id`` registered (imported now if it was given as a string), or None."""
    panel = _TASK_PANELS.get(env_id)
    return _load(panel, f"the task panel of {env_id}") if isinstance(panel, str) else panel


def require_registered(env_id: str) -> None:
    """Raise :class:`UnknownWorldError` naming close matches when ``env_id`` is not registered."""
    if env_id in gym.registry:
        return
    close = difflib.get_close_matches(env_id, text_world_ids(), n=2, cutoff=0.7)
    close = close or difflib.get_close_matches(env_id, list(gym.registry), n=2, cutoff=0.7)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    known = ", ".join(text_world_ids()) or "none"
    raise UnknownWorldError(
        f"no environment {env_id!r}; {hint}registered text worlds: {known}. Import the module that registers "
        "it first (built-in worlds: `import turngym`; on the command line: --import MODULE or --env module:Class)"
    )


def make(id: str, **kwargs: Any) -> gym.Env:
    """``gymnasium.make`` with a clear error for ids that were never registered."""
    require_registered(id)
    return gym.make(id, **kwargs)


# ---------------------------------------------------------------------- constructor options
def world_creator(env_id: str) -> Callable[..., gym.Env]:
    """What ``gymnasium.make(env_id)`` calls: the world's class (or factory), imported if named by string."""
    require_registered(env_id)
    entry_point = gym.spec(env_id).entry_point
    return _load(entry_point, env_id) if isinstance(entry_point, str) else entry_point


def world_options(env_id: str) -> set[str] | None:
    """The keyword arguments ``gymnasium.make(env_id, ...)`` accepts, read from the constructor's
    signature (following ``**kwargs`` up to the base classes); None when it accepts any."""
    names = _accepted_names(world_creator(env_id))
    return None if names is None else names | set(gym.spec(env_id).kwargs)


def check_world_options(env_id: str, kwargs: Mapping[str, Any]) -> None:
    """Raise ValueError for options the world's constructor does not take, suggesting close ones."""
    accepted = world_options(env_id)
    unknown = sorted(set(kwargs) - accepted) if accepted is not None else []
    if not unknown:
        return
    problems = []
    for name in unknown:
        close = difflib.get_close_matches(name, sorted(accepted), n=1)
        problems.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise ValueError(f"{env_id} takes no option {', '.join(problems)}; it takes: {', '.join(sorted(accepted))}")


def _accepted_names(creator: Callable[..., Any]) -> set[str] | None:
    if not isinstance(creator, type):
        named, forwards = _parameters(creator)
        return None if forwards else named
    names: set[str] = set()
    for cls in creator.__mro__:
        if cls is object or "__init__" not in vars(cls):
            continue
        named, forwards = _parameters(cls.__init__)
        if named is None:
            return None
        names |= named
        if not forwards:  # no **kwargs: the base classes see only what this one passes on
            return names
    return names


def _parameters(function: Callable[..., Any]) -> tuple[set[str] | None, bool]:
    """The named parameters of ``function`` (None: unreadable) and whether it takes ``**kwargs``."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return None, True
    named = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"}
    return named, any(p.kind is p.VAR_KEYWORD for p in parameters)


# ---------------------------------------------------------------------- loading users' worlds
def import_worlds(modules: str | Iterable[str]) -> list[ModuleType]:
    """Import modules that register worlds: dotted names or paths to ``.py`` files (one, or several).

    The current directory is searched too (as ``python -m`` does), and a file's folder is put on
    ``sys.path``, so that worker processes started afterwards can import the module as well.
    """
    loaded = []
    for name in [modules] if isinstance(modules, str) else modules:
        module, folder = name, Path.cwd()
        if name.endswith(".py") or "/" in name:
            path = Path(name).expanduser().resolve()
            if not path.is_file():
                raise FileNotFoundError(f"--import {name}: no such file")
            module, folder = path.stem, path.parent
        _on_sys_path(folder)
        loaded.append(_import(module, f"--import {name}"))
    return loaded


def register_class(entry_point: str) -> str:
    """Register ``"module:Class"`` under the id ``"module/Class-v0"`` (once) and return the id. A dotted module's
    dots become dashes in the namespace (``"pkg.worlds:Maze"`` is ``"pkg-worlds/Maze-v0"``): gymnasium's namespaces
    take no dots, and module names no dashes, so two modules never share an id."""
    module, _, attr = entry_point.partition(":")
    _on_sys_path(Path.cwd())
    creator = _load(entry_point, f"--env {entry_point}")
    env_id = f"{module.replace('.', '-')}/{attr}-v0"
    if env_id not in gym.registry:
        register(env_id, entry_point=creator)
    return env_id


def resolve_env(env: str) -> str:
    """An env id as given, or the id of a ``"module:Class"`` world after registering it."""
    return register_class(env) if is_class_path(env) else env


def is_class_path(value: str) -> bool:
    """``"module:Class"`` (an entry point) rather than ``"namespace/Name-v0"`` (an id)."""
    return _is_import_path(value) and "/" not in value


def _is_import_path(value: Any) -> bool:
    if not isinstance(value, str) or value.count(":") != 1:
        return False
    module, attr = value.split(":")
    return bool(module) and attr.isidentifier() and all(p.isidentifier() for p in module.split("."))


def _load(path: str, what: str) -> Any:
    module, _, attr = path.partition(":")
    if not attr:
        raise ValueError(f"{what}: expected 'module.path:Name', got {path!r}")
    found = getattr(_import(module, what), attr, None)
    if found is None:
        raise ValueError(f"{what}: module {module!r} has no attribute {attr!r}")
    return found


def _import(module: str, what: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name and (module == error.name or module.startswith(f"{error.name}.")):
            raise ValueError(f"{what}: no module named {module!r} (searched the current directory and "
                             "sys.path; set PYTHONPATH or give a path to a .py file)") from None
        raise


def _on_sys_path(folder: Path) -> None:
    if str(folder) not in sys.path and not (folder == Path.cwd() and "" in sys.path):
        sys.path.append(str(folder))  # appended: a user's file never shadows an installed module
