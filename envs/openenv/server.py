"""``turngym serve``: any registered world over OpenEnv, one world per session.

The server is OpenEnv's own (:func:`openenv.core.env_server.http_server.create_fastapi_app`: FastAPI, a
WebSocket ``/ws`` per session, ``/health``, ``/schema``, the task API). turngym supplies
the :class:`~openenv.core.env_server.interfaces.Environment` it serves, :class:`TurnGymEnvironment`:

* every WebSocket session gets its own world, built on its first reset; ``--max-sessions`` play at once;
* ``reset`` takes ``seed``, ``options`` (as ``TextEnv.reset``), ``task`` (a task dict or id) or
  ``split`` and ``index`` (OpenEnv's task API); ``step`` takes ``{"command": str}``
  (:mod:`turngym.envs.openenv.protocol` says what comes back);
* the task API (``/{name}/splits``, ``/{name}/tasks``, ``/{name}/task``, ``/{name}/task_range``,
  ``/{name}/num_tasks``, where ``name`` is the id after its namespace, e.g. ``Signals-v0``) lists
  the world's task panels: the first ``--panel-size`` tasks of each split, with their fingerprints.

Clients are assumed hostile (:mod:`turngym.envs.openenv.security`): a token on every request
(required beyond loopback), tasks chosen by id from the served panels (tasks sent by clients only
with ``--allow-client-tasks``, and never host paths, images or commands), no walkthrough, gold
patch or hidden tests in any reply (unless ``--reveal-solutions``), no HTTP ``/reset``/``/step``
(a world per request, outside the session cap) and no MCP endpoints: every world is a WebSocket
session, at most ``--max-sessions`` of them, each closed after ``--idle-timeout`` seconds without a
message from its client.

Keepalive: both ends ping (every ``ping_interval`` seconds); a client that vanished is dropped after
``ping_timeout``, one that stays connected but silent after ``idle_timeout`` (30 min: a model may
take long to generate its next action, but not forever).

    TURNGYM_SERVE_TOKEN=... turngym serve turngym/Signals-v0 --port 8000 --max-sessions 64
"""

from __future__ import annotations

import functools
import logging
import math
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

import numpy as np
from fastapi import HTTPException
from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata, ServerMode

from turngym.envs.openenv.protocol import TurnAction, TurnGymState, TurnObservation, jsonable, turn_metadata
from turngym.envs.openenv.security import (
    DEFAULT_GENERATION_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    MAX_SEED,
    TOKEN_ENV,
    Guard,
    check_serving_token,
    client_task,
    hide_paths,
    host_references,
    http_settings,
    public_info,
    public_task,
    resolve_token,
)
from turngym.envs.pool_api import reset_env
from turngym.envs.serving import bind_socket
from turngym.envs.tasks import Task, TaskSet

logger = logging.getLogger(__name__)

DEFAULT_PANEL_SIZE = 100
# The reward components a sparse-mode world serves (see ServedWorld.public_info).
SPARSE_COMPONENTS = frozenset({"outcome", "invalid_penalty"})


