"""Every advantage estimator against numbers computed by hand (the derivations are in the comments)."""

from __future__ import annotations

import math
import random

import pytest

from turngym.trainers.advantages import (
    EPSILON,
    Scale,
    anchor_group_stats,
    episode_grpo,
    episode_rloo,
    gigpo,
    group_turn_cells,
    returns_to_go,
    shuffle_advantages,
    spread_over_tokens,
    token_gae,
    token_rewards,
    turn_grpo,
    turn_rloo,
)


def test_episode_grpo_group_batch_and_no_scaling():
    returns, groups = [1.0, 0.0, 0.0, 0.5, 0.5], ["a", "a", "a", "b", "b"]
    # group a: mean 1/3; unbiased std sqrt(((2/3)^2 + 2 (1/3)^2) / 2) = sqrt(1/3) = 0.5773503
    s = math.sqrt(1 / 3) + EPSILON
    assert episode_grpo(returns, groups, "group") == pytest.approx([(2 / 3) / s, (-1 / 3) / s, (-1 / 3) / s, 0.0, 0.0])
    # batch: mean 0.4, unbiased std sqrt((0.36 + 0.16 + 0.16 + 0.01 + 0.01) / 4) = sqrt(0.175)
    b = math.sqrt(0.175) + EPSILON
    assert episode_grpo(returns, groups, "batch") == pytest.approx([(2 / 3) / b, (-1 / 3) / b, (-1 / 3) / b, 0.0, 0.0])
    assert episode_grpo(returns, groups, "none") == pytest.approx([2 / 3, -1 / 3, -1 / 3, 0.0, 0.0])
    with pytest.raises(ValueError, match="scale"):
        episode_grpo(returns, groups, "mean")


def test_episode_rloo_leaves_each_episode_out_of_its_baseline():
    # group a: 1 - (0+0)/2 = 1; 0 - (1+0)/2 = -0.5 (twice); group c has one member: 0
    assert episode_rloo([1.0, 0.0, 0.0, 0.7], ["a", "a", "a", "c"]) == pytest.approx([1.0, -0.5, -0.5, 0.0])
    # groups need not be contiguous
    assert episode_rloo([2.0, 5.0, 4.0, 1.0], ["x", "y", "x", "y"]) == pytest.approx([-2.0, 4.0, 2.0, -4.0])


def test_returns_to_go():
    assert returns_to_go([0.0, 0.0, 1.0]) == [1.0, 1.0, 1.0]
    assert returns_to_go([0.0, 0.0, 1.0], gamma=0.5) == [0.25, 0.5, 1.0]
    assert returns_to_go([1.0, -1.0, 2.0], gamma=0.5) == pytest.approx([1 - 0.5 + 0.5, -1 + 1.0, 2.0])
    assert returns_to_go([]) == []


# Three episodes of one task (gamma = 1):
#   e0 wins at its 3rd turn:  r = [0, 0, 1]          G = [1, 1, 1]
#   e1 plays 4 turns:         r = [0, 0, 0, -0.25]   G = [-0.25, -0.25, -0.25, -0.25]
#   e2 stops after 2 turns:   r = [0.5, 0]           G = [0.5, 0]
GROUP_REWARDS = [[0.0, 0.0, 1.0], [0.0, 0.0, 0.0, -0.25], [0.5, 0.0]]


def test_turn_rloo_hand_computed():
    advantages = turn_rloo(GROUP_REWARDS, ["g"] * 3)
    assert advantages[0] == pytest.approx([
        1 - (-0.25 + 0.5) / 2,  # turn 0: others e1, e2
        1 - (-0.25 + 0.0) / 2,  # turn 1: others e1, e2
        1 - (-0.25),  # turn 2: only e1 reached it
    ])
    assert advantages[1] == pytest.approx([-0.25 - (1 + 0.5) / 2, -0.25 - (1 + 0) / 2, -0.25 - 1, -0.25])
    assert advantages[2] == pytest.approx([0.5 - (1 - 0.25) / 2, 0.0 - (1 - 0.25) / 2])


