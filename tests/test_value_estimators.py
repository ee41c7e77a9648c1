"""A value-based estimator of one's own: registered, given a critic and trained, without touching the trainer.

The example is Monte Carlo values per turn (a turn-level critic, as in VinePPO's Monte Carlo value targets):

    A_{i,t} = G_{i,t} - V(s_{i,t}),     the critic regresses V(s_{i,t}) on G_{i,t}

with G the discounted return-to-go and s_{i,t} the state turn t acted in. docs/training.md has the same example.
"""

from __future__ import annotations

import pytest
import torch
from helpers_llm import word_tokenizer
from test_trainer import make_trainer, one_batch, played

from turngym.trainers import advantages as adv
from turngym.trainers.critic import CriticConfig, TokenCritic
from turngym.trainers.estimators import (
    AdvantageBatch,
    EpisodeTokens,
    Estimate,
    get_estimator,
    register_estimator,
    unregister_estimator,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return word_tokenizer(tmp_path_factory.mktemp("words"))


@pytest.fixture
def monte_carlo():
    @register_estimator("test_turn_monte_carlo", needs=("values",))
    def turn_monte_carlo(batch: AdvantageBatch, args) -> Estimate:
        """Monte Carlo values per turn: A_{i,t} = G_{i,t} - V(s_{i,t}), the critic's target G_{i,t}."""
        returns = [adv.returns_to_go(r, args.gamma) for r in batch.turn_rewards]
        values = [batch.turn_values(i) for i in range(len(returns))]
        return Estimate(advantages=[[g - v for g, v in zip(gs, vs, strict=True)]
                                    for gs, vs in zip(returns, values, strict=True)],
                        value_targets=returns)

    yield turn_monte_carlo
    unregister_estimator("test_turn_monte_carlo")


def test_monte_carlo_is_gae_at_lambda_one_on_each_turns_first_token(monte_carlo):
    """With gamma = lambda = 1, no whitening and no bootstrap, GAE's advantage at a turn's first model token is
    G_t - V(s_t): the rewards sit on turn ends, so the token-level return from there is the turn's. (With gamma < 1
    they differ: GAE discounts per model token, the turn-level return per turn.)"""
    from types import SimpleNamespace

    tokens = [EpisodeTokens(env_mask=[1, 1, 0, 0, 1, 0, 1], turn_index=[0, 0, 0, 0, 1, 1, 2], turn_ends=[1, 4, 6],
                            truncated=False, values=[0.3, -0.2, 5.0, 5.0, 0.7, 5.0, 0.1, 9.0]),
              EpisodeTokens(env_mask=[1, 0, 1], turn_index=[0, 0, 1], turn_ends=[0, 2], truncated=True,
                            values=[0.4, 5.0, -0.5, 2.0])]
    batch = AdvantageBatch([[0.0, 0.5, 1.0], [1.0, 0.0]], [0, 0], [[None] * 3, [None] * 2], tokens=tokens)
    args = SimpleNamespace(gamma=1.0, critic_config=CriticConfig(lam=1.0, bootstrap_truncated=False,
                                                                 whiten_advantages=False))
    ours = get_estimator("test_turn_monte_carlo")(batch, args)
    gae = get_estimator("ppo")(batch, args)
    for i, t in enumerate(tokens):
        firsts = [t.turn_index.index(turn) for turn in range(len(t.turn_ends))]
        assert ours.advantages[i] == pytest.approx([gae.advantages[i][k] for k in firsts])
        assert ours.value_targets[i] == pytest.approx(adv.returns_to_go(batch.turn_rewards[i], 1.0))
    assert batch.turn_values(0) == [0.3, 0.7, 0.1]


def test_a_value_based_estimator_of_ones_own_gets_a_critic_and_trains(tmp_path, tokenizer, monte_carlo):
    trainer = make_trainer(tmp_path, tokenizer, algorithm="test_turn_monte_carlo", gamma=0.9, max_steps=2,
                           max_completion_length=256, critic_learning_rate=1e-2, learning_rate=1e-2)
    assert isinstance(trainer.critic, TokenCritic) and trainer.args.estimator.needs_values  # from needs= alone
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # a value head that is not 0, so the advantages read the values
        trainer.critic.model.score.weight.copy_(0.3 * torch.randn(trainer.critic.model.score.weight.shape,
                                                                  generator=generator))
    batch = one_batch(trainer)
    output = trainer._generate_and_score_completions(batch)
    for row, episode in enumerate(played(batch)):
        n = len(episode.completion_ids)
        values = output["old_values"][row, :n].tolist()  # V of the state before each token
        firsts = [episode.turn_index.index(turn) for turn in range(episode.num_turns)]
        to_go = adv.returns_to_go(episode.turn_rewards, 0.9)
        expected = [g - values[k] for g, k in zip(to_go, firsts, strict=True)]
        assert output["advantages"][row, :n].tolist() == pytest.approx(
            adv.spread_over_tokens(expected, episode.turn_index, episode.env_mask), abs=1e-5)
        assert output["returns"][row, :n].tolist() == pytest.approx(
            adv.spread_over_tokens(to_go, episode.turn_index, episode.env_mask), abs=1e-6)
    assert any(abs(v) > 1e-3 for v in output["old_values"].flatten().tolist())
    policy = [p.detach().clone() for p in trainer.model.parameters()]
    critic = [p.detach().clone() for p in trainer.critic.parameters()]
    trainer.train()  # two optimizer steps, the critic's and the policy's
    assert trainer.state.global_step == 2
    assert any(not torch.equal(a, b) for a, b in zip(policy, trainer.model.parameters(), strict=True))
    assert any(not torch.equal(a, b) for a, b in zip(critic, trainer.critic.parameters(), strict=True))
    logged = [row for row in trainer.state.log_history if "critic/value_loss" in row]
    assert len(logged) == 2 and all(row["critic/value_loss"] > 0 and "critic/explained_variance" in row
                                    for row in logged)


def test_the_config_treats_it_as_an_estimator_with_a_critic(tmp_path, monte_carlo):
    from test_trainer import make_args

    with pytest.raises(ValueError, match="dynamic_sampling"):
        make_args(tmp_path, algorithm="test_turn_monte_carlo", dynamic_sampling="drop").resolve()
    with pytest.raises(ValueError, match="critic"):
        make_args(tmp_path, algorithm="test_turn_monte_carlo", history_window=2).resolve()
    args = make_args(tmp_path, algorithm="test_turn_monte_carlo", critic_warmup_steps=1).resolve()
    assert args.critic_config.warmup_steps == 1


def test_an_estimator_that_needs_values_must_return_value_targets(tmp_path, tokenizer):
    @register_estimator("test_values_no_targets", needs=("values",))
    def no_targets(batch, args):
        return [[0.0] * len(r) for r in batch.turn_rewards]

    try:
        trainer = make_trainer(tmp_path, tokenizer, algorithm="test_values_no_targets")
        with pytest.raises(ValueError, match="value_targets"):
            trainer._generate_and_score_completions(one_batch(trainer))
    finally:
        unregister_estimator("test_values_no_targets")
    with pytest.raises(ValueError, match="needs"):
        register_estimator("test_bad_input", needs=("rewards_of_the_future",))(no_targets)


def test_the_docs_example_is_this_estimator(monte_carlo):
    """docs/training.md's worked value-based estimator, run as written, gives this module's numbers."""
    import re
    from pathlib import Path
    from types import SimpleNamespace

    text = (Path(__file__).resolve().parents[1] / "docs" / "training.md").read_text()
    (code,) = [block for block in re.findall(r"```python\n(.*?)```", text, re.DOTALL)
               if "turn_monte_carlo" in block]
    try:
        exec(compile(code, "docs/training.md", "exec"), {})  # noqa: S102 - the documentation's own example
        tokens = [EpisodeTokens(env_mask=[1, 0, 1], turn_index=[0, 0, 1], turn_ends=[0, 2], truncated=False,
                                values=[0.4, 5.0, -0.5, 2.0])]
        batch = AdvantageBatch([[1.0, 0.5]], [0], [[None, None]], tokens=tokens)
        args = SimpleNamespace(gamma=0.9)
        documented = get_estimator("turn_monte_carlo")(batch, args)
        assert documented == get_estimator("test_turn_monte_carlo")(batch, args)
        assert documented.advantages == [pytest.approx([1.45 - 0.4, 0.5 + 0.5])]
    finally:
        unregister_estimator("turn_monte_carlo")
