"""What every pool of worlds shares, whatever runs the worlds (processes, remote sessions, Ray actors).

* :class:`Reply` and :class:`StepResult`: the answers a pool hands back;
* :class:`BatchCalls`: ``reset_some``/``step_some`` on top of a pool's ``send``/``receive``;
* :func:`failed_step`: the *truncated* step that replaces a worker's failure, with
  ``info["truncation_reason"]`` saying why (``worker_timeout``, ``worker_crash``, ``worker_error``,
  ``env_error``: the world raised in this process, ``env_disconnected``);
* :func:`reset_env`: a reset that, when it raises, leaves the environment ready for the next one;
* :func:`untrusted_step`, :func:`answer_problems`, :func:`turn_limit` and :func:`declared_step_timeout`'s
  ``cap``: what a client whose worlds run on a server it does not trust checks (finite numbers, rewards
  of bounded size, bounded observations, deadlines and episode lengths), the same in ``RemotePool`` and
  ``turngym/OpenEnv-v0``;
* :class:`EnvFactory`: a picklable ``gymnasium.make`` call for workers in other processes or machines.

The deadline pool they all are (in-flight calls, deadlines, respawns, failed steps over a transport) lives in
:mod:`turngym.envs.pools`; the pools themselves in :mod:`turngym.envs.vector` (local processes, in this process),
:mod:`turngym.envs.openenv.pool` (remote OpenEnv sessions) and :mod:`turngym.envs.ray_pool` (Ray actors).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from gymnasium.wrappers.common import OrderEnforcing, PassiveEnvChecker

from turngym.envs.core import truncate_text

DEFAULT_STEP_TIMEOUT = 60.0
# The longest deadline a world on a server may ask of its client (SWE's own declares 57 min a step).
MAX_DECLARED_STEP_SECONDS = 3600.0
# The longest observation text taken from a server (a local world cuts its own at 8,192 by default).
MAX_REMOTE_OBSERVATION_CHARS = 65_536
# The largest reward (in absolute value) a server may pay for one turn (also its episode_reward and reward
# components): beyond it the episode is truncated. Rewards of turngym's worlds are within [-1, 1] (plus
# penalties); 1e6 per turn, over at most a few hundred turns, keeps every return and advantage finite.
MAX_ABS_REWARD = 1e6
# The most turns an episode on a server runs when the client does not say: a server's own max_turns above it
# is capped (the built-in worlds stop at 50 or fewer by default).
DEFAULT_MAX_REMOTE_TURNS = 100
# Integers from a server beyond this (in absolute value) are refused: they do not fit an int64 (numpy, torch).
_MAX_ABS_INT = 2**63 - 1
_MAX_DEPTH = 32


@dataclass
class Reply:
    """The answer of one worker: ``kind`` is "reset" (value: (obs, info)) or "step" (a StepResult)."""

    index: int
    kind: str
    value: Any


@dataclass
class StepResult:
    """One sub-environment's answer to a step."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)


class BatchCalls:
    """``reset_some``/``step_some`` on top of a pool's ``send``/``receive``."""

    def reset_some(
        self, options: Mapping[int, Mapping[str, Any] | None], seeds: Mapping[int, int | None] | None = None
    ) -> dict[int, tuple[str, dict[str, Any]]]:
        """Reset the listed workers, each with its own options (e.g. ``{"task": task}``)."""
        seeds = seeds or {}
        for index, opts in options.items():
            self.send(index, "reset", {"seed": seeds.get(index), "options": dict(opts or {})})
        return {reply.index: reply.value for reply in self.receive()}

    def step_some(self, actions: Mapping[int, str]) -> dict[int, StepResult]:
        """Step only the listed workers; a failed worker's episode comes back truncated."""
        for index, action in actions.items():
            self.send(index, "step", action)
        return {reply.index: reply.value for reply in self.receive()}


def declared_step_timeout(max_step_seconds: list[Any], *, cap: float | None = None) -> float:
    """60 s, or the longest ``max_step_seconds`` the workers' worlds declare, plus 30 s; at most ``cap``.

    ``cap`` bounds what a world on an untrusted server can make its client wait (its 1e9 s is not a
    deadline); declarations that are not positive finite numbers are ignored (a JSON integer too large for a
    float counts as 1e9 s, never as an OverflowError).
    """
    declared = [float(min(h, 1e9)) for h in max_step_seconds if is_number(h) and h > 0]
    timeout = max([DEFAULT_STEP_TIMEOUT, *(h + 30.0 for h in declared)])
    return timeout if cap is None else min(timeout, float(cap))


