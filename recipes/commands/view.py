"""``turngym view``: one static HTML page of the episodes in a results folder or episode file."""

from __future__ import annotations

import argparse


def cmd_view(args: argparse.Namespace) -> int:
    from turngym.recipes import view

    return view.main_with(args)


def add(sub) -> None:
    from turngym.recipes import view

    p = sub.add_parser("view", help="one static HTML page of the episodes in a results folder or episode file")
    view.add_arguments(p)
    p.set_defaults(func=cmd_view)
