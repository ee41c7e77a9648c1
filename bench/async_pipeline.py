"""Where pipelined rollouts pay: episodes/s and trainer idle time at ``max_staleness`` K = 0, 1, 2, on HF and vLLM.

Turn-level RLOO with SmolLM2-135M-Instruct (fp32), 8 episodes a step (2 tasks x 4), 8 world worker processes,
continuous batching, on two worlds whose steps are slow, where overlapping them with training should pay:

* ``swe``: the shipped SWE tasks on bubblewrap, 3 turns of shell commands; every episode is graded when it ends
  (0.3-2 s), and each command runs in the sandbox;
* ``latency``: ``turngym/Latency-v0`` (Signals, 3 turns, a log-normal step latency: median 0.5 s, sigma 1, so the
  99th percentile is ~5 s), the long-tail world.

Per run (its own process, so its peak RSS is its own and nothing carries over; runs alternate K's order between
repeats): episodes/s over the whole run and over the steps after the first (a pipeline's first step waits for
its batch in full), the **trainer's idle time**: seconds a step spends in TRL's ``rollout_func`` waiting for its
batch (the whole rollout at K = 0; at K > 0 what the pipeline had not played ahead), the sampler's idle time
(waiting for a policy version within K), the mean staleness, and peak RSS.

**The worlds' own time** W: the same 8-episode batches played by a scripted policy whose generation takes no
time (SWE: ``ls``, a search, ``git status``; latency: any reply), in the same pool, per step.

**GPU projection (not a measurement):** with K = 0 a step costs R + U (rollout R = W + G, update U); with K >= 1,
once the sampler runs ahead, max(R, U) when sampler and trainer have devices of their own, max(R, G + U) when they
share one (only the worlds' time overlaps the update). Generation G = R - W and U are this CPU's; a GPU divides G
and U by a factor s (assumed, not measured: no GPU here) while the worlds stay on CPU (:func:`projected_speedup`).

    .venv-vllm/bin/python bench/async_pipeline.py                          # both worlds, HF and vLLM, 1 repeat
    .venv-vllm/bin/python bench/async_pipeline.py --worlds latency --backends hf --steps 3
    python bench/async_pipeline.py --backends hf                          # the main environment has no vLLM

``--json PATH`` writes every run's numbers with the command.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

os.environ.setdefault("HF_HUB_OFFLINE", "1")

MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
EPISODES_PER_STEP = 8
LATENCY = {"env_id": "turngym/Signals-v0", "median": 0.5, "tail": 1.0, "turns": 3}
SWE_COMMANDS = ["```bash\nls\n```", "```bash\ngrep -rn 'def ' --include=*.py . | head -20\n```",
                "```bash\ngit status\n```"]


def world_options(world: str) -> dict[str, Any]:
    """TurnGymConfig's world options of ``world``."""
    if world == "swe":
        return {"env_id": "turngym/SWE-v0", "env_kwargs": {"reward": "ratio", "sandbox": "bwrap"},
                "train_split": "train", "action_format": "raw", "max_turns": 3, "max_new_tokens_per_turn": 32,
                "max_completion_length": 3072}
    return {"env_id": "turngym/Latency-v0", "env_kwargs": dict(LATENCY), "max_new_tokens_per_turn": 8,
            "max_completion_length": 256}


def train_tasks(world: str) -> Any:
    if world == "swe":
        return None  # the config's train_split
    from turngym.envs.signals import signal_tasks

    return signal_tasks("train", 32, turns=LATENCY["turns"])


class StepClock(TrainerCallback):
    """Stamps each optimizer step's end (``perf_counter``)."""

    def __init__(self) -> None:
        self.ends: list[float] = []

    def on_step_end(self, args, state, control, **kwargs):
        self.ends.append(time.perf_counter())


def mean_of(logs: list[dict], key: str) -> float:
    return statistics.mean(row.get(key, 0.0) for row in logs) if logs else float("nan")


