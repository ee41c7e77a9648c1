"""Histories that are not append-only (agents/histories.py): ``history: strip_thinking`` and ``history: compact``.

Checked: (a) under a template that drops earlier reasoning (modelled on Qwen3's), with replies that think, each
turn is given exactly the template's own rendering of the conversation so far, and the trainer's rows are that
context and exactly the sampled ids; (b) compact on a long SWE episode keeps every context under the budget with
exact rows, and a policy's summary is context, never a trained id; (c) strip_thinking with no thinking is the
append layout, row for row. Contexts are rebuilt independently (the template, the logged requests), not by the
code under test.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
import torch
import yaml
from helpers_llm import logging_generate, tiny_llama, train_tokenizer, word_tokenizer

from turngym.agents.backends import ScriptedBackend
from turngym.agents.base import stable_seed
from turngym.agents.histories import SUMMARY_HEADER, SummaryKey, check_history
from turngym.agents.llm import LLMAgent, LLMAgentConfig, reply_format
from turngym.agents.rollout import run_episodes
from turngym.envs.signals import COMMANDS, signal_tasks
from turngym.envs.vector import LocalPool
from turngym.trainers.config import TurnGymConfig
from turngym.trainers.layouts import per_turn_rows, rollout_rows
from turngym.trainers.rollout import evaluate_policy
from turngym.trainers.trainer import TurnGymTrainer

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LONG = {"turns": 5, "colours": 2}

# Modelled on Qwen3's template: an assistant message before the last user message loses its reasoning (the text
# after '</think>', line breaks stripped); one after it keeps it in a <think> block.
QWEN3_LIKE_TEMPLATE = (
    "{%- set ns = namespace(last_query=-1) %}"
    "{%- for m in messages %}{%- if m.role == 'user' %}{%- set ns.last_query = loop.index0 %}{%- endif %}"
    "{%- endfor %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' or message.role == 'user' %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}{%- set content = message.content %}{%- set reasoning = '' %}"
    "{%- if '</think>' in content %}"
    "{%- set reasoning = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}"
    "{%- if loop.index0 > ns.last_query and reasoning %}"
    "{{- '<|im_start|>assistant\\n<think>\\n' + reasoning + '\\n</think>\\n\\n' + content + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
THOUGHTS = ["The light is red", "Obey the traffic lights", "Wrong . Right", "The light is green"]


@pytest.fixture(scope="module")
def think_tokenizer(tmp_path_factory):
    """The Signals word tokenizer with the Qwen3-like template and <think> / </think> as tokens of their own."""
    tokenizer = word_tokenizer(tmp_path_factory.mktemp("think"), chat_template=QWEN3_LIKE_TEMPLATE)
    tokenizer.add_tokens(["<think>", "</think>"])
    return tokenizer


@pytest.fixture(scope="module")
def words(tmp_path_factory):
    return word_tokenizer(tmp_path_factory.mktemp("words"))


@pytest.fixture(scope="module")
def words_with_think(tmp_path_factory):
    tokenizer = word_tokenizer(tmp_path_factory.mktemp("words-think"))
    tokenizer.add_tokens(["<think>", "</think>"])
    return tokenizer


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    return train_tokenizer(tmp_path_factory.mktemp("bpe"), special_tokens=None)


def scripted(tokenizer, log: list, reply_of):
    """A backend answering ``reply_of(key, turn)`` (the turn counted per key) that logs every (key, ids given,
    ids sampled)."""
    turns: dict = {}

    def reply(request):
        turn = turns[request.key] = turns.get(request.key, -1) + 1
        return reply_of(request.key, turn)

    backend = ScriptedBackend(reply, lambda text: tokenizer.encode(text, add_special_tokens=False))
    return logging_generate(backend, log)


def thinking_reply(key, turn) -> str:
    """A Signals command after a <think> block on most turns, none on some, and on one turn reasoning so long that
    max_new_tokens cuts it before its </think>."""
    command = COMMANDS[stable_seed(key, turn) % len(COMMANDS)]
    if turn == 2 and key == 0:
        return "<think> " + " ".join(["Obey the traffic lights ."] * 6) + " </think> " + command
    if (key + turn) % 3 == 1:
        return command
    return f"<think> {THOUGHTS[(key + turn) % len(THOUGHTS)]} </think> {command}"


def signals_episodes(tokenizer, backend, n=3, **config):
    agent = LLMAgent(backend, tokenizer, LLMAgentConfig(action_format="last_line", max_new_tokens=16, **config))
    pool = LocalPool.from_id("turngym/Signals-v0", n, env_kwargs={**LONG, "max_turns": 7})
    try:
        return agent, run_episodes(agent, pool, list(signal_tasks("train", n, **LONG)), seed=0)
    finally:
        pool.close()


def by_episode(log):
    """The logged turns of each episode, in order: [(ids given, ids sampled), ...]."""
    turns: dict = {}
    for key, given, sampled in log:
        turns.setdefault(key, []).append((given, sampled))
    return turns


def template_context(tokenizer, agent, trajectory, sampled: list[list[int]], turn: int) -> list[int]:
    """What the template itself renders before turn ``turn``: the conversation with every reply as sampled (the
    template decides what to drop), tokenised whole."""
    system = agent.chat.system_prompt
    messages = [{"role": "system", "content": system}, {"role": "user", "content": trajectory.observations[0]}]
    for j in range(turn):
        ids = sampled[j][:-1] if sampled[j][-1] == agent.chat.end_of_turn_id else sampled[j]
        messages += [{"role": "assistant", "content": tokenizer.decode(ids)},
                     {"role": "user", "content": trajectory.observations[j + 1]}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer.encode(text, add_special_tokens=False)


# ---------------------------------------------------------------------- (a) strip_thinking, a template that strips
def test_each_turn_is_given_the_templates_own_history_without_earlier_reasoning(think_tokenizer):
    log: list = []
    agent, trajectories = signals_episodes(think_tokenizer, scripted(think_tokenizer, log, thinking_reply),
                                           history="strip_thinking")
    turns = by_episode(log)
    think_start = think_tokenizer.convert_tokens_to_ids("<think>")
    stripped = 0
    for episode, trajectory in enumerate(trajectories):
        record = trajectory.tokens
        assert record.num_turns == len(turns[episode]) > 3 and record.rewritten
        sampled = [s for _, s in turns[episode]]
        for turn, (given, ids) in enumerate(turns[episode]):
            assert given == template_context(think_tokenizer, agent, trajectory, sampled, turn), (episode, turn)
            sample = record.turn_sample(turn)
            assert sample.prompt_ids == given and sample.completion_ids == ids  # trained: given, then sampled
            stripped += given.count(think_start) < sum(s.count(think_start) for s in sampled[:turn])
        assert any(think_start in s for s in sampled)
        # The reply cut inside its reasoning (no </think>) is kept whole, as the template keeps it.
    assert stripped > 0
    cut = turns[0][2][1]
    assert think_start in cut and think_tokenizer.convert_tokens_to_ids("</think>") not in cut
    assert all(cut in [given[i: i + len(cut)] for i in range(len(given))] for given, _ in turns[0][3:])


def test_append_keeps_the_reasoning_the_template_would_drop(think_tokenizer):
    """The default stays as it was: the sequence as sampled, which this template does not render."""
    log: list = []
    agent, trajectories = signals_episodes(think_tokenizer, scripted(think_tokenizer, log, thinking_reply))
    turns = by_episode(log)
    record, sampled = trajectories[0].tokens, [s for _, s in turns[0]]
    assert record.contexts is None and not record.rewritten
    assert turns[0][3][0] == record.prompt_ids + record.completion_ids[: record.turn_start(3)]
    assert turns[0][3][0] != template_context(think_tokenizer, agent, trajectories[0], sampled, 3)


def make_trainer(tmp_path: Path, tokenizer, backend, **overrides) -> TurnGymTrainer:
    fields = {"output_dir": str(tmp_path / "run"), "env_id": "turngym/Signals-v0", "env_kwargs": LONG,
              "max_turns": 7, "reward_mode": "dense", "action_format": "last_line", "max_new_tokens_per_turn": 16,
              "algorithm": "turn_rloo", "num_generations": 2, "per_device_train_batch_size": 4, "max_steps": 1,
              "learning_rate": 1e-2, "logging_steps": 1, "report_to": "none", "save_strategy": "no",
              "max_completion_length": 1024, "seed": 0, "disable_tqdm": True, "tis_cap": None}
    args = TurnGymConfig(**{**fields, **overrides})
    return TurnGymTrainer(tiny_llama(len(tokenizer)).train(), args, tasks=signal_tasks("train", 4, **args.env_kwargs),
                          processing_class=tokenizer, backend=lambda model: backend)


def unpadded_rows(output):
    """(prompt ids, completion ids, tool mask) of each row, padding removed."""
    rows = []
    for i in range(output["prompt_ids"].size(0)):
        prompt = output["prompt_ids"][i][output["prompt_mask"][i].bool()].tolist()
        keep = output["completion_mask"][i].bool()
        rows.append((prompt, output["completion_ids"][i][keep].tolist(), output["tool_mask"][i][keep].tolist()))
    return rows


def test_the_trainer_rows_are_the_contexts_given_and_the_ids_sampled(tmp_path, think_tokenizer):
    """The template strips reasoning, so the contexts no longer extend what was sampled: the step trains one row
    per turn by itself, each row exactly (ids given, ids sampled) as the backend logged them."""
    log: list = []
    trainer = make_trainer(tmp_path, think_tokenizer, scripted(think_tokenizer, log, thinking_reply),
                           history="strip_thinking")
    batch = next(iter(trainer.get_train_dataloader()))
    output = trainer._generate_and_score_completions(batch)
    episodes = [row["episode"] for row in batch]
    assert all(e.history_rewritten for e in episodes)
    logged = [(given, sampled) for _, turns in sorted(by_episode(log).items()) for given, sampled in turns]
    rows = unpadded_rows(output)
    assert len(rows) == len(logged) == sum(e.num_turns for e in episodes) > len(episodes)
    for (given, sampled), (prompt, completion, in_loss) in zip(logged, rows, strict=True):
        assert prompt == given and completion == sampled and in_loss == [1] * len(sampled)
    assert output["num_items_in_batch"].item() == sum(len(s) for _, s in logged)


# ---------------------------------------------------------------------- (c) strip_thinking without thinking
def plain_reply(key, turn) -> str:
    return COMMANDS[stable_seed(key, turn) % len(COMMANDS)]


def test_strip_thinking_without_thinking_is_the_append_layout(tmp_path, words):
    """An append-only template and replies without <think>: the same contexts, an unrewritten record and, in the
    trainer, the same whole-episode rows as history: append."""
    _, append = signals_episodes(words, scripted(words, [], plain_reply))
    _, strip = signals_episodes(words, scripted(words, [], plain_reply), history="strip_thinking")
    for a, s in zip(append, strip, strict=True):
        ra, rs = a.tokens, s.tokens
        assert (ra.prompt_ids, ra.completion_ids, ra.env_mask, ra.turn_ends) == (
            rs.prompt_ids, rs.completion_ids, rs.env_mask, rs.turn_ends)
        assert not rs.rewritten and [rs.context_ids(t) for t in range(rs.num_turns)] == [
            ra.context_ids(t) for t in range(ra.num_turns)]
    outputs = []
    for history in ("append", "strip_thinking"):
        trainer = make_trainer(tmp_path / history, words, scripted(words, [], plain_reply), history=history)
        batch = next(iter(trainer.get_train_dataloader()))
        outputs.append(trainer._generate_and_score_completions(batch))
    for key in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "tool_mask", "advantages"):
        assert torch.equal(outputs[0][key], outputs[1][key]), key
    assert outputs[1]["prompt_ids"].size(0) == 4  # one row per episode


def test_strip_thinking_drops_reasoning_by_qwens_rule_under_a_template_that_keeps_it(words_with_think):
    """SmolLM2's template keeps every reply: strip_thinking then applies the rule itself (the text after the last
    </think>), and a reply without reasoning keeps its sampled ids. Rebuilt here in ids: the word tokenizer encodes
    the text after </think> as the ids after it."""
    tokenizer = words_with_think
    log: list = []
    _, trajectories = signals_episodes(tokenizer, scripted(tokenizer, log, thinking_reply), history="strip_thinking")
    think_end = tokenizer.convert_tokens_to_ids("</think>")
    stripped = 0
    for episode, turns in by_episode(log).items():
        record = trajectories[episode].tokens
        expected = list(record.prompt_ids)
        for turn, (given, sampled) in enumerate(turns):
            assert given == expected and record.turn_sample(turn).prompt_ids == given, (episode, turn)
            shown = sampled[len(sampled) - sampled[::-1].index(think_end):] if think_end in sampled else sampled
            stripped += shown != sampled
            expected = expected + shown + record.turn_ids(turn)[len(sampled):]
    assert stripped > 0


# ---------------------------------------------------------------------- (b) compact
SWE_TASK = "turngym__intervals-2"
SWE_COMMANDS = ["cat intervals/core.py", "ls -la", "grep -n def intervals/core.py", "cat README.md", "ls tests"]


def swe_reply(key, turn) -> str:
    return f"Let me look.\n```bash\n{SWE_COMMANDS[turn % len(SWE_COMMANDS)]}\n```"


def rows_of(episodes):
    """The per-turn layout's rows (trainers/layouts.py, no TRL): (prompt ids, completion ids, tool mask)."""
    one = torch.ones(1, 1, dtype=torch.long)
    stand_ins = {"prompt_mask": one, "completion_mask": one, "completion_ids": torch.zeros_like(one)}
    per_turn_rows(stand_ins, episodes, [[0.5] * e.num_turns for e in episodes], [False] * len(episodes), pad_id=0,
                  ends=None, gather=lambda t: t.reshape(-1))
    return unpadded_rows(stand_ins)