class EnvFactory:
    """Picklable ``gymnasium.make`` call.

    It carries the parent's EnvSpec, because a worker is a fresh process: a world that the user
    registered in their script would be unknown to the worker's registry. It also carries the
    parent's ``TURNGYM_*`` environment variables as they are when the pool is made (a served world's
    token, ``$TURNGYM_SERVE_TOKEN``, among them): a ``forkserver`` worker inherits the environment
    of the fork server, started by the first pool, not the parent's of now. They stay out of
    ``kwargs``, so no report or log records a token.
    """

    def __init__(self, env_id: str, kwargs: dict[str, Any]) -> None:
        from turngym import envs  # noqa: F401 - registers the built-in worlds

        self.spec = gym.spec(env_id)
        self.kwargs = kwargs
        self._environment = {k: v for k, v in os.environ.items() if k.startswith("TURNGYM_")}
        self._parent = os.getpid()

    def __repr__(self) -> str:
        return f"EnvFactory({self.spec.id!r}, {self.kwargs!r})"

    def __call__(self) -> gym.Env:
        if os.getpid() != self._parent:  # in a worker: the parent's variables (in the parent: leave them be)
            for name in [k for k in os.environ if k.startswith("TURNGYM_") and k not in self._environment]:
                del os.environ[name]
            os.environ.update(self._environment)
        return gym.make(self.spec, **self.kwargs)


def call_env(env: gym.Env, kind: str, payload: Any) -> Any:
    """What a pool's ``send(index, kind, payload)`` does to one environment: ``"reset"`` (payload: reset
    kwargs) gives ``(observation, info)``, ``"step"`` (payload: the action) a :class:`StepResult`."""
    if kind == "reset":
        return reset_env(env, **payload)
    observation, reward, terminated, truncated, info = env.step(payload)
    return StepResult(observation, float(reward), bool(terminated), bool(truncated), info)


