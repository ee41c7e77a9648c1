"""bench/train_throughput.py's layouts: packing and one-sample-per-turn train the same tokens with the
same gradient; per-turn processes the token counts its formula says. No timings are asserted."""

from __future__ import annotations

import copy

import pytest
import torch

from tests.helpers_llm import tiny_llama, train_tokenizer
from tests.helpers_scripts import load_script
from turngym.trainers.episodes import Episode

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def bench():
    return load_script("bench/train_throughput.py")


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return train_tokenizer(tmp_path_factory.mktemp("tokenizer"))


def hand_made_episode(prompt: int, turns: list[tuple[int, int, bool]]) -> Episode:
    """An episode with distinct ids: ``turns`` are (sampled tokens, env tokens after, forced end of turn)."""
    ids = iter(range(1000, 10_000))
    completion, env_mask, turn_index, turn_ends = [], [], [], []
    for turn, (sampled, env, forced) in enumerate(turns):
        completion += [next(ids) for _ in range(sampled)]
        env_mask += [1] * sampled
        turn_index += [turn] * sampled
        turn_ends.append(len(completion) - 1)
        context = env + (1 if forced else 0)  # a forced end-of-turn token is context, like env tokens
        completion += [next(ids) for _ in range(context)]
        env_mask += [0] * context
        turn_index += [turn] * context
    episode = Episode.from_ids(group=0, task={"id": "t"}, prompt_ids=[next(ids) for _ in range(prompt)],
                      completion_ids=completion, env_mask=env_mask, turn_index=turn_index, turn_ends=turn_ends,
                      logprobs=[0.0] * len(completion), turn_rewards=[0.0] * len(turns), won=False, terminated=False,
                      truncated=True)
    episode.validate()
    return episode


def test_token_counts_match_hand_computed_example(bench):
    # prompt 5; turn 0: 2 sampled + 4 env; turn 1: 3 sampled + forced end of turn + 2 env; turn 2: 1 sampled
    episode = hand_made_episode(5, [(2, 4, False), (3, 2, True), (1, 0, False)])
    advantages = bench.turn_advantages([episode])
    packed = bench.packed_samples([episode], advantages)
    per_turn = bench.per_turn_samples([episode], advantages)
    assert [len(s) for s in packed] == [5 + 2 + 4 + 3 + 3 + 1]
    assert [len(s) for s in per_turn] == [5 + 2, 5 + 2 + 4 + 3, 5 + 2 + 4 + 3 + 3 + 1]
    assert bench.token_counts(packed, 2) == {"samples": 1, "micro_batches": 1, "trained": 6, "unpadded": 18,
                                             "padded": 18}
    # micro-batches [7, 14] and [18], right-padded to 2 x 14 and 1 x 18
    assert bench.token_counts(per_turn, 2) == {"samples": 3, "micro_batches": 2, "trained": 6, "unpadded": 39,
                                               "padded": 46}
    # every per-turn sample is a prefix of the episode, trained on its own turn's sampled tokens only
    for turn, sample in enumerate(per_turn):
        assert sample.input_ids == packed[0].input_ids[: len(sample)]
        trained = [i for i, m in enumerate(sample.loss_mask) if m]
        assert trained == [5 + i for i, (m, t) in enumerate(zip(episode.env_mask, episode.turn_index))
                           if m and t == turn]
        assert {sample.advantages[i] for i in trained} == {advantages[0][turn]}


@pytest.mark.parametrize("turns", [1, 2, 3, 5])
def test_per_turn_tokens_follow_the_quadratic_formula(bench, turns):
    p, a, e = 7, 3, 5
    episode = hand_made_episode(p, [(a, e if t < turns - 1 else 0, False) for t in range(turns)])
    advantages = bench.turn_advantages([episode])
    packed = bench.token_counts(bench.packed_samples([episode], advantages), 1)
    per_turn = bench.token_counts(bench.per_turn_samples([episode], advantages), 1)
    assert packed["unpadded"] == p + turns * a + (turns - 1) * e
    # turn t's prompt repeats the prompt and the t earlier turns: sum_t (p + t (a + e) + a)
    assert per_turn["unpadded"] == turns * (p + a) + (a + e) * turns * (turns - 1) // 2
    assert packed["trained"] == per_turn["trained"] == turns * a
    assert (per_turn["unpadded"] > packed["unpadded"]) == (turns > 1)


@pytest.fixture(scope="module")
def signal_episodes(bench, tokenizer):
    return bench.play_episodes(tokenizer, "turngym/Signals-v0", 3, 3, env_kwargs={"turns": 3, "num_tasks": 3})


