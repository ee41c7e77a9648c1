"""Tasks and task sets: deterministic names, versions, content hashes and disjoint splits.

A :class:`Task` is one playable instance of a world (a TextWorld game, an ALFWorld game, a SWE
instance). A :class:`TaskSet` is a named, versioned collection of tasks with a fingerprint that
changes whenever any task, the version or the name changes, so an evaluation result can always be
traced back to the exact panel it was measured on.

Splits must never share a task. Overlap is checked by identity (the world and its payload, split
excluded) and, once tasks are materialised, by content hash: two seeds that happen to produce the
same game are caught too.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


def cache_root() -> Path:
    """``$TURNGYM_CACHE`` or ``~/.cache/turngym``: generated games and converted models live here,
    outside the repository."""
    return Path(os.environ.get("TURNGYM_CACHE", Path.home() / ".cache" / "turngym")).expanduser()

class SplitOverlapError(ValueError):
    """Raised when two splits that must be disjoint share a task."""


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: the input of every hash in turngym."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stable_seed(*parts: object) -> int:
    """A 63-bit seed from any values, identical across processes (unlike ``hash``)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


@dataclass(frozen=True)
class Task:
    """One playable instance of a world.

    Attributes:
        world: the world family, e.g. ``"textworld"``.
        id: a stable, human-readable name, e.g. ``"textworld/w2-o3-q4/30001"``.
        split: ``"train"``, ``"eval"``, or any name a task set defines.
        difficulty: a label used to break results down (a TextWorld config, an ALFWorld task type).
        payload: JSON-serialisable data the world needs to build the instance.
        content_hash: sha256 of the materialised instance (game file, repository...), when known.
    """

    world: str
    id: str
    split: str
    difficulty: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    content_hash: str | None = None

    @property
    def key(self) -> str:
        """Identity of the instance regardless of which split lists it."""
        return sha256_text(canonical_json({"world": self.world, "payload": dict(self.payload)}))

    def info(self) -> dict[str, str]:
        """The ``info["task"]`` entry every env step carries."""
        return {"id": self.id, "split": self.split, "difficulty": self.difficulty}

    def to_dict(self) -> dict[str, Any]:
        return {
            "world": self.world,
            "id": self.id,
            "split": self.split,
            "difficulty": self.difficulty,
            "payload": dict(self.payload),
            "content_hash": self.content_hash,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Task:
        return cls(
            world=data["world"],
            id=data["id"],
            split=data["split"],
            difficulty=data.get("difficulty", ""),
            payload=dict(data.get("payload", {})),
            content_hash=data.get("content_hash"),
        )


@dataclass(frozen=True)
class TaskSet(Sequence[Task]):
    """A named, versioned, ordered collection of tasks whose splits are checked disjoint.

    ``fingerprint`` hashes the name, the version and every task (content hashes included), so two
    runs that report the same fingerprint were evaluated on the same panel.
    """

    name: str
    version: str
    tasks: tuple[Task, ...]

    def __post_init__(self) -> None:
        duplicates = sorted(i for i, n in Counter(task.id for task in self.tasks).items() if n > 1)
        if duplicates:
            raise ValueError(f"task set {self.name!r} lists these task ids twice: {duplicates[:10]}")
        by_split: dict[str, list[Task]] = {}
        for task in self.tasks:
            by_split.setdefault(task.split, []).append(task)
        assert_disjoint(*by_split.values())

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    def __getitem__(self, index):  # type: ignore[override]
        return self.tasks[index]

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(task.split for task in self.tasks))

    def split(self, name: str) -> TaskSet:
        chosen = tuple(task for task in self.tasks if task.split == name)
        if not chosen:
            raise KeyError(f"task set {self.name!r} has no split {name!r}; it has {self.splits}")
        return TaskSet(name=f"{self.name}:{name}", version=self.version, tasks=chosen)

    def by_id(self, task_id: str) -> Task:
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(f"task {task_id!r} is not in task set {self.name!r}")

    def take(self, n: int | None, start: int = 0) -> TaskSet:
        """The ``n`` tasks from the ``start``-th on (None: all the rest; task sets are ordered, so this is
        deterministic)."""
        end = len(self.tasks) if n is None else start + n
        where = f"{start}:{end}" if start else f":{end}"
        return TaskSet(name=f"{self.name}[{where}]", version=self.version, tasks=self.tasks[start:end])

    def sample(self, rng: np.random.Generator) -> Task:
        return self.tasks[int(rng.integers(len(self.tasks)))]

    @property
    def fingerprint(self) -> str:
        body = {"name": self.name, "version": self.version, "tasks": [t.to_dict() for t in self.tasks]}
        return sha256_text(canonical_json(body))[:16]

    def with_content_hashes(self, hashes: Mapping[str, str]) -> TaskSet:
        """A copy whose tasks carry the given content hashes (by task id)."""
        tasks = tuple(
            Task(**{**task.to_dict(), "content_hash": hashes.get(task.id, task.content_hash)})
            for task in self.tasks
        )
        return TaskSet(name=self.name, version=self.version, tasks=tasks)

    def to_jsonl(self) -> str:
        header = {"name": self.name, "version": self.version, "fingerprint": self.fingerprint}
        lines = [canonical_json({"taskset": header})]
        lines += [canonical_json(task.to_dict()) for task in self.tasks]
        return "\n".join(lines) + "\n"

    @classmethod
    def from_jsonl(cls, text: str) -> TaskSet:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        if not rows or "taskset" not in rows[0]:
            raise ValueError("a task-set file starts with a {'taskset': {...}} header line")
        header = rows[0]["taskset"]
        tasks = cls(header["name"], header["version"], tuple(Task.from_dict(r) for r in rows[1:]))
        if header.get("fingerprint") and header["fingerprint"] != tasks.fingerprint:
            raise ValueError(
                f"task-set file {header['name']!r} was edited: its fingerprint {header['fingerprint']} "
                f"does not match its contents ({tasks.fingerprint})"
            )
        return tasks


