"""Shared prefixes encoded once in the forward pass (issue 44.4, trainers/prefix_sharing.py).

The per-token log-probabilities and every parameter's gradient of a scalar loss (sum of advantages x log-probs) equal
the unshared pass's (fp32, 1e-5), for a group's episodes under one prompt and for per-turn rows sharing an episode's
history, with left and right padding; rows that share nothing, or a model that cannot share, fall back to the unshared
path exactly; one trainer step with ``share_prefixes`` equals one without.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from tests.helpers_llm import OneProcess, scripted_signals_backend, tiny_llama, word_tokenizer
from turngym.trainers.layouts import pad
from turngym.trainers.logprobs import scored_logprobs, scored_logprobs_in_chunks
from turngym.trainers.prefix_sharing import (
    Node,
    PrefixSharingCritic,
    prefix_tree,
    shared_prefix_hidden,
    shared_prefix_logprobs,
    shares,
    sharing_obstacle,
)

VOCAB = 97


def ids(count: int, generator: torch.Generator, low: int = 3) -> list[int]:
    return torch.randint(low, VOCAB, (count,), generator=generator).tolist()


def trl_rows(prompts: list[list[int]], completions: list[list[int]], extra: int = 0):
    """TRL's layout: prompts left-padded, completions right-padded (``extra`` more padding columns on each side, as
    pad_to_multiple_of makes). Returns (input ids, attention mask, completion mask)."""
    prompt_ids = pad([[0] * extra + p for p in prompts], 0, "left", torch.long)
    prompt_mask = pad([[0] * extra + [1] * len(p) for p in prompts], 0, "left", torch.long)
    completion_ids = pad([c + [0] * extra for c in completions], 0, "right", torch.long)
    completion_mask = pad([[1] * len(c) + [0] * extra for c in completions], 0, "right", torch.long)
    return (torch.cat([prompt_ids, completion_ids], 1), torch.cat([prompt_mask, completion_mask], 1),
            completion_mask)


def loss_and_grads(model, forward, advantages):
    model.zero_grad(set_to_none=True)
    logps, entropies = forward()
    (advantages * logps).sum().backward()
    return logps.detach(), entropies, {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def assert_same_pass(model, input_ids, attention, scored, *, min_shared=1, seed=0):
    """The shared pass's log-probs, entropies and gradients equal the unshared pass's (and it did share)."""
    advantages = torch.randn(scored.shape, generator=torch.Generator().manual_seed(seed))
    plain = loss_and_grads(model, lambda: scored_logprobs(model, input_ids, attention, scored, 1.0,
                                                          compute_entropy=True), advantages)
    calls = []

    def shared_forward():
        result = shared_prefix_logprobs(model, input_ids, attention, scored, 1.0, compute_entropy=True,
                                        min_shared=min_shared)
        calls.append(result is not None)
        return result

    shared = loss_and_grads(model, shared_forward, advantages)
    assert calls == [True], "the rows share a prefix: the shared pass must run"
    torch.testing.assert_close(shared[0], plain[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(shared[1], plain[1], atol=1e-5, rtol=0)
    assert bool((shared[0][~scored] == 0).all())  # 0 where not scored, as the unshared pass
    for name, grad in plain[2].items():
        difference = (shared[2][name] - grad).norm()
        assert difference <= 1e-5 * grad.norm() + 1e-12, f"{name}: |dg| {difference:.3g}, |g| {grad.norm():.3g}"
    assert any(g.norm() > 0 for g in plain[2].values())


def paths(forest: list[Node]) -> dict[int, list[int]]:
    """Each row's sequence read back from the tree: the tokens of the nodes from its root to the node it ends on."""
    out: dict[int, list[int]] = {}

    def walk(node: Node, above: list[int]) -> None:
        assert node.start == len(above)
        tokens = [*above, *node.tokens]
        for r in node.ends:
            assert r not in out, "a row ends on one node only"
            out[r] = tokens
        for child in node.children:
            walk(child, tokens)

    for root in forest:
        walk(root, [])
    return out