def test_turn_rloo_when_no_other_episode_reached_the_turn():
    # e1's turn 3 was reached by no other episode
    assert turn_rloo(GROUP_REWARDS, ["g"] * 3, alone="return")[1][3] == pytest.approx(-0.25)  # b = 0: A = G
    assert turn_rloo(GROUP_REWARDS, ["g"] * 3, alone="zero")[1][3] == 0.0
    # an episode alone in its group
    assert turn_rloo([[0.0, 1.0]], ["solo"]) == [[1.0, 1.0]]
    with pytest.raises(ValueError, match="alone"):
        turn_rloo(GROUP_REWARDS, ["g"] * 3, alone="mean")


def test_turn_rloo_with_discount():
    # gamma = 0.5: G_e0 = [0.25, 0.5, 1], G_e1 = [-0.03125, -0.0625, -0.125, -0.25], G_e2 = [0.5, 0]
    advantages = turn_rloo(GROUP_REWARDS, ["g"] * 3, gamma=0.5)
    assert advantages[0] == pytest.approx([0.25 - (-0.03125 + 0.5) / 2, 0.5 - (-0.0625 + 0) / 2, 1 + 0.125])


def test_turn_rloo_baseline_never_depends_on_the_episode_itself():
    rng = random.Random(0)
    others = [[rng.choice([0.0, 0.0, 1.0, -0.1]) for _ in range(rng.randint(1, 8))] for _ in range(5)]
    baselines_seen = []
    for length in [*range(1, 9), *range(8, 0, -1)]:  # episode 0 earns other rewards, stops at another turn
        own = [rng.uniform(-1, 1) for _ in range(length)]
        advantages = turn_rloo([own, *others], ["g"] * 6)
        own_to_go = returns_to_go(own)
        baselines_seen.append([g - a for g, a in zip(own_to_go, advantages[0], strict=True)])
    for t in range(8):
        at_t = [b[t] for b in baselines_seen if len(b) > t]
        assert len(at_t) >= 2 and max(at_t) - min(at_t) < 1e-9  # the same baseline, whatever episode 0 did


def test_turn_grpo_hand_computed():
    rewards = [[0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0], [0.5, 0.0]]  # G: [1,1,1], [0,0,0,0], [0.5,0]
    advantages = turn_grpo(rewards, ["g"] * 3)
    # turn 0: values 1, 0, 0.5: mean 0.5, unbiased std 0.5
    s0 = 0.5 + EPSILON
    # turn 1: values 1, 0, 0: mean 1/3, std sqrt(1/3); turn 2: values 1, 0: mean 0.5, std sqrt(0.5)
    s1, s2 = math.sqrt(1 / 3) + EPSILON, math.sqrt(0.5) + EPSILON
    assert advantages[0] == pytest.approx([0.5 / s0, (2 / 3) / s1, 0.5 / s2])
    assert advantages[1] == pytest.approx([-0.5 / s0, (-1 / 3) / s1, -0.5 / s2, 0.0])  # turn 3: alone, 0
    assert advantages[2] == pytest.approx([0.0, (-1 / 3) / s1])
    unscaled = turn_grpo(rewards, ["g"] * 3, scale="none")
    assert unscaled[0] == pytest.approx([0.5, 2 / 3, 0.5])
    with pytest.raises(ValueError, match="scale"):
        turn_grpo(rewards, ["g"] * 3, scale="mean")


def test_turn_grpo_batch_scaling_hand_computed():
    # group g as above (G: [1,1,1], [0,0,0,0], [0.5,0]) and group h: G [2], [0].
    rewards = [[0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0], [0.5, 0.0], [2.0], [0.0]]
    advantages = turn_grpo(rewards, ["g", "g", "g", "h", "h"], scale="batch")
    # Every (episode, turn) return-to-go of the batch: 1,1,1, 0,0,0,0, 0.5,0, 2, 0 -> n = 11, mean 5.5/11 = 0.5;
    # squared deviations 3 x 0.25 + 6 x 0.25 + 0 + 2.25 = 4.5; unbiased variance 4.5 / 10 = 0.45.
    b = math.sqrt(0.45) + EPSILON
    # The means stay per group and per turn (as with "group"); only the divisor is the batch's.
    assert advantages[0] == pytest.approx([0.5 / b, (2 / 3) / b, 0.5 / b])
    assert advantages[1] == pytest.approx([-0.5 / b, (-1 / 3) / b, -0.5 / b, 0.0])
    assert advantages[2] == pytest.approx([0.0, (-1 / 3) / b])
    assert advantages[3] == pytest.approx([1.0 / b]) and advantages[4] == pytest.approx([-1.0 / b])
    assert advantages != turn_grpo(rewards, ["g", "g", "g", "h", "h"], scale="group")