@dataclass
class ServedWorld:
    """A world as one server serves it: its id and options, the task panels it lists, and what it
    lets clients do (``allow_client_tasks``) and see (``reveal_solutions``)."""

    env_id: str
    env_kwargs: dict[str, Any]
    world_options: dict[str, Any] = field(default_factory=dict)
    panels: dict[str, TaskSet] = field(default_factory=dict)
    max_step_seconds: float | None = None
    description: str = ""
    reveal_solutions: bool = False
    allow_client_tasks: bool = False
    generation_timeout: float = DEFAULT_GENERATION_TIMEOUT

    def __post_init__(self) -> None:
        self._by_id = {split: {task.id: task for task in panel} for split, panel in self.panels.items()}
        # What the task API lists: the panels without answers or host paths (unchanged with reveal_solutions).
        self.public_panels = {split: self._public(panel) for split, panel in self.panels.items()}

    def _public(self, panel: TaskSet) -> TaskSet:
        if self.reveal_solutions:
            return panel
        return TaskSet(panel.name, panel.version, tuple(public_task(task) for task in panel))

    @property
    def worlds(self) -> set[str]:
        """The world families of the served tasks (a client's task must be one of them)."""
        return {task.world for panel in self.panels.values() for task in panel}

    @property
    def configs(self) -> set[str]:
        """The difficulties (a TextWorld config) of the served tasks: a client's task may name them."""
        return {task.difficulty for panel in self.panels.values() for task in panel if task.difficulty}

    @property
    def public_world_options(self) -> dict[str, Any]:
        return self.world_options if self.reveal_solutions else hide_paths(self.world_options)

    def public_info(self, info: Mapping[str, Any]) -> dict[str, Any]:
        """A reset's or step's info as clients get it (see :func:`~turngym.envs.openenv.security.public_info`).

        In sparse reward mode, ``reward_components`` carry only ``outcome`` and ``invalid_penalty``: the
        world's per-step progress (``progress``, TextWorld's ``score`` and ``intermediate_reward``, ALFWorld's
        ``goal_conditions``, SWE's test counts) would tell a client, step by step, whether its last move was
        the walkthrough's, which sparse rewards keep from it.
        """
        if self.reveal_solutions:
            return dict(info)
        public = public_info(info)
        components = public.get("reward_components")
        if self.world_options.get("reward_mode") == "sparse" and isinstance(components, Mapping):
            public["reward_components"] = {k: v for k, v in components.items() if k in SPARSE_COMPONENTS}
        return public

    @property
    def name(self) -> str:
        """The name in the task API's paths: the id after its namespace (``turngym/Signals-v0`` -> ``Signals-v0``)."""
        return self.env_id.rsplit("/", 1)[-1]

    @classmethod
    def prepare(cls, env_id: str, env_kwargs: Mapping[str, Any] | None = None, *,
                panel_size: int | None = DEFAULT_PANEL_SIZE, progress: bool = False, reveal_solutions: bool = False,
                allow_client_tasks: bool = False,
                generation_timeout: float = DEFAULT_GENERATION_TIMEOUT) -> ServedWorld:
        """Check the id and the options (one world is made and closed) and build the task panels."""
        from turngym import envs
        from turngym.envs.registry import check_world_options, require_registered

        require_registered(env_id)
        kwargs = dict(env_kwargs or {})
        check_world_options(env_id, kwargs)
        if panel_size is not None and panel_size < 1:
            raise ValueError(f"--panel-size must be at least 1, got {panel_size}")
        probe = envs.make(env_id, **kwargs)
        try:
            world = probe.unwrapped
            options = jsonable({k: v for k, v in kwargs.items() if k != "tasks"})
            for name, attribute in (("reward_mode", "reward_mode"), ("action_protocol", "action_protocol"),
                                    ("max_turns", "max_turns_option")):
                if hasattr(world, attribute):
                    options[name] = jsonable(getattr(world, attribute))
            max_step = getattr(world, "max_step_seconds", None)
            description = ((type(world).__doc__ or "").strip().splitlines() or [type(world).__name__])[0]
        finally:
            probe.close()
        if not generation_timeout > 0:
            raise ValueError(f"--generation-timeout must be positive, got {generation_timeout}")
        panels = _served_panels(env_id, kwargs, panel_size, progress)
        return cls(env_id, kwargs, options, panels, float(max_step) if max_step else None, description,
                   reveal_solutions=reveal_solutions, allow_client_tasks=allow_client_tasks,
                   generation_timeout=float(generation_timeout))

    def panel(self, split: str) -> TaskSet:
        """The served tasks of ``split`` (the server's own: what resets play)."""
        if split not in self.panels:
            raise HTTPException(status_code=404, detail=f"{self.env_id} serves no split {split!r}; "
                                                        f"it serves {sorted(self.panels)}")
        return self.panels[split]

    def public_panel(self, split: str) -> TaskSet:
        """The tasks of ``split`` as the task API lists them."""
        self.panel(split)
        return self.public_panels[split]

    def locate(self, task: Task | None) -> dict[str, Any] | None:
        """The served panel that holds ``task`` (same id and content): name, split, fingerprint; else None."""
        if task is None:
            return None
        for split, panel in self.panels.items():
            served = self._by_id[split].get(task.id)
            if served is not None and served.key == task.key:
                return {"name": panel.name, "version": panel.version, "split": split,
                        "fingerprint": self.public_panels[split].fingerprint}
        return None

    def task_by_id(self, task_id: str) -> Task | None:
        return next((tasks[task_id] for tasks in self._by_id.values() if task_id in tasks), None)


