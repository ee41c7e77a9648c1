"""The command line's parser of a run's config (``turngym train``, ``turngym sft``): TRL's ``TrlParser`` with the
fields in argument groups by the option group that declares them.

It builds on two private methods of ``HfArgumentParser`` (TRL's copy of transformers', which ``TrlParser`` extends):
``_add_dataclass_arguments``, overridden, and ``_parse_dataclass_field``, called; and on argparse's ``_actions`` and
help formatter hooks. ``tests/test_trl_contract.py`` pins them.
"""

from __future__ import annotations

import argparse
from dataclasses import fields as dataclass_fields
from typing import Any, get_type_hints

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
