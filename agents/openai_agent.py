"""Evaluating a served model through an OpenAI-compatible chat API (vLLM, TGI, llama.cpp, OpenAI).

The server owns the tokenizer, so this agent keeps the episode as chat messages, not token ids:
it is for evaluation, not training (train with :class:`~turngym.agents.llm.LLMAgent`). It shares the
prompt, the action parser and the sampling settings with the LLM agent, and sends the live
episodes' requests concurrently. An API failure ends that episode as truncated (``api_error``,
counted as an infrastructure failure, never as the agent losing); a context overflow ends it as
``context_length``.

Under a world's ``tools`` protocol (``info["tools"]`` at reset) the request carries the world's tools and
the served model answers with ``tool_calls``; the call becomes the action (``{"name", "arguments"}`` as
JSON, which the world checks) and the world's answer goes back as a ``tool`` message.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from turngym.agents.base import Agent, EndEpisode
from turngym.agents.llm import LLMAgentConfig
from turngym.agents.records import ChatRecord

logger = logging.getLogger(__name__)


@dataclass
class _Conversation:
    messages: list[dict[str, Any]]
    replies: list[str] = field(default_factory=list)
    actions: list[str | None] = field(default_factory=list)
    pending_observation: str | None = None
    tools: list[dict[str, Any]] | None = None  # the world's, under the tools protocol
    pending_call_id: str | None = None  # the call the next observation answers


def call_action(calls: Sequence[Any]) -> str:
    """A reply's ``tool_calls`` as the action string: one call is ``{"name", "arguments"}`` (arguments as the
    server sent them, a JSON string the world reads); several are a list, which the world refuses (one call a
    turn) with its reason."""
    written = [{"name": call.function.name, "arguments": call.function.arguments} for call in calls]
    return json.dumps(written[0] if len(written) == 1 else written, ensure_ascii=False)


class ChatAPIAgent(Agent):
    """An agent whose replies come from ``POST {base_url}/chat/completions``.

    Args:
        model: the served model's name.
        base_url: e.g. ``http://localhost:8000/v1`` (default: ``$OPENAI_BASE_URL``).
        api_key: default ``$OPENAI_API_KEY``, or ``"EMPTY"`` for servers that need none.
        max_concurrency: requests in flight at once.
        client: an ``openai.OpenAI`` client to use instead of building one.
        tag_episodes: name each request's episode in the ``X-Turngym-Episode`` header (``turngym proxy`` keeps an
            episode's calls together by it); other servers ignore the header.
    """

    batched = True

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 config: LLMAgentConfig | None = None, name: str | None = None, max_concurrency: int = 8,
                 timeout: float = 120.0, client: Any = None, tag_episodes: bool = False) -> None:
        from openai import OpenAI

        self.model = model
        self.config = config or LLMAgentConfig()
        self.parser = self.config.parser()
        self.name = name or f"openai:{model}"
        self.client = client or OpenAI(base_url=base_url or os.environ.get("OPENAI_BASE_URL"),
                                       api_key=api_key or os.environ.get("OPENAI_API_KEY", "EMPTY"),
                                       timeout=timeout, max_retries=2)
        self.max_concurrency = max_concurrency
        self.tag_episodes = tag_episodes
        self.system_prompt = self.config.system_message(self.parser)
        self._live: dict[int, _Conversation] = {}

    def begin(self, episode: int, observation: str, info: dict[str, Any]) -> None:
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt is not None else []
        self._live[episode] = _Conversation([*system, {"role": "user", "content": observation}],
                                            tools=info.get("tools"))

    def act(self, episodes: Sequence[int]) -> list[str | EndEpisode]:
        for episode in episodes:
            live = self._live[episode]
            if live.pending_observation is not None:
                answer = ({"role": "tool", "tool_call_id": live.pending_call_id} if live.pending_call_id
                          else {"role": "user"})
                live.messages.append({**answer, "content": live.pending_observation})
                live.pending_observation, live.pending_call_id = None, None
        with ThreadPoolExecutor(max_workers=max(1, min(self.max_concurrency, len(episodes)))) as pool:
            return list(pool.map(self._act_one, episodes))

    def _act_one(self, episode: int) -> str | EndEpisode:
        from openai import APIError, BadRequestError

        live = self._live[episode]
        try:
            response = self.client.chat.completions.create(
                model=self.model, messages=live.messages, temperature=self.config.temperature,
                top_p=self.config.top_p, max_tokens=self.config.max_new_tokens, seed=self.config.seed,
                **({"tools": live.tools} if live.tools else {}),
                **({"extra_headers": {"X-Turngym-Episode": f"episode-{episode}"}} if self.tag_episodes else {}),
            )
        except BadRequestError as error:
            if "context" in str(error).lower() or "too long" in str(error).lower():
                return EndEpisode("context_length")
            logger.warning("episode %s: the API rejected the request: %s", episode, error)
            return EndEpisode("api_error")
        except APIError as error:
            logger.warning("episode %s: API error: %s", episode, error)
            return EndEpisode("api_error")
        message = response.choices[0].message if response.choices else None
        reply = (message.content or "") if message is not None else ""
        calls = list(getattr(message, "tool_calls", None) or [])
        if live.tools is not None:  # the tools protocol: the call is the action; no call, an invalid action
            action = call_action(calls) if calls else None
            live.pending_call_id = calls[0].id if len(calls) == 1 else None
        else:
            action = self.parser.parse(self.config.response_prefix + reply)
        written = [call.model_dump() for call in calls] if live.tools is not None and calls else None
        live.messages.append({"role": "assistant", "content": reply, **({"tool_calls": written} if written else {})})
        live.replies.append(reply)
        live.actions.append(action)
        return action if action is not None else ""

    def observe(self, episode: int, action: str, observation: str, reward: float, info: dict[str, Any]) -> None:
        self._live[episode].pending_observation = observation

    def end(self, episode: int) -> ChatRecord:
        live = self._live.pop(episode)
        return ChatRecord(messages=live.messages, replies=live.replies, actions=live.actions)
