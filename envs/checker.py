"""``check_text_env(env)``: does a world keep the turngym contract?

Gymnasium's ``check_env`` checks the generic API (spaces, seeding, return types). A text world
promises more, and the trainers rely on it, so this checker plays a few short episodes and checks
what ``check_env`` cannot see:

* every ``info`` carries :data:`~turngym.envs.core.INFO_KEYS`, and ``turn`` counts the steps;
* a reset with the same seed and task gives the same observation (reproducible evaluation);
* model output that is empty, huge, binary or multi-line is an invalid action with feedback,
  never an exception, and never reaches the world;
* ``terminated`` and ``truncated`` are never both true, ``episode_reward`` is reported on the
  last step only and equals the sum of the turn rewards;
* when the world knows a solution (``info["walkthrough"]`` at reset), playing it wins, and in
  dense mode the turn rewards then sum to the episode's outcome.

Use it in a world's tests: ``check_text_env(MyWorld(tasks=...))``. It raises
:class:`TextEnvContractError` listing every broken promise, and returns the list of checks it ran.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import gymnasium as gym
from gymnasium.utils.env_checker import check_env

from turngym.envs.core import INFO_KEYS, TextEnv, protocol_action

# Model output a world must survive as an invalid action (it never reaches _execute).
HOSTILE_ACTIONS = {
    "empty": "",
    "whitespace": "   \n\t ",
    "huge": "x" * 100_000,
    "binary": "\x00\xff\x1b[2J\x07",
    "multi-line": "look\nrm -rf /",
}


class TextEnvContractError(AssertionError):
    """A world breaks the text-environment contract; the message lists every failed check."""


def check_text_env(env: gym.Env, *, seed: int = 0, max_steps: int = 200, check_gymnasium: bool = True) -> list[str]:
    """Check ``env`` against the turngym contract (see the module docstring).

    Args:
        env: a :class:`~turngym.envs.core.TextEnv` or a gymnasium wrapper around one. It is
            reset and stepped, not closed.
        seed: the reset seed of the episodes played.
        max_steps: the most steps one episode of the check may take.
        check_gymnasium: also run ``gymnasium.utils.env_checker.check_env`` (its warnings count
            as failures).

    Returns:
        The names of the checks that ran (a world without a walkthrough skips the winning play).

    Raises:
        TextEnvContractError: listing every failed check.
    """
    world = env.unwrapped
    if not isinstance(world, TextEnv):
        raise TypeError(f"{type(world).__name__} is not a turngym TextEnv; subclass turngym.envs.TextEnv")
    failures: list[str] = []
    ran: list[str] = []

    def check(name: str, condition: bool, detail: str) -> None:
        ran.append(name)
        if not condition:
            failures.append(f"{name}: {detail}")

    if check_gymnasium:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                check_env(world, skip_render_check=True)
                ran.append("gymnasium check_env")
            except Exception as error:  # noqa: BLE001 - reported as a failure, with its message
                failures.append(f"gymnasium check_env: {type(error).__name__}: {error}")

    observation, info = world.reset(seed=seed)
    task = info.get("task", {}).get("id")
    options = {"task": world.task} if world.task is not None else None
    check("reset observation is str", isinstance(observation, str), f"got {type(observation).__name__}")
    _check_info(check, info, "reset", turn=0)
    check("reset reports no episode_reward", info.get("episode_reward") is None,
          f"episode_reward={info.get('episode_reward')!r} before any step")
    again, _ = world.reset(seed=seed, options=options)
    check("reset is reproducible", again == observation, f"two resets with seed={seed} on task {task!r} differ")

    for name, action in HOSTILE_ACTIONS.items():
        world.reset(seed=seed, options=options)
        try:
            result = world.step(action)
        except Exception as error:  # noqa: BLE001 - a crash on model output is the failure we look for
            check(f"{name} action is invalid, not an error", False, f"step raised {type(error).__name__}: {error}")
            continue
        step_observation, _, _, _, step_info = result
        check(f"{name} action is invalid", bool(step_info.get("invalid_action")),
              "info['invalid_action'] is not true")
        check(f"{name} action gets feedback", isinstance(step_observation, str) and bool(step_observation.strip()),
              "the observation is empty")

    _, info = world.reset(seed=seed, options=options)
    walkthrough = info.get("walkthrough")
    actions = list(walkthrough or [])
    try:
        rewards, steps, last = _play(world, actions, max_steps, info)
    except Exception as error:
        raise TextEnvContractError(f"{type(world).__name__} raised while playing an episode "
                                   f"({'walkthrough' if walkthrough else 'look'} actions): "
                                   f"{type(error).__name__}: {error}\n- " + "\n- ".join(failures)) from error
    check("an episode ends within max_turns", last is not None and (last[2] or last[3]),
          f"no terminated or truncated after {steps} steps (max_turns={world.max_turns})")
    if last is not None:
        _, _, terminated, truncated, final = last
        _check_info(check, final, "last step", turn=steps)
        check("terminated and truncated are exclusive", not (terminated and truncated), "both are true")
        reported = final.get("episode_reward")
        check("episode_reward on the last step is the sum of turn rewards",
              isinstance(reported, (int, float)) and math.isclose(reported, sum(rewards), abs_tol=1e-6),
              f"episode_reward={reported!r}, sum of turn rewards={sum(rewards)!r}")
        if walkthrough:
            check("the walkthrough wins", bool(final.get("won")) and terminated,
                  f"playing info['walkthrough'] ended with won={final.get('won')}, "
                  f"truncation_reason={final.get('truncation_reason')!r}")
            outcome = final.get("reward_components", {}).get("outcome")
            if world.reward_mode.value == "dense" and outcome is not None:
                check("dense rewards sum to the outcome", math.isclose(sum(rewards), outcome, abs_tol=1e-6),
                      f"sum={sum(rewards)!r}, outcome={outcome!r}")
    if failures:
        raise TextEnvContractError(f"{type(world).__name__} breaks the text-env contract:\n- " + "\n- ".join(failures))
    return ran


def _check_info(check: Any, info: dict[str, Any], where: str, turn: int) -> None:
    missing = [key for key in INFO_KEYS if key not in info]
    check(f"{where} info has every contract key", not missing, f"missing {missing}")
    check(f"{where} info counts turns", info.get("turn") == turn, f"turn={info.get('turn')!r}, expected {turn}")


def _play(world: TextEnv, actions: list[str], max_steps: int,
          world_info: dict[str, Any]) -> tuple[list[float], int, tuple | None]:
    """Step through ``actions``, then "look" until the episode ends (at most ``max_steps`` steps), each in the
    episode's action protocol (``world_info``: the reset's info)."""
    rewards: list[float] = []
    last = None
    for steps in range(1, max_steps + 1):
        command = actions[steps - 1] if steps <= len(actions) else "look"
        last = world.step(protocol_action(command, last[4] if last is not None else world_info))
        rewards.append(float(last[1]))
        if last[2] or last[3]:
            break
    return rewards, len(rewards), last
