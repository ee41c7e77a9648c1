"""``turngym envs``: list the registered worlds."""

from __future__ import annotations

import argparse

from turngym.recipes.commands.common import import_option, load_worlds


def cmd_envs(args: argparse.Namespace) -> int:
    from turngym import envs

    load_worlds(args)
    for env_id in envs.text_world_ids():
        print(env_id)
    return 0


def add(sub) -> None:
    p = sub.add_parser("envs", help="list registered worlds")
    import_option(p)
    p.set_defaults(func=cmd_envs)
