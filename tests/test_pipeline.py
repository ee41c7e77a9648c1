"""Bounded-staleness pipelining: rollouts of coming steps play in a thread while the trainer trains."""

from __future__ import annotations

import math

import pytest
import torch
from helpers_llm import tiny_llama, train_tokenizer
from helpers_pool import MisbehavingWorld
from test_trainer import make_args, make_trainer

from turngym import envs
from turngym.agents.backends import GenerationRequest, HFBackend, SamplingConfig, ScriptedBackend
from turngym.agents.llm import LLMAgent, LLMAgentConfig
from turngym.agents.rollout import run_episodes
from turngym.envs.tasks import Task
from turngym.envs.vector import make_pool
from turngym.trainers.pipeline import PolicyCopy, RolloutPipeline, SamplerPlan, VersionedBackend

pytestmark = pytest.mark.usefixtures("one_torch_thread")
MISBEHAVING = "testpipeline/Misbehaving-v0"
envs.register(MISBEHAVING, entry_point=MisbehavingWorld)
STEP_KEYS = ("episode/return", "episode/turns", "episode/sampled_tokens", "completions/mean_length")


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from helpers_llm import word_tokenizer

    return word_tokenizer(tmp_path_factory.mktemp("words"))


def steps_logged(trainer) -> list[dict]:
    trainer.train()
    return [row for row in trainer.state.log_history if "episode/return" in row]


def test_a_policy_that_does_not_change_plays_the_same_episodes_with_the_pipeline(tmp_path, tokenizer):
    """learning_rate 0: pipelined batches (K = 1, 2) are the batches each step plays itself (same tasks, same
    seeds), step after step."""
    common = {"backend": "hf", "learning_rate": 0.0, "max_steps": 3, "temperature": 1.0}
    on_policy = steps_logged(make_trainer(tmp_path / "k0", tokenizer, **common))
    for k in (1, 2):
        pipelined = steps_logged(make_trainer(tmp_path / f"k{k}", tokenizer, max_staleness=k, **common))
        assert [[row[key] for key in STEP_KEYS] for row in pipelined] == \
            [[row[key] for key in STEP_KEYS] for row in on_policy]
        assert all("pipeline/staleness_mean" in row for row in pipelined)


@pytest.mark.parametrize("k", [1, 2])
def test_staleness_never_exceeds_k(tmp_path, tokenizer, k):
    rows = steps_logged(make_trainer(tmp_path, tokenizer, backend="hf", max_staleness=k, max_steps=4,
                                     partial_rollouts=k == 2))
    assert len(rows) == 4
    for row in rows:
        shares = [row[f"pipeline/staleness_{s}"] for s in range(k + 1)]
        assert row["pipeline/staleness_max"] <= k and math.isclose(sum(shares), 1.0)
    assert rows[0]["pipeline/staleness_max"] == 0  # the first batch plays with the starting weights
    assert max(row["pipeline/staleness_max"] for row in rows) >= 1  # later ones ran ahead of the trainer


def test_turns_carry_the_version_that_sampled_them_and_tis_weights_follow(tmp_path):
    """A two-version episode (partial rollout): turn 1 sampled by version 0, turn 2 by version 1. The recorded
    logprobs are each turn's own sampler's, so the importance ratio exp(logp_train - logp_sampler) against
    version 1 is 1 on turn 2 and not on turn 1."""
    words = train_tokenizer(tmp_path / "tok")
    trained = tiny_llama(len(words), seed=0)
    policy = PolicyCopy(trained)
    backend = VersionedBackend(HFBackend(policy.model, pad_id=0), policy, refresh_between_turns=True)
    sampling = SamplingConfig(temperature=1.0, max_new_tokens=5)
    prompt = words.encode("You are in a kitchen. There is a fridge")
    first = backend.generate([GenerationRequest(7, prompt, seed=1)], sampling, [])[0]
    with torch.no_grad():
        for parameter in trained.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    policy.publish(trained, 1)
    second_prompt = prompt + first.ids + words.encode(" go east")
    second = backend.generate([GenerationRequest(7, second_prompt, seed=2)], sampling, [])[0]
    assert backend.versions[7] == [0, 1] and policy.version == 1

    def logprobs_under(model, context, ids):
        with torch.no_grad():
            logits = model(torch.tensor([context + ids])).logits[0, len(context) - 1 : -1].float()
        return torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids).unsqueeze(-1)).squeeze(-1)

    ratio_first = torch.exp(logprobs_under(trained, prompt, first.ids) - torch.tensor(first.logprobs))
    ratio_second = torch.exp(logprobs_under(trained, second_prompt, second.ids) - torch.tensor(second.logprobs))
    assert torch.allclose(ratio_second, torch.ones_like(ratio_second), atol=1e-4)
    assert not torch.allclose(ratio_first, torch.ones_like(ratio_first), atol=1e-3)


