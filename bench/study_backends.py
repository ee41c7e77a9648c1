"""One study stage on each generation backend (``backend: hf`` and ``backend: vllm``): wall time and peak memory.

The stages are the quick demo's (``recipes/configs/compare/textworld-demo-quick.yaml``), run by the study's own code
(:class:`~turngym.recipes.study.Study`), from the base model:

* ``eval``: the greedy held-out evaluation of ``--games`` games (``Study.eval_stage``); on vLLM the stage builds the
  study's evaluation engine (a later evaluation of the same study only syncs its weights);
* ``rl``: turn-level RLOO for ``--rl-episodes`` episodes (32 a step; ``Study.rl_stage``), TRL's colocated engine on
  vLLM;
* ``rft``: two RFT rounds' sampling, ``--rft-episodes`` policy-demo episodes each at temperature 0.7 (4 a game,
  ``trainers.sft.collect_policy_demos``, rounds 1 and 2's games) from the base model, without the fine-tuning
  between them; on vLLM through ``vllm_policy_sampler``, the engine built before the clock starts (a study's engine
  is built once, for its first evaluation). The second round's seconds are the stage's; the first's are shown.

Each (stage, backend) runs in a fresh process, so its peak resident memory (VmHWM, as a study records it in
``done.json`` and each evaluation's record) is its own; the task panels are built before the stage's clock starts.
It prints each run's stage seconds (as the study records them) and peak, the vLLM / HF ratios, and for ``eval`` how
many of the games played token-identical greedy episodes on both backends (replies compared reply by reply).

Needs vLLM's environment, which has both backends (``make install-vllm``):

    .venv-vllm/bin/python bench/study_backends.py --games 100 --rl-episodes 64
    .venv-vllm/bin/python bench/study_backends.py --stages rft --rft-episodes 64
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

QUICK_DEMO = Path(__file__).resolve().parents[1] / "recipes" / "configs" / "compare" / "textworld-demo-quick.yaml"


def run_stage(stage: str, backend: str, games: int, rl_episodes: int, out: Path) -> dict:
    """One stage of the quick demo on ``backend``, in this process; its record."""
    from turngym.recipes.compare_algorithms import arms_of
    from turngym.recipes.study import Study, load_config

    config = load_config(QUICK_DEMO, name=f"{stage}-{backend}", results_dir=str(out), backend=backend,
                         episodes=rl_episodes)
    config.evaluation.num_tasks, config.evaluation.curve_points = games, 0
    config.sft = None  # from the base model: no warm start to train first
    study = Study(config, arms_of(config), restart=True, progress=False)
    study.check_panels()  # the held-out and training games, built (or read from the cache) before the clock starts
    base = config.world["model_name_or_path"]
    if stage == "eval":
        record = study.eval_stage("base", base, 0, "held_out")
        rows = (study.out / "evals" / "base" / "seed0-held_out.jsonl").read_text().splitlines()
        return {"seconds": record["seconds"], "peak_rss_gb": record["peak_rss_gb"],
                "success": record["report"]["overall"]["success_rate"],
                "replies": [json.loads(row)["record"]["replies"] for row in rows]}
    if stage == "rft":
        return rft_sampling(config, backend, rl_episodes)
    arm = next(arm for arm in study.all_arms if arm.label == "turn_rloo")
    study.rl_stage(arm, base, 0)
    done = json.loads((study.out / "seed0" / "turn_rloo" / "done.json").read_text())
    log = json.loads((study.out / "seed0" / "turn_rloo" / "log.json").read_text())
    steps = [h.get("step_time") for h in log if "episode/return" in h]
    return {"seconds": done["seconds"], "peak_rss_gb": done["peak_rss_gb"], "step_seconds": steps}


def rft_sampling(config, backend: str, episodes: int) -> dict:
    """One RFT round's sampling of ``episodes`` episodes from the base model on ``backend``."""
    import time

    from transformers import AutoTokenizer

    from turngym.agents.models import load_policy, resolve_model
    from turngym.recipes.study_memory import peak_rss_gb
    from turngym.trainers.sft import NoDemosError, TurnGymSFTConfig, collect_policy_demos, vllm_policy_sampler

    base = resolve_model(config.world["model_name_or_path"])
    options = TurnGymSFTConfig(**config.world, demo_source="policy", num_demos=episodes, demo_samples_per_task=4,
                               demo_temperature=0.7, demo_backend=backend, output_dir="unused", report_to="none",
                               max_length=1024)
    model, _ = load_policy(base)
    tokenizer = AutoTokenizer.from_pretrained(base)
    built = time.perf_counter()
    engine = vllm_policy_sampler(base)(model, 0) if backend == "vllm" else None
    built = time.perf_counter() - built
    rounds = []
    for round_index in range(2):  # the first round also meets the engine's first batch shapes; the second is warm
        started = time.perf_counter()
        try:
            _, stats = collect_policy_demos(options, model, tokenizer, round_index, backend=engine, progress=False)
            kept = stats.kept
        except NoDemosError:  # the base model may win none: the sampling was timed all the same
            kept = 0
        rounds.append({"seconds": time.perf_counter() - started, "kept": kept})
    return {"seconds": rounds[-1]["seconds"], "first_round_seconds": rounds[0]["seconds"], "engine_seconds": built,
            "episodes": episodes, "kept": [r["kept"] for r in rounds], "peak_rss_gb": peak_rss_gb()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--games", type=int, default=100, help="held-out games of the eval stage")
    parser.add_argument("--rl-episodes", type=int, default=64, help="episodes of the rl stage (32 a step)")
    parser.add_argument("--rft-episodes", type=int, default=64, help="episodes of the rft stage's round (4 a game)")
    parser.add_argument("--stages", nargs="+", default=["eval", "rl"], choices=["eval", "rl", "rft"])
    parser.add_argument("--child", nargs=3, metavar=("STAGE", "BACKEND", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        stage, backend, out = args.child
        episodes = args.rft_episodes if stage == "rft" else args.rl_episodes
        print("RESULT " + json.dumps(run_stage(stage, backend, args.games, episodes, Path(out))), flush=True)
        return
    with tempfile.TemporaryDirectory(prefix="study-backends-") as out:
        for stage in args.stages:
            results = {}
            for backend in ("hf", "vllm"):
                command = [sys.executable, __file__, "--child", stage, backend, out, "--games", str(args.games),
                           "--rl-episodes", str(args.rl_episodes), "--rft-episodes", str(args.rft_episodes)]
                done = subprocess.run(command, check=True, capture_output=True, text=True)
                line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
                results[backend] = json.loads(line.removeprefix("RESULT "))
                shown = {k: v for k, v in results[backend].items() if k != "replies"}
                print(f"{stage} on {backend}: {json.dumps(shown)}", flush=True)
            hf, vllm = results["hf"], results["vllm"]
            print(f"{stage}: vllm / hf wall time {vllm['seconds'] / hf['seconds']:.2f}x, "
                  f"peak memory {vllm['peak_rss_gb']:.2f} / {hf['peak_rss_gb']:.2f} GB", flush=True)
            if stage == "eval":
                same = sum(a == b for a, b in zip(hf["replies"], vllm["replies"], strict=True))
                print(f"eval: {same} of {len(hf['replies'])} games token-identical on both backends; success "
                      f"{hf['success']:.2f} (hf) and {vllm['success']:.2f} (vllm)", flush=True)


if __name__ == "__main__":
    main()