def test_played_episodes_have_the_token_record_layout(bench, signal_episodes):
    assert len(signal_episodes) == 3
    for episode in signal_episodes:
        assert episode.num_turns == 3 and len(episode.turn_ends) == 3
        assert [end - start for start, end in bench.turn_spans(episode)] == [
            sum(1 for m, t in zip(episode.env_mask, episode.turn_index) if m and t == turn) for turn in range(3)]
    advantages = bench.turn_advantages(signal_episodes)
    packed = bench.token_counts(bench.packed_samples(signal_episodes, advantages), 2)
    per_turn = bench.token_counts(bench.per_turn_samples(signal_episodes, advantages), 2)
    assert packed["trained"] == per_turn["trained"] == sum(e.num_model_tokens for e in signal_episodes)
    assert per_turn["samples"] == 9 and packed["samples"] == 3
    assert per_turn["unpadded"] > packed["unpadded"] and per_turn["padded"] > packed["padded"]


@pytest.mark.parametrize("head", ["trained", "all"])
def test_both_layouts_compute_the_same_gradient(bench, tokenizer, signal_episodes, head):
    advantages = bench.turn_advantages(signal_episodes, seed=1)
    model = tiny_llama(len(tokenizer))
    grads, losses = {}, {}
    for layout in bench.LAYOUTS:
        copy_ = copy.deepcopy(model).train()
        samples = bench.build_layout(layout, signal_episodes, advantages)
        losses[layout] = bench.train_step(copy_, None, samples, 2, tokenizer.pad_token_id, head, update=False)
        grads[layout] = {name: p.grad for name, p in copy_.named_parameters()}
    assert losses["packed"] == pytest.approx(losses["per-turn"], rel=1e-4)
    assert any(g.abs().sum() > 0 for g in grads["packed"].values())
    for name, grad in grads["packed"].items():
        torch.testing.assert_close(grads["per-turn"][name], grad, rtol=1e-4, atol=1e-7, msg=name)


def test_measure_times_a_real_step(bench, tokenizer, signal_episodes):
    spec = bench.ModelSpec("unused", "tiny", len(tokenizer))
    samples = bench.build_layout("per-turn", signal_episodes, bench.turn_advantages(signal_episodes))
    first = bench.measure(spec, samples, 2, tokenizer.pad_token_id, "trained", fresh_process=False)
    model, _ = bench._LOADED[spec]  # kept for the next measurement in this process
    before = [p.detach().clone() for p in model.parameters()]
    second = bench.measure(spec, samples, 2, tokenizer.pad_token_id, "trained", fresh_process=False)
    for result in (first, second):
        assert result["seconds"] > 0 and result["cpu_seconds"] > 0
        assert result["peak_bytes"] is None  # an RSS peak needs a fresh process
    assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters()))  # the optimizer stepped


def test_priming_the_optimizer_leaves_the_weights(bench):
    model = tiny_llama(100)
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = bench.make_optimizer(model, 1e-3)
    assert all(torch.equal(b, p) for b, p in zip(before, model.parameters()))
    assert len(optimizer.state) == len(before)
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())  # buffers kept, zeroed


def test_saved_episodes_give_the_same_samples(bench, signal_episodes, tmp_path):
    """A machine without TextWorld (the GPU machine) measures episodes recorded here."""
    path = tmp_path / "episodes.json"
    bench.save_episodes(path, {3: signal_episodes}, vocab_size=600, pad_id=0, source={})
    loaded, vocab_size, pad_id = bench.load_episodes(path, [3], 2)
    assert (vocab_size, pad_id) == (600, 0) and len(loaded[3]) == 2
    advantages = bench.turn_advantages(signal_episodes[:2])
    for layout in bench.LAYOUTS:
        assert (bench.build_layout(layout, loaded[3], advantages)
                == bench.build_layout(layout, signal_episodes[:2], advantages))
    with pytest.raises(ValueError, match="holds 3 episodes of 3 turns, not 4"):
        bench.load_episodes(path, [3], 4)


def test_train_precision_bench_prints_every_variant_against_full_fp32(tiny_policy, capsys):
    module = load_script("bench/train_precision.py")
    module.main(["--model", str(tiny_policy), "--batch", "2", "--tokens", "8", "--reps", "1"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("| full", "| LoRA"))]
    assert [r.split(" | ")[:2] for r in rows] == [["| full", "fp32"], ["| full", "bf16 autocast"],
                                                  ["| LoRA r=16", "fp32"], ["| LoRA r=16", "bf16 autocast"]]
    assert rows[0].endswith("| 1.00x |")  # the baseline's ratio to itself