@pytest.fixture(scope="module")
def model():
    return tiny_llama(VOCAB).float()


# ---------------------------------------------------------------------- the tree (pure)
def test_the_tree_groups_rows_by_their_shared_prefix():
    prompt = [5, 6, 7, 8, 9]
    group = [prompt + [10, 11], prompt + [12], prompt + [13, 14, 15], prompt + [16]]
    (root,) = prefix_tree(group, min_shared=0)
    assert root.tokens == tuple(prompt) and root.ends == [] and [c.ends for c in root.children] == [[0], [1], [2], [3]]
    assert [c.tokens for c in root.children] == [(10, 11), (12,), (13, 14, 15), (16,)]
    # per-turn rows without a window: each turn's row is the start of the next one's context
    chain = [[1, 2, 3], [1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6]]
    (first,) = prefix_tree(chain, min_shared=0)
    assert (first.tokens, first.ends) == ((1, 2, 3), [0])
    assert (first.children[0].tokens, first.children[0].ends) == ((4, 5), [1])
    assert first.children[0].children[0].tokens == (6,)
    # equal rows end on the same node; rows that start differently share nothing
    (same,) = prefix_tree([[4, 4, 4], [4, 4, 4]], min_shared=0)
    assert same.ends == [0, 1] and shares([same])
    apart = prefix_tree([[1, 2], [3, 4], [5]], min_shared=0)
    assert not shares(apart) and [n.ends for n in apart] == [[0], [1], [2]]


def test_a_short_shared_segment_is_not_shared():
    rows = [[1, 2, 3, 10 + i] for i in range(4)]  # 3 tokens shared by 4 rows: 9 tokens saved
    assert shares(prefix_tree(rows, min_shared=9))
    collapsed = prefix_tree(rows, min_shared=10)
    assert not shares(collapsed) and paths(collapsed) == dict(enumerate(rows))


@pytest.mark.parametrize("min_shared", [0, 4, 32])
def test_every_row_reads_back_from_the_tree(min_shared):
    generator = torch.Generator().manual_seed(3)
    stems = [ids(12, generator) for _ in range(3)]
    rows = [stems[i % 3][: 4 + i % 5] + ids(i % 4, generator) for i in range(20)] + [[], stems[0][:4]]
    forest = prefix_tree(rows, min_shared=min_shared)
    assert paths(forest) == {r: row for r, row in enumerate(rows) if row}  # the empty row is left out


# ---------------------------------------------------------------------- equal to the unshared pass
def test_a_groups_episodes_under_one_prompt(model):
    """(a) Two groups (prompts of 30 and 23 tokens) of 4 episodes with completions of different lengths, in TRL's
    padded layout (extra padding both sides), the loss mask leaving the world's tokens out."""
    generator = torch.Generator().manual_seed(1)
    prompts, completions = [], []
    for prompt_length, lengths in ((30, (5, 9, 13, 7)), (23, (11, 3, 8, 6))):
        prompt = ids(prompt_length, generator)
        prompts += [prompt] * 4
        completions += [ids(n, generator) for n in lengths]
    input_ids, attention, completion_mask = trl_rows(prompts, completions, extra=3)
    tool_mask = (torch.rand(completion_mask.shape, generator=generator) > 0.3).long()
    scored = (completion_mask * tool_mask).bool()
    assert_same_pass(model, input_ids, attention, scored)
    assert_same_pass(model, input_ids, attention, completion_mask.bool(), min_shared=32)  # the default's threshold


def episode_rows(generator: torch.Generator, turns: int, window: int | None, prompt: list[int]):
    """Per-turn rows of one episode: row t = (the first prompt and the last ``window`` turns, turn t's reply)."""
    replies = [ids(3 + t % 4, generator) for t in range(turns)]
    observations = [ids(8 + 3 * (t % 3), generator) for t in range(turns)]
    prompts = []
    for t in range(turns):
        kept = range(max(0, t - window) if window else 0, t)
        prompts.append(prompt + [x for k in kept for x in replies[k] + observations[k]])
    return prompts, replies


