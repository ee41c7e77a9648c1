"""bench/vs_trl.py's plumbing with a tiny policy: the warm start teaches the tool-call format, one GRPO step runs on
each side (turngym's trainer, TRL's GRPOTrainer with environment_factory), and both count the model's tokens the
same way (the loss's tool mask equals what the generator sampled; the world's tokens are not counted)."""

from __future__ import annotations

import sys

import pytest

from tests.helpers_scripts import load_script

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def vs_trl():
    return load_script("bench/vs_trl.py")


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory, vs_trl):
    """A tiny Llama and a byte-level BPE tokenizer with TRL's Qwen2.5 template, warm-started by the bench."""
    pytest.importorskip("trl")
    import trl.chat_template_utils as templates

    from tests.helpers_llm import tiny_llama, train_tokenizer

    base = tmp_path_factory.mktemp("base")
    tokenizer = train_tokenizer(base, chat_template=templates.qwen2_5_chat_template)
    tiny_llama(len(tokenizer)).save_pretrained(base)
    settings = vs_trl.Settings(model=str(base), steps=1, episodes=4, group=2, warm_start=300, warm_start_lr=5e-3,
                               max_new_tokens=96)  # a call is 60 of this tokenizer's tokens
    policy = tmp_path_factory.mktemp("policy")
    meta = vs_trl.prepare_policy(settings, policy)
    return settings, policy, meta


@pytest.mark.slow  # the bench's plumbing: its 300-step warm start costs 40-75 s
def test_the_warm_start_labels_only_the_models_replies(vs_trl, tiny_policy):
    import random

    from turngym.agents.models import load_policy

    settings, policy, meta = tiny_policy
    assert meta["template"] == "the model's own" and len(meta["losses"]) == 300
    assert meta["losses"][-1] < meta["losses"][0] / 2, meta["losses"]
    _, tokenizer = load_policy(str(policy))
    environment = vs_trl.trl_environment_factory(settings)()
    task = next(iter(vs_trl.train_tasks(settings)))
    ids, labels = vs_trl.demonstration(tokenizer, environment, task, random.Random(0))
    replies = tokenizer.decode([i for i, label in zip(ids, labels, strict=True) if label != -100])
    call = '<tool_call>\n{"name": "command", "arguments": {"command": "'
    assert replies.count(call) == environment.turns >= 1
    assert replies.endswith("</tool_call><|im_end|><|im_end|>")  # the calls, then the empty reply that stops
    assert "Obey the traffic lights" not in replies and "<tool_response>" not in replies


@pytest.mark.slow  # the bench's plumbing, on the warm start above
def test_one_step_each_side_counts_the_models_tokens_the_same_way(vs_trl, tiny_policy):
    settings, policy, _ = tiny_policy
    results = {side: vs_trl.run_side(side, settings, str(policy)) for side in vs_trl.SIDES}
    for side, result in results.items():
        (step,) = result["steps"]
        assert result["torch_threads"] == 1 and step["seconds"] >= step["rollout_seconds"] > 0
        assert len(step["episodes"]) == 4
        # the loss's mask counts exactly what the generator sampled, on both sides
        assert step["sampled_tokens"] == step["model_tokens"] > 0, side
        assert step["completion_tokens"] > step["model_tokens"], f"{side}: the world's tokens were counted"
        for episode in step["episodes"]:
            assert episode["finished"] + episode["cut"] + episode["stopped"] == 1
    # the same prompts on both sides: the world's tool schema as TRL renders it
    assert results["turngym"]["steps"][0]["prompt_tokens"] == results["trl"]["steps"][0]["prompt_tokens"]
    assert any(e["turns"] >= 1 for e in results["trl"]["steps"][0]["episodes"]), "TRL's loop never stepped the world"

    rounds = {side: {"rounds": [{**results[side], "peak_rss_gb": 1.0}]} for side in vs_trl.SIDES}
    summaries = {side: vs_trl.summarise(rounds[side]) for side in vs_trl.SIDES}
    assert summaries["turngym"]["sampled_equals_counted"] and summaries["trl"]["sampled_equals_counted"]
    table = vs_trl.report(summaries, settings)
    assert "| turngym / TRL |" in table and "| trl | 4 |" in table


def test_a_childs_peak_memory_is_its_own(vs_trl, tmp_path):
    grow = "import json; data = bytearray(300 * 2**20); data[::4096] = b'x' * len(data[::4096]); print('ok')"
    status, peak = vs_trl.run_child([sys.executable, "-c", grow], tmp_path / "child.log")
    assert status == 0 and (tmp_path / "child.log").read_text().strip() == "ok"
    assert 0.3 < peak < 2.0  # the 300 MB it touched, not this process's
    status, _ = vs_trl.run_child([sys.executable, "-c", "raise SystemExit(3)"], tmp_path / "fail.log")
    assert status == 3
