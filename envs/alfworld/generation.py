"""Offline ALFWorld game generation: ALFRED scenes, ALFWorld's PDDL and grammar, a planner check.

alfworld's game files cannot be downloaded here, but the package ships everything a game is made
of: the PDDL domain (``alfred.pddl``), the text grammar (``alfred.twl2``), the goal templates
(``gen/goal_library.py``), ALFRED's object and receptacle tables (``gen/constants.py``) and the
scene layouts (``gen/layouts``, see :mod:`turngym.envs.alfworld.scenes`). A game is written exactly in the
format ``AlfredTWEnv`` loads:

* ``game.tw-pddl``: JSON with ``pddl_domain``, ``grammar`` (the task sentence filled in, as
  ``alfworld.agents.utils.misc.add_task_to_grammar`` does), ``pddl_problem``, ``solvable`` and
  ``walkthrough``;
* ``traj_data.json``: ALFRED's task record (``task_type``, ``pddl_params``, ``scene``,
  ``turk_annotations``) that ALFWorld's handcoded expert reads.

Object ids follow ALFRED (``"Apple|-01.75|+00.90|+00.39"``, mangled into PDDL names as ALFRED's
``fix_pddl_str_chars`` does), so the game shows "apple 1" through alfworld's own demangler.

A game is kept only if fast-downward (textworld's PDDL planner) finds a plan and that plan wins
when replayed; if a layout fails, the next layout of the same seed is tried. ALFWorld's handcoded
expert is run too, and its winning run is kept as an exploring demonstration. Everything is a function of the seed:
the same seed gives byte-identical files. Each batch of games is generated in a fresh interpreter
(with ``PYTHONHASHSEED=0``): textworld's planner library is process-global state, and the expert
draws from Python's global ``random``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from turngym.envs.alfworld.scenes import LAMP_HOSTS, Scene, constants, load_scene, location_name, scene_numbers
from turngym.envs.tasks import Task, TaskSet, canonical_json, sha256_text
from turngym.envs.textworld.generation import cache_root

logger = logging.getLogger(__name__)

GENERATOR_VERSION = "3"  # bump when this module changes what a spec produces
# ALFWorld's task types, in its own order (alfworld.agents.environment.alfred_tw_env.TASK_TYPES).
TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
PLACE_TYPES = frozenset(TASK_TYPES) - {"look_at_obj_in_light"}
# The appliance a state-change task needs, the affordance its object must have, and the receptacle
# types the object may not be placed in at the end (the appliance itself).
APPLIANCE = {
    "pick_clean_then_place_in_recep": ("SinkBasin", "Cleanable", {"SinkBasin", "BathtubBasin"}),
    "pick_heat_then_place_in_recep": ("Microwave", "Heatable", {"Microwave"}),
    "pick_cool_then_place_in_recep": ("Fridge", "Coolable", {"Fridge"}),
}
# ALFWorld's split sizes: 3553 training games, 140 eval in-distribution, 134 out-of-distribution.
SPLIT_SIZES = {"train": 3553, "eval_seen": 140, "eval_unseen": 134}
SPLITS = tuple(SPLIT_SIZES)
SPLIT_SEED_BASE = {"train": 0, "eval_seen": 100_000, "eval_unseen": 200_000}
SPLIT_SCENES = {"train": "seen", "eval_seen": "seen", "eval_unseen": "unseen"}
# ALFWorld's names for the same splits; "eval" (turngym's held-out split in every world) is eval_seen.
SPLIT_ALIASES = {
    "eval": "eval_seen",
    "valid_seen": "eval_seen",
    "eval_in_distribution": "eval_seen",
    "valid_unseen": "eval_unseen",
    "eval_out_of_distribution": "eval_unseen",
}
MAX_INSTANCES = 3  # ALFRED's MAX_NUM_OF_OBJ_INSTANCES
MAX_LAYOUT_ATTEMPTS = 12
MAX_GOAL_ATTEMPTS = 1000
EXPERT_MAX_STEPS = 150
BATCH_SIZE = 8  # games per generator process
GAME_TIMEOUT = 300.0  # seconds one game may take before its generator process is killed (~2 s is usual)
GENERATOR_MEMORY = 8 * 2**30  # address-space limit of a generator process: a runaway planner fails fast


def alfworld_version() -> str:
    from importlib.metadata import version

    return version("alfworld")


# --------------------------------------------------------------------------- specs and goals
@dataclass(frozen=True)
class GameSpec:
    """What to generate: a task type, a scene pool, a seed, and whether to avoid training goals.

    ``novel_goals`` (the eval_seen recipe) re-draws any goal that occurs in the default train panel,
    so eval_seen plays seen scenes with new goals (and, as every split, new layouts).
    """

    task_type: str
    scenes: str
    seed: int
    novel_goals: bool = False

    def __post_init__(self) -> None:
        if self.task_type not in TASK_TYPES:
            raise ValueError(f"unknown ALFWorld task type {self.task_type!r}; choose from {TASK_TYPES}")
        scene_numbers(self.scenes)  # validates the pool

    @property
    def payload(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> GameSpec:
        novel = bool(payload.get("novel_goals", False))
        return cls(payload["task_type"], payload["scenes"], int(payload["seed"]), novel)


@dataclass(frozen=True)
class Goal:
    """A task: its type, scene and ALFRED ``pddl_params`` targets, plus which sentence template."""

    task_type: str
    scene: int
    object_target: str
    parent_target: str = ""  # empty for look_at_obj_in_light, as in ALFRED
    toggle_target: str = ""  # the lamp, for look_at_obj_in_light only
    template: int = 0

    @property
    def key(self) -> tuple[str, int, str, str, str]:
        """What makes two goals the same, whatever sentence states them."""
        return self.task_type, self.scene, self.object_target, self.parent_target, self.toggle_target

    @property
    def pddl_params(self) -> dict[str, Any]:
        return {
            "object_target": self.object_target,
            "parent_target": self.parent_target,
            "toggle_target": self.toggle_target,
            "mrecep_target": "",
            "object_sliced": False,
        }

    def description(self) -> str:
        """The task sentence, filled in as ALFWorld's ``get_templated_task_desc`` does."""
        from alfworld.gen import goal_library

        templates = goal_library.gdict[self.task_type]["templates"]
        return templates[self.template % len(templates)].format(
            obj=self.object_target.lower(),
            recep=self.parent_target.lower(),
            toggle=self.toggle_target.lower(),
            mrecep="",
        )

    def goal_pddl(self) -> str:
        from alfworld.gen import goal_library

        return goal_library.gdict[self.task_type]["pddl"].format(
            obj=self.object_target, recep=self.parent_target, toggle=self.toggle_target, mrecep=""
        )


