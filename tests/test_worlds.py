"""Several worlds in one run (groups never mix worlds, per-world metrics and panels) and the task curriculum."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from helpers_llm import tiny_llama, word_tokenizer

from turngym.agents.backends import ScriptedBackend
from turngym.agents.base import stable_seed
from turngym.envs.signals import COMMANDS, RULE
from turngym.trainers.config import TurnGymConfig
from turngym.trainers.curriculum import SuccessCurriculum, TaskSampler
from turngym.trainers.trainer import TurnGymTrainer, group_keys

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# Two worlds of one env id: 2 signals and 4 signals, each with a turn limit of its length. Their task ids are the
# same (signals/train/0...), so only the world tells their tasks apart.
WORLDS = [
    {"name": "short", "env_kwargs": {"turns": 2, "colours": 2}, "max_turns": 2, "num_train_tasks": 4},
    {"name": "long", "env_kwargs": {"turns": 4, "colours": 2}, "max_turns": 4, "num_train_tasks": 4},
]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return word_tokenizer(tmp_path_factory.mktemp("words"))


def make_args(tmp_path: Path, **overrides) -> TurnGymConfig:
    fields = {"output_dir": str(tmp_path / "run"), "env_id": "turngym/Signals-v0", "worlds": WORLDS,
              "reward_mode": "dense", "action_format": "last_line", "max_new_tokens_per_turn": 2,
              "algorithm": "turn_rloo", "num_generations": 4, "per_device_train_batch_size": 8, "max_steps": 1,
              "learning_rate": 1e-2, "logging_steps": 1, "report_to": "none", "save_strategy": "no",
              "max_completion_length": 128, "seed": 0, "disable_tqdm": True, "tis_cap": None}
    return TurnGymConfig(**{**fields, **overrides})


def backend(tokenizer):
    """Scripted replies: the episodes whose sampling seed is even obey the lights (and win), the others vary."""
    def reply(request):
        if request.seed % 2 == 0:
            words = tokenizer.decode(request.ids).split()
            return RULE[next(w for w in reversed(words) if w in RULE)]
        return COMMANDS[stable_seed(request.key, len(request.ids)) % len(COMMANDS)]

    return lambda model: ScriptedBackend(reply, lambda text: tokenizer.encode(text, add_special_tokens=False))


def make_trainer(tmp_path, tokenizer, **overrides) -> TurnGymTrainer:
    args = make_args(tmp_path, **overrides)
    return TurnGymTrainer(tiny_llama(len(tokenizer)).train(), args, processing_class=tokenizer,
                          backend=backend(tokenizer))


# ---------------------------------------------------------------------- config
def test_world_entries_are_checked_before_any_work(tmp_path):
    args = make_args(tmp_path)
    from turngym.trainers.worlds import parse_worlds

    short, long = parse_worlds(args)
    assert (short.name, long.name) == ("short", "long")
    assert short.options.env_kwargs == {"turns": 2, "colours": 2} and long.options.max_turns == 4
    assert long.options.reward_mode == "dense" and long.options.action_format == "last_line"  # the run's defaults
    assert make_args(tmp_path, worlds=json.dumps(WORLDS)).worlds == WORLDS  # JSON on the command line
    mixed = parse_worlds(make_args(tmp_path, action_format=None, skip_train_tasks=1,
                                   worlds=[WORLDS[0], {"name": "swe", "env_id": "turngym/SWE-v0"}]))
    assert [w.options.action_format for w in mixed] == ["prefix", "raw"]  # each world's own default reply format
    assert [w.skip_train_tasks for w in mixed] == [1, 1]  # the top-level fields are the entries' defaults
    unnamed = [{k: v for k, v in w.items() if k != "name"} for w in WORLDS]
    # The entries are checked by resolve() (each world's registry lookup with them), which the trainer calls first.
    with pytest.raises(ValueError, match="same name"):
        make_args(tmp_path, worlds=unnamed).resolve()
    with pytest.raises(ValueError, match="unknown fields"):
        make_args(tmp_path, worlds=[{**WORLDS[0], "turns": 3}, WORLDS[1]]).resolve()
    with pytest.raises(ValueError, match="at the top level"):
        make_args(tmp_path, worlds=[{**WORLDS[0], "model_name_or_path": "x"}, WORLDS[1]]).resolve()
    with pytest.raises(ValueError, match="weight on every world or on none"):
        make_args(tmp_path, worlds=[{**WORLDS[0], "weight": 1}, WORLDS[1]]).resolve()
    with pytest.raises(ValueError, match="takes no option"):  # each world's options are checked against it
        make_args(tmp_path, worlds=[{**WORLDS[0], "env_kwargs": {"turn": 2}}, WORLDS[1]]).resolve()
    with pytest.raises(ValueError, match="curriculum must be"):
        make_args(tmp_path, curriculum="hardest")
    with pytest.raises(ValueError, match="curriculum_target"):
        make_args(tmp_path, curriculum="success", curriculum_target=1.0).resolve()


def test_a_group_of_two_worlds_is_refused():
    assert group_keys(["short::signals/train/0"] * 2 + ["long::signals/train/0"] * 2, 2) == [0, 0, 1, 1]
    with pytest.raises(RuntimeError, match="mixes tasks"):  # the same task id in two worlds is two tasks
        group_keys(["short::signals/train/0", "long::signals/train/0"], 2)


# ---------------------------------------------------------------------- the trainer
def test_two_worlds_play_groups_of_one_world_and_log_per_world(tmp_path, tokenizer):
    trainer = make_trainer(tmp_path, tokenizer, max_steps=4, eval_split="eval", num_eval_tasks=2)
    keys = trainer.train_dataset["prompt"]
    assert len(keys) == len(set(keys)) == 8  # the worlds' task ids collide; their keys do not
    assert {k.split("::")[0] for k in keys} == {"short", "long"}
    batch = next(iter(trainer.get_train_dataloader()))
    trainer._generate_and_score_completions(batch)
    episodes = [row["episode"] for row in batch]
    for first in range(0, len(episodes), 4):
        group = episodes[first: first + 4]
        assert len({(e.world, e.task["id"]) for e in group}) == 1  # one task of one world
        world = group[0].world
        assert batch[first]["prompt"].startswith(f"{world}::")
        signals = {"short": 2, "long": 4}[world]
        assert len(trainer.runner.tasks[batch[first]["prompt"]].payload["signals"]) == signals  # its own tasks
        assert all(e.num_turns <= signals for e in group)  # played in its own world (turn limit)
    trainer.train()
    logged = [row for row in trainer.state.log_history if "episode/return" in row]
    assert len(logged) == 4
    for world in ("short", "long"):  # an epoch of 4 steps plays every task: each world shows up
        assert any(f"episode/return/{world}" in row and f"episode/success/{world}" in row for row in logged)
    for row in logged:
        shares = [row.get(f"episode/share/{w}", 0.0) for w in ("short", "long")]
        assert sum(shares) == pytest.approx(1.0)
    metrics = trainer.evaluate()
    assert metrics["eval/turns/short"] == 2 and metrics["eval/turns/long"] == 4  # each panel in its own world
    assert metrics["eval/turns"] == 3  # pooled over both panels' episodes
    assert {"eval/success/short", "eval/success/long", "eval/success"} <= set(metrics)


def test_world_weights_set_the_share_of_groups(tmp_path, tokenizer):
    weighted = [{**WORLDS[0], "weight": 1}, {**WORLDS[1], "weight": 3}]
    trainer = make_trainer(tmp_path, tokenizer, worlds=weighted, per_device_train_batch_size=4)
    sampler = trainer._get_train_sampler()
    assert isinstance(sampler, TaskSampler) and trainer._get_train_sampler() is sampler
    long = np.array([k.startswith("long::") for k in trainer.train_dataset["prompt"]])
    assert sampler.probabilities()[long].sum() == pytest.approx(0.75)
    drawn = [sampler.draw()[0] for _ in range(400)]
    assert np.mean(long[drawn]) == pytest.approx(0.75, abs=0.06)


# ---------------------------------------------------------------------- the curriculum
def test_success_curriculum_priorities_by_hand():
    curriculum = SuccessCurriculum(5, target=0.5, floor=0.1)
    for index, rate in enumerate([0.5, 1.0, 0.0, 0.75]):
        curriculum.update(index, rate)
    assert curriculum.priorities().tolist() == pytest.approx([1.0, 0.1, 0.1, 0.55, 1.0])  # task 4: never played
    curriculum.update(1, 0.0)  # s <- 1 + 0.5 (0 - 1) = 0.5
    assert curriculum.success[1] == 0.5 and curriculum.priorities()[1] == pytest.approx(1.0)
    skewed = SuccessCurriculum(1, target=0.25, floor=0.2)
    skewed.update(0, 1.0)  # |1 - 0.25| / 0.75 = 1: the floor
    assert skewed.priorities()[0] == pytest.approx(0.2)
    restored = SuccessCurriculum(5)
    restored.load_state_dict(json.loads(json.dumps(curriculum.state_dict())))
    assert np.array_equal(restored.priorities(), curriculum.priorities())


def test_task_sampler_keeps_trls_group_layout():
    sampler = TaskSampler([0, 0, 0, 1, 1, 1], None, mini_repeat_count=2, batch_size=3, repeat_count=2, seed=0)
    order = list(sampler)
    assert len(order) == len(sampler) == 2 * 3 * 2 * 2  # two generation batches of 3 tasks x 2 plays, twice
    for start in range(0, len(order), 12):
        block = order[start: start + 12]
        assert block[:6] == block[6:]  # a generation batch repeated (num_iterations x steps_per_generation)
        tasks = block[:6:2]
        assert block[:6] == [t for t in tasks for _ in range(2)] and len(set(tasks)) == 3  # groups, distinct
    assert list(TaskSampler([0, 0, 0, 1, 1, 1], None, mini_repeat_count=2, batch_size=3, repeat_count=2,
                            seed=0)) == order  # seeded


def test_the_curriculum_moves_the_draws_towards_tasks_near_the_target():
    """Two worlds of 4 tasks. Untried, each has half the draws; once world A is solved (success 1) and world B's
    tasks sit at 0.5, B's share rises to 1 / (1 + 0.1) = 0.91. With world weights, each world keeps its share and
    the curriculum reorders the draws inside it."""
    worlds = [0, 0, 0, 0, 1, 1, 1, 1]
    curriculum = SuccessCurriculum(8, target=0.5, floor=0.1)
    sampler = TaskSampler(worlds, None, mini_repeat_count=1, batch_size=1, seed=7, curriculum=curriculum)
    in_b = np.array(worlds) == 1

    def share_of_b(draws: int = 1000) -> float:
        return float(np.mean([in_b[sampler.draw()[0]] for _ in range(draws)]))

    assert share_of_b() == pytest.approx(0.5, abs=0.05)
    for task in range(4):
        curriculum.update(task, 1.0)
    for task in range(4, 8):
        curriculum.update(task, 0.5)
    assert sampler.probabilities()[in_b].sum() == pytest.approx(1 / 1.1)
    assert share_of_b() == pytest.approx(1 / 1.1, abs=0.03)
    curriculum.update(4, 1.0)  # task 4: 0.5 -> 0.75, priority 0.55; the other B tasks stay at 1
    assert sampler.probabilities()[4] == pytest.approx(0.55 / (4 * 0.1 + 0.55 + 3))
    weighted = TaskSampler(worlds, [1.0, 1.0], mini_repeat_count=1, batch_size=1, seed=7, curriculum=curriculum)
    p = weighted.probabilities()
    assert p[in_b].sum() == pytest.approx(0.5) and p[4] == pytest.approx(0.5 * 0.55 / 3.55)
    assert p[:4] == pytest.approx([0.125] * 4)  # A's tasks are all alike: its half split evenly


def test_the_trainer_feeds_each_groups_success_to_the_curriculum(tmp_path, tokenizer):
    """One world (the short one) whose replies obey the lights in the even-seeded episodes only: each group's
    success rate lands on its task, and the trainer's sampler draws from those priorities in training."""
    trainer = make_trainer(tmp_path, tokenizer, worlds=None, env_kwargs=WORLDS[0]["env_kwargs"], max_turns=2,
                           num_train_tasks=8, curriculum="success", max_steps=3, save_strategy="steps", save_steps=3)
    sampler = trainer._get_train_sampler()
    assert isinstance(sampler, TaskSampler) and sampler.curriculum is trainer.curriculum
    batch = next(iter(trainer.get_train_dataloader()))
    trainer._generate_and_score_completions(batch)
    episodes = [row["episode"] for row in batch]
    played = Counter()
    for first in range(0, 8, 4):
        group = episodes[first: first + 4]
        index = trainer.task_index[batch[first]["prompt"]]
        rate = sum(e.won for e in group) / 4
        assert trainer.curriculum.success[index] == rate
        played[index] += 1
    assert int(np.sum(~np.isnan(trainer.curriculum.success))) == len(played) == 2
    expected = trainer.curriculum.priorities()
    assert np.allclose(sampler.probabilities(), expected / expected.sum())
    trainer.train()
    logged = [row for row in trainer.state.log_history if "curriculum/tasks_seen" in row]
    assert len(logged) == 3 and logged[-1]["curriculum/tasks_seen"] > 0.25
    saved = json.loads((tmp_path / "run" / "checkpoint-3" / "curriculum.json").read_text())
    assert saved == trainer.curriculum.state_dict()  # a resume restores the estimates
    resumed = make_trainer(tmp_path / "again", tokenizer, worlds=None, env_kwargs=WORLDS[0]["env_kwargs"],
                           max_turns=2, num_train_tasks=8, curriculum="success")
    resumed._load_curriculum(str(tmp_path / "run" / "checkpoint-3"))
    assert resumed.curriculum.state_dict() == saved


def test_turngym_train_runs_the_shipped_worlds_config(tmp_path, tokenizer, capsys):
    """recipes/configs/signals-worlds.yaml (two worlds, curriculum, history window) from the command line, tiny."""
    from turngym.recipes.cli import main

    policy = tmp_path / "policy"
    tokenizer.save_pretrained(policy)
    tiny_llama(len(tokenizer)).save_pretrained(policy)
    config = Path(__file__).resolve().parents[1] / "recipes" / "configs" / "signals-worlds.yaml"
    out = tmp_path / "out"
    code = main(["train", "--config", str(config), "--model_name_or_path", str(policy), "--output_dir", str(out),
                 "--max_steps", "2", "--per_device_train_batch_size", "8", "--num_eval_tasks", "2",
                 "--eval_steps", "2", "--max_new_tokens_per_turn", "2", "--report_to", "none"])
    assert code == 0
    captured = capsys.readouterr()
    printed = captured.out + captured.err  # the step line reports each world's held-out success
    assert "eval at step 2: success" in printed and "; long " in printed and "; short " in printed
    assert (out / "model.safetensors").is_file()
