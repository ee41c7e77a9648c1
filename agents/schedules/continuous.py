"""Continuous batching: a turn joins the model's running batch as soon as its world answers.

A finished turn's action goes to its world at once, and the world steps (in its worker) while the model decodes
the others; the pool is polled between decoding iterations. Same episodes as lockstep for the same seeds: each
turn samples from its own generator.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from turngym.agents.base import Agent, ContinuousAgent

if TYPE_CHECKING:
    from turngym.agents.episode_table import EpisodeTable


class Continuous:
    """Continuous batching for a :class:`~turngym.agents.base.ContinuousAgent` (``submit``, ``advance``).

    ``batch_window`` (seconds): a turn whose world has answered waits up to this long for other worlds' answers,
    so they join the model together (fewer, larger generation calls: worth it when a call costs about the same at
    any batch size, as on a GPU); it never waits when no world is stepping. 0: every answer joins at once.
    """

    def __init__(self, batch_window: float = 0.0) -> None:
        if batch_window < 0:
            raise ValueError(f"batch_window must be >= 0 seconds, got {batch_window}")
        self.batch_window = batch_window

    def run(self, agent: Agent, table: EpisodeTable) -> None:
        if not isinstance(agent, ContinuousAgent):  # a ValueError, as for run_episodes' other bad arguments
            raise ValueError(f"continuous batching needs an agent with submit()/advance() (a ContinuousAgent: "  # noqa: TRY004
                             f"the LLM agent); {type(agent).__name__} has none: use lockstep")
        held: list[int] = []  # episodes whose world answered, waiting out the batching window
        held_since = 0.0
        while table.playing:
            table.begin()
            answered = table.receive(wait_all=False, timeout=self.timeout(agent, held, held_since))
            if not held:
                held_since = time.monotonic()
            held += answered
            window_open = table.stepping and time.monotonic() < held_since + self.batch_window
            ready, held = ([], held) if window_open else (held, [])
            for episode, action in agent.submit(ready) + agent.advance():
                table.act(episode, action)

    def timeout(self, agent: ContinuousAgent, held: list[int], held_since: float) -> float | None:
        """Poll while the model decodes; wait out what is left of a held turn's window; else block for the next
        answer."""
        if agent.decoding:
            return 0.0
        if held:
            return max(0.0, held_since + self.batch_window - time.monotonic())
        return None
