"""``turngym/TextWorld-v0``: TextWorld games as a turngym :class:`~turngym.envs.core.TextEnv`.

Rewards (see :mod:`turngym.envs.core` for the shared definitions):

* ``sparse``: 1 on the winning turn, 0 otherwise.
* ``dense``: a potential-based progress reward that sums to exactly 1 on a won episode. Its
  potential is chosen by ``dense_source``:

  - ``"progress"`` (default, every game): phi = 1 - |policy_t| / |policy_0|, where policy_t is
    textworld's winning policy from the current state (``policy_commands``, the quantity its
    ``intermediate_reward`` is computed from). Useful moves earn 1/|policy_0|; moves that undo
    progress cost as much.
  - ``"score"``: phi = score / max_score, the game's own points (tw-simple ``--rewards dense``
    or ``balanced``, tw-cooking). textworld reports the cumulative score; the reward is its delta.

``info["reward_components"]`` carries, on every step, ``score`` (the raw score delta) and textworld's
``intermediate_reward``, next to ``outcome`` and ``progress``.

The engine (frotz, inside jericho) runs in a child process by default (``engine_isolation=
"process"``): a step that does not answer within ``step_timeout`` seconds, or an engine crash,
ends the episode as *truncated* with ``info["truncation_reason"]`` set to ``"engine_timeout"``,
``"engine_crash"`` or ``"engine_error"``, and never hangs the caller. Inside an
:class:`~turngym.envs.vector.EnvPool` worker, ``engine_isolation="none"`` is enough: the pool's worker
is the isolation boundary.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from turngym.envs.core import TextEnv, WorldState
from turngym.envs.engine_client import EngineClient, check_isolation, failure_state
from turngym.envs.isolation import EngineError
from turngym.envs.tasks import Task, TaskSet
from turngym.envs.textworld.engine import TextWorldSession
from turngym.envs.textworld.generation import GameFiles, task_files, textworld_tasks

# Letters, digits and plain punctuation. Anything else (backslashes, non-ASCII, markup) is
# rejected before it reaches frotz, which is known to freeze or crash on odd input.
_PLAIN_COMMAND = re.compile(r"^[A-Za-z0-9 ,.'!?:;()\-]+$")
MAX_COMMAND_CHARS = 200
# Interpreter commands that act outside the game: saving or restoring would carry state across
# episodes (reward hacking), restart/undo desynchronise textworld's state tracking, script writes
# files. None of them is ever part of a solution.
META_COMMANDS = frozenset(
    [
        "save", "restore", "restart", "quit", "q", "script", "unscript", "noscript", "transcript",
        "undo", "again", "g", "oops", "verbose", "brief", "superbrief", "notify", "recording", "replay",
        "version",
    ]
)
# Commands of textworld's own Inform 7 extension (``tw-print``, ``tw-extra-infos``, ``tw-trace-actions``,
# ``restrict commands``): they drive textworld's state tracking, never the game.
FRAMEWORK_WORDS = frozenset(["restrict"])
# Inform reads several commands from one line: clauses split on full stops, other sentence
# punctuation and "then". Each clause is checked (``look. restart`` must not restart).
_CLAUSE_SPLIT = re.compile(r"[.;!?:,()]|\bthen\b", re.IGNORECASE)


class TextWorldEnv(TextEnv):
    """TextWorld games generated offline by textworld's own generator.

    Args:
        config: game config name, e.g. ``"w2-o3-q4"`` (see :mod:`turngym.envs.textworld.generation`).
        split: ``"train"`` (seeds 30001-35000), ``"eval"`` (seeds 1-500) or ``"test"`` (seeds 10001-10500,
            reserved); used when ``tasks`` is not given.
        num_tasks: keep only the first ``num_tasks`` seeds of the split.
        tasks: an explicit task set (overrides ``config``, ``split`` and ``num_tasks``).
        dense_source: ``"progress"`` or ``"score"`` (the potential of dense rewards).
        engine_isolation: ``"process"`` (default) or ``"none"`` (in-process, no timeouts).
        step_timeout: seconds a step may take before the episode is truncated.
        start_timeout: seconds loading and resetting a game may take.
        **kwargs: :class:`~turngym.envs.core.TextEnv` options (reward_mode, action_protocol, max_turns...).
    """

    world_name = "textworld"
    action_hint = "Reply with one short command, such as 'look', 'go north' or 'take key'."

    def __init__(
        self,
        config: str = "w2-o3-q4",
        split: str = "train",
        num_tasks: int | None = None,
        tasks: TaskSet | None = None,
        dense_source: str = "progress",
        engine_isolation: str = "process",
        step_timeout: float = 10.0,
        start_timeout: float = 120.0,
        session_factory: Callable[[], Any] = TextWorldSession,
        **kwargs: Any,
    ) -> None:
        if dense_source not in ("progress", "score"):
            raise ValueError(f"dense_source must be 'progress' or 'score', got {dense_source!r}")
        check_isolation(engine_isolation)
        super().__init__(tasks=tasks if tasks is not None else textworld_tasks(config, split, n=num_tasks), **kwargs)
        self.dense_source = dense_source
        self.engine_isolation = engine_isolation
        self.step_timeout = float(step_timeout)
        self.start_timeout = float(start_timeout)
        self._session_factory = session_factory
        self._engine: Any = None
        self._files: GameFiles | None = None
        self._initial_policy_length = 1
        self._last_report: dict[str, Any] = {}
        self._last_progress = 0.0

    # ----------------------------------------------------------------- world hooks
    def _start(self, task: Task | None) -> WorldState:
        if task is None:
            raise ValueError("TextWorldEnv needs a task; pass tasks=... or options={'task': ...}")
        self._files = task_files(task)
        try:
            self._call("load", str(self._files.game_file), timeout=self.start_timeout)
            report = self._call("reset", timeout=self.start_timeout)
        except EngineError as error:
            return WorldState(text="", failure=str(error))
        self._initial_policy_length = max(len(report["policy_commands"]), 1)
        self._last_report = report
        self._last_progress = 0.0
        state = self._world_state(report, previous_score=report["score"])
        state.progress = 0.0
        state.optimal_length = len(self._files.walkthrough)
        state.extra = {"walkthrough": list(self._files.walkthrough), "objective": self._files.objective}
        return state

    def _execute(self, command: str) -> WorldState:
        try:
            report = self._call("step", command, timeout=self.step_timeout)
        except EngineError as error:
            return failure_state(error, progress=self._last_progress, task_id=self._task_info()["id"])
        state = self._world_state(report, previous_score=self._last_report["score"])
        # Invalid means the game refused it: Inform's parser errors take no move. Executed abbreviations
        # ("n", "i", "x case") are valid though the admissible list spells them out ("go north").
        state.invalid = report["moves"] == self._last_report["moves"] and not (state.won or state.lost)
        self._last_report = report
        self._last_progress = state.progress
        return state

    def _validate_command(self, command: str) -> str | None:
        if len(command) > MAX_COMMAND_CHARS:
            return f"TextWorld commands are at most {MAX_COMMAND_CHARS} characters"
        if not _PLAIN_COMMAND.match(command):
            return "use plain English words (letters, digits and basic punctuation only)"
        for clause in _CLAUSE_SPLIT.split(command.lower()):
            words = clause.split()
            if not words:
                continue
            if words[0].strip("'-") in META_COMMANDS:
                return "interpreter commands (save, restore, restart, undo, quit, script...) are not available"
            if words[0] in FRAMEWORK_WORDS or any(w.startswith("tw-") for w in words):
                return "textworld's framework commands (tw-*, restrict commands) are not available"
        return None

    def _close_world(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    # ----------------------------------------------------------------- helpers
    @property
    def game_files(self) -> GameFiles | None:
        """The current game's files (walkthrough, objective, content hash)."""
        return self._files

    def _call(self, method: str, *args: Any, timeout: float) -> dict[str, Any]:
        if self._engine is None:
            self._engine = EngineClient(self._session_factory, isolation=self.engine_isolation,
                                        name="turngym-textworld")
        return self._engine.call(method, *args, timeout=timeout)

    def _world_state(self, report: dict[str, Any], previous_score: float) -> WorldState:
        return WorldState(
            text=report["feedback"],
            progress=self._progress(report),
            won=report["won"],
            lost=report["lost"],
            admissible_commands=report["admissible_commands"],
            components={
                "score": report["score"] - previous_score,
                "intermediate_reward": report["intermediate_reward"],
            },
        )

    def _progress(self, report: dict[str, Any]) -> float:
        if report["lost"]:
            return self._last_progress  # textworld clears the policy on a loss: no progress either way
        if self.dense_source == "score":
            return report["score"] / report["max_score"] if report["max_score"] else 0.0
        return 1.0 - len(report["policy_commands"]) / self._initial_policy_length
