"""The TRL internals TurnGymTrainer builds on, pinned: this test fails loudly when they change.

TurnGymTrainer extends TRL's GRPOTrainer through its documented hook (``rollout_func``) and by
overriding private methods (the only way TRL offers per-token advantages, a critic step and the
critic's checkpoints). Private methods change without notice, so pyproject pins TRL exactly and
this test records the source of every private method the trainer overrides or relies on. When a
new TRL changes one, re-read it against trainers/trainer.py, adapt the override, then update the
digest here and the pin in pyproject.toml together.

trainers/trainer.py is the one module that touches TRL's privates: every ``self._name`` and
``super()._name`` it uses that it does not define itself is listed here, and the modules it hands the
work to (critic, TIS, layouts, metrics, estimators...) import no TRL at all.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

trl = pytest.importorskip("trl")

from turngym.trainers.trainer import TurnGymTrainer

ROOT = Path(__file__).resolve().parent.parent
# sha256 of inspect.getsource(GRPOTrainer.<name>) in the pinned TRL.
REVIEWED_SOURCE = {
    "_generate": "2a27fdf8f5e6f3562508eec3efb9e9dade2e0bf810de5031cdfab429d0a048f2",
    "_generate_and_score_completions": "1fa48922792dcd5c72da155cfe99db477771a7c61cde15519fe8c86d0cdc0b65",
    "_compute_loss": "80295546bbdbf6f711acce7f6e69b0100ab40aa8f23ed8052cc564ff024e3e40",
    "_save_checkpoint": "ec91bde1236491119dc68afed1d02f087b62b17f910521f8e4ba1360cc0b0e20",
    "_load_optimizer_and_scheduler": "5c1772becdfd7fdb07894217ecdb6dd715305d77377e338da8d635a88548f3fb",
    "_get_per_token_logps_and_entropies": "ea73c3909275851d0cd664b1e7694905fdcd9c285e848ae923d7402234f2edce",
    "_get_train_sampler": "36497afb4d311dc9a80d914d27893fe075c5bbc7edde8586edfa60125e980799",
    # public, but the critic's optimizer step reads the micro-batch counter it keeps (_step)
    "training_step": "9e18632f7dd8e8d8f0ebbdcc4431feb1a9e3c037a02cf8c3aec38aa68ee58814",
}
# Overridden above; _generate is not overridden, but the trainer relies on how it hands
# rollout_func's extra keys (env_mask, episode) on, so it is pinned too. _get_per_token_logps_and_entropies
# is overridden to project only the positions the loss reads (its fallback calls TRL's). _get_train_sampler
# is replaced only for weighted worlds or a curriculum, by a sampler with RepeatSampler's layout.
OVERRIDDEN = {"_generate_and_score_completions", "_compute_loss", "_save_checkpoint", "_load_optimizer_and_scheduler",
              "_get_train_sampler", "_get_per_token_logps_and_entropies"}
# Private attributes of TRL's GRPOTrainer the adapter reads: step metrics (_metrics), the micro-batch counter that
# places the critic's optimizer step at the accumulation boundary (_step), the tokenizer (_tokenizer, per-turn rows).
TRL_ATTRIBUTES = {"_metrics", "_step", "_tokenizer"}
# transformers' Trainer private the checkpoint hook calls (where checkpoint-N goes; transformers is pinned to 5.x).
TRANSFORMERS_PRIVATE = {"_get_output_dir"}
# Modules that hold what the adapter hands over: no TRL import at all.
TRL_FREE = ("advantages", "assembly", "critic", "curriculum", "episodes", "estimators", "layouts", "metrics", "tis",
            "worlds")


def pinned_trl() -> str:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (requirement,) = [Requirement(r) for r in extras["train"] if Requirement(r).name == "trl"]
    (spec,) = requirement.specifier
    assert spec.operator == "==", f"pyproject pins trl{requirement.specifier}; pin it exactly (==): see this module"
    return spec.version


def test_installed_trl_is_the_pinned_one():
    assert version("trl") == pinned_trl(), "reinstall (make install) or review the new TRL with this module's steps"


@pytest.mark.parametrize("name", sorted(REVIEWED_SOURCE))
def test_private_trl_methods_are_the_reviewed_ones(name):
    source = inspect.getsource(getattr(trl.GRPOTrainer, name))
    digest = hashlib.sha256(source.encode()).hexdigest()
    assert digest == REVIEWED_SOURCE[name], (
        f"TRL {version('trl')} changed GRPOTrainer.{name}, which TurnGymTrainer "
        f"{'overrides' if name in OVERRIDDEN else 'relies on'} (reviewed against trl {pinned_trl()}). "
        "Re-read it against trainers/trainer.py, adapt, then update REVIEWED_SOURCE and the pin."
    )


def test_every_private_override_is_pinned_here():
    """A new private override of a TRL method must be added to REVIEWED_SOURCE."""
    ours = {name for name, value in vars(TurnGymTrainer).items()
            if name.startswith("_") and not name.startswith("__") and callable(value)}
    theirs = {name for name in ours if any(name in vars(base) for base in trl.GRPOTrainer.__mro__)}
    assert theirs == OVERRIDDEN, f"private TRL/transformers methods overridden but not pinned: {theirs - OVERRIDDEN}"


@pytest.mark.parametrize("name", sorted(OVERRIDDEN))
def test_overrides_keep_the_parent_signature(name):
    ours = inspect.signature(getattr(TurnGymTrainer, name))
    theirs = inspect.signature(getattr(trl.GRPOTrainer, name))
    assert list(ours.parameters) == list(theirs.parameters), f"{name}: ours {ours}, TRL's {theirs}"


def private_names_used() -> tuple[set[str], set[str]]:
    """``self._name`` and ``super()._name`` in trainers/trainer.py."""
    tree = ast.parse((ROOT / "trainers" / "trainer.py").read_text())
    on_self, on_super = set(), set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            on_self.add(node.attr)
        elif isinstance(node.value, ast.Call) and getattr(node.value.func, "id", None) == "super":
            on_super.add(node.attr)
    return on_self, on_super


def test_every_trl_private_the_adapter_touches_is_pinned_here():
    on_self, on_super = private_names_used()
    ours = set(vars(TurnGymTrainer))
    theirs = on_self - ours
    assert theirs <= set(REVIEWED_SOURCE) | TRL_ATTRIBUTES | TRANSFORMERS_PRIVATE, (
        f"trainers/trainer.py uses private TRL/transformers names that are not pinned: "
        f"{sorted(theirs - set(REVIEWED_SOURCE) - TRL_ATTRIBUTES - TRANSFORMERS_PRIVATE)}")
    assert on_super <= set(REVIEWED_SOURCE), f"super() calls of unpinned privates: {on_super - set(REVIEWED_SOURCE)}"
    source = inspect.getsource(trl.GRPOTrainer)
    for name in TRL_ATTRIBUTES:  # still TRL's: set by GRPOTrainer itself
        assert f"self.{name} =" in source, f"GRPOTrainer no longer sets {name}: re-read trainers/trainer.py's use of it"
    from transformers import Trainer

    assert list(inspect.signature(Trainer._get_output_dir).parameters) == ["self", "trial"]


@pytest.mark.parametrize("module", TRL_FREE)
def test_the_modules_behind_the_adapter_import_no_trl(module):
    tree = ast.parse((ROOT / "trainers" / f"{module}.py").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert not {name for name in imported if name == "trl" or name.startswith("trl.")}, (
        f"trainers/{module}.py imports TRL: only trainers/trainer.py adapts to it")


def test_trls_loss_hands_the_model_only_to_its_forward_pass():
    """TurnGymTrainer._compute_loss passes TRL a LossForward (the model with its micro-batch) as ``model``: sound only
    while TRL's loss uses ``model`` for nothing but the first argument of _get_per_token_logps_and_entropies."""
    import textwrap

    tree = ast.parse(textwrap.dedent(inspect.getsource(trl.GRPOTrainer._compute_loss)))
    uses = [node for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id == "model"]
    forward_calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
                     and getattr(node.func, "attr", None) == "_get_per_token_logps_and_entropies"]
    handed = [call.args[0] for call in forward_calls if call.args and getattr(call.args[0], "id", None) == "model"]
    assert len(uses) == len(handed) == 1, "TRL's _compute_loss now uses `model` elsewhere: re-read LossForward"


