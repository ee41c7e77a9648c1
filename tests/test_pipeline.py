"""Bounded-staleness pipelining: rollouts of coming steps play in a thread while the trainer trains."""

from __future__ import annotations

import copy
import math
import threading
import time

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
from turngym.trainers.pipeline import (
    EnginePolicy,
    PolicyCopy,
    RolloutPipeline,
    SamplerPlan,
    ServerPolicy,
    VersionedBackend,
    detached_copy,
)
from turngym.trainers.vllm_colocate import TRLWeightSync, pipelined_vllm, trl_vllm_sampler

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


@pytest.mark.parametrize("lora", [False, True])
def test_the_samplers_copy_computes_with_its_own_weights_when_trl_has_patched_the_forward(lora):
    """TRL's trainer patches the policy's forward with a closure over the original's (add_fused_lm_head); the
    sampler's copy must not run the trainer's live weights through it."""
    from peft import LoraConfig, get_peft_model
    from trl.trainer.utils import add_fused_lm_head

    trained = tiny_llama(40)
    if lora:
        trained = get_peft_model(trained, LoraConfig(r=4, target_modules=["q_proj"], init_lora_weights=False))
    add_fused_lm_head(trained.get_base_model() if lora else trained, outputs=("log_probs", "entropy"))
    ids = torch.tensor([[1, 5, 7, 9]])
    policy = PolicyCopy(trained)
    with torch.no_grad():
        before = policy.model(ids).logits
        for parameter in trained.parameters():
            parameter.add_(0.1)  # the trainer steps
        assert torch.equal(policy.model(ids).logits, before)  # the copy's weights did not move
        policy.publish(trained, 1)
        assert policy.refresh()
        torch.testing.assert_close(policy.model(ids).logits, trained(ids).logits)
        assert not torch.equal(policy.model(ids).logits, before)


def test_the_samplers_copy_drops_any_forward_that_closes_over_the_original_module():
    """Not only TRL's wrapper: a forward patched with a closure over the module itself (not a bound method) would
    also run the original's weights in a deep copy."""
    original = torch.nn.Linear(3, 2)
    plain_forward = torch.nn.Linear.forward
    original.forward = lambda x: plain_forward(original, x) * 1.0
    copy_ = detached_copy(original)
    with torch.no_grad():
        x = torch.ones(1, 3)
        before = copy_(x).clone()
        original.weight.add_(1.0)
        assert torch.equal(copy_(x), before) and not torch.equal(original(x), before)


def test_the_plan_gives_each_process_its_slice_of_every_batch():
    """accelerate deals each rollout batch out in per-process slices, in order: process i plays the i-th."""
    epochs = [[0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3]]

    class Sampler:
        def __iter__(self):
            return iter(epochs[0])

    plans = [SamplerPlan(Sampler(), ["a", "b", "c", "d"], batch_size=4, repeat=2, process_index=i, num_processes=2)
             for i in range(2)]
    assert [[plan(g) for g in range(2)] for plan in plans] == [[["a", "a"], ["c", "c"]], [["b", "b"], ["d", "d"]]]
    with pytest.raises(ValueError, match="does not split"):
        SamplerPlan(Sampler(), ["a"], batch_size=4, repeat=1, process_index=0, num_processes=3)


class FakeEngine:
    """A VLLMBackend as an EnginePolicy sees it: whether a request is in flight, and what was loaded."""

    def __init__(self):
        self.idle, self.loaded = True, []

    def load_weights(self, weights):
        assert self.idle, "weights loaded while a request was in flight"
        self.loaded.append(dict(weights))


def test_an_engine_policy_snapshots_under_vllms_names_and_loads_only_while_idle(tmp_path):
    words = train_tokenizer(tmp_path / "tok")
    model = tiny_llama(len(words))
    engine = FakeEngine()
    policy = EnginePolicy(engine, model)
    policy.publish(model, 1)
    with torch.no_grad():
        model.model.embed_tokens.weight.add_(1.0)  # training goes on: the snapshot is a copy
    engine.idle = False
    assert not policy.refresh(block=False) and policy.version == 0 and not engine.loaded  # a turn is in flight
    engine.idle = True
    assert policy.refresh(block=False) and policy.version == 1
    [loaded] = engine.loaded
    assert loaded.keys() == {name for name, _ in model.named_parameters()}  # tied head once, as a checkpoint
    assert torch.equal(loaded["model.embed_tokens.weight"] + 1.0, model.model.embed_tokens.weight)
    assert not policy.refresh(block=False)  # nothing newer


