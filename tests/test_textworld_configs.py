"""Every generator family produces a winnable game whose dense rewards sum to the outcome."""

from __future__ import annotations

import pytest

from turngym.envs.textworld import TextWorldEnv, textworld_tasks


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("config", "dense_source"),
    [
        ("simple-dense", "score"),
        ("simple-balanced", "score"),
        ("simple-sparse", "progress"),
        ("cooking-r1-t1-g1", "score"),
        ("coin-1", "progress"),
        ("w1-o2-q1", "progress"),
    ],
)
def test_generated_game_is_won_by_its_walkthrough(config, dense_source):
    env = TextWorldEnv(config=config, split="eval", num_tasks=1, reward_mode="dense", dense_source=dense_source)
    _, info = env.reset(options={"task": f"textworld/{config}/1"})
    assert info["task"]["difficulty"] == config
    assert info["max_turns"] == 2 * len(info["walkthrough"])
    total = 0.0
    for command in info["walkthrough"]:
        _, reward, terminated, truncated, info = env.step(command)
        total += reward
    env.close()
    assert terminated and not truncated and info["won"]
    assert total == pytest.approx(1.0)
    assert info["episode_reward"] == pytest.approx(1.0)


def test_train_and_eval_panels_of_every_reference_config_are_disjoint():
    from turngym.envs import assert_disjoint
    from turngym.envs.textworld import REFERENCE_CONFIGS

    for config in REFERENCE_CONFIGS:
        assert_disjoint(textworld_tasks(config, "train"), textworld_tasks(config, "eval"))
