"""Train on turngym worlds with TRL's own ``GRPOTrainer`` (and ``AsyncGRPOTrainer``) through its
``environment_factory``.

TRL 1.16 drives an environment object through three calls (``trl.GRPOTrainer``, argument
``environment_factory``):

* ``reset(**row)`` with every column of the dataset row; the string it returns is appended to the
  row's last user message before the first generation;
* each public method is a tool the model calls (its schema is read from the type hints and the
  Google-style docstring); here there is one, ``act(command)``, which steps the world and returns
  its answer (TRL masks the answer's tokens out of the loss);
* ``get_reward()`` once the completion is over: the episode's return, sum_t r_t.

::

    from trl import GRPOConfig, GRPOTrainer
    from turngym import trl_env

    trainer = GRPOTrainer(
        model="Qwen/Qwen3-0.6B",
        train_dataset=trl_env.task_dataset("turngym/Signals-v0", split="train"),
        environment_factory=trl_env.environment_factory("turngym/Signals-v0", reward_mode="dense"),
        reward_funcs=trl_env.reward_functions(),  # logs won / finished / invalid actions; adds no reward
        args=GRPOConfig(output_dir="runs/trl-signals", max_completion_length=512),
    )
    trainer.train()

TRL scores the whole completion with one number, so turn-level credit (per-turn rewards,
turn-level RLOO, PPO's critic) stays with ``turngym train``: see docs/trl.md.

Importing this module needs only turngym's core; :func:`task_dataset` needs ``datasets`` (the
``train`` extra) and training needs TRL.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, Self

from turngym.envs.tasks import Task, TaskSet, canonical_json
from turngym.envs.tools import ToolCall

logger = logging.getLogger(__name__)

TOOL_NAME = "act"
SYSTEM_PROMPT = (
    "You are an agent in a text-based world. Each turn, call the `act` tool with one command; it returns what "
    "the world answers. Keep acting until the tool says the episode is over."
)
TOOLS_SYSTEM_PROMPT = (  # SYSTEM_PROMPT under the tools protocol, where the world's own tools replace `act`
    "You are an agent in a text-based world. Each turn, call one of the world's tools; it returns what the world "
    "answers. Keep acting until a tool says the episode is over."
)
METRICS = ("won", "finished", "invalid_action_rate", "turns", "episode_reward")


class WorldSession:
    """One turngym world behind TRL's ``environment_factory`` contract, without tools: ``reset(**row)`` starts
    the row's task and returns the first observation, ``get_reward()`` is the episode return. TRL exposes every
    other public function of the class as a tool: :class:`TurnGymEnvironment` adds ``act(command)``, and
    :class:`ToolsEnvironmentFactory` the world's own tools (the ``tools`` protocol).

    TRL builds one instance per concurrent rollout and reuses it (``reset`` between episodes); the world is
    made on the first ``reset``. The episode's state is readable through properties (``turns``, ``done``,
    ``won``, ``turn_rewards``, ``info``...), which TRL does not expose.

    Args:
        env_id: a registered world, e.g. ``"turngym/Signals-v0"``.
        **env_kwargs: options for ``turngym.make(env_id, ...)`` (``reward_mode``, ``max_turns``...).
    """

    def __init__(self, env_id: str, **env_kwargs: Any) -> None:
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs)
        self._world = None  # made on the first reset: TRL builds a probe instance it may never use
        self._panels: dict[str, TaskSet] = {}
        self._started = False
        self._done = False
        self._info: dict[str, Any] = {}
        self._turn_rewards: list[float] = []
        self._invalid_actions = 0

    # ------------------------------------------------------------------ TRL's contract
    def reset(self, *, env_id: str | None = None, task: str | Mapping[str, Any] | None = None,
              task_id: str | None = None, split: str | None = None, seed: int | None = None, **row: Any) -> str:
        """Start an episode on the dataset row's task and return the world's first observation.

        The task is, in order: ``task`` (a :class:`~turngym.envs.tasks.Task` as a dict or its JSON, as
        :func:`task_dataset` writes it), ``task_id`` (looked up in the world's tasks, then in its task
        panel for ``split``), or one the world draws (seeded by ``seed``). Other columns (``prompt``...)
        are ignored.
        """
        del row  # TRL passes every column of the row
        if env_id is not None and env_id != self.env_id:
            raise ValueError(
                f"this environment plays {self.env_id}, but the row asks for {env_id}; to mix worlds, pass "
                "GRPOTrainer a dict {env_id: environment_factory(env_id)} and rows with an 'environment' column "
                "(task_dataset writes it)"
            )
        world = self._make_world()
        chosen = self._resolve_task(task, task_id, split)
        observation, info = world.reset(seed=seed, options={"task": chosen} if chosen is not None else None)
        self._started, self._done = True, False
        self._info = info
        self._turn_rewards = []
        self._invalid_actions = 0
        return observation

    def _step(self, action: str, tool: str) -> str:
        """Step the world with ``action``; its answer (with the episode's end, if it ended)."""
        if not self._started:
            raise ValueError("no episode is running: reset() starts one (GRPOTrainer calls it with each dataset row)")
        if self._done:
            raise ValueError(
                f"the episode is over ({self._ending()} after {self.turns} turns); {tool} accepts no more calls. "
                "Stop calling tools and end your turn."
            )
        observation, reward, terminated, truncated, info = self._world.step(action)
        self._turn_rewards.append(float(reward))
        self._invalid_actions += bool(info.get("invalid_action"))
        self._info = info
        self._done = bool(terminated or truncated)
        if self._done:
            observation += (f"\n\n[Episode over: {self._ending()} after {self.turns} turns; episode reward "
                            f"{self.episode_reward:g}. Do not call {tool} again.]")
        return observation

    def get_reward(self) -> float:
        """The episode return, sum_t r_t (an unfinished episode returns what it has earned so far)."""
        if not self._started:
            raise RuntimeError("get_reward() before any reset(): no episode was played")
        return self.episode_reward

    # ------------------------------------------------------------------ episode state (not tools)
    @property
    def turns(self) -> int:
        """Commands the world executed or refused in this episode (calls to ``act`` before it ended)."""
        return len(self._turn_rewards)

    @property
    def turn_rewards(self) -> list[float]:
        """Each turn's reward r_t (TRL sums them: it sees only :meth:`get_reward`)."""
        return list(self._turn_rewards)

    @property
    def episode_reward(self) -> float:
        return float(sum(self._turn_rewards))

    @property
    def done(self) -> bool:
        """The world ended the episode (won, lost or truncated); False while it runs or when the model stopped."""
        return self._done

    @property
    def won(self) -> bool:
        return bool(self._info.get("won"))

    @property
    def invalid_actions(self) -> int:
        return self._invalid_actions

    @property
    def info(self) -> dict[str, Any]:
        """The world's last ``info`` (turngym's environment contract: ``task``, ``won``, ``invalid_reason``...)."""
        return dict(self._info)

    # ------------------------------------------------------------------ helpers (private: not tools)
    def _make_world(self):
        if self._world is None:
            from turngym.envs.registry import make

            self._world = make(self.env_id, **self.env_kwargs)
        return self._world

    def _resolve_task(self, task: Any, task_id: str | None, split: str | None) -> Task | None:
        if isinstance(task, Task):
            return task
        if isinstance(task, str) and task.strip():
            task = json.loads(task)
        if isinstance(task, Mapping):
            return Task.from_dict(task)
        if not task_id:
            return None
        own = getattr(self._world.unwrapped, "tasks", None)
        if isinstance(own, TaskSet) and any(t.id == task_id for t in own):
            return own.by_id(task_id)
        if split is None:
            raise ValueError(f"task {task_id!r} is not among {self.env_id}'s own tasks; give the row a 'split' "
                             "column to look it up in the world's task panel, or a 'task' column (task_dataset)")
        if split not in self._panels:
            from turngym.envs.panels import task_panel

            self._panels[split] = task_panel(self.env_id, split, None, self.env_kwargs, progress=False)
        return self._panels[split].by_id(task_id)

    def _ending(self) -> str:
        if self._info.get("won"):
            return "won"
        if self._info.get("lost"):
            return "lost"
        reason = self._info.get("truncation_reason")
        return "turn limit reached" if reason == "max_turns" else f"stopped: {reason}"

    def _close(self) -> None:
        if self._world is not None:
            self._world.close()
            self._world = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self._close()


class TurnGymEnvironment(WorldSession):
    """A world whose one tool is ``act(command)``: a free-form command, as the world's ``free_form`` protocol."""

    def act(self, command: str) -> str:
        """Execute one command in the text world and return what the world answers.

        Args:
            command: The command to execute, one short line of plain text (for example "go north").

        Returns:
            The world's answer to the command. When the episode ends, the answer says so and gives the episode reward.
        """
        return self._step(_as_text(command), TOOL_NAME)


_JSON_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict}


