"""``turngym swe synth``: SWE tasks synthesized from real Python packages, validated in the sandbox."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def cmd_synth(args: argparse.Namespace) -> int:
    import logging

    from turngym.envs.swe.synth import SynthConfig, synthesize

    if not args.verbose:
        logging.getLogger("turngym.envs.swe.synth").setLevel(logging.INFO)
    specs = list(args.packages)
    if args.packages_file:
        specs += [line.split("#", 1)[0].strip() for line in Path(args.packages_file).read_text().splitlines()]
    specs = [s for s in specs if s]
    if not specs:
        raise ValueError("name at least one package (NAME==VERSION) or local directory")
    config = SynthConfig(seed=args.seed, max_candidates=args.max_candidates, max_tasks=args.max_tasks,
                         validate=not args.no_validate, backend=args.sandbox, suite_timeout=args.suite_timeout,
                         max_validations=args.max_validations)
    summary = synthesize(specs, Path(args.out), config, root=Path(args.cache) if args.cache else None,
                         workers=args.workers)
    for package in summary["packages"]:
        if package["status"] != "ok":
            print(f"{package['spec']}: dropped: {package['reason']}")
            continue
        print(f"{package['spec']}: {package['tests_kept']}/{package['tests_collected']} tests kept, "
              f"{package['candidates']} mutations screened, {package['kept_mutations']} kept, "
              f"{package['validated']} validated ({package['seconds'].get('total', 0):.0f} s)")
    print(f"{summary['tasks']} tasks -> {Path(args.out) / 'tasks.jsonl'}")
    print("drops: " + json.dumps(summary["drops"]))
    print(f"grader false alarms: {len(summary['false_alarms'])} of {summary['gold_gradings']} validations; "
          f"seconds per validation: {summary['seconds_per_validation']}")
    return 0


def add(sub) -> None:
    p = sub.add_parser("swe", help="SWE task sets: synthesize tasks from real Python packages")
    swe = p.add_subparsers(dest="swe_command", required=True)
    s = swe.add_parser("synth", help="procedural bugs in real packages' code, checked by their own tests, "
                                     "validated in the sandbox (SWE-bench records)")
    s.add_argument("packages", nargs="*", help="NAME==VERSION from the package registry, or a local directory")
    s.add_argument("--packages-file", help="a file of NAME==VERSION lines (# comments)")
    s.add_argument("--out", required=True, help="folder for tasks.jsonl, report.json and manifest.json")
    s.add_argument("--cache", help="cache root (default $TURNGYM_CACHE/swe-synth or ~/.cache/turngym/swe-synth)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--max-candidates", type=int, default=40, help="mutations screened per package")
    s.add_argument("--max-tasks", type=int, default=0, help="stop a package after this many kept mutations (0: all)")
    s.add_argument("--max-validations", type=int, default=0, help="validate at most this many per package (0: all)")
    s.add_argument("--workers", type=int, default=1,
                   help="validate a package's tasks in this many processes, each with its own sandboxes (default 1)")
    s.add_argument("--no-validate", action="store_true", help="skip the validation through the grader")
    s.add_argument("--sandbox", default="bwrap", choices=("bwrap", "docker", "auto"))
    s.add_argument("--suite-timeout", type=float, default=600.0, help="seconds for one run of a whole test suite")
    s.set_defaults(func=cmd_synth)