def test_compact_keeps_a_long_swe_episode_under_the_budget_with_exact_rows(tmp_path, bpe):
    from turngym.envs.swe import swe_tasks
    from turngym.envs.swe.sandbox import backend_available

    if (problem := backend_available("bwrap")) is not None:
        pytest.skip(f"bwrap sandbox unavailable: {problem}")
    from turngym.trainers.episodes import Episode

    budget = 2600
    log: list = []
    tasks = swe_tasks(None)
    action_format, prefix = reply_format("turngym/SWE-v0")
    agent = LLMAgent(scripted(bpe, log, swe_reply), bpe,
                     LLMAgentConfig(action_format=action_format, response_prefix=prefix, max_new_tokens=64,
                                    history="compact", compact_budget_tokens=budget))
    pool = LocalPool.from_id("turngym/SWE-v0", 1, env_kwargs={"sandbox": "bwrap", "tasks": tasks, "max_turns": 12,
                                                               "workspace_root": tmp_path / "sandboxes"})
    try:
        trajectory = run_episodes(agent, pool, [tasks.by_id(SWE_TASK)], seed=0)[0]
    finally:
        pool.close()
    record, turns = trajectory.tokens, by_episode(log)[0]
    assert trajectory.truncation_reason == "max_turns" and record.num_turns == len(turns) == 12
    assert len(record) > 2 * budget  # the whole episode would not fit
    assert all(len(given) <= budget for given, _ in turns)
    summarised = [bpe.decode(given) for given, _ in turns if SUMMARY_HEADER in bpe.decode(given)]
    assert len(summarised) >= 3 and "1. Let me look. ```bash cat intervals/core.py ```" in summarised[0]
    assert all(trajectory.observations[0] in text for text in summarised)  # the first observation stays
    # Between compactions a context extends the last one; a compaction starts it again after the summary.
    assert sum(b[: len(a)] != a for (a, _), (b, _) in itertools.pairwise(turns)) >= 2
    episode = Episode.from_trajectory(trajectory)
    episode.validate()
    assert episode.history_rewritten
    for (given, sampled), (prompt, completion, in_loss) in zip(turns, rows_of([episode]), strict=True):
        assert prompt == given and completion == sampled and in_loss == [1] * len(sampled)
    handed = rollout_rows([episode], per_turn=False)  # TRL's stand-in: never the whole, rewritten sequence
    assert handed["prompt_ids"] == [turns[0][0]] and handed["completion_ids"] == [turns[0][1]]


