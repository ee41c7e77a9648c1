"""Compare RL algorithms on the same tasks with the same budget, and show whether the gaps are real.

    turngym compare --config recipes/configs/compare/textworld-demo.yaml [--seeds 0 1 2] [--restart]
    turngym compare --config X --arms ppo turn_rloo grpo rft     (base, SFT-only and these; later: more arms)
    turngym compare --config X --process-per-rl-stage            (each RL/RFT stage in a fresh process)
    python -m turngym.recipes.compare_algorithms --config ...                         (the same)

For every seed: one SFT warm start (if the config has ``sft``), then each algorithm from that same
checkpoint for the same number of environment episodes; then the base model, the SFT-only policy
and every trained policy play the same held-out panels with the same harness (greedy by default).
An entry with ``algorithm: rft`` is rejection-sampling fine-tuning (expert iteration) at the same budget
of sampled episodes, from the same checkpoint. ``--arms`` runs some of the config's arms (with base and
SFT-only) into the study's folder; a later call with others extends the same study, and every call
tables all the arms finished so far.

``results/<name>/`` receives:

- ``results.md``: success with its 95 % Wilson interval per policy, the paired difference to the
  SFT-only policy with its 95 % interval, return, turns, invalid actions, sampled tokens, the
  breakdown by difficulty, every extra panel, and each RL arm's learning signal (the share of groups whose
  advantages all tie at 0, so teach nothing, and the steps with any gradient);
- ``learning_curves.png``: held-out success (on the curve's games, with SFT-only's and the base model's success
  on those same games as lines) and training return against RL episodes;
- ``summary.json``: every number above, the stage timings, the panels' fingerprints, package
  versions and the full config;
- one folder per stage (policies, training logs, evaluation outcomes per task), so a rerun with the
  same config resumes where the last one stopped.

A YAML config (``recipes/configs/compare/*.yaml``) has these keys::

    name: textworld-demo              # results/<name>/
    world: {...}                      # WorldOptions: model, env_id, env_kwargs, protocol, chat format
    sft: {...}                        # TurnGymSFTConfig fields (num_demos, epochs...); omit for RL from the base model
    rl: {...}                         # TurnGymConfig fields shared by every algorithm
    algorithms: {ppo: {...}, grpo: {...}, turn_rloo: {...}}   # label -> overrides (algorithm defaults to the label)
    #   an entry with null: true is a null control: that algorithm with its advantages permuted within each group
    #   and turn (shuffle_advantages); null: lr0 takes the same steps at learning rate 0
    #   rft: {algorithm: rft, rounds: 4, demo_samples_per_task: 4, demo_temperature: 0.7, learning_rate: 1.0e-5}
    #   is rejection-sampling fine-tuning (TurnGymSFTConfig fields over the sft section): each round samples
    #   episodes / rounds episodes with the current policy, keeps the wins and fine-tunes on them
    episodes: 128                     # RL episodes per algorithm and seed
    seeds: [0, 1, 2]
    evaluation: {split: eval, num_tasks: 100, temperature: 0.0, curve_tasks: 20, curve_points: 3,
                 panels: {harder: {env_kwargs: {config: w2-o3-q4}}}}
    #   pass@k: samples_per_task: 8, pass_at_k: [1, 4], temperature: 0.7 (each task played 8 times)
    #   first_task: 200 plays the split's tasks 200 .. 200 + num_tasks - 1: games an earlier study's panel left out
    #   a panel of a smaller split names its own size: panels: {seen: {env_kwargs: {split: eval_seen}, num_tasks: 15}}
    backend: auto                     # RL rollouts' and evaluations' generation: hf, vllm, or auto (vllm where
    #   `import vllm` works, else hf); a study stays on the backend it resolved to (config.json records it)
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from turngym.recipes.study import (
    INTERVAL_NOTE,
    Arm,
    Study,
    StudyConfig,
    add_study_arguments,
    cost_table,
    difference_cell,
    load_config,
    moving_average,
    peak_memory,
    percent,
    print_outputs,
    seed_table,
    seeds_cell,
    success_cell,
    write_json,
)

BASE, SFT_ONLY = "base", "sft-only"
NULL_TEXT = {
    "shuffle": ("with each step's advantages permuted within each group and turn index (every group keeps its sum, "
                "tied groups stay at 0), so its steps carry no reward signal"),
    "lr0": "at learning rate 0, so it measures what the RL pipeline does to the policy without any update",
}


def arms_of(config: StudyConfig) -> list[Arm]:
    """base, SFT-only (with an ``sft`` section), then one arm per algorithm at the same budget.

    An algorithm entry with ``null: true`` is a null control (:class:`~turngym.recipes.study.Arm`).
    """
    if not config.algorithms:
        raise ValueError("a comparison needs at least one entry under 'algorithms' (label -> overrides)")
    if config.episodes < 1:
        raise ValueError(f"episodes (the RL budget per algorithm) must be positive, got {config.episodes}")
    demos = int((config.sft or {}).get("num_demos", 60)) if config.sft is not None else 0
    arms = [Arm(BASE)]
    if demos:
        arms.append(Arm(SFT_ONLY, demos=demos))
    arms += [Arm(label, demos=demos, algorithm=label, episodes=config.episodes, **null_control(label, overrides))
             for label, overrides in config.algorithms.items()]
    return arms


NULL_KINDS = {True: "shuffle", "shuffle": "shuffle", "lr0": "lr0"}


def null_control(label: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """An algorithm entry's null control: ``null: true`` (or ``shuffle``) permutes advantages within groups,
    ``null: lr0`` takes the same steps at learning rate 0; ``shuffle_advantages: true`` is the first."""
    value = overrides.get("null") or (True if overrides.get("shuffle_advantages") else None)
    if value in (None, False):
        return {}
    if value not in NULL_KINDS:
        raise ValueError(f"algorithms.{label}.null: expected true, 'shuffle' or 'lr0', got {value!r}")
    return {"null": True, "null_kind": NULL_KINDS[value]}


def run(config: StudyConfig, *, restart: bool = False, progress: bool = True,
        arms: Sequence[str] | None = None, max_train_stages: int | None = None) -> tuple[dict[str, Any], Path]:
    """Run (or resume) the comparison; returns the summary and the results folder.

    ``arms``: labels of ``algorithms`` entries to run now, with base and SFT-only (None: every arm). The other
    arms are left alone; those an earlier call finished (every seed) are in the tables too. ``max_train_stages``:
    stop with :class:`~turngym.recipes.study.MoreStagesRemain` before the next unfinished RL or RFT stage once
    that many have run (the tables are then written by the call that finishes the study)."""
    started = time.perf_counter()
    every = arms_of(config)
    only = None
    if arms is not None:
        entries = [arm.label for arm in every if arm.trains_rl]
        unknown = [label for label in arms if label not in entries]
        if unknown:
            raise ValueError(f"--arms: no algorithm entr{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)} "
                             f"in the config; it has {', '.join(entries)}")
        only = [arm.label for arm in every if not arm.trains_rl] + list(arms)
    study = Study(config, every, only=only, restart=restart, progress=progress, max_train_stages=max_train_stages)
    summary = study.run()
    summary["wall_seconds"] = time.perf_counter() - started
    write_outputs(summary, study.out)
    return summary, study.out


# ---------------------------------------------------------------------- outputs
def write_outputs(summary: Mapping[str, Any], out: Path) -> None:
    write_json(out / "summary.json", summary)
    (out / "results.md").write_text(markdown(summary))
    plot_curves(summary, out / "learning_curves.png")


def markdown(summary: Mapping[str, Any]) -> str:
    """The results table (and the breakdown and extra panels) as markdown."""
    from turngym.agents.evaluate import pass_at_k_cell

    config = summary["config"]
    world, evaluation = config["world"], config["evaluation"]
    arms = summary["arms"]
    reference = summary["reference_arm"]
    panels = list(next(iter(arms.values()))["panels"])
    held = next(iter(arms.values()))["panels"]["held_out"]
    seeds = config["seeds"]
    samples = evaluation.get("samples_per_task", 1)
    ks = sorted({p["k"] for arm in arms.values() for p in arm["panels"]["held_out"].get("pass_at_k", [])})
    samples_note = f", {samples} samples per task" if samples > 1 else ""
    lines = [
        f"# {summary['name']}",
        "",
        (f"{world.get('env_id')} {world.get('env_kwargs') or ''}, "
        f"protocol {world.get('action_protocol', 'free_form')}, "
        f"reward {world.get('reward_mode', 'sparse')}; held-out panel {held['taskset']} "
        f"({evaluation['num_tasks']} tasks x {len(seeds)} seed{'s' if len(seeds) > 1 else ''}), "
        f"{'greedy' if not evaluation['temperature'] else 'temperature ' + str(evaluation['temperature'])} evaluation"
        f"{samples_note}. RL budget: {config['episodes']} episodes per algorithm and seed."),
        "",
        (f"| policy | RL episodes | sampled tokens | success (95 % CI) | vs {reference} (95 % CI, seeds x tasks) "
         f"| return | turns | invalid actions |{''.join(f' pass@{k} (95 % CI) |' for k in ks)}"),
        "|---|---:|---:|---|---|---:|---:|---:|" + "---|" * len(ks),
    ]
    for label, arm in arms.items():
        s = arm["panels"]["held_out"]
        counted = [r["sampled_tokens"] for r in arm["rl"] if "sampled_tokens" in r]  # RFT's are not counted
        tokens = f"{sum(counted) / len(counted):,.0f}" if counted else "-"
        vs = "(reference)" if label == reference else difference_cell(s)
        by_k = {p["k"]: p for p in s.get("pass_at_k", [])}
        lines.append(f"| {_label(label, arm)} | {arm['episodes']} | {tokens} | "
                     f"{success_cell(s)} | {vs} | {s['return']:.3f} | {s['turns']:.2f} | "
                     f"{percent(s['invalid_action_rate'])} % |"
                     + "".join(f" {pass_at_k_cell(by_k[k]) if k in by_k else '-'} |" for k in ks))
    lines += seed_table(((label, arm["panels"]["held_out"]["vs_reference"]) for label, arm in arms.items()
                         if label != reference), reference)
    lines += ["", f"Differences are paired by task and seed against {reference}; **+** marks an interval above zero. "
              + INTERVAL_NOTE]
    if ks:
        lines += ["", (f"pass@k: the unbiased estimator 1 - C(n-c, k) / C(n, k) per task and seed from n = {samples} "
                       "samples with c wins, averaged; its 95 % interval is a bootstrap over (task, seed) pairs, which "
                       "treats the pairs as independent and so leaves run-to-run variance out. "
                       "Success and the paired differences use each task's mean over its samples.")]
    nulls = {label: arm.get("null_kind", "shuffle") for label, arm in arms.items() if arm.get("null")}
    if nulls:
        lines += ["", f"Null control{'s' if len(nulls) > 1 else ''} ({', '.join(nulls)}): trained like the algorithm "
                  "it names, for the same episodes, but "
                  + "; ".join(NULL_TEXT[kind] for kind in dict.fromkeys(nulls.values()))
                  + f". An RL arm's gain over {reference} counts as learning only where it exceeds the null arm's."]
    rft = {label: arm for label, arm in arms.items() if arm.get("rft")}
    if rft:
        lines += ["", (f"RFT (rejection-sampling fine-tuning, expert iteration): {', '.join(rft)}. From the same "
                  f"checkpoint, {_rft_rounds(rft)}; each round samples its share of the episodes with the current "
                  "policy, keeps the won episodes and fine-tunes on them. It learns from the outcome alone: an RL arm "
                  "that does not beat it has not shown what its reward adds.")]
    partial = summary.get("partial_arms") or {}
    lines += partial_table(partial, reference)
    not_run = [label for label in summary.get("arms_left_out") or [] if label not in partial]
    if not_run:
        lines += ["", f"Not in this table (not run yet, or unfinished for some seed): {', '.join(not_run)}."]
    lines += pairwise_table(summary.get("pairwise", []))
    lines += signal_table(summary.get("curves", {}))
    if len(seeds) > 1:
        lines += ["", "Per seed (held-out success, %):", "",
                  "| policy | " + " | ".join(f"seed {s}" for s in seeds) + " |",
                  "|---|" + "---:|" * len(seeds)]
        for label, arm in arms.items():
            per = arm["panels"]["held_out"]["success_per_seed"]
            lines.append(f"| {label} | " + " | ".join(percent(per.get(s, per.get(str(s), 0.0))) for s in seeds) + " |")
    for panel in panels[1:]:
        lines += ["", f"## Panel `{panel}`: {next(iter(arms.values()))['panels'][panel]['taskset']}", "",
                  f"| policy | success (95 % CI) | vs {reference} (paired 95 % CI) | return | invalid actions |",
                  "|---|---|---|---:|---:|"]
        for label, arm in arms.items():
            s = arm["panels"][panel]
            vs = "(reference)" if label == reference else difference_cell(s)
            lines.append(f"| {label} | {success_cell(s)} | {vs} | {s['return']:.3f} | "
                         f"{percent(s['invalid_action_rate'])} % |")
    breakdown = [(label, panel, arm["panels"][panel]["by_difficulty"])
                 for label, arm in arms.items() for panel in panels]
    if any(len(b) > 1 for _, _, b in breakdown):
        lines += ["", "## By difficulty", "", "| policy | panel | difficulty | episodes | success (95 % CI) |",
                  "|---|---|---|---:|---|"]
        for label, panel, by in breakdown:
            for difficulty, s in by.items():
                lines.append(f"| {label} | {panel} | {difficulty} | {s['episodes']} | {success_cell(s)} |")
    lines += cost_table(summary)
    minutes = summary.get("wall_seconds") or 0.0
    lines += ["", (f"Stage time {summary['stage_seconds'] / 60:.1f} min; this run {minutes / 60:.1f} min; "
                  f"{peak_memory(summary)}. "
                  f"Versions: {', '.join(f'{k} {v}' for k, v in summary['versions'].items())}.")]
    return "\n".join(lines) + "\n"


def partial_table(partial: Mapping[str, Mapping[str, Any]], reference: str) -> list[str]:
    """Arms evaluated for some of the study's seeds only (a stop rule's one-seed arms): each is paired with the
    reference on its own seeds and never pooled with the full table, whose intervals are over every seed."""
    if not partial:
        return []
    intro = (f"Arms run for some seeds only (not pooled with the table above; paired with {reference} on their "
             "own seeds):")
    header = (f"| policy | seeds | success (95 % CI) | vs {reference} (95 % CI, same seeds) | return | turns "
              "| invalid actions |")
    lines = ["", intro, "", header, "|---|---|---|---|---:|---:|---:|"]
    for label, arm in partial.items():
        s = arm["panels"]["held_out"]
        lines.append(f"| {label} | {', '.join(map(str, arm['seeds']))} | {success_cell(s)} | {difference_cell(s)} "
                     f"| {s['return']:.3f} | {s['turns']:.2f} | {percent(s['invalid_action_rate'])} % |")
    return lines


def pairwise_table(pairs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The RL arms against each other (the algorithm ordering, and each arm against a null control)."""
    if not pairs:
        return []
    lines = ["", "## RL arms against each other (held-out, paired by task and seed)", "",
             "| a | b | a - b (95 % CI, seeds x tasks) | t over seeds (95 % CI); per seed |", "|---|---|---|---|"]
    lines += [f"| {p['a']} | {p['b']} | {difference_cell(p)} | {seeds_cell(p)} |" for p in pairs]
    return lines


