"""``turngym/Latency-v0``: any world with an injected, long-tailed step latency.

Real worlds are slow in a long tail: most SWE commands take a fraction of a second, a test run takes
seconds, a remote server stalls now and then. This world wraps another one (``env_id``, with its own kwargs)
and sleeps before each step for a log-normal time, ``median * exp(tail * z)`` with ``z ~ N(0, 1)``:
``tail=0`` is a fixed delay, ``tail=1.5`` puts the 99th percentile at 33x the median. The draw is seeded by
``seed``, the task id and the turn, so every schedule of the same episodes waits the same times: rollout
schedules are compared on equal terms (``bench/async_rollout.py``).

    gymnasium.make("turngym/Latency-v0", env_id="turngym/Signals-v0", median=0.05, tail=1.5)
"""

from __future__ import annotations

import math
import time
from typing import Any

import gymnasium as gym
import numpy as np

from turngym.envs.tasks import stable_seed


def step_latency(median: float, tail: float, *, seed: int, task_id: str, turn: int) -> float:
    """Seconds to wait before turn ``turn`` of task ``task_id``: ``median * exp(tail * z)``, ``z ~ N(0, 1)``
    drawn from a generator seeded by (seed, task id, turn)."""
    z = np.random.default_rng(stable_seed(seed, task_id, turn)).standard_normal()
    return float(median * math.exp(tail * z))


class StepLatency(gym.Wrapper):
    """Sleeps :func:`step_latency` seconds before each step of the wrapped world."""

    def __init__(self, env: gym.Env, *, median: float = 0.05, tail: float = 1.0, seed: int = 0) -> None:
        if median < 0 or tail < 0 or not math.isfinite(median + tail):
            raise ValueError(f"median and tail must be finite and >= 0, got median={median}, tail={tail}")
        super().__init__(env)
        self.median, self.tail, self.seed = float(median), float(tail), int(seed)
        self._task_id, self._turn = "", 0
        self.slept = 0.0  # seconds slept since the world was made

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        task = (options or {}).get("task")
        self._task_id, self._turn = str(getattr(task, "id", task)), 0
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> Any:
        delay = step_latency(self.median, self.tail, seed=self.seed, task_id=self._task_id, turn=self._turn)
        time.sleep(delay)
        self.slept += delay
        self._turn += 1
        return super().step(action)


DEFAULT_WORLD = "turngym/Signals-v0"


def latency_world(env_id: str = DEFAULT_WORLD, *, median: float = 0.05, tail: float = 1.0, latency_seed: int = 0,
                  **env_kwargs: Any) -> gym.Env:
    """``env_id`` made with ``env_kwargs``, its steps delayed by :class:`StepLatency`."""
    return StepLatency(gym.make(env_id, **env_kwargs), median=median, tail=tail, seed=latency_seed)


LATENCY_OPTIONS = ("env_id", "median", "tail", "latency_seed")


def task_panel(split: str, n: int | None, env_kwargs: dict[str, Any], **options: Any) -> Any:
    """The wrapped world's panel, for its own kwargs."""
    from turngym.envs.registry import panel_of

    env_id = env_kwargs.get("env_id", DEFAULT_WORLD)
    panel = panel_of(env_id)
    if panel is None:
        raise ValueError(f"{env_id} has no task panel: pass tasks= to the latency world")
    return panel(split, n, {k: v for k, v in env_kwargs.items() if k not in LATENCY_OPTIONS}, **options)