@functools.cache
def _tools_class(env_id: str, tools_json: str) -> type:
    """A :class:`WorldSession` subclass with one method per tool (OpenAI function format, as JSON), each named,
    typed and documented so that transformers' ``get_json_schema`` (what TRL renders) gives the tool back."""
    import inspect

    methods = {}
    for tool in json.loads(tools_json):
        spec = tool["function"]
        properties = spec.get("parameters", {}).get("properties", {})
        required = set(spec.get("parameters", {}).get("required", list(properties)))
        annotations = {name: _JSON_TYPES.get(schema.get("type"), str) for name, schema in properties.items()}
        parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] + [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotations[name],
                              default=inspect.Parameter.empty if name in required else None)
            for name in properties]
        described = "\n".join(f"    {name}: {schema.get('description') or name}" for name, schema in properties.items())

        method = _tool_method(spec["name"])
        method.__name__ = method.__qualname__ = spec["name"]
        method.__signature__ = inspect.Signature(parameters, return_annotation=str)
        method.__annotations__ = {**annotations, "return": str}
        method.__doc__ = (f"{spec.get('description') or spec['name']}\n\n"
                          + (f"Args:\n{described}\n\n" if properties else "")
                          + "Returns:\n    The world's answer.")
        methods[spec["name"]] = method
    name = "".join(part for part in env_id.replace("/", "-").replace("_", "-").split("-") if part.isalnum())
    return type(f"{name or 'World'}Tools", (WorldSession,), methods)


