"""``turngym swe synth``: SWE tasks synthesized from real Python packages, validated in the sandbox.

    turngym swe synth cachetools==5.3.3 toolz==0.12.1 --out DIR           # packages (or local directories)
    turngym swe synth --packages-file recipes/configs/swe-synth-packages.txt --out DIR
    turngym swe synth --manifest recipes/configs/swe-synth-scale-v1.manifest.json --out DIR   # regenerate + check
    turngym swe report DIR                                                  # a set's report.json as tables
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _specs(args: argparse.Namespace) -> list[str]:
    specs = list(args.packages)
    if args.packages_file:
        specs += [line.split("#", 1)[0].strip() for line in Path(args.packages_file).read_text().splitlines()]
    specs = [s for s in specs if s]
    if not specs:
        raise ValueError("name at least one package (NAME==VERSION) or local directory, or give --manifest")
    return specs


def _names(value: str | None) -> tuple[str, ...]:
    return tuple(n.strip() for n in (value or "").split(",") if n.strip())


def _print_summary(summary: dict, out: Path) -> None:
    for package in summary["packages"]:
        if package["status"] != "ok":
            print(f"{package['spec']}: dropped: {package['reason']}")
            continue
        print(f"{package['spec']}: {package['tests_kept']}/{package['tests_collected']} tests kept, "
              f"{package['candidates']} mutations screened, {package['kept_mutations']} kept, "
              f"{package['validated']} validated ({package['seconds'].get('total', 0):.0f} s)"
              + (f"; statements: {json.dumps(package['statements'])}" if package.get("statements") else ""))
    print(f"{summary['tasks']} tasks -> {out / 'tasks.jsonl'}; splits {json.dumps(summary['splits'])}")
    print("drops: " + json.dumps(summary["drops"]))
    print(f"grader false alarms: {len(summary['false_alarms'])} of {summary['gold_gradings']} validations void the "
          f"grading, {summary['gold_gradings_disagreeing']} fail a test on the gold patch that pytest passes (the "
          f"task rebuilt without it); seconds per validation: {summary['seconds_per_validation']}")


def _statement_model(config, args: argparse.Namespace):
    """The chat model of ``--statement-writer`` (or of the manifest's writer), or None."""
    if not config.statement_writer:
        return None
    from turngym.agents.judge_models import make_judge_model

    return make_judge_model(config.statement_writer, base_url=args.statement_base_url)


def cmd_synth(args: argparse.Namespace) -> int:
    import logging

    from turngym.envs.swe.synth import SynthConfig, synthesize
    from turngym.envs.swe.synth.manifest import Manifest, SplitRule, compare

    if not args.verbose:
        logging.getLogger("turngym.envs.swe.synth").setLevel(logging.INFO)
    out = Path(args.out)
    root = Path(args.cache) if args.cache else None
    if args.manifest:
        if args.packages or args.packages_file:
            raise ValueError("--manifest names the packages itself: give no packages or --packages-file with it")
        expected = Manifest.read(args.manifest)
        config = SynthConfig(**{**expected.config, **({"backend": args.sandbox} if args.sandbox else {})})
        rule = SplitRule.from_dict(expected.splits.get("rule"))
        summary = synthesize(expected.specs, out, config, root=root, workers=args.workers, splits=rule,
                             manifest=expected, statement_model=_statement_model(config, args))
        _print_summary(summary, out)
        verdict = compare(expected, Manifest.read(out / "manifest.json"))
        print(f"manifest check: {verdict}")
        return 0 if verdict.startswith("same set") else 1
    config = SynthConfig(seed=args.seed, max_candidates=args.max_candidates, max_tasks=args.max_tasks,
                         validate=not args.no_validate, backend=args.sandbox or "bwrap",
                         suite_timeout=args.suite_timeout, max_validations=args.max_validations,
                         statement_writer=args.statement_writer or "")
    rule = SplitRule(eval_repos=_names(args.eval_repos), test_repos=_names(args.test_repos))
    summary = synthesize(_specs(args), out, config, root=root, workers=args.workers, splits=rule,
                         statement_model=_statement_model(config, args))
    _print_summary(summary, out)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from turngym.envs.swe.synth.report import plot, render

    given = Path(args.set).expanduser()
    report = given if given.is_file() else given / "report.json"  # a folder, or a copy of its report (docs/)
    if not report.is_file():
        raise ValueError(f"{given}: no report.json here; give the --out folder of `turngym swe synth` or a "
                         "report.json")
    summary = json.loads(report.read_text())
    # the set's own manifest lies beside its report.json; a renamed copy (docs/) names its manifest with --manifest
    manifest = (Path(args.manifest).expanduser() if args.manifest else
                report.with_name("manifest.json") if report.name == "report.json" else None)
    if args.manifest and not manifest.is_file():
        raise ValueError(f"--manifest {args.manifest}: no such file")
    splits = (json.loads(manifest.read_text()).get("splits", {}).get("repositories", {})
              if manifest is not None and manifest.is_file() else {})
    print(render(summary, splits), end="")
    if args.plot:
        print(f"plot: {plot(summary, Path(args.plot).expanduser(), splits)}")
    return 0


def add(sub) -> None:
    p = sub.add_parser("swe", help="SWE task sets: synthesize tasks from real Python packages")
    swe = p.add_subparsers(dest="swe_command", required=True)
    s = swe.add_parser("synth", help="procedural bugs in real packages' code, checked by their own tests, "
                                     "validated in the sandbox (SWE-bench records)")
    s.add_argument("packages", nargs="*", help="NAME==VERSION from the package registry, or a local directory")
    s.add_argument("--packages-file", help="a file of NAME==VERSION lines (# comments)")
    s.add_argument("--manifest", help="regenerate the set a manifest.json describes (its packages, sdists, "
                                      "requirements, settings and splits) and check its ids and hashes equal")
    s.add_argument("--out", required=True, help="folder for tasks.jsonl, report.json and manifest.json")
    s.add_argument("--cache", help="cache root (default $TURNGYM_CACHE/swe-synth or ~/.cache/turngym/swe-synth)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--max-candidates", type=int, default=40, help="mutations screened per package")
    s.add_argument("--max-tasks", type=int, default=0, help="stop a package after this many kept mutations (0: all)")
    s.add_argument("--max-validations", type=int, default=0, help="validate at most this many per package (0: all)")
    s.add_argument("--workers", type=int, default=1,
                   help="screen and validate a package's candidates this many at a time, each in its own sandboxes "
                        "(default 1)")
    s.add_argument("--no-validate", action="store_true", help="skip the validation through the grader")
    s.add_argument("--eval-repos", help="comma-separated packages held out as the eval split (default: by hash)")
    s.add_argument("--test-repos", help="comma-separated packages reserved as the test split (default: by hash)")
    s.add_argument("--sandbox", default=None, choices=("bwrap", "docker", "auto"), help="default bwrap")
    s.add_argument("--suite-timeout", type=float, default=600.0, help="seconds for one run of a whole test suite")
    s.add_argument("--statement-writer", metavar="SPEC",
                   help="reword each validated task's statement with a chat model: openai:MODEL (an OpenAI-compatible "
                        "endpoint: --statement-base-url or $OPENAI_BASE_URL, key in $OPENAI_API_KEY), hf:NAME or "
                        "vllm:NAME; its replies are checked as the procedural statements are, and cached")
    s.add_argument("--statement-base-url", help="the endpoint of --statement-writer openai:MODEL")
    s.set_defaults(func=cmd_synth)
    r = swe.add_parser("report", help="a synthesized set's report.json as markdown tables: packages, drops, false "
                                      "alarms, cost, and what the tasks are")
    r.add_argument("set", help="the --out folder of `turngym swe synth`, or a report.json (e.g. a copy committed "
                               "under docs/)")
    r.add_argument("--manifest", metavar="MANIFEST.json", help="the set's manifest, for its splits, where the "
                   "report is a copy away from it (default: manifest.json beside a report.json)")
    r.add_argument("--plot", metavar="FILE.png", help="also draw the set: per package, the bugs screened as tasks "
                   "and drops with the seconds per validation; the modifiers, FAIL_TO_PASS counts and tiers")
    r.set_defaults(func=cmd_report)
