"""The LLM agent: a language model acting in many episodes at once, keeping exact token ids.

Per episode the agent keeps a :class:`~turngym.agents.records.TokenRecord`, the one sequence the model saw and produced:

    prompt_ids                      chat template of [system, first observation] + generation prompt
    completion_ids = a_1 e_1 a_2 e_2 ... a_T
        a_t  the ids sampled at turn t, ending with the end-of-turn token   (env_mask 1)
        e_t  the template's delta for observation t (see agents.chat)        (env_mask 0)

``act`` asks the backend for every live episode in one batched call. A reply with no parseable
action is stepped as the empty string, which the world answers as an invalid action with feedback.
A turn that hits ``max_new_tokens`` gets an end-of-turn token appended that was not sampled, so it
is masked out of the loss like environment tokens. With the ``prefix`` format and a response prefix the
action is the rest of the prefix's line, so by default (``stop_after_action``) a sampled line break ends the
turn too (kept, trained on) and the end-of-turn token is appended the same way: an untrained model's chatter
after its command costs no decoding and no training. When the next turn would not fit in
``max_context_tokens`` (or its completion past ``max_completion_tokens``), the episode ends as
truncated (``context_length``).

Under the ``tools`` protocol (the world's ``info["tools"]`` at reset) the template renders the tools
(``tools=``; a template that ignores them gets them in the system message), replies are read in the
model's own call syntax (:mod:`turngym.agents.tool_calls`), and the world's answer to one call is the
template's tool message (``ChatFormat.tool_delta_ids``); the record stays exactly what was sampled.

``history_window = K`` bounds the context of long episodes: each turn the model is given the first
prompt (system prompt and first observation) and the last K turns only
(:meth:`~turngym.agents.records.TokenRecord.context_ids`); the record still holds every id, and the
trainer then trains each turn on exactly the context it was sampled from.

``history`` rewrites what the model is given of its earlier turns (:mod:`turngym.agents.histories`):
``strip_thinking`` drops earlier replies' reasoning, ``compact`` summarises the oldest turns once the context
passes ``compact_budget_tokens``. The record then keeps each turn's context as given (``TokenRecord.contexts``),
and a turn trains on that context and the ids it sampled there.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from turngym.agents.actions import ActionParser
from turngym.agents.base import ContinuousAgent, EndEpisode, stable_seed
from turngym.agents.chat import ChatFormat, ChatTemplateError
from turngym.agents.decoding import Join, decoder_for
from turngym.agents.generation import Decoder, Generation, GenerationRequest, SamplingConfig, TokenBackend
from turngym.agents.histories import Compact, History, SummaryKey, check_history, history_for, without_reasoning
from turngym.agents.records import TokenRecord
from turngym.agents.tool_calls import (
    SYNTAXES,
    calls_action,
    parse_tool_calls,
    syntax_of_template,
    tools_instructions,
)

DEFAULT_SYSTEM_PROMPT = (
    "You are an agent in a text-based world. Each turn you read what happened and reply with one command "
    "for the world to execute. {format_instruction}"
)


DEFAULT_ACTION_PREFIX = "Action:"  # small models (SmolLM2) write no parseable command without an answer prefix
DEFAULT_MAX_NEW_TOKENS = 48  # tokens a turn may sample
# ... when the turn is one line of command: TextWorld's and ALFWorld's longest take ~12 tokens, while an untrained
# model rambles to any cap (the first-hour step, docs/benchmarks.md).
ONE_LINE_ACTION_TOKENS = 16
TOOLS_INSTRUCTION = "Act by calling one of the tools, one call a turn."


def reply_format(env_id: str, action_format: str | None = None, response_prefix: str | None = None, *,
                 tools: bool = False) -> tuple[str, str]:
    """``(action_format, response_prefix)`` for an LLM agent in ``env_id``, filling what is unset.

    The action format defaults to the world's own (``TextEnv.agent_action_format``: the SWE world
    reads a fenced command from the whole reply, ``"raw"``), else ``"prefix"``. The response prefix
    defaults to :data:`DEFAULT_ACTION_PREFIX` with the ``prefix`` format, else none; under the ``tools``
    protocol (``tools``) it is none, and may not be set: the model's reply is its tool call. Evaluation,
    SFT and RL all resolve their defaults here, so they share one chat format.
    """
    if tools:
        if response_prefix:
            raise ValueError(f"the tools protocol reads the model's native tool calls; a response prefix "
                             f"({response_prefix!r}) would be written before them: leave it unset or ''")
        response_prefix = ""
    if action_format is None:
        from turngym.envs.registry import world_creator

        action_format = getattr(world_creator(env_id), "agent_action_format", None) or "prefix"
    if response_prefix is None:
        response_prefix = DEFAULT_ACTION_PREFIX if action_format == "prefix" else ""
    return action_format, response_prefix


@dataclass
class LLMAgentConfig:
    """How the LLM agent prompts, samples and parses.

    ``system_prompt`` may contain ``{format_instruction}``, filled from the action format.
    ``response_prefix`` is written after each generation prompt (e.g. ``"Action:"``): it steers a
    small model into the format, and is part of the prompt side, not the loss. With the
    ``prefix`` action format it is also the prefix the action is read after.
    """

    system_prompt: str | None = DEFAULT_SYSTEM_PROMPT
    action_format: str = "prefix"
    action_prefix: str = "Action:"
    action_tag: str = "action"
    response_prefix: str = ""
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int | None = None  # default: ONE_LINE_ACTION_TOKENS when a line break ends the turn, else 48
    max_context_tokens: int = 4096
    max_completion_tokens: int | None = None  # cap on tokens after the prompt (training's max_completion_length)
    seed: int = 0
    history_window: int | None = None  # K: the model sees the first prompt and the last K turns (None: all turns)
    history: str = "append"  # append | strip_thinking | compact: what the model is given of earlier turns
    compact_budget_tokens: int | None = None  # compact: the context size past which the oldest turns are summarised
    compact_summary: str = "rule"  # compact: "rule" (the dropped turns' actions listed) or "policy" (it writes one)
    compact_summary_tokens: int = 128  # compact: the summary's length cap
    join: Join = "token"  # continuous batching: turns join between decoding steps, or once the batch is done ("turn")
    stop_after_action: bool = True  # prefix format with a response prefix: a line break ends the turn
    tool_syntax: str | None = None  # tools protocol: the model's call syntax (default: the chat template's)

    @property
    def stops_at_line_break(self) -> bool:
        """The action is the response prefix's line, so a line break ends the turn."""
        return self.stop_after_action and self.action_format == "prefix" and bool(self.response_prefix.strip())

    def __post_init__(self) -> None:
        if self.max_new_tokens is None:
            self.max_new_tokens = ONE_LINE_ACTION_TOKENS if self.stops_at_line_break else DEFAULT_MAX_NEW_TOKENS
        if self.history_window is not None and self.history_window < 1:
            raise ValueError(f"history_window must be >= 1 turn (None: the whole episode), got {self.history_window}")
        check_history(self.history, window=self.history_window, budget=self.compact_budget_tokens,
                      summary=self.compact_summary, summary_tokens=self.compact_summary_tokens)
        longest = max(self.max_new_tokens, self.compact_summary_tokens)
        if self.history == "compact" and self.compact_budget_tokens + longest > self.max_context_tokens:
            raise ValueError(f"compact_budget_tokens ({self.compact_budget_tokens}) + {longest} tokens sampled must "
                             f"fit in max_context_tokens ({self.max_context_tokens}): lower the budget")

    @property
    def sampling(self) -> SamplingConfig:
        return SamplingConfig(self.temperature, self.top_p, self.top_k, self.max_new_tokens)

    def system_message(self, parser: ActionParser, *, tools: bool = False) -> str | None:
        """The system prompt with ``{format_instruction}`` filled from the action parser (or, when the world
        offers tools, the instruction to call one)."""
        if self.system_prompt is None or "{format_instruction}" not in self.system_prompt:
            return self.system_prompt
        return self.system_prompt.format(format_instruction=TOOLS_INSTRUCTION if tools else parser.instruction())

    def parser(self) -> ActionParser:
        prefix = self.response_prefix.strip() or self.action_prefix
        return ActionParser(self.action_format, prefix=prefix, tag=self.action_tag)


