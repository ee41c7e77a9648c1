"""The Signals world: deterministic, winnable, with an exactly known chance level."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from turngym import envs  # noqa: F401 - registers the worlds
from turngym.agents import OracleAgent, RandomAgent, evaluate
from turngym.envs.signals import RULE, signal_tasks
from turngym.envs.tasks import SplitOverlapError, assert_disjoint


def test_check_env_and_a_dense_win():
    env = gym.make("turngym/Signals-v0", reward_mode="dense", turns=3)
    check_env(env.unwrapped, skip_render_check=True)
    observation, info = env.reset(options={"task": "signals/train/0"})
    assert observation.startswith("Obey the traffic lights. The light is ")
    assert info["admissible_commands"] == sorted(set(RULE.values())) and info["max_turns"] == 6
    rewards = []
    for command in info["walkthrough"]:
        observation, reward, terminated, _truncated, info = env.step(command)
        rewards.append(reward)
    assert terminated and info["won"] and rewards == pytest.approx([1 / 3] * 3)


def test_a_wrong_command_earns_nothing_and_strict_mode_loses():
    env = gym.make("turngym/Signals-v0", reward_mode="dense")
    _, info = env.reset(options={"task": "signals/train/1"})
    wrong = next(c for c in info["admissible_commands"] if c != info["walkthrough"][0])
    observation, reward, terminated, _, info = env.step(wrong)
    assert observation.startswith("Wrong.") and reward == 0.0 and not terminated
    strict = gym.make("turngym/Signals-v0", strict=True)
    strict.reset(options={"task": "signals/train/1"})
    _, _, terminated, _, info = strict.step(wrong)
    assert terminated and info["lost"] and not info["won"]


def test_tasks_are_deterministic_and_split_ids_differ():
    assert signal_tasks("train", 8) == signal_tasks("train", 8)
    assert {t.id for t in signal_tasks("train", 64)}.isdisjoint(t.id for t in signal_tasks("eval", 64))
    with pytest.raises(SplitOverlapError):  # 2 colours x 3 turns: only 8 sequences, so content recurs
        assert_disjoint(signal_tasks("train", 64), signal_tasks("eval", 64))
    assert {s for t in signal_tasks("train", 64, colours=2) for s in t.payload["signals"]} == {"red", "green"}
    with pytest.raises(ValueError, match="colours"):
        signal_tasks(colours=9)


def test_oracle_wins_and_random_sits_near_chance():
    tasks = signal_tasks("eval", 200, turns=2)
    oracle = evaluate(OracleAgent(), "turngym/Signals-v0", tasks, env_kwargs={"strict": True}, progress=False)
    assert oracle.overall.success_rate == 1.0
    random = evaluate(RandomAgent(seed=0), "turngym/Signals-v0", tasks, env_kwargs={"strict": True}, progress=False)
    low, high = random.overall.success_ci95
    assert low <= (1 / 4) ** 2 <= high  # 4 commands, 2 turns, a wrong one loses: chance 1/16
