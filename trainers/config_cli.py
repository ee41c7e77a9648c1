"""The command line's parser of a run's config (``turngym train``, ``turngym sft``): TRL's ``TrlParser`` with the
fields in argument groups by the option group that declares them.

It builds on two private methods of ``HfArgumentParser`` (TRL's copy of transformers', which ``TrlParser`` extends):
``_add_dataclass_arguments``, overridden, and ``_parse_dataclass_field``, called; and on argparse's ``_actions`` and
help formatter hooks. ``tests/test_trl_contract.py`` pins them.
"""

from __future__ import annotations

import argparse
import enum
import types
from dataclasses import fields as dataclass_fields
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from trl import TrlParser

from turngym.trainers.config import GROUPS, LoraOptions
from turngym.trainers.config_fields import group_of

# The TRL and transformers fields `--help` names (`--help-all` shows every one).
COMMON_TRL_FIELDS = ("output_dir", "learning_rate", "max_steps", "per_device_train_batch_size", "num_generations",
                     "max_completion_length", "max_length", "beta", "use_vllm", "bf16", "seed")


class ConfigParser(TrlParser):
    """TRL's parser (``--config FILE.yaml`` plus ``--field value``) for one config class, its fields in argument
    groups by the class that declares them: the config's own, world, rollout, estimator, critic, then TRL's
    config (GRPOConfig or SFTConfig), model (ModelConfig's LoRA names) and transformers' TrainingArguments.

    It parses one flat dataclass (the object TRL's trainer takes); only the help is grouped. With
    ``full_help=False`` the help shows turngym's fields and names the common TRL ones (:data:`COMMON_TRL_FIELDS`).
    """

    def __init__(self, config_class: type, *, full_help: bool = True, **kwargs: Any) -> None:
        self._full_help = full_help
        kwargs.setdefault("formatter_class", _HelpFormatter)
        kwargs.setdefault("usage", f"{kwargs.get('prog') or '%(prog)s'} [--config FILE.yaml] [--field value ...]")
        super().__init__([config_class], **kwargs)

    def _add_dataclass_arguments(self, dtype: Any) -> None:  # HfArgumentParser's, with one group per class
        trl_base = next(c for c in dtype.__mro__ if c.__module__.startswith("trl"))
        groups = {cls: (title, text) for cls, title, text in GROUPS}
        own = dtype not in groups and bool(vars(dtype).get("__annotations__"))
        order = ([dtype] if own else []) + [g for g, *_ in GROUPS if g is not LoraOptions]
        order += [trl_base, LoraOptions, next(c for c in dtype.__mro__ if c.__module__.startswith("transformers"))]
        common = None if self._full_help else (
            f"every field of TRL's {trl_base.__name__} and transformers' TrainingArguments, e.g. "
            + ", ".join(f"--{name}" for name in COMMON_TRL_FIELDS if name in dtype.__dataclass_fields__)
            + "; `--help-all` lists them all")
        titles = {dtype: (dtype.__name__, None), **{c: (f"{t}: {text}", None) for c, (t, text) in groups.items()},
                  trl_base: (f"TRL {trl_base.__name__}", common), order[-1]: ("transformers TrainingArguments", None)}
        sections = {cls: self.add_argument_group(*titles[cls]) for cls in order if issubclass(dtype, cls)}
        hints = get_type_hints(dtype)
        for spec in dataclass_fields(dtype):
            if not spec.init:
                continue
            owner = group_of(dtype, spec.name)
            section = sections.get(owner) or (sections[trl_base] if owner.__module__.startswith("trl")
                                              else sections[order[-1]])
            spec.type = hints[spec.name]
            before = len(self._actions)
            self._parse_dataclass_field(section, spec)
            hidden = not owner.__module__.startswith("turngym")  # TRL's: named in --help, in full in --help-all
            for action in self._actions[before:]:
                if action.choices is None and action.nargs != 0:  # short metavars keep the help on one column
                    action.metavar = {int: "N", float: "X"}.get(action.type, "BOOL" if action.const is True else "V")
                if (hidden and not self._full_help) or action.option_strings[0].startswith("--no_"):
                    action.help = argparse.SUPPRESS  # --no_<flag> is --<flag> false: its help is the flag's
                elif action.help:
                    action.help = action.help.replace("%", "%%")


class _HelpFormatter(argparse.HelpFormatter):
    """Adds the default to a field's help unless the help already says it; shows ``--field`` only (the parser also
    takes ``--field-name`` for ``--field_name``)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text.lower() or action.default in (None, [], argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)"

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if not action.option_strings or action.nargs == 0:
            return super()._format_action_invocation(action)
        return f"{action.option_strings[0]} {self._format_args(action, self._get_default_metavar_for_optional(action))}"


# ---------------------------------------------------------------------- YAML values against the fields' types
_KIND_NAMES = {"integer": "an integer", "number": "a number", "boolean": "true or false", "text": "text",
               "list": "a list", "mapping": "a mapping"}


def field_kinds(hint: Any) -> set[str] | None:
    """The YAML kinds a field of type ``hint`` takes (None: any). A scalar field also takes text (the parser reads
    it: ``1e-5``, ``yes``)."""
    if hint is Any:
        return None
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        kinds: set[str] = set()
        for arg in get_args(hint):
            if arg is type(None):
                continue
            more = field_kinds(arg)
            if more is None:
                return None
            kinds |= more
        return kinds
    if origin is Literal:
        return {"integer", "number", "boolean", "text"}
    if origin in (list, tuple) or hint in (list, tuple):
        return {"list", "integer", "number", "boolean", "text"}  # one value for a list is a list of one
    if origin is dict or hint is dict:
        return {"mapping"}
    if hint is bool:
        return {"boolean", "text", "integer"}
    if hint is int:
        return {"integer", "text"}
    if hint is float:
        return {"integer", "number", "text"}
    if hint is str or (isinstance(hint, type) and issubclass(hint, enum.Enum)):
        return {"integer", "number", "boolean", "text"}
    return None  # a class of its own (e.g. accelerate's ParallelismConfig): not checked here


def value_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list | tuple):
        return "list"
    return "mapping" if isinstance(value, dict) else "text"


def yaml_type_problems(data: dict[str, Any], config_class: type) -> list[str]:
    """``field max_steps must be an integer, got a list ([1, 2])`` for each value of a YAML config whose kind the
    field's type does not take (TRL would otherwise fail deep in its own code with a traceback). ``null`` passes:
    the parser reports it where it matters."""
    hints = get_type_hints(config_class)
    problems = []
    for name, value in data.items():
        if value is None or name not in hints:
            continue
        kinds = field_kinds(hints[name])
        if kinds is None or value_kind(value) in kinds:
            continue
        wanted = next((_KIND_NAMES[k] for k in ("mapping", "list") if k in kinds), None) or (
            "true or false" if kinds == {"boolean", "text", "integer"} else "an integer" if kinds == {"integer", "text"}
            else "a number" if kinds == {"integer", "number", "text"} else "one value")
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        problems.append(f"field {name} must be {wanted}, got {_KIND_NAMES[value_kind(value)]} ({shown})")
    return problems
