"""SWE task instances in the SWE-bench / SWE-Gym format, and how to load them.

A record in the SWE-Gym format loads unchanged::

    {"instance_id": "getmoto__moto-5752", "repo": "getmoto/moto", "base_commit": "b2300f...",
     "problem_statement": "...", "patch": "diff --git ...", "test_patch": "diff --git ...",
     "FAIL_TO_PASS": ["tests/test_x.py::test_a"], "PASS_TO_PASS": [...], "hints_text": "", ...}

``FAIL_TO_PASS`` / ``PASS_TO_PASS`` may be lists (SWE-Gym) or JSON-encoded strings of lists
(SWE-bench). Optional extras understood by turngym:

* ``image`` (or SWE-smith's ``image_name``): the docker image to run in. An image without
  ``repo_path`` must hold the repository at ``/testbed``, as SWE-bench's images do;
* ``test_cmd``: the shell command that runs the tests in the repository; ``{tests}`` becomes the
  shell-quoted ids of FAIL_TO_PASS + PASS_TO_PASS and ``{test_files}`` the files the test patch
  touches. Default: :data:`DEFAULT_TEST_CMD`, pytest through turngym's runner (a verdict the code
  under test cannot forge by printing, configuring pytest or neutering it; docs/worlds/swe.md). Any
  plain pytest call (SWE-bench's ``pytest --no-header -rA --tb=no -p no:cacheprovider``...) is graded
  through the runner, keeping its ``-p`` plugins; any other command is refused unless the record sets
  ``"unprotected_test_cmd": true`` (then its own log decides the grade, which the code under test can write);
* ``repo_path``: a local repository, a directory or an archive (``.tar``, ``.tar.gz``, ``.zip``...),
  relative to the file it was loaded from. No network is needed;
* ``setup_patch``: a patch applied to ``repo_path`` before the episode (turngym's shipped tasks store
  each project once and inject the bug with it);
* ``difficulty``: a label results are broken down by (default: the repository).

Every other field (``created_at``, ``version``, ``environment_setup_commit``...) is kept verbatim
and written back by :meth:`SWEInstance.to_record`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from turngym.envs.swe.actions import SUBMIT
from turngym.envs.swe.test_command import DEFAULT_TEST_CMD, protected_test_command  # noqa: F401 - re-exported
from turngym.envs.tasks import Task, TaskSet, canonical_json, sha256_text

logger = logging.getLogger(__name__)

WORLD = "swe"
REQUIRED = (
    "instance_id", "repo", "base_commit", "problem_statement", "patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS",
)
# DEFAULT_TEST_CMD: pytest through turngym's runner (envs/swe/tools, mounted read-only at /opt/turngym in every
# sandbox): results on a private pipe, tagged with a nonce, canaries, the base commit's pytest configuration.
# With a conda environment: "source /opt/miniconda3/bin/activate testbed && " + this.
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".zip")


def _test_list(value: Any, field_name: str, instance_id: str) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError as error:
            raise ValueError(f"{instance_id}: {field_name} is a string but not a JSON list: {error}") from None
    if value is None:
        value = []
    if not isinstance(value, (list, tuple)) or not all(isinstance(t, str) for t in value):
        raise ValueError(f"{instance_id}: {field_name} must be a list of test ids (or a JSON string of one)")
    return tuple(value)


def is_sha256_hex(text: Any) -> bool:
    """Whether ``text`` is a sha256 digest as lowercase hex (a reference state, as the runner prints them)."""
    return isinstance(text, str) and len(text) == 64 and set(text) <= set("0123456789abcdef")


def _reference_states(value: Any, instance_id: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)) or not all(is_sha256_hex(v) for v in value):
        raise ValueError(f"{instance_id}: reference_states must be a list of sha256 hex digests")
    return tuple(sorted(set(value)))


@dataclass(frozen=True)
class SWEInstance:
    """One SWE task: a repository at a commit, an issue, the gold patch and the tests that judge it."""

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    patch: str
    test_patch: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    image: str | None = None
    test_cmd: str | None = None
    repo_path: str | None = None
    setup_patch: str | None = None
    hints_text: str = ""
    difficulty: str = ""
    unprotected_test_cmd: bool = False
    # sha256 digests of the frozen pairs the gold patch's grading gave strict equality's judge that only its probes
    # refused (a package's honest == coarser than its data): set by `turngym swe synth`'s validation, sent to the
    # runner beside the gold reference tree (docs/worlds/swe.md, "Reference states")
    reference_states: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_record(cls, record: Mapping[str, Any], base_dir: str | Path | None = None) -> SWEInstance:
        """Build an instance from a SWE-bench / SWE-Gym record (``base_dir`` resolves ``repo_path``)."""
        missing = [key for key in REQUIRED if key not in record]
        if missing:
            name = record.get("instance_id", "<no instance_id>")
            raise ValueError(f"SWE record {name} lacks {missing}; SWE-bench/SWE-Gym records carry {list(REQUIRED)}")
        instance_id = str(record["instance_id"])
        fail_to_pass = _test_list(record["FAIL_TO_PASS"], "FAIL_TO_PASS", instance_id)
        if not fail_to_pass:
            raise ValueError(f"{instance_id}: FAIL_TO_PASS is empty; nothing would judge a fix")
        repo_path = record.get("repo_path")
        if repo_path and base_dir is not None and not os.path.isabs(repo_path):
            repo_path = str(Path(base_dir) / repo_path)
        known = {*REQUIRED, "image", "image_name", "test_cmd", "repo_path", "setup_patch", "hints_text", "difficulty",
                 "unprotected_test_cmd", "reference_states"}
        unprotected = record.get("unprotected_test_cmd", False)
        if not isinstance(unprotected, bool):
            raise ValueError(f"{instance_id}: unprotected_test_cmd must be true or false, not {unprotected!r}")  # noqa: TRY004
        protected_test_command(record.get("test_cmd") or None, instance_id, unprotected)  # refused here, at load
        return cls(
            instance_id=instance_id,
            repo=str(record["repo"]),
            base_commit=str(record["base_commit"] or ""),
            problem_statement=str(record["problem_statement"]),
            patch=str(record["patch"] or ""),
            test_patch=str(record["test_patch"] or ""),
            fail_to_pass=fail_to_pass,
            pass_to_pass=_test_list(record["PASS_TO_PASS"], "PASS_TO_PASS", instance_id),
            image=record.get("image") or record.get("image_name") or None,
            test_cmd=record.get("test_cmd") or None,
            repo_path=repo_path or None,
            setup_patch=record.get("setup_patch") or None,
            hints_text=str(record.get("hints_text") or ""),
            difficulty=str(record.get("difficulty") or record["repo"]),
            unprotected_test_cmd=unprotected,
            reference_states=_reference_states(record.get("reference_states"), instance_id),
            extra={k: v for k, v in record.items() if k not in known},
        )

    def to_record(self) -> dict[str, Any]:
        """The SWE-Gym-format record (test lists as lists), extras included."""
        record: dict[str, Any] = {
            **self.extra,
            "instance_id": self.instance_id,
            "repo": self.repo,
            "base_commit": self.base_commit,
            "problem_statement": self.problem_statement,
            "patch": self.patch,
            "test_patch": self.test_patch,
            "FAIL_TO_PASS": list(self.fail_to_pass),
            "PASS_TO_PASS": list(self.pass_to_pass),
            "hints_text": self.hints_text,
            "difficulty": self.difficulty,
        }
        for key in ("image", "test_cmd", "repo_path", "setup_patch"):
            if getattr(self, key) is not None:
                record[key] = getattr(self, key)
        if self.unprotected_test_cmd:
            record["unprotected_test_cmd"] = True
        if self.reference_states:
            record["reference_states"] = list(self.reference_states)
        return record

    @property
    def test_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.fail_to_pass + self.pass_to_pass))

    def to_task(self, split: str) -> Task:
        """A :class:`~turngym.envs.tasks.Task` of the ``swe`` world; its payload is the record itself."""
        record = self.to_record()
        content = {k: v for k, v in record.items() if k != "repo_path"}
        tree = tree_hash(Path(self.repo_path)) if self.repo_path and Path(self.repo_path).is_dir() else ""
        return Task(
            world=WORLD,
            id=self.instance_id,
            split=split,
            difficulty=self.difficulty,
            payload=record,
            content_hash=sha256_text(canonical_json(content) + tree),
        )

    @classmethod
    def from_task(cls, task: Task) -> SWEInstance:
        if task.world != WORLD:
            raise ValueError(f"task {task.id} belongs to world {task.world!r}, not {WORLD!r}")
        return cls.from_record(task.payload)


def tree_hash(directory: Path) -> str:
    """sha256 over the relative paths and contents of every file under ``directory``."""
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(directory).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


# --------------------------------------------------------------------------- loading
def load_instances(source: Any, split: str | None = None) -> list[SWEInstance]:
    """Load instances from a ``.json`` / ``.jsonl`` file, a ``datasets`` split, or records.

    Args:
        source: a path to ``.jsonl`` (one record a line) or ``.json`` (a record or a list of them);
            a :class:`datasets.Dataset` (or a ``DatasetDict`` with ``split``); the name of a Hugging
            Face dataset (``"SWE-Gym/SWE-Gym"``, loaded with ``datasets.load_dataset``: offline this
            needs it in the local cache); or an iterable of dict records.
        split: the split of a ``DatasetDict`` or of a named dataset.
    """
    if isinstance(source, (str, Path)) and (Path(source).suffix in (".json", ".jsonl") or Path(source).exists()):
        path = Path(source)
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".jsonl":
            records = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            data = json.loads(text)
            records = data if isinstance(data, list) else data.get("instances", [data])
        return [SWEInstance.from_record(r, base_dir=path.parent) for r in records]
    if isinstance(source, str):
        import datasets  # heavy: only when a dataset is asked for by name

        source = datasets.load_dataset(source, split=split or "train")
    if isinstance(source, Mapping) and "instance_id" in source:  # one record
        source = [source]
    elif isinstance(source, Mapping):  # a DatasetDict, or any dict of splits
        if split is None:
            raise ValueError(f"this dataset has splits {list(source.keys())}: pass split=...")
        source = source[split]
    return [SWEInstance.from_record(dict(record)) for record in source]


def swe_taskset(instances: Iterable[SWEInstance], name: str, split: str = "train", version: str = "1") -> TaskSet:
    """A task set of the ``swe`` world (all instances in ``split``)."""
    return TaskSet(name=name, version=version, tasks=tuple(i.to_task(split) for i in instances))


def write_jsonl(instances: Iterable[SWEInstance], path: str | Path) -> None:
    """Write instances as SWE-Gym-format JSON lines."""
    lines = [json.dumps(i.to_record(), sort_keys=True) for i in instances]
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------- local repositories
def cache_dir() -> Path:
    root = os.environ.get("TURNGYM_CACHE") or Path.home() / ".cache" / "turngym"
    return Path(root) / "swe-repos"


def local_repo_dir(repo_path: str) -> Path:
    """The directory holding a local repository: the path itself, or an archive extracted once.

    Archives are unpacked (with tarfile's ``data`` filter: no absolute paths, no ``..``, no device
    files) into the cache, keyed by the archive's sha256; a single top-level directory is entered.
    """
    path = Path(repo_path)
    if path.is_dir():
        return path
    if not path.is_file():
        raise FileNotFoundError(
            f"local repository {repo_path} does not exist (repo_path must be a directory or an archive)"
        )
    if not path.name.endswith(ARCHIVE_SUFFIXES):
        raise ValueError(f"{repo_path} is a file but not an archive turngym can unpack ({', '.join(ARCHIVE_SUFFIXES)})")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:24]
    target = cache_dir() / digest
    if not target.is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{digest}-", dir=target.parent))
        try:
            if path.name.endswith(".zip"):
                shutil.unpack_archive(path, staging)
            else:
                shutil.unpack_archive(path, staging, filter="data")
            os.replace(staging, target)  # atomic: concurrent workers never see a half-extracted tree
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            if not target.is_dir():
                raise
    entries = list(target.iterdir())
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else target


def oracle_actions(instance: SWEInstance) -> list[str]:
    """The gold solution as actions: apply the gold patch, then submit (used by the oracle agent)."""
    patch = instance.patch if instance.patch.endswith("\n") else instance.patch + "\n"
    return [f"```bash\ngit apply <<'TURNGYM_GOLD_PATCH'\n{patch}TURNGYM_GOLD_PATCH\n```", f"```bash\n{SUBMIT}\n```"]

