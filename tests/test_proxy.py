"""The OpenAI-compatible proxy: every call kept as exact ids, spoken to by the real ``openai`` client.

Each server here is the proxy's real FastAPI app under uvicorn on 127.0.0.1 (:class:`ProxyServer`), in front of a
real backend: a tiny Llama on HF, or a :class:`ScriptedBackend` where a test needs chosen replies (a tool call, an
episode's name) or a slow one. Nothing speaks HTTP by hand except the tests of malformed bodies, which the client
cannot send.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest

from tests.helpers_llm import THINK_STRIPPING_TEMPLATE, TOOL_TEMPLATES, train_tokenizer
from turngym.agents.backends import HFBackend, ScriptedBackend
from turngym.agents.proxy import (
    CallStore,
    CapturedCall,
    PromptBuilder,
    ProxyRequestError,
    calls_record,
    chosen_calls,
    cut_at_stop,
    normalise_messages,
)
from turngym.agents.proxy_sampler import BatchingSampler
from turngym.agents.proxy_server import PolicyService, ProxyServer, ProxySettings
from turngym.envs.serving import KEEP_ALIVE_SECONDS

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TOKEN = "a-proxy-test-token-of-32-chars-ok"
ACT = {"type": "function", "function": {
    "name": "act", "description": "Send one command.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}


@pytest.fixture(scope="module")
def hermes(tmp_path_factory):
    template, specials, eos, bos = TOOL_TEMPLATES["hermes"]
    return train_tokenizer(tmp_path_factory.mktemp("hermes"), template, special_tokens=specials, eos_token=eos,
                           bos_token=bos)


@pytest.fixture(scope="module")
def thinking(tmp_path_factory):
    return train_tokenizer(tmp_path_factory.mktemp("thinking"), THINK_STRIPPING_TEMPLATE)


def scripted(tokenizer, reply):
    return ScriptedBackend(reply, lambda text: tokenizer.encode(text, add_special_tokens=False))


def serve(tokenizer, backend, *, token=None, open_episodes=True, **settings) -> ProxyServer:
    store = CallStore(open_episodes=open_episodes)
    service = PolicyService(tokenizer, BatchingSampler(backend, window=0.01), store,
                            ProxySettings(**{"max_context": 1024, "default_max_tokens": 64, **settings}))
    return ProxyServer(service, token=token)


def client(server: ProxyServer, episode: str | None = None, **kwargs) -> openai.OpenAI:
    url = server.episode_url(episode) if episode else server.base_url
    return openai.OpenAI(base_url=url, api_key=kwargs.pop("api_key", "none"), max_retries=0, **kwargs)


def call(episode="e", index=0, choice=0, *, messages=None, prompt=(1, 2), sampled=(3, 4), stopped=True, reply=None,
         parent=None, rewritten=False, delivered=True) -> CapturedCall:
    return CapturedCall(episode=episode, index=index, choice=choice, messages=messages or [], tools=None,
                        prompt_ids=list(prompt), completion_ids=list(sampled), logprobs=[-0.5] * len(sampled),
                        stopped=stopped, finish_reason="stop", reply=reply or {"role": "assistant", "content": "x"},
                        parent=parent, rewritten=rewritten, delivered=delivered)


# ---------------------------------------------------------------------- requests and prompts (no server)
def test_messages_are_checked_and_normalised_as_the_api_takes_them():
    messages = normalise_messages([
        {"role": "developer", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "act", "arguments": '{"command": "go"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ])
    assert messages[0] == {"role": "system", "content": "Be brief."}
    assert messages[2]["content"] == "" and messages[2]["tool_calls"][0]["function"]["arguments"] == {"command": "go"}
    for bad, field in ((None, "messages"), ([], "messages"), ([{"role": "robot", "content": "x"}], "messages[0]"),
                       ([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}], "messages[0].content"),
                       ([{"role": "assistant", "content": "", "tool_calls": [{"function": {}}]}],
                        "messages[0].tool_calls[0]")):
        with pytest.raises(ProxyRequestError) as caught:
            normalise_messages(bad)
        assert caught.value.param == field and caught.value.status == 400


def test_a_stop_string_cuts_the_reply_after_the_ids_that_wrote_it():
    vocabulary = {1: "go", 2: " ea", 3: "st", 4: "\n", 5: "Obs", 6: ":"}
    decode = lambda ids: "".join(vocabulary[i] for i in ids)
    assert cut_at_stop([1, 2, 3, 4, 5, 6], decode, ["Obs:"]) == (6, "go east\n")
    assert cut_at_stop([1, 2, 3, 4, 5, 6], decode, ["east", "Obs"]) == (3, "go ")  # the first in the text wins
    assert cut_at_stop([1, 2, 3], decode, ["north"]) is None


def test_a_reply_sent_back_unchanged_keeps_the_ids_the_model_sampled(hermes):
    """Splice: the next prompt holds the sampled ids, even where re-tokenising the text would not give them back;
    template mode re-tokenises, so the same request is marked rewritten. An edited reply is rewritten either way."""
    builder = PromptBuilder(hermes)
    first = [{"role": "user", "content": "You are in a kitchen."}]
    prompt = builder.build(first, None, [])
    odd = [t for ch in "go east" for t in hermes.encode(ch, add_special_tokens=False)]  # one id per character
    assert odd != hermes.encode("go east", add_special_tokens=False)  # not how the tokenizer writes it
    made = call(messages=first, prompt=prompt.ids, sampled=[*odd, builder.chat.end_of_turn_id],
                reply={"role": "assistant", "content": "go east"})
    second = [*first, {"role": "assistant", "content": "go east"}, {"role": "user", "content": "You go east."}]
    spliced = builder.build(second, None, [made])
    assert spliced.ids[: len(made.prompt_ids) + len(made.completion_ids)] == made.prompt_ids + made.completion_ids
    assert spliced.parent == (0, 0) and not spliced.rewritten
    whole = builder.encode(builder.text(second, None, generation_prompt=True))
    assert spliced.ids[len(made.prompt_ids) + len(made.completion_ids):] == whole[-len(spliced.ids)
                                                                                + len(made.prompt_ids)
                                                                                + len(made.completion_ids):]
    assert PromptBuilder(hermes, render="template").build(second, None, [made]).rewritten
    edited = [*first, {"role": "assistant", "content": "go west"}, {"role": "user", "content": "You go west."}]
    assert builder.build(edited, None, [made]).rewritten


def test_a_template_that_strips_reasoning_is_detected_in_template_mode(thinking):
    """Qwen3-style: earlier <think> blocks vanish from the rendering, so the prompt no longer extends what was
    sampled: marked rewritten (it trains on its own context). Splice keeps the model's own ids."""
    builder = PromptBuilder(thinking, render="template")
    first = [{"role": "user", "content": "look"}]
    sampled = thinking.encode("<think>I should look around first.</think>go east", add_special_tokens=False)
    made = call(messages=first, prompt=builder.build(first, None, []).ids,
                sampled=[*sampled, builder.chat.end_of_turn_id],
                reply={"role": "assistant", "content": "<think>I should look around first.</think>go east"})
    second = [*first, made.reply, {"role": "user", "content": "You go east."}]
    assert builder.build(second, None, [made]).rewritten
    spliced = PromptBuilder(thinking).build(second, None, [made])
    assert not spliced.rewritten and spliced.ids[: len(made.prompt_ids) + len(sampled)] == made.prompt_ids + sampled


