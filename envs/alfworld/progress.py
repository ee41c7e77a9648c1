"""Goal-condition progress of an ALFWorld task, from the engine's PDDL facts.

The dense reward of ``turngym/ALFWorld-v0`` is potential-based, r_t = phi(s_t) - phi(s_{t-1}) with
phi = 1 on a win (:func:`turngym.envs.core.dense_turn_reward`), so it sums to the sparse outcome. Its
potential is the fraction of the task's goal conditions met, in the spirit of ALFRED's
goal-condition success, with each task split into the stages every solution passes through:

===============================  ===============================================  =======
task type                        stages (each one adds 1 / stages)                 stages
===============================  ===============================================  =======
pick_and_place_simple            hold a target object; it is in the receptacle     2
look_at_obj_in_light             hold a target object; the lamp is on beside it    2
pick_{clean,heat,cool}_then_...  hold a target; a target is clean/hot/cool;        3
                                 it is in the receptacle
pick_two_obj_and_place           hold a target; one in the receptacle; hold a      4
                                 second one; both in the receptacle
===============================  ===============================================  =======

The last stage is the win itself (phi = 1, set by the env). Undoing a stage (putting the object
down elsewhere) lowers phi, so it costs what it earned. Why not the planner's distance, as for
TextWorld: a fast-downward search every step takes 0.1-0.3 s even on the task's objects alone
(ten times a step), versus ~0.1 ms here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

STATE_CHANGE = {
    "pick_clean_then_place_in_recep": "isclean",
    "pick_heat_then_place_in_recep": "ishot",
    "pick_cool_then_place_in_recep": "iscool",
}


def _type_name(alfred_type: str) -> str:
    return f"{alfred_type.lower()}type"  # "Apple" -> the PDDL constant "appletype"


def goal_progress(facts: Iterable[Any], targets: Mapping[str, str]) -> float:
    """phi in [0, 1) from textworld ``Proposition`` facts and the task's ``pddl_params`` targets."""
    task_type = targets.get("task_type", "")
    object_type = _type_name(targets.get("object_target", ""))
    parent_type = _type_name(targets.get("parent_target", "") or "none")
    by_name: dict[str, list[tuple[str, ...]]] = {}
    for fact in facts:
        by_name.setdefault(fact.name, []).append(tuple(arg.name for arg in fact.arguments))
    targets_present = {o for o, t in by_name.get("objecttype", ()) if t == object_type}
    parents = {r for r, t in by_name.get("receptacletype", ()) if t == parent_type}
    holding = any(o in targets_present for _, o in by_name.get("holds", ()))
    placed = {o for o, r in by_name.get("inreceptacle", ()) if o in targets_present and r in parents}
    if task_type in ("pick_and_place_simple", "look_at_obj_in_light"):
        return 0.5 if holding else 0.0
    if task_type in STATE_CHANGE:
        changed = any(o in targets_present for (o,) in by_name.get(STATE_CHANGE[task_type], ()))
        return (2 if changed else 1 if holding else 0) / 3
    if task_type == "pick_two_obj_and_place":
        return min(3, 2 * len(placed) + holding) / 4
    return 0.0
