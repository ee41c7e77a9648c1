"""The TextWorld engine session: one textworld environment, answering with plain dicts.

A :class:`TextWorldSession` can live in the caller's process or behind an
:class:`~turngym.envs.isolation.IsolatedEngine` (the default), since it only exchanges strings, numbers
and lists.
"""

from __future__ import annotations

import re
from typing import Any

# What every step needs from textworld: the same request is used by bench/env_throughput.py's
# raw baseline, so the benchmark measures the wrapper and not the cost of extra infos.
REQUESTED_INFOS = {
    "admissible_commands": True,
    "policy_commands": True,
    "intermediate_reward": True,
    "max_score": True,
    "score": True,
    "won": True,
    "lost": True,
    "moves": True,
}

_BANNER_LINE = re.compile(r"^[\s_|\\$/<>]*$")
_PROMPT_AND_STATUS = re.compile(r"\n*>[^\n]*$")  # "> ... -= Room =-0/4" after every answer
_END_OF_GAME_QUESTION = re.compile(r"\n*Would you like to RESTART, RESTORE.*$", re.DOTALL)


def request_infos():
    import textworld

    return textworld.EnvInfos(**REQUESTED_INFOS)


def clean_feedback(text: str) -> str:
    """Strip what the Z-machine prints around an answer: the title banner, the prompt line with
    its status bar, and the interpreter's RESTART/RESTORE question at the end of a game."""
    lines = text.split("\n")
    start = 0
    while start < len(lines) and _BANNER_LINE.match(lines[start]):
        start += 1
    text = "\n".join(lines[start:])
    text = _PROMPT_AND_STATUS.sub("", text)
    text = _END_OF_GAME_QUESTION.sub("", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


class TextWorldSession:
    """Owns one textworld environment and reports its state as a plain dict."""

    def __init__(self) -> None:
        self._env: Any = None
        self._game_file: str | None = None

    def load(self, game_file: str) -> None:
        import textworld

        if self._env is None:
            self._env = textworld.start(game_file, request_infos=request_infos())
        elif game_file != self._game_file:
            self._env.load(game_file)  # reuses the interpreter: much cheaper than textworld.start
        self._game_file = game_file

    def reset(self) -> dict[str, Any]:
        return self._report(self._env.reset())

    def step(self, command: str) -> dict[str, Any]:
        state, _, _ = self._env.step(command)
        return self._report(state)

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
        self._env, self._game_file = None, None

    @staticmethod
    def _report(state: Any) -> dict[str, Any]:
        return {
            "feedback": clean_feedback(state.feedback or ""),
            "score": float(state["score"] or 0),
            "max_score": float(state["max_score"] or 0),
            "won": bool(state["won"]),
            "lost": bool(state["lost"]),
            "admissible_commands": list(state["admissible_commands"] or []),
            "policy_commands": list(state["policy_commands"] or []),
            "intermediate_reward": float(state["intermediate_reward"] or 0),
            "moves": int(state["moves"] or 0),
        }