def test_the_calls_an_episode_trains_on_and_their_contexts():
    calls = [call(index=0, choice=0), call(index=0, choice=1, sampled=(7,)),
             call(index=1, prompt=(9, 9, 9), parent=(0, 1), sampled=(5,), stopped=False),
             call(index=2, rewritten=True, prompt=(8,)), call(index=3, delivered=False)]
    chosen = chosen_calls(calls)
    assert [c.key for c in chosen] == [(0, 1), (1, 0), (2, 0)]  # the continued choice; the undelivered call left out
    assert [c.key for c in chosen_calls(calls, "drop")] == [(0, 1), (1, 0)]
    record = calls_record(chosen, end_of_turn_id=99)
    assert [record.turn_sample(t).prompt_ids for t in range(3)] == [[1, 2], [9, 9, 9], [8]]
    assert [record.turn_sample(t).completion_ids for t in range(3)] == [[7], [5], [3, 4]]
    assert record.completion_ids == [7, 5, 99, 3, 4] and record.env_mask == [1, 1, 0, 1, 1]  # 99: not sampled
    with pytest.raises(ValueError, match="on_rewrite"):
        chosen_calls(calls, "keep")


# ---------------------------------------------------------------------- the real openai client
def test_models_tools_choices_and_streaming_through_the_openai_client(hermes):
    """The client lists the model, gets a tool call back as ``tool_calls``, n choices, and the same reply streamed;
    the second call of the episode is spliced onto the first call's sampled ids."""
    replies = {0: '<tool_call>\n{"name": "act", "arguments": {"command": "go east"}}\n</tool_call>'}

    def reply(request):
        return replies.get(len(server.service.store._calls.get("ep", [])), "take apple")

    with serve(hermes, scripted(hermes, reply), model_name="tiny") as server:
        api = client(server, "ep")
        assert [m.id for m in api.models.list().data] == ["tiny"]
        with pytest.raises(openai.NotFoundError):
            api.models.retrieve("gpt-4o")
        messages = [{"role": "system", "content": "Play."}, {"role": "user", "content": "A kitchen."}]
        first = api.chat.completions.create(model="anything", messages=messages, tools=[ACT], logprobs=True)
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        (made,) = choice.message.tool_calls
        assert made.function.name == "act" and json.loads(made.function.arguments) == {"command": "go east"}
        assert len(choice.logprobs.content) == first.usage.completion_tokens
        messages += [choice.message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": made.id, "content": "You are east."}]
        second = api.chat.completions.create(model="anything", messages=messages, tools=[ACT], n=2)
        assert [c.message.content for c in second.choices] == ["take apple", "take apple"]
        streamed = api.chat.completions.create(model="anything", messages=messages, tools=[ACT], stream=True,
                                               stream_options={"include_usage": True})
        chunks = list(streamed)
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "take apple"
        assert chunks[-1].usage.completion_tokens > 0
        calls = server.service.store.close("ep")
    assert [c.key for c in calls] == [(0, 0), (1, 0), (1, 1), (2, 0)]
    assert calls[1].parent == (0, 0) and not calls[1].rewritten
    assert calls[1].prompt_ids[: len(calls[0].prompt_ids) + len(calls[0].completion_ids)] == \
        calls[0].prompt_ids + calls[0].completion_ids


def test_bad_requests_get_the_errors_the_openai_client_raises(hermes):
    with serve(hermes, scripted(hermes, lambda r: "go"), token=TOKEN, open_episodes=False, max_context=64) as server:
        with pytest.raises(openai.AuthenticationError):
            client(server).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        api = client(server, "never-opened", api_key=TOKEN)
        with pytest.raises(openai.NotFoundError) as unknown:
            api.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert unknown.value.body["code"] == "episode_not_found"
        server.service.store.open("ep")
        api = client(server, "ep", api_key=TOKEN)
        with pytest.raises(openai.BadRequestError) as long:
            api.chat.completions.create(model="m", messages=[{"role": "user", "content": "look " * 200}])
        assert long.value.body["code"] == "context_length_exceeded"
        for bad in ({"messages": []}, {"n": 0}, {"temperature": 3}, {"presence_penalty": 1.0}, {"stop": [""]},
                    {"top_logprobs": 3}, {"response_format": {"type": "json_object"}}):
            with pytest.raises(openai.BadRequestError):
                api.chat.completions.create(**{"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                               **bad})
        headers = {"Authorization": f"Bearer {TOKEN}"}
        for body, status in ((b"{not json", 400), (b"[]", 400), (b"x" * (17 * 1024 * 1024), 413)):
            answer = httpx.post(f"{server.episode_url('ep')}/chat/completions", content=body, headers=headers,
                                timeout=30)
            assert answer.status_code == status and set(answer.json()["error"]) == {"message", "type", "param", "code"}
        assert server.service.store.close("ep") == []  # no refused request left a call behind


def test_a_thousand_concurrent_calls_are_batched_and_never_mixed(hermes):
    """1000 episodes call at once, then 100 of them make 4 calls each in turn: every reply is its own episode's,
    every episode's calls are its own in order, and the sampler batched them."""
    def reply(request):  # the key names the episode and the choice; the reply echoes the episode
        return request.key.split("#")[0]

    with serve(hermes, scripted(hermes, reply)) as server:
        async def one(api, episode, turns):
            messages = [{"role": "user", "content": f"start {episode}"}]
            for _ in range(turns):
                answer = await api.chat.completions.create(model="m", messages=messages, max_tokens=16)
                assert answer.choices[0].message.content == episode
                messages += [answer.choices[0].message.model_dump(exclude_none=True),
                             {"role": "user", "content": "next"}]

        async def everyone():
            api = openai.AsyncOpenAI(base_url=server.base_url, api_key="none", max_retries=0, timeout=120,
                                     default_headers={})
            names = [f"ep{i}" for i in range(1000)]
            await asyncio.gather(*(one(api.with_options(default_headers={"X-Turngym-Episode": n}), n, 1)
                                   for n in names))
            await asyncio.gather(*(one(api.with_options(default_headers={"X-Turngym-Episode": f"long{i}"}),
                                       f"long{i}", 4) for i in range(100)))
            await api.close()

        asyncio.run(everyone())
        store = server.service.store
        assert all(len(store.close(f"ep{i}")) == 1 for i in range(1000))
        for i in range(100):
            calls = store.close(f"long{i}")
            assert [c.index for c in calls] == [0, 1, 2, 3] and all(c.episode == f"long{i}" for c in calls)
            assert [c.parent for c in calls] == [None, (0, 0), (1, 0), (2, 0)]
        assert max(server.service.sampler.batches) > 40  # waiting requests hold no thread: batches pass 40


def test_a_kept_alive_connection_outlasts_the_clients_own_idle_limit(hermes):
    """The keep-alive race: httpx (under openai's client) reuses a connection idle for up to 5 s; a server that
    closes it at 5 s too (uvicorn's default) sometimes does so as the next request arrives, and the client gets a
    ReadError (the 1000-call test above, on loaded cores). The server waits longer than the client, so a request
    sent on a connection idle for 5.5 s is answered (it failed before KEEP_ALIVE_SECONDS)."""
    assert KEEP_ALIVE_SECONDS > openai.DEFAULT_CONNECTION_LIMITS.keepalive_expiry
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}).encode()
    with serve(hermes, scripted(hermes, lambda request: "ok")) as server:
        host, port = server.socket.getsockname()[:2]
        request = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                   f"X-Turngym-Episode: kept\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
        with socket.create_connection((host, port), timeout=30) as sock:
            for idle in (5.5, 0):
                sock.sendall(request)
                reply = b""
                while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
                    chunk = sock.recv(65536)
                    assert chunk, "the server closed a kept-alive connection"
                    reply += chunk
                assert reply.startswith(b"HTTP/1.1 200")
                time.sleep(idle)


def test_a_harness_that_disconnects_mid_call_loses_no_other_call(hermes):
    """The client gives up while its call generates: the call is kept as undelivered (no later call continues it,
    it is not trained on); the episode's earlier call and another episode's calls are intact."""
    def reply(request):
        if "slow" in hermes.decode(request.ids):
            time.sleep(1.5)
        return "ok"

    with serve(hermes, scripted(hermes, reply)) as server:
        api = client(server, "ep")
        api.chat.completions.create(model="m", messages=[{"role": "user", "content": "first"}])
        with pytest.raises(openai.APITimeoutError):
            client(server, "ep", timeout=0.3).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "slow"}])
        client(server, "other").chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        time.sleep(2.0)
        calls = server.service.store.close("ep")
        assert [c.delivered for c in calls] == [True, False]
        assert [c.key for c in chosen_calls(calls)] == [(0, 0)]
        assert len(server.service.store.close("other")) == 1


