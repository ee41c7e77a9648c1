"""The studies: ``turngym demo`` (the embedded default job), ``compare`` (algorithms at an equal budget),
``stats`` (a study's table recomputed from its outcomes) and ``budget`` (SFT demos vs RL episodes)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from turngym.recipes.commands.common import CONFIG_DIR

DEMO_CONFIG = CONFIG_DIR / "compare" / "textworld-demo.yaml"
# `turngym demo --quick`: turn-level RLOO and its null control, in the recipe whose null keeps the 3-point rule.
QUICK_DEMO_CONFIG = CONFIG_DIR / "compare" / "textworld-demo-quick.yaml"


def cmd_demo(args: argparse.Namespace) -> int:
    """The embedded default: SFT warm start, then PPO, GRPO and turn-level RLOO at one budget, on CPU."""
    if args.baselines:
        return _baselines_demo(args)
    from turngym.recipes import compare_algorithms
    from turngym.recipes.study import Study, load_config

    name, path = ("demo-quick", QUICK_DEMO_CONFIG) if args.quick else ("demo", DEMO_CONFIG)
    args.config, args.name, args.seeds, args.episodes, args.only = str(path), name, None, None, None
    # backend auto: vLLM where `import vllm` works (.venv-vllm; its CPU build: 2.3-3.6x HF's rollout tokens/s,
    # docs/benchmarks.md), else HF. The study's first line says which; a demo begun on the other is refused.
    config = load_config(path, name=name, results_dir=args.results_dir, backend=args.backend)
    if not args.restart and Study.changed_options(config):
        print(f"{Path(args.results_dir) / name}/ holds a run of an earlier demo config: starting over")
        args.restart = True
    print(f"turngym demo: {path.name} (results in {Path(args.results_dir) / name}/; rerun to resume)")
    return compare_algorithms.main_with(args)


def _baselines_demo(args: argparse.Namespace) -> int:
    """Oracle and random agents on held-out TextWorld games: the world's floor and ceiling in seconds."""
    from turngym.agents import OracleAgent, RandomAgent, evaluate, markdown_table
    from turngym.envs.textworld import materialise, textworld_tasks

    started = time.perf_counter()
    config, episodes = "w2-o3-q4", 50
    print(f"turngym demo --baselines: oracle and random agents on {episodes} held-out TextWorld {config} games\n")
    tasks = materialise(textworld_tasks(config, "eval", n=episodes), workers=2)
    reports = []
    for protocol in ("free_form", "choose_index"):
        for agent in (OracleAgent(), RandomAgent(seed=0)):
            reports.append(evaluate(agent, "turngym/TextWorld-v0", tasks, env_kwargs={"action_protocol": protocol},
                                    num_workers=2, seed=0))
    print(markdown_table(reports))
    print(f"\ntask panel {tasks.name}, fingerprint {tasks.fingerprint}; {time.perf_counter() - started:.0f} s")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from turngym.recipes import compare_algorithms

    return compare_algorithms.main_with(args, [sys.executable, "-m", "turngym.recipes.cli", *args.argv])


def cmd_stats(args: argparse.Namespace) -> int:
    """The table of a study's outcomes file, recomputed with today's intervals; a file that is not one of the
    shapes :mod:`~turngym.recipes.outcome_files` reads, or holds a wrong cell, is one line naming it (exit 2)."""
    from turngym.recipes import outcome_files as files
    from turngym.recipes.study import recompute, recomputed_markdown

    if args.costs is not None:
        ignored = [flag for flag, value in (("--merged-out", args.merged_out), ("--keep-first", args.keep_first),
                                            ("--reference", args.reference), ("--panel", args.panel),
                                            ("--plan", args.plan), ("--plot", args.plot),
                                            ("--recorded", args.recorded)) if value]
        if ignored:
            raise files.OutcomeFileError(f"--costs prints the stages' minutes and memory, not outcomes: leave out "
                                         f"{', '.join(ignored)}")
        return _print_costs([Path(given) for given in args.outcomes], args.costs)
    paths = [_outcomes_path(Path(given)) for given in args.outcomes]
    path = paths[0]
    content = files.read_outcomes(path)
    agreement = ""
    if args.keep_first and len(paths) < 2:
        raise files.OutcomeFileError("--keep-first chooses between files that hold the same cell: give two or more")
    if len(paths) > 1 or args.merged_out:
        contents = [content, *(files.read_outcomes(more) for more in paths[1:])]
        if any(c["kind"] == "rates" for c in contents):
            raise files.OutcomeFileError("per-seed rates do not merge: give per-game outcome files only")
        records = [(p, c["record"]) for p, c in zip(paths, contents, strict=True)]
        content = {"kind": "record", "record": files.merge_records(records, keep_first=args.keep_first)}
        agreement = files.agreement_markdown(files.cell_agreement(records))
        path = Path(" + ".join(str(p) for p in paths))
        if args.merged_out:
            Path(args.merged_out).write_text(json.dumps(content["record"], indent=1) + "\n")
    if content["kind"] == "rates":
        if args.panel is not None:
            raise files.OutcomeFileError(f"{path}: holds per-seed rates, which have no panels; leave out --panel")
        if args.plan is not None:
            raise files.OutcomeFileError(f"{path}: holds per-seed rates; --plan needs per-game outcomes")
        print(files.rates_markdown(path, content, args.reference), end="")
        return 0
    if agreement:
        print(agreement)
    if args.plot and args.plan != "algorithm-comparison":
        raise files.OutcomeFileError("--plot draws the pre-registered comparisons: use it with --plan "
                                     "algorithm-comparison")
    if args.recorded and args.plan != "algorithm-tuning":
        raise files.OutcomeFileError("--recorded gives pilot T's recorded successes: use it with --plan "
                                     "algorithm-tuning")
    panel = args.panel or files.DEFAULT_PANEL
    files.check_choice(path, content["record"], args.reference, panel)
    print(recomputed_markdown(recompute(content["record"], args.reference, panel)), end="")
    if args.plan == "algorithm-comparison":
        from turngym.recipes.algorithm_verdicts import analyse, verdicts_markdown

        result = analyse(content["record"], panel)
        print("\n" + verdicts_markdown(result), end="")
        if args.plot:
            from turngym.recipes.algorithm_verdicts import verdicts_plot

            print(f"\nplot: {verdicts_plot(result, args.plot)}")
    elif args.plan == "algorithm-tuning":
        from turngym.recipes.algorithm_verdicts import picks_markdown, read_recorded, tuning_picks

        recorded = read_recorded(Path(args.recorded)) if args.recorded else None
        print("\n" + picks_markdown(tuning_picks(content["record"], panel, recorded)), end="")
    return 0


