"""Tasks and task sets: identity, fingerprints, disjoint splits, serialisation, TextWorld panels."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from turngym import envs
from turngym.envs.tasks import SplitOverlapError, Task, TaskSet, assert_disjoint
from turngym.envs.textworld.generation import textworld_tasks


def make_task(seed: int, split: str = "train", **changes) -> Task:
    fields = {
        "world": "toy",
        "id": f"toy/{seed}",
        "split": split,
        "difficulty": "easy",
        "payload": {"seed": seed},
        "content_hash": None,
    }
    fields.update(changes)
    return Task(**fields)


def make_set(*tasks: Task, name: str = "toy", version: str = "1") -> TaskSet:
    return TaskSet(name=name, version=version, tasks=tuple(tasks))


# --------------------------------------------------------------------------- Task
def test_task_key_ignores_split_and_id_but_not_world_or_payload():
    train = make_task(1, "train")
    other_split = dataclasses.replace(train, split="eval", id="toy/eval-1", difficulty="hard")
    assert train.key == other_split.key
    assert train.key != make_task(2).key
    assert train.key != dataclasses.replace(train, world="other").key
    assert train.key != dataclasses.replace(train, payload={"seed": 1, "extra": 0}).key


def test_task_key_does_not_depend_on_payload_key_order():
    a = make_task(1, payload={"config": "w2-o3-q4", "seed": 1})
    b = make_task(1, payload={"seed": 1, "config": "w2-o3-q4"})
    assert a.key == b.key


def test_task_dict_round_trip_and_info():
    task = make_task(4, "eval", content_hash="abc")
    assert Task.from_dict(task.to_dict()) == task
    assert task.info() == {"id": "toy/4", "split": "eval", "difficulty": "easy"}
    assert json.loads(json.dumps(task.to_dict())) == task.to_dict()


# --------------------------------------------------------------------------- fingerprints
def test_fingerprint_is_stable_for_equal_content():
    a = make_set(make_task(1), make_task(2, "eval"))
    b = make_set(make_task(1), make_task(2, "eval"))
    assert a.fingerprint == b.fingerprint
    assert a.fingerprint == a.fingerprint
    assert len(a.fingerprint) == 16 and int(a.fingerprint, 16) >= 0


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda: make_set(make_task(1), make_task(3, "eval")), id="different task"),
        pytest.param(lambda: make_set(make_task(1, id="toy/one"), make_task(2, "eval")), id="task id"),
        pytest.param(lambda: make_set(make_task(1, "test"), make_task(2, "eval")), id="task split"),
        pytest.param(lambda: make_set(make_task(1, difficulty="hard"), make_task(2, "eval")), id="difficulty"),
        pytest.param(
            lambda: make_set(make_task(1, payload={"seed": 1, "level": 2}), make_task(2, "eval")), id="payload"
        ),
        pytest.param(lambda: make_set(make_task(1), make_task(2, "eval"), version="2"), id="version"),
        pytest.param(lambda: make_set(make_task(1), make_task(2, "eval"), name="toy2"), id="name"),
        pytest.param(lambda: make_set(make_task(1, content_hash="00ff"), make_task(2, "eval")), id="content_hash"),
        pytest.param(lambda: make_set(make_task(2, "eval"), make_task(1)), id="order"),
        pytest.param(lambda: make_set(make_task(1)), id="task removed"),
    ],
)
def test_fingerprint_changes_with_any_change(change):
    base = make_set(make_task(1), make_task(2, "eval"))
    assert change().fingerprint != base.fingerprint


def test_with_content_hashes_changes_the_fingerprint_and_keeps_the_rest():
    base = make_set(make_task(1), make_task(2, "eval"))
    hashed = base.with_content_hashes({"toy/1": "aa", "toy/2": "bb"})
    assert [t.content_hash for t in hashed] == ["aa", "bb"]
    assert [dataclasses.replace(t, content_hash=None) for t in hashed] == list(base)
    assert hashed.fingerprint != base.fingerprint
    partial = base.with_content_hashes({"toy/2": "bb"})
    assert [t.content_hash for t in partial] == [None, "bb"]


# --------------------------------------------------------------------------- validity and splits
def test_duplicate_ids_raise_value_error():
    with pytest.raises(ValueError, match="toy/1"):
        make_set(make_task(1), make_task(1, payload={"seed": 99}))


def test_splits_overlapping_by_payload_raise():
    train = make_task(1, "train")
    same_game_in_eval = make_task(1, "eval", id="toy/eval-copy")
    with pytest.raises(SplitOverlapError) as error:
        make_set(train, make_task(2, "train"), same_game_in_eval)
    assert "toy/eval-copy" in str(error.value)
    assert isinstance(error.value, ValueError)


def test_splits_overlapping_by_content_hash_raise():
    train = make_task(1, "train", content_hash="same-game")
    eval_task = make_task(2, "eval", content_hash="same-game")  # another seed, but the same game
    with pytest.raises(SplitOverlapError, match="same content"):
        make_set(train, eval_task)
    base = make_set(make_task(1, "train"), make_task(2, "eval"))
    with pytest.raises(SplitOverlapError):
        base.with_content_hashes({"toy/1": "h", "toy/2": "h"})


def test_disjoint_splits_are_accepted():
    tasks = make_set(make_task(1, content_hash="a"), make_task(2, "eval", content_hash="b"), make_task(3, "test"))
    assert tasks.splits == ("train", "eval", "test")
    assert_disjoint(tasks.split("train"), tasks.split("eval"), tasks.split("test"))


def test_assert_disjoint_on_groups():
    assert_disjoint([make_task(1)], [make_task(2, "eval")])
    with pytest.raises(SplitOverlapError, match="1 task"):
        assert_disjoint([make_task(1)], [make_task(1, "eval", id="toy/x")])
    with pytest.raises(SplitOverlapError):
        assert_disjoint([make_task(1)], [make_task(5)], [make_task(1, "test", id="toy/y")])


def test_split_by_id_take_and_sample():
    tasks = make_set(*(make_task(i) for i in range(5)), *(make_task(i, "eval") for i in range(5, 8)))
    evaluation = tasks.split("eval")
    assert [t.id for t in evaluation] == ["toy/5", "toy/6", "toy/7"]
    assert evaluation.version == tasks.version
    with pytest.raises(KeyError, match="no split"):
        tasks.split("valid")
    assert tasks.by_id("toy/6") == tasks[6]
    with pytest.raises(KeyError):
        tasks.by_id("toy/99")
    assert list(tasks.take(2)) == [tasks[0], tasks[1]]
    draws = [tasks.sample(np.random.default_rng(0)).id for _ in range(3)]
    assert len(set(draws)) == 1  # same generator state, same task
    many = {tasks.sample(np.random.default_rng(s)).id for s in range(50)}
    assert many <= {t.id for t in tasks} and len(many) > 1


# --------------------------------------------------------------------------- serialisation
def test_jsonl_round_trip():
    tasks = make_set(make_task(1, content_hash="aa"), make_task(2, "eval"), name="panel", version="v3")
    text = tasks.to_jsonl()
    header = json.loads(text.splitlines()[0])
    assert header == {"taskset": {"name": "panel", "version": "v3", "fingerprint": tasks.fingerprint}}
    loaded = TaskSet.from_jsonl(text)
    assert loaded == tasks
    assert loaded.fingerprint == tasks.fingerprint


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"seed":2', '"seed":3'),  # a payload edited
        ('"split":"eval"', '"split":"test"'),  # a task moved to another split
        ('"content_hash":"aa"', '"content_hash":"ab"'),
        ('"version":"v3"', '"version":"v4"'),  # the header's version
    ],
)
def test_jsonl_detects_tampering(old, new):
    text = make_set(make_task(1, content_hash="aa"), make_task(2, "eval"), name="panel", version="v3").to_jsonl()
    assert text.count(old) == 1
    with pytest.raises(ValueError, match="edited"):
        TaskSet.from_jsonl(text.replace(old, new))


def test_jsonl_detects_a_removed_task():
    text = make_set(make_task(1), make_task(2, "eval")).to_jsonl()
    lines = text.splitlines()
    with pytest.raises(ValueError, match="edited"):
        TaskSet.from_jsonl("\n".join(lines[:-1]) + "\n")


def test_jsonl_needs_a_header():
    text = make_set(make_task(1)).to_jsonl()
    with pytest.raises(ValueError, match="header"):
        TaskSet.from_jsonl("\n".join(text.splitlines()[1:]))
    with pytest.raises(ValueError, match="header"):
        TaskSet.from_jsonl("")


def test_jsonl_checks_splits_on_load():
    # A hand-written file (no fingerprint) that lists the same game in two splits.
    rows = [
        {"taskset": {"name": "hand", "version": "1"}},
        make_task(1).to_dict(),
        make_task(1, "eval", id="toy/copy").to_dict(),
    ]
    with pytest.raises(SplitOverlapError):
        TaskSet.from_jsonl("\n".join(json.dumps(r) for r in rows))


# --------------------------------------------------------------------------- TextWorld panels
@pytest.fixture(scope="module")
def textworld_all() -> TaskSet:
    return textworld_tasks("w2-o3-q4", "all")


def test_textworld_train_panel():
    train = textworld_tasks("w2-o3-q4", "train")
    assert len(train) == 5000
    assert [t.payload["seed"] for t in train] == list(range(30001, 35001))
    assert {t.split for t in train} == {"train"}
    assert train[0].id == "textworld/w2-o3-q4/30001"
    assert train[0].world == "textworld" and train[0].difficulty == "w2-o3-q4"
    assert train[0].payload == {"config": "w2-o3-q4", "seed": 30001}


def test_textworld_eval_panel():
    evaluation = textworld_tasks("w2-o3-q4", "eval")
    assert len(evaluation) == 500  # its first 100 are the reference study's held-out seeds 1-100
    assert [t.payload["seed"] for t in evaluation] == list(range(1, 501))
    assert {t.split for t in evaluation} == {"eval"}
    assert evaluation.by_id("textworld/w2-o3-q4/17").payload["seed"] == 17
    assert [t.payload["seed"] for t in textworld_tasks("w2-o3-q4", "eval", n=100)] == list(range(1, 101))


def test_textworld_test_panel_is_reserved_and_apart():
    test = textworld_tasks("w2-o3-q4", "test")
    assert [t.payload["seed"] for t in test] == list(range(10001, 10501)) and {t.split for t in test} == {"test"}
    assert "test" not in textworld_tasks("w2-o3-q4", "all").splits  # never mixed in by "all"
    assert_disjoint(textworld_tasks("w2-o3-q4", "train"), textworld_tasks("w2-o3-q4", "eval"), test)


def test_textworld_all_panel_has_both_splits_disjoint(textworld_all):
    assert len(textworld_all) == 5500
    assert textworld_all.splits == ("train", "eval")
    train, evaluation = textworld_all.split("train"), textworld_all.split("eval")
    assert len(train) == 5000 and len(evaluation) == 500
    assert {t.key for t in train}.isdisjoint({t.key for t in evaluation})
    assert_disjoint(train, evaluation)
    assert list(train) == list(textworld_tasks("w2-o3-q4", "train"))


def test_textworld_panels_are_deterministic(textworld_all):
    assert textworld_tasks("w2-o3-q4", "all").fingerprint == textworld_all.fingerprint
    assert textworld_tasks("w2-o3-q4", "eval").fingerprint != textworld_tasks("w8-o3-q4", "eval").fingerprint
    assert textworld_tasks("w2-o3-q4", "eval").fingerprint != textworld_tasks("w2-o3-q4", "eval", n=99).fingerprint


def test_textworld_n_keeps_the_first_seeds_of_each_split():
    small = textworld_tasks("w2-o3-q4", "all", n=3)
    assert [t.payload["seed"] for t in small] == [30001, 30002, 30003, 1, 2, 3]
    assert [t.payload["seed"] for t in textworld_tasks("w2-o3-q4", "eval", n=2)] == [1, 2]


@pytest.mark.parametrize("config", ["w2-o3", "nonsense", "w0-o3-q4", "cooking-r1-t1-g2", ""])
def test_textworld_unknown_config_raises(config):
    with pytest.raises(ValueError, match="config"):
        textworld_tasks(config, "eval")


def test_textworld_unknown_split_raises():
    with pytest.raises(ValueError, match="split"):
        textworld_tasks("w2-o3-q4", "valid")


def test_public_names_are_exported():
    assert envs.Task is Task and envs.TaskSet is TaskSet
    assert envs.SplitOverlapError is SplitOverlapError and envs.assert_disjoint is assert_disjoint
