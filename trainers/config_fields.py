"""Checks of single config fields, shared by every option group (``trainers/config.py``, ``config_worlds.py``, SFT's):
choices (``Literal`` types) and dict fields given as JSON on the command line.

TRL's parser turns a ``Literal`` into argparse ``choices`` (the command line); :func:`check_choices` checks what it does
not: values from YAML (argparse never checks defaults) and from Python.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Literal, get_args, get_origin, get_type_hints

# What a bad value's error adds, for a choice that people ask for.
CHOICE_NOTES = {"dynamic_sampling": " ('refill' is not available: TRL's step fixes the generation batch before the "
                                    "advantages are known)"}


def dict_field(value: Any, name: str) -> dict[str, Any]:
    """A dict field given in YAML (already a dict) or on the command line (a JSON string)."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return dict(value)
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as error:
        raise ValueError(f"{name} must be a JSON object, e.g. '{{\"turns\": 3}}'; got {value!r} ({error})") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"{name} must be a JSON object, got {value!r}")  # noqa: TRY004 - a bad config value
    return parsed


def group_of(config_class: type, name: str) -> type | None:
    """The class in ``config_class``'s MRO that declares field ``name`` (the most derived one)."""
    return next((c for c in config_class.__mro__ if name in vars(c).get("__annotations__", {})), None)


@functools.cache
def _choices(group: type) -> dict[str, tuple[tuple[Any, ...], bool]]:
    """``group``'s own Literal fields: name -> (choices, None allowed)."""
    hints = get_type_hints(group)
    found = {}
    for name in vars(group).get("__annotations__", {}):
        hint, optional = hints[name], False
        if get_origin(hint) is not Literal and type(None) in get_args(hint):  # Optional[Literal[...]]
            hint, optional = next(a for a in get_args(hint) if a is not type(None)), True
        if get_origin(hint) is Literal:
            found[name] = (get_args(hint), optional)
    return found


def check_choices(config: Any, *groups: type) -> None:
    """Every Literal field of ``groups`` (default: every turngym class of ``config``) holds one of its choices."""
    groups = groups or tuple(c for c in type(config).__mro__ if c.__module__.startswith("turngym"))
    for group in groups:
        for name, (choices, optional) in _choices(group).items():
            value = getattr(config, name)
            if (value is None and optional) or value in choices:
                continue
            note = CHOICE_NOTES.get(name, "")
            raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}"
                             f"{' or None' if optional else ''}, got {value!r}{note}")