def _rng(*entropy: int):
    import numpy as np

    return np.random.default_rng(list(entropy))


def _choice(rng, items: Sequence[Any]) -> Any:
    return items[int(rng.integers(len(items)))]


def goal_options(task_type: str, scene: Scene) -> list[tuple[str, str, str]]:
    """Every (object, parent receptacle, lamp) a task of this type can use in this scene.

    Place tasks need a receptacle type that can hold the object and another receptacle for the
    object to start in; state-change tasks need their appliance and an object with the affordance;
    look tasks need a desk lamp on a receptacle.
    """
    table = constants().VAL_RECEPTACLE_OBJECTS
    if task_type == "look_at_obj_in_light":
        return [(obj, "", lamp) for lamp in scene.lamp_types for obj in scene.object_types]
    allowed_objects = scene.object_types
    excluded: set[str] = set()
    if task_type in APPLIANCE:
        appliance, affordance, excluded = APPLIANCE[task_type]
        if appliance not in scene.receptacle_types:
            return []
        allowed_objects = tuple(o for o in allowed_objects if o in constants().VAL_ACTION_OBJECTS[affordance])
    options = []
    for obj in allowed_objects:
        host_types = {r.type for r in scene.hosts(obj)}
        for parent in sorted(host_types - excluded):
            if obj in table[parent] and host_types - {parent}:
                options.append((obj, parent, ""))
    return options


@cache
def _scenes_for(task_type: str, pool: str) -> tuple[int, ...]:
    return tuple(n for n in scene_numbers(pool) if goal_options(task_type, load_scene(n)))