def _tool_method(name: str) -> Callable[..., str]:
    def method(self, **arguments: Any) -> str:  # every argument goes to the world, which checks it (its schema)
        given = {key: value for key, value in arguments.items() if value is not None}
        return self._step(ToolCall(name, given).to_action(), name)

    return method


class ToolsEnvironmentFactory:
    """``environment_factory`` for a world under the ``tools`` protocol: each instance exposes the world's own
    tools (``bash``, ``edit``...) as TRL tools. It pickles (the class is rebuilt from the schema per process)."""

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any]) -> None:
        from turngym.envs.registry import make

        self.env_id, self.env_kwargs = env_id, dict(env_kwargs)
        world = make(env_id, **self.env_kwargs)
        try:
            self.tools_json = json.dumps(world.unwrapped.tools(), sort_keys=True)
        finally:
            world.close()

    def __call__(self) -> WorldSession:
        return _tools_class(self.env_id, self.tools_json)(self.env_id, **self.env_kwargs)


def _as_text(command: Any) -> str:
    """The command as text: model output parsed from JSON may be a number, a list or bytes. Whatever it is,
    the world's validation judges it (an invalid action with feedback, never a crash)."""
    if isinstance(command, str):
        return command
    if isinstance(command, bytes | bytearray):
        return bytes(command).decode("utf-8", errors="surrogateescape")  # undecodable bytes stay visible as such
    return json.dumps(command, default=str)


# ---------------------------------------------------------------------- what GRPOTrainer takes
def environment_factory(env_id: str, **env_kwargs: Any) -> Callable[[], WorldSession]:
    """``GRPOTrainer(environment_factory=...)``: a zero-argument callable making one environment of ``env_id``
    per rollout: a :class:`TurnGymEnvironment` (one ``act`` tool), or with ``action_protocol="tools"`` one whose
    tools are the world's own (:class:`ToolsEnvironmentFactory`). It pickles (``AsyncGRPOTrainer`` sends it to
    a worker process). The world and its options are checked now, not at the first rollout."""
    from turngym.envs.registry import check_world_options

    check_world_options(env_id, env_kwargs)  # unknown id or option: a clear error here
    if env_kwargs.get("action_protocol") == "tools":
        return ToolsEnvironmentFactory(env_id, env_kwargs)
    return functools.partial(TurnGymEnvironment, env_id, **env_kwargs)


