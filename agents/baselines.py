"""Baseline agents: random (over the admissible commands), oracle (the walkthrough), human."""

from __future__ import annotations

from typing import Any

from turngym.agents.base import EpisodeView, PerEpisodeAgent
from turngym.envs.core import protocol_action


class RandomAgent(PerEpisodeAgent):
    """Picks uniformly among the admissible commands (or ``look`` when the world lists none); under the ``tools``
    protocol among the world's own calls for them (``info["admissible_calls"]``: a world with tools of its own is
    played through those tools, not the default ``command`` tool)."""

    name = "random"

    def choose(self, view: EpisodeView) -> str:
        commands = view.info.get("admissible_calls") or view.info.get("admissible_commands") or []
        if not commands:
            return "look"
        command = commands[int(view.rng.integers(len(commands)))]
        return protocol_action(command, view.info)


class OracleAgent(PerEpisodeAgent):
    """Replays the walkthrough (``info["walkthrough"]`` at reset): the world's expert solution.

    Once the walkthrough is used up it falls back to ``info["policy_commands"]`` if the world
    exposes them, and to ``look`` otherwise.
    """

    name = "oracle"

    def choose(self, view: EpisodeView) -> str:
        walkthrough = view.info.get("walkthrough")
        if walkthrough is None:
            raise ValueError("the oracle needs info['walkthrough'] at reset; this world does not expose one")
        step = len(view.actions)
        if step < len(walkthrough):
            command = walkthrough[step]
        else:
            command = (view.info.get("policy_commands") or ["look"])[0]
        return protocol_action(command, view.info)


class HumanAgent(PerEpisodeAgent):
    """A person at the terminal: prints each observation and reads one command per turn."""

    name = "human"

    def __init__(self, read=input, write=print) -> None:
        super().__init__(seed=0)
        self._read, self._write = read, write

    def begin(self, episode: int, observation: str, info: dict[str, Any]) -> None:
        super().begin(episode, observation, info)
        self._write(observation)

    def choose(self, view: EpisodeView) -> str:
        return self._read("> ")

    def observe(self, episode: int, action: str, observation: str, reward: float, info: dict[str, Any]) -> None:
        super().observe(episode, action, observation, reward, info)
        note = f"  [reward {reward:+.2f}]" if reward else ""
        self._write(f"{observation}{note}")


def make_baseline(name: str, seed: int = 0) -> PerEpisodeAgent:
    agents = {"random": RandomAgent, "oracle": OracleAgent}
    if name not in agents:
        raise ValueError(f"unknown baseline agent {name!r}; choose from {sorted(agents)}")
    return agents[name](seed=seed)