def sample_goal(spec: GameSpec) -> Goal:
    """The spec's goal: a scene that supports the task type, then a target, drawn from the seed."""
    from alfworld.gen import goal_library

    scenes = _scenes_for(spec.task_type, spec.scenes)
    if not scenes:
        raise ValueError(f"no {spec.scenes} scene supports {spec.task_type}")
    avoid = train_goal_keys() if spec.novel_goals else frozenset()
    pool_id, type_id = ("seen", "unseen").index(spec.scenes), TASK_TYPES.index(spec.task_type)
    for attempt in range(MAX_GOAL_ATTEMPTS):
        rng = _rng(spec.seed, pool_id, type_id, attempt)
        scene = load_scene(_choice(rng, scenes))
        obj, parent, lamp = _choice(rng, goal_options(spec.task_type, scene))
        template = int(rng.integers(len(goal_library.gdict[spec.task_type]["templates"])))
        goal = Goal(spec.task_type, scene.number, obj, parent, lamp, template)
        if goal.key not in avoid:
            return goal
    raise ValueError(f"could not draw a goal for {spec} outside the training goals in {MAX_GOAL_ATTEMPTS} tries")


@cache
def train_goal_keys() -> frozenset[tuple]:
    """The goals of the default train panel (drawing a goal is cheap: no game is generated)."""
    return frozenset(sample_goal(spec).key for spec in split_specs("train"))


def canonical_split(split: str) -> str:
    """``train``, ``eval_seen`` or ``eval_unseen`` (ALFWorld's names and ``eval`` are accepted too)."""
    split = SPLIT_ALIASES.get(split, split)
    if split not in SPLITS:
        raise ValueError(f"ALFWorld splits are {SPLITS} (or 'all'), got {split!r}")
    return split


def split_specs(split: str, n: int | None = None, task_types: Iterable[str] | None = None) -> list[GameSpec]:
    """The specs of a split: seeds from the split's base, task type ``TASK_TYPES[seed % 6]``.

    ``task_types`` keeps only seeds of those types; ``n`` keeps the first n (default: ALFWorld's
    split size). Seeds never overlap between splits, and eval_unseen only uses held-out scenes.
    """
    split = canonical_split(split)
    chosen = set(task_types or TASK_TYPES)
    unknown = chosen - set(TASK_TYPES)
    if unknown:
        raise ValueError(f"unknown ALFWorld task types {sorted(unknown)}; choose from {TASK_TYPES}")
    size = SPLIT_SIZES[split] if n is None else n
    specs: list[GameSpec] = []
    seed = SPLIT_SEED_BASE[split]
    while len(specs) < size:
        task_type = TASK_TYPES[seed % len(TASK_TYPES)]
        if task_type in chosen:
            specs.append(GameSpec(task_type, SPLIT_SCENES[split], seed, novel_goals=split == "eval_seen"))
        seed += 1
    return specs


# --------------------------------------------------------------------------- layouts and PDDL
@dataclass(frozen=True)
class PlacedObject:
    id: str  # ALFRED object id
    type: str
    receptacle: str  # ALFRED id of the receptacle it starts in


@dataclass(frozen=True)
class Layout:
    objects: tuple[PlacedObject, ...]
    start: str  # the agent's start location name


def _object_id(rng, object_type: str, near: tuple[float, float, float], taken: set[str]) -> str:
    """An ALFRED-style id: the type and a position near its receptacle, e.g. Apple|-01.75|+00.90|+00.39."""
    while True:
        x, y, z = (round(v + float(rng.uniform(-0.3, 0.3)), 2) for v in near)
        object_id = f"{object_type}|{x:+06.2f}|{y:+06.2f}|{z:+06.2f}"
        if object_id not in taken:
            taken.add(object_id)
            return object_id


