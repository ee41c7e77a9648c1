"""Evaluating a served model through an OpenAI-compatible chat API (vLLM, TGI, llama.cpp, OpenAI).

The server owns the tokenizer, so this agent keeps the episode as chat messages, not token ids:
it is for evaluation, not training (train with :class:`~turngym.agents.llm.LLMAgent`). It shares the
prompt, the action parser and the sampling settings with the LLM agent, and sends the live
episodes' requests concurrently. An API failure ends that episode as truncated (``api_error``,
counted as an infrastructure failure, never as the agent losing); a context overflow ends it as
``context_length``.
"""

from __future__ import annotations

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
    messages: list[dict[str, str]]
    replies: list[str] = field(default_factory=list)
    actions: list[str | None] = field(default_factory=list)
    pending_observation: str | None = None


class ChatAPIAgent(Agent):
    """An agent whose replies come from ``POST {base_url}/chat/completions``.

    Args:
        model: the served model's name.
        base_url: e.g. ``http://localhost:8000/v1`` (default: ``$OPENAI_BASE_URL``).
        api_key: default ``$OPENAI_API_KEY``, or ``"EMPTY"`` for servers that need none.
        max_concurrency: requests in flight at once.
        client: an ``openai.OpenAI`` client to use instead of building one.
    """

    batched = True

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 config: LLMAgentConfig | None = None, name: str | None = None, max_concurrency: int = 8,
                 timeout: float = 120.0, client: Any = None) -> None:
        from openai import OpenAI

        self.model = model
        self.config = config or LLMAgentConfig()
        self.parser = self.config.parser()
        self.name = name or f"openai:{model}"
        self.client = client or OpenAI(base_url=base_url or os.environ.get("OPENAI_BASE_URL"),
                                       api_key=api_key or os.environ.get("OPENAI_API_KEY", "EMPTY"),
                                       timeout=timeout, max_retries=2)
        self.max_concurrency = max_concurrency
        self.system_prompt = self.config.system_message(self.parser)
        self._live: dict[int, _Conversation] = {}

    def begin(self, episode: int, observation: str, info: dict[str, Any]) -> None:
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt is not None else []
        self._live[episode] = _Conversation([*system, {"role": "user", "content": observation}])

    def act(self, episodes: Sequence[int]) -> list[str | EndEpisode]:
        for episode in episodes:
            live = self._live[episode]
            if live.pending_observation is not None:
                live.messages.append({"role": "user", "content": live.pending_observation})
                live.pending_observation = None
        with ThreadPoolExecutor(max_workers=max(1, min(self.max_concurrency, len(episodes)))) as pool:
            return list(pool.map(self._act_one, episodes))

    def _act_one(self, episode: int) -> str | EndEpisode:
        from openai import APIError, BadRequestError

        live = self._live[episode]
        try:
            response = self.client.chat.completions.create(
                model=self.model, messages=live.messages, temperature=self.config.temperature,
                top_p=self.config.top_p, max_tokens=self.config.max_new_tokens, seed=self.config.seed,
            )
        except BadRequestError as error:
            if "context" in str(error).lower() or "too long" in str(error).lower():
                return EndEpisode("context_length")
            logger.warning("episode %s: the API rejected the request: %s", episode, error)
            return EndEpisode("api_error")
        except APIError as error:
            logger.warning("episode %s: API error: %s", episode, error)
            return EndEpisode("api_error")
        reply = (response.choices[0].message.content or "") if response.choices else ""
        action = self.parser.parse(self.config.response_prefix + reply)
        live.messages.append({"role": "assistant", "content": reply})
        live.replies.append(reply)
        live.actions.append(action)
        return action if action is not None else ""

    def observe(self, episode: int, action: str, observation: str, reward: float, info: dict[str, Any]) -> None:
        self._live[episode].pending_observation = observation

    def end(self, episode: int) -> ChatRecord:
        live = self._live.pop(episode)
        return ChatRecord(messages=live.messages, replies=live.replies, actions=live.actions)