def signal_table(curves: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """Each RL arm's learning signal, its seeds' steps pooled (``study_curves.learning_signal``): the mean share of
    groups tied (all advantages 0, no gradient) and the steps with any group that was not."""
    rows = []
    for label, runs in curves.items():
        signals = [run["signal"] for run in runs if run.get("signal")]
        tied, skipped, weights = ([v for s in signals for v in s[key]]
                                  for key in ("tied_groups", "skipped", "is_weight_means"))
        if not tied:
            continue
        rows.append(f"| {label} | {len(signals)} | {len(tied)} | {percent(sum(tied) / len(tied))} % | "
                    f"{sum(t < 1.0 for t in tied)} of {len(tied)} | "
                    + (f"{percent(sum(skipped) / len(skipped))} % | " if skipped else "- | ")
                    + (f"{min(weights):.2f}-{max(weights):.2f} |" if weights else "- |"))
    if not rows:
        return []
    return ["", "## Learning signal (RL stages)", "",
            ("| policy | seeds | steps | groups tied (no gradient) | steps with a gradient | micro-batches skipped "
             "| TRL importance weight, step means |"), "|---|---:|---:|---:|---|---:|---|", *rows, "",
            ("A group is one task's episodes in a step; when they all score the same, every advantage is 0 and the "
             "group teaches nothing. An arm with no step with a gradient ends where it started, unless weight decay "
             "is set: it is its start policy.")]


def _label(label: str, arm: Mapping[str, Any]) -> str:
    return f"{label} (null control)" if arm.get("null") else label


def _rft_rounds(arms: Mapping[str, Mapping[str, Any]]) -> str:
    """'4 rounds of 256 episodes (4 a game, temperature 0.7)' from the RFT arms' stage records."""
    shapes = sorted({f"{r['rounds']} round{'s' if r['rounds'] > 1 else ''} of {r['episodes_per_round']} episodes "
                     f"({r['samples_per_task']} a game, temperature {r['temperature']:g})"
                     for arm in arms.values() for r in arm["rl"] if "rounds" in r})
    return "; ".join(shapes) or "its rounds unrecorded"


def plot_curves(summary: Mapping[str, Any], path: Path, *, smooth: int = 4) -> Path:
    """Two panels against RL episodes: held-out success (the curve panel) and training return."""
    import matplotlib.pyplot as plt

    fig = curve_figure(summary, smooth=smooth)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def curve_figure(summary: Mapping[str, Any], *, smooth: int = 4) -> Any:
    """The learning-curve figure, drawn so that it cannot mislead:

    - left: held-out success on the curve's games (the first ``curve_tasks`` held-out tasks) and, as
      horizontal lines, SFT-only's and the base model's success on *those same games*
      (``summary["curve_reference"]``), never the full panel's;
    - every point keeps a visible marker: each arm has its own marker shape, a small horizontal offset
      (the arms share their x values, and all start at the SFT policy's point) and its own z-order;
    - a null control is dashed and labelled "(null control)";
    - right: training return per step (moving average).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    config = summary["config"]
    evaluation = config["evaluation"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    markers = "osD^vP*Xph"
    curves = list(summary["curves"].items())
    xs_all = [x for _, runs in curves for run in runs for x, _ in run["held_out"]]
    spread = 0.025 * (max(xs_all) - min(xs_all) if xs_all else 1.0) or 1.0
    for i, (label, runs) in enumerate(curves):
        null = bool(summary["arms"].get(label, {}).get("null"))
        style = {"color": colours[i % len(colours)], "linestyle": "--" if null else "-",
                 "label": f"{label} (null control)" if null else label, "zorder": 3 + i}
        held = [run["held_out"] for run in runs if run["held_out"]]
        if held:
            xs, ys = _mean_over_seeds(held)
            offset = (i - (len(curves) - 1) / 2) * spread  # side by side, so no marker hides another
            left.plot([x + offset for x in xs], [100 * y for y in ys], marker=markers[i % len(markers)], markersize=6,
                      markerfacecolor="white", markeredgewidth=1.5, **style)
        returns = [run["train_return"] for run in runs if run["train_return"]]
        if returns:
            xs, ys = _mean_over_seeds(returns)
            right.plot(xs, moving_average(ys, smooth), **style)
    games = evaluation["curve_tasks"]
    reference = summary.get("curve_reference") or {}
    for name, style in {summary["reference_arm"]: (0, (6, 3)), BASE: ":"}.items():
        if name in reference:
            left.axhline(100 * reference[name], linestyle=style, color="grey", linewidth=1.2, zorder=1,
                         label=f"{name} (the same {games} games)")
    left.set(title=f"held-out success on the first {games} held-out games", xlabel="RL episodes",
             ylabel="success (%)", ylim=(-2, 102))
    right.set(title=f"training return per episode ({smooth}-step moving average)", xlabel="RL episodes",
              ylabel="return")
    for axis in (left, right):
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    fig.suptitle(f"{summary['name']}: {config['world'].get('env_id')} {config['world'].get('env_kwargs') or ''}, "
                 f"{len(config['seeds'])} seed(s)")
    fig.tight_layout()
    return fig


def _mean_over_seeds(series: Sequence[Sequence[Sequence[float]]]) -> tuple[list[float], list[float]]:
    """Mean y at each x that every seed logged."""
    common = sorted(set.intersection(*({x for x, _ in s} for s in series)))
    by_seed = [{x: y for x, y in s} for s in series]
    return common, [sum(d[x] for d in by_seed) / len(by_seed) for x in common]


# ---------------------------------------------------------------------- command line
def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_study_arguments(parser, "recipes/configs/compare/")
    parser.add_argument("--episodes", type=int, help="override the RL budget per algorithm and seed")
    parser.add_argument("--only", nargs="+", metavar="LABEL",
                        help="a study of only these entries of the config's 'algorithms' (e.g. turn_rloo "
                             "turn_rloo-null): its config has only them, so it is a study of its own")
    parser.add_argument("--arms", nargs="+", metavar="LABEL",
                        help="run only these entries of the config's 'algorithms' now (with base and SFT-only), in "
                             "the config's order, seed by seed, into the same study: a later call with other arms "
                             "extends it (tier by tier), and the tables cover every arm finished so far; "
                             "'--arms none': base and SFT-only alone (a stop rule's seeds)")
    parser.add_argument("--process-per-rl-stage", action="store_true",
                        help="run each RL or RFT stage (with the SFT and evaluations around it) in a fresh process, "
                             "in the study's order, until the study is done: a process's memory then never carries "
                             "one stage into the next")
    parser.add_argument("--max-rl-stages", type=int, metavar="N",
                        help=f"run at most N unfinished RL or RFT stages, then exit with status {MORE_STAGES_EXIT} "
                             "if the study has more (what --process-per-rl-stage runs each process with)")


MORE_STAGES_EXIT = 75  # EX_TEMPFAIL: this call stopped at --max-rl-stages and the study has stages left


def run_stage_by_stage(command_line: Sequence[str], restart: bool) -> int:
    """``--process-per-rl-stage``: ``command_line`` (this command without that flag and ``--restart``) with
    ``--max-rl-stages 1``, in a fresh process each time, until one ends without :data:`MORE_STAGES_EXIT` (its
    status is the answer). Only the first gets ``--restart``.

    One process that ran a vLLM PPO stage and then another RL stage grew to 22-23 GB, where one stage stays at
    12-16 GB (docs/plans/2026-11-28-algorithm-comparison.md, Amendment 3): a process per stage keeps the peak at
    one stage's, whatever the cause, and the study's own resume makes the processes one run."""
    import subprocess

    processes = 0
    while True:
        command = [*command_line, "--max-rl-stages", "1"]
        if restart and processes == 0:
            command.append("--restart")
        processes += 1
        code = subprocess.call(command)
        if code != MORE_STAGES_EXIT:
            if code != 0:
                print(f"turngym compare: process {processes} ended with status {code}; the study keeps every "
                      "finished stage: run the same command to resume", file=sys.stderr)
            return code


def only_algorithms(config: StudyConfig, labels: Sequence[str]) -> StudyConfig:
    """The study with only the ``algorithms`` entries named in ``labels`` (base and SFT-only stay)."""
    unknown = [label for label in labels if label not in config.algorithms]
    if unknown:
        raise ValueError(f"--only: no algorithm entr{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)} "
                         f"in the config; it has {', '.join(config.algorithms)}")
    return replace(config, algorithms={label: config.algorithms[label] for label in dict.fromkeys(labels)})


def main_with(args: argparse.Namespace, relaunch: Sequence[str] | None = None) -> int:
    """``relaunch``: the command line that ran this (interpreter first), which ``--process-per-rl-stage`` runs
    again."""
    from turngym.recipes.study import MoreStagesRemain

    config = load_config(args.config, name=args.name, seeds=args.seeds, episodes=args.episodes,
                         results_dir=args.results_dir, backend=getattr(args, "backend", None))
    if getattr(args, "only", None):
        config = only_algorithms(config, args.only)
    if getattr(args, "process_per_rl_stage", False):
        if args.max_rl_stages is not None:
            raise ValueError("--process-per-rl-stage runs each process with --max-rl-stages 1; give one or the other")
        if relaunch is None:
            raise ValueError("--process-per-rl-stage needs the command line it runs again")
        return run_stage_by_stage([a for a in relaunch if a not in ("--process-per-rl-stage", "--restart")],
                                  args.restart)
    limit = getattr(args, "max_rl_stages", None)
    if limit is not None and limit < 1:
        raise ValueError(f"--max-rl-stages must be at least 1, not {limit}")
    arms = getattr(args, "arms", None)  # `turngym demo` has no --arms
    if arms and "none" in arms:
        if len(arms) > 1:
            others = ", ".join(label for label in arms if label != "none")
            raise ValueError(f"--arms none runs no RL arm; it cannot be given with {others}")
        arms = []
    try:
        options = {"arms": arms} if arms is not None else {}
        if limit is not None:
            options["max_train_stages"] = limit
        summary, out = run(config, restart=args.restart, **options)
    except MoreStagesRemain as next_stage:
        print(f"turngym compare: stopped after {limit} RL/RFT stage{'s' if limit > 1 else ''} (--max-rl-stages); "
              f"next: {next_stage}. Run the same command to go on.", flush=True)
        return MORE_STAGES_EXIT
    print_outputs(summary, out, "learning_curves.png")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m turngym.recipes.compare_algorithms",
                                     description=__doc__.split("\n")[0])
    add_arguments(parser)
    argv = list(sys.argv[1:] if argv is None else argv)
    return main_with(parser.parse_args(argv), [sys.executable, "-m", "turngym.recipes.compare_algorithms", *argv])


if __name__ == "__main__":
    sys.exit(main())