def one_run(world: str, backend: str, k: int, steps: int, threads: int | None) -> dict[str, Any]:
    """Train ``steps`` steps at max_staleness ``k``; the run's numbers."""
    import torch

    from turngym.trainers.config import TurnGymConfig
    from turngym.trainers.trainer import TurnGymTrainer

    if threads:
        torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as output:
        vllm = {"use_vllm": True, "vllm_mode": "colocate", "vllm_max_model_length": 4096} if backend == "vllm" else {}
        config = TurnGymConfig(
            output_dir=output, model_name_or_path=MODEL, algorithm="turn_rloo", num_env_workers=EPISODES_PER_STEP,
            rollout_schedule="continuous", per_device_train_batch_size=EPISODES_PER_STEP, num_generations=4,
            max_steps=steps, learning_rate=1e-6, beta=0.0, temperature=1.0, use_cpu=True, bf16=False,
            report_to="none", save_strategy="no", logging_steps=1, disable_tqdm=True, max_staleness=k, seed=0,
            **world_options(world), **vllm)
        clock = StepClock()
        trainer = TurnGymTrainer(MODEL, config, tasks=train_tasks(world), callbacks=[clock])
        waits: list[float] = []
        rollout = trainer._rollout

        def timed_rollout(prompts, trl_trainer):
            start = time.perf_counter()
            try:
                return rollout(prompts, trl_trainer)
            finally:
                if trainer.model.training:
                    waits.append(time.perf_counter() - start)

        trainer.rollout_func = timed_rollout  # TRL calls the hook it was given at init
        start = time.perf_counter()
        trainer.train()
        wall = time.perf_counter() - start
        logs = [row for row in trainer.state.log_history if "episode/return" in row]  # train() closed the pipeline
    steady = clock.ends[-1] - clock.ends[0] if len(clock.ends) > 1 else float("nan")
    update = [max(0.0, (end - begin) - wait) for begin, end, wait in
              zip([start, *clock.ends[:-1]], clock.ends, waits, strict=False)]
    return {
        "world": world, "backend": backend, "k": k, "steps": len(clock.ends), "wall_s": wall,
        "episodes_per_s": EPISODES_PER_STEP * len(clock.ends) / wall,
        "steady_episodes_per_s": EPISODES_PER_STEP * (len(clock.ends) - 1) / steady,
        "trainer_idle_s_per_step": statistics.mean(waits), "trainer_idle_s": waits,
        "trainer_idle_share": sum(waits) / wall, "update_s_per_step": statistics.mean(update),
        "sampler_idle_s_per_step": mean_of(logs, "pipeline/sampler_wait_s"),
        "staleness_mean": mean_of(logs, "pipeline/staleness_mean"),
        "return_mean": mean_of(logs, "episode/return"),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "threads": torch.get_num_threads(),
    }


