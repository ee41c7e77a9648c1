"""``turngym/ALFWorld-v0``: ALFWorld's text games on alfworld's own engine, as a :class:`~turngym.envs.core.TextEnv`.

Games come from the offline generator (:mod:`turngym.envs.alfworld.generation`, the default) or from the
official ALFWorld data (``source="official"``, :mod:`turngym.envs.alfworld.official`). Both play through
textworld's PDDL environment with alfworld's demangler, exactly as ``AlfredTWEnv`` plays them.

Rewards (shared definitions in :mod:`turngym.envs.core`):

* ``sparse``: 1 on the winning turn, 0 otherwise (ALFWorld's own reward).
* ``dense``: potential-based goal-condition progress (:mod:`turngym.envs.alfworld.progress`), which sums to
  exactly 1 on a won episode. ``info["reward_components"]["goal_conditions"]`` carries the potential.

``info`` at reset carries ``walkthrough`` (the planner's plan, which the oracle replays),
``expert_plan`` (ALFWorld's handcoded expert's winning run, which explores as an agent must: SFT
data that does not assume knowing where things are; empty where the expert fails), ``objective``,
``task_type`` and ``scene``; ``info["task"]["difficulty"]`` is the task type, so evaluations break
down by type. The turn limit defaults to twice the handcoded expert's run, capped at the 50 steps
ALFWorld's papers allow (50 where the expert failed): turngym's budget is twice the expert's
length in every world, and here the expert that explores, not the planner that knows where
everything is, measures what an agent needs.

Commands are matched to the admissible ones ignoring case and spacing ("Go to  Fridge 1" plays
"go to fridge 1"); anything else is an invalid action, answered by the engine ("Nothing happens.")
and never raised. As for TextWorld, the engine runs in a child process with per-call timeouts
(``engine_isolation="process"``); a hang or crash truncates the episode.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from turngym.envs.alfworld.engine import ALFWorldSession, plain_session
from turngym.envs.alfworld.games import task_files
from turngym.envs.alfworld.generation import GameFiles, alfworld_tasks
from turngym.envs.alfworld.official import is_official, official_tasks, save_plan
from turngym.envs.core import TextEnv, WorldState, normalise_command
from turngym.envs.engine_client import EngineClient, check_isolation, failure_state
from turngym.envs.isolation import EngineError
from turngym.envs.tasks import Task, TaskSet

MAX_COMMAND_CHARS = 200  # ALFWorld's longest commands are about 50 characters
ALFWORLD_STEP_LIMIT = 50  # ALFWorld's max_nb_steps_per_episode
SOURCES = ("generated", "official")


class ALFWorldEnv(TextEnv):
    """ALFWorld household tasks: six task types in ALFRED's 120 scenes.

    Args:
        split: ``"train"``, ``"eval_seen"`` (seen scenes, new layouts and goals) or
            ``"eval_unseen"`` (held-out scenes); used when ``tasks`` is not given.
        num_tasks: keep the first ``num_tasks`` games of the split (default: ALFWorld's sizes,
            3553 / 140 / 134 for generated games; every game for official data).
        task_types: keep only these task types.
        source: ``"generated"`` (offline generator) or ``"official"`` (ALFWorld's data).
        data_dir: the official data folder (holding ``json_2.1.1/``); default ``$ALFWORLD_DATA``.
        tasks: an explicit task set (overrides split, num_tasks, task_types and source).
        engine_isolation: ``"process"`` (default) or ``"none"`` (in-process, no timeouts).
        step_timeout: seconds a step may take before the episode is truncated.
        start_timeout: seconds loading and resetting a game may take (a first reset of an
            official game also runs the planner).
        speedups: memoise textworld's parsing and PDDL translation in the engine process
            (:func:`turngym.envs.alfworld.engine.install_speedups`); games play identically.
        **kwargs: :class:`~turngym.envs.core.TextEnv` options (reward_mode, action_protocol, max_turns...).
    """

    world_name = "alfworld"
    action_hint = "Reply with one command, such as 'go to fridge 1', 'take apple 1 from countertop 1' or 'look'."

    def __init__(
        self,
        split: str = "train",
        num_tasks: int | None = None,
        task_types: Iterable[str] | None = None,
        source: str = "generated",
        data_dir: str | Path | None = None,
        tasks: TaskSet | None = None,
        engine_isolation: str = "process",
        step_timeout: float = 10.0,
        start_timeout: float = 120.0,
        speedups: bool = True,
        session_factory: Callable[[], Any] = ALFWorldSession,
        **kwargs: Any,
    ) -> None:
        if source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
        check_isolation(engine_isolation)
        if tasks is None:
            if source == "official":
                tasks = official_tasks(split, data_dir, n=num_tasks, task_types=task_types)
            else:
                tasks = alfworld_tasks(split, n=num_tasks, task_types=task_types)
        super().__init__(tasks=tasks, **kwargs)
        self.data_dir = data_dir
        self.engine_isolation = engine_isolation
        self.step_timeout = float(step_timeout)
        self.start_timeout = float(start_timeout)
        self.speedups = speedups
        plain = not speedups and session_factory is ALFWorldSession
        self._session_factory = plain_session if plain else session_factory
        self._engine: Any = None
        self._files: GameFiles | None = None
        self._canonical: dict[str, str] = {}
        self._expert_length = 0
        self._last_progress = 0.0

    # ----------------------------------------------------------------- world hooks
    def _start(self, task: Task | None) -> WorldState:
        if task is None:
            raise ValueError("ALFWorldEnv needs a task; pass tasks=... or options={'task': ...}")
        self._files = files = task_files(task, self.data_dir)
        targets = {k: files.pddl_params.get(k) or "" for k in ("object_target", "parent_target", "toggle_target")}
        targets["task_type"] = files.task_type
        try:
            self._call("load", str(files.game_file.resolve()), targets, timeout=self.start_timeout)
            report = self._call("reset", not files.walkthrough, timeout=self.start_timeout)
        except EngineError as error:
            return WorldState(text="", failure=str(error))
        walkthrough = list(files.walkthrough) or report.get("plan") or []
        if not walkthrough:
            return WorldState(text="", failure=f"the planner found no solution for {task.id}")
        if not files.walkthrough and is_official(task):
            save_plan(files, walkthrough)
        self._expert_length = len(files.expert_plan)
        self._last_progress = 0.0
        state = self._world_state(report)
        state.progress = 0.0
        state.optimal_length = len(walkthrough)
        state.extra = {
            "walkthrough": walkthrough,
            "expert_plan": list(files.expert_plan),
            "objective": files.goal,
            "task_type": files.task_type,
            "scene": files.scene,
        }
        return state

    def _execute(self, command: str) -> WorldState:
        # The engine matches commands exactly; play the admissible spelling of a command.
        command = self._canonical.get(normalise_command(command), command)
        try:
            report = self._call("step", command, timeout=self.step_timeout)
        except EngineError as error:
            return failure_state(error, progress=self._last_progress, task_id=self._task_info()["id"])
        state = self._world_state(report)
        self._last_progress = state.progress
        return state

    def _validate_command(self, command: str) -> str | None:
        if len(command) > MAX_COMMAND_CHARS:
            return f"ALFWorld commands are at most {MAX_COMMAND_CHARS} characters"
        return None

    def _close_world(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def default_max_turns(self, optimal_length: int | None) -> int:
        """min(50, 2x the handcoded expert's run), 50 without one; never below 2x the plan."""
        budget = min(ALFWORLD_STEP_LIMIT, 2 * self._expert_length) if self._expert_length else ALFWORLD_STEP_LIMIT
        return max(budget, super().default_max_turns(optimal_length) if optimal_length else 0)

    # ----------------------------------------------------------------- helpers
    @property
    def game_files(self) -> GameFiles | None:
        """The current game's files (walkthrough, expert plan, goal, content hash)."""
        return self._files

    def _call(self, method: str, *args: Any, timeout: float) -> dict[str, Any]:
        if self._engine is None:
            self._engine = EngineClient(self._session_factory, isolation=self.engine_isolation, name="turngym-alfworld")
        return self._engine.call(method, *args, timeout=timeout)

    def _world_state(self, report: dict[str, Any]) -> WorldState:
        self._canonical = {normalise_command(c): c for c in report["admissible_commands"]}
        return WorldState(
            text=report["feedback"],
            progress=report["progress"],
            won=report["won"],
            admissible_commands=report["admissible_commands"],
            components={"goal_conditions": report["progress"]},
        )