def scripted_pipeline(tokenizer, tasks, reply, *, k=1):
    pool = make_pool(MISBEHAVING, 2, num_workers=2, step_timeout=20.0)

    def play(generation, task_ids, wrap):
        backend = wrap(ScriptedBackend(reply, tokenizer.encode))
        agent = LLMAgent(backend, tokenizer, LLMAgentConfig(max_new_tokens=16))
        return run_episodes(agent, pool, [tasks[t] for t in task_ids], continuous=True)

    pipeline = RolloutPipeline(play, lambda g: list(tasks), PolicyCopy(torch.nn.Linear(2, 2)), max_staleness=k)
    pipeline.on_close = lambda: pool.close(terminate=True)
    return pipeline


def test_a_world_killed_mid_pipeline_truncates_only_its_own_episode(tmp_path):
    words = train_tokenizer(tmp_path / "tok")
    tasks = {f"m/{i}": Task(world="m", id=f"m/{i}", split="train", difficulty="1") for i in range(4)}
    pipeline = scripted_pipeline(words, tasks, lambda r: "Action: die" if r.key == 2 else "Action: win")
    try:
        played = pipeline.take(0, list(tasks), torch.nn.Linear(2, 2))
        pipeline.publish(torch.nn.Linear(2, 2), 1)
        again = pipeline.take(1, list(tasks), None)
    finally:
        pipeline.close()
    for batch in (played, again):
        assert [t.won for t in batch.episodes] == [True, True, False, True]
        assert batch.episodes[2].truncation_reason == "worker_crash"
        assert batch.versions == [[0], [0], [0], [0]]  # one turn each, sampled by the first published weights


def test_a_batch_staler_than_k_is_refused(tmp_path):
    """The schedule cannot make one; were a bug to (here: the sampler's copy rolled back to version 0 while
    batch 2 plays), the trainer gets an error, never the stale batch."""
    words = train_tokenizer(tmp_path / "tok")
    tasks = {f"m/{i}": Task(world="m", id=f"m/{i}", split="train", difficulty="1") for i in range(2)}
    pipeline = scripted_pipeline(words, tasks, lambda r: "Action: win")
    play = pipeline.play

    def rolled_back(generation, task_ids, wrap):
        if generation == 2:
            pipeline.policy.version = 0
        return play(generation, task_ids, wrap)

    pipeline.play = rolled_back
    try:
        for generation in (0, 1):
            assert pipeline.take(generation, list(tasks), torch.nn.Linear(2, 2)).metrics["pipeline/staleness_max"] <= 1
            pipeline.publish(torch.nn.Linear(2, 2), generation + 1)
        with pytest.raises(RuntimeError, match="2 versions old"):
            pipeline.take(2, list(tasks), None)
    finally:
        pipeline.close()


def test_the_trainers_tasks_must_be_the_planned_ones(tmp_path):
    words = train_tokenizer(tmp_path / "tok")
    tasks = {f"m/{i}": Task(world="m", id=f"m/{i}", split="train", difficulty="1") for i in range(2)}
    pipeline = scripted_pipeline(words, tasks, lambda r: "Action: win")
    try:
        with pytest.raises(RuntimeError, match="planned tasks"):
            pipeline.take(0, ["m/1", "m/0"], torch.nn.Linear(2, 2))
    finally:
        pipeline.close()


def test_the_plan_reads_trls_repeat_layout():
    """Each batch's indices come `repeat` times in a row: the plan keeps the first copy, epoch after epoch."""
    epochs = iter([[0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3], [3, 3, 1, 1, 3, 3, 1, 1, 0, 0, 2, 2, 0, 0, 2, 2]])

    class Sampler:
        def __iter__(self):
            return iter(next(epochs))

    plan = SamplerPlan(Sampler(), ["a", "b", "c", "d"], batch_size=4, repeat=2)
    assert [plan(g) for g in range(4)] == [["a", "a", "b", "b"], ["c", "c", "d", "d"], ["d", "d", "b", "b"],
                                           ["a", "a", "c", "c"]]


@pytest.mark.parametrize(("overrides", "message"), [
    ({"max_staleness": 1, "curriculum": "success"}, "curriculum"),
    ({"max_staleness": 1, "tis_cap": None}, "tis_cap None"),
    ({"partial_rollouts": True}, "partial_rollouts needs max_staleness"),
    ({"max_staleness": -1}, "max_staleness must be >= 0"),
])
def test_pipeline_options_that_cannot_work_are_refused(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        make_args(tmp_path, **overrides)
