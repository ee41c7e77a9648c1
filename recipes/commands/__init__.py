"""The ``turngym`` subcommands, one module per command or tight family of commands.

Each module exposes ``add(subparsers)``, which registers its parser(s) and sets ``func``;
``turngym.recipes.cli`` lists the modules in the order ``turngym --help`` shows them. A module
imports only the standard library at its top: heavy imports (torch, trl, ...) happen inside the
command functions, so the CLI starts fast.
"""
