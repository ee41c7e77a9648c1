"""configlite: INI-style configuration with typed values and environment overrides."""

from configlite.convert import to_bool, to_int, to_list
from configlite.env import apply_env
from configlite.parser import ParseError, parse

__all__ = ["ParseError", "apply_env", "parse", "to_bool", "to_int", "to_list"]