def _served_panels(env_id: str, kwargs: dict[str, Any], size: int | None, progress: bool) -> dict[str, TaskSet]:
    """The first ``size`` tasks of each split: of ``kwargs["tasks"]`` when given, else of the world's panel."""
    from turngym.envs.panels import task_panel, world_tasks
    from turngym.envs.registry import panel_of

    own = kwargs.get("tasks")
    if isinstance(own, TaskSet):
        return {split: _first(own.split(split), size) for split in own.splits}
    if panel_of(env_id) is not None:
        return {split: task_panel(env_id, split, size, kwargs, progress=progress) for split in ("train", "eval")}
    tasks = world_tasks(env_id, kwargs)
    return {split: _first(tasks.split(split), size) for split in tasks.splits} if tasks is not None else {}


def _first(tasks: TaskSet, n: int | None) -> TaskSet:
    """The first ``n`` tasks, keeping the set's name (task panels are prefixes of their split)."""
    return tasks if n is None or n >= len(tasks) else TaskSet(tasks.name, tasks.version, tasks.tasks[:n])


class TurnGymEnvironment(Environment[TurnAction, TurnObservation, TurnGymState]):
    """One session's world, as OpenEnv serves it (see the module docstring).

    The world is made on the first reset, so that the short-lived instances OpenEnv creates for
    its task API and ``/state`` cost nothing.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True  # every session has a world of its own

    def __init__(self, served: ServedWorld) -> None:
        super().__init__()
        self.served = served
        self._env: Any = None
        self._episode_id: str | None = None
        self._task: dict[str, Any] | None = None
        self._task_panel: dict[str, Any] | None = None
        self._turn = 0
        self._done = True
        self._closed = False

    # ----------------------------------------------------------------- OpenEnv API
    def reset(self, seed: int | None = None, episode_id: str | None = None, options: Mapping[str, Any] | None = None,
              task: Mapping[str, Any] | str | None = None, split: str | None = None, index: int | None = None,
              **unknown: Any) -> TurnObservation:
        if unknown:
            raise ValueError(f"unknown reset option(s) {sorted(unknown)}; a turngym world takes seed, options, "
                             "task, or split and index")
        _check_seed(seed)
        options = dict(options or {})
        others = sorted(set(options) - {"task"})
        if others and not self.served.allow_client_tasks:
            raise ValueError(f"unknown reset option(s) {others}: this server takes options={{'task': ...}} only")
        problems = host_references({key: options[key] for key in others}, "options")
        if problems:
            raise ValueError(f"reset options may not name host paths, images or commands ({'; '.join(problems[:5])})")
        world = self._world()
        if split is not None or index is not None:
            if split is None or index is None:
                raise ValueError("reset by the task API needs both split and index")
            options["task"] = self._task_at(split, index)
        elif task is not None:
            options["task"] = self._trusted_task(task, world)
        elif "task" in options:
            options["task"] = self._trusted_task(options["task"], world)
        if "task" not in options and getattr(world.unwrapped, "tasks", None) is None and self.served.panels:
            # A client that names no task (a plain OpenEnv reset()) plays one of the first split's, drawn by seed.
            first = next(iter(self.served.panels.values()))
            options["task"] = first.sample(np.random.default_rng(seed))
        self._done, self._task, self._task_panel = True, None, None
        # A reset that raises leaves the world ready for the next reset (gymnasium's checkers included).
        observation, info = reset_env(world, seed=seed, options=options or None)
        current = getattr(world.unwrapped, "task", None)
        self._task_panel = self.served.locate(current)
        self._task = jsonable(info.get("task"))
        self._episode_id = episode_id
        self._turn, self._done = 0, False
        metadata = turn_metadata(self.served.public_info(info), terminated=False, truncated=False,
                                 task_panel=self._task_panel)
        return TurnObservation(text=observation, reward=None, done=False, metadata=metadata)

    def step(self, action: TurnAction, timeout_s: float | None = None, **kwargs: Any) -> TurnObservation:
        if self._env is None or self._done:
            raise RuntimeError("no episode is running: send a reset message first")
        observation, reward, terminated, truncated, info = self._env.step(action.command)
        self._turn += 1
        self._done = bool(terminated or truncated)
        metadata = turn_metadata(self.served.public_info(info), terminated=terminated, truncated=truncated,
                                 task_panel=self._task_panel)
        return TurnObservation(text=observation, reward=float(reward), done=self._done, metadata=metadata)

    @property
    def state(self) -> TurnGymState:
        from turngym import __version__

        return TurnGymState(episode_id=self._episode_id, step_count=self._turn, env_id=self.served.env_id,
                            world_options=self.served.public_world_options,
                            max_step_seconds=self.served.max_step_seconds,
                            task=self._task, turn=self._turn, done=self._done, turngym_version=__version__)

    def close(self) -> None:
        """Close the world for good: OpenEnv closes a session's environment when it destroys the session,
        and a socket still holding this object must not build a world outside the session cap."""
        self._closed = True
        self._done = True
        if self._env is not None:
            self._env.close()
            self._env = None

    def get_metadata(self) -> EnvironmentMetadata:
        from turngym import __version__

        return EnvironmentMetadata(name=self.served.env_id, description=self.served.description, version=__version__)

    def web_actions(self, observation: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """The admissible commands as one-click actions in OpenEnv's web interface."""
        info = (observation.get("metadata") or {}).get("info") or {}
        return [(command, {"command": command}) for command in info.get("admissible_commands") or []]

    # ----------------------------------------------------------------- OpenEnv task API (the public panels)
    def list_splits(self) -> list[dict[str, Any]]:
        return [{"name": split, "type": "train" if split == "train" else "test", "num_tasks": len(panel),
                 "taskset": panel.name, "version": panel.version, "fingerprint": panel.fingerprint}
                for split, panel in self.served.public_panels.items()]

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return [task.to_dict() for task in self.served.public_panel(split)]

    def num_tasks(self, split: str) -> int:
        return len(self.served.panel(split))

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        self._task_at(split, index)  # the index is checked
        return self.served.public_panel(split)[int(index)].to_dict()

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[dict[str, Any]]:
        return [task.to_dict() for task in self.served.public_panel(split).tasks[start:stop]]

    # ----------------------------------------------------------------- helpers
    def _world(self) -> Any:
        if self._closed:
            raise RuntimeError("this session is closed: open a new connection")
        if self._env is None:
            from turngym import envs

            self._env = envs.make(self.served.env_id, **self.served.env_kwargs)
        return self._env

    def _task_at(self, split: str, index: int) -> Task:
        panel = self.served.panel(split)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(panel):
            raise IndexError(f"split {split!r} has tasks 0..{len(panel) - 1}, not {index!r}")
        return panel[index]

    def _trusted_task(self, value: Any, world: Any) -> Task:
        """The task a client names, as this server plays it: a served task by id (a dict naming one must
        be it, as listed or in full); another task only with ``--allow-client-tasks`` (checked)."""
        if isinstance(value, str):
            found = self._own_task(value, world)
            if found is None:
                raise ValueError(f"task {value!r} is in none of the served splits {sorted(self.served.panels)} "
                                 "(the first --panel-size tasks of each)")
            return found
        if not isinstance(value, Mapping):
            raise TypeError(f"a task is a task id or a task dict, got {type(value).__name__}")
        task_id = value.get("id")
        found = self._own_task(task_id, world) if isinstance(task_id, str) else None
        if found is not None:
            given = jsonable(value.get("payload"))
            if value.get("world", found.world) != found.world or given not in (
                    None, jsonable(found.payload), jsonable(public_task(found).payload)):
                raise ValueError(f"task {task_id!r} is not the task this server serves under that id; send its id "
                                 "(or the task as the task API lists it)")
            return found
        if not self.served.allow_client_tasks:
            raise ValueError(f"task {task_id!r} is in none of the served splits {sorted(self.served.panels)}: this "
                             "server plays its own tasks, chosen by id (or split and index): the first --panel-size "
                             "of each split (start it with a larger --panel-size to serve more, or with "
                             "--allow-client-tasks to play tasks its clients send)")
        return client_task(value, worlds=self.served.worlds, generation_timeout=self.served.generation_timeout,
                           served_configs=self.served.configs)

    def _own_task(self, task_id: str, world: Any) -> Task | None:
        """A served panel's task, else one of the world's own task set (both the server's), by id."""
        found = self.served.task_by_id(task_id)
        tasks = getattr(world.unwrapped, "tasks", None)
        if found is None and isinstance(tasks, TaskSet):
            found = next((task for task in tasks if task.id == task_id), None)
        return found