def world_time(world: str, steps: int) -> dict[str, Any]:
    """The worlds' own time per step: the trainer's batches played by a zero-time scripted policy."""
    from transformers import AutoTokenizer

    from turngym.agents.backends import ScriptedBackend
    from turngym.agents.llm import LLMAgent, LLMAgentConfig, reply_format
    from turngym.agents.models import resolve_model
    from turngym.agents.rollout import run_episodes
    from turngym.envs.swe import swe_tasks
    from turngym.envs.vector import make_pool

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(MODEL))
    options = world_options(world)
    kwargs = {**options["env_kwargs"]}
    if world == "swe":
        kwargs["max_turns"] = options["max_turns"]
        tasks = list(swe_tasks("train"))
        replies = SWE_COMMANDS
    else:
        tasks, replies = list(train_tasks(world)), ["1"]
    turns: dict[Any, int] = {}

    def reply(request) -> str:
        turns[request.key] = turns.get(request.key, -1) + 1
        return replies[turns[request.key] % len(replies)]

    action_format, prefix = reply_format(options["env_id"])
    config = LLMAgentConfig(action_format=action_format, response_prefix=prefix, max_new_tokens=4096,
                            max_context_tokens=1 << 20, join="turn")
    agent = LLMAgent(ScriptedBackend(reply, tokenizer.encode), tokenizer, config, name="scripted")
    pool = make_pool(options["env_id"], EPISODES_PER_STEP, env_kwargs=kwargs, num_workers=EPISODES_PER_STEP)
    walls = []
    try:
        for step in range(steps):
            batch = [tasks[(2 * step + i // 4) % len(tasks)] for i in range(EPISODES_PER_STEP)]  # 2 tasks x 4
            start = time.perf_counter()
            run_episodes(agent, pool, batch, seed=step, continuous=True)
            walls.append(time.perf_counter() - start)
    finally:
        pool.close()
    return {"world": world, "world_s_per_step": statistics.mean(walls[1:] or walls), "world_s": walls}


def projected_speedup(w: float, g: float, u: float, s: float, shared_device: bool) -> float:
    """K >= 1 against K = 0 once generation and update run ``s`` times faster and the worlds do not.

    K = 0: W + G/s + U/s. K >= 1 in steady state: max(W + G/s, U/s) when sampler and trainer have devices of their
    own (a vLLM server); max(W + G/s, G/s + U/s) when they share one (colocated: only the worlds' time overlaps).
    """
    rollout, update = w + g / s, u / s
    return (rollout + update) / max(rollout, update + (g / s if shared_device else 0.0))


def projection(runs: list[dict], worlds: dict[str, dict], factors: tuple[float, ...]) -> list[str]:
    """GPU projection rows from each world's and backend's K = 0 run (see the module docstring)."""
    cases = [(s, shared) for s in factors for shared in (False, True)]
    lines = ["| world | backend | W s | G s | U s | " + " | ".join(
        f"s={s:g}, {'one shared device' if shared else 'own devices'}" for s, shared in cases) + " |",
        "|---|---|---:|---:|---:|" + "---:|" * len(cases)]
    for run in runs:
        if run["k"] != 0 or run["world"] not in worlds:
            continue
        w = worlds[run["world"]]["world_s_per_step"]
        g, u = max(0.0, run["trainer_idle_s_per_step"] - w), run["update_s_per_step"]
        lines.append(f"| {run['world']} | {run['backend']} | {w:.1f} | {g:.1f} | {u:.1f} | " + " | ".join(
            f"{projected_speedup(w, g, u, s, shared):.2f}x" for s, shared in cases) + " |")
    return lines


HEADER = ("| world | backend | K | steps | wall s | episodes/s | after step 1 | trainer idle s/step | idle share "
          "| update s/step | sampler idle s/step | staleness | peak RSS MB |\n|---|---|---:|" + "---:|" * 10)


def row(run: dict) -> str:
    cells = [run["world"], run["backend"], run["k"], run["steps"], f"{run['wall_s']:.1f}",
             f"{run['episodes_per_s']:.3f}", f"{run['steady_episodes_per_s']:.3f}",
             f"{run['trainer_idle_s_per_step']:.1f}", f"{run['trainer_idle_share']:.2f}",
             f"{run['update_s_per_step']:.1f}", f"{run['sampler_idle_s_per_step']:.1f}",
             f"{run['staleness_mean']:.2f}", f"{run['peak_rss_mb']:.0f}"]
    return "| " + " | ".join(map(str, cells)) + " |"


def report(runs: list[dict], worlds: dict[str, dict], factors: tuple[float, ...]) -> str:
    """Every run's row, K against K = 0 (median over repeats), the worlds' time and the GPU projection."""
    lines = ["", HEADER, *(row(run) for run in runs), "", "episodes/s after step 1, K against K = 0:"]
    for world, backend in dict.fromkeys((r["world"], r["backend"]) for r in runs):
        def rate(k, world=world, backend=backend):
            return [r["steady_episodes_per_s"] for r in runs
                    if (r["world"], r["backend"], r["k"]) == (world, backend, k)]
        for k in sorted({r["k"] for r in runs} - {0}):
            ratios = [a / b for a, b in zip(rate(k), rate(0), strict=False)]
            if ratios:
                lines.append(f"  {world} {backend} K={k}: {statistics.median(ratios):.2f}x "
                             f"({', '.join(f'{r:.2f}x' for r in ratios)})")
    lines += ["", "the worlds' own time a step: " + ", ".join(
        f"{w} {t['world_s_per_step']:.1f} s" for w, t in worlds.items()),
        "", "GPU projection (assumed factors s, not measured):",
        *projection([r for r in runs if r.get("repeat", 0) == 0], worlds, factors)]
    return "\n".join(lines)


def write_json(path: Path, runs: list[dict], worlds: dict[str, dict]) -> None:
    path.write_text(json.dumps({"command": " ".join(["python", *sys.argv]), "date": time.strftime("%Y-%m-%d"),
                                "cores": os.cpu_count(), "worlds": worlds, "runs": runs}, indent=1))


def child(args: argparse.Namespace) -> None:
    if args.world_time:
        result = world_time(args.world_time, args.steps)
    else:
        world, backend, k = args.run.split(":")
        result = one_run(world, backend, int(k), args.steps, args.threads)
    print("RESULT " + json.dumps(result), flush=True)


def spawn(argv: list[str]) -> dict[str, Any]:
    """This script in a fresh process; its RESULT line (its log goes to stderr as it runs)."""
    process = subprocess.run([sys.executable, __file__, *argv], stdout=subprocess.PIPE, text=True, check=False)
    for line in process.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line.removeprefix("RESULT "))
    raise RuntimeError(f"{' '.join(argv)} failed (exit {process.returncode}): {process.stdout[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worlds", nargs="+", choices=["swe", "latency"], default=["swe", "latency"])
    parser.add_argument("--backends", nargs="+", choices=["hf", "vllm"], default=["hf", "vllm"])
    parser.add_argument("--ks", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=4, help="training steps per run")
    parser.add_argument("--repeats", type=int, default=1, help="each repeat runs the Ks in the reverse order")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--gpu-factors", nargs="+", type=float, default=[10.0, 50.0],
                        help="projection: assumed GPU speed-ups of generation and update")
    parser.add_argument("--json", type=Path, default=None, help="write every run's numbers here")
    parser.add_argument("--report", type=Path, default=None,
                        help="print the tables of a --json file again (other factors: --gpu-factors); runs nothing")
    parser.add_argument("--run", help=argparse.SUPPRESS)  # world:backend:k, in a child process
    parser.add_argument("--world-time", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run or args.world_time:
        child(args)
        return
    if args.report:
        saved = json.loads(args.report.read_text())
        print(f"{saved['command']} ({saved['date']}, {saved['cores']} cores)")
        print(report(saved["runs"], saved["worlds"], tuple(args.gpu_factors)))
        return
    if "vllm" in args.backends:
        try:
            import vllm  # noqa: F401
        except ImportError:
            parser.error("--backends vllm needs vLLM: run with .venv-vllm/bin/python (make install-vllm)")
    common = ["--steps", str(args.steps)] + (["--threads", str(args.threads)] if args.threads else [])
    print(f"cores {os.cpu_count()}, {args.steps} steps a run, {EPISODES_PER_STEP} episodes a step", flush=True)
    worlds = {}
    for world in args.worlds:
        worlds[world] = spawn(["--world-time", world, *common])
        print(f"{world}: the worlds' own time {worlds[world]['world_s_per_step']:.1f} s a step "
              f"({', '.join(f'{w:.1f}' for w in worlds[world]['world_s'])})", flush=True)
    print("\n" + HEADER, flush=True)
    runs = []
    for repeat in range(args.repeats):
        for world in args.worlds:
            for backend in args.backends:
                for k in (args.ks if repeat % 2 == 0 else args.ks[::-1]):
                    run = spawn(["--run", f"{world}:{backend}:{k}", *common])
                    runs.append(run | {"repeat": repeat})
                    print(row(run), flush=True)
                    if args.json:  # every run kept as it comes: an interrupted bench loses only the run it was in
                        write_json(args.json, runs, worlds)
    print(report(runs, worlds, tuple(args.gpu_factors)))


if __name__ == "__main__":
    main()