def test_shuffle_advantages_deals_the_same_values_at_random():
    rows = [[0.5, 0.5, 0.5], [-1.0], [2.0, 0.0], [0.25, -0.25, 3.0, 4.0]]
    dealt = shuffle_advantages(rows, random.Random(7))
    assert [len(r) for r in dealt] == [len(r) for r in rows]  # the same shape
    assert sorted(a for r in dealt for a in r) == sorted(a for r in rows for a in r)  # the same values
    assert dealt != rows
    assert dealt == shuffle_advantages(rows, random.Random(7))  # seeded: reproducible


def test_the_fair_null_permutes_within_each_group_and_turn():
    # Two groups of three episodes. Group g's episodes differ (turn-level RLOO-like advantages, summing to 0 at
    # each turn); group h's tied, so the real arm gives them 0 everywhere. Episode 2 stopped after one turn.
    rows = [[1.0, 0.5], [-0.5, -0.5], [-0.5], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]
    groups = ["g", "g", "g", "h", "h", "h"]
    cells = group_turn_cells(groups, [range(len(r)) for r in rows])
    assert cells[2] == [("g", 0)] and cells[4] == [("h", 0), ("h", 1)]
    moved_onto_ties = 0
    for seed in range(40):
        fair = shuffle_advantages(rows, random.Random(seed), cells)
        assert [len(r) for r in fair] == [2, 2, 1, 2, 2, 2]
        assert sorted(r[0] for r in fair[:3]) == [-0.5, -0.5, 1.0]  # group g, turn 0: its own values
        assert sorted(r[1] for r in fair[:2]) == [-0.5, 0.5]  # group g, turn 1: the two episodes that reached it
        assert fair[3:] == rows[3:]  # the tied group keeps its zeros
        step = shuffle_advantages(rows, random.Random(seed))  # the whole step's values dealt across groups
        moved_onto_ties += any(a != 0 for r in step[3:] for a in r)
    assert moved_onto_ties > 30  # the step-wide null pushes signal-free updates onto tied groups
    with pytest.raises(ValueError, match="shape"):
        shuffle_advantages(rows, random.Random(0), cells[:-1])


def test_turn_advantages_spread_over_model_tokens_only():
    #               turn 0 (model)  env  turn 1 (model)
    turn_index = [0, 0, 0, 0, 1, 1]
    env_mask = [1, 1, 0, 0, 1, 1]
    assert spread_over_tokens([0.7, -0.2], turn_index, env_mask) == [0.7, 0.7, 0.0, 0.0, -0.2, -0.2]
    assert token_rewards([0.0, 1.0], turn_ends=[1, 5], length=6) == [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]