def _check_seed(seed: Any) -> None:
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED):
        raise ValueError(f"a seed is an integer between 0 and {MAX_SEED}, got {seed!r}")


def build_app(served: ServedWorld, *, max_sessions: int = 64, token: str | None = None,
              idle_timeout: float = DEFAULT_IDLE_TIMEOUT) -> Any:
    """The OpenEnv FastAPI app serving ``served``: at most ``max_sessions`` WebSocket sessions at once, each
    closed after ``idle_timeout`` seconds without a client message, and ``token`` required on every request;
    at most ``max_sessions`` + 64 requests and sessions at once (more get 503).

    OpenEnv's production mode: no HTTP ``/reset``/``/step``/``/state``, which build a world per request
    outside the session cap; the MCP endpoints, which open sessions that never expire, are not served
    either (turngym's worlds have no MCP tools), nor MCP messages on ``/ws`` (:class:`Guard` passes only
    reset, step, state and close). Always without OpenEnv's web interface.
    """
    if max_sessions < 1:
        raise ValueError(f"--max-sessions must be at least 1, got {max_sessions}")
    app = create_fastapi_app(functools.partial(TurnGymEnvironment, served), TurnAction, TurnObservation,
                             max_concurrent_envs=max_sessions, env_name=served.name, state_cls=TurnGymState,
                             mode=ServerMode.PRODUCTION)
    app.router.routes[:] = [r for r in app.router.routes if not getattr(r, "path", "").startswith("/mcp")]
    app.add_middleware(Guard, token=token, idle_timeout=idle_timeout, max_active=max_sessions + 64)
    return app