def test_an_engine_snapshot_of_a_lora_policy_has_the_adapters_merged(tmp_path):
    from peft import LoraConfig, get_peft_model

    words = train_tokenizer(tmp_path / "tok")
    base = tiny_llama(len(words))
    adapted = get_peft_model(copy.deepcopy(base), LoraConfig(r=4, target_modules=["q_proj"], init_lora_weights=False))
    merged = copy.deepcopy(adapted).merge_and_unload()
    engine = FakeEngine()
    policy = EnginePolicy(engine, adapted)
    policy.publish(adapted, 3)
    assert policy.refresh()
    [loaded] = engine.loaded
    assert loaded.keys() == {name for name, _ in base.named_parameters()}
    for name, parameter in merged.named_parameters():
        torch.testing.assert_close(loaded[name], parameter, rtol=0, atol=1e-6)
    assert not any(getattr(m, "merged", False) for m in adapted.modules())  # unmerged again for training


class FakeDecoder:
    def __init__(self):
        self.added, self.busy = [], False

    def add(self, request):
        self.added.append(request.key)
        self.busy = True

    def step(self):
        return []


class DecodingBackend:
    def __init__(self):
        self.inner_decoder = FakeDecoder()

    def decoder(self, sampling, stop_ids):
        return self.inner_decoder


def test_a_backends_own_decoder_records_versions_and_refreshes_only_when_empty():
    """Partial rollouts on an engine decoder: new weights load between turns only while no turn runs (each running
    turn keeps the weights it started with); each turn records the version loaded when it joined."""
    policy = PolicyCopy(torch.nn.Linear(2, 2))
    backend = VersionedBackend(DecodingBackend(), policy, refresh_between_turns=True)
    decoder = backend.decoder(SamplingConfig(), [])
    decoder.add(GenerationRequest(0, [1]))
    policy.publish(torch.nn.Linear(2, 2), 1)
    decoder.add(GenerationRequest(1, [1]))  # turn 0 runs: no refresh
    assert policy.version == 0
    backend.inner.inner_decoder.busy = False
    decoder.add(GenerationRequest(0, [1, 2]))  # the decoder emptied: version 1 loads first
    assert backend.versions == {0: [0, 1], 1: [0]} and policy.version == 1
    lockstep = VersionedBackend(ScriptedBackend(lambda r: "x", lambda t: [3]), policy, refresh_between_turns=False)
    assert type(lockstep.decoder(SamplingConfig(), [])).__name__ == "TurnBatcher"  # no decoder of its own


class ServerClient:
    """A server's client as the pipeline sees it: scripted replies, and the requests it has out."""

    def __init__(self, reply, encode):
        self.inner, self.out = ScriptedBackend(reply, encode), 0

    @property
    def idle(self):
        return self.out == 0

    def generate(self, requests, sampling, stop_ids):
        self.out += len(requests)
        try:
            time.sleep(0.005)
            return self.inner.generate(requests, sampling, stop_ids)
        finally:
            self.out -= len(requests)

    def release(self, key):
        pass

    def cache_prefix(self, ids):
        pass


class TRLSync:
    """TRL's sync to a server: records the thread it ran on and the requests out at the server then."""

    def __init__(self, client):
        self.client, self.calls = client, []

    def publish(self, model, version):
        self.calls.append((threading.current_thread() is threading.main_thread(), self.client.out))


