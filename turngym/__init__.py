"""turngym: multi-turn reinforcement learning for LLM agents.

The repository keeps ``envs/``, ``agents/``, ``trainers/`` and ``recipes/`` at its top level; they
install as ``turngym.envs``, ``turngym.agents``, ``turngym.trainers`` and ``turngym.recipes``.
Importing ``turngym`` registers the built-in worlds with gymnasium::

    import gymnasium as gym
    import turngym

    env = gym.make("turngym/Signals-v0")

Worlds and training need their extras: ``pip install "turngym[textworld]"`` (or ``alfworld``,
``swe``, ``train``, ``all``).
"""

from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec

if find_spec("turngym.envs") is None:  # a clone on sys.path, never installed: turngym/ alone has no envs
    raise ImportError(
        "turngym is not installed: its folders envs/, agents/, trainers/ and recipes/ become turngym.envs, "
        "turngym.agents, ... only through the install. In the clone run `make install` (or `pip install -e .`) and "
        "use that environment (`.venv/bin/python`)")

from turngym import envs
from turngym.envs import TextEnv, WorldState, check_text_env, make, register

try:
    __version__ = version("turngym")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["TextEnv", "WorldState", "__version__", "check_text_env", "envs", "make", "register"]
