"""Task panels by env id, for the built-in worlds and for a user's own world."""

from __future__ import annotations

import pytest

from turngym import envs
from turngym.envs.panels import task_panel
from turngym.envs.signals import SignalsEnv, signal_tasks
from turngym.envs.tasks import TaskSet


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


# ---------------------------------------------------------------------- registered panels
def lights_panel(split, n, env_kwargs, *, workers=None, progress=True) -> TaskSet:
    """A panel as a world registers it: follows the world's options, ignores the generation hints."""
    return signal_tasks(split, n or 3, turns=env_kwargs.get("turns", 3))


def test_a_registered_panel_is_called_with_the_world_options():
    envs.register("mine/PanelLights-v0", entry_point=SignalsEnv, task_panel=lights_panel)
    panel = task_panel("mine/PanelLights-v0", "eval", 2, {"turns": 5})
    assert [t.id for t in panel] == ["signals/eval/10000", "signals/eval/10001"]
    assert all(len(t.payload["signals"]) == 5 for t in panel)


def test_a_panel_given_as_a_string_is_imported_only_when_asked_for():
    envs.register("mine/LazyLights-v0", entry_point=SignalsEnv, task_panel="tests.test_panels:lights_panel")
    assert len(task_panel("mine/LazyLights-v0", "train", 4)) == 4
    envs.register("mine/BrokenLights-v0", entry_point=SignalsEnv, task_panel="tests.test_panels:no_such_panel")
    with pytest.raises(ValueError, match="no attribute 'no_such_panel'"):
        task_panel("mine/BrokenLights-v0", "train")
    with pytest.raises(TypeError, match="task_panel"):
        envs.register("mine/BadPanel-v0", entry_point=SignalsEnv, task_panel="not a path")


def test_built_in_worlds_register_panels_without_importing_their_engines():
    import subprocess
    import sys

    code = ("import sys, turngym; from turngym.envs.registry import _TASK_PANELS; "
            "assert all(isinstance(p, str) for p in _TASK_PANELS.values()), _TASK_PANELS; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('textworld', 'alfworld', 'docker')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_only_the_world_that_takes_an_option_gets_it():
    from turngym.envs.registry import check_world_options, world_options

    assert "config" in world_options("turngym/TextWorld-v0")
    assert "config" not in world_options("turngym/Signals-v0")
    with pytest.raises(ValueError, match=r"takes no option 'config'"):
        check_world_options("turngym/Signals-v0", {"config": "w2-o3-q4"})
    with pytest.raises(ValueError, match=r"'turn' \(did you mean 'turns'\?\)"):
        check_world_options("turngym/Signals-v0", {"turn": 3})
    check_world_options("turngym/Signals-v0", {"turns": 3, "reward_mode": "dense", "max_turns": 4})


def test_an_unknown_id_names_close_matches():
    from turngym.envs.registry import UnknownWorldError

    with pytest.raises(UnknownWorldError, match="did you mean 'turngym/Signals-v0'"):
        task_panel("turngym/Signal-v0", "eval")
    with pytest.raises(ValueError, match="at least one task"):
        task_panel("turngym/Signals-v0", "eval", 0)


def test_the_held_out_split_of_a_world():
    from turngym.envs.panels import eval_split

    assert eval_split("turngym/Signals-v0") == "eval"
    odd = TaskSet("odd", "1", tuple(signal_tasks("train", 2)) + tuple(
        t.__class__(**{**t.to_dict(), "split": "test"}) for t in signal_tasks("eval", 2)))
    envs.register("mine/TestSplit-v0", entry_point=lambda **kw: SignalsEnv(tasks=odd, **kw))
    assert eval_split("mine/TestSplit-v0") == "test"


# ---------------------------------------------------------------------- a later panel: tasks first .. first + n - 1
def test_first_slices_a_panel_without_it_and_names_it_as_take_does():
    envs.register("mine/SlicedLights-v0", entry_point=SignalsEnv, task_panel=lights_panel)
    later = task_panel("mine/SlicedLights-v0", "eval", 2, first=3)
    whole = task_panel("mine/SlicedLights-v0", "eval", 5)
    assert [t.id for t in later] == ["signals/eval/10003", "signals/eval/10004"]
    assert later.fingerprint == whole.take(2, start=3).fingerprint
    with pytest.raises(ValueError, match="first must be 0 or more"):
        task_panel("mine/SlicedLights-v0", "eval", 2, first=-1)


def test_textworld_generates_only_the_games_a_later_panel_plays(monkeypatch):
    """TextWorld's panel takes ``first``: tasks 3-4 of the test split generate seeds 10004-10005 only, and the
    panel is the one slicing the first five would give (same name, ids and content hashes: same fingerprint)."""
    from turngym.envs.textworld import generation

    asked: list[list[tuple[str, int]]] = []

    def fake_generate(pairs, workers=None, progress=True):  # a game is seconds of CPU; its hash is what matters
        asked.append(list(pairs))
        return {pair: f"hash-{pair[1]}" for pair in pairs}

    monkeypatch.setattr(generation, "generate_games", fake_generate)
    later = task_panel("turngym/TextWorld-v0", "test", 2, {"config": "w2-o3-q2"}, first=3)
    assert asked == [[("w2-o3-q2", 10004), ("w2-o3-q2", 10005)]]
    whole = task_panel("turngym/TextWorld-v0", "test", 5, {"config": "w2-o3-q2"})
    assert later.name == "textworld/w2-o3-q2/test[3:5]"
    assert later.fingerprint == whole.take(2, start=3).fingerprint
