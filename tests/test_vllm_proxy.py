"""The OpenAI-compatible proxy on vLLM, for real: a colocated ``vllm.LLM`` (the CPU build, SmolLM2-135M-Instruct in
fp32, as tests/test_vllm.py builds it) behind :class:`PolicyService` and :class:`ProxyServer`, spoken to by the real
``openai`` client.

* a greedy 3-call episode: each call's prompt is the previous call's prompt and sampled ids (the reply sent back
  unchanged), and each call sampled what the same backend samples on those prompt ids directly;
* 16 concurrent episodes: every reply is its own episode's, every episode's calls are its own, in order, and the
  sampler batched them (vLLM gets several episodes' requests in one ``generate``: its keys, ``episode#choice``,
  repeat from call to call and ``release`` is a no-op, which vLLM's own prefix cache makes right);
* :class:`HarnessRunner` with a vLLM backend plays one training step's episodes of Signals with
  examples/openai_harness.py: their training samples are the captured calls, whose ids left vLLM's engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import itertools
import math
import os

import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1800)]  # the engine starts in the first test

if os.environ.get("TURNGYM_REQUIRE_VLLM") == "1":  # make test-vllm: a broken vLLM install fails, never skips
    importlib.import_module("vllm")
else:
    pytest.importorskip("vllm", reason="vLLM is not installed here: run `make test-vllm`")

import openai

from tests.helpers_vllm import EngineOutputs
from turngym.agents.backends import GenerationRequest, SamplingConfig, VLLMBackend
from turngym.agents.models import DEFAULT_MODEL, resolve_model
from turngym.agents.proxy import CallStore, CapturedCall
from turngym.agents.proxy_sampler import BatchingSampler
from turngym.agents.proxy_server import PolicyService, ProxyServer, ProxySettings

LOGPROB_BOUND = 1e-3  # as tests/test_vllm.py (the same engine here: only batching and threads differ)
EPISODES = 16
HARNESS = "examples/openai_harness.py:play"
WORLD = {"turns": 3, "colours": 2}


@pytest.fixture(scope="module")
def smollm2() -> str:
    return resolve_model(DEFAULT_MODEL)


@pytest.fixture(scope="module")
def engine(smollm2) -> VLLMBackend:
    return VLLMBackend.colocated(smollm2, dtype="float32", max_model_len=4096, seed=0)


@pytest.fixture(scope="module")
def tokenizer(smollm2):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2)


@contextlib.contextmanager
def serve(tokenizer, backend, *, window: float = 0.05):
    """The proxy on 127.0.0.1 in front of ``backend``; the server and its sampler closed after."""
    sampler = BatchingSampler(backend, window=window)
    service = PolicyService(tokenizer, sampler, CallStore(),
                            ProxySettings(model_name="smollm2", max_context=4096, default_max_tokens=16))
    try:
        with ProxyServer(service) as server:
            yield server
    finally:
        sampler.close()


def extends(call: CapturedCall, earlier: CapturedCall) -> bool:
    history = earlier.prompt_ids + earlier.completion_ids
    return call.prompt_ids[: len(history)] == history


def test_a_greedy_episode_through_the_proxy_samples_what_the_backend_samples_directly(engine, tokenizer):
    """Three calls, each reply sent back unchanged: call t's prompt starts with call t-1's prompt and sampled ids,
    and its sampled ids (and logprobs) are what the same VLLMBackend samples on those prompt ids itself."""
    with serve(tokenizer, engine) as server:
        api = openai.OpenAI(base_url=server.episode_url("greedy"), api_key="none", max_retries=0, timeout=600)
        messages = [{"role": "system", "content": "You are a text adventurer. Answer with one command."},
                    {"role": "user", "content": "You are in a kitchen. There is a closed fridge. What do you do?"}]
        replies = []
        for observation in ("The fridge is open. It holds an apple.", "You take the apple.", None):
            answer = api.chat.completions.create(model="smollm2", messages=messages, temperature=0, max_tokens=12,
                                                 logprobs=True)
            message = answer.choices[0].message
            replies.append(message.content)
            assert len(answer.choices[0].logprobs.content) == answer.usage.completion_tokens
            if observation is not None:
                messages += [message.model_dump(exclude_none=True), {"role": "user", "content": observation}]
        calls = server.service.store.close("greedy")
        stop_ids = server.service.prompts.stop_ids
    assert [c.key for c in calls] == [(0, 0), (1, 0), (2, 0)] and [c.reply["content"] for c in calls] == replies
    for earlier, call in itertools.pairwise(calls):
        assert call.parent == earlier.key and not call.rewritten and extends(call, earlier)
    for call in calls:
        [direct] = engine.generate([GenerationRequest("direct", list(call.prompt_ids))],
                                   SamplingConfig(temperature=0.0, max_new_tokens=12), stop_ids)
        assert call.completion_ids == direct.ids and call.stopped == direct.stopped
        assert max(abs(a - b) for a, b in zip(call.logprobs, direct.logprobs, strict=True)) < LOGPROB_BOUND
    assert sum(len(c.completion_ids) for c in calls) > 3  # the model wrote something, not three empty turns


def test_concurrent_episodes_on_vllm_are_batched_and_never_mixed(engine, tokenizer):
    """16 episodes make 3 calls each at once (temperature 1): each reply the client got is its own episode's
    captured call, each episode's calls extend each other in order, the captured ids are the ids vLLM sampled, and
    the sampler gave vLLM several episodes in one batch."""
    recording = VLLMBackend(llm=EngineOutputs(engine.llm))
    names = [f"episode-{i}" for i in range(EPISODES)]

    async def one(api, name):
        messages = [{"role": "user", "content": f"You are {name}. Say your name, then pick a colour."}]
        got = []
        for turn in range(3):
            answer = await api.chat.completions.create(model="smollm2", messages=messages, max_tokens=8)
            message = answer.choices[0].message
            got.append(message.content)
            messages += [message.model_dump(exclude_none=True), {"role": "user", "content": f"Turn {turn + 2}."}]
        return got

    with serve(tokenizer, recording, window=0.25) as server:
        async def everyone():
            api = openai.AsyncOpenAI(base_url=server.base_url, api_key="none", max_retries=0, timeout=600)
            got = await asyncio.gather(*(one(api.with_options(base_url=server.episode_url(n)), n) for n in names))
            await api.close()
            return got

        replies = dict(zip(names, asyncio.run(everyone()), strict=True))
        store = server.service.store
        calls = {name: store.close(name) for name in names}
        batches = list(server.service.sampler.batches)
    for name in names:
        made = calls[name]
        assert [c.key for c in made] == [(0, 0), (1, 0), (2, 0)] and all(c.episode == name for c in made)
        assert f"You are {name}." in tokenizer.decode(made[0].prompt_ids)
        assert [c.reply["content"] for c in made] == replies[name]
        for earlier, call in itertools.pairwise(made):
            assert call.parent == earlier.key and not call.rewritten and extends(call, earlier)
        assert all(math.isfinite(lp) and lp <= 0 for c in made for lp in c.logprobs)
    captured = sorted(tuple(c.completion_ids) for made in calls.values() for c in made)
    assert captured == sorted(map(tuple, recording.llm.sampled))
    assert sum(batches) == 3 * EPISODES and max(batches) > 1, batches


def test_the_harness_runner_plays_a_training_steps_signals_episodes_on_vllm(engine, tokenizer, tmp_path):
    """HarnessRunner(backend=<the VLLMBackend>) plays 2 tasks x 4 episodes (one step of turn_rloo) with
    examples/openai_harness.py: each episode's training samples are exactly its captured calls, whose sampled ids
    are the ids that left vLLM's engine, with vLLM's logprobs."""
    from turngym.envs.signals import signal_tasks
    from turngym.trainers.config import TurnGymConfig
    from turngym.trainers.harness import HarnessRunner

    args = TurnGymConfig(output_dir=str(tmp_path), env_id="turngym/Signals-v0", env_kwargs=WORLD, reward_mode="dense",
                         algorithm="turn_rloo", num_generations=4, per_device_train_batch_size=8, max_steps=1,
                         report_to="none", save_strategy="no", max_completion_length=1024, tis_cap=None, seed=0,
                         disable_tqdm=True, harness=HARNESS, harness_kwargs={"max_tokens": 8},
                         harness_max_context=2048)
    args.resolve()
    tasks = signal_tasks("train", 2, **WORLD)
    recording = VLLMBackend(llm=EngineOutputs(engine.llm))
    runner = HarnessRunner(args, tasks, tokenizer, backend=lambda model: recording)
    captured: dict[str, list[CapturedCall]] = {}
    runner.store.sink = lambda call: captured.setdefault(call.episode, []).append(call)
    try:
        _, episodes = runner.play([t.id for t in tasks for _ in range(4)], model=None, seed=0)
        batches = list(runner.sampler.batches)
    finally:
        runner.close()
    assert len(episodes) == 8 and all(e.num_turns >= 1 for e in episodes)
    made = []
    for episode in episodes:
        calls = sorted(captured[episode.task["harness_episode"]], key=lambda c: c.key)
        assert [(s.prompt_ids, s.completion_ids) for s in episode.turn_samples()] == \
            [(c.prompt_ids, c.completion_ids) for c in calls]
        assert not any(c.rewritten for c in calls)
        made += calls
    assert sorted(tuple(c.completion_ids) for c in made) == sorted(map(tuple, recording.llm.sampled))
    assert all(math.isfinite(lp) and lp <= 0 for c in made for lp in c.logprobs)
    assert max(batches) > 1, batches  # the 8 harnesses' calls met in vLLM batches
