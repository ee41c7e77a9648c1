"""The grading runner on a real package's own tests, on the untouched code: its false alarms and its cost.

For a package the synthesis has prepared (``turngym swe synth`` keeps its repository and the tests its baseline
kept, each passed twice under plain pytest, in the cache), the runner grades every kept test on a copy of the
untouched repository, outside the sandbox, twice in one run: as ``turngym swe synth`` and the world run it, and
with ``TURNGYM_PRISTINE`` naming the repository's own tree (what the grading script extracts from the base
commit; a runner without pristine-tree support ignores it, and both lines then agree). Any test that does not pass
is a disagreement with pytest on the package's own code: a grader false alarm. It prints the status counts, the
tests that did not pass, each run's seconds and their ratio, and writes every status to ``--out``::

    python bench/swe_grader_on_gold.py boltons-24.0.0 --out /tmp/boltons.json
    python bench/swe_grader_on_gold.py more-itertools-10.2.0 --only plain
    python bench/swe_grader_on_gold.py sqlparse-0.5.0 --only pristine --layout v2   # an older preparation's cache
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from turngym.envs.swe.grading import parse_test_log
from turngym.envs.swe.sandbox.bwrap import TOOLS_DIR
from turngym.envs.swe.synth.source import LAYOUT, cache_root

NONCE = "b3nchn0nce"


def kept_tests(package: str, root: Path, layout: str = LAYOUT) -> tuple[Path, list[str], list[str]]:
    """The package's repository in the cache, the test ids its baseline kept and the package's support files (the
    modules its test classes take code from, which a task restores and the runner trusts: ``--support``)."""
    repository = root / "repos" / layout / package
    baseline = root / "work" / layout / package / "baseline.json"
    if not repository.is_dir() or not baseline.is_file():
        raise SystemExit(f"{package}: not in the synthesis cache ({repository}, {baseline}); run `turngym swe synth "
                         f"{package.rsplit('-', 1)[0]}=={package.rsplit('-', 1)[-1]}` first")
    data = json.loads(baseline.read_text())
    return repository, data["kept"], list(data.get("support", ()))


def grade(repository: Path, ids: list[str], pristine: Path | None, support: list[str] = ()) -> dict:
    """Every id through the runner (``--pytest``) on a fresh copy of ``repository``: statuses and seconds."""
    with tempfile.TemporaryDirectory(prefix="turngym-gold-") as scratch:
        copy = Path(scratch) / "repo"
        shutil.copytree(repository, copy, symlinks=True)
        env = {k: v for k, v in os.environ.items() if k != "TURNGYM_PRISTINE"}
        if pristine is not None:
            env["TURNGYM_PRISTINE"] = str(pristine)
        start = time.monotonic()
        flags = [flag for path in support for flag in ("--support", path)]
        done = subprocess.run(["/usr/bin/python3", "-I", "-B", str(TOOLS_DIR / "unittest_runner.py"), *flags,
                               "--pytest", *ids],
                              cwd=copy, input=f"{NONCE}\n".encode(), capture_output=True, env=env, check=False)
        seconds = time.monotonic() - start
    statuses = parse_test_log(done.stdout.decode(errors="replace"), ids, prefix=NONCE)
    counts: dict[str, int] = {}
    for status in statuses.values():
        counts[status] = counts.get(status, 0) + 1
    return {"seconds": round(seconds, 1), "counts": counts, "statuses": statuses,
            "not_passed": sorted(t for t, s in statuses.items() if s != "PASSED")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", help="name-version as in the synthesis cache, e.g. boltons-24.0.0")
    parser.add_argument("--only", choices=("plain", "pristine"), help="one of the two runs")
    parser.add_argument("--limit", type=int, default=0, help="the first N kept tests only (0: all)")
    parser.add_argument("--out", type=Path, help="write every status here (JSON)")
    parser.add_argument("--layout", default=LAYOUT, help=f"the cache's preparation layout (default {LAYOUT}, this "
                        "version's; an older one's repositories and baselines, while they are still cached)")
    args = parser.parse_args()
    repository, ids, support = kept_tests(args.package, cache_root(), args.layout)
    ids = ids[: args.limit] if args.limit else ids
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").is_file() else "?"
    print(f"{args.package}: {len(ids)} kept tests; load average before: {load}")
    runs = {}
    for label, pristine in (("plain", None), ("pristine", repository)):
        if args.only and args.only != label:
            continue
        runs[label] = grade(repository, ids, pristine, support)
        row = runs[label]
        print(f"  {label:8s} {row['seconds']:7.1f} s  {row['counts']}  not passed: {row['not_passed'] or 'none'}")
    if len(runs) == 2:
        print(f"  ratio pristine / plain: {runs['pristine']['seconds'] / runs['plain']['seconds']:.2f}x")
    if args.out:
        args.out.write_text(json.dumps({"package": args.package, "tests": len(ids), "load_before": load,
                                        "command": f"python bench/swe_grader_on_gold.py {args.package}", **runs},
                                       indent=1))


if __name__ == "__main__":
    main()
