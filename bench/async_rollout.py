"""Continuous batching against lockstep rollouts: episodes/s on the same episodes, in one run.

Both schedules play the same tasks with the same seeds, so they play the same episodes (the LLM agent samples
each turn from its own generator: tests/test_continuous_batching.py); only the overlap differs. The worlds
run in worker processes, one per live episode.

* ``swe``: the shipped SWE tasks on the bubblewrap sandbox, a scripted policy (``ls``, a search, the gold
  patch, submit: the submit's grading takes 0.3-2 s depending on the task) whose generation is modelled as a
  fixed ``--generation-seconds`` per batched call (a decoding call on a GPU costs about the same for 1 or 16
  rows); the model's time is a sleep, so the worlds get the CPU while it "decodes".
* ``textworld``: TextWorld (w2-o3-q2) with the default policy, SmolLM2-135M-Instruct, on this CPU.
* ``latency``: ``turngym/Latency-v0`` (Signals with a log-normal step latency: by default median 0.5 s,
  ``--tail 1.0``: 99th percentile ~5 s) with SmolLM2.
* ``--pipeline``: RL step time (turn-level RLOO, SmolLM2, the latency world, continuous batching) at
  ``max_staleness`` 0, 1 and 2 (``bench/async_pipeline.py`` measures it on SWE too, on HF and vLLM, with the
  trainer's idle time and a GPU projection).

Runs alternate (lockstep, continuous) ``--repeats`` times; the ratio is the median of the per-pair ratios.
Peak RSS of this process is printed at the end (worlds' workers not included).

    python bench/async_rollout.py                                  # all three, 1 repeat
    python bench/async_rollout.py --scenarios swe latency --repeats 3
    python bench/async_rollout.py --scenarios swe --batch-window 0.5   # + ready turns wait up to 0.5 s for others
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from dataclasses import replace
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from turngym.agents.backends import HFBackend, ScriptedBackend
from turngym.agents.llm import LLMAgent, LLMAgentConfig, reply_format
from turngym.agents.rollout import run_episodes
from turngym.envs.vector import make_pool


class ScriptedPolicy:
    """A scripted LLM agent's replies: the episode's script, turn by turn; each generate call sleeps
    ``seconds`` (the model's decoding time, whatever the batch)."""

    def __init__(self, tokenizer: Any, seconds: float) -> None:
        self.seconds, self.scripts, self.turns = seconds, {}, {}
        self.backend = ScriptedBackend(self.reply, tokenizer.encode)
        generate = self.backend.generate

        def timed(requests, sampling, stop_ids):
            time.sleep(self.seconds)
            return generate(requests, sampling, stop_ids)

        self.backend.generate = timed

    def reply(self, request) -> str:
        turn = self.turns.get(request.key, 0)
        self.turns[request.key] = turn + 1
        script = self.scripts[request.key]
        return script[min(turn, len(script) - 1)]


def swe_script(walkthrough: list[str]) -> list[str]:
    return ["```bash\nls\n```", "```bash\ngrep -rn 'def ' --include=*.py . | head -20\n```", *walkthrough]


class ScriptedAgent(LLMAgent):
    def __init__(self, policy: ScriptedPolicy, tokenizer: Any, config: LLMAgentConfig) -> None:
        super().__init__(policy.backend, tokenizer, config, name="scripted")
        self.policy = policy

    def begin(self, episode: int, observation: str, info: dict[str, Any]) -> None:
        self.policy.scripts[episode] = swe_script(list(info["walkthrough"]))
        self.policy.turns[episode] = 0
        super().begin(episode, observation, info)


SCHEDULES = {"lockstep": None, "continuous, joins per token": "token", "continuous, joins per turn": "turn"}
WINDOWED = "continuous, joins per turn, batching window"  # --batch-window s: ready turns wait for others


def schedule_of(name: str, window: float) -> tuple[str | None, float]:
    """(join mode or None for lockstep, batching window) of a schedule's name."""
    return ("turn", window) if name == WINDOWED else (SCHEDULES[name], 0.0)


def timed_rollout(make_agent, env_id: str, env_kwargs: dict, tasks: list, live: int, schedule: str,
                  window: float = 0.0) -> dict:
    pool = make_pool(env_id, live, env_kwargs=env_kwargs, num_workers=live)
    try:
        for index in range(live):  # start every worker and engine: a training pool is long-lived
            pool.send(index, "reset", {"seed": 0, "options": {"task": tasks[index % len(tasks)]}})
        pool.receive(wait_all=True)
        join, window = schedule_of(schedule, window)
        agent = make_agent(join or "token")
        start = time.perf_counter()
        trajectories = run_episodes(agent, pool, tasks, seed=0, continuous=join is not None, batch_window=window)
        wall = time.perf_counter() - start
    finally:
        pool.close()
    return {"wall_s": wall, "episodes": len(trajectories), "turns": sum(t.num_turns for t in trajectories),
            "won": sum(t.won for t in trajectories), "actions": [t.actions for t in trajectories],
            "passes": getattr(agent.backend, "forward_passes", "-"),
            "repacks": getattr(agent._decoder, "repacks", "-")}


def scenario(name: str, args: argparse.Namespace) -> tuple[Any, str, dict, list, int]:
    """(agent factory, env id, env kwargs, tasks, live episodes) of one scenario."""
    if name == "swe":
        from transformers import AutoTokenizer

        from turngym.agents.models import resolve_model
        from turngym.envs.swe import swe_tasks

        tokenizer = AutoTokenizer.from_pretrained(resolve_model(args.model))
        tasks = list(swe_tasks(None))[: args.swe_tasks]
        action_format, prefix = reply_format("turngym/SWE-v0")
        config = LLMAgentConfig(action_format=action_format, response_prefix=prefix, max_new_tokens=4096,
                                max_context_tokens=1 << 20)
        return (lambda join: ScriptedAgent(ScriptedPolicy(tokenizer, args.generation_seconds), tokenizer, config),
                "turngym/SWE-v0", {"sandbox": "bwrap", "tasks": swe_tasks(None)}, tasks, args.live)
    from turngym.agents.models import load_policy

    model, tokenizer = load_policy(args.model, device="cpu")
    action_format, prefix = reply_format("turngym/TextWorld-v0")
    config = LLMAgentConfig(action_format=action_format, response_prefix=prefix, max_new_tokens=12,
                            temperature=0.7, seed=0)

    def agent(join: str) -> LLMAgent:
        return LLMAgent(HFBackend(model, pad_id=tokenizer.pad_token_id), tokenizer, replace(config, join=join))

    if name == "textworld":
        from turngym.envs.textworld import materialise, textworld_tasks

        tasks = list(materialise(textworld_tasks("w2-o3-q2", "eval", n=args.episodes), workers=2, progress=False))
        return agent, "turngym/TextWorld-v0", {"tasks": tasks, "max_turns": 8}, tasks, args.live
    from turngym.envs.signals import signal_tasks

    tasks = list(signal_tasks("train", n=args.episodes, turns=4))
    kwargs = {"env_id": "turngym/Signals-v0", "median": args.median, "tail": args.tail, "turns": 4}
    return agent, "turngym/Latency-v0", kwargs, tasks, args.live


def pipelined_steps(args: argparse.Namespace) -> list[str]:
    """RL step time of turn-level RLOO on the latency world with SmolLM2 at max_staleness K = 0, 1, 2."""
    import tempfile

    import torch

    from turngym.envs.signals import signal_tasks
    from turngym.trainers.config import TurnGymConfig
    from turngym.trainers.trainer import TurnGymTrainer

    lines = ["| max_staleness | steps | wall s | s / step | mean staleness | trainer waiting s / step |",
             "|---:|---:|---:|---:|---:|---:|"]
    for k in (0, 1, 2):
        with tempfile.TemporaryDirectory() as output:
            config = TurnGymConfig(
                output_dir=output, model_name_or_path=args.model, env_id="turngym/Latency-v0",
                env_kwargs={"env_id": "turngym/Signals-v0", "median": args.median, "tail": args.tail, "turns": 3},
                num_env_workers=8, rollout_schedule="continuous", max_new_tokens_per_turn=8,
                per_device_train_batch_size=8, num_generations=4, max_steps=args.steps, learning_rate=1e-6,
                max_completion_length=256, report_to="none", save_strategy="no", logging_steps=1,
                disable_tqdm=True, max_staleness=k, bf16=False)
            trainer = TurnGymTrainer(args.model, config, tasks=signal_tasks("train", 32, turns=3))
            start = time.perf_counter()
            with torch.enable_grad():  # main() turns gradients off for the rollout runs
                trainer.train()
            wall = time.perf_counter() - start
            rows = [r for r in trainer.state.log_history if "episode/return" in r]
            staleness = statistics.mean(r.get("pipeline/staleness_mean", 0.0) for r in rows)
            waiting = statistics.mean(r.get("pipeline/trainer_wait_s", 0.0) for r in rows)
            lines.append(f"| {k} | {len(rows)} | {wall:.1f} | {wall / len(rows):.1f} | {staleness:.2f} | "
                         f"{waiting:.1f} |")
            print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", nargs="*", choices=["swe", "textworld", "latency"],
                        default=["swe", "textworld", "latency"])
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--episodes", type=int, default=32, help="episodes per run (textworld, latency)")
    parser.add_argument("--swe-tasks", type=int, default=16, help="SWE tasks per run")
    parser.add_argument("--live", type=int, default=8, help="live episodes, each world in its own worker")
    parser.add_argument("--generation-seconds", type=float, default=0.5, help="swe: the modelled decoding call")
    parser.add_argument("--batch-window", type=float, default=0.0,
                        help="also: continuous, joins per turn, with this batching window (s)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--median", type=float, default=0.5, help="latency: the median step latency, s")
    parser.add_argument("--tail", type=float, default=1.0, help="latency: the log-normal's sigma")
    parser.add_argument("--pipeline", action="store_true", help="also: RL step time at max_staleness 0, 1, 2")
    parser.add_argument("--steps", type=int, default=3, help="--pipeline: training steps per run")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads (default: torch's; 1 on a machine shared with other work)")
    args = parser.parse_args()

    import torch

    torch.set_grad_enabled(False)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch threads {torch.get_num_threads()}, cores {os.cpu_count()}, live episodes {args.live}")
    print("\n| scenario | schedule | episodes | turns | won | forward passes | re-packs | wall s | episodes/s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    summary = []
    for name in args.scenarios:
        make_agent, env_id, kwargs, tasks, live = scenario(name, args)
        schedules = list(SCHEDULES) if name != "swe" else ["lockstep", "continuous, joins per turn"]
        schedules += [WINDOWED] if args.batch_window > 0 else []
        walls: dict[str, list[float]] = {schedule: [] for schedule in schedules}
        for _ in range(args.repeats):
            runs = {schedule: timed_rollout(make_agent, env_id, kwargs, tasks, live, schedule, args.batch_window)
                    for schedule in schedules}
            if any(run["actions"] != runs["lockstep"]["actions"] for run in runs.values()):
                print(f"WARNING: {name}: the schedules played different episodes")
            for schedule, run in runs.items():
                walls[schedule].append(run["wall_s"])
                print(f"| {name} | {schedule} | {run['episodes']} | {run['turns']} | {run['won']} | {run['passes']} "
                      f"| {run['repacks']} | {run['wall_s']:.1f} | {run['episodes'] / run['wall_s']:.2f} |", flush=True)
        for schedule in schedules[1:]:
            ratios = [a / b for a, b in zip(walls["lockstep"], walls[schedule], strict=True)]
            summary.append(f"{name}: {schedule} / lockstep episodes/s = median {statistics.median(ratios):.2f}x "
                           f"({', '.join(f'{r:.2f}x' for r in ratios)})")
    print("\n" + "\n".join(summary))
    if args.pipeline:
        print("\n" + "\n".join(pipelined_steps(args)))
    print(f"peak RSS of the rollout process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