def summary_or_command(key, turn) -> str:
    if isinstance(key, SummaryKey):
        return "I obeyed the lights ."
    return COMMANDS[stable_seed(key, turn) % len(COMMANDS)]


@pytest.mark.parametrize("continuous", [False, True], ids=["lockstep", "continuous"])
@pytest.mark.parametrize("summary", ["rule", "policy"])
def test_compact_summaries_are_context_and_every_turn_trains_on_what_it_was_given(bpe, summary, continuous):
    log: list = []
    budget = 300
    agent = LLMAgent(scripted(bpe, log, summary_or_command), bpe,
                     LLMAgentConfig(action_format="last_line", max_new_tokens=8, history="compact",
                                    compact_budget_tokens=budget, compact_summary=summary,
                                    compact_summary_tokens=24))
    pool = LocalPool.from_id("turngym/Signals-v0", 3, env_kwargs={"turns": 12, "colours": 2, "max_turns": 12})
    try:
        trajectories = run_episodes(agent, pool, list(signal_tasks("train", 3, turns=12)), seed=0,
                                    continuous=continuous)
    finally:
        pool.close()
    summaries = [(key.episode, given, sampled) for key, given, sampled in log if isinstance(key, SummaryKey)]
    assert bool(summaries) == (summary == "policy")
    from turngym.trainers.episodes import Episode

    episodes = [Episode.from_trajectory(t) for t in trajectories]
    turns = by_episode([entry for entry in log if not isinstance(entry[0], SummaryKey)])
    rows = rows_of(episodes)
    assert len(rows) == sum(len(t) for t in turns.values())  # one row per turn, none for a summary
    rows = iter(rows)
    for number, (episode, trajectory) in enumerate(zip(episodes, trajectories, strict=True)):
        assert trajectory.num_turns == 12 and episode.history_rewritten
        texts = [bpe.decode(given) for given, _ in turns[number]]
        assert all(len(given) <= budget for given, _ in turns[number])
        compacted = [text for text in texts if SUMMARY_HEADER in text]
        assert compacted
        expected = "I obeyed the lights ." if summary == "policy" else "your actions: "
        assert all(expected in text for text in compacted)
        for given, sampled in turns[number]:
            prompt, completion, _ = next(rows)
            assert prompt == given and completion == sampled
    for episode, _, sampled in summaries:  # a summary's ids are in no row's completion: never trained on
        assert all(completion != sampled for _, completion in turns[episode])


