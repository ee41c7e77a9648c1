"""``turngym check-template``: is a model's chat template append-only (exact token bookkeeping)?"""

from __future__ import annotations

import argparse

from turngym.recipes.commands.common import DEFAULT_MODEL


def cmd_check_template(args: argparse.Namespace) -> int:
    from transformers import AutoTokenizer

    from turngym.agents.chat import check_chat_template
    from turngym.agents.models import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(args.model))
    report = check_chat_template(tokenizer, tools=args.tools, tool_syntax=args.tool_syntax)
    print(f"{args.model}{' (tool turns: calls and tool answers)' if args.tools else ''}\n{report.summary()}")
    return 0


def add(sub) -> None:
    p = sub.add_parser("check-template", help="is a model's chat template append-only? (exact token bookkeeping)")
    p.add_argument("--model", default=DEFAULT_MODEL, help="Hub name or local folder")
    p.add_argument("--tools", action="store_true", help="check tool turns: the replies call a tool, tools answer")
    p.add_argument("--tool-syntax", choices=["hermes", "llama3", "mistral"], default=None,
                   help="with --tools: the model's call syntax (default: read from the template)")
    p.set_defaults(func=cmd_check_template)
