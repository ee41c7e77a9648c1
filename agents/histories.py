"""Histories that are not append-only: what the model is given of its earlier turns.

``LLMAgentConfig.history`` chooses:

* ``append`` (the default): every earlier turn exactly as sampled (with ``history_window``, the last K);
* ``strip_thinking``: each earlier reply without its reasoning, as Qwen3's and DeepSeek-R1's chat templates write
  earlier assistant turns (:class:`StripThinking`);
* ``compact``: when the next context would pass ``compact_budget_tokens``, the oldest turns leave it and a summary
  of them follows the first observation (:class:`Compact`): a listing of their actions (``compact_summary: rule``)
  or a summary the policy writes (``policy``).

The record (:class:`~turngym.agents.records.TokenRecord`) still holds the episode as sampled, and ``contexts``
keeps the ids each turn was given. An episode where some turn was given anything but the sequence before it
(:attr:`~turngym.agents.records.TokenRecord.rewritten`) trains one row per turn: that turn's context, then exactly
the ids sampled there. What stands for an earlier turn in a rewritten context (a reply without its reasoning, a
summary) is context, never in the loss.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from turngym.agents.chat import ChatFormat
from turngym.agents.records import TokenRecord

HISTORIES = ("append", "strip_thinking", "compact")
SUMMARIES = ("rule", "policy")
THINK_END = "</think>"
SUMMARY_HEADER = "Earlier turns (summarised):"
SUMMARY_INSTRUCTION = ("Summarise the turns below for yourself in a few short lines: what you did, what you "
                       "learned and what is left to do. Reply with the summary only.")
ACTION_CHARS = 80  # one action's length in a rule summary
TRANSCRIPT_CHARS = 400  # one reply's or observation's length in the policy's summary request
SLACK_TOKENS = 16  # room left for tokenisation at the summary's edges


def check_history(history: str, *, window: int | None, budget: int | None, summary: str,
                  summary_tokens: int) -> None:
    """One-line errors for a history's settings (the agent's and the trainer's configs share them)."""
    if history not in HISTORIES:
        raise ValueError(f"history must be one of {', '.join(HISTORIES)}, got {history!r}")
    if history != "append" and window is not None:
        raise ValueError(f"history: {history} rewrites the context itself; history_window needs history: append")
    if history == "compact" and (budget is None or budget < 1):
        raise ValueError(f"history: compact needs compact_budget_tokens >= 1 (the context size that starts a "
                         f"compaction), got {budget}")
    if history != "compact" and budget is not None:
        raise ValueError(f"compact_budget_tokens is for history: compact, got history: {history}")
    if summary not in SUMMARIES:
        raise ValueError(f"compact_summary must be one of {', '.join(SUMMARIES)}, got {summary!r}")
    if summary_tokens < 1:
        raise ValueError(f"compact_summary_tokens must be >= 1, got {summary_tokens}")


def without_reasoning(text: str) -> str:
    """Qwen3's and DeepSeek-R1's rule for an earlier reply: the text after its last ``</think>``, leading line
    breaks dropped; the text itself when it has none."""
    return text.split(THINK_END)[-1].lstrip("\n") if THINK_END in text else text


def turn_length(record: TokenRecord, turn: int) -> int:
    """``len(record.turn_ids(turn))``, without building the list."""
    return record.turn_start(turn + 1) - record.turn_start(turn)


def appended_context(record: TokenRecord, delta: list[int], shown: Callable[[int], list[int]]) -> list[int]:
    """The next turn's context: the last turn's context, then that turn as ``shown`` and the new ``delta``."""
    turn = record.num_turns
    if turn == 0:
        return list(record.prompt_ids)
    return record.context_ids(turn - 1) + shown(turn - 1) + delta


@dataclass
class StripThinking:
    """Earlier replies without their reasoning. A reply holding ``</think>`` is shown as the template writes it
    in the history (:meth:`~turngym.agents.chat.ChatFormat.history_text`) when that drops the reasoning, else by
    :func:`without_reasoning`, then re-encoded (it is context); any other reply keeps its sampled ids."""

    chat: ChatFormat
    stop_ids: Sequence[int]  # the ids that close a turn (kept after the shortened reply)

    def context(self, record: TokenRecord, delta: list[int]) -> list[int]:
        return appended_context(record, delta, lambda turn: self.shown(record, turn))

    def shown(self, record: TokenRecord, turn: int) -> list[int]:
        """Turn ``turn``'s ids as later turns are given them: its reply without reasoning, then the rest."""
        ids = record.turn_ids(turn)
        sampled = record.turn_ends[turn] + 1 - record.turn_start(turn)
        reply = sampled - 1 if ids[sampled - 1] in self.stop_ids else sampled  # the end-of-turn token stays
        text = self.chat.decode(ids[:reply])
        if THINK_END not in text:
            return ids
        kept = self.chat.history_text(text)
        if kept == text:  # the template keeps earlier reasoning: the rule drops it
            kept = without_reasoning(text)
        return self.chat.encode(kept) + ids[reply:]