def sample_layout(goal: Goal, seed: int, attempt: int) -> Layout:
    """Place 1-3 instances of every pickable type of the scene (as ALFRED does) and the agent.

    Target objects never start in the goal's receptacle type; pick-two tasks get at least two.
    """
    scene = load_scene(goal.scene)
    rng = _rng(seed, 1000 + attempt)
    taken: set[str] = set()
    placed = []
    for object_type in scene.object_types:
        count = int(rng.integers(1, MAX_INSTANCES + 1))
        hosts = scene.hosts(object_type)
        if object_type == goal.object_target:
            hosts = tuple(r for r in hosts if r.type != goal.parent_target)
            count = max(count, 2 if goal.task_type == "pick_two_obj_and_place" else 1)
        for _ in range(count):
            host = _choice(rng, hosts)
            placed.append(PlacedObject(_object_id(rng, object_type, host.position, taken), object_type, host.id))
    for lamp in scene.lamp_types:
        host = _choice(rng, [r for r in scene.receptacles if r.type in LAMP_HOSTS])
        placed.append(PlacedObject(_object_id(rng, lamp, host.position, taken), lamp, host.id))
    receptacle_locations = {r.location for r in scene.receptacles}
    while True:  # the agent starts in the middle of the room, not at a receptacle
        x, z = _choice(rng, scene.floor)
        start = location_name(x, z, 90 * int(rng.integers(4)), 30)
        if start not in receptacle_locations:
            break
    return Layout(tuple(placed), start)


def pddl_name(text: str) -> str:
    """ALFRED's ``fix_pddl_str_chars``: make object ids PDDL names; '#' stands for the type dash."""
    for old, new in (("-", "_minus_"), ("#", "-"), ("|", "_bar_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_")):
        text = text.replace(old, new)
    return text


def pddl_problem(goal: Goal, layout: Layout, name: str) -> str:
    """An ALFWorld PDDL problem, laid out as ALFWorld's ``initial_state.pddl`` files are."""
    c = constants()
    scene = load_scene(goal.scene)
    locations = {r.id: r.location for r in scene.receptacles}
    rtypes = sorted(c.RECEPTACLES - c.MOVABLE_RECEPTACLES_SET)
    otypes = sorted((set(c.OBJECTS) | c.MOVABLE_RECEPTACLES_SET) - set(rtypes))
    affordances = (
        ("cleanable", "Cleanable"), ("heatable", "Heatable"), ("coolable", "Coolable"), ("sliceable", "Sliceable")
    )
    lamps = set(scene.lamp_types)
    facts = [f"(receptacleType {r.id} {r.type}Type)" for r in scene.receptacles]
    facts += [f"(objectType {o.id} {o.type}Type)" for o in layout.objects]
    present = sorted({o.type for o in layout.objects} - lamps)
    facts += [
        f"(canContain {rtype}Type {otype}Type)"
        for rtype in sorted(scene.receptacle_types)
        for otype in present
        if otype in c.VAL_RECEPTACLE_OBJECTS[rtype]
    ]
    facts += [f"(pickupable {o.id})" for o in layout.objects if o.type not in lamps]
    facts += [f"(isReceptacleObject {o.id})" for o in layout.objects if o.type in c.MOVABLE_RECEPTACLES_SET]
    facts += [f"(openable {r.id})" for r in scene.receptacles if r.type in c.OPENABLE_CLASS_SET]
    facts += [f"(atLocation agent1 {layout.start})"]
    for predicate, affordance in affordances:
        facts += [f"({predicate} {o.id})" for o in layout.objects if o.type in c.VAL_ACTION_OBJECTS[affordance]]
    facts += [f"(toggleable {o.id})" for o in layout.objects if o.type in lamps]
    facts += [f"(inReceptacle {o.id} {o.receptacle})" for o in layout.objects]
    facts += [f"(receptacleAtLocation {r.id} {r.location})" for r in scene.receptacles]
    facts += [f"(objectAtLocation {o.id} {locations[o.receptacle]})" for o in layout.objects]
    objects = ["agent1 # agent"]
    objects += [f"{t}Type # otype" for t in otypes] + [f"{t}Type # rtype" for t in rtypes]
    objects += [f"{o.id} # object" for o in layout.objects] + [f"{r.id} # receptacle" for r in scene.receptacles]
    objects += [f"{loc} # location" for loc in sorted(set(locations.values()) | {layout.start})]
    indent = "\n        "
    text = (
        f"\n(define (problem plan_{name})\n(:domain alfred)\n(:objects{indent}{indent.join(objects)}\n        )\n\n"
        f"(:init{indent}{indent.join(facts)}\n        )\n\n{goal.goal_pddl()}"
    )
    return pddl_name(text)


