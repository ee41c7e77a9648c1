"""What every pool of worlds shares, whatever runs the worlds (processes, remote sessions, Ray actors).

* :class:`Reply` and :class:`StepResult`: the answers a pool hands back;
* :class:`BatchCalls`: ``reset_some``/``step_some`` on top of a pool's ``send``/``receive``;
* :func:`failed_step`: the *truncated* step that replaces a worker's failure, with
  ``info["truncation_reason"]`` saying why (``worker_timeout``, ``worker_crash``, ``worker_error``,
  ``env_disconnected``);
* :func:`reset_env`: a reset that, when it raises, leaves the environment ready for the next one;
* :func:`untrusted_step` and :func:`declared_step_timeout`'s ``cap``: what a pool whose worlds run on
  a server it does not trust checks (finite rewards, bounded observations, bounded deadlines);
* :class:`EnvFactory`: a picklable ``gymnasium.make`` call for workers in other processes or machines.

The pools themselves live in :mod:`turngym.envs.vector` (local processes, in this process),
:mod:`turngym.envs.openenv.pool` (remote OpenEnv sessions) and :mod:`turngym.envs.ray_pool` (Ray actors).
"""

from __future__ import annotations

import math
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
    deadline); declarations that are not positive finite numbers are ignored.
    """
    declared = [float(h) for h in max_step_seconds
                if isinstance(h, (int, float)) and not isinstance(h, bool) and math.isfinite(h) and h > 0]
    timeout = max([DEFAULT_STEP_TIMEOUT, *(h + 30.0 for h in declared)])
    return timeout if cap is None else min(timeout, float(cap))


class EnvFactory:
    """Picklable ``gymnasium.make`` call.

    It carries the parent's EnvSpec, because a worker is a fresh process: a world that the user
    registered in their script would be unknown to the worker's registry.
    """

    def __init__(self, env_id: str, kwargs: dict[str, Any]) -> None:
        from turngym import envs  # noqa: F401 - registers the built-in worlds

        self.spec = gym.spec(env_id)
        self.kwargs = kwargs

    def __call__(self) -> gym.Env:
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


def untrusted_step(result: StepResult, *, max_observation_chars: int = MAX_REMOTE_OBSERVATION_CHARS) -> StepResult:
    """A step answered by a server that is not trusted: a reward that is not a finite number truncates
    the episode (``worker_error``), and a longer observation is cut with the usual marker."""
    numbers = {"reward": result.reward, "episode_reward": result.info.get("episode_reward"),
               "turn_reward": result.info.get("turn_reward")}
    components = result.info.get("reward_components")
    if isinstance(components, Mapping):
        numbers.update({f"reward_components[{k!r}]": v for k, v in components.items()})
    bad = {name: value for name, value in numbers.items() if not _finite_or_absent(value, name == "reward")}
    if bad:
        detail = ", ".join(f"{name}={value!r}" for name, value in list(bad.items())[:3])
        return failed_step(("worker_error", f"the server sent a reward that is not a finite number ({detail})"))
    observation = untrusted_text(result.observation, max_observation_chars)
    return StepResult(observation, float(result.reward), result.terminated, result.truncated, result.info)


def untrusted_text(text: Any, limit: int = MAX_REMOTE_OBSERVATION_CHARS) -> str:
    """A server's observation text, at most ``limit`` characters (cut in the middle, with the usual marker)."""
    return truncate_text(text if isinstance(text, str) else str(text), limit)


def _finite_or_absent(value: Any, required: bool) -> bool:
    if value is None:
        return not required
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


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
