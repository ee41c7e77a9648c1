"""Task panels by env id, for the built-in worlds and for a user's own world."""

from __future__ import annotations

import pytest

import envs
from envs.panels import task_panel
from envs.signals import SignalsEnv, signal_tasks
from envs.tasks import TaskSet


def test_signals_panel_follows_the_env_options():
    panel = task_panel("turngym/Signals-v0", "eval", 5, {"turns": 4, "colours": 3})
    assert [t.id for t in panel] == [t.id for t in signal_tasks("eval", 5, turns=4, colours=3)]
    assert all(len(t.payload["signals"]) == 4 for t in panel)


def test_a_user_world_is_asked_for_its_tasks_and_splits_never_mix():
    both = TaskSet("lights", "1", tuple(signal_tasks("train", 3)) + tuple(signal_tasks("eval", 2)))
    envs.register("mine/Lights-v0", entry_point=lambda **kw: SignalsEnv(tasks=both, **kw))
    assert [t.split for t in task_panel("mine/Lights-v0", "eval")] == ["eval", "eval"]
    assert len(task_panel("mine/Lights-v0", "train", 2)) == 2
    with pytest.raises(KeyError, match="no split 'test'"):
        task_panel("mine/Lights-v0", "test")
