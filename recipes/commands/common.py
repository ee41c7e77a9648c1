"""What several commands share: the parser class, option builders and checks of the world's options."""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"


class UsageError(Exception):
    """Bad command-line input; ``main`` prints it as one line and exits with status 2."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``turngym eval: error: ...``) instead of usage and exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: error: {message}")


def int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


POSITIVE, NON_NEGATIVE = int_at_least(1), int_at_least(0)


# ---------------------------------------------------------------------- worlds and their options
def import_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import a module that registers worlds (repeatable): a dotted name or a .py file")


def env_options(p: argparse.ArgumentParser, *, env_positional: bool = False, env_required: bool = False,
                split: bool = True) -> None:
    import_option(p)
    env_help = ("gymnasium id of the world, or module:Class (a TextEnv subclass, registered as module/Class-v0; a "
                "dotted module's dots become dashes)")
    if env_positional:
        p.add_argument("env", nargs=None if env_required else "?", default="turngym/TextWorld-v0", help=env_help)
    else:
        p.add_argument("--env", default="turngym/TextWorld-v0", help=env_help)
    p.add_argument("--config", default=None, help="TextWorld only: the game config, e.g. w2-o3-q4 (its default)")
    if split:
        p.add_argument("--split", default=None, help="default: the world's held-out split, 'eval' "
                                                     "(ALFWorld: eval = eval_seen, or eval_unseen)")
    p.add_argument("--reward-mode", default="sparse", choices=["sparse", "dense"])
    p.add_argument("--protocol", default="free_form",
                   choices=["free_form", "admissible_in_prompt", "choose_index", "tools"],
                   help="tools: the world's tools, called in the model's own tool-call syntax")
    p.add_argument("--max-turns", type=POSITIVE, default=None, help="default: the world's (2x the optimal length)")
    p.add_argument("--env-arg", action="append", metavar="KEY=VALUE",
                   help="a constructor option of the world (VALUE may be JSON); repeatable")


def load_worlds(args: argparse.Namespace) -> None:
    """Import ``--import`` modules, register a ``--env module:Class`` world, and check the env id."""
    from turngym.envs.registry import import_worlds, require_registered, resolve_env

    import_worlds(getattr(args, "imports", None) or [])
    if getattr(args, "env", None):
        args.env = resolve_env(args.env)
        require_registered(args.env)


def env_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The world's options from the command line, checked against its constructor."""
    kwargs: dict[str, Any] = {"reward_mode": args.reward_mode, "action_protocol": args.protocol}
    if args.max_turns:
        kwargs["max_turns"] = args.max_turns
    if args.config is not None:
        kwargs["config"] = args.config
    for item in args.env_arg or []:
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise ValueError(f"--env-arg expects KEY=VALUE (VALUE may be JSON), got {item!r}")
        try:
            kwargs[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key.strip()] = value
    _check_env_kwargs(args.env, kwargs, config_given=args.config is not None)
    return kwargs


def _check_env_kwargs(env_id: str, kwargs: dict[str, Any], *, config_given: bool) -> None:
    from turngym.envs.registry import check_world_options, world_options

    accepted = world_options(env_id)
    if config_given and accepted is not None and "config" not in accepted:
        raise ValueError(f"--config is TextWorld's game config; {env_id} takes no 'config' option "
                         "(give a world's own options with --env-arg KEY=VALUE)")
    check_world_options(env_id, kwargs)


# ---------------------------------------------------------------------- checks before a run
def check_out(out: str | None, option: str = "--out") -> None:
    """Create ``out`` and make sure a file can be written there, before the run rather than after it."""
    if out is None:
        return
    path = Path(out).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"{option} {out} is a file; give a folder (it is created when missing)")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path):
            pass
    except OSError as error:
        raise ValueError(f"{option} {out} is not a writable folder ({error.strerror or error}); "
                         "choose another one") from None


def set_threads(threads: int | None, *, load: float | None = None) -> str | None:
    """``--threads``: torch's intra-op threads. Without it, on a busy machine (1-minute load average at least the
    core count), a one-line hint goes to stderr, and is returned: there, torch's default of one thread per core
    made SmolLM2's decoding steps 3-4x slower than one thread did (bench/decode_step.py --busy 2)."""
    import os
    import sys

    import torch

    if threads:
        torch.set_num_threads(threads)
        return None
    load = os.getloadavg()[0] if load is None and hasattr(os, "getloadavg") else load
    cores = os.cpu_count() or 1
    if load is None or cores < 2 or load < cores or torch.get_num_threads() < 2:
        return None
    hint = (f"turngym: this machine is busy (load {load:.1f} on {cores} cores): torch's {torch.get_num_threads()} "
            "threads will wait on each other; --threads 1 can be several times faster")
    print(hint, file=sys.stderr)
    return hint