def task_dataset(env_id: str, split: str = "train", n: int | None = None, *, tasks: TaskSet | None = None,
                 env_kwargs: Mapping[str, Any] | None = None, system_prompt: str | None = SYSTEM_PROMPT):
    """A ``datasets.Dataset`` for ``GRPOTrainer``: one row per task of ``split``.

    The tasks are ``tasks`` (those of ``split``) or the first ``n`` of the world's task panel. Each row
    has a conversational ``prompt`` (system prompt, then the world's action hint; ``reset`` appends the
    first observation to it), the task (``task`` as JSON, ``task_id``, ``split``, ``difficulty``), and
    ``env_id`` and ``environment`` for a dict ``environment_factory`` mixing worlds. With
    ``env_kwargs={"action_protocol": "tools"}`` the prompt asks for the world's own tools, not ``act`` (the
    default system prompt becomes :data:`TOOLS_SYSTEM_PROMPT`).
    """
    from turngym._extras import require

    require("datasets", extra="train", feature="turngym.trl_env.task_dataset")
    import datasets

    from turngym.envs.panels import task_panel
    from turngym.envs.registry import world_creator

    if tasks is not None:
        chosen = tasks.split(split)
        chosen = chosen.take(n) if n else chosen
    else:
        chosen = task_panel(env_id, split, n, dict(env_kwargs or {}), progress=False)
    if (env_kwargs or {}).get("action_protocol") == "tools":
        user = "Act by calling the world's tools, one call at a time.\n\n"
        system_prompt = TOOLS_SYSTEM_PROMPT if system_prompt == SYSTEM_PROMPT else system_prompt
    else:
        hint = getattr(world_creator(env_id), "action_hint", "Reply with one short command.")
        user = f"{hint} Send each command with the `{TOOL_NAME}` tool.\n\n"
    prompt = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + [
        {"role": "user", "content": user}]
    rows = [{"prompt": prompt, "env_id": env_id, "environment": env_id, "task_id": task.id, "split": task.split,
             "difficulty": task.difficulty, "task": canonical_json(task.to_dict())} for task in chosen]
    return datasets.Dataset.from_list(rows)


def episode_metrics(environments: list[Any] | None = None, log_metric: Callable[[str, float], None] | None = None,
                    **kwargs: Any) -> list[None]:
    """A reward function that adds no reward: it logs each batch's episodes through TRL's ``log_metric``
    (``turngym/won``, ``turngym/finished``, ``turngym/invalid_action_rate``, ``turngym/turns``,
    ``turngym/episode_reward``) and returns None for every completion (TRL leaves such a term out of the
    sum, so ``rewards/episode_metrics/mean`` reads None). The reward is each environment's ``get_reward``."""
    completions = len(kwargs.get("prompts") or environments or [])
    environments = [e for e in environments or [] if isinstance(e, WorldSession) and e._started]
    if log_metric is not None and environments:
        values = {
            "won": [float(e.won) for e in environments],
            "finished": [float(e.done) for e in environments],
            "invalid_action_rate": [e.invalid_actions / e.turns if e.turns else 0.0 for e in environments],
            "turns": [float(e.turns) for e in environments],
            "episode_reward": [e.episode_reward for e in environments],
        }
        for name in METRICS:
            log_metric(f"turngym/{name}", sum(values[name]) / len(values[name]))
    return [None] * completions


def reward_functions() -> list[Callable[..., list[Any]]]:
    """``GRPOTrainer(reward_funcs=...)`` alongside :func:`environment_factory`: TRL 1.16 already pays
    each episode's ``get_reward`` (with weight 1, logged as ``rewards/TurnGymEnvironment``), so this list
    only adds the episodes' metrics to the logs (:func:`episode_metrics`). Add your own terms to it."""
    return [episode_metrics]


__all__ = [
    "SYSTEM_PROMPT",
    "TOOLS_SYSTEM_PROMPT",
    "TOOL_NAME",
    "ToolsEnvironmentFactory",
    "TurnGymEnvironment",
    "WorldSession",
    "environment_factory",
    "episode_metrics",
    "reward_functions",
    "task_dataset",
]
