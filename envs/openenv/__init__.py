"""turngym worlds over OpenEnv: serve any registered world, and play served worlds from a pool.

* :mod:`~turngym.envs.openenv.server`: ``turngym serve ENV_ID`` (:func:`serve`), one world per
  OpenEnv session;
* :mod:`~turngym.envs.openenv.client`: :class:`TurnGymClient` (OpenEnv's ``EnvClient``) and
  :func:`served_panel` (a split's tasks from the server's task API);
* :mod:`~turngym.envs.openenv.pool`: :class:`RemotePool`, the ``EnvPool`` interface over remote
  sessions (``make_pool(..., backend="remote", server=URL)``);
* :mod:`~turngym.envs.openenv.world`: :class:`OpenEnvWorld`, ``turngym/OpenEnv-v0``: any OpenEnv
  server (turngym's or another) played as a world, through OpenEnv's own client;
* :mod:`~turngym.envs.openenv.protocol`: the messages (``{"command": str}`` in, text, turn reward,
  ``done`` and the world's info out);
* :mod:`~turngym.envs.openenv.security`: what a server assumes of its clients (a token, tasks by id,
  no solutions in replies, idle sessions closed) and the clients of a server.

Needs the ``serve`` extra: ``pip install "turngym[serve]"``. See docs/scaling.md.
"""

from __future__ import annotations

import importlib
from typing import Any

from turngym._extras import require

require("openenv", extra="serve", feature="Serving worlds over OpenEnv")

_EXPORTS = {
    "TurnAction": "protocol", "TurnObservation": "protocol", "TurnGymState": "protocol",
    "TurnGymClient": "client", "RemoteSession": "client", "served_panel": "client",
    "RemotePool": "pool",
    "ServedWorld": "server", "ServerProcess": "server", "TurnGymEnvironment": "server", "build_app": "server",
    "serve": "server",
    "OpenEnvWorld": "world", "observation_text": "world",
}
__all__ = ["OpenEnvWorld", "RemotePool", "RemoteSession", "ServedWorld", "ServerProcess", "TurnAction", "TurnGymClient",
           "TurnGymEnvironment", "TurnGymState", "TurnObservation", "build_app", "observation_text", "serve",
           "served_panel"]


def __getattr__(name: str) -> Any:
    # Lazy: a client does not import the server's web stack, nor the server the client's.
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
