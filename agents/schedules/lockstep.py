"""Lockstep: wait for every world, then ask the agent for every waiting episode in one call."""

from __future__ import annotations

from typing import TYPE_CHECKING

from turngym.agents.base import Agent

if TYPE_CHECKING:
    from turngym.agents.episode_table import EpisodeTable


class Lockstep:
    """Each round, the free worlds start the next tasks, the rollout waits for every reset and step in flight, and
    one ``act`` call answers every episode waiting for its turn (one batched forward pass for an LLM). Each turn
    waits for the slowest world, and the worlds wait while the model generates."""

    wait_all = True  # wait for every world's answer before the agent acts

    def run(self, agent: Agent, table: EpisodeTable) -> None:
        while table.playing:
            table.begin()
            episodes = table.receive(wait_all=self.wait_all)
            if episodes:
                for episode, action in zip(episodes, agent.act(episodes), strict=True):
                    table.act(episode, action)
