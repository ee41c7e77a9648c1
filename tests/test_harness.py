"""Training an agent loop people already have: examples/openai_harness.py (only the ``openai`` package) plays
Signals through the proxy and is trained with turn-level RLOO; each of its calls trains on its own context."""

from __future__ import annotations

import time

import pytest
import torch

from tests.helpers_llm import tiny_llama, word_tokenizer
from turngym.agents.proxy import CapturedCall
from turngym.envs.signals import signal_tasks
from turngym.trainers.config import TurnGymConfig
from turngym.trainers.harness import HarnessEpisodeResult, RecordedWorld, StepRecord, episode_of_calls

pytestmark = pytest.mark.usefixtures("one_torch_thread")

HARNESS = "examples/openai_harness.py:play"
WORLD = {"turns": 3, "colours": 2}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return word_tokenizer(tmp_path_factory.mktemp("signals-words"))


def config(tmp_path, **overrides) -> TurnGymConfig:
    fields = {"output_dir": str(tmp_path), "env_id": "turngym/Signals-v0", "env_kwargs": WORLD,
              "reward_mode": "dense", "algorithm": "turn_rloo", "num_generations": 4, "per_device_train_batch_size": 8,
              "max_steps": 2, "learning_rate": 1e-2, "logging_steps": 1, "report_to": "none", "save_strategy": "no",
              "max_completion_length": 1024, "tis_cap": None, "seed": 0, "disable_tqdm": True, "harness": HARNESS,
              "harness_kwargs": {"max_tokens": 1}, "harness_max_context": 512}
    return TurnGymConfig(**{**fields, **overrides})


def made(index, prompt, sampled, *, rewritten=False) -> CapturedCall:
    return CapturedCall(episode="e", index=index, choice=0, messages=[], tools=None, prompt_ids=list(prompt),
                        completion_ids=list(sampled), logprobs=[0.0] * len(sampled), stopped=True,
                        finish_reason="stop", reply={"role": "assistant", "content": "go"}, rewritten=rewritten)


def test_world_rewards_go_to_the_call_before_each_step_and_a_reward_function_to_the_last():
    """Calls 0-3; the world stepped after calls 1 and 3 (call 2 was a note): rewards 0, 0.5, 0, 0.5, plus the
    registered function's 2.0 on the last call; a dropped (rewritten) call's step goes to the call before it."""
    from turngym.envs.tasks import Task

    world = RecordedWorld(None, None, None, "e")
    world.first_observation = "The light is red."
    world.steps = [StepRecord(1, 0.5, False, False, {}, "Right."), StepRecord(3, 0.5, True, False, {"won": True},
                                                                             "You made it through.")]
    calls = [made(0, [1], [5]), made(1, [1, 5, 6], [7]), made(2, [9], [8], rewritten=True), made(3, [1, 9], [4])]
    task = Task("signals", "signals/1", "train", "easy", {"lights": ["red"]})
    result = HarnessEpisodeResult(calls, world, None, None, "e")
    episode = episode_of_calls(result, task, "signals/1", end_of_turn_id=2,
                               reward=lambda messages, task: 2.0 if task["id"] == "signals/1" else 0.0)
    assert episode.turn_rewards == [0.0, 0.5, 0.0, 2.5] and episode.won and episode.terminated
    assert [s.prompt_ids for s in episode.turn_samples()] == [[1], [1, 5, 6], [9], [1, 9]]
    assert episode.trajectory.reward_components == {"harness_reward": 2.0}
    dropped = episode_of_calls(result, task, "signals/1", end_of_turn_id=2, on_rewrite="drop")
    assert dropped.turn_rewards == [0.0, 0.5, 0.5] and [s.prompt_ids for s in dropped.turn_samples()][2] == [1, 9]
    stopped = episode_of_calls(HarnessEpisodeResult(calls[:2], RecordedWorld(None, None, None, "e"), None, None),
                               task, "k", end_of_turn_id=2)
    assert stopped.truncated and stopped.truncation_reason == "harness_stopped" and stopped.turn_rewards == [0, 0]