def test_a_client_cannot_grow_the_proxys_memory_or_scans_without_bound(hermes):
    """Episode ids are short and plain; an episode makes at most max_calls calls; past max_episodes open episodes
    the least recently used is forgotten (its calls live on in the sink)."""
    store = CallStore(max_episodes=2, max_calls=2)
    service = PolicyService(hermes, BatchingSampler(scripted(hermes, lambda r: "ok")), store)
    hi = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    for bad in ("", "x" * 201, "a/b", "new\nline", "é"):
        with pytest.raises(ProxyRequestError, match="episode id"):
            service.complete(hi, bad)
    service.complete(hi, "a")
    service.complete(hi, "a")
    with pytest.raises(ProxyRequestError, match="has made 2 calls"):
        service.complete(hi, "a")
    service.complete(hi, "b")
    with pytest.raises(ProxyRequestError, match="has made 2 calls"):
        service.complete(hi, "a")  # refused, but used: "b" is now the least recently used
    service.complete(hi, "c")
    assert set(store.episodes()) == {"a", "c"}
    service.sampler.close()


def test_a_proxy_beyond_loopback_needs_a_token(hermes, monkeypatch):
    monkeypatch.delenv("TURNGYM_PROXY_TOKEN", raising=False)
    service = PolicyService(hermes, BatchingSampler(scripted(hermes, lambda r: "x")))
    with pytest.raises(ValueError, match="TURNGYM_PROXY_TOKEN"):
        ProxyServer(service, host="0.0.0.0")
    with pytest.raises(ValueError, match="at least 16"):
        ProxyServer(service, token="short")