def game_documents(spec: GameSpec, goal: Goal, layout: Layout) -> tuple[dict, dict]:
    """The ``game.tw-pddl`` and ``traj_data.json`` contents (not yet checked solvable)."""
    from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH

    name = f"turngym_{spec.scenes}_{spec.task_type}_{spec.seed}"
    description = goal.description()
    game = {
        "pddl_domain": Path(ALFRED_PDDL_PATH).read_text(),
        "grammar": Path(ALFRED_TWL2_PATH).read_text().replace("UNKNOWN GOAL", description),
        "pddl_problem": pddl_problem(goal, layout, name),
        "solvable": None,
        "walkthrough": None,
    }
    traj_data = {
        "task_id": name,
        "task_type": goal.task_type,
        "pddl_params": goal.pddl_params,
        "scene": {"scene_num": goal.scene, "floor_plan": f"FloorPlan{goal.scene}", "random_seed": spec.seed},
        "turk_annotations": {"anns": [{"task_desc": description, "high_descs": [], "votes": []}]},
        "turngym": {"generator": GENERATOR_VERSION, "spec": spec.payload, "alfworld": alfworld_version()},
    }
    return game, traj_data


# --------------------------------------------------------------------------- files on disk
@dataclass(frozen=True)
class GameFiles:
    """A game on disk, generated or official, with what turngym knows about it."""

    directory: Path
    task_type: str
    goal: str  # the task sentence
    pddl_params: dict[str, Any]
    content_hash: str
    walkthrough: tuple[str, ...] = ()  # the planner's plan (shortest known solution)
    expert_plan: tuple[str, ...] = ()  # ALFWorld's handcoded expert's winning trajectory
    scene: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def game_file(self) -> Path:
        return self.directory / "game.tw-pddl"

    @property
    def traj_file(self) -> Path:
        return self.directory / "traj_data.json"

    @classmethod
    def load(cls, directory: Path) -> GameFiles:
        meta = json.loads((directory / "meta.json").read_text())
        return cls(
            directory=directory,
            task_type=meta["task_type"],
            goal=meta["goal"],
            pddl_params=meta["pddl_params"],
            content_hash=meta["content_hash"],
            walkthrough=tuple(meta["walkthrough"]),
            expert_plan=tuple(meta["expert_plan"]),
            scene=meta["scene"],
        )


def game_content_hash(game: dict) -> str:
    """sha256 of a game.tw-pddl document in canonical JSON (domain, grammar, problem, walkthrough)."""
    return sha256_text(canonical_json(game))


def game_directory(spec: GameSpec, root: Path | None = None) -> Path:
    root = root or cache_root()
    goals = "novel" if spec.novel_goals else "any"
    version = f"alfworld-{alfworld_version()}-g{GENERATOR_VERSION}"
    return root / version / f"{spec.scenes}-{goals}" / spec.task_type / str(spec.seed)


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, sort_keys=True, indent=1) + "\n")


# --------------------------------------------------------------------------- solving
class Unsolvable(RuntimeError):
    """The planner found no winning plan for this layout."""


