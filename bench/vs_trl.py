"""turngym against TRL's own multi-turn loop: the same GRPO run in ``TurnGymTrainer`` and in TRL 1.16's
``GRPOTrainer(environment_factory=...)``, alternated in one run.

    .venv/bin/python bench/vs_trl.py [--rounds 2] [--steps 3] [--episodes 8] [--group 4] [--threads 1]
                                     [--model NAME] [--warm-start 12] [--work-dir DIR] [--json OUT]
    .venv/bin/python bench/vs_trl.py --report-from OUT     # the tables again, from a --json file

Both sides train the same policy on the same world with the same settings (:class:`Settings`):

* **world**: Signals (3 lights, 2 colours; dense reward, 1/3 per right command; turn limit 4), under the tools
  protocol: the model acts by calling the world's ``command`` tool. TRL's ``environment_factory`` only steps a world
  through tool calls, so turngym plays the same tool calls, not its free-form replies. GRPO's advantage is the
  episode's return on both sides (sum of the turn rewards: all TRL's loop takes), so the dense reward is the same
  number to both. The world is ``vs_trl/Signals-v0``: Signals whose tool schema is written as transformers writes
  it from TRL's tool method (a ``return`` entry, no ``additionalProperties``), so both sides render byte-identical
  prompts (checked: each side reports its prompt lengths).
* **model**: the embedded SmolLM2-135M-Instruct (or ``--model``), fp32 on CPU, ``--threads`` torch threads on both
  sides. SmolLM2's own chat template cannot render tools and TRL refuses it, so both sides use TRL's bundled
  Qwen2.5 template (the same ``<|im_start|>``/``<|im_end|>`` tokens SmolLM2 was trained with; Hermes'
  ``<tool_call>`` syntax, which TRL parses and turngym's agent reads). The base model never writes a tool call,
  so the policy both sides start from is SmolLM2 after ``--warm-start`` SFT steps on episodes played with random
  commands, rendered as tool calls (the format only: returns still vary). It is made once, in its own process, and
  kept under ``--work-dir``.
* **algorithm and limits**: GRPO (TRL's loss, ``beta`` 0, one iteration, learning rate, seed), ``--episodes``
  episodes a step in groups of ``--group``, 48 sampled tokens a turn (turngym ``max_new_tokens_per_turn``, TRL
  ``generation_kwargs.max_new_tokens``), 512 tokens of completion (``max_completion_length``), at most 4 tool
  rounds (TRL ``max_tool_calling_iterations``; the world's turn limit for turngym), temperature 1, no bf16.

Each round runs turngym, then TRL, each in a fresh process (``--rounds`` rounds: A B A B ...). Reported per side:

* seconds per step: the first step, and the median of the later ones (pooled over rounds);
* the step's rollout: seconds in TRL's ``_generate`` (turngym's episodes arrive through the same method, as
  TRL's ``rollout_func``);
* sampled tokens per second: the model's own tokens only, counted the same way on both sides, as the loss sees them:
  the sum of each completion's tool mask (TRL's ``tool_mask``; turngym's ``env_mask``, which TRL takes as its
  ``tool_mask``), i.e. what TRL logs as ``completions/mean_length``. The world's tokens (tool answers) are not
  counted; each side also counts what its generator returned (``sampled``), which must agree;
* peak resident memory of the side's process (``ru_maxrss`` from ``os.wait4``);
* how the episodes ended: finished (the world ended it: won, or its turn limit), won, cut (a token limit), and,
  on TRL's side, stopped (the model answered without a call before the world ended: TRL's loop ends there).

Load average is printed at the start and the end: on the project's shared 2-core machine, torch's OpenMP with two
threads in a loaded main thread ran 6-10x slower than with one, so both sides get the same ``--threads``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

WORLD = "vs_trl/Signals-v0"
SIDES = ("turngym", "trl")
SYSTEM_PROMPT = ("You are an agent in a text-based world. Each turn you read what happened and reply with one command "
                 "for the world to execute. Act by calling one of the tools, one call a turn.")


@dataclass
class Settings:
    """What both sides share. ``model`` is the policy both start from (after :func:`prepare_policy`)."""

    model: str = "HuggingFaceTB/SmolLM2-135M-Instruct"
    steps: int = 3
    episodes: int = 8  # per step (per_device_train_batch_size)
    group: int = 4  # num_generations
    threads: int = 1
    turns: int = 3  # lights per task
    colours: int = 2
    max_turns: int = 4
    max_new_tokens: int = 48  # per turn
    max_completion_length: int = 512
    learning_rate: float = 1e-6
    seed: int = 0
    num_tasks: int = 64
    warm_start: int = 12  # SFT steps teaching the tool-call format (0: the model as it is)
    warm_start_lr: float = 1e-4
    chat_template: str | None = None  # None: the model's own if it renders tools, else TRL's Qwen2.5 template

    def world_kwargs(self) -> dict[str, Any]:
        return {"turns": self.turns, "colours": self.colours}

    def policy_key(self) -> str:
        fields = {k: getattr(self, k) for k in ("model", "warm_start", "warm_start_lr", "seed", "turns", "colours",
                                               "max_turns", "chat_template")}
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:12]


# ---------------------------------------------------------------------- the world
@functools.cache
def trl_tool_schemas() -> tuple[str, ...]:
    """Signals' tools as transformers writes them from TRL's tool methods (what TRL renders), as JSON."""
    from transformers.utils import get_json_schema

    from turngym.trl_env import ToolsEnvironmentFactory

    factory = ToolsEnvironmentFactory("turngym/Signals-v0", {"action_protocol": "tools"})
    environment = factory()
    return tuple(json.dumps(get_json_schema(getattr(environment, tool["function"]["name"])))
                 for tool in json.loads(factory.tools_json))


def register_world() -> str:
    """``vs_trl/Signals-v0``: Signals whose tools() is what TRL renders, so both sides' prompts are identical."""
    import gymnasium as gym

    from turngym.envs.registry import register
    from turngym.envs.signals import SignalsEnv

    class SameSchemaSignals(SignalsEnv):
        def tools(self) -> list[dict[str, Any]]:
            return [json.loads(schema) for schema in trl_tool_schemas()]

    if WORLD not in gym.registry:
        register(WORLD, entry_point=SameSchemaSignals, task_panel="turngym.envs.signals:task_panel")
    return WORLD