def test_token_gae_skips_environment_tokens_and_bootstraps_truncation():
    # model tokens at 0, 1, 4, 5; the second turn's reward 1 sits on token 5; env values are ignored
    rewards = [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    values = [0.1, 0.2, 9.0, 9.0, 0.3, 0.4]
    mask = [1, 1, 0, 0, 1, 1]
    advantages, returns = token_gae(rewards, values, mask, gamma=1.0, lam=0.5, last_value=0.0)
    # k=5: delta = 1 + 0 - 0.4 = 0.6, A = 0.6
    # k=4: delta = 0 + 0.4 - 0.3 = 0.1, A = 0.1 + 0.5 * 0.6 = 0.4
    # k=1: delta = 0 + 0.3 - 0.2 = 0.1 (the chain jumps over the env tokens), A = 0.1 + 0.5 * 0.4 = 0.3
    # k=0: delta = 0 + 0.2 - 0.1 = 0.1, A = 0.1 + 0.5 * 0.3 = 0.25
    assert advantages == pytest.approx([0.25, 0.3, 0.0, 0.0, 0.4, 0.6])
    assert returns == pytest.approx([0.35, 0.5, 0.0, 0.0, 0.7, 1.0])
    # truncated: bootstrap from the critic's value of the state after the last turn (0.5)
    truncated, _ = token_gae(rewards, values, mask, gamma=1.0, lam=0.5, last_value=0.5)
    assert truncated == pytest.approx([0.3125, 0.425, 0.0, 0.0, 0.65, 1.1])
    # gamma < 1 discounts per model token
    discounted, _ = token_gae([0.0, 1.0], [0.0, 0.0], [1, 1], gamma=0.9, lam=1.0)
    assert discounted == pytest.approx([0.9, 1.0])
    with pytest.raises(ValueError, match="differ in length"):
        token_gae([0.0], [0.0, 1.0], [1])


def test_scale_is_one_type_for_every_estimator():
    assert Scale.of("batch") is Scale.BATCH and Scale.of(Scale.NONE) is Scale.NONE
    assert (Scale.of(True), Scale.of(False)) == (Scale.GROUP, Scale.NONE)  # TRL's booleans
    assert Scale.GROUP == "group"  # a str Enum: YAML and command-line strings compare equal
    with pytest.raises(ValueError, match="'group', 'batch', 'none'"):
        Scale.of("mean")
    returns, groups = [1.0, 0.0, 0.5], ["a", "a", "a"]
    assert episode_grpo(returns, groups, Scale.NONE) == episode_grpo(returns, groups, "none") == [0.5, -0.5, 0.0]


# GiGPO's hand-made batch. Group a: three episodes of one task that meet again in states s0 and s1 (episode 1
# comes back to s1, e.g. after an invalid action); group b: two episodes whose state is also called s0, which
# must not be grouped with a's.
GIGPO_REWARDS = [[0.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0], [1.0], [0.0]]
GIGPO_STATES = [["s0", "s1", "s2"], ["s0", "s1", "s1"], ["s0", "s3"], ["s0"], ["s0"]]
GIGPO_GROUPS = ["a", "a", "a", "b", "b"]


def test_gigpo_hand_computed_without_scaling():
    advantages = gigpo(GIGPO_REWARDS, GIGPO_GROUPS, GIGPO_STATES, gamma=0.5, step_weight=0.5, scale="none")
    # Episode level: returns 1, 0, 1 (mean 2/3) -> 1/3, -2/3, 1/3; group b: 1, 0 (mean 1/2) -> 1/2, -1/2.
    # Step returns with gamma 0.5: [0.25, 0.5, 1], [0, 0, 0], [0.5, 1], [1], [0].
    # (a, s0): 0.25, 0, 0.5, mean 0.25          -> A^S = 0, -0.25, 0.25
    # (a, s1): 0.5 (ep 0), 0, 0 (ep 1 twice), mean 1/6 -> A^S = 1/3, -1/6, -1/6
    # (a, s2), (a, s3): one step each           -> A^S = 0
    # (b, s0): 1, 0, mean 0.5                   -> A^S = 0.5, -0.5
    # A = A^E + 0.5 A^S
    assert advantages[0] == pytest.approx([1 / 3, 1 / 3 + 1 / 6, 1 / 3])
    assert advantages[1] == pytest.approx([-2 / 3 - 1 / 8, -2 / 3 - 1 / 12, -2 / 3 - 1 / 12])
    assert advantages[2] == pytest.approx([1 / 3 + 1 / 8, 1 / 3])
    assert advantages[3] == pytest.approx([0.75]) and advantages[4] == pytest.approx([-0.75])


def test_gigpo_hand_computed_with_group_scaling():
    advantages = gigpo(GIGPO_REWARDS, GIGPO_GROUPS, GIGPO_STATES, gamma=0.5, step_weight=1.0, scale="group")
    # Episode level, group a: returns 1, 0, 1: unbiased std sqrt(((1/3)^2 + (2/3)^2 + (1/3)^2) / 2) = sqrt(1/3).
    e = math.sqrt(1 / 3) + EPSILON
    # Group b: returns 1, 0: std sqrt(0.5). Step level, (b, s0): values 1, 0: std sqrt(0.5) too.
    b = math.sqrt(0.5) + EPSILON
    # (a, s0): 0.25, 0, 0.5: std sqrt((0 + 0.0625 + 0.0625) / 2) = 0.25
    # (a, s1): 0.5, 0, 0: std sqrt((1/9 + 1/36 + 1/36) / 2) = sqrt(1/12)
    s0, s1 = 0.25 + EPSILON, math.sqrt(1 / 12) + EPSILON
    assert advantages[0] == pytest.approx([(1 / 3) / e, (1 / 3) / e + (1 / 3) / s1, (1 / 3) / e])
    assert advantages[1] == pytest.approx([(-2 / 3) / e - 0.25 / s0, (-2 / 3) / e - (1 / 6) / s1,
                                           (-2 / 3) / e - (1 / 6) / s1])
    assert advantages[2] == pytest.approx([(1 / 3) / e + 0.25 / s0, (1 / 3) / e])
    assert advantages[3] == pytest.approx([0.5 / b + 0.5 / b]) and advantages[4] == pytest.approx([-1.0 / b])


def test_gigpo_reduces_to_episode_grpo_when_no_state_repeats_and_to_its_parts_otherwise():
    returns = [sum(r) for r in GIGPO_REWARDS]
    unique = [[f"{i}-{t}" for t in range(len(r))] for i, r in enumerate(GIGPO_REWARDS)]
    unknown = [[None] * len(r) for r in GIGPO_REWARDS]  # unknown states are never grouped
    for states in (unique, unknown):
        for scale in Scale:
            episode = episode_grpo(returns, GIGPO_GROUPS, scale)
            got = gigpo(GIGPO_REWARDS, GIGPO_GROUPS, states, gamma=0.9, scale=scale)
            assert got == [pytest.approx([a] * len(r)) for a, r in zip(episode, GIGPO_REWARDS, strict=True)]
    # omega = 0: the episode-level advantage alone, whatever the states.
    alone = gigpo(GIGPO_REWARDS, GIGPO_GROUPS, GIGPO_STATES, step_weight=0.0, scale="none")
    assert alone == [pytest.approx([a] * len(r)) for a, r in
                     zip(episode_grpo(returns, GIGPO_GROUPS, "none"), GIGPO_REWARDS, strict=True)]
    # States keyed by the turn index alone: the step groups are turn-level GRPO's (the episodes that reached t).
    by_turn = [list(range(len(r))) for r in GIGPO_REWARDS]
    turn = turn_grpo(GIGPO_REWARDS, GIGPO_GROUPS, gamma=0.5, scale="none")
    got = gigpo(GIGPO_REWARDS, GIGPO_GROUPS, by_turn, gamma=0.5, step_weight=2.0, scale="none")
    episode = episode_grpo(returns, GIGPO_GROUPS, "none")
    assert got == [pytest.approx([a + 2.0 * s for s in row]) for a, row in zip(episode, turn, strict=True)]
    with pytest.raises(ValueError, match="one state per turn"):
        gigpo(GIGPO_REWARDS, GIGPO_GROUPS, [s[:1] for s in GIGPO_STATES])


def test_anchor_group_stats_hand_computed():
    # Anchor groups: (a,s0) 3 steps, (a,s1) 3, (a,s2) 1, (a,s3) 1, (b,s0) 2: 10 steps in 5 groups,
    # 8 of them in a group of more than one.
    assert anchor_group_stats(GIGPO_STATES, GIGPO_GROUPS) == pytest.approx({"mean_size": 2.0, "shared_fraction": 0.8})
    assert anchor_group_stats([[None, None]], ["a"]) == {"mean_size": 1.0, "shared_fraction": 0.0}
    assert anchor_group_stats([], []) == {"mean_size": 0.0, "shared_fraction": 0.0}