@pytest.mark.parametrize("window", [None, 2])
def test_per_turn_rows_sharing_an_episodes_history(model, window):
    """(b) Per-turn rows of two episodes of one task: with the whole history each turn's context holds the earlier
    turns' rows; with a window of 2 they share the first prompt and the turns still in the window."""
    generator = torch.Generator().manual_seed(2)
    prompt = ids(25, generator)
    prompts, completions = [], []
    for _ in range(2):
        p, c = episode_rows(generator, 6, window, prompt)
        prompts += p
        completions += c
    input_ids, attention, completion_mask = trl_rows(prompts, completions, extra=2)
    assert_same_pass(model, input_ids, attention, completion_mask.bool())
    assert_same_pass(model, input_ids, attention, completion_mask.bool(), min_shared=32)


def test_without_gradients_in_parts_of_batch_size(model):
    """The old policy's and the reference's passes (no gradients, ``batch_size`` rows at a time): rows sorted so
    that sharers fall in the same part, the numbers put back in the rows' order."""
    generator = torch.Generator().manual_seed(4)
    prompt_a, prompt_b = ids(20, generator), ids(17, generator)
    prompts = [prompt_a, prompt_b, prompt_a, prompt_b, prompt_a, prompt_b, prompt_a]
    completions = [ids(2 + i, generator) for i in range(7)]
    input_ids, attention, completion_mask = trl_rows(prompts, completions)
    scored = completion_mask.bool()
    with torch.no_grad():
        plain, _ = scored_logprobs_in_chunks(model, input_ids, attention, scored, 1.0, batch_size=3)
        shared, _ = shared_prefix_logprobs(model, input_ids, attention, scored, 1.0, batch_size=3, min_shared=1)
    torch.testing.assert_close(shared, plain, atol=1e-5, rtol=0)