def train_tasks(settings: Settings):
    from turngym.envs.signals import signal_tasks

    return signal_tasks("train", settings.num_tasks, settings.turns, settings.colours)


def trl_environment_factory(settings: Settings):
    from turngym import trl_env

    return trl_env.environment_factory(register_world(), action_protocol="tools", reward_mode="dense",
                                       max_turns=settings.max_turns, **settings.world_kwargs())


# ---------------------------------------------------------------------- the policy both start from
def tool_template(tokenizer, name: str | None) -> tuple[str, str]:
    """(template, its name): ``name`` (a TRL bundled template), else the model's own when TRL accepts it for tool
    calling, else TRL's Qwen2.5 template (ChatML, Hermes tool calls)."""
    import trl.chat_template_utils as templates

    if name:
        return getattr(templates, f"{name}_chat_template"), name
    if templates.supports_tool_calling(tokenizer):
        return tokenizer.chat_template, "the model's own"
    return templates.qwen2_5_chat_template, "qwen2_5"


def demonstration(tokenizer, environment, task, rng: random.Random) -> tuple[list[int], list[int]]:
    """One episode played with uniformly random commands through TRL's adapter (so the last answer carries its
    'episode over' note), rendered as tool calls, then an empty reply (the model stops calling): (ids, labels),
    the labels on the model's replies only (through each reply's end-of-turn token)."""
    from turngym.envs.signals import COMMANDS
    from turngym.envs.tasks import canonical_json

    tools = [json.loads(schema) for schema in trl_tool_schemas()]
    observation = environment.reset(task=canonical_json(task.to_dict()))
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": observation}]
    while not environment.done:
        command = rng.choice(COMMANDS)
        call = {"type": "function", "function": {"name": "command", "arguments": {"command": command}}}
        messages += [{"role": "assistant", "content": "", "tool_calls": [call]},
                     {"role": "tool", "name": "command", "content": environment.command(command=command)}]
    messages.append({"role": "assistant", "content": ""})

    def render(upto: int, generation: bool) -> str:
        return tokenizer.apply_chat_template(messages[:upto], tools=tools, tokenize=False,
                                             add_generation_prompt=generation)

    text = render(len(messages), False)
    spans = []
    for k, message in enumerate(messages):
        if message["role"] == "assistant":
            before, after = render(k, True), render(k + 1, False)
            end = after.rfind(tokenizer.eos_token) + len(tokenizer.eos_token)
            if not text.startswith(after) or not after.startswith(before) or end <= len(before):
                raise ValueError("the chat template is not prefix-preserving; cannot label the replies")
            spans.append((len(before), end))
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(encoded["input_ids"])
    labels = [i if any(a <= s and e <= b for a, b in spans) and e > s else -100
              for i, (s, e) in zip(ids, encoded["offset_mapping"], strict=True)]
    return ids, labels


