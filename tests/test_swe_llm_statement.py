"""Issue 42 point 2: the optional LLM statement writer, through a real OpenAI-compatible endpoint.

The endpoint is turngym's own proxy (FastAPI under uvicorn on 127.0.0.1) in front of a scripted backend, so the
replies are chosen (a good one, one quoting the bug, an empty one) and the ``openai`` client does the talking.
"""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from tests.helpers_llm import TOOL_TEMPLATES, train_tokenizer
from turngym.agents.backends import ScriptedBackend
from turngym.agents.judge_models import OpenAIJudgeModel
from turngym.agents.proxy import CallStore
from turngym.agents.proxy_sampler import BatchingSampler
from turngym.agents.proxy_server import PolicyService, ProxyServer, ProxySettings
from turngym.envs.swe.synth.llm_statement import (
    MAX_CHARS,
    changed_lines_of,
    clean_reply,
    failing_names,
    rewrite_statements,
    statement_key,
)

BUG = ("diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1,2 +1,2 @@\n"
       " def double(x):\n-    return x * 2\n+    return x + 2\n")
WORDS = ("cache", "key", "value", "size", "expired", "timer", "lookup", "missing")
GOOD = ("double() returns the wrong value\n\nRunning the tests of pkg 1.0, tests/test_core.py::test_double fails:\n"
        "`assert 4 == 5`. I expected the tests to pass.")


def record(name: str, statement: str = "test_double fails\n\nassert 4 == 5\n") -> dict:
    return {"instance_id": f"pkg__1.0.{name}", "repo": "pypi/pkg", "problem_statement": statement,
            "setup_patch": BUG, "synth": {"package": "pkg", "version": "1.0"},
            "FAIL_TO_PASS": ["tests/test_core.py::test_double", "tests/test_core.py::TestMore::test_twice[3]"]}


def test_a_reply_is_kept_only_when_it_is_text_says_something_and_never_quotes_the_change():
    changed = changed_lines_of(BUG)
    assert changed == ["return x * 2", "return x + 2"]
    assert clean_reply(GOOD, changed) == (GOOD + "\n", "")
    assert clean_reply("  title\r\nbody\x00\x1b[31m  ", changed) == ("title\nbody[31m\n", "")
    assert clean_reply("The fix: `return x * 2`.", changed) == (None, "the writer quoted the change")
    assert clean_reply("it does return x + 2 instead", changed) == (None, "the writer quoted the change")
    assert clean_reply(" \n\x00 ", changed) == (None, "the writer's reply was empty")
    assert clean_reply(None, changed) == (None, "the writer's reply was not text")
    assert clean_reply(TimeoutError("slow"), changed) == (None, "the writer failed (TimeoutError)")
    rng = random.Random(0)
    long = "".join(" ".join(rng.choice(WORDS) + str(rng.randrange(10**6)) for _ in range(4)) + " seconds in\n"
                   for _ in range(400))
    text, reason = clean_reply(long, changed)
    assert reason == "" and len(text) <= MAX_CHARS + 1 and text.endswith("seconds in\n")
    # a small model's loop (SmolLM2-135M's replies compressed to 0.04-0.17 of their size)
    assert clean_reply("The user saw: test_double\n" * 40, changed) == (None, "the writer's reply repeats itself")
    names = failing_names(record("x"))
    assert names == ["test_double", "test_twice"]
    assert clean_reply(GOOD, changed, names) == (GOOD + "\n", "")
    assert clean_reply("test_twice fails with a KeyError.", changed, names)[1] == ""
    assert clean_reply("Something is off in pkg.", changed, names) == (None, "the writer's reply names no failing test")


class Refusing:
    """A model that must not be called (the cache answers)."""

    def complete(self, requests):
        raise AssertionError(f"called for {len(requests)} statements")


class Failing:
    def complete(self, requests):
        return [ConnectionError("endpoint down") for _ in requests]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    template, specials, eos, bos = TOOL_TEMPLATES["hermes"]
    return train_tokenizer(tmp_path_factory.mktemp("tok"), template, special_tokens=specials, eos_token=eos,
                           bos_token=bos)


def test_statements_reworded_through_an_openai_compatible_endpoint_checked_and_cached(tokenizer, tmp_path):
    def reply(request):
        prompt = tokenizer.decode(request.ids)
        if "pkg__1.0.leaky" in prompt or "LEAK" in prompt:
            return "Looks like it should be `return x * 2`."
        if "EMPTY" in prompt:
            return "   "
        return GOOD

    backend = ScriptedBackend(reply, lambda text: tokenizer.encode(text, add_special_tokens=False))
    service = PolicyService(tokenizer, BatchingSampler(backend, window=0.01), CallStore(open_episodes=True),
                            ProxySettings(max_context=4096, default_max_tokens=512))
    records = [record("good"), record("leaky", "LEAK\n"), record("empty", "EMPTY\n")]
    cache = tmp_path / "statements.jsonl"
    with ProxyServer(service) as server:
        model = OpenAIJudgeModel("writer", base_url=server.base_url, api_key="none")
        out, kept = rewrite_statements(records, model, "openai:writer", cache)
    assert out[0]["problem_statement"] == GOOD + "\n" and out[0]["synth"]["statement_writer"] == "openai:writer"
    # the two bad replies keep the procedural statement, counted by reason
    assert [r["problem_statement"] for r in out[1:]] == ["LEAK\n", "EMPTY\n"]
    assert [r["synth"]["statement_writer"] for r in out[1:]] == ["procedural", "procedural"]
    assert kept == Counter({"statement kept procedural: the writer quoted the change": 1,
                            "statement kept procedural: the writer's reply was empty": 1})
    assert all(r["setup_patch"] == BUG for r in out) and records[0]["problem_statement"].startswith("test_double")
    # a rerun reads every statement from the cache: the model is not called and the records are the same
    again, kept_again = rewrite_statements(records, Refusing(), "openai:writer", cache)
    assert again == out and kept_again == kept
    # another writer (or prompt) is another key
    assert statement_key("openai:other", records[0]) != statement_key("openai:writer", records[0])


def test_a_failed_request_keeps_the_procedural_statement_and_is_tried_again_next_run(tmp_path):
    cache = tmp_path / "statements.jsonl"
    out, kept = rewrite_statements([record("a")], Failing(), "openai:down", cache)
    assert out[0]["problem_statement"] == record("a")["problem_statement"]
    assert kept == Counter({"statement kept procedural: the writer failed (ConnectionError)": 1})
    assert not cache.exists() or cache.read_text() == ""

    class Good:
        def complete(self, requests):
            assert len(requests) == 1
            (request,) = requests
            assert request.temperature == 0.0 and request.messages[0]["role"] == "system"
            assert "test_double fails" in request.messages[1]["content"]  # the procedural statement, never the patch
            assert "return x" not in json.dumps(request.messages)
            return [GOOD]

    out, kept = rewrite_statements([record("a")], Good(), "openai:down", cache)
    assert out[0]["problem_statement"] == GOOD + "\n" and not kept