# ---------------------------------------------------------------------- against the LLM agent, token for token
@pytest.mark.timeout(600)
def test_a_greedy_policy_through_the_proxy_samples_what_the_llm_agent_samples(tiny_policy):
    """The chat-API agent (turngym's own openai-client loop) through the proxy and the LLM agent on the same
    TextWorld tasks, greedy: every call's context and sampled ids equal the LLM agent's turn samples."""
    from turngym.agents.llm import LLMAgent, LLMAgentConfig
    from turngym.agents.models import load_policy
    from turngym.agents.openai_agent import ChatAPIAgent
    from turngym.agents.rollout import run_episodes
    from turngym.envs.textworld import materialise, textworld_tasks
    from turngym.envs.vector import LocalPool

    model, tokenizer = load_policy(str(tiny_policy))
    config = LLMAgentConfig(temperature=0.0, max_new_tokens=8, action_format="last_line", response_prefix="")
    tasks = materialise(textworld_tasks("w2-o3-q4", "eval", n=2), workers=2, progress=False)
    pool = LocalPool.from_id("turngym/TextWorld-v0", 2, env_kwargs={"tasks": tasks, "max_turns": 4})
    try:
        direct = run_episodes(LLMAgent(HFBackend(model, pad_id=tokenizer.pad_token_id), tokenizer, config), pool,
                              tasks, seed=0)
        with serve(tokenizer, HFBackend(model, pad_id=tokenizer.pad_token_id), max_context=4096) as server:
            agent = ChatAPIAgent("tiny", base_url=server.base_url, api_key="none", config=config, tag_episodes=True)
            through = run_episodes(agent, pool, tasks, seed=0)
            store = server.service.store
            calls = {episode: store.close(episode) for episode in store.episodes()}
    finally:
        pool.close()
    assert [t.actions for t in through] == [t.actions for t in direct] and all(t.num_turns == 4 for t in direct)
    for number, trajectory in enumerate(direct):
        record = trajectory.tokens
        samples = [record.turn_sample(turn) for turn in range(record.num_turns)]
        made = calls[f"episode-{number}"]
        assert [c.prompt_ids for c in made] == [s.prompt_ids for s in samples]
        assert [c.completion_ids for c in made] == [s.completion_ids for s in samples]
        assert all(c.parent == (c.index - 1, 0) for c in made[1:])  # spliced: the history is the sampled ids