def reset_env(env: gym.Env, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
    """``env.reset(**kwargs)``; when it raises, the environment is left ready for the next reset.

    gymnasium's wrappers remember a reset that raised as done: ``PassiveEnvChecker`` then skips its
    reset check and fails every later step (it compares against the reset it never saw), and
    ``OrderEnforcing`` lets a step through onto the half-started episode. Both forget it here.
    """
    try:
        return env.reset(**kwargs)
    except BaseException:
        forget_reset(env)
        raise


def forget_reset(env: gym.Env) -> None:
    """Put gymnasium's wrappers of ``env`` back in their state before a reset (see :func:`reset_env`)."""
    layer: Any = env
    while isinstance(layer, gym.Wrapper):
        if isinstance(layer, PassiveEnvChecker) and layer._previous_data is None and not layer.checked_step:
            layer.checked_reset = False  # run the reset check (and remember its data) on the next reset
        if isinstance(layer, OrderEnforcing):
            layer._has_reset = False  # a step before the next successful reset raises ResetNeeded
        layer = layer.env


def is_number(value: Any, cap: float | None = None) -> bool:
    """Whether ``value`` is a JSON number (not a bool) that is finite, and at most ``cap`` in absolute value.

    Integers are compared exactly, so a 400-digit JSON integer is refused, never an OverflowError.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return cap is None or abs(value) <= cap


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:30]}... ({len(text)} characters)"


def answer_problems(reward: Any, metadata: Mapping[str, Any] | None, *, max_abs_reward: float = MAX_ABS_REWARD,
                    reward_required: bool = True) -> list[str]:
    """What is wrong with the numbers of a server's answer (empty when nothing is).

    ``reward`` (None allowed unless ``reward_required``), the metadata's and its ``info``'s ``turn_reward``,
    ``episode_reward`` and every ``reward_components`` entry must be finite numbers of at most
    ``max_abs_reward`` in absolute value; every other number anywhere in ``metadata`` (``info`` included:
    ``pass_ratio``, ``optimal_length``, ``won``...) must be finite, and an integer must fit an int64.
    The one check of ``RemotePool`` and ``turngym/OpenEnv-v0`` (steps and resets alike).
    """
    metadata = metadata if isinstance(metadata, Mapping) else {}
    info = metadata.get("info") if isinstance(metadata.get("info"), Mapping) else {}
    rewards: dict[str, Any] = {"reward": reward} if reward is not None or reward_required else {}
    for where, source in (("", metadata), ("info.", info)):
        for key in ("turn_reward", "episode_reward"):
            if source.get(key) is not None:
                rewards[f"{where}{key}"] = source[key]
        components = source.get("reward_components")
        if isinstance(components, Mapping):
            rewards.update({f"{where}reward_components.{k}": v for k, v in components.items()})
        elif components is not None:
            rewards[f"{where}reward_components"] = components
    problems = []
    for name, value in rewards.items():
        if not is_number(value):
            problems.append(f"{name}={_shown(value)} is not a finite number")
        elif not is_number(value, max_abs_reward):
            problems.append(f"{name}={_shown(value)} is beyond the reward cap of {max_abs_reward:g} a turn")
    checked = tuple(f"{name}=" for name in rewards)
    return problems + [p for p in unsafe_numbers(metadata) if not p.startswith(checked)]


def unsafe_numbers(value: Any, where: str = "", depth: int = 0) -> list[str]:
    """Where JSON data from a server holds a number that is not finite, or an integer beyond int64."""
    if depth > _MAX_DEPTH:
        return [f"{where or 'the answer'} is nested more than {_MAX_DEPTH} deep"]
    if isinstance(value, float):
        return [] if math.isfinite(value) else [f"{where}={value!r} is not a finite number"]
    if isinstance(value, int) and not isinstance(value, bool):
        return [] if abs(value) <= _MAX_ABS_INT else [f"{where}={_shown(value)} is beyond int64"]
    problems: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            problems += unsafe_numbers(item, f"{where}.{key}" if where else str(key), depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            problems += unsafe_numbers(item, f"{where}[{i}]", depth + 1)
    return problems


def refused_answer(problems: list[str]) -> str:
    """One line saying why a server's answer was refused."""
    return f"the server's answer was refused: {'; '.join(problems[:3])}" + (
        f" (and {len(problems) - 3} more)" if len(problems) > 3 else "")


def turn_limit(server_max_turns: Any, client_max_turns: int) -> int:
    """An episode's turn limit on a server: the server's ``max_turns`` (when a positive integer), at most the
    client's own. A server may end an episode earlier, never later."""
    if is_number(server_max_turns) and isinstance(server_max_turns, int) and server_max_turns > 0:
        return min(server_max_turns, client_max_turns)
    return client_max_turns


def check_max_turns(value: Any, name: str = "max_turns") -> int:
    """``value`` as a turn limit (a positive integer), or ValueError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def untrusted_step(result: StepResult, *, max_observation_chars: int = MAX_REMOTE_OBSERVATION_CHARS,
                   max_abs_reward: float = MAX_ABS_REWARD, metadata: Mapping[str, Any] | None = None) -> StepResult:
    """A step answered by a server that is not trusted (:func:`answer_problems`): a reward that is not a
    finite number or beyond ``max_abs_reward``, or any number in its info (or ``metadata``) that is not
    finite, truncates the episode (``worker_error``); a longer observation is cut with the usual marker."""
    problems = answer_problems(result.reward, {**dict(metadata or {}), "info": result.info},
                               max_abs_reward=max_abs_reward)
    if problems:
        return failed_step(("worker_error", refused_answer(problems)))
    observation = untrusted_text(result.observation, max_observation_chars)
    return StepResult(observation, float(result.reward), result.terminated, result.truncated, result.info)


def untrusted_text(text: Any, limit: int = MAX_REMOTE_OBSERVATION_CHARS) -> str:
    """A server's observation text, at most ``limit`` characters (cut in the middle, with the usual marker)."""
    return truncate_text(text if isinstance(text, str) else str(text), limit)


ENV_ERROR = "env_error"  # the world raised in step (in this process; in a worker process: worker_error)
ENV_ERROR_REASONS = (ENV_ERROR, "worker_error", "worker_crash")  # a world that raised or killed its process


def failed_step(failure: tuple[str, str]) -> StepResult:
    """The step a failed worker stands for: truncated, reward 0, ``truncation_reason`` = the failure."""
    reason, detail = failure
    info = {
        "truncation_reason": reason,
        "worker_failure": detail,
        "turn_reward": 0.0,
        "won": False,
        "invalid_action": False,
    }
    text = f"[turngym] The environment worker failed ({reason}: {detail}); the episode was truncated."
    return StepResult(text, 0.0, False, True, info)