def serve(env_id: str, env_kwargs: Mapping[str, Any] | None = None, *, host: str = "127.0.0.1", port: int = 8000,
          max_sessions: int = 64, panel_size: int | None = DEFAULT_PANEL_SIZE, ping_interval: float = 20.0,
          ping_timeout: float = 20.0, on_ready: Callable[[str, ServedWorld], None] | None = None,
          log_level: str = "warning", token: str | None = None, idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
          allow_client_tasks: bool = False, reveal_solutions: bool = False,
          generation_timeout: float = DEFAULT_GENERATION_TIMEOUT,
          header_timeout: float = DEFAULT_HEADER_TIMEOUT) -> None:
    """Serve ``env_id`` (made with ``env_kwargs``) until interrupted; ``on_ready(url, served)`` is
    called once the socket listens. ``token`` (else ``$TURNGYM_SERVE_TOKEN``) is required of every
    client; a ``host`` beyond loopback needs one. A connection that has not sent a whole request's
    headers within ``header_timeout`` seconds is closed. See :mod:`turngym.envs.openenv.security`."""
    import uvicorn

    if max_sessions < 1:
        raise ValueError(f"--max-sessions must be at least 1, got {max_sessions}")
    for name, seconds in (("--ping-interval", ping_interval), ("--ping-timeout", ping_timeout),
                          ("--idle-timeout", idle_timeout), ("--generation-timeout", generation_timeout),
                          ("--header-timeout", header_timeout)):
        if not (math.isfinite(seconds) and seconds > 0):
            raise ValueError(f"{name} must be a positive number of seconds, got {seconds}")
    token = resolve_token(token)
    check_serving_token(host, token)
    if token is None:
        logger.warning("turngym serve: no token (%s): anyone who can reach %s can use this server", TOKEN_ENV, host)
    sock = bind_socket(host, port)  # before the panels: a port in use fails at once
    try:
        served = ServedWorld.prepare(env_id, env_kwargs, panel_size=panel_size, progress=True,
                                     reveal_solutions=reveal_solutions, allow_client_tasks=allow_client_tasks,
                                     generation_timeout=generation_timeout)
        app = build_app(served, max_sessions=max_sessions, token=token, idle_timeout=idle_timeout)
        # No limit_concurrency: uvicorn counts open TCP connections, so connections that never send a request
        # (no token needed for that) would turn every request away with 503. The Guard counts requests and
        # sessions once their token is checked instead, and the HTTP protocol closes connections that send
        # no whole request within header_timeout (see header_deadline_protocol).
        config = uvicorn.Config(app, ws_ping_interval=ping_interval, ws_ping_timeout=ping_timeout,
                                log_level=log_level, timeout_graceful_shutdown=5, limit_concurrency=None,
                                **http_settings(header_timeout))
        bound = sock.getsockname()
        url_host = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        if on_ready is not None:
            on_ready(f"ws://{url_host}:{bound[1]}", served)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()