@dataclass
class Compact:
    """Summarise the oldest turns when the context would pass ``budget`` tokens.

    A compaction keeps the latest turns that fit in half of what the budget leaves beside the first prompt and a
    summary (at least the latest turn), so that the context grows again for a while before the next one; the
    first prompt is rendered again with the summary after the first observation. Between compactions each
    context extends the last one.
    """

    chat: ChatFormat
    budget: int
    summary_tokens: int

    def context(self, record: TokenRecord, delta: list[int]) -> list[int]:
        return appended_context(record, delta, record.turn_ids)

    def first_kept(self, record: TokenRecord, delta: list[int], first_observation: str) -> int | None:
        """The first turn a compaction of the next context keeps; None when the context fits the budget as it is,
        the number of turns played when not even the latest turn fits beside a summary."""
        turn = record.num_turns
        last = record.context_length(turn - 1) + turn_length(record, turn - 1) if turn else len(record.prompt_ids)
        if last + len(delta) <= self.budget:
            return None
        room = self.budget - self.head_reserve(first_observation)
        lengths = [turn_length(record, t) for t in range(turn)]
        if lengths:
            lengths[-1] += len(delta)
        first, kept = turn, 0
        while first > 0 and kept + lengths[first - 1] <= room // 2:
            first, kept = first - 1, kept + lengths[first - 1]
        if first == turn and turn and lengths[-1] <= room:  # the latest turn stays whenever it fits
            first = turn - 1
        return first

    def head(self, first_observation: str, summary: str) -> list[int]:
        """The first prompt with ``summary`` after the first observation."""
        return self.chat.prompt_ids(f"{first_observation}\n\n{SUMMARY_HEADER} {summary}")

    def head_reserve(self, first_observation: str) -> int:
        """The most tokens :meth:`head` takes."""
        return len(self.head(first_observation, "")) + self.summary_tokens + SLACK_TOKENS

    def compacted(self, record: TokenRecord, delta: list[int], first: int, head: list[int]) -> list[int]:
        """The next context after a compaction: ``head``, turns ``first``... as sampled, the new ``delta``."""
        return head + record.completion_ids[record.turn_start(first):] + delta

    def rule_summary(self, actions: Sequence[str | None]) -> str:
        """The dropped turns' actions as a numbered listing, the oldest left out ("...") past the token cap."""
        items = [f"{n}. {_one_line(action)}" for n, action in enumerate(actions, start=1)]
        kept: list[str] = []
        used = len(self.chat.encode(f"turns 1-{len(items)}; your actions: ...; "))
        for item in reversed(items):
            used += len(self.chat.encode(item + "; "))
            if used > self.summary_tokens:
                break
            kept.insert(0, item)
        listing = ("...; " if len(kept) < len(items) else "") + "; ".join(kept)
        return self.cut(f"turns 1-{len(items)}; your actions: {listing}")

    def summary_request(self, replies: Sequence[str], observations: Sequence[str], previous: str) -> list[int]:
        """The policy's request for a summary of the turns ``replies`` (each answered by the observation at the
        same place), after ``previous`` (the last summary, or ""): a chat of its own, without the response
        prefix, the oldest turns left out past the budget."""
        turns = [f"Turn {n}\nYou: {_clip(without_reasoning(reply))}\nWorld: {_clip(observation)}"
                 for n, (reply, observation) in enumerate(zip(replies, observations), start=1)]
        while True:
            parts = [SUMMARY_INSTRUCTION, *([f"{SUMMARY_HEADER} {previous}"] if previous else []), *turns]
            ids = self.chat.prompt_ids("\n\n".join(parts), response_prefix=False)
            if len(ids) <= self.budget or len(turns) <= 1:
                return ids
            turns = turns[1:]

    def cut(self, text: str) -> str:
        """``text`` cut to ``summary_tokens`` tokens."""
        ids = self.chat.encode(text)
        return text if len(ids) <= self.summary_tokens else self.chat.decode(ids[: self.summary_tokens])


@dataclass(frozen=True)
class SummaryKey:
    """The generation request of an episode's summary (``compact_summary: policy``), apart from its turns'."""

    episode: Hashable


def _one_line(action: str | None) -> str:
    """An action on one line, its end kept when it is long (a reply read whole ends with its command)."""
    line = " ".join((action or "(no action)").split())
    return line if len(line) <= ACTION_CHARS else "..." + line[3 - ACTION_CHARS:]


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= TRANSCRIPT_CHARS else text[: TRANSCRIPT_CHARS - 3] + "..."


History = StripThinking | Compact


def history_for(history: str, chat: ChatFormat, stop_ids: Sequence[int], *, budget: int | None = None,
                summary_tokens: int = 128) -> History | None:
    """The history an episode in ``chat`` plays with (None: append-only, the record's own slicing)."""
    if history == "strip_thinking":
        return StripThinking(chat, list(stop_ids))
    if history == "compact":
        return Compact(chat, budget or 0, summary_tokens)
    return None