def test_the_adapter_passes_no_batch_between_overrides_through_self():
    """No attribute of the trainer is set in one override to be read in another (the loss's micro-batch travels
    as an argument, LossForward)."""
    tree = ast.parse((ROOT / "trainers" / "trainer.py").read_text())
    (cls,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "TurnGymTrainer"]
    set_outside_init = {
        target.attr
        for method in cls.body if isinstance(method, ast.FunctionDef) and method.name != "__init__"
        for node in ast.walk(method) if isinstance(node, ast.Assign | ast.AugAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        for target in (target.elts if isinstance(target, ast.Tuple) else [target])
        if isinstance(target, ast.Attribute) and getattr(target.value, "id", None) == "self"}
    # beta: zeroed inside _compute_loss's own call to TRL's loss (kl_penalty=reward) and restored before it returns.
    assert set_outside_init <= {"beta"}, f"state set on the trainer outside __init__: {sorted(set_outside_init)}"


# ---------------------------------------------------------------------- the config's command-line parser
# The HfArgumentParser privates that trainers/config_cli.py's ConfigParser builds on. TrlParser extends TRL's own copy
# of transformers' HfArgumentParser (trl.scripts._hf_argparser, pinned with TRL): the sha256 of
# inspect.getsource(<it>.<name>) in the pinned TRL. _add_dataclass_arguments is overridden (the same walk over the
# fields, with one argument group per option group), _parse_dataclass_field is called for each field. When one
# changes, re-read it against config_cli.py, adapt, then update the digest here.
HF_PARSER_SOURCE = {
    "_add_dataclass_arguments": "7681162e0ef3b0ba3bf23518cb14d704b6c6a3bea4d80eb7be436d3c70ad39a1",
    "_parse_dataclass_field": "bae95ae7037b5d39cb678bcdf04b5a368bb697b3aabf0b5e0a514139787e1447",
}
HF_PARSER_OVERRIDDEN = {"_add_dataclass_arguments"}
# argparse's privates it uses (the standard library's): the parser's actions and the help formatter's hooks.
ARGPARSE_PRIVATE = {"_actions", "_get_help_string", "_format_action_invocation", "_format_args",
                    "_get_default_metavar_for_optional"}


def hf_argument_parser() -> type:
    """The HfArgumentParser ConfigParser extends (through TRL's TrlParser)."""
    from turngym.trainers.config_cli import ConfigParser

    return next(c for c in ConfigParser.__mro__ if c.__name__ == "HfArgumentParser")


@pytest.mark.parametrize("name", sorted(HF_PARSER_SOURCE))
def test_the_argument_parser_privates_are_the_reviewed_ones(name):
    parser = hf_argument_parser()
    digest = hashlib.sha256(inspect.getsource(getattr(parser, name)).encode()).hexdigest()
    assert digest == HF_PARSER_SOURCE[name], (
        f"TRL {version('trl')} changed {parser.__module__}.HfArgumentParser.{name}, which trainers/config_cli.py's "
        f"ConfigParser {'overrides' if name in HF_PARSER_OVERRIDDEN else 'calls'}: re-read it against config_cli.py, "
        "adapt, then update HF_PARSER_SOURCE")


def test_the_config_parser_uses_only_the_pinned_privates():
    import argparse

    from turngym.trainers.config_cli import ConfigParser, _HelpFormatter

    tree = ast.parse((ROOT / "trainers" / "config_cli.py").read_text())
    private = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr.startswith("_")
               and not node.attr.startswith("__")}
    private |= {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name.startswith("_")
                and not node.name.startswith("__")}
    own = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)}
    assert private - own <= set(HF_PARSER_SOURCE) | ARGPARSE_PRIVATE, (
        f"trainers/config_cli.py uses privates that are not pinned: {sorted(private - own - set(HF_PARSER_SOURCE))}")
    assert all(hasattr(argparse.HelpFormatter, name) for name in ARGPARSE_PRIVATE - {"_actions"})
    assert hasattr(argparse.ArgumentParser(), "_actions")
    for parent, ours, name in ((hf_argument_parser(), ConfigParser, "_add_dataclass_arguments"),
                               (argparse.HelpFormatter, _HelpFormatter, "_get_help_string"),
                               (argparse.HelpFormatter, _HelpFormatter, "_format_action_invocation")):
        theirs = list(inspect.signature(getattr(parent, name)).parameters)
        assert list(inspect.signature(getattr(ours, name)).parameters) == theirs, f"{name}: the parent's are {theirs}"