@dataclass
class _Live:
    record: TokenRecord
    seed: int
    chat: ChatFormat
    tools: bool = False  # the world's tools protocol: replies are read as the model's native tool calls
    pending_observation: str | None = None
    pending_call: tuple[str, str] | None = None  # (tool, call id) the pending observation answers
    history: History | None = None  # a history that rewrites earlier turns (None: append-only)
    observations: list[str] = field(default_factory=list)  # every observation so far, the first one included
    summary: str = ""  # compact: the last summary
    summarised: int = 0  # compact: the turns the last summary covers
    compaction: tuple[list[int], int] | None = None  # compact by the policy: (delta, first turn kept) awaiting it


class LLMAgent(ContinuousAgent):
    """A causal LM acting through a :class:`~turngym.agents.backends.TokenBackend`.

    ``end(episode)`` returns the episode's :class:`~turngym.agents.records.TokenRecord`, which the
    rollout keeps as ``trajectory.record``.
    """

    batched = True

    def __init__(self, backend: TokenBackend, tokenizer: Any, config: LLMAgentConfig | None = None, *,
                 name: str = "llm") -> None:
        self.backend = backend
        self.config = config or LLMAgentConfig()
        self.parser = self.config.parser()
        self.chat = ChatFormat(tokenizer, system_prompt=self.config.system_message(self.parser),
                               response_prefix=self.config.response_prefix)
        self.name = name
        self._live: dict[int, _Live] = {}
        self._decoder: Decoder | None = None  # continuous batching's, made at the first submit()
        self._tool_chats: dict[str, ChatFormat] = {}  # per tool set (the tools protocol)
        self.tool_syntax: str | None = None
        self._end_of_turn_ids = self.chat.stop_ids()
        # The end-of-turn ids first: a scripted backend ends a text reply with stop_ids[0].
        self.stop_ids = self._end_of_turn_ids + (
            [i for i in self.chat.line_break_ids() if i not in self._end_of_turn_ids]
            if self.config.stops_at_line_break else [])
        self.sampled_tokens: int = 0  # over every episode, for progress bars
        backend.cache_prefix(self.chat.shared_prefix_ids())  # the shared system prompt, encoded once

    def begin(self, episode: int, observation: str, info: dict[str, Any]) -> None:
        task_id = (info.get("task") or {}).get("id")
        tools = info.get("tools")
        chat = self._tools_chat(tools) if tools else self.chat
        record = TokenRecord(prompt_ids=chat.prompt_ids(observation), history_window=self.config.history_window)
        history = history_for(self.config.history, chat, self._end_of_turn_ids,
                              budget=self.config.compact_budget_tokens,
                              summary_tokens=self.config.compact_summary_tokens)
        self._live[episode] = _Live(record, stable_seed(self.config.seed, episode, task_id) % 2**62, chat, bool(tools),
                                    history=history, observations=[observation])

    def tool_syntax_of(self, episode: int) -> str | None:
        """The call syntax the episode's replies are read in (None: the world offers no tools)."""
        return self.tool_syntax if self._live[episode].tools else None

    def _tools_chat(self, tools: list[dict[str, Any]]) -> ChatFormat:
        """The chat format that renders ``tools`` with the template (made once per tool set), and the call syntax
        replies are read in."""
        key = json.dumps(tools, sort_keys=True)
        if key not in self._tool_chats:
            if self.config.response_prefix:
                raise ValueError(f"the world offers tools, and a response prefix ({self.config.response_prefix!r}) "
                                 "would be written before the model's tool call: set response_prefix to ''")
            tokenizer, system = self.chat.tokenizer, self.config.system_message(self.parser, tools=True)
            chat = ChatFormat(tokenizer, system_prompt=system, tools=tools)
            if chat.prompt_ids("?") != ChatFormat(tokenizer, system_prompt=system).prompt_ids("?"):
                self.tool_syntax = self.config.tool_syntax or syntax_of_template(tokenizer.chat_template)
                if self.tool_syntax is None:
                    raise ChatTemplateError(
                        "the world offers tools, but the chat template shows no tool-call syntax "
                        f"(one of {', '.join(SYNTAXES)}); set tool_syntax if the model writes one")
            else:  # the template ignores tools= (SmolLM2's): the system message describes them, in Hermes' syntax
                self.tool_syntax = self.config.tool_syntax or "hermes"
                described = (f"{system}\n\n" if system else "") + tools_instructions(tools, self.tool_syntax)
                chat = ChatFormat(tokenizer, system_prompt=described)
            self.backend.cache_prefix(chat.shared_prefix_ids())
            self._tool_chats[key] = chat
        return self._tool_chats[key]

    def act(self, episodes: Sequence[int]) -> list[str | EndEpisode]:
        """The next action of every episode listed, from one batched generation call."""
        turns = self._turns(episodes)
        requests = [turn for turn in turns if isinstance(turn, GenerationRequest)]
        generations = iter(self.backend.generate(requests, self.config.sampling, self.stop_ids)
                           if requests else [])
        return [self._take(turn.key, next(generations)) if isinstance(turn, GenerationRequest) else turn
                for turn in turns]

    # ------------------------------------------------------------------ continuous batching
    def submit(self, episodes: Sequence[int]) -> list[tuple[int, EndEpisode]]:
        """Queue the next turn of each episode listed (its actions come from :meth:`advance`); those that
        cannot go on (the context is full) end now, and are returned."""
        if self._decoder is None:
            self._decoder = decoder_for(self.backend, self.config.sampling, self.stop_ids,
                                        join=self.config.join)
        ended = []
        for episode, turn in zip(episodes, self._turns(episodes), strict=True):
            if isinstance(turn, EndEpisode):
                ended.append((episode, turn))
            else:
                self._decoder.add(turn)
        return ended

    def advance(self) -> list[tuple[int, str]]:
        """One decoding iteration over the queued and running turns: ``(episode, action)`` of those it ended."""
        if not self.decoding:
            return []
        return [(key, self._take(key, generation)) for key, generation in self._decoder.step()]

    @property
    def decoding(self) -> bool:
        """Turns are queued or running (:meth:`submit`, :meth:`advance`)."""
        return self._decoder is not None and self._decoder.busy

    # ------------------------------------------------------------------ one turn
    def _turns(self, episodes: Sequence[int]) -> list[GenerationRequest | EndEpisode]:
        """Each episode's next turn (:meth:`_next_turn`); the summaries some compactions need first
        (``compact_summary: policy``) are written before, in one batched call of their own."""
        turns = [self._next_turn(episode) for episode in episodes]
        asks = [turn for turn in turns if isinstance(turn, GenerationRequest) and isinstance(turn.key, SummaryKey)]
        if not asks:
            return turns
        sampling = replace(self.config.sampling, max_new_tokens=self.config.compact_summary_tokens)
        summaries = self.backend.generate(asks, sampling, self._end_of_turn_ids)
        written = {ask.key: self._take_summary(ask.key, summary) for ask, summary in zip(asks, summaries, strict=True)}
        return [written.get(turn.key, turn) if isinstance(turn, GenerationRequest) else turn for turn in turns]

    def _next_turn(self, episode: int) -> GenerationRequest | EndEpisode:
        """The request for an episode's next turn (its pending observation appended), the request for the summary
        its compaction needs first (``compact_summary: policy``, keyed :class:`SummaryKey`), or why it must end."""
        live = self._live[episode]
        delta = self._pending_delta(live)
        if isinstance(live.history, Compact):
            first = live.history.first_kept(live.record, delta, live.observations[0])
            if first is not None:
                return self._compact(episode, live, delta, first)
        context = live.history.context(live.record, delta) if live.history else None
        return self._turn_request(episode, live, delta, context)

    def _pending_delta(self, live: _Live) -> list[int]:
        """The template's ids for the observation not yet appended ([] when none is pending)."""
        if live.pending_observation is None:
            return []
        if live.pending_call:
            return live.chat.tool_delta_ids(live.pending_observation, *live.pending_call)
        return live.chat.env_delta_ids(live.pending_observation)

    def _turn_request(self, episode: int, live: _Live, delta: list[int],
                      context: list[int] | None) -> GenerationRequest | EndEpisode:
        """Append the pending observation and ask for the turn on ``context`` (None: the record's own slicing,
        an append-only history), or end the episode when that would overflow."""
        record = live.record
        length = record.context_length() + len(delta) if context is None else len(context)
        if self._would_overflow(record, length):
            record.context_truncated = True
            return EndEpisode("context_length")
        if live.pending_observation is not None:
            record.add_env_turn(delta)
            live.pending_observation = None
        if context is None:
            return GenerationRequest(episode, record.context_ids(), live.seed)
        record.add_context(context)
        return GenerationRequest(episode, context, live.seed)

    # ------------------------------------------------------------------ compaction (history: compact)
    def _compact(self, episode: int, live: _Live, delta: list[int], first: int) -> GenerationRequest | EndEpisode:
        """Drop turns before ``first`` for a summary: the rule's now, or a request for the policy's."""
        if first >= live.record.num_turns:  # not even the latest turn fits beside a summary
            live.record.context_truncated = True
            return EndEpisode("context_length")
        if self.config.compact_summary == "policy":
            live.compaction = (delta, first)
            ids = live.history.summary_request(live.record.replies[live.summarised:first],
                                               live.observations[live.summarised + 1:first + 1], live.summary)
            return GenerationRequest(SummaryKey(episode), ids, live.seed)
        return self._summarised(episode, live, delta, first, live.history.rule_summary(live.record.actions[:first]))

    def _summarised(self, episode: int, live: _Live, delta: list[int], first: int,
                    summary: str) -> GenerationRequest | EndEpisode:
        """The turn's request on the compacted context: the first prompt with ``summary``, turns ``first``..."""
        live.summary, live.summarised = summary, first
        head = live.history.head(live.observations[0], summary)
        context = live.history.compacted(live.record, delta, first, head)
        if len(context) > live.history.budget:
            live.record.context_truncated = True
            return EndEpisode("context_length")
        return self._turn_request(episode, live, delta, context)

    def _take_summary(self, key: SummaryKey, generation: Generation) -> GenerationRequest | EndEpisode:
        """The policy's summary (context from now on, never trained on): the request of the turn it was for."""
        live = self._live[key.episode]
        self.backend.release(key)
        self.sampled_tokens += len(generation.ids)
        ids = generation.ids[:-1] if generation.stopped else generation.ids
        text = without_reasoning(live.chat.decode(ids, skip_special_tokens=True)).strip()
        (delta, first), live.compaction = live.compaction, None
        return self._summarised(key.episode, live, delta, first, live.history.cut(text))

    def _take(self, episode: int, generation: Generation) -> str:
        """Record a generated turn; the action parsed from it ("" when none parses: an invalid action)."""
        live = self._live[episode]
        record = live.record
        closed = generation.stopped and generation.ids[-1] in self._end_of_turn_ids
        record.add_model_turn(generation, self.chat.end_of_turn_id, closed=closed)
        self.sampled_tokens += len(generation.ids)
        if live.tools:  # call syntax may be special tokens (<tool_call>, [TOOL_CALLS]): kept, less the end of turn
            reply = self.chat.decode(generation.ids[:-1] if closed else generation.ids)
            calls = parse_tool_calls(reply, self.tool_syntax).calls
            action = calls_action(calls)
            # the world's answer to one call returns as the template's tool message; Mistral's ids are 9 characters
            live.pending_call = (calls[0].name, f"call{len(record.turn_ends):05d}") if len(calls) == 1 else None
        else:
            reply = self.chat.decode(generation.ids, skip_special_tokens=True)
            action = self.parser.parse(self.config.response_prefix + reply)
        record.replies.append(reply)
        record.actions.append(action)
        return action if action is not None else ""

    def _would_overflow(self, record: TokenRecord, context: int) -> bool:
        """Would the next turn, given ``context`` tokens, pass the context or the completion cap? (+1: a forced
        end-of-turn.) Both count the context the next turn is given: the whole episode, the prompt and the window,
        or the history's context."""
        max_new = self.config.sampling.max_new_tokens
        if context + max_new > self.config.max_context_tokens:
            return True
        cap = self.config.max_completion_tokens
        return cap is not None and context - len(record.prompt_ids) + max_new + 1 > cap

    def observe(self, episode: int, action: str, observation: str, reward: float, info: dict[str, Any]) -> None:
        # Appended lazily, at the next act(): the last observation of an episode is never needed.
        live = self._live[episode]
        live.pending_observation = observation
        if isinstance(live.history, Compact):  # a policy's summary reads them
            live.observations.append(observation)

    def end(self, episode: int) -> TokenRecord:
        live = self._live.pop(episode)
        self.backend.release(episode)
        return live.record

