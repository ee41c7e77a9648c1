"""Continuous batching: turns join and leave the generation batch between decoding steps, with the same
episodes as lockstep for the same seeds; the injected-latency world; the pool's polling receive."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.helpers_pool import MisbehavingWorld
from turngym import envs
from turngym.agents import RandomAgent
from turngym.agents.backends import GenerationRequest, HFBackend, SamplingConfig, ScriptedBackend
from turngym.agents.base import stable_seed
from turngym.agents.decoding import HFDecoder, TurnBatcher, decoder_for
from turngym.agents.llm import LLMAgent, LLMAgentConfig
from turngym.agents.rollout import run_episodes
from turngym.envs.latency import StepLatency, step_latency
from turngym.envs.signals import signal_tasks
from turngym.envs.tasks import Task
from turngym.envs.vector import LocalPool, make_pool

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SIGNALS = "turngym/Signals-v0"
MISBEHAVING = "testcontinuous/Misbehaving-v0"
envs.register(MISBEHAVING, entry_point=MisbehavingWorld)


def requests_of(tokenizer, n: int) -> list[GenerationRequest]:
    texts = ["go east", "You are in a kitchen. There is a fridge", "take apple", "open fridge and look around now",
             "inventory", "Choose one action by its number"]
    return [GenerationRequest(key=i, ids=tokenizer.encode(texts[i % len(texts)] * (1 + i % 3)), seed=100 + i)
            for i in range(n)]


@pytest.mark.parametrize("max_wait", [4, None], ids=["join-per-token", "join-per-turn"])
@pytest.mark.parametrize("temperature", [1.0, 0.0], ids=["sampled", "greedy"])
def test_turns_joining_mid_decode_sample_what_a_whole_batch_samples(model, tokenizer, temperature, max_wait):
    """Turns added at different decoding iterations (joins re-pack the running batch) get the ids and logprobs
    HFBackend.generate gives them in one batch; each finished turn leaves with its cache for the next turn.
    Joining per turn (max_wait None) packs only an empty batch."""
    sampling = SamplingConfig(temperature=temperature, max_new_tokens=10)
    stop = [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    requests = requests_of(tokenizer, 6)
    expected = HFBackend(model, pad_id=0).generate(requests, sampling, stop)

    running_at_pack: list[int] = []

    class Watched(HFDecoder):
        def _pack(self):
            running_at_pack.append(sum(row.running for row in self._rows))
            return super()._pack()

    backend = HFBackend(model, pad_id=0)
    decoder = Watched(backend, sampling, stop, join_ratio=0.0, max_wait=max_wait)  # 0.0: admit every queued turn
    got, arrivals = {}, {0: requests[:2], 2: requests[2:3], 3: requests[3:5], 7: requests[5:]}
    for iteration in range(60):
        for request in arrivals.get(iteration, []):
            decoder.add(request)
        got.update(decoder.step())
    assert not decoder.busy
    if max_wait is None:
        assert set(running_at_pack) == {0}
    else:
        assert decoder.repacks == 4 and max(running_at_pack) > 0
    for request, generation in zip(requests, expected, strict=True):
        assert got[request.key].ids == generation.ids
        assert got[request.key].stopped == generation.stopped
        assert np.allclose(got[request.key].logprobs, generation.logprobs, atol=1e-5)
        # its cache holds exactly the turn's ids but the last sampled one (fed at the next turn)
        assert backend._caches[request.key].ids == request.ids + generation.ids[:-1]


def test_a_full_batch_admits_queued_turns_as_rows_leave(model, tokenizer):
    sampling = SamplingConfig(temperature=1.0, max_new_tokens=6)
    backend = HFBackend(model, pad_id=0, max_batch_size=2)
    decoder = HFDecoder(backend, sampling, [])  # no stop id: every turn runs its 6 tokens
    for request in requests_of(tokenizer, 5):
        decoder.add(request)
    finished, widest = [], 0
    while decoder.busy:
        finished += decoder.step()
        widest = max(widest, sum(row.running for row in decoder._rows))
    assert widest == 2 and sorted(key for key, _ in finished) == [0, 1, 2, 3, 4]
    assert all(len(generation.ids) == 6 for _, generation in finished)


def test_backends_without_a_decoder_batch_per_turn(tokenizer):
    backend = ScriptedBackend(lambda request: "go", tokenizer.encode)
    decoder = decoder_for(backend, SamplingConfig(max_new_tokens=4), [0])
    assert isinstance(decoder, TurnBatcher)
    for request in requests_of(tokenizer, 3):
        decoder.add(request)
    assert decoder.busy and [key for key, _ in decoder.step()] == [0, 1, 2] and not decoder.busy
    assert backend.calls == [3]


def play(model, tokenizer, *, continuous: bool, workers: int, temperature: float = 1.0):
    agent = LLMAgent(HFBackend(model, pad_id=tokenizer.pad_token_id), tokenizer,
                     LLMAgentConfig(max_new_tokens=8, temperature=temperature, seed=3))
    pool = make_pool(SIGNALS, 4, num_workers=workers)
    try:
        return run_episodes(agent, pool, list(signal_tasks("train", n=10, turns=3)), seed=1, continuous=continuous)
    finally:
        pool.close()


@pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "worker-processes"])
def test_continuous_rollouts_are_the_lockstep_episodes(model, tokenizer, workers):
    """Same seeds, same episodes: every sampled id, mask, action and reward; logprobs to float precision."""
    lockstep = play(model, tokenizer, continuous=False, workers=workers)
    continuous = play(model, tokenizer, continuous=True, workers=workers)
    for a, b in zip(lockstep, continuous, strict=True):
        assert (a.actions, a.turn_rewards, a.won, a.truncated) == (b.actions, b.turn_rewards, b.won, b.truncated)
        assert a.tokens.prompt_ids == b.tokens.prompt_ids and a.tokens.completion_ids == b.tokens.completion_ids
        assert a.tokens.env_mask == b.tokens.env_mask
        assert np.allclose(a.tokens.logprobs, b.tokens.logprobs, atol=1e-5)
    assert any(a.num_turns > 1 for a in lockstep)  # turns joined batches that were already running


class OneAnswerAtATime:
    """A pool whose worlds answer one at a time: each receive hands back at most one reply, whatever it waits
    for, and records the timeout it was given (the schedule's decision, without wall-clock timing)."""

    def __init__(self, inner: LocalPool) -> None:
        self.inner, self.num_envs, self.queue, self.timeouts = inner, inner.num_envs, [], []

    def send(self, index, kind, payload=None) -> None:
        self.inner.send(index, kind, payload)

    def receive(self, *, wait_all: bool = True, timeout: float | None = None):
        self.timeouts.append(timeout)
        self.queue += self.inner.receive()
        if wait_all:
            replies, self.queue = self.queue, []
            return replies
        return [self.queue.pop(0)] if self.queue else []

    def close(self) -> None:
        self.inner.close()


def play_scripted(tokenizer, *, batch_window: float):
    """Four Signals episodes, a scripted policy, worlds answering one by one; the sizes of the turn batches
    the agent was given."""
    agent = LLMAgent(ScriptedBackend(lambda request: f"Action: {request.key % 3}", tokenizer.encode), tokenizer,
                     LLMAgentConfig(max_new_tokens=8))
    submitted, submit = [], agent.submit
    agent.submit = lambda episodes: (submitted.append(len(episodes)) if episodes else None) or submit(episodes)
    pool = OneAnswerAtATime(LocalPool.from_id(SIGNALS, 4))
    played = run_episodes(agent, pool, list(signal_tasks("train", n=4, turns=3)), seed=1, continuous=True,
                          batch_window=batch_window)
    return played, submitted, pool.timeouts


def test_a_batching_window_gathers_turns_that_join_together(tokenizer):
    """Window 0: each answer joins the model alone. A long window: answered turns wait for the worlds still
    stepping, so all four join together (and the wait is bounded: a finite timeout, never a blocking one)."""
    alone, alone_sizes, _ = play_scripted(tokenizer, batch_window=0.0)
    gathered, gathered_sizes, timeouts = play_scripted(tokenizer, batch_window=1e6)
    assert set(alone_sizes) == {1}
    assert gathered_sizes == [4] * (sum(alone_sizes) // 4) and sum(gathered_sizes) == sum(alone_sizes)
    assert [t.actions for t in alone] == [t.actions for t in gathered]
    assert any(t is not None and 0 < t <= 1e6 for t in timeouts)


def test_a_batching_window_needs_continuous_batching_and_a_length(tokenizer):
    pool = LocalPool.from_id(SIGNALS, 1)
    agent = LLMAgent(ScriptedBackend(lambda request: "Action: 0", tokenizer.encode), tokenizer, LLMAgentConfig())
    for kwargs in ({"batch_window": 0.5}, {"batch_window": -1.0, "continuous": True}):
        with pytest.raises(ValueError, match="batch_window"):
            run_episodes(agent, pool, list(signal_tasks("train", n=1)), **kwargs)


def test_continuous_batching_needs_an_agent_that_submits():
    pool = LocalPool.from_id(SIGNALS, 1)
    with pytest.raises(ValueError, match="continuous batching needs an agent with submit"):
        run_episodes(RandomAgent(seed=0), pool, list(signal_tasks("train", n=1)), continuous=True)


def test_a_world_killed_mid_rollout_truncates_only_its_own_episode(tokenizer):
    """Continuous batching over worker processes: one world dies on its step; its episode ends truncated
    (worker_crash), the others win, and the respawned worker plays the next task."""
    tasks = [Task(world="m", id=f"m/{i}", split="train", difficulty="1") for i in range(4)]
    agent = LLMAgent(ScriptedBackend(lambda r: "Action: die" if r.key == 1 else "Action: win", tokenizer.encode),
                     tokenizer, LLMAgentConfig(max_new_tokens=16))
    pool = make_pool(MISBEHAVING, 2, num_workers=2, step_timeout=20.0)
    try:
        played = run_episodes(agent, pool, tasks, continuous=True)
    finally:
        pool.close(terminate=True)
    assert [t.won for t in played] == [True, False, True, True]
    assert played[1].truncated and played[1].truncation_reason == "worker_crash"


def test_a_polling_receive_returns_what_is_in_without_waiting():
    pool = make_pool("turngym/Latency-v0", 1, num_workers=1, env_kwargs={"median": 2.0, "tail": 0.0})
    try:
        pool.send(0, "reset", {"seed": 0, "options": {"task": signal_tasks("train", n=1)[0]}})
        assert len(pool.receive()) == 1
        pool.send(0, "step", "go")  # sleeps 2 s before stepping
        assert pool.receive(wait_all=False, timeout=0.0) == []
        (reply,) = pool.receive(wait_all=False)
        assert reply.kind == "step" and not reply.value.truncated
    finally:
        pool.close(terminate=True)


def test_injected_latency_is_log_normal_and_the_same_for_every_schedule():
    """median * exp(tail * z), z ~ N(0, 1) seeded by (seed, task id, turn)."""
    z = np.random.default_rng(stable_seed(7, "t/1", 2)).standard_normal()
    assert step_latency(0.5, 1.5, seed=7, task_id="t/1", turn=2) == pytest.approx(0.5 * math.exp(1.5 * z))
    assert step_latency(0.5, 0.0, seed=7, task_id="t/1", turn=2) == 0.5
    assert step_latency(0.5, 1.5, seed=7, task_id="t/1", turn=3) != step_latency(0.5, 1.5, seed=7, task_id="t/1",
                                                                                  turn=2)
    env = envs.make("turngym/Latency-v0", env_id=SIGNALS, median=0.001, tail=1.0, latency_seed=7)
    task = signal_tasks("train", n=1, turns=2)[0]
    env.reset(seed=0, options={"task": task})
    env.step("go")
    env.step("go")
    wrapper = env
    while not isinstance(wrapper, StepLatency):
        wrapper = wrapper.env
    expected = sum(step_latency(0.001, 1.0, seed=7, task_id=task.id, turn=t) for t in range(2))
    assert wrapper.slept == pytest.approx(expected)
    with pytest.raises(ValueError, match="finite and >= 0"):
        StepLatency(env, median=-1.0)


def test_the_latency_world_has_its_inner_worlds_panel():
    from turngym.envs.registry import panel_of

    panel = panel_of("turngym/Latency-v0")("train", 3, {"env_id": SIGNALS, "median": 0.1, "turns": 2})
    assert [t.id for t in panel] == [t.id for t in signal_tasks("train", n=3, turns=2)]



def test_the_trainer_on_a_continuous_schedule_trains_on_the_lockstep_episodes(tmp_path):
    """rollout_schedule=continuous with env workers: the step's rows and advantages are lockstep's."""
    from tests.helpers_llm import word_tokenizer
    from tests.test_trainer import make_trainer, one_batch

    words = word_tokenizer(tmp_path / "words")
    outputs = []
    for schedule in ("lockstep", "continuous"):
        trainer = make_trainer(tmp_path / schedule, words, backend="hf", rollout_schedule=schedule,
                               num_env_workers=2, temperature=1.0, tis_cap=None)
        try:
            outputs.append(trainer._generate_and_score_completions(one_batch(trainer)))
        finally:
            trainer.runner.close()
    lockstep, continuous = outputs
    assert torch.equal(lockstep["completion_ids"], continuous["completion_ids"])
    assert torch.equal(lockstep["advantages"], continuous["advantages"])


class HeldServer:
    """TRL's VLLMClient as a vLLM server answers it: one reply a prompt (its last id + 1, then the stop id 0), held
    until the test releases that prompt (by its first id); records how many requests were out at once."""

    def __init__(self):
        import threading

        self.out = self.most = 0
        self.changed = threading.Condition()
        self.released: set[int] = set()

    def generate(self, prompts, **kwargs):
        with self.changed:
            self.out += 1
            self.most = max(self.most, self.out)
            self.changed.notify_all()
            assert self.changed.wait_for(lambda: prompts[0][0] in self.released, timeout=30)
            self.out -= 1
        return {"completion_ids": [[p[-1] + 1, 0] for p in prompts], "logprobs": [[[-0.5], [-0.1]] for _ in prompts]}

    def release(self, first_id):
        with self.changed:
            self.released.add(first_id)
            self.changed.notify_all()


def test_a_vllm_servers_decoder_sends_each_turn_at_once_and_returns_them_as_they_finish():
    """Server mode's continuous batching: every turn is its own request, all out at once (the server's scheduler
    batches them), and a finished turn leaves at the next step, whatever the others do."""
    from turngym.agents.backends import Generation, VLLMBackend

    server = HeldServer()
    backend = VLLMBackend(client=server)
    decoder = decoder_for(backend, SamplingConfig(max_new_tokens=2), [0])
    for key, ids in [(0, [3, 3, 3]), (1, [5]), (2, [7, 7])]:
        decoder.add(GenerationRequest(key, ids))
    with server.changed:
        assert server.changed.wait_for(lambda: server.out == 3, timeout=30)  # all three out, none answered
    assert decoder.busy and not backend.idle and decoder.step() == []
    finished = []
    for first_id in (5, 7, 3):  # the server finishes them in this order
        server.release(first_id)
        step = []
        while not step:
            step = decoder.step()
        finished += step
    assert [key for key, _ in finished] == [1, 2, 0]  # each left as it finished, one step each
    assert finished[0][1] == Generation([6, 0], [-0.5, -0.1], True)
    assert server.most == 3 and backend.idle and not decoder.busy