# ---------------------------------------------------------------------- training and evaluation, from the config
def test_compact_trains_and_evaluates_from_the_config(tmp_path, bpe):
    log: list = []
    trainer = make_trainer(tmp_path, bpe, scripted(bpe, log, summary_or_command), history="compact",
                           compact_budget_tokens=300, compact_summary="policy", compact_summary_tokens=24,
                           env_kwargs={"turns": 12, "colours": 2}, max_turns=12, max_new_tokens_per_turn=8)
    batch = next(iter(trainer.get_train_dataloader()))
    output = trainer._generate_and_score_completions(batch)
    turns = [(g, s) for key, g, s in log if not isinstance(key, SummaryKey)]
    assert any(isinstance(key, SummaryKey) for key, _, _ in log)
    rows = unpadded_rows(output)
    assert sorted(map(str, rows)) == sorted(str((g, s, [1] * len(s))) for g, s in turns)
    report = evaluate_policy(trainer.model, bpe, trainer.args, signal_tasks("eval", 2, turns=12), progress=False)
    for trajectory in report.trajectories:
        record = trajectory.tokens
        assert record.contexts is not None and all(len(c) <= 300 for c in record.contexts)
        assert record.rewritten == any(SUMMARY_HEADER in bpe.decode(c) for c in record.contexts)
    assert any(t.tokens.rewritten for t in report.trajectories)


