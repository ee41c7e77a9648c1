"""A judge inside `turngym train`: each step's groups ranked together (RULER) between the rollout and the estimator,
the scores in the returns; a failed judgement flagged (and its group left out of the loss with judge_failed: drop)."""

from __future__ import annotations

import json
import re

import pytest

from tests.helpers_llm import scripted_signals_backend, tiny_llama, word_tokenizer
from turngym.agents.episode_table import Trajectory
from turngym.envs.judges import Judge, Rubric
from turngym.trainers.config import TurnGymConfig
from turngym.trainers.episodes import Episode
from turngym.trainers.judged_steps import StepJudge

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class RightCounter:
    """A judge model that scores each episode of a group by its count of "Right." (0-10), one call per group."""

    name = "right-counter"

    def __init__(self, broken: bool = False) -> None:
        self.calls, self.broken = [], broken

    def complete(self, requests):
        self.calls.append(len(requests))
        return [self.reply(r) for r in requests]

    def reply(self, request):
        text = request.messages[-1]["content"]
        nonce = re.search(r'"id": "([0-9a-f]{16})"', text).group(1)
        episodes = re.findall(r"\[\[EPISODE \d+ \w+\]\]\n(.*?)\n\[\[END EPISODE", text, flags=re.DOTALL)
        if self.broken:
            return "These all look fine to me: 10/10."
        return json.dumps({"id": nonce, "scores": [min(10, e.count("Right.") * 5) for e in episodes], "reason": "r"})


def episode(task: str, rights: int, rewards: list[float]) -> Episode:
    """An episode of ``task`` whose world said "Right." ``rights`` times, one sampled token a turn."""
    from turngym.agents.records import TokenRecord

    turns = len(rewards)
    observations = ["The light is red."] + ["Right. The light is green."] * rights + ["Wrong."] * (turns - rights)
    record = TokenRecord(prompt_ids=[1], completion_ids=[5] * turns, env_mask=[1] * turns, logprobs=[0.0] * turns,
                         turn_index=list(range(turns)), turn_ends=list(range(turns)))
    trajectory = Trajectory(task={"id": task}, observations=observations, actions=["stop"] * turns,
                            turn_rewards=list(rewards), record=record)
    return Episode(trajectory, task)


def test_each_group_is_ranked_in_one_call_and_the_scores_go_into_the_returns():
    model = RightCounter()
    step = StepJudge(Judge(model, rubric=Rubric("Right answers are better.")), kind="group", mode="add", weight=2.0)
    episodes = [episode("a", 2, [0.5, 0.5]), episode("a", 0, [0.0, 0.0]), episode("b", 1, [0.5, 0.0]),
                episode("b", 1, [0.5, 0.0])]
    metrics = step.judge_episodes(episodes)
    assert model.calls == [2]  # one batch: two groups, one request each
    assert [e.trajectory.reward_components["judge"] for e in episodes] == [1.0, 0.0, 0.5, 0.5]
    assert [e.turn_rewards for e in episodes] == [[0.5, 2.5], [0.0, 0.0], [0.5, 1.0], [0.5, 1.0]]
    assert metrics["judge/score"] == 0.5 and metrics["judge/failed"] == 0.0
    replaced = [episode("a", 2, [0.5, 0.5]), episode("a", 0, [0.0, 0.0])]
    StepJudge(Judge(RightCounter(), rubric="Right answers are better."), mode="replace").judge_episodes(replaced)
    assert [e.episode_reward for e in replaced] == [1.0, 0.0]


def test_a_failed_judgement_keeps_the_worlds_reward_flagged_and_drop_leaves_its_group_out(tmp_path):
    from turngym.trainers.estimators import advantage_batch, get_estimator, step_advantages, step_entries

    step = StepJudge(Judge(RightCounter(broken=True), rubric="Right answers are better."), mode="add")
    episodes = [episode("a", 2, [0.5, 0.5]), episode("a", 0, [0.0, 0.0])]
    metrics = step.judge_episodes(episodes)
    assert [e.turn_rewards for e in episodes] == [[0.5, 0.5], [0.0, 0.0]] and metrics["judge/failed"] == 1.0
    assert all(e.trajectory.reward_components["judge_failed"] == 1.0 for e in episodes)
    judged = [episode("b", 1, [0.5, 0.0]), episode("b", 0, [0.0, 0.0])]
    everything = episodes + judged
    for failed, dropped in (("keep", [False] * 4), ("drop", [True, True, False, False])):
        args = TurnGymConfig(output_dir=str(tmp_path), env_id="turngym/Signals-v0", model_name_or_path="x",
                             report_to="none", algorithm="turn_rloo", num_generations=2, judge="hf:unused",
                             judge_failed=failed)
        estimator = get_estimator("turn_rloo")
        batch = advantage_batch(step_entries(everything, estimator), [e.group for e in everything])
        result = step_advantages(estimator, batch, args, everything, slice(0, 4), step=0, process=0)
        assert list(result.dropped) == dropped


@pytest.mark.timeout(600)
def test_a_training_step_judges_its_groups(tmp_path, monkeypatch):
    """turngym train with a judge: the step's groups are ranked once each, its metrics logged, the weights move."""
    from turngym.envs.signals import signal_tasks
    from turngym.trainers import judged_steps
    from turngym.trainers.trainer import TurnGymTrainer

    tokenizer = word_tokenizer(tmp_path / "tok")
    model = RightCounter()
    monkeypatch.setattr(judged_steps.StepJudge, "of", classmethod(
        lambda cls, args: cls(Judge(model, rubric="Right answers are better."), kind=args.judge_kind,
                              mode=args.judge_mode, weight=args.judge_weight)))
    args = TurnGymConfig(output_dir=str(tmp_path / "run"), env_id="turngym/Signals-v0",
                         env_kwargs={"turns": 3, "colours": 2}, reward_mode="dense", algorithm="turn_rloo",
                         num_generations=4, per_device_train_batch_size=8, max_steps=1, learning_rate=1e-2,
                         logging_steps=1, report_to="none", save_strategy="no", max_completion_length=256,
                         tis_cap=None, seed=0, disable_tqdm=True, judge="hf:scripted", judge_weight=0.5)
    trainer = TurnGymTrainer(tiny_llama(len(tokenizer)).train(), args, tasks=signal_tasks("train", 8, turns=3,
                                                                                           colours=2),
                             processing_class=tokenizer, backend=scripted_signals_backend(tokenizer))
    trainer.train()
    log = trainer.state.log_history[0]
    assert model.calls == [2]  # the step's 2 groups of 4, one request each, in one batch
    assert log["judge/failed"] == 0.0 and 0.0 <= log["judge/score"] <= 1.0
