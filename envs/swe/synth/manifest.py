"""A synthesized set's manifest and splits: what regenerates the same set on any machine, and checks it did.

The manifest (``manifest.json`` next to ``tasks.jsonl``, and the committed copy a set is rebuilt from) holds
everything the set depends on: each package's spec, sdist sha256 and the requirements installed for its tests
(``name==version``), the seed and the pipeline's settings, swesmith's modifier kinds, the grader's sha256, the
split rule, and every task's id, split and content hash (sha256 of its record, ``repo_path`` left out:
``base_commit`` is in it, and it is the git commit of the whole bugged repository, so the hash covers the code
too). ``turngym swe synth --manifest FILE`` synthesizes from it and :func:`compare` says, in one line, how the
new set differs (ids missing or new, hashes changed, splits moved).

Splits are decided by a rule, never by hand after the fact:

* by repository: the packages named in the manifest, ranked by sha256(salt, name), the first
  ``round(repo_share * n)`` reserved as ``test`` and the next as many held out as ``eval`` (none below 3
  packages), or the explicit ``eval_repos`` / ``test_repos`` lists when given. The ranking is over the packages
  asked for, dropped ones included, so a run cut halfway splits its repositories as the whole run does;
* by task, inside the training repositories: a task whose sha256(salt, instance_id) falls below
  ``task_share`` is ``eval_seen`` (held out, from repositories trained on), the rest ``train``. Per task, so a
  set grown with more candidates keeps every earlier task's split.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from turngym.envs.tasks import canonical_json, sha256_text

FORMAT = "turngym-swe-synth-manifest/1"
SPLITS = ("train", "eval_seen", "eval", "test")


@dataclass(frozen=True)
class SplitRule:
    """How a set's tasks are split (the manifest records it)."""

    eval_repos: tuple[str, ...] = ()  # explicit repository lists; empty: ranked by hash
    test_repos: tuple[str, ...] = ()
    repo_share: float = 0.15  # of the repositories, for test and again for eval
    task_share: float = 0.10  # of a training repository's tasks: eval_seen
    salt: str = "turngym-swe-synth-splits-v1"

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> SplitRule:
        data = dict(data or {})
        for key in ("eval_repos", "test_repos"):
            data[key] = tuple(data.get(key, ()))
        return cls(**data)


def _rank(salt: str, name: str) -> str:
    return hashlib.sha256(f"{salt}\0{name}".encode()).hexdigest()


def repo_splits(names: list[str], rule: SplitRule) -> dict[str, str]:
    """``{repository: train | eval | test}`` for the repositories a set is made from."""
    names = sorted(set(names))
    if rule.eval_repos or rule.test_repos:
        overlap = set(rule.eval_repos) & set(rule.test_repos)
        if overlap:
            raise ValueError(f"repositories both eval and test: {sorted(overlap)}")
        return {n: "test" if n in rule.test_repos else "eval" if n in rule.eval_repos else "train" for n in names}
    held = max(1, round(rule.repo_share * len(names))) if len(names) >= 3 else 0
    ranked = sorted(names, key=lambda n: _rank(rule.salt, n))
    test, eval_ = set(ranked[:held]), set(ranked[held : 2 * held])
    return {n: "test" if n in test else "eval" if n in eval_ else "train" for n in names}


def task_split(instance_id: str, repo_split: str, rule: SplitRule) -> str:
    """A task's split: its repository's, or (in a training repository) ``eval_seen`` for a hashed share."""
    if repo_split != "train":
        return repo_split
    return "eval_seen" if int(_rank(rule.salt, instance_id)[:8], 16) / 16**8 < rule.task_share else "train"


def content_hash(record: dict) -> str:
    """sha256 of a task's record as the set holds it (``repo_path``, a machine's path, and ``split`` left out)."""
    return sha256_text(canonical_json({k: v for k, v in record.items() if k not in ("repo_path", "split")}))


def set_hash(tasks: list[dict]) -> str:
    """One hash of a set's task ids, splits and content hashes."""
    rows = sorted((t["instance_id"], t["split"], t["content_hash"]) for t in tasks)
    return sha256_text(canonical_json(rows))


def versions() -> dict[str, str]:
    """The versions that shape the tasks (swesmith's modifiers, libcst's printing)."""
    found = {}
    for name in ("turngym", "swesmith", "libcst"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = ""
    return found


@dataclass
class Manifest:
    """The manifest of a synthesized set (see the module docstring)."""

    config: dict[str, Any]
    splits: dict[str, Any]
    packages: list[dict[str, Any]]
    tasks: list[dict[str, Any]]
    modifiers: list[str] = field(default_factory=list)
    grader_sha256: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    format: str = FORMAT

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["set_sha256"] = set_hash(self.tasks)
        data["counts"] = {s: sum(1 for t in self.tasks if t["split"] == s) for s in SPLITS}
        return data

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n", encoding="utf-8")

    @classmethod
    def read(cls, path: str | Path) -> Manifest:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if data.get("format") != FORMAT:
            raise ValueError(f"{path} is not a synthesized set's manifest (format {data.get('format')!r}, "
                             f"expected {FORMAT!r})")
        names = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in names})

    @property
    def specs(self) -> list[str]:
        return [p["spec"] for p in self.packages]

    def pins(self) -> dict[str, list[str]]:
        """The requirements each package's tests were run with, by spec."""
        return {p["spec"]: list(p.get("requirements", [])) for p in self.packages}

    def sdists(self) -> dict[str, str]:
        return {p["spec"]: p.get("sdist_sha256", "") for p in self.packages}


def compare(expected: Manifest, got: Manifest) -> str:
    """One line: ``same ...`` or what differs between two manifests' tasks (and why packages went missing)."""
    want = {t["instance_id"]: t for t in expected.tasks}
    have = {t["instance_id"]: t for t in got.tasks}
    missing = sorted(set(want) - set(have))
    extra = sorted(set(have) - set(want))
    changed = sorted(i for i in set(want) & set(have) if want[i]["content_hash"] != have[i]["content_hash"])
    moved = sorted(i for i in set(want) & set(have) if want[i]["split"] != have[i]["split"])
    if not (missing or extra or changed or moved):
        return f"same set: {len(have)} tasks, ids, splits and content hashes equal to the manifest's"
    parts = [f"{label} {len(ids)} ({', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''})"
             for label, ids in (("missing", missing), ("new", extra), ("changed", changed), ("moved", moved)) if ids]
    reasons = sorted({f"{p['spec']}: {p['reason']}" for p in got.packages if p.get("status") == "dropped"
                      and any(q["spec"] == p["spec"] and q.get("status") == "ok" for q in expected.packages)})
    line = f"differs from the manifest ({len(want)} tasks): " + "; ".join(parts)
    return line + (f"; packages dropped now: {' | '.join(reasons)}" if reasons else "")
