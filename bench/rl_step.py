"""Peak memory, time and profile of one RL step of the demo, by critic pass size and by vocabulary projection.

    .venv/bin/python bench/rl_step.py [--model PATH] [--algorithm ppo] [--rows-per-pass 16 4] [--steps 1]
    .venv/bin/python bench/rl_step.py --model PATH --algorithm turn_rloo --rows-per-pass 4 --projection trl loss
    .venv/bin/python bench/rl_step.py --model PATH --algorithm turn_rloo --rows-per-pass 4 --steps 2 --profile
    .venv/bin/python bench/rl_step.py --model PATH --algorithm turn_rloo --rows-per-pass 16 --no-signal --skip off on

Each variant trains ``--steps`` real steps of the demo config's ``--algorithm`` arm
(``recipes/configs/compare/textworld-demo.yaml``: 16 TextWorld episodes a step, bf16 autocast; PPO with a
full critic) in a fresh child process, and reports that process's peak resident memory (``ru_maxrss``)
and its mean step time. Variants are every (``--rows-per-pass``, ``--projection``) pair; the first is the
baseline the others are compared with.

* ``--rows-per-pass``: 16, one critic pass over the whole batch, is what the trainer did before
  ``critic_rows_per_pass`` existed (the setting only matters for PPO).
* ``--projection``: ``trl`` sends every position through the vocabulary, as TRL's fused head does on CPU
  (what the trainer did before it scored only the loss's tokens); ``loss`` is the trainer's default, the
  model's own tokens only (``turngym.trainers.logprobs``).
* ``--skip`` (with ``--no-signal``, which sets every advantage to 0 after the estimator, as when every group
  ties): ``off`` runs the loss's forward and backward passes on the zero advantages, ``on`` skips them
  (``skip_zero_advantage_batches``, the default). The weights come out the same (tests/test_trainer.py).

The episodes are the same in every variant (same policy, seed and games).
``--profile`` runs each variant under cProfile and prints where its training time went.
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import json
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEMO = Path(__file__).resolve().parents[1] / "recipes" / "configs" / "compare" / "textworld-demo.yaml"
# (label, file suffix, function name) of the parts of a step, by cumulative time under cProfile.
PARTS = [("backward (with checkpointing's recomputed forward)", "torch/_tensor.py", "backward"),
         ("  of which TRL's chunked vocabulary log-probability backward", "chunked_logprob.py", "backward"),
         ("rollouts: generation", "agents/backends.py", "generate"),
         ("rollouts: world resets", "envs/core.py", "reset"),
         ("the loss's forward", ("turngym/trainers/trainer.py", "trainers/trainer.py", "trl/trainer/grpo_trainer.py"),
          "_get_per_token_logps_and_entropies"),
         ("optimizer step", "torch/optim/adam.py", "step")]


def step_profile(profile: cProfile.Profile) -> dict[str, float]:
    """Cumulative seconds of each of PARTS (a function counted once, at its outermost call)."""
    stats = pstats.Stats(profile).stats
    return {label: max((ct for (file, _, name), (_, _, _, ct, _) in stats.items()
                        if name == function and file.endswith(suffix)), default=0.0)
            for label, suffix, function in PARTS}


def one_variant(model: str, algorithm: str, rows_per_pass: int, projection: str, steps: int, profile: bool,
                skip: str = "on", no_signal: bool = False) -> dict:
    """Train ``steps`` steps in this process; its peak RSS, step times and (``profile``) their parts."""
    from turngym.agents.models import load_policy
    from turngym.recipes.study import Arm, Study, load_config
    from turngym.trainers.trainer import TurnGymTrainer

    profiler = cProfile.Profile() if profile else None
    with tempfile.TemporaryDirectory() as results:
        config = load_config(DEMO, results_dir=results)
        config.evaluation.curve_points = 2  # no held-out curve point inside the run
        study = Study(config, [], progress=False)
        arm = Arm(algorithm, demos=config.sft["num_demos"], algorithm=algorithm, episodes=steps * 16)
        args = study.rl_config(arm, model, 0, study.out / algorithm)
        args.save_strategy, args.critic_rows_per_pass = "no", rows_per_pass
        args.skip_zero_advantage_batches = skip == "on"
        if no_signal:  # every group ties: all advantages 0 after the estimator
            import torch

            scored = TurnGymTrainer._generate_and_score_completions

            def tied(self, inputs):
                output = scored(self, inputs)
                output["advantages"] = torch.zeros_like(output["advantages"])
                return output

            TurnGymTrainer._generate_and_score_completions = tied
        policy, tokenizer = load_policy(model)
        trainer = TurnGymTrainer(model=policy, args=args, processing_class=tokenizer)
        if projection == "trl":  # TRL's own path for every log-probability: the whole sequence projected
            trainer._directly_callable = lambda _model: None
        started = time.perf_counter()
        if profiler:
            profiler.enable()
        trainer.train()
        if profiler:
            profiler.disable()
        elapsed = time.perf_counter() - started
        times = [row["step_time"] for row in trainer.state.log_history if "step_time" in row]
    return {"rows_per_pass": rows_per_pass, "projection": projection, "skip": skip,
            "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
            "step_seconds": sum(times) / len(times) if times else elapsed / steps, "train_seconds": elapsed,
            "parts": step_profile(profiler) if profiler else None}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct",
                        help="the policy (the demo's starts from its SFT checkpoint; any folder or name works)")
    parser.add_argument("--algorithm", default="ppo")
    parser.add_argument("--rows-per-pass", type=int, nargs="+", default=[16, 4])
    parser.add_argument("--projection", nargs="+", choices=["trl", "loss"], default=["loss"],
                        help="trl: every position through the vocabulary (TRL on CPU); loss: the loss's tokens only")
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--no-signal", action="store_true", help="every advantage 0 (every group ties)")
    parser.add_argument("--skip", nargs="+", choices=["on", "off"], default=["on"],
                        help="skip_zero_advantage_batches: with --no-signal, off runs the passes on zero advantages")
    parser.add_argument("--profile", action="store_true", help="where each variant's training time went")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)  # run one variant, print JSON
    args = parser.parse_args(argv)
    if args.child is not None:
        rows_per_pass, projection, skip = args.child
        print(json.dumps(one_variant(args.model, args.algorithm, int(rows_per_pass), projection, args.steps,
                                     args.profile, skip, args.no_signal)))
        return
    rows = []
    for rows_per_pass, projection, skip in itertools.product(args.rows_per_pass, args.projection, args.skip):
        command = [sys.executable, __file__, "--model", args.model, "--algorithm", args.algorithm,
                   "--steps", str(args.steps), "--child", str(rows_per_pass), projection, skip]
        flags = (["--profile"] if args.profile else []) + (["--no-signal"] if args.no_signal else [])
        child = subprocess.run(command + flags, check=False, capture_output=True, text=True, env=os.environ)
        if child.returncode:
            sys.exit(f"variant rows_per_pass={rows_per_pass} projection={projection} skip={skip} failed:\n"
                     f"{child.stderr[-3000:]}")
        rows.append(json.loads(child.stdout.strip().splitlines()[-1]))
    base = rows[0]
    print(f"{args.algorithm}, the demo config, {args.steps} step(s) of 16 episodes from {args.model}, "
          f"{os.cpu_count()} cores{', every advantage 0' if args.no_signal else ''}\n")
    print("| critic_rows_per_pass | projection | skip zero advantages | peak RSS (GB) | vs first | s / step "
          "| vs first |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['rows_per_pass']} | {row['projection']} | {row['skip']} | {row['peak_rss_gb']:.1f} "
              f"| {row['peak_rss_gb'] / base['peak_rss_gb']:.2f}x "
              f"| {row['step_seconds']:.1f} | {row['step_seconds'] / base['step_seconds']:.2f}x |")
    for row in rows if args.profile else ():
        print(f"\ncritic_rows_per_pass {row['rows_per_pass']}, projection {row['projection']}: "
              f"{row['train_seconds']:.1f} s of training\n")
        print("| part | seconds | share |\n|---|---:|---:|")
        for label, seconds in row["parts"].items():
            print(f"| {label} | {seconds:.1f} | {seconds / row['train_seconds']:.0%} |")


if __name__ == "__main__":
    main()