def _print_costs(folders: list[Path], out: str) -> int:
    """``turngym stats FOLDER --costs [FILE]``: each folder's "Cost by stage" table (its stages' minutes and peak
    memory), and the rows as JSON in FILE if one is given."""
    from turngym.recipes.outcome_files import OutcomeFileError
    from turngym.recipes.study_tables import cost_table, folder_stage_costs

    costs = {}
    for folder in folders:
        if not folder.is_dir():
            raise OutcomeFileError(f"{folder}: --costs reads a study's results folder (its done.json files and "
                                   "evaluation records), not a file")
        costs[str(folder)] = folder_stage_costs(folder)
        table = cost_table({"stage_costs": costs[str(folder)]})[3:] or ["no finished stage yet"]
        print("\n".join([f"## Cost by stage: {folder}", "", *table, ""]))
    if out != "-":
        Path(out).write_text(json.dumps(costs, indent=1) + "\n")
    return 0


def _outcomes_path(path: Path) -> Path:
    """A results folder's outcomes.json, or the file given; a missing one is a FileNotFoundError naming it."""
    if path.is_dir():
        path = path / "outcomes.json"
    if not path.is_file():
        raise FileNotFoundError(f"no outcomes file at {path}: a study writes results/<name>/outcomes.json")
    return path


def cmd_budget(args: argparse.Namespace) -> int:
    from turngym.recipes import sft_rl_budget

    return sft_rl_budget.main_with(args)


def add(sub) -> None:
    p = sub.add_parser("demo", help="the embedded default: SFT, then PPO / GRPO / turn-RLOO at one budget (CPU)")
    p.add_argument("--restart", action="store_true", help="delete results/demo/ and start over (default: resume)")
    p.add_argument("--results-dir", default="results", help="parent folder of demo/")
    p.add_argument("--baselines", action="store_true", help="only the oracle and random agents (seconds)")
    p.add_argument("--backend", default="auto", choices=["auto", "hf", "vllm"],
                   help="generation for RL rollouts and evaluations: auto (the default) is vllm where `import vllm` "
                        "works here (.venv-vllm/bin/turngym), else hf")
    p.add_argument("--quick", action="store_true",
                   help="turn-level RLOO and its null control only, at lr 5e-6 and 32 episodes a step "
                        "(textworld-demo-quick.yaml; results/demo-quick/; about 31 min)")
    p.set_defaults(func=cmd_demo)

    from turngym.recipes import compare_algorithms, sft_rl_budget

    p = sub.add_parser("compare", help="compare RL algorithms at an equal episode budget: table, plot, JSON")
    compare_algorithms.add_arguments(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("stats", help="recompute a study's table from its per-game outcomes (outcomes.json)")
    p.add_argument("outcomes", nargs="+",
                   help="results/<name>/ or an outcomes.json (e.g. one committed under docs/outcomes/); several are "
                        "merged into one study (seeds run on different machines), refusing a cell two of them hold "
                        "with different outcomes")
    p.add_argument("--merged-out", metavar="FILE", help="also write the merged outcome record to FILE")
    p.add_argument("--costs", nargs="?", const="-", metavar="FILE",
                   help="instead of the table of outcomes: each results folder's stages with their minutes and peak "
                        "memory (also as JSON in FILE, if given)")
    p.add_argument("--keep-first", metavar="ARM", action="append", default=[],
                   help="when merging, an arm whose cells may differ between files (e.g. a re-made warm start's "
                        "re-evaluation): the first file's cell is used and the difference shown; repeatable")
    p.add_argument("--reference", help="the arm every other is paired with (default: SFT-only, else the first)")
    p.add_argument("--panel", help="which evaluation panel (default: held_out); an unknown one is refused, "
                                   "listing the file's panels")
    p.add_argument("--plan", choices=["algorithm-comparison", "algorithm-tuning"],
                   help="also print a pre-registered analysis of docs/plans/2026-11-28-algorithm-comparison.md: "
                        "algorithm-comparison = its families, corrected intervals and verdicts; algorithm-tuning = "
                        "pilot T's pick of each algorithm's configuration")
    p.add_argument("--plot", metavar="PNG", help="with --plan algorithm-comparison: also draw its comparisons as a "
                                                 "forest plot (corrected and TOST intervals, each seed, verdicts)")
    p.add_argument("--recorded", help="with --plan algorithm-tuning: a JSON file of recorded successes "
                                      "({\"successes\": {label: rate}}) for configurations whose per-game outcomes "
                                      "were lost; marked in the table")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("budget", help="split a fixed budget between SFT demos and RL episodes: table and plot")
    sft_rl_budget.add_arguments(p)
    p.set_defaults(func=cmd_budget)
