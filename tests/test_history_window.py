"""History window: the model sees the first prompt and the last K turns, and each turn trains on exactly that.

Checked: the record's contexts by hand; the contexts the backend was actually given, rebuilt independently from
the episode's text; that nothing changes when K covers the whole episode; and the trainer's per-turn rows (exact
prompt, exact sampled ids and logprobs, the turn's own advantage), in the real TRL step and in training.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from helpers_llm import logging_generate, tiny_llama, word_tokenizer

from turngym.agents.backends import Generation, ScriptedBackend
from turngym.agents.base import stable_seed
from turngym.agents.llm import LLMAgent, LLMAgentConfig
from turngym.agents.records import TokenRecord
from turngym.agents.rollout import run_episodes
from turngym.envs.signals import COMMANDS, RULE, signal_tasks
from turngym.envs.vector import LocalPool
from turngym.trainers.config import TurnGymConfig
from turngym.trainers.rollout import evaluate_policy
from turngym.trainers.trainer import TurnGymTrainer, turn_advantages

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LONG = {"turns": 5, "colours": 2}  # 5 signals; with wrong replies an episode runs to max_turns


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return word_tokenizer(tmp_path_factory.mktemp("words"))


def varied_replies(tokenizer, log=None, correct=()):
    """A backend whose reply depends on the episode and its turn number (not on the context), so windowed and
    whole-episode runs sample the same ids; the episodes in ``correct`` obey the lights instead. ``log`` gets
    every (episode, ids given, ids sampled)."""
    turns: dict = {}

    def reply(request):
        turn = turns[request.key] = turns.get(request.key, -1) + 1
        if request.key in correct:
            words = tokenizer.decode(request.ids).split()
            return RULE[next(w for w in reversed(words) if w in RULE)]
        return COMMANDS[stable_seed(request.key, turn) % len(COMMANDS)]

    backend = ScriptedBackend(reply, lambda text: tokenizer.encode(text, add_special_tokens=False))
    if log is None:
        return backend
    return logging_generate(backend, log)


def play(tokenizer, window, *, log=None, n=4, max_turns=7):
    """Signals episodes of 5 signals (at most 7 turns) with ``history_window=window``."""
    agent = LLMAgent(varied_replies(tokenizer, log), tokenizer,
                     LLMAgentConfig(action_format="last_line", max_new_tokens=3, history_window=window))
    pool = LocalPool.from_id("turngym/Signals-v0", n, env_kwargs={**LONG, "max_turns": max_turns})
    try:
        return agent, run_episodes(agent, pool, list(signal_tasks("train", n, **LONG)), seed=0)
    finally:
        pool.close()


# ---------------------------------------------------------------------- the record, by hand
def test_window_contexts_and_turn_samples_by_hand():
    record = TokenRecord(prompt_ids=[1, 2], history_window=2)
    for turn in range(4):  # a_t = [10t, 10t+1] (turn 2 is cut off: a forced end-of-turn 99); e_t = [100+t]
        stopped = turn != 2
        record.add_model_turn(Generation([10 * turn + 5, 10 * turn + 6], [-0.1 * turn, -0.2], stopped), 99)
        record.replies.append(str(turn))
        record.add_env_turn([100 + turn])
    assert record.context_ids(0) == [1, 2]
    assert record.context_ids(1) == [1, 2, 5, 6, 100]
    assert record.context_ids(2) == [1, 2, 5, 6, 100, 15, 16, 101]
    assert record.context_ids(3) == [1, 2, 15, 16, 101, 25, 26, 99, 102]  # turn 0 left the window
    assert record.context_ids() == [1, 2, 25, 26, 99, 102, 35, 36, 103]  # the next turn's: turns 2 and 3
    assert record.context_length(3) == 9 and record.context_length() == 9
    sample = record.turn_sample(2)
    assert sample.prompt_ids == record.context_ids(2)
    assert sample.completion_ids == [25, 26] and sample.logprobs == [-0.2, -0.2]  # the forced 99 is not sampled
    whole = TokenRecord(**{**record.__dict__, "history_window": None})
    assert whole.context_ids(3) == [1, 2, *whole.completion_ids[: whole.turn_start(3)]]
    with pytest.raises(ValueError, match="history_window must be >= 1"):
        LLMAgentConfig(history_window=0)


# ---------------------------------------------------------------------- the agent
def test_the_model_is_given_the_first_prompt_and_the_last_k_turns_exactly(tokenizer):
    log = []
    agent, trajectories = play(tokenizer, 2, log=log)
    chat = agent.chat
    given = {}
    for key, ids, sampled in log:
        given.setdefault(key, []).append((ids, sampled))
    dropped_some = False
    for episode, trajectory in enumerate(trajectories):
        record = trajectory.tokens
        assert record.history_window == 2 and len(given[episode]) == record.num_turns
        for turn, (ids, sampled) in enumerate(given[episode]):
            # Rebuilt from the episode's text: the first prompt, then the window's (reply, observation) pairs.
            expected = chat.prompt_ids(trajectory.observations[0])
            for j in range(max(0, turn - 2), turn):
                expected += given[episode][j][1] + chat.env_delta_ids(trajectory.observations[j + 1])
            assert ids == expected, f"episode {episode} turn {turn}: the context given is not the window"
            sample = record.turn_sample(turn)
            assert sample.prompt_ids == ids  # what the turn trains on is what the model was given...
            assert sample.completion_ids == sampled  # ...and what it sampled
            if turn > 2:
                dropped_some = True
                assert len(ids) < len(record.prompt_ids) + record.turn_start(turn)  # shorter than the whole history
        assert record.num_turns == 7  # the wrong replies keep the episode going to max_turns
    assert dropped_some


def test_a_window_as_long_as_the_episode_changes_nothing(tokenizer):
    _, whole = play(tokenizer, None)
    _, windowed = play(tokenizer, 7)
    for a, b in zip(whole, windowed, strict=True):
        ra, rb = a.tokens, b.tokens
        assert (ra.prompt_ids, ra.completion_ids, ra.env_mask, ra.logprobs, ra.turn_index, ra.turn_ends) == (
            rb.prompt_ids, rb.completion_ids, rb.env_mask, rb.logprobs, rb.turn_index, rb.turn_ends)
        assert a.turn_rewards == b.turn_rewards and a.actions == b.actions
        for turn in range(rb.num_turns):  # each turn's sample is a prefix of the whole sequence
            sample = rb.turn_sample(turn)
            end = rb.turn_ends[turn] + 1
            assert sample.prompt_ids + sample.completion_ids == ra.prompt_ids + ra.completion_ids[:end]
    _, short = play(tokenizer, 2)
    assert [t.actions for t in short] == [t.actions for t in whole]  # the replies do not read the context here
    assert any(s.tokens.context_ids(6) != w.tokens.context_ids(6) for s, w in zip(short, whole, strict=True))


def test_the_completion_cap_counts_the_window_not_the_whole_episode(tokenizer):
    """max_completion_tokens bounds what follows the first prompt in each turn's context: a window lets an
    episode run past the length that truncates it whole."""
    def run(window):
        agent = LLMAgent(varied_replies(tokenizer), tokenizer,
                         LLMAgentConfig(action_format="last_line", max_new_tokens=3, history_window=window,
                                        max_completion_tokens=60))
        pool = LocalPool.from_id("turngym/Signals-v0", 1, env_kwargs={**LONG, "max_turns": 7})
        try:
            return run_episodes(agent, pool, list(signal_tasks("train", 1, **LONG)), seed=0)[0]
        finally:
            pool.close()

    whole, windowed = run(None), run(1)
    assert whole.truncation_reason == "context_length" and whole.num_turns < 7
    assert windowed.num_turns == 7 and windowed.truncation_reason == "max_turns"
    record = windowed.tokens
    assert all(record.context_length(t) - len(record.prompt_ids) + 3 + 1 <= 60 for t in range(record.num_turns))


# ---------------------------------------------------------------------- the trainer
def make_trainer(tmp_path: Path, tokenizer, *, correct=(), saved=False, **overrides) -> TurnGymTrainer:
    fields = {"output_dir": str(tmp_path / "run"), "env_id": "turngym/Signals-v0", "env_kwargs": LONG,
              "max_turns": 7, "reward_mode": "dense", "action_format": "last_line", "max_new_tokens_per_turn": 3,
              "algorithm": "turn_rloo", "num_generations": 4, "per_device_train_batch_size": 8, "max_steps": 1,
              "learning_rate": 1e-2, "logging_steps": 1, "report_to": "none", "save_strategy": "no",
              "max_completion_length": 512, "seed": 0, "disable_tqdm": True, "tis_cap": None, "history_window": 2}
    model = tiny_llama(len(tokenizer)).train()
    if saved:  # loaded from a folder, as TRL needs to build a reference model (beta > 0)
        from transformers import AutoModelForCausalLM

        model.save_pretrained(tmp_path / "policy")
        model = AutoModelForCausalLM.from_pretrained(tmp_path / "policy").train()
    args = TurnGymConfig(**{**fields, **overrides})
    return TurnGymTrainer(model, args, tasks=signal_tasks("train", 8, **LONG), processing_class=tokenizer,
                          backend=lambda model: varied_replies(tokenizer, correct=correct))


def unpadded_rows(output):
    """(prompt ids, completion ids, advantages, tool mask, sampling logprobs) of each row, padding removed."""
    rows = []
    for i in range(output["prompt_ids"].size(0)):
        prompt = output["prompt_ids"][i][output["prompt_mask"][i].bool()].tolist()
        keep = output["completion_mask"][i].bool()
        rows.append((prompt, output["completion_ids"][i][keep].tolist(), output["advantages"][i][keep].tolist(),
                     output["tool_mask"][i][keep].tolist(), output["sampling_per_token_logps"][i][keep].tolist()))
    return rows


def test_each_turn_is_a_row_with_its_exact_context_sampled_ids_and_advantage(tmp_path, tokenizer):
    trainer = make_trainer(tmp_path, tokenizer)
    batch = next(iter(trainer.get_train_dataloader()))
    output = trainer._generate_and_score_completions(batch)
    episodes = [row["episode"] for row in batch]
    expected = turn_advantages("turn_rloo", [e.turn_rewards for e in episodes], [i // 4 for i in range(8)])
    samples = [(i, s) for i, e in enumerate(episodes) for s in e.turn_samples()]
    rows = unpadded_rows(output)
    assert len(samples) == 8 * 7 and len(rows) == 56  # 8 episodes of 7 turns, one row each
    for (i, sample), (prompt, completion, advantages, in_loss, logprobs) in zip(samples, rows, strict=True):
        record = episodes[i].tokens
        assert prompt == record.context_ids(sample.turn) and len(prompt) < len(record)
        assert completion == sample.completion_ids  # exactly the ids sampled at that turn
        assert logprobs == sample.logprobs and in_loss == [1] * len(completion)
        assert advantages == pytest.approx([expected[i][sample.turn]] * len(completion))  # the turn's own
    assert any(abs(a) > 0 for row in expected for a in row)
    assert output["num_items_in_batch"].item() == sum(e.num_model_tokens for e in episodes)
    # The rows TRL's loss reads are the model tokens: its per-token logprobs exist for every row.
    logps, _, _ = trainer._get_per_token_logps_and_entropies(
        trainer.model, torch.cat([output["prompt_ids"], output["completion_ids"]], 1),
        torch.cat([output["prompt_mask"], output["completion_mask"]], 1), output["completion_ids"].size(1))
    assert logps.shape == output["completion_ids"].shape and torch.isfinite(logps).all()


def test_rows_are_padded_to_split_evenly_with_the_filler_out_of_the_loss(tmp_path, tokenizer):
    """TRL splits the rows in steps_per_generation parts (and would drop a remainder): filler rows, copies of the
    first and out of the loss, make the count a multiple. Episode 0 obeys the lights (5 turns), the others not (7)."""
    trainer = make_trainer(tmp_path, tokenizer, correct={0}, steps_per_generation=3, gradient_accumulation_steps=3,
                           per_device_train_batch_size=2, num_generations=2)
    batch = next(iter(trainer.get_train_dataloader()))
    output = trainer._generate_and_score_completions(batch)
    episodes = [row["episode"] for row in batch]
    assert episodes[0].won and episodes[0].num_turns == 5 and episodes[1].num_turns == 7
    turns = sum(e.num_turns for e in episodes)
    filler = -turns % 3
    assert filler > 0 and output["prompt_ids"].size(0) == turns + filler
    assert output["tool_mask"][:turns].sum(1).gt(0).all() and output["tool_mask"][turns:].sum() == 0
    assert torch.equal(output["completion_ids"][turns], output["completion_ids"][0])
    assert output["num_items_in_batch"].item() == sum(e.num_model_tokens for e in episodes)


def test_a_window_as_long_as_the_episode_trains_on_the_same_tokens_and_advantages(tmp_path, tokenizer):
    """K >= T: the per-turn rows hold the whole-episode row's model tokens, with the same advantages and the same
    policy logprobs (each row is a prefix of the episode's sequence)."""
    whole = make_trainer(tmp_path / "whole", tokenizer, history_window=None)
    windowed = make_trainer(tmp_path / "window", tokenizer, history_window=7)
    batch = next(iter(whole.get_train_dataloader()))
    assert [row["prompt"] for row in batch] == [row["prompt"] for row in next(iter(windowed.get_train_dataloader()))]
    out_whole = whole._generate_and_score_completions([dict(row) for row in batch])
    out_window = windowed._generate_and_score_completions([dict(row) for row in batch])

    def logps(trainer, out):
        ids = torch.cat([out["prompt_ids"], out["completion_ids"]], 1)
        mask = torch.cat([out["prompt_mask"], out["completion_mask"]], 1)
        return trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, out["completion_ids"].size(1))[0]

    lw, lk = logps(whole, out_whole), logps(windowed, out_window)
    rows = unpadded_rows(out_window)
    row = 0
    for i in range(out_whole["prompt_ids"].size(0)):
        keep = out_whole["completion_mask"][i].bool()
        ids = out_whole["completion_ids"][i][keep].tolist()
        model = out_whole["tool_mask"][i][keep].bool().tolist()
        advantages = out_whole["advantages"][i][keep].tolist()
        logprobs = lw[i][keep].tolist()
        tokens = [(t, a, lp) for t, m, a, lp in zip(ids, model, advantages, logprobs, strict=True) if m]
        got = []
        while len(got) < len(tokens):  # the episode's turns are consecutive rows
            _, completion, row_advantages, _, _ = rows[row]
            got += zip(completion, row_advantages, lk[row][out_window["completion_mask"][row].bool()].tolist(),
                       strict=True)
            row += 1
        assert [t for t, _, _ in got] == [t for t, _, _ in tokens]
        assert [a for _, a, _ in got] == pytest.approx([a for _, a, _ in tokens])
        assert [lp for _, _, lp in got] == pytest.approx([lp for _, _, lp in tokens], abs=1e-4)
    assert row == len(rows)