def test_gradient_checkpointing_shares_with_the_same_gradients():
    """Under (non-reentrant) gradient checkpointing the checkpointed layers keep the segment cache, whose replay
    writes the same keys and values: gradients still equal."""
    model = tiny_llama(VOCAB).float().train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    generator = torch.Generator().manual_seed(5)
    prompt = ids(20, generator)
    input_ids, attention, completion_mask = trl_rows([prompt] * 3, [ids(n, generator) for n in (4, 7, 2)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same_pass(model, input_ids, attention, completion_mask.bool())
    assert all("_can_checkpoint_with_cache" not in vars(m) for m in model.modules())  # put back after the call


def test_the_critic_shares_prefixes_with_the_same_values_and_gradients():
    """PPO's critic on two groups of 4 episodes: V at every position it reads, and the value loss's gradients (in
    passes of 4 rows), equal the unshared critic's."""
    from turngym.trainers.critic import CriticConfig, TokenCritic

    generator = torch.Generator().manual_seed(8)
    prompts, completions = [], []
    for prompt_length, lengths in ((26, (6, 3, 9, 5)), (19, (4, 8, 2, 7))):
        prompt = ids(prompt_length, generator)
        prompts += [prompt] * 4
        completions += [ids(n, generator) for n in lengths]
    input_ids, attention, completion_mask = trl_rows(prompts, completions, extra=2)
    width = completion_mask.size(1)
    rows = {"prompt_ids": input_ids[:, :-width], "prompt_mask": attention[:, :-width],
            "completion_ids": input_ids[:, -width:], "completion_mask": completion_mask, "tool_mask": completion_mask}
    plain = TokenCritic.build(tiny_llama(VOCAB), CriticConfig(learning_rate=1e-3, rows_per_pass=4), OneProcess())
    with torch.no_grad():
        plain.model.score.weight.normal_()
    shared = PrefixSharingCritic.of(plain)  # the same value model
    assert shared_prefix_hidden(shared.model, input_ids, attention) is not None
    read = torch.arange(width + 1) <= torch.tensor([len(c) for c in completions]).unsqueeze(1)  # V_0 .. V_n
    values = plain.values(rows)
    torch.testing.assert_close(shared.values(rows)[read], values[read], atol=1e-5, rtol=0)
    plain.targets(rows, values, [[float(i)] * len(c) for i, c in enumerate(completions)],
                  [[1] * len(c) for c in completions])
    grads = {}
    for name, critic in (("plain", plain), ("shared", shared)):
        critic.model.zero_grad(set_to_none=True)
        critic.loss(rows, 10.0, torch.Tensor.backward)
        grads[name] = {n: p.grad.clone() for n, p in critic.model.named_parameters()}
    for name, grad in grads["plain"].items():
        assert (grads["shared"][name] - grad).norm() <= 1e-5 * grad.norm() + 1e-12, name


# ---------------------------------------------------------------------- falls back
def test_rows_that_share_nothing_fall_back_exactly(model):
    generator = torch.Generator().manual_seed(6)
    prompts = [[3 + i] + ids(10, generator) for i in range(4)]  # different first tokens
    input_ids, attention, completion_mask = trl_rows(prompts, [ids(4, generator) for _ in range(4)])
    assert shared_prefix_logprobs(model, input_ids, attention, completion_mask.bool(), 1.0, min_shared=0) is None
    # a part that shares nothing, next to one that does, is the unshared pass's to the bit
    group = ids(12, generator, low=3)
    group[0] = 1  # sorts before the others
    prompts += [group] * 4
    input_ids, attention, completion_mask = trl_rows(prompts, [ids(3 + i % 3, generator) for i in range(8)])
    with torch.no_grad():
        shared, _ = shared_prefix_logprobs(model, input_ids, attention, completion_mask.bool(), 1.0, batch_size=4,
                                           min_shared=1)
        alone, _ = scored_logprobs(model, input_ids[:4], attention[:4], completion_mask[:4].bool(), 1.0)
    assert torch.equal(shared[:4], alone)


def test_what_cannot_share_falls_back(model):
    generator = torch.Generator().manual_seed(7)
    prompt = ids(15, generator)
    input_ids, attention, completion_mask = trl_rows([prompt] * 3, [ids(5, generator) for _ in range(3)])
    scored = completion_mask.bool()
    holed = attention.clone()
    holed[0, -3] = 0  # a hole inside a completion: the distances would change
    assert shared_prefix_logprobs(model, input_ids, holed, scored, 1.0, min_shared=1) is None
    sliding = tiny_llama(VOCAB, layer_types=["sliding_attention", "full_attention"], sliding_window=4)
    assert "full attention" in sharing_obstacle(sliding)
    assert shared_prefix_logprobs(sliding, input_ids, attention, scored, 1.0, min_shared=1) is None
    reentrant = tiny_llama(VOCAB).train()
    reentrant.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    assert "reentrant" in sharing_obstacle(reentrant)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert shared_prefix_logprobs(reentrant, input_ids, attention, scored, 1.0, min_shared=1) is None
    with torch.no_grad():  # no backward pass to replay (the old policy's, the reference's): these still share
        assert sharing_obstacle(reentrant) is None
        assert shared_prefix_logprobs(reentrant, input_ids, attention, scored, 1.0, min_shared=1) is not None
    assert sharing_obstacle(model) is None
    assert "reentrant" in sharing_obstacle(model, checkpointing={"use_reentrant": True})


# ---------------------------------------------------------------------- one trainer step
@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return word_tokenizer(tmp_path_factory.mktemp("words"))


@pytest.mark.parametrize(("history_window", "algorithm"), [(None, "turn_rloo"), (1, "turn_rloo"), (None, "ppo")])
def test_a_trainer_step_with_shared_prefixes_equals_one_without(tokenizer, tmp_path, monkeypatch, history_window,
                                                                algorithm):
    """TurnGymTrainer on Signals (a scripted backend, 2 groups of 4): one SGD step with share_prefixes gives the
    same loss and the same weights as without; whole-episode rows, per-turn rows (history_window 1), and PPO,
    whose critic shares too."""
    from turngym.envs.signals import signal_tasks
    from turngym.trainers import trainer as trainer_module
    from turngym.trainers.config import TurnGymConfig
    from turngym.trainers.trainer import TurnGymTrainer

    shared_calls = []

    def spy(*args, **kwargs):
        result = shared_prefix_logprobs(*args, **kwargs)
        shared_calls.append(result is not None)
        return result

    monkeypatch.setattr(trainer_module, "shared_prefix_logprobs", spy)
    signals = {"turns": 3, "colours": 2}
    runs = {}
    for share in (False, True):
        args = TurnGymConfig(output_dir=str(tmp_path / str(share)), env_id="turngym/Signals-v0", env_kwargs=signals,
                             reward_mode="dense", action_format="last_line", max_new_tokens_per_turn=2,
                             algorithm=algorithm, critic_learning_rate=1e-3, num_generations=4,
                             per_device_train_batch_size=8, max_steps=1,
                             learning_rate=0.5, optim="sgd", logging_steps=1, report_to="none", save_strategy="no",
                             max_completion_length=128, seed=0, disable_tqdm=True, tis_cap=None,
                             history_window=history_window, share_prefixes=share)
        model = tiny_llama(len(tokenizer)).train()
        trainer = TurnGymTrainer(model, args, tasks=signal_tasks("train", 8, **signals), processing_class=tokenizer,
                                 backend=scripted_signals_backend(tokenizer))
        trainer.train()
        weights = {n: p.detach().clone() for n, p in model.named_parameters()}
        if algorithm == "ppo":
            assert isinstance(trainer.critic, PrefixSharingCritic) == share
            weights |= {f"critic.{n}": p.detach().clone() for n, p in trainer.critic.model.named_parameters()}
        runs[share] = (trainer.state.log_history[0], weights)
        assert (True in shared_calls) == share  # the step's forward passes shared a prefix only when asked to
    (plain_log, plain_weights), (shared_log, shared_weights) = runs[False], runs[True]
    assert plain_log["loss"] == pytest.approx(shared_log["loss"], abs=1e-6)
    assert plain_log["grad_norm"] > 0
    assert plain_log["grad_norm"] == pytest.approx(shared_log["grad_norm"], rel=1e-5)
    initial = dict(tiny_llama(len(tokenizer)).named_parameters())
    assert any(not torch.equal(w, initial[n]) for n, w in plain_weights.items() if n in initial)  # the step moved them
    for name, weight in plain_weights.items():
        torch.testing.assert_close(shared_weights[name], weight, atol=1e-6, rtol=1e-5)


def test_the_trainer_says_when_its_model_cannot_share(tokenizer, tmp_path, caplog):
    from turngym.envs.signals import signal_tasks
    from turngym.trainers.config import TurnGymConfig
    from turngym.trainers.trainer import TurnGymTrainer

    args = TurnGymConfig(output_dir=str(tmp_path), env_id="turngym/Signals-v0", env_kwargs={"turns": 2},
                         num_generations=4, per_device_train_batch_size=8, max_steps=1, report_to="none",
                         save_strategy="no", seed=0, disable_tqdm=True, share_prefixes=True,
                         gradient_checkpointing_kwargs={"use_reentrant": True})
    with caplog.at_level("WARNING", logger="turngym.trainers.trainer"):
        TurnGymTrainer(tiny_llama(len(tokenizer)).train(), args, tasks=signal_tasks("train", 8, turns=2),
                       processing_class=tokenizer, backend=scripted_signals_backend(tokenizer))
    assert "share_prefixes has no effect with reentrant gradient checkpointing" in caplog.text