# ---------------------------------------------------------------------- `turngym proxy` as a user runs it
ROOT = Path(__file__).resolve().parent.parent
PROXY_READY = re.compile(r"turngym proxy: serving \S+ \(hf\) at (?P<url>http://\S+?)/v1;")


def offline_environment(monkeypatch) -> dict[str, str]:
    """What a child ``turngym``/harness process runs with here: offline, one torch thread, no proxy token."""
    monkeypatch.delenv("TURNGYM_PROXY_TOKEN", raising=False)
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def test_turngym_proxy_beyond_loopback_without_a_token_refuses_before_loading_a_model(tmp_path, monkeypatch):
    """One line naming TURNGYM_PROXY_TOKEN, exit status 2; the model named does not exist, so the refusal came
    before any model was looked for."""
    environment = offline_environment(monkeypatch)
    started = time.monotonic()
    refused = subprocess.run([sys.executable, "-m", "turngym.recipes.cli", "proxy", "--host", "0.0.0.0", "--model",
                              str(tmp_path / "no-such-model"), "--port", "0"], cwd=ROOT, env=environment,
                             capture_output=True, text=True, timeout=120, check=False)
    took = time.monotonic() - started
    assert refused.returncode == 2 and refused.stdout == "", (refused.stdout, refused.stderr)
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("turngym proxy: error: --host 0.0.0.0") and "TURNGYM_PROXY_TOKEN" in line
    assert "no-such-model" not in line and took < 60