def test_a_windowed_run_trains_and_evaluates_with_its_window(tmp_path, tokenizer):
    """Two real steps with the KL term (the reference's logprobs are made again on the per-turn rows) and TIS;
    then held-out evaluation plays with the same window."""
    trainer = make_trainer(tmp_path, tokenizer, saved=True, max_steps=2, beta=0.04, tis_cap=2.0)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    logged = [row for row in trainer.state.log_history if "episode/return" in row]
    assert len(logged) == 2 and all(math.isfinite(row["loss"]) and math.isfinite(row["kl"]) for row in logged)
    assert any(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters())
    report = evaluate_policy(trainer.model, tokenizer, trainer.args, signal_tasks("eval", 2, **LONG),
                             progress=False, history_window=trainer.args.history_window)
    assert all(t.tokens.history_window == 2 for t in report.trajectories)
    trainer.eval_tasks = signal_tasks("eval", 2, **LONG)
    assert "eval/success" in trainer.evaluate()


def test_the_config_refuses_a_window_it_cannot_train(tmp_path, tokenizer):
    base = {"output_dir": str(tmp_path), "env_id": "turngym/Signals-v0", "report_to": "none"}
    with pytest.raises(ValueError, match="history_window must be >= 1"):
        TurnGymConfig(**base, history_window=0)
    with pytest.raises(ValueError, match="critic"):
        TurnGymConfig(**base, history_window=2, algorithm="ppo").resolve()  # the estimator's lookup
    assert TurnGymConfig(**base, history_window=2).agent_config(history_window=2).history_window == 2
