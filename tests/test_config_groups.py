"""The config's typed groups (issue 26.3): Literal choices equal to the enums, checked at parse time and at
construction; the groups' views; the grouped help; the critic group equal to CriticConfig's flat names."""

from __future__ import annotations

from dataclasses import fields
from typing import get_args

import pytest

from turngym.agents.actions import ActionFormat
from turngym.envs.core import ActionProtocol, RewardMode
from turngym.trainers.config import (
    GROUPS,
    ActionFormatName,
    ActionProtocolName,
    CriticOptions,
    EstimatorOptions,
    RewardModeName,
    RolloutOptions,
    TurnGymConfig,
    WorldOptions,
)
from turngym.trainers.config_cli import ConfigParser
from turngym.trainers.critic import FLAT_FIELDS, CriticConfig

SIGNALS = {"env_id": "turngym/Signals-v0", "model_name_or_path": "x", "report_to": "none"}


def test_the_literals_are_the_enums():
    assert set(get_args(RewardModeName)) == {m.value for m in RewardMode}
    assert set(get_args(ActionProtocolName)) == {p.value for p in ActionProtocol}
    assert set(get_args(ActionFormatName)) == {f.value for f in ActionFormat}


def test_each_field_is_declared_in_one_group_and_the_critic_group_is_critic_configs():
    names = [f.name for group, *_ in GROUPS for f in fields(group)]
    assert len(names) == len(set(names))
    assert {f.name for f in fields(CriticOptions)} == set(FLAT_FIELDS)
    assert set(FLAT_FIELDS.values()) == {f.name for f in fields(CriticConfig)}


def test_a_bad_choice_fails_at_parse_time_with_the_choices(tmp_path):
    parser = ConfigParser(TurnGymConfig)
    parser.error = lambda message: (_ for _ in ()).throw(ValueError(message))  # type: ignore[method-assign]
    with pytest.raises(ValueError, match=r"invalid choice: 'dens'.*sparse.*dense"):
        parser.parse_args_and_config([*_argv(tmp_path), "--reward_mode", "dens"])
    (config,) = parser.parse_args_and_config([*_argv(tmp_path), "--reward_mode", "dense", "--kl_penalty", "loss"])
    assert config.reward_mode == "dense" and isinstance(config, TurnGymConfig)


def test_a_bad_choice_from_yaml_or_python_fails_at_construction(tmp_path):
    with pytest.raises(ValueError, match="shuffle_scope must be one of 'group', 'step', got 'batch'"):
        TurnGymConfig(output_dir=str(tmp_path), **SIGNALS, shuffle_scope="batch")
    with pytest.raises(ValueError, match="action_format must be one of .* or None"):
        TurnGymConfig(output_dir=str(tmp_path), **SIGNALS, action_format="xml")
    config = TurnGymConfig(output_dir=str(tmp_path), **SIGNALS, reward_mode=RewardMode.DENSE)  # the enum passes
    assert config.reward_mode == "dense"


def test_group_views_and_resolve_is_idempotent(tmp_path):
    config = TurnGymConfig(output_dir=str(tmp_path), **SIGNALS, gamma=0.9, curriculum="success", lam=0.5)
    assert isinstance(config.world_options, WorldOptions) and config.world_options.env_id == "turngym/Signals-v0"
    assert config.estimator_options == EstimatorOptions(**{f.name: getattr(config, f.name)
                                                           for f in fields(EstimatorOptions)})
    assert config.estimator_options.gamma == 0.9 and config.rollout_options.curriculum == "success"
    assert isinstance(config.rollout_options, RolloutOptions) and config.critic_config.lam == 0.5
    assert config.action_format is None  # construction looks nothing up: the world's reply format comes with resolve
    assert config.resolve() is config and config.action_format == "prefix"
    before = {f.name: getattr(config, f.name) for f in fields(config)}
    assert config.resolve() is config
    assert {f.name: getattr(config, f.name) for f in fields(config)} == before


def test_help_shows_the_groups_in_order():
    text = ConfigParser(TurnGymConfig, full_help=False, prog="turngym train").format_help()
    heads = ["world:", "rollout:", "estimator:", "critic:", "TRL GRPOConfig", "model:"]
    assert all(head in text for head in heads)
    assert [text.index(head) for head in heads] == sorted(text.index(head) for head in heads)
    rollout = text.index("rollout:")
    assert text.index("--reward_mode {sparse,dense}") < rollout < text.index("--curriculum {off,success}")
    assert "--lr_scheduler_type" not in text
    assert "--lr_scheduler_type" in ConfigParser(TurnGymConfig, prog="turngym train").format_help()


def _argv(tmp_path):
    return [arg for key, value in {**SIGNALS, "output_dir": str(tmp_path)}.items() for arg in (f"--{key}", value)]