def solve(game_file: Path, goal: Goal) -> tuple[list[str], list[str]]:
    """(planner plan, handcoded-expert run) for a game; raise Unsolvable if the planner fails.

    The plan comes from fast-downward through textworld on the task's objects
    (:func:`turngym.envs.alfworld.engine.planner_plan`) and must win when replayed in the full game: that
    is what keeps a game. ALFWorld's ``HandCodedTWAgent`` is then driven as ``alfworld-generate`` drives
    it (``AlfredExpert``); unlike the planner it does not know where objects are, so its winning
    run is a demonstration an agent could imitate. It is empty when the expert does not win
    within its step budget (its pick-two policy gets stuck when the two objects lie in different
    closed receptacles).
    """
    import random

    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredExpert, AlfredInfos
    from textworld.envs import PddlEnv

    from turngym.envs.alfworld.engine import install_speedups, planner_plan

    install_speedups()
    plan = planner_plan(json.loads(game_file.read_text()), {"task_type": goal.task_type, **goal.pddl_params})
    if not plan:
        raise Unsolvable("the planner found no plan")

    env = AlfredDemangler(PddlEnv(textworld.EnvInfos(admissible_commands=True, won=True)), shuffle=False)
    env.load(str(game_file))
    state = env.reset()
    for command in plan:
        if command not in state["admissible_commands"]:
            raise Unsolvable(f"planner step {command!r} is not admissible")
        state, _, _ = env.step(command)
    if not state["won"]:
        raise Unsolvable("the planner's plan does not win")

    random.seed(0)  # the expert breaks loops with random.choice
    infos = textworld.EnvInfos(admissible_commands=True, won=True, extras=["gamefile"])
    expert = AlfredExpert(AlfredInfos(AlfredDemangler(PddlEnv(infos), shuffle=False)), expert_type="handcoded")
    trajectory: list[str] = []
    try:
        expert.load(str(game_file))
        state = expert.reset()
        while not state["won"] and len(trajectory) < EXPERT_MAX_STEPS:
            command = state["extra.expert_plan"][0]
            trajectory.append(command)
            state, _, _ = expert.step(command)
    except Exception as error:  # noqa: BLE001 - the expert fails with assorted exceptions
        logger.info("ALFWorld's handcoded expert failed on %s: %s", game_file, error)
        return plan, []
    return plan, trajectory if state["won"] else []


def _generate_here(spec: GameSpec, root: Path | None) -> GameFiles:
    """Generate one game in this process (the generator subprocess calls this).

    A lock file serialises processes that want the same game (parallel test workers, pool
    workers): the second one waits, then finds the game cached.
    """
    import fcntl

    directory = game_directory(spec, root)
    if (directory / "meta.json").exists():
        return GameFiles.load(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f".{spec.seed}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (directory / "meta.json").exists():
            return GameFiles.load(directory)
        return _generate_unlocked(spec, directory)


def _generate_unlocked(spec: GameSpec, directory: Path) -> GameFiles:
    goal = sample_goal(spec)
    failures = []
    for attempt in range(MAX_LAYOUT_ATTEMPTS):
        scratch = Path(tempfile.mkdtemp(prefix=f".{spec.seed}-", dir=directory.parent))
        try:
            game, traj_data = game_documents(spec, goal, sample_layout(goal, spec.seed, attempt))
            _write_json(scratch / "traj_data.json", traj_data)
            _write_json(scratch / "game.tw-pddl", game)
            try:
                plan, expert = solve(scratch / "game.tw-pddl", goal)
            except Unsolvable as error:
                failures.append(str(error))
                shutil.rmtree(scratch, ignore_errors=True)
                continue
            game.update(solvable=True, walkthrough=plan)
            _write_json(scratch / "game.tw-pddl", game)
            meta = {
                "spec": spec.payload,
                "task_type": goal.task_type,
                "goal": goal.description(),
                "pddl_params": goal.pddl_params,
                "scene": goal.scene,
                "layout_attempt": attempt,
                "walkthrough": plan,
                "expert_plan": expert,
                "content_hash": game_content_hash(game),
                "alfworld": alfworld_version(),
            }
            _write_json(scratch / "meta.json", meta)
            try:
                os.rename(scratch, directory)
            except OSError:  # another process finished the same game first: keep theirs
                shutil.rmtree(scratch, ignore_errors=True)
            return GameFiles.load(directory)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
    raise RuntimeError(f"no solvable layout for {spec} in {MAX_LAYOUT_ATTEMPTS} attempts: {failures}")


def _serve_batch(root: Path | None) -> None:
    """Generator process: one spec per stdin line in, one result per stdout line out."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (GENERATOR_MEMORY, GENERATOR_MEMORY))
    for line in sys.stdin:
        if not line.strip():
            continue
        spec = GameSpec.from_payload(json.loads(line))
        try:
            files = _generate_here(spec, root)
            result = {"spec": spec.payload, "content_hash": files.content_hash}
        except Exception as error:  # noqa: BLE001 - reported to the parent, which raises
            result = {"spec": spec.payload, "error": f"{type(error).__name__}: {error}"}
        print(json.dumps(result), flush=True)


def _run_batch(specs: Sequence[GameSpec], root: Path | None, on_result) -> None:
    import threading

    environment = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    command = [sys.executable, "-m", "turngym.envs.alfworld.generation", str(root or "")]
    with tempfile.TemporaryFile("w+") as stderr, subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True, env=environment
    ) as process:
        watchdog = threading.Timer(GAME_TIMEOUT * len(specs), process.kill)
        watchdog.start()
        try:
            process.stdin.write("".join(json.dumps(s.payload) + "\n" for s in specs))
            process.stdin.close()
            for line in process.stdout:
                on_result(json.loads(line))
            process.wait()
        finally:
            watchdog.cancel()
        stderr.seek(0)
        tail = stderr.read().strip().splitlines()[-1:] or [f"exit code {process.returncode}"]
    if process.returncode != 0:
        raise RuntimeError(f"an ALFWorld generator process failed or ran over {GAME_TIMEOUT:g} s a game: {tail[0]}")


def generate_games(
    specs: Sequence[GameSpec], *, workers: int | None = None, root: Path | None = None, progress: bool = True
) -> dict[GameSpec, str]:
    """Generate every spec's game (cached ones are skipped); return their content hashes."""
    from tqdm.auto import tqdm

    hashes: dict[GameSpec, str] = {}
    missing = []
    for spec in dict.fromkeys(specs):
        directory = game_directory(spec, root)
        if (directory / "meta.json").exists():
            hashes[spec] = GameFiles.load(directory).content_hash
        else:
            missing.append(spec)
    if not missing:
        return hashes
    workers = max(1, min(workers or os.cpu_count() or 1, len(missing)))
    size = min(BATCH_SIZE, math.ceil(len(missing) / workers))
    batches = [missing[i : i + size] for i in range(0, len(missing), size)]
    bar = tqdm(total=len(missing), desc="generating ALFWorld games", unit="game", disable=not progress)
    errors = []

    def record(result: dict[str, Any]) -> None:
        if "error" in result:
            errors.append(f"{result['spec']}: {result['error']}")
        else:
            hashes[GameSpec.from_payload(result["spec"])] = result["content_hash"]
        bar.update()

    # Threads suffice: each batch runs in its own generator process.
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda batch: _run_batch(batch, root, record), batches))
    bar.close()
    if errors:
        raise RuntimeError(f"{len(errors)} ALFWorld game(s) could not be generated:\n  " + "\n  ".join(errors[:10]))
    return hashes