def test_a_server_gets_the_weights_on_the_trainers_thread_between_batches(tmp_path):
    """Server mode (no vLLM server here, on CPU: the ordering with a fake client). TRL's sync runs on the trainer's
    thread (between its steps: here while it waits for a batch), only after the sampler asked, between batches,
    with no request out; the batch then plays with, and records, the version synced."""
    words = train_tokenizer(tmp_path / "tok")
    tasks = {f"m/{i}": Task(world="m", id=f"m/{i}", split="train", difficulty="1") for i in range(2)}
    client = ServerClient(lambda r: "Action: win", words.encode)
    sync = TRLSync(client)
    pool = make_pool(MISBEHAVING, 2, num_workers=2, step_timeout=20.0)

    def play(generation, task_ids, wrap):
        agent = LLMAgent(wrap(client), words, LLMAgentConfig(max_new_tokens=16))
        return run_episodes(agent, pool, [tasks[t] for t in task_ids])

    pipeline = RolloutPipeline(play, lambda g: list(tasks), ServerPolicy(sync, client, None), max_staleness=1)
    pipeline.on_close = lambda: pool.close(terminate=True)
    try:
        versions = [pipeline.take(0, list(tasks), None).versions]
        for generation in (1, 2, 3):
            pipeline.publish(None, generation)  # the trainer's on_step_end: serves only if the sampler asked
            versions.append(pipeline.take(generation, list(tasks), None).versions)
    finally:
        pipeline.close()
    assert sync.calls and all(on_main and out == 0 for on_main, out in sync.calls)
    assert len(sync.calls) <= 3  # one sync a batch at most, never for the first (it plays the starting weights)
    for generation, batch in enumerate(versions):
        assert all(generation - 1 <= v[0] <= generation for v in batch)  # staleness <= 1
    assert versions[0] == [[0], [0]] and versions[2][0][0] >= 1  # batch 2 waited for a sync


def test_pipelined_vllm_owns_the_engine_or_refuses_in_one_line():
    from test_assembly import FakeGeneration, FakeLLM

    model = torch.nn.Linear(2, 2)
    generation = FakeGeneration(llm=FakeLLM())
    _, publisher = trl_vllm_sampler(generation, sharded=False)
    make_backend, policy = pipelined_vllm(generation, publisher, model, sharded=False, processes=2)
    assert isinstance(policy, EnginePolicy) and policy.engine is publisher and make_backend(None) is publisher
    policy.publish(model, 1)
    assert policy.refresh() and torch.equal(generation.llm.loaded[0]["weight"], model.weight)
    server = FakeGeneration(client=object())
    _, sync = trl_vllm_sampler(server, sharded=False)
    make_backend, policy = pipelined_vllm(server, sync, model, sharded=False, processes=1)
    assert isinstance(policy, ServerPolicy) and isinstance(policy.sync, TRLWeightSync)
    assert make_backend(None).client is server.vllm_client
    with pytest.raises(ValueError, match="one training process"):
        pipelined_vllm(server, sync, model, sharded=False, processes=2)
    with pytest.raises(ValueError, match="DeepSpeed or FSDP"):
        pipelined_vllm(generation, publisher, model, sharded=True, processes=1)


def test_vllm_with_pipelining_is_no_longer_refused(tmp_path):
    assert make_args(tmp_path, max_staleness=1, use_vllm=True).max_staleness == 1


@pytest.mark.parametrize(("overrides", "message"), [
    ({"max_staleness": 1, "curriculum": "success"}, "curriculum"),
    ({"max_staleness": 1, "tis_cap": None}, "tis_cap None"),
    ({"partial_rollouts": True}, "partial_rollouts needs max_staleness"),
    ({"max_staleness": -1}, "max_staleness must be >= 0"),
])
def test_pipeline_options_that_cannot_work_are_refused(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        make_args(tmp_path, **overrides)


def test_server_mode_continuous_batching_returns_every_turn_and_leaves_nothing_in_flight():
    """ServerDecoder (vLLM server mode): each turn is its own request, sent from a thread pool while turns finish;
    every turn comes back once, under its key, and the backend is idle after (weights may change)."""
    from turngym.agents.generation import Generation
    from turngym.agents.vllm_backend import VLLMBackend

    backend = VLLMBackend(client=object())
    release = threading.Event()

    def generate(requests, sampling, stop_ids):
        release.wait(timeout=5)
        return [Generation(ids=[len(r.ids)], logprobs=[0.0], stopped=True) for r in requests]

    backend._client_generate = generate
    decoder = backend.decoder(SamplingConfig(), [0])
    for key in range(16):
        decoder.add(GenerationRequest(key, list(range(key + 1))))
    assert not backend.idle and decoder.step() == []  # nothing finished yet
    release.set()
    finished = {}
    while decoder.busy:
        finished.update(decoder.step())
    assert finished == {key: Generation(ids=[key + 1], logprobs=[0.0], stopped=True) for key in range(16)}
    assert backend.idle
