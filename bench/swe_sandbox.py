"""SWE sandbox overhead: every available backend against a bare subprocess, in one run.

For each backend (bwrap, docker when a daemon and the image are there) and for the baseline, a bare
subprocess with no sandbox (a temp copy of the repository and ``bash -c``):

* start + one command: create the sandbox (copy the repository in) and run ``echo ok``, in ms;
  teardown is timed apart;
* test run per task: the task's test command (hidden tests applied) on the untouched repository;
* full grading per task (sandboxes only): restore the test files, apply the test patch, run, parse.

Medians over ``--repeats`` starts and over the shipped tasks. Ratios are against the baseline.

    python bench/swe_sandbox.py                    # all shipped tasks, 20 starts per backend
    python bench/swe_sandbox.py --tasks 5 --repeats 10 --backends bwrap
    python bench/swe_sandbox.py --backends bwrap --against-tools OLD/envs/swe/tools   # grading: this runner vs another

``--against-tools DIR`` grades every task (with ``--set SET [--repo NAME]``, a synthesized set's first ``--tasks``)
with the runner in DIR (e.g. ``git show REV:envs/swe/tools/...`` written to a folder) and with this one, alternating
task by task under bwrap, and prints the ratio of the medians.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from tqdm import tqdm

from turngym.envs.swe import SWEInstance, shipped_instances
from turngym.envs.swe.instances import load_instances, local_repo_dir
from turngym.envs.swe.sandbox import PINNED_ENV, SandboxSpec, backend_available, make_sandbox
from turngym.envs.swe.workspace import UNITTEST_RUNNER, Workspace

RUNNER = Path(__file__).resolve().parent.parent / "envs" / "swe" / "tools" / "unittest_runner.py"


def ms(seconds: list[float]) -> float:
    return 1000 * statistics.median(seconds)


# --------------------------------------------------------------------------- baseline: no sandbox
def bare_start(instance: SWEInstance) -> float:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as directory:
        shutil.copytree(local_repo_dir(instance.repo_path), Path(directory) / "repo")
        subprocess.run(["bash", "-c", "echo ok"], cwd=Path(directory) / "repo", env=PINNED_ENV, check=True,
                       capture_output=True)
    return time.perf_counter() - start


def bare_tests(instance: SWEInstance) -> float:
    with tempfile.TemporaryDirectory() as directory:
        repo = Path(directory) / "repo"
        shutil.copytree(local_repo_dir(instance.repo_path), repo)
        for patch in (instance.setup_patch, instance.test_patch):
            subprocess.run(["git", "apply", "-"], input=patch.encode(), cwd=repo, check=True)
        command = instance.test_cmd.replace(UNITTEST_RUNNER, str(RUNNER))
        command = command.replace("{tests}", " ".join(shlex.quote(t) for t in instance.test_ids))
        start = time.perf_counter()
        subprocess.run(["bash", "-c", command], cwd=repo, env=PINNED_ENV, input=b"nonce\n", check=True,
                       capture_output=True)
        return time.perf_counter() - start


# --------------------------------------------------------------------------- sandboxes
def sandbox_start(backend: str, instance: SWEInstance) -> tuple[float, float]:
    spec = SandboxSpec(repo_dir=local_repo_dir(instance.repo_path), name="bench")
    start = time.perf_counter()
    box = make_sandbox(backend, spec).start()
    assert box.exec("echo ok").output == "ok\n"
    started = time.perf_counter()
    box.close()
    return started - start, time.perf_counter() - started


def sandbox_tests(backend: str, instance: SWEInstance) -> tuple[float, float]:
    spec = SandboxSpec(repo_dir=local_repo_dir(instance.repo_path), name="bench")
    with make_sandbox(backend, spec) as box:
        workspace = Workspace(box, instance, test_timeout=spec.timeouts.test)
        workspace.prepare(timeout=spec.timeouts.create)
        start = time.perf_counter()
        report = workspace.grade()  # a fresh grading sandbox: copy the tree in, apply the hidden tests, run
        grading = time.perf_counter() - start
        assert report.f2p_passed == 0 and report.p2p_failed == 0, report.summary()
        start = time.perf_counter()  # the test command alone, as the baseline runs it
        box.exec(f"cd /testbed && {workspace.test_command()}", stdin=b"nonce\n")
        return time.perf_counter() - start, grading


def set_instances(path: Path, repo: str | None, n: int | None) -> list[SWEInstance]:
    """The first ``n`` tasks of a synthesized set (its folder or ``tasks.jsonl``), of one repository if named."""
    tasks = path / "tasks.jsonl" if path.is_dir() else path
    chosen = [i for i in load_instances(tasks) if repo is None or i.repo.rpartition("/")[2] == repo][:n]
    if not chosen:
        raise SystemExit(f"{tasks}: no task{f' of {repo}' if repo else ''}")
    return chosen


def grading_against(tools: Path, instances: list[SWEInstance], rounds: int) -> None:
    """Full grading per task with another runner (``tools``) and with this one, alternating, under bwrap."""
    from turngym.envs.swe.sandbox import bwrap

    ours = bwrap.TOOLS_DIR
    times: dict[str, list[float]] = {"other": [], "this": []}
    for _ in range(rounds):
        for instance in tqdm(instances, desc="grading, both runners", leave=False):
            for label, folder in (("other", tools), ("this", ours)):
                bwrap.TOOLS_DIR = folder
                try:
                    times[label].append(sandbox_tests("bwrap", instance)[1])
                finally:
                    bwrap.TOOLS_DIR = ours
    other, this = ms(times["other"]), ms(times["this"])
    print(f"full grading per task, {len(instances)} tasks x {rounds}, bwrap, medians")
    print("| runner | full grading per task (ms) | ratio |")
    print("|---|---:|---:|")
    print(f"| {tools} | {other:.1f} | 1.00 |")
    print(f"| this one | {this:.1f} | {this / other:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=None, help="the first N shipped tasks (default: all)")
    parser.add_argument("--repeats", type=int, default=20, help="starts per backend")
    parser.add_argument("--backends", nargs="+", default=["bwrap", "docker"])
    parser.add_argument("--against-tools", type=Path, default=None,
                        help="another runner's folder (unittest_runner.py, integrity.py, ...): grading cost ratio")
    parser.add_argument("--rounds", type=int, default=2, help="with --against-tools: passes over the tasks")
    parser.add_argument("--set", type=Path, default=None,
                        help="with --against-tools: a synthesized set's tasks (turngym swe synth --out) instead")
    parser.add_argument("--repo", default=None, help="with --set: that repository's tasks only (e.g. inflection)")
    args = parser.parse_args()
    if args.set is not None and args.against_tools is None:
        parser.error("--set goes with --against-tools")
    instances = (set_instances(args.set.expanduser(), args.repo, args.tasks) if args.set is not None else
                 [instance for _, instance in shipped_instances()][: args.tasks])
    if args.against_tools is not None:
        if not (args.against_tools / "unittest_runner.py").is_file():
            parser.error(f"--against-tools {args.against_tools}: no unittest_runner.py there")
        grading_against(args.against_tools.resolve(), instances, args.rounds)
        return
    backends = []
    for backend in args.backends:
        problem = backend_available(backend)
        if backend == "docker" and problem is None:
            from turngym.envs.swe.sandbox import docker

            problem = None if docker.image_exists(docker.DEFAULT_IMAGE) else "image not built (make docker-image)"
        if problem:
            print(f"skipping {backend}: {problem}")
        else:
            backends.append(backend)

    starts = [instances[i % len(instances)] for i in range(args.repeats)]
    bare_start_s = [bare_start(i) for i in tqdm(starts, desc="bare starts", leave=False)]
    bare_test_s = [bare_tests(i) for i in tqdm(instances, desc="bare tests", leave=False)]
    rows = [("bare subprocess (baseline)", ms(bare_start_s), None, ms(bare_test_s), None)]
    for backend in backends:
        timed = [sandbox_start(backend, i) for i in tqdm(starts, desc=f"{backend} starts", leave=False)]
        tests = [sandbox_tests(backend, i) for i in tqdm(instances, desc=f"{backend} tests", leave=False)]
        rows.append((backend, ms([t[0] for t in timed]), ms([t[1] for t in timed]), ms([t[0] for t in tests]),
                     ms([t[1] for t in tests])))

    base_start, base_tests = rows[0][1], rows[0][3]
    print(f"{len(instances)} shipped tasks, {args.repeats} starts per backend; medians")
    print("| backend | start + 1 command (ms) | ratio | teardown (ms) | test run per task (ms) | ratio "
          "| full grading per task (ms) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, start, teardown, tests, grading in rows:
        print(f"| {name} | {start:.1f} | {start / base_start:.2f} | {'' if teardown is None else f'{teardown:.1f}'} "
              f"| {tests:.1f} | {tests / base_tests:.2f} | {'' if grading is None else f'{grading:.1f}'} |")


if __name__ == "__main__":
    main()