def split_overlaps(*groups: Iterable[Task]) -> list[tuple[Task, str]]:
    """Each task of a later group that is a task of an earlier one, by identity or by content hash, with a
    line naming both (empty when the groups are disjoint)."""
    seen_keys: dict[str, str] = {}
    seen_content: dict[str, str] = {}
    overlaps: list[tuple[Task, str]] = []
    for group in groups:
        group_keys: dict[str, str] = {}
        group_content: dict[str, str] = {}
        for task in group:
            if task.key in seen_keys:
                overlaps.append((task, f"{task.id} ({task.split}) is the same task as {seen_keys[task.key]}"))
            if task.content_hash and task.content_hash in seen_content:
                overlaps.append(
                    (task, f"{task.id} ({task.split}) has the same content as {seen_content[task.content_hash]}"))
            group_keys[task.key] = f"{task.id} ({task.split})"
            if task.content_hash:
                group_content[task.content_hash] = f"{task.id} ({task.split})"
        seen_keys.update(group_keys)
        seen_content.update(group_content)
    return overlaps


def assert_disjoint(*groups: Iterable[Task], hint: str = "") -> None:
    """Fail loudly if any two groups share a task, by identity or by content hash (:func:`split_overlaps`)."""
    overlaps = [line for _, line in split_overlaps(*groups)]
    if overlaps:
        shown = "\n  ".join(overlaps[:20])
        more = f"\n  ... and {len(overlaps) - 20} more" if len(overlaps) > 20 else ""
        raise SplitOverlapError(
            f"{len(overlaps)} task(s) appear in more than one split:\n  {shown}{more}\n"
            "Evaluation on such splits would measure memorisation. Choose disjoint seeds or tasks." + hint
        )
