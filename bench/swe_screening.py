"""Screening a package's mutations in one sandbox against several at once (``turngym swe synth --workers``), in one run.

For ``--mutations`` of a package's candidate mutations (the seeded order ``turngym swe synth`` screens them in), the
same screening (:func:`turngym.envs.swe.synth.pipeline.screen`: the covering tests, then the failing files twice)
runs once in one sandbox and once in ``--workers`` sandboxes of the package (threads, rows in the seeded order).
Nothing is written to the synthesis cache: the package's repository and baseline come from it (or are made there
once, as ``turngym swe synth`` would), the rows are only compared.

It prints both wall times, the speed-up (serial / parallel), the peak RSS of this process, the load average
before and after, and whether the verdicts (drop reason, or failing and passing tests) are the same::

    python bench/swe_screening.py cachetools==5.3.3 --mutations 24 --workers 2
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from swe_synth import load  # bench/ is on sys.path when a bench script runs


def verdict(row: dict) -> dict:
    """A row without its log (which holds pytest's timings)."""
    return {k: v for k, v in row.items() if k != "log"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("package", help="NAME==VERSION (or a local directory), as for turngym swe synth")
    parser.add_argument("--mutations", type=int, default=24, help="candidate mutations screened each way")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="sandboxes for the parallel run")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from turngym.envs.swe.synth.pipeline import (
        LAYOUT,
        PackageReport,
        SynthConfig,
        _screenings,
        baseline,
        cache_root,
        candidate_mutations,
        prepare_repo,
        spec_name,
    )
    from turngym.envs.swe.synth.runner import TestSession

    config = SynthConfig(seed=args.seed, max_candidates=args.mutations)
    source, repo = prepare_repo(args.package)
    work = cache_root() / "work" / LAYOUT / source.key
    work.mkdir(parents=True, exist_ok=True)
    report = PackageReport(spec=args.package, name=spec_name(args.package))
    timings: dict[int, float] = {}
    rows: dict[int, list[dict]] = {}
    before = load()
    with TestSession(repo, name=f"bench-{source.key}") as session:
        base = baseline(session, work, report, config)
        if base is None:
            raise SystemExit(f"{args.package} has no usable baseline: {report.reason}")
        mutations, tests_of, _ = candidate_mutations(repo, base, source.key, config)
        for workers in (1, args.workers):
            start = time.perf_counter()
            rows[workers] = list(_screenings(mutations, session, repo, config, base, tests_of, workers, source.key))
            timings[workers] = time.perf_counter() - start
    after = load()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kept = sum(1 for r in rows[1] if "f2p" in r)
    same = [verdict(r) for r in rows[1]] == [verdict(r) for r in rows[args.workers]]
    print(f"{args.package}: {len(mutations)} mutations screened ({kept} kept); {os.cpu_count()} cores; "
          f"load average {before} before, {after} after; peak RSS of this process {peak_mb:.0f} MB")
    print("| screening | wall s | s a mutation | speed-up |")
    print("|---|---:|---:|---:|")
    for workers in (1, args.workers):
        label = "one sandbox" if workers == 1 else f"{workers} sandboxes"
        print(f"| {label} | {timings[workers]:.1f} | {timings[workers] / max(1, len(mutations)):.2f} | "
              f"{timings[1] / timings[workers]:.2f}x |")
    print(f"same verdicts in the same order: {same}")


if __name__ == "__main__":
    main()