def test_the_docs_yaml_example_is_a_valid_config(tmp_path):
    text = (Path(__file__).parents[1] / "docs" / "agents.md").read_text()
    section = text.split("## Histories that are not append-only", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.DOTALL).group(1)
    fields = yaml.safe_load(block)
    assert fields["history"] == "compact"
    config = TurnGymConfig(output_dir=str(tmp_path), report_to="none", **fields)
    options = config.history_options()
    agent = LLMAgentConfig(**options, max_context_tokens=32768)  # the trainer passes the model's
    assert agent.compact_budget_tokens == fields["compact_budget_tokens"]


@pytest.mark.parametrize(("settings", "message"), [
    ({"history": "rewrite"}, "history must be one of append, strip_thinking, compact"),
    ({"history": "compact"}, "history: compact needs compact_budget_tokens >= 1"),
    ({"history": "append", "budget": 100}, "compact_budget_tokens is for history: compact"),
    ({"history": "strip_thinking", "window": 2}, "history_window needs history: append"),
    ({"history": "compact", "budget": 100, "summary": "oracle"}, "compact_summary must be one of rule, policy"),
])
def test_bad_history_settings_are_one_line_errors(settings, message):
    arguments = {"window": None, "budget": None, "summary": "rule", "summary_tokens": 128, **settings}
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        check_history(arguments.pop("history"), **arguments)
    assert "\n" not in str(caught.value)


def test_the_config_refuses_what_a_rewritten_history_cannot_train(tmp_path):
    base = {"output_dir": str(tmp_path), "env_id": "turngym/Signals-v0", "report_to": "none"}
    with pytest.raises(ValueError, match="history: compact needs compact_budget_tokens"):
        TurnGymConfig(**base, history="compact")
    with pytest.raises(ValueError, match="critic"):
        TurnGymConfig(**base, history="strip_thinking", algorithm="ppo").resolve()
    with pytest.raises(ValueError, match="history_window needs history: append"):
        LLMAgentConfig(history="compact", compact_budget_tokens=10, history_window=2)
    with pytest.raises(ValueError, match="must fit in max_context_tokens"):
        LLMAgentConfig(history="compact", compact_budget_tokens=4090, max_context_tokens=4096)
