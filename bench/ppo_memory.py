"""Peak memory and time of the demo's PPO step, by how many episodes each critic pass holds.

    .venv/bin/python bench/ppo_memory.py [--model PATH] [--rows-per-pass 16 4] [--steps 1]

Each variant trains ``--steps`` real PPO steps of the demo config
(``recipes/configs/compare/textworld-demo.yaml``: 16 TextWorld episodes a step, bf16 autocast, a full
critic) in a fresh child process, and reports that process's peak resident memory (``ru_maxrss``)
and its mean step time. The first ``--rows-per-pass`` value is the baseline: 16, one pass over the
whole batch, is what the trainer did before ``critic_rows_per_pass`` existed. The episodes are the
same in every variant (same policy, seed and games), so only the critic's passes differ.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEMO = Path(__file__).resolve().parents[1] / "recipes" / "configs" / "compare" / "textworld-demo.yaml"


def one_variant(model: str, rows_per_pass: int, steps: int) -> dict:
    """Train ``steps`` PPO steps in this process; its peak RSS and step times."""
    from turngym.agents.models import load_policy
    from turngym.recipes.study import Arm, Study, load_config
    from turngym.trainers.trainer import TurnGymTrainer

    with tempfile.TemporaryDirectory() as results:
        config = load_config(DEMO, results_dir=results)
        config.evaluation.curve_points = 2  # no held-out curve point inside the run
        study = Study(config, [], progress=False)
        arm = Arm("ppo", demos=config.sft["num_demos"], algorithm="ppo", episodes=steps * 16)
        args = study.rl_config(arm, model, 0, study.out / "ppo")
        args.save_strategy, args.critic_rows_per_pass = "no", rows_per_pass
        policy, tokenizer = load_policy(model)
        trainer = TurnGymTrainer(model=policy, args=args, processing_class=tokenizer)
        started = time.perf_counter()
        trainer.train()
        elapsed = time.perf_counter() - started
        times = [row["step_time"] for row in trainer.state.log_history if "step_time" in row]
    return {"rows_per_pass": rows_per_pass, "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
            "step_seconds": sum(times) / len(times) if times else elapsed / steps}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct",
                        help="the policy (the demo's starts from its SFT checkpoint; any folder or name works)")
    parser.add_argument("--rows-per-pass", type=int, nargs="+", default=[16, 4])
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)  # run one variant, print JSON
    args = parser.parse_args(argv)
    if args.child is not None:
        print(json.dumps(one_variant(args.model, args.child, args.steps)))
        return
    rows = []
    for rows_per_pass in args.rows_per_pass:
        child = subprocess.run([sys.executable, __file__, "--model", args.model, "--steps", str(args.steps),
                                "--child", str(rows_per_pass)], check=False, capture_output=True, text=True,
                               env=os.environ)
        if child.returncode:
            sys.exit(f"variant rows_per_pass={rows_per_pass} failed:\n{child.stderr[-3000:]}")
        rows.append(json.loads(child.stdout.strip().splitlines()[-1]))
    base = rows[0]
    print(f"PPO, the demo config, {args.steps} step(s) of 16 episodes from {args.model}, "
          f"{os.cpu_count()} cores\n")
    print("| critic_rows_per_pass | peak RSS (GB) | vs first | s / step | vs first |")
    print("|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['rows_per_pass']} | {row['peak_rss_gb']:.1f} | {row['peak_rss_gb'] / base['peak_rss_gb']:.2f}x "
              f"| {row['step_seconds']:.1f} | {row['step_seconds'] / base['step_seconds']:.2f}x |")


if __name__ == "__main__":
    main()