@pytest.mark.timeout(600)
def test_an_unmodified_openai_harness_trains_with_turn_level_rloo(tokenizer, tmp_path):
    """Two steps: every episode's training samples are exactly the calls the proxy captured, groups carry
    advantages, and the weights move."""
    from turngym.trainers.trainer import TurnGymTrainer

    model = tiny_llama(len(tokenizer)).train()
    before = [p.detach().clone() for p in model.parameters()]
    trainer = TurnGymTrainer(model, config(tmp_path), tasks=signal_tasks("train", 8, **WORLD),
                             processing_class=tokenizer)
    captured: dict[str, list[CapturedCall]] = {}
    trainer.runner.store.sink = lambda call: captured.setdefault(call.episode, []).append(call)
    played = []
    play = trainer.runner.play
    trainer.runner.play = lambda *a, **k: played.append(play(*a, **k)) or played[-1]
    try:
        trainer.train()
    finally:
        trainer.runner.close()
    episodes = [e for _, step in played for e in step]
    assert len(episodes) == 16 and any(e.turn_rewards != episodes[0].turn_rewards for e in episodes)
    for episode in episodes:
        calls = sorted(captured[episode.task["harness_episode"]], key=lambda c: c.key)
        samples = episode.turn_samples()
        assert [(s.prompt_ids, s.completion_ids) for s in samples] == [(c.prompt_ids, c.completion_ids)
                                                                     for c in calls]
    log = trainer.state.log_history[0]
    assert log["advantages/frac_zero_groups"] < 1 and log["episode/turns"] >= 3
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


FRAGILE_HARNESS = """
import time

from openai import OpenAI


def play(episode):
    client = OpenAI(base_url=episode.base_url, api_key=episode.api_key, max_retries=0)
    observation, _ = episode.env.reset()
    messages = [{"role": "user", "content": observation}]
    kind = int(episode.episode_id.rsplit("-", 1)[-1]) % 4  # 0 raises, 1 hangs, 2 and 3 play
    for turn in range(3):
        reply = client.chat.completions.create(model=episode.model, messages=messages, max_tokens=2)
        if kind == 0:
            raise RuntimeError("the harness broke")
        if kind == 1:
            time.sleep(8)
        message = reply.choices[0].message
        observation, _, terminated, truncated, _ = episode.env.step(message.content or "")
        messages += [message.model_dump(exclude_none=True), {"role": "user", "content": observation}]
        if terminated or truncated:
            break
    return messages
"""


def test_a_failing_or_stuck_harness_ends_only_its_own_episode(tokenizer, tmp_path):
    """Of four episodes one harness raises after its first call and one outlives harness_timeout: those end
    truncated (harness_error, harness_timeout) on the calls they made; the other two are whole."""
    from turngym.trainers.harness import HarnessRunner

    path = tmp_path / "fragile.py"
    path.write_text(FRAGILE_HARNESS)
    args = config(tmp_path, harness=f"{path}:play", harness_timeout=4.0, harness_kwargs=None)
    args.resolve()
    tasks = signal_tasks("train", 4, **WORLD)
    runner = HarnessRunner(args, tasks, tokenizer)
    try:
        started = time.monotonic()
        _, episodes = runner.play([t.id for t in tasks], tiny_llama(len(tokenizer)), seed=0)
        took = time.monotonic() - started
    finally:
        runner.close()
    reasons = [e.truncation_reason for e in episodes]
    assert reasons[0] == "harness_error" and reasons[1] == "harness_timeout" and took < 8
    assert [e.num_turns for e in episodes[:2]] == [1, 1]
    for episode in episodes[2:]:  # played to the end, or stopped by the harness after its 3 calls
        assert episode.terminated or (episode.num_turns == 3 and episode.truncation_reason == "harness_stopped")
