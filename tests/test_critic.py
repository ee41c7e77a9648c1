"""The critic's config and protocol (trainers/critic.py), and GAE as an ordinary registered estimator."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from helpers_llm import OneProcess, tiny_llama

from turngym.trainers import advantages as adv
from turngym.trainers import critic as critics
from turngym.trainers.config import TurnGymConfig
from turngym.trainers.critic import FLAT_FIELDS, Critic, CriticConfig, NoCritic, TokenCritic, value_model
from turngym.trainers.estimators import AdvantageBatch, EpisodeTokens, Input, Level, get_estimator

CONFIG_DIR = Path(__file__).resolve().parents[1] / "recipes" / "configs"


def config(tmp_path, **overrides) -> TurnGymConfig:
    return TurnGymConfig(output_dir=str(tmp_path), env_id="turngym/Signals-v0", report_to="none", **overrides)


def test_the_flat_fields_fill_the_critic_config(tmp_path):
    """critic_learning_rate, critic_rows_per_pass, lam... stay TurnGymConfig fields (YAML and the CLI use them);
    they fill args.critic_config, and both have the same defaults."""
    flat = {f.name: f.default for f in dataclasses.fields(TurnGymConfig) if f.name in FLAT_FIELDS}
    assert set(flat) == set(FLAT_FIELDS)
    ours = {f.name: f.default for f in dataclasses.fields(CriticConfig)}
    assert set(ours) == set(FLAT_FIELDS.values())
    assert {FLAT_FIELDS[k]: v for k, v in flat.items() if k != "critic_learning_rate"} == {
        k: v for k, v in ours.items() if k != "learning_rate"}
    args = config(tmp_path, algorithm="ppo", learning_rate=2e-6, lam=0.9, critic_rows_per_pass=2, value_clip=None,
                  critic_warmup_steps=3, bootstrap_truncated=False, whiten_advantages=False, critic_max_grad_norm=0.5)
    assert dataclasses.asdict(args.critic_config) == {
        "model_name_or_path": None, "learning_rate": pytest.approx(2e-5), "warmup_steps": 3, "value_clip": None,
        "max_grad_norm": 0.5, "rows_per_pass": 2, "lam": 0.9, "bootstrap_truncated": False,
        "whiten_advantages": False}
    assert args.critic_learning_rate == pytest.approx(2e-5)  # the flat field is filled too
    with pytest.raises(ValueError, match="critic_rows_per_pass"):
        config(tmp_path, algorithm="ppo", critic_rows_per_pass=0)
    with pytest.raises(ValueError, match="rows_per_pass"):
        CriticConfig(rows_per_pass=0)


@pytest.mark.parametrize("path", [CONFIG_DIR / "textworld-ppo.yaml", CONFIG_DIR / "signals-ppo.yaml"],
                         ids=lambda p: p.name)
def test_shipped_yaml_configs_fill_the_critic_config(path):
    import yaml
    from trl import TrlParser

    written = yaml.safe_load(path.read_text())
    (args,) = TrlParser([TurnGymConfig]).parse_args_and_config(["--config", str(path), "--output_dir", "/tmp/x"])
    for flat, ours in FLAT_FIELDS.items():
        if flat in written:
            assert getattr(args.critic_config, ours) == pytest.approx(written[flat]), flat


def test_ppo_is_the_gae_estimator_with_values():
    ppo = get_estimator("ppo")
    assert ppo.function.__name__ == "gae" and ppo.needs == {Input.VALUES} and ppo.level is Level.TOKEN
    assert ppo.needs_values and ppo.needs_critic and ppo.needs_tokens
    assert not get_estimator("turn_rloo").needs_tokens


def test_gae_reads_the_batch_by_hand():
    """Two model tokens, one world token between them, a truncated episode bootstrapped from V after the end."""
    tokens = EpisodeTokens(env_mask=[1, 0, 1], turn_index=[0, 0, 1], turn_ends=[0, 2], truncated=True,
                           values=[0.5, 9.0, 0.25, 2.0])
    batch = AdvantageBatch([[1.0, 0.0]], [0], [[None, None]], tokens=[tokens])
    args = config_namespace(gamma=0.9, lam=0.8, bootstrap_truncated=True, whiten=False)
    estimate = get_estimator("ppo")(batch, args)
    expected = adv.token_gae([1.0, 0.0, 0.0], [0.5, 9.0, 0.25], [1, 0, 1], 0.9, 0.8, last_value=2.0)
    assert estimate.advantages == [pytest.approx(expected[0])]
    assert estimate.value_targets == [pytest.approx(expected[1])]
    # by hand: delta_2 = 0 + 0.9 * 2 - 0.25 = 1.55; delta_0 = 1 + 0.9 * 0.25 - 0.5 = 0.725; A_0 = 0.725 + 0.72 * 1.55
    assert estimate.advantages[0] == pytest.approx([0.725 + 0.72 * 1.55, 0.0, 1.55])
    assert batch.turn_values(0) == [0.5, 0.25]
    args.critic_config = dataclasses.replace(args.critic_config, bootstrap_truncated=False)
    assert get_estimator("ppo")(batch, args).advantages[0][2] == pytest.approx(-0.25)


def config_namespace(*, gamma: float, lam: float, bootstrap_truncated: bool, whiten: bool):
    from types import SimpleNamespace

    return SimpleNamespace(gamma=gamma, critic_config=CriticConfig(lam=lam, bootstrap_truncated=bootstrap_truncated,
                                                                   whiten_advantages=whiten))


def test_no_critic_is_a_critic_whose_every_call_is_a_no_op(tmp_path):
    config = CriticConfig(warmup_steps=3)
    critic = critics.build_critic(False, policy=None, config=config, processes=None, critic=object())  # unused
    assert isinstance(critic, NoCritic) and isinstance(critic, Critic) and not critic.enabled
    assert critic.config.warmup_steps == 0 and config.warmup_steps == 3  # never warms up; the run's config kept
    rows = {"completion_ids": torch.zeros(2, 3, dtype=torch.long)}
    assert critic.values(rows) is None
    assert critic.targets(rows, None, [[1.0]], [[1]]) == {} and "old_values" not in rows
    assert critic.loss(rows, 1.0, lambda loss: pytest.fail("no value loss to backward")) == {}
    critic.step()
    critic.save(str(tmp_path))
    critic.load(str(tmp_path))
    assert list(tmp_path.iterdir()) == []  # nothing written
    assert getattr(critic, "optimizer", None) is None  # the trainer's critic_optimizer


def test_token_critic_is_a_critic_and_gives_v_before_each_token(tokenizer_size=64):
    policy = tiny_llama(tokenizer_size)
    critic = TokenCritic.build(policy, CriticConfig(learning_rate=1e-3), OneProcess())
    assert isinstance(critic, Critic) and not isinstance(value_model(policy), Critic) and critic.enabled
    assert critics.build_critic(True, policy, CriticConfig(), OneProcess(), critic=critic) is critic  # a given Critic
    with torch.no_grad():
        critic.model.score.weight.normal_()
    rows = {"prompt_ids": torch.tensor([[0, 5, 6], [7, 8, 9]]), "prompt_mask": torch.tensor([[0, 1, 1], [1, 1, 1]]),
            "completion_ids": torch.tensor([[10, 11], [12, 0]]), "completion_mask": torch.tensor([[1, 1], [1, 0]]),
            "tool_mask": torch.tensor([[1, 1], [1, 0]])}
    values = critic.values(rows)
    every = critic(torch.cat([rows["prompt_ids"], rows["completion_ids"]], 1),
                   torch.cat([rows["prompt_mask"], rows["completion_mask"]], 1))
    assert values.shape == (2, 3) and torch.equal(values, every[:, 2:5])  # V before tokens 3, 4 and after the last
    metrics = critic.targets(rows, values, [[1.0, 1.0], [0.5]], [[1, 1], [1]])
    assert rows["returns"].tolist() == [[1.0, 1.0], [0.5, 0.0]] and torch.equal(rows["old_values"], values[:, :2])
    assert set(metrics) == {"critic/explained_variance", "critic/value_mean"}
    before = [p.detach().clone() for p in critic.parameters()]
    losses = critic.loss(rows, 3.0, torch.Tensor.backward)
    assert losses["critic/value_loss"] > 0
    critic.step()
    assert any(not torch.equal(a, b) for a, b in zip(before, critic.parameters(), strict=True))
