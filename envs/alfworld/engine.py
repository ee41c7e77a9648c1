"""The ALFWorld engine session: textworld's PDDL environment with alfworld's demangler.

:class:`ALFWorldSession` runs a game the way ``AlfredTWEnv`` does (``textworld.envs.PddlEnv`` +
``AlfredDemangler``, so objects read "apple 1") and answers with plain dicts, so it can live
behind an :class:`~turngym.envs.isolation.IsolatedEngine`. Besides the text and the admissible commands it
reports the goal-condition progress (:func:`turngym.envs.alfworld.progress.goal_progress`), computed from
the engine's facts on its side of the pipe.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from turngym.envs.alfworld.progress import goal_progress

SPEEDUP_CACHE_SIZE = 16  # translations of 8 games (a game is translated twice), ~3 MB each
_installed = False


def install_speedups() -> None:
    """Memoise three pure, costly steps of textworld's PDDL engine, in this process only.

    Profiling (see docs/benchmarks.md) shows textworld spends most of a step re-parsing the same
    grammar strings with tatsu, and most of a reset re-translating the same PDDL problem with
    fast-downward (twice, at ``load`` and again at ``reset``). The three memoised functions are
    pure functions of their string arguments, and nothing mutates their results (the grammar's
    symbols are deep-copied out of the cache, as each derivation mutates them), so games play
    identically, faster; ``tests/test_alfworld.py`` checks this on whole episodes. The patches
    are module attributes of textworld/fast-downward and stay local to the calling process (the
    isolated engine's, by default).
    """
    global _installed
    if _installed:
        return
    import fast_downward
    from textworld.envs.pddl import textgen
    from textworld.logic import Rule

    translate = functools.lru_cache(maxsize=SPEEDUP_CACHE_SIZE)(fast_downward.pddl2sas)
    fast_downward.pddl2sas = translate

    parse_symbols = textgen._parse_and_convert
    parsed_symbols = functools.lru_cache(maxsize=4096)(lambda text: parse_symbols(text, rule_name="symbols"))

    def parse_and_convert(text: str, rule_name: str = "", **kwargs: Any):
        if rule_name != "symbols" or kwargs.get("trace"):
            return parse_symbols(text, rule_name=rule_name, **kwargs)
        return copy.deepcopy(parsed_symbols(text))

    textgen._parse_and_convert = parse_and_convert
    parse_query = Rule.parse_conjunctive_query.__func__
    Rule.parse_conjunctive_query = classmethod(functools.lru_cache(maxsize=4096)(parse_query))
    _installed = True


_TYPE_FACT = re.compile(r"\((objectType|receptacleType)\s+(\S+)\s+(\S+)\)", re.IGNORECASE)
_IN_RECEPTACLE_FACT = re.compile(r"\(inReceptacle\s+(\S+)\s+(\S+)\)", re.IGNORECASE)
_DECLARATION = re.compile(r"^\s*(\S+)\s+-\s+(object|receptacle)\s*$", re.MULTILINE)
_NAME = re.compile(r"[^\s()]+")
# The receptacle a state-change task needs (as ALFWorld's domain requires it).
APPLIANCES = {
    "pick_clean_then_place_in_recep": "SinkBasin",
    "pick_heat_then_place_in_recep": "Microwave",
    "pick_cool_then_place_in_recep": "Fridge",
}


def planning_problem(problem: str, targets: Mapping[str, str]) -> str:
    """The PDDL problem cut down to the task: its objects, their receptacles, the goal's and the appliance.

    ALFRED's own planner states only hold the task's objects. With a whole kitchen, fast-downward
    (as textworld's ``replan`` configures it) can search for minutes and gigabytes: every closed
    cabinet doubles its state space. Cut down, it takes a fraction of a second. Nothing limits
    capacity in ALFWorld's domain, so the dropped objects and receptacles cannot be needed by a
    plan. ALFWorld problems declare one object or fact per line: a line that names a dropped
    object or receptacle goes. ``targets`` holds the task type and ALFRED's ``pddl_params``.
    """
    object_types = {f"{targets.get(k, '').lower()}type" for k in ("object_target", "toggle_target") if targets.get(k)}
    receptacle_types = {targets.get("parent_target", ""), APPLIANCES.get(targets.get("task_type", ""), "")}
    receptacle_types = {f"{t.lower()}type" for t in receptacle_types if t}
    kinds = {(fact.lower(), name): kind.lower() for fact, name, kind in _TYPE_FACT.findall(problem)}
    kept_objects = {name for (fact, name), kind in kinds.items() if fact == "objecttype" and kind in object_types}
    hosts = {receptacle for obj, receptacle in _IN_RECEPTACLE_FACT.findall(problem) if obj in kept_objects}
    dropped = {
        name
        for (fact, name), kind in kinds.items()
        if (fact == "objecttype" and name not in kept_objects)
        or (fact == "receptacletype" and kind not in receptacle_types and name not in hosts)
    }
    return "\n".join(line for line in problem.split("\n") if dropped.isdisjoint(_NAME.findall(line)))


def planner_plan(game: Mapping[str, Any], targets: Mapping[str, str]) -> list[str]:
    """fast-downward's plan (textworld's ``replan``) for a game.tw-pddl document, in alfworld names.

    It searches :func:`planning_problem`, with every object named as alfworld's ``Demangler``
    names it in the *full* game ("cabinet 7" stays cabinet 7 although cabinets 1-6 were cut), so
    the plan plays unchanged there. Loading a problem replaces the planner library's state in this
    process: reset any other PDDL environment afterwards.
    """
    from types import SimpleNamespace

    import textworld
    from alfworld.agents.utils.misc import Demangler
    from textworld.envs import PddlEnv

    every_id = [name.lower() for name, _ in _DECLARATION.findall(game["pddl_problem"])]
    demangler = Demangler(game_infos={i: SimpleNamespace(id=i) for i in every_id})
    planner = PddlEnv(textworld.EnvInfos(extras=["walkthrough"]))
    planner.load({**game, "pddl_problem": planning_problem(game["pddl_problem"], targets), "walkthrough": None})
    for info in planner._entity_infos.values():  # what AlfredDemangler.load does, with the full game's ids
        if info.id in demangler.obj_names:
            info.name = demangler.demangle_alfred_name(info.id)
    return list(planner.reset()["extra.walkthrough"] or [])


class ALFWorldSession:
    """Owns one alfworld text game and reports its state as a plain dict.

    Args:
        speedups: memoise textworld's parsing and translation (:func:`install_speedups`).
    """

    def __init__(self, speedups: bool = True) -> None:
        self.speedups = speedups
        self._env: Any = None
        self._game_file: str | None = None
        self._targets: dict[str, str] = {}
        self._state: Any = None

    def load(self, game_file: str, targets: dict[str, str]) -> None:
        """Load ``game_file``; ``targets`` are its task type and ALFRED ``pddl_params``."""
        if self._env is None:
            import textworld
            from alfworld.agents.environment.alfred_tw_env import AlfredDemangler
            from textworld.envs import PddlEnv

            if self.speedups:
                install_speedups()
            infos = textworld.EnvInfos(admissible_commands=True, won=True)
            self._env = AlfredDemangler(PddlEnv(infos), shuffle=False)
        if game_file != self._game_file:
            self._env.load(game_file)
            self._game_file = game_file
        self._targets = dict(targets)

    def reset(self, plan: bool = False) -> dict[str, Any]:
        """Start the loaded game; with ``plan``, the report carries the planner's ``plan`` (~0.5 s)."""
        if plan:  # before the reset: planning replaces the planner library's state
            steps = planner_plan(json.loads(Path(self._game_file).read_text()), self._targets)
        self._state = self._env.reset()
        report = self._report()
        if plan:
            report["plan"] = steps
        return report

    def step(self, command: str) -> dict[str, Any]:
        self._state, _, _ = self._env.step(command)
        return self._report()

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
        self._env, self._game_file = None, None

    def _report(self) -> dict[str, Any]:
        state = self._state
        return {
            "feedback": state.feedback or "",
            "won": bool(state["won"]),
            "admissible_commands": list(state["admissible_commands"] or []),
            "progress": goal_progress(state["_facts"], self._targets),
        }


def plain_session() -> ALFWorldSession:
    """A session on textworld exactly as installed (no :func:`install_speedups`)."""
    return ALFWorldSession(speedups=False)
