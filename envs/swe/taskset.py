"""The shipped SWE task set: small, realistic Python bug fixes in six little repositories.

Layout of ``envs/swe/data`` (all text, no binaries)::

    repos/<project>/            a clean project (the fixed state) with its own unittest tests
    tasks/<instance_id>/
        task.json               the SWE-Gym fields (FAIL_TO_PASS, PASS_TO_PASS, problem_statement...),
                                plus split, difficulty (the kind of bug), repo_path and test_cmd
        fix.patch               the gold patch ("patch")
        tests.patch             the hidden tests ("test_patch")
        bug.patch               applied to the clean project to make the base ("setup_patch")

Tests run inside the sandbox with the sandbox's own ``python3`` and the standard library's
``unittest`` (through :mod:`turngym.envs.swe.tools.unittest_runner`, which takes pytest-style ids), so no
test dependency has to be readable by the sandbox user. :func:`validate` checks a task the way
SWE-bench does: the untouched repository fails every FAIL_TO_PASS test and passes every
PASS_TO_PASS test; the gold patch resolves it.

    python -m turngym.envs.swe.taskset --validate          # every shipped task, in the bwrap sandbox
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from turngym.envs.swe.grading import PASSING, GradeReport
from turngym.envs.swe.instances import SWEInstance, local_repo_dir, oracle_actions
from turngym.envs.swe.sandbox import PhaseTimeouts, SandboxLimits, SandboxSpec, make_sandbox, resolve_backend
from turngym.envs.swe.workspace import Workspace
from turngym.envs.tasks import TaskSet

logger = logging.getLogger(__name__)

DATA_DIR = Path(__file__).resolve().parent / "data"
TASKSET_NAME = "turngym-swe"
TASKSET_VERSION = "1"


@lru_cache(maxsize=1)
def shipped_instances() -> tuple[tuple[str, SWEInstance], ...]:
    """``(split, instance)`` for every shipped task, in instance-id order."""
    found = []
    for task_dir in sorted((DATA_DIR / "tasks").iterdir()):
        record = json.loads((task_dir / "task.json").read_text(encoding="utf-8"))
        split = record.pop("split")
        record["patch"] = (task_dir / "fix.patch").read_text(encoding="utf-8")
        record["test_patch"] = (task_dir / "tests.patch").read_text(encoding="utf-8")
        record["setup_patch"] = (task_dir / "bug.patch").read_text(encoding="utf-8")
        found.append((split, SWEInstance.from_record(record, base_dir=task_dir)))
    return tuple(found)


def swe_tasks(split: str | None = "train", n: int | None = None) -> TaskSet:
    """The shipped task set, or one split of it (``"train"`` or ``"eval"``), first ``n`` tasks."""
    tasks = tuple(instance.to_task(task_split) for task_split, instance in shipped_instances()
                  if split is None or task_split == split)
    if not tasks:
        raise KeyError(f"the shipped SWE task set has no split {split!r}; it has 'train' and 'eval'")
    name = TASKSET_NAME if split is None else f"{TASKSET_NAME}:{split}"
    taskset = TaskSet(name=name, version=TASKSET_VERSION, tasks=tasks)
    return taskset.take(n) if n is not None else taskset


@dataclass(frozen=True)
class Validation:
    """The two gradings that validate a task."""

    instance_id: str
    base_commit: str
    before: GradeReport  # the untouched repository
    after: GradeReport  # with the gold patch

    @property
    def problems(self) -> list[str]:
        unfinished = [f"the grading of the {label} did not finish: {report.error}"
                      for label, report in (("untouched repository", self.before), ("gold patch", self.after))
                      if report.error]
        if unfinished:  # its tests' statuses are missing, not failing: no verdict on the task
            return unfinished
        found = []
        passing_before = [t for t in self.before.fail_to_pass if self.before.statuses[t] in PASSING]
        if passing_before:
            found.append(f"FAIL_TO_PASS tests already pass on the untouched repository: {passing_before}")
        if self.before.p2p_failed:
            found.append(f"{self.before.p2p_failed} PASS_TO_PASS tests fail on the untouched repository")
        if not self.after.resolved:
            found.append(f"the gold patch does not resolve it: {self.after.summary()}")
        return found


def validate(instance: SWEInstance, backend: str = "bwrap", workspace_root: Path | None = None,
             test_timeout: float = PhaseTimeouts.test) -> Validation:
    """Grade the untouched repository (in a copy), apply the gold patch, grade again.

    Each grading gets the world's own budget (``PhaseTimeouts.test``) unless ``test_timeout`` says otherwise: a
    tighter one here dropped tasks the world grades fine whenever the machine was busy (a grading that did not
    finish is reported as such by :attr:`Validation.problems`, never as failing tests)."""
    spec = SandboxSpec(repo_dir=local_repo_dir(instance.repo_path) if instance.repo_path else None,
                       image=instance.image, limits=SandboxLimits(), timeouts=PhaseTimeouts(test=test_timeout),
                       name=f"validate-{instance.instance_id}")
    with make_sandbox(resolve_backend(backend), spec, workspace_root=workspace_root) as sandbox:
        workspace = Workspace(sandbox, instance, test_timeout=spec.timeouts.test)
        base_commit = workspace.prepare(timeout=spec.timeouts.create)
        before = workspace.grade()
        applied = sandbox.exec(oracle_actions(instance)[0].removeprefix("```bash\n").removesuffix("\n```"))
        if not applied.ok:
            raise RuntimeError(f"{instance.instance_id}: the gold patch does not apply:\n{applied.output}")
        after = workspace.grade()
    return Validation(instance.instance_id, base_commit, before, after)


def main() -> None:
    parser = argparse.ArgumentParser(description="The shipped SWE task set.")
    parser.add_argument("--validate", action="store_true", help="check every task: base fails, gold resolves")
    parser.add_argument("--sandbox", default="bwrap")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    failures = 0
    for split, instance in shipped_instances():
        line = f"{split:5s} {instance.difficulty:11s} {instance.instance_id}"
        if args.validate:
            problems = validate(instance, args.sandbox).problems
            failures += bool(problems)
            line += "  ok" if not problems else "  FAILED: " + "; ".join(problems)
        logger.info(line)
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