def warm_start(model, tokenizer, settings: Settings) -> list[float]:
    """``settings.warm_start`` AdamW steps, one demonstration each (a fresh task each): the losses."""
    import torch

    rng = random.Random(settings.seed)
    environment = trl_environment_factory(settings)()
    tasks = list(train_tasks(settings))
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.warm_start_lr)
    model.train()
    losses = []
    for step in range(settings.warm_start):
        ids, labels = demonstration(tokenizer, environment, tasks[step % len(tasks)], rng)
        loss = model(input_ids=torch.tensor([ids]), labels=torch.tensor([labels])).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(round(loss.item(), 4))
        print(f"warm start {step + 1}/{settings.warm_start}: loss {loss.item():.3f}", flush=True)
    model.eval()
    return losses


def prepare_policy(settings: Settings, directory: Path) -> dict[str, Any]:
    """The policy both sides start from, saved to ``directory`` with its tool-calling template."""
    from turngym.agents.models import load_policy

    model, tokenizer = load_policy(settings.model)
    tokenizer.chat_template, template = tool_template(tokenizer, settings.chat_template)
    started = time.perf_counter()
    losses = warm_start(model, tokenizer, settings) if settings.warm_start else []
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    meta = {"model": settings.model, "template": template, "warm_start": settings.warm_start,
            "warm_start_lr": settings.warm_start_lr, "losses": losses,
            "seconds": round(time.perf_counter() - started, 1)}
    (directory / "vs_trl.json").write_text(json.dumps(meta, indent=1))
    return meta