# ---------------------------------------------------------------------- a server in a child process
READY_LINE = re.compile(r"serving (?P<env>\S+) at (?P<url>ws://\S+)")


class ChildServer:
    """A server in a child process (a context manager): ``url`` once a line of its output matches ``ready``
    (a regex with a ``url`` group); ``close()`` stops it, ``kill()`` kills it at once."""

    def __init__(self, command: Sequence[str], *, ready: re.Pattern[str], cwd: str | None = None,
                 environment: Mapping[str, str] | None = None, startup_timeout: float = 120.0) -> None:
        import os

        self.ready = ready
        self.process = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        cwd=cwd, env={**os.environ, **dict(environment or {})})
        self.url = self._wait_ready(startup_timeout)

    def _wait_ready(self, timeout: float) -> str:
        import selectors

        lines: list[str] = []
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if not selector.select(timeout=max(deadline - time.monotonic(), 0)):
                    break
                line = self.process.stdout.readline()
                if not line:  # the child exited
                    break
                lines.append(line.rstrip())
                if match := self.ready.search(line):
                    # Keep reading its output, so that a chatty server never blocks on a full pipe.
                    threading.Thread(target=self._drain, name="turngym-serve-output", daemon=True).start()
                    return match.group("url")
        self.close()
        raise RuntimeError(f"{' '.join(self.process.args[:6])} did not start:\n" + "\n".join(lines[-20:]))

    def _drain(self) -> None:
        for line in self.process.stdout:
            logger.debug("turngym serve: %s", line.rstrip())

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def kill(self) -> None:
        """Kill the server at once (no goodbye to its clients): what a crashed machine looks like."""
        self.process.kill()
        self.process.wait()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ServerProcess(ChildServer):
    """``turngym serve`` in a child process, for scripts, benchmarks and tests (a context manager).

    ``url`` is known once the child listens (``--port 0``: a free port). ``close()`` stops it.
    ``extra_args`` are more ``turngym serve`` options; ``environment``, variables added to the child's;
    ``token``, the token the server requires (passed as ``$TURNGYM_SERVE_TOKEN``).
    """

    def __init__(self, env_id: str, *, env_kwargs: Mapping[str, Any] | None = None, max_sessions: int = 64,
                 panel_size: int | None = DEFAULT_PANEL_SIZE, extra_args: Sequence[str] = (),
                 environment: Mapping[str, str] | None = None, startup_timeout: float = 120.0,
                 token: str | None = None) -> None:
        import json

        command = [sys.executable, "-m", "turngym.recipes.cli", "serve", env_id, "--port", "0",
                   "--max-sessions", str(max_sessions), *extra_args]
        if panel_size is not None:
            command += ["--panel-size", str(panel_size)]
        for key, value in (env_kwargs or {}).items():
            command += ["--env-arg", f"{key}={json.dumps(value)}"]
        environment = dict(environment or {})
        if token is not None:  # through the environment: a command line is visible to every user of the machine
            environment[TOKEN_ENV] = token
        super().__init__(command, ready=READY_LINE, environment=environment, startup_timeout=startup_timeout)