def generate_game(spec: GameSpec, root: Path | None = None) -> GameFiles:
    """The game of ``spec``, generated (in a fresh process) and cached on first use."""
    directory = game_directory(spec, root)
    if not (directory / "meta.json").exists():
        generate_games([spec], workers=1, root=root, progress=False)
    return GameFiles.load(directory)


# --------------------------------------------------------------------------- task sets
def alfworld_tasks(split: str = "train", n: int | None = None, task_types: Iterable[str] | None = None) -> TaskSet:
    """A generated ALFWorld panel: ``train``, ``eval_seen``, ``eval_unseen`` or ``all``.

    Default sizes follow ALFWorld (3553 / 140 / 134). ``n`` keeps the first n games of each split,
    ``task_types`` only those types. Task ids read ``alfworld/<split>/<task type>/<seed>``; the task's
    ``difficulty`` is its task type, so evaluation reports break down by type.
    """
    splits = SPLITS if split == "all" else (canonical_split(split),)
    tasks = []
    types = tuple(task_types) if task_types is not None else None
    for name in splits:
        tasks += [
            Task(
                world="alfworld",
                id=f"alfworld/{name}/{spec.task_type}/{spec.seed}",
                split=name,
                difficulty=spec.task_type,
                payload=spec.payload,
            )
            for spec in split_specs(name, n, types)
        ]
    version = f"alfworld-{alfworld_version()}/gen-{GENERATOR_VERSION}"
    return TaskSet(name=f"alfworld/{split}", version=version, tasks=tuple(tasks))


if __name__ == "__main__":
    _serve_batch(Path(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] else None)
