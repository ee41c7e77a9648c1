"""Rollouts and RL steps with vLLM (its CPU build) against turngym's Hugging Face backend, in one run.

Both backends play the *same* TextWorld tasks with the *same* LLM agent (prompting, exact token bookkeeping,
parsing, sampling settings); only the generation backend differs:

* hf: :class:`~turngym.agents.backends.HFBackend`, batched decoding with per-episode KV caches;
* vllm: :class:`~turngym.agents.backends.VLLMBackend`, a colocated ``vllm.LLM`` in the policy's dtype (fp32).

For each batch size (live episodes) it prints episodes/s (wall time of the whole rollout, worlds included),
sampled tokens/s (generation time only) and tokens per CPU second, and the vLLM / HF ratios. Runs alternate
(hf, vllm, hf, vllm, ...) with ``--repeats``, since a shared machine's speed drifts. ``--rl-steps N`` also times
N training steps of the demo's RL stage (turn-level RLOO, 16 episodes a step) with each backend, the first step
(vLLM's engine start, compilation) reported apart.

Needs vLLM's environment (``make install-vllm``, then ``.venv-vllm/bin/python``):

    .venv-vllm/bin/python bench/vllm_throughput.py                     # SmolLM2-135M-Instruct fp32, batch 16 and 32
    .venv-vllm/bin/python bench/vllm_throughput.py --repeats 2 --rl-steps 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

from turngym.agents.backends import HFBackend, VLLMBackend
from turngym.agents.llm import LLMAgent, LLMAgentConfig
from turngym.agents.models import DEFAULT_MODEL, load_policy, resolve_model
from turngym.agents.rollout import run_episodes
from turngym.envs.textworld import materialise, textworld_tasks
from turngym.envs.vector import LocalPool

ENV_ID = "turngym/TextWorld-v0"
DEMO_CONFIG = Path(__file__).resolve().parents[1] / "recipes" / "configs" / "compare" / "textworld-demo.yaml"


class TimedBackend:
    """Counts the wall and CPU time and the sampled tokens of every generate() call."""

    def __init__(self, inner) -> None:
        self.inner, self.seconds, self.cpu_seconds, self.tokens = inner, 0.0, 0.0, 0

    def generate(self, requests, sampling, stop_ids):
        start, cpu_start = time.perf_counter(), time.process_time()
        generations = self.inner.generate(requests, sampling, stop_ids)
        self.seconds += time.perf_counter() - start
        self.cpu_seconds += time.process_time() - cpu_start
        self.tokens += sum(len(g.ids) for g in generations)
        return generations

    def release(self, key):
        self.inner.release(key)

    def cache_prefix(self, ids):
        self.inner.cache_prefix(ids)


def rollout(backend, tokenizer, tasks, args: argparse.Namespace) -> dict[str, float]:
    config = LLMAgentConfig(temperature=0.7, max_new_tokens=args.max_new_tokens, response_prefix="Action:", seed=0)
    timed = TimedBackend(backend)
    pool = LocalPool.from_id(ENV_ID, len(tasks), env_kwargs={"tasks": tasks, "max_turns": args.turns})
    try:
        for index, task in enumerate(tasks):  # engines started first: a training pool is long-lived
            pool.send(index, "reset", {"seed": 0, "options": {"task": task}})
        pool.receive(wait_all=True)
        start = time.perf_counter()
        trajectories = run_episodes(LLMAgent(timed, tokenizer, config), pool, list(tasks), seed=0)
        wall = time.perf_counter() - start
    finally:
        pool.close()
    return {"episodes_per_s": len(trajectories) / wall, "tokens_per_s": timed.tokens / timed.seconds,
            "tokens_per_cpu_s": timed.tokens / timed.cpu_seconds, "tokens": timed.tokens, "wall_s": wall,
            "turns": sum(t.num_turns for t in trajectories)}


def rl_steps(use_vllm: bool, steps: int, output_dir: str) -> list[float]:
    """Seconds of each of ``steps`` training steps of the demo's RL stage (turn-level RLOO, 16 episodes a step),
    from the base policy (the demo starts from its SFT policy)."""
    from transformers import TrainerCallback

    from turngym.trainers.config import TurnGymConfig
    from turngym.trainers.trainer import TurnGymTrainer

    class StepClock(TrainerCallback):
        def __init__(self) -> None:
            self.seconds: list[float] = []

        def on_step_begin(self, args, state, control, **kwargs):
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.seconds.append(time.perf_counter() - self.start)

    clock = StepClock()
    demo = yaml.safe_load(DEMO_CONFIG.read_text())  # the demo's world and RL settings (bf16 autocast included)
    config = TurnGymConfig(**{
        **demo["world"], **demo["rl"], "algorithm": "turn_rloo", "num_train_tasks": 4 * steps, "num_eval_tasks": 0,
        "max_steps": steps, "report_to": "none", "save_strategy": "no", "eval_strategy": "no", "logging_steps": 1,
        "output_dir": output_dir, "seed": 0, "use_vllm": use_vllm, "vllm_mode": "colocate",
        "vllm_max_model_length": 2048})
    trainer = TurnGymTrainer(args=config, callbacks=[clock])
    trainer.train()
    return clock.seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="w2-o3-q4", help="TextWorld config of the rollout tasks")
    parser.add_argument("--batch", type=int, nargs="+", default=[16, 32], help="live episodes per rollout")
    parser.add_argument("--turns", type=int, default=None, help="max turns (default: 2x the walkthrough)")
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--rl-steps", type=int, default=0, help="also time this many RL steps with each backend")
    parser.add_argument("--rl-backend", choices=["hf", "vllm"], help=argparse.SUPPRESS)  # one RL timing (a child)
    args = parser.parse_args()
    if args.rl_backend:
        with tempfile.TemporaryDirectory() as scratch:
            print(json.dumps(rl_steps(args.rl_backend == "vllm", args.rl_steps, scratch)))
        return

    import torch

    torch.set_grad_enabled(False)
    tasks = materialise(textworld_tasks(args.config, "eval", n=max(args.batch)), workers=1)
    model, tokenizer = load_policy(DEFAULT_MODEL)
    start = time.perf_counter()
    vllm = VLLMBackend.colocated(resolve_model(DEFAULT_MODEL), dtype="float32", max_model_len=4096, seed=0)
    engine_start = time.perf_counter() - start
    backends = {"hf": HFBackend(model, pad_id=tokenizer.pad_token_id), "vllm": vllm}
    for backend in backends.values():  # warm-up
        rollout(backend, tokenizer, tasks.take(2), argparse.Namespace(**{**vars(args), "turns": 2}))
    results: dict[tuple[str, int], list[dict[str, float]]] = {}
    for _ in range(args.repeats):
        for batch in args.batch:
            for name, backend in backends.items():
                results.setdefault((name, batch), []).append(rollout(backend, tokenizer, tasks.take(batch), args))

    print(f"\nSmolLM2-135M-Instruct fp32 on CPU, torch threads {torch.get_num_threads()}, TextWorld {args.config}, "
          f"up to {args.turns or '2x the walkthrough'} turns, up to {args.max_new_tokens} new tokens a turn, "
          f"temperature 0.7; vLLM engine start {engine_start:.0f} s; medians of {args.repeats} run(s)\n")
    print("| batch | backend | turns | sampled tokens | episodes/s | tokens/s | tokens per CPU s |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    med = {key: {m: statistics.median(r[m] for r in runs) for m in runs[0]} for key, runs in results.items()}
    for (name, batch), r in med.items():
        print(f"| {batch} | {name} | {r['turns']:.0f} | {r['tokens']:.0f} | {r['episodes_per_s']:.3f} | "
              f"{r['tokens_per_s']:.1f} | {r['tokens_per_cpu_s']:.1f} |")
    for batch in args.batch:
        hf, v = med[("hf", batch)], med[("vllm", batch)]
        print(f"\nbatch {batch}: vLLM / HF tokens/s {v['tokens_per_s'] / hf['tokens_per_s']:.2f}x, episodes/s "
              f"{v['episodes_per_s'] / hf['episodes_per_s']:.2f}x, tokens per CPU s "
              f"{v['tokens_per_cpu_s'] / hf['tokens_per_cpu_s']:.2f}x")

    if args.rl_steps:
        # each in a fresh process: one vLLM engine per process (the trainer builds its own)
        times = {name: json.loads(subprocess.run(
            [sys.executable, __file__, "--rl-backend", name, "--rl-steps", str(args.rl_steps)], check=True,
            capture_output=True, text=True).stdout.splitlines()[-1]) for name in ("hf", "vllm")}
        print("\n| RL step (the demo's: turn-level RLOO, 16 episodes, w2-o3-q2, bf16 autocast) | first step s | "
              "later steps s (median) |")
        print("|---|---:|---:|")
        for name, seconds in times.items():
            later = statistics.median(seconds[1:]) if len(seconds) > 1 else float("nan")
            print(f"| {name} | {seconds[0]:.1f} | {later:.1f} |")


if __name__ == "__main__":
    main()