# ---------------------------------------------------------------------- measuring a side
@dataclass
class Probe:
    """Times each optimizer step (a callback) and each rollout (TRL's ``_generate``, which both sides go through),
    counts the model's tokens there, and reads the episodes' outcomes (``outcomes(output) -> list[dict]``)."""

    trainer: Any
    outcomes: Any
    sampled: list[int] = field(default_factory=lambda: [0])  # the generator's own count, bumped by the side
    steps: list[float] = field(default_factory=list)
    rollouts: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        from transformers import TrainerCallback

        probe = self

        class StepTimer(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                probe._started = time.perf_counter()

            def on_step_end(self, args, state, control, **kwargs):
                probe.steps.append(time.perf_counter() - probe._started)

        original = self.trainer._generate

        def generate(prompts):
            sampled, started = self.sampled[0], time.perf_counter()
            output = original(prompts)
            seconds = time.perf_counter() - started
            if self.trainer.model.training:
                prompt_ids, completion_ids, tool_mask = output[:3]
                masks = tool_mask if tool_mask is not None else [[1] * len(c) for c in completion_ids]
                self.rollouts.append({
                    "rollout_seconds": seconds, "model_tokens": sum(sum(m) for m in masks),
                    "completion_tokens": sum(len(c) for c in completion_ids),
                    "sampled_tokens": self.sampled[0] - sampled,
                    "prompt_tokens": sorted({len(p) for p in prompt_ids}), "episodes": self.outcomes(output)})
            return output

        self.trainer._generate = generate
        self.trainer.add_callback(StepTimer())

    def result(self) -> list[dict[str, Any]]:
        if len(self.steps) != len(self.rollouts):
            raise RuntimeError(f"{len(self.steps)} steps but {len(self.rollouts)} rollouts: one a step expected")
        return [{"seconds": s, **r} for s, r in zip(self.steps, self.rollouts, strict=True)]


def run_turngym(settings: Settings, policy: str, output_dir: str) -> list[dict[str, Any]]:
    from turngym.agents.hf_backend import HFBackend
    from turngym.agents.models import load_policy
    from turngym.trainers.config import TurnGymConfig
    from turngym.trainers.trainer import TurnGymTrainer

    model, tokenizer = load_policy(policy)
    args = TurnGymConfig(
        output_dir=output_dir, model_name_or_path=policy, env_id=register_world(), env_kwargs=settings.world_kwargs(),
        action_protocol="tools", reward_mode="dense", max_turns=settings.max_turns, system_prompt=SYSTEM_PROMPT,
        max_new_tokens_per_turn=settings.max_new_tokens, max_completion_length=settings.max_completion_length,
        algorithm="grpo", num_generations=settings.group, per_device_train_batch_size=settings.episodes,
        max_steps=settings.steps, learning_rate=settings.learning_rate, beta=0.0, temperature=1.0, bf16=False,
        seed=settings.seed, logging_steps=1, report_to="none", save_strategy="no", disable_tqdm=True)
    trainer = TurnGymTrainer(model, args, tasks=train_tasks(settings), processing_class=tokenizer)

    def outcomes(output) -> list[dict[str, Any]]:
        rows = []
        for episode in output[5]["episode"]:
            t = episode.trajectory
            ended = t.terminated or t.truncation_reason == "max_turns"
            rows.append({"finished": ended, "won": t.won, "cut": not ended, "stopped": False,
                         "turns": len(t.turn_rewards), "return": float(sum(t.turn_rewards))})
        return rows

    probe = Probe(trainer, outcomes)
    original = HFBackend.generate

    def counted(backend, requests, sampling, stop_ids):
        generations = original(backend, requests, sampling, stop_ids)
        probe.sampled[0] += sum(len(g.ids) for g in generations)
        return generations

    HFBackend.generate = counted
    try:
        trainer.train()
    finally:
        HFBackend.generate = original
    return probe.result()


def run_trl(settings: Settings, policy: str, output_dir: str) -> list[dict[str, Any]]:
    import datasets
    import trl

    from turngym import trl_env
    from turngym.agents.models import load_policy
    from turngym.envs.tasks import canonical_json

    model, tokenizer = load_policy(policy)
    rows = [{"prompt": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": ""}],
             "task": canonical_json(task.to_dict()), "task_id": task.id} for task in train_tasks(settings)]
    args = trl.GRPOConfig(
        output_dir=output_dir, num_generations=settings.group, per_device_train_batch_size=settings.episodes,
        max_completion_length=settings.max_completion_length, max_tool_calling_iterations=settings.max_turns,
        generation_kwargs={"max_new_tokens": settings.max_new_tokens}, max_steps=settings.steps,
        learning_rate=settings.learning_rate, beta=0.0, temperature=1.0, bf16=False, use_cpu=True,
        seed=settings.seed, logging_steps=1, report_to="none", save_strategy="no", disable_tqdm=True)
    trainer = trl.GRPOTrainer(model=model, processing_class=tokenizer, args=args,
                              train_dataset=datasets.Dataset.from_list(rows),
                              environment_factory=trl_environment_factory(settings),
                              reward_funcs=trl_env.reward_functions())
    ends = {*trainer.eos_token_ids, tokenizer.pad_token_id}

    def outcomes(output) -> list[dict[str, Any]]:
        rows = []
        for environment, ids in zip(trainer.environments, output[1], strict=True):
            cut = not environment.done and (not ids or ids[-1] not in ends)
            rows.append({"finished": environment.done, "won": environment.won, "cut": cut,
                         "stopped": not environment.done and not cut, "turns": environment.turns,
                         "return": environment.episode_reward})
        return rows

    probe = Probe(trainer, outcomes)
    original = trainer._generate_single_turn

    def counted(*args, **kwargs):
        completion_ids, logprobs = original(*args, **kwargs)
        probe.sampled[0] += sum(len(ids) for ids in completion_ids)
        return completion_ids, logprobs

    trainer._generate_single_turn = counted
    trainer.train()
    return probe.result()


def run_side(side: str, settings: Settings, policy: str) -> dict[str, Any]:
    """Train one side ``settings.steps`` steps in this process: its per-step measurements."""
    import torch

    torch.set_num_threads(settings.threads)
    with tempfile.TemporaryDirectory(prefix=f"vs-trl-{side}-") as output_dir:
        steps = {"turngym": run_turngym, "trl": run_trl}[side](settings, policy, output_dir)
    return {"side": side, "steps": steps, "torch_threads": torch.get_num_threads()}


# ---------------------------------------------------------------------- the parent: rounds, children, summary
def run_child(command: list[str], log: Path, env: dict[str, str] | None = None) -> tuple[int, float]:
    """Run ``command`` with its output to ``log``: (exit status, its peak resident memory in GB, from wait4)."""
    with log.open("w") as out:
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, usage.ru_maxrss / 1024**2  # KB on Linux


def child_command(settings: Settings, task: str, policy: Path, out: Path) -> list[str]:
    return [sys.executable, __file__, "--child", task, "--settings", json.dumps(dataclasses.asdict(settings)),
            "--policy", str(policy), "--out", str(out)]


def child_env(settings: Settings) -> dict[str, str]:
    threads = str(settings.threads)
    return {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def summarise(result: dict[str, Any]) -> dict[str, Any]:
    """One side's numbers over its rounds (``result["rounds"]``: each a run_side result plus its peak RSS)."""
    rounds = result["rounds"]
    firsts = [r["steps"][0] for r in rounds]
    later = [s for r in rounds for s in r["steps"][1:]] or firsts
    every = [s for r in rounds for s in r["steps"]]
    episodes = [e for s in every for e in s["episodes"]]
    count = len(episodes)

    def share(key: str) -> float:
        return sum(bool(e[key]) for e in episodes) / count

    return {
        "first_step_s": statistics.median(s["seconds"] for s in firsts),
        "step_s": statistics.median(s["seconds"] for s in later),
        "rollout_s": statistics.median(s["rollout_seconds"] for s in later),
        "update_s": statistics.median(s["seconds"] - s["rollout_seconds"] for s in later),
        "tokens_per_s": sum(s["model_tokens"] for s in later) / sum(s["seconds"] for s in later),
        "rollout_tokens_per_s": sum(s["model_tokens"] for s in later) / sum(s["rollout_seconds"] for s in later),
        "model_tokens_per_episode": sum(s["model_tokens"] for s in every) / count,
        "sampled_equals_counted": all(s["sampled_tokens"] == s["model_tokens"] for s in every),
        "completion_tokens_per_episode": sum(s["completion_tokens"] for s in every) / count,
        "prompt_tokens": sorted({n for s in every for n in s["prompt_tokens"]}),
        "peak_rss_gb": max(r["peak_rss_gb"] for r in rounds),
        "episodes": count, "finished": share("finished"), "won": share("won"), "cut": share("cut"),
        "stopped": share("stopped"), "turns": sum(e["turns"] for e in episodes) / count,
        "return": sum(e["return"] for e in episodes) / count,
    }


def report(summaries: dict[str, dict[str, Any]], settings: Settings) -> str:
    ours, theirs = summaries["turngym"], summaries["trl"]
    lines = [
        (f"{settings.steps} steps x {settings.episodes} episodes (groups of {settings.group}) per side and round, "
         f"{settings.threads} torch thread(s)"), "",
        ("| side | first step (s) | s / step (median, later steps) | rollout s / step | rest of the step (s) "
         "| model tokens / s (step) | model tokens / s (rollout) | peak RSS (GB) |"),
        "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for side, s in summaries.items():
        lines.append(f"| {side} | {s['first_step_s']:.1f} | {s['step_s']:.1f} | {s['rollout_s']:.1f} "
                     f"| {s['update_s']:.1f} | {s['tokens_per_s']:.1f} | {s['rollout_tokens_per_s']:.1f} "
                     f"| {s['peak_rss_gb']:.2f} |")
    lines.append(f"| turngym / TRL | {ours['first_step_s'] / theirs['first_step_s']:.2f}x "
                 f"| {ours['step_s'] / theirs['step_s']:.2f}x | {ours['rollout_s'] / theirs['rollout_s']:.2f}x "
                 f"| {ours['update_s'] / theirs['update_s']:.2f}x "
                 f"| {ours['tokens_per_s'] / theirs['tokens_per_s']:.2f}x "
                 f"| {ours['rollout_tokens_per_s'] / theirs['rollout_tokens_per_s']:.2f}x "
                 f"| {ours['peak_rss_gb'] / theirs['peak_rss_gb']:.2f}x |")
    lines += ["", ("| side | episodes | finished | won | cut by a token limit | stopped calling early | turns "
                   "| return | model tokens / episode | completion tokens / episode | prompt tokens "
                   "| sampled = counted |"),
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for side, s in summaries.items():
        lines.append(f"| {side} | {s['episodes']} | {s['finished']:.0%} | {s['won']:.0%} | {s['cut']:.0%} "
                     f"| {s['stopped']:.0%} | {s['turns']:.2f} | {s['return']:.3f} "
                     f"| {s['model_tokens_per_episode']:.1f} | {s['completion_tokens_per_episode']:.1f} "
                     f"| {', '.join(map(str, s['prompt_tokens']))} | {s['sampled_equals_counted']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=Settings.steps)
    parser.add_argument("--episodes", type=int, default=Settings.episodes, help="episodes per step")
    parser.add_argument("--group", type=int, default=Settings.group, help="episodes per task (num_generations)")
    parser.add_argument("--threads", type=int, default=Settings.threads, help="torch threads, both sides")
    parser.add_argument("--model", default=Settings.model)
    parser.add_argument("--warm-start", type=int, default=Settings.warm_start,
                        help="SFT steps teaching the tool-call format before both sides (0: the model as it is)")
    parser.add_argument("--chat-template", default=None, help="a TRL bundled template, e.g. qwen2_5 (default: the "
                                                              "model's own if it renders tools, else qwen2_5)")
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "turngym-vs-trl")
    parser.add_argument("--json", type=Path, help="write every measurement here")
    parser.add_argument("--report-from", type=Path, help="print the report of a --json file and exit")
    parser.add_argument("--child", choices=["prepare", *SIDES], help=argparse.SUPPRESS)
    parser.add_argument("--settings", help=argparse.SUPPRESS)
    parser.add_argument("--policy", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        settings = Settings(**json.loads(args.settings))
        if args.child == "prepare":
            import torch

            torch.set_num_threads(settings.threads)
            args.out.write_text(json.dumps(prepare_policy(settings, args.policy)))
        else:
            args.out.write_text(json.dumps(run_side(args.child, settings, str(args.policy))))
        return

    if args.report_from:
        saved = json.loads(args.report_from.read_text())
        settings = Settings(**saved["settings"])
        print(report({side: summarise(saved["results"][side]) for side in SIDES}, settings))
        return

    settings = Settings(model=args.model, steps=args.steps, episodes=args.episodes, group=args.group,
                        threads=args.threads, warm_start=args.warm_start, chat_template=args.chat_template)
    work = args.work_dir
    (work / "logs").mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {loadavg()}", flush=True)
    started = time.perf_counter()
    policy = work / f"policy-{settings.policy_key()}"
    if not (policy / "vs_trl.json").is_file():
        print(f"preparing the policy both sides start from ({settings.warm_start} warm-start steps) in {policy}",
              flush=True)
        status, _ = run_child(child_command(settings, "prepare", policy, work / "prepare.json"),
                              work / "logs" / "prepare.log", child_env(settings))
        if status:
            sys.exit(f"preparing the policy failed; see {work / 'logs' / 'prepare.log'}")
    meta = json.loads((policy / "vs_trl.json").read_text())
    print(f"policy: {meta['model']}, template {meta['template']}, warm start {meta['warm_start']} steps "
          f"(losses {meta['losses'][:1]} -> {meta['losses'][-1:]})", flush=True)

    results: dict[str, dict[str, Any]] = {side: {"rounds": []} for side in SIDES}
    for round_index in range(args.rounds):
        for side in SIDES:
            out = work / f"round{round_index}-{side}.json"
            log = work / "logs" / f"round{round_index}-{side}.log"
            begun, load_before = time.perf_counter(), loadavg()
            status, peak = run_child(child_command(settings, side, policy, out), log, child_env(settings))
            if status:
                sys.exit(f"{side} failed in round {round_index + 1}; see {log}")
            measured = {**json.loads(out.read_text()), "peak_rss_gb": peak, "load": [load_before, loadavg()]}
            results[side]["rounds"].append(measured)
            seconds = ", ".join(f"{s['seconds']:.1f}" for s in measured["steps"])
            print(f"round {round_index + 1} {side}: steps {seconds} s, peak RSS {peak:.2f} GB, "
                  f"{time.perf_counter() - begun:.0f} s with start-up, load {loadavg()}", flush=True)

    summaries = {side: summarise(results[side]) for side in SIDES}
    print()
    print(report(summaries, settings))
    print(f"\nload average at the end: {loadavg()}; {time.perf_counter() - started:.0f} s in all")
    if args.json:
        args.json.write_text(json.dumps({"settings": dataclasses.asdict(settings), "policy": meta,
                                         "results": results, "summaries": summaries}, indent=1))


if __name__ == "__main__":
    main()
