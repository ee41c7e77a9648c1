"""The ALFRED scenes that ship with alfworld, read from its layout files.

alfworld 0.4.2 ships, for each of ALFRED's 120 floor plans, three files in ``alfworld/gen/layouts``:

* ``FloorPlanN-objects.json``: the object types present in the scene;
* ``FloorPlanN-openable.json``: every receptacle the ALFRED generator could reach, by ALFRED object
  id (``"Cabinet|+00.68|+00.50|-02.20"``), with the pose it is used from (x, z, rotation, horizon);
* ``FloorPlanN-layout.npy``: the reachable (x, z) points of the floor.

A :class:`Scene` turns them into what a text game needs: receptacles with their ALFWorld location
names (``loc|x|z|rotation|horizon`` on the 0.25 m grid, as in ALFWorld's own PDDL problems), the
pickable object types, and the floor points an agent can start from.

Scenes are split as ALFRED's generator splits them (``alfworld.gen.constants``): the 96
``TRAIN_SCENE_NUMBERS`` are *seen* in training, the 24 ``TEST_SCENE_NUMBERS`` (floor plans 1-6,
201-206, 301-306 and 401-406) are held out (*unseen*).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

GRID = 0.25  # metres per grid step of ALFWorld's location names
SCENE_POOLS = ("seen", "unseen")
ROOM_TYPES = {
    "Kitchen": range(1, 31), "LivingRoom": range(201, 231), "Bedroom": range(301, 331), "Bathroom": range(401, 431)
}
# Receptacles a desk lamp stands on (ALFRED places desk lamps on these); `use desklamp` needs one.
LAMP_HOSTS = ("Desk", "Dresser", "Shelf", "SideTable")


def constants():
    """``alfworld.gen.constants``: ALFRED's object, receptacle and affordance tables."""
    import alfworld.gen.constants

    return alfworld.gen.constants


def layouts_dir() -> Path:
    import alfworld.gen

    return Path(alfworld.gen.__path__[0]) / "layouts"


def location_name(x: float, z: float, rotation: float, horizon: float) -> str:
    """ALFWorld's location name for a pose: grid coordinates, rotation in quarter turns, horizon."""
    return f"loc|{round(x / GRID)}|{round(z / GRID)}|{int(rotation) // 90 % 4}|{int(horizon)}"


def receptacle_type(object_id: str) -> str:
    """``"Cabinet|+00.68|+00.50|-02.20"`` -> Cabinet; ``"Sink|...|SinkBasin"`` -> SinkBasin."""
    parts = object_id.split("|")
    return parts[-1] if len(parts) > 4 else parts[0]


@dataclass(frozen=True)
class Receptacle:
    id: str  # ALFRED object id, e.g. "Fridge|-02.10|+00.00|+01.09"
    type: str  # e.g. "Fridge"
    location: str  # e.g. "loc|-4|4|3|0"

    @property
    def position(self) -> tuple[float, float, float]:
        x, y, z = (float(v) for v in self.id.split("|")[1:4])
        return x, y, z


@dataclass(frozen=True)
class Scene:
    number: int
    room: str
    receptacles: tuple[Receptacle, ...]
    object_types: tuple[str, ...]  # pickable types present (ALFRED's receptacle tables list them)
    lamp_types: tuple[str, ...]  # toggleable lamps present
    floor: tuple[tuple[float, float], ...]  # reachable (x, z) points

    @property
    def name(self) -> str:
        return f"FloorPlan{self.number}"

    @property
    def receptacle_types(self) -> frozenset[str]:
        return frozenset(r.type for r in self.receptacles)

    def hosts(self, object_type: str) -> tuple[Receptacle, ...]:
        """The receptacles of this scene that can hold ``object_type`` (ALFRED's table)."""
        table = constants().VAL_RECEPTACLE_OBJECTS
        return tuple(r for r in self.receptacles if object_type in table.get(r.type, ()))


def pickable_types() -> frozenset[str]:
    """Object types ALFRED places in receptacles, without the sliced variants."""
    table = constants().VAL_RECEPTACLE_OBJECTS
    return frozenset(t for types in table.values() for t in types if not t.endswith("Sliced"))


@cache
def load_scene(number: int) -> Scene:
    """Read floor plan ``number`` from alfworld's layout files."""
    import numpy as np

    folder = layouts_dir()
    objects_file = folder / f"FloorPlan{number}-objects.json"
    if not objects_file.exists():
        raise ValueError(f"alfworld ships no layout for FloorPlan{number} (looked in {folder})")
    present = set(json.loads(objects_file.read_text()))
    poses = json.loads((folder / f"FloorPlan{number}-openable.json").read_text())
    movable = constants().MOVABLE_RECEPTACLES_SET
    table = constants().VAL_RECEPTACLE_OBJECTS
    receptacles = tuple(
        Receptacle(object_id, receptacle_type(object_id), location_name(*poses[object_id]))
        for object_id in sorted(poses)
        if receptacle_type(object_id) in table and receptacle_type(object_id) not in movable
    )
    floor = tuple((float(x), float(z)) for x, z in np.load(folder / f"FloorPlan{number}-layout.npy").tolist())
    room = next(name for name, numbers in ROOM_TYPES.items() if number in numbers)
    scene = Scene(
        number=number,
        room=room,
        receptacles=receptacles,
        object_types=(),
        lamp_types=tuple(t for t in ("DeskLamp",) if t in present and any(r.type in LAMP_HOSTS for r in receptacles)),
        floor=floor,
    )
    # Keep the pickable types that at least one receptacle of this scene can hold.
    kept = tuple(sorted(t for t in present & pickable_types() if scene.hosts(t)))
    return Scene(**{**scene.__dict__, "object_types": kept})


def scene_numbers(pool: str) -> tuple[int, ...]:
    """Floor plans of a pool: ``"seen"`` (ALFRED's training scenes) or ``"unseen"`` (held out)."""
    if pool == "seen":
        return tuple(constants().TRAIN_SCENE_NUMBERS)
    if pool == "unseen":
        return tuple(constants().TEST_SCENE_NUMBERS)
    raise ValueError(f"scene pool must be one of {SCENE_POOLS}, got {pool!r}")
