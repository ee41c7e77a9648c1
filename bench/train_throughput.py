r"""Training-step cost: whole-episode packing against one sample per turn, on the same episodes.

Both layouts train the same model tokens of the same multi-turn episodes, with the same loss:

* packed (ours): one sequence per episode, ``prompt_ids + completion_ids``; the loss covers the
  sampled tokens only (``env_mask``), so every turn is trained in one pass over the episode.
* per-turn (the verl-agent layout): for each turn t, one sample whose prompt is the whole history
  up to turn t's generation and whose completion is turn t's sampled tokens. Each turn's prompt
  repeats the history, so an episode of T turns is encoded T times, ever longer.

A training step is the forward and backward pass of a policy-gradient loss over all samples,
micro-batched identically (the same number of samples per micro-batch, right padding), then one
AdamW step. The loss is ``-sum(A * log pi(token)) / N`` over the step's N trained tokens, so both
layouts compute the same objective and the same gradient; only the work differs.

For each number of turns it prints the tokens processed (padded and unpadded), the median step
time and the peak memory of both layouts, and their ratio per-turn / packed. Peak memory is the
step's working memory: its peak over what the process held before (weights, gradient buffers,
AdamW state), which is the same in both layouts. On CPU every measurement runs in a fresh
process and memory is the peak RSS; on CUDA, torch's peak allocated memory.

    # SmolLM2-135M-Instruct, fp32, CPU: 2 episodes per turn count, 4/8/16 turns
    python bench/train_throughput.py
    # the same at 1 thread: steadier on a busy machine (25-35 minutes here)
    python bench/train_throughput.py --threads 1
    # GPU: record the episodes where TextWorld is installed, then measure them on the GPU machine
    python bench/train_throughput.py --episodes 8 --repeats 0 --episodes-file episodes.json
    python bench/train_throughput.py --device cuda --model-config qwen2.5-0.5b --dtype bf16 --episodes 8 \
        --episodes-file episodes.json
    python bench/train_throughput.py --model-config tiny --turns 2 4 --repeats 1    # a smoke run, under a minute
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

if TYPE_CHECKING:  # imported where used: measuring needs only torch and transformers (the GPU machine has no gymnasium)
    from turngym.trainers.episodes import Episode

# Model shapes for runs with random weights (no download needed). qwen2.5-0.5b is the same shape as
# in bench/rollout_throughput.py; tiny is for smoke runs of this script.
MODEL_CONFIGS = {
    "qwen2.5-0.5b": {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
                     "num_attention_heads": 14, "num_key_value_heads": 2, "max_position_embeddings": 32768,
                     "rope_theta": 1_000_000.0, "tie_word_embeddings": True},
    "tiny": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "max_position_embeddings": 32768, "tie_word_embeddings": True},
}
DTYPES = {"fp32": "float32", "bf16": "bfloat16"}
LAYOUTS = ("packed", "per-turn")

# Scripted replies: a short thought, then the command, as a small instruct model writes them
# (10-30 tokens with the end-of-turn token).
THOUGHTS = (
    "Let me look around first.",
    "I have not tried this yet.",
    "This might open the way forward, so I will try it.",
    "The quest probably needs an object from this room. I should check what is here.",
    "Nothing happened last time. Trying something different.",
    "I should keep exploring until I find the container the key belongs to.",
)


# ---------------------------------------------------------------------------- episodes
def play_episodes(tokenizer: Any, env_id: str, turns: int, count: int, *, env_kwargs: dict[str, Any] | None = None,
                  seed: int = 0, max_tries: int = 20) -> list[Episode]:
    """``count`` episodes of exactly ``turns`` turns, recorded by the real LLM agent.

    The agent is :class:`~turngym.agents.llm.LLMAgent` (chat template, exact token bookkeeping) on a
    :class:`~turngym.agents.backends.ScriptedBackend` that replies with a thought and a random admissible
    command, so the token layout is exactly a rollout's. An episode that ends early (a lucky win)
    is replayed with other commands: every episode must have ``turns`` turns.
    """
    import gymnasium as gym

    from turngym import envs  # noqa: F401  (registers the turngym/ ids)
    from turngym.agents.backends import ScriptedBackend
    from turngym.agents.llm import LLMAgent, LLMAgentConfig
    from turngym.agents.rollout import Trajectory
    from turngym.trainers.episodes import Episode

    rng = random.Random(seed)
    reply = {"text": ""}
    backend = ScriptedBackend(lambda request: reply["text"],
                              lambda text: tokenizer.encode(text, add_special_tokens=False))
    agent = LLMAgent(backend, tokenizer, LLMAgentConfig(max_new_tokens=64, max_context_tokens=1 << 20))
    env = gym.make(env_id, max_turns=turns, **(env_kwargs or {})).unwrapped
    tasks = list(env.tasks)
    episodes: list[Episode] = []
    try:
        for index in range(count):
            for _ in range(max_tries):
                observation, info = env.reset(seed=seed + index, options={"task": tasks[index % len(tasks)]})
                agent.begin(0, observation, info)
                trajectory = Trajectory(task=dict(info["task"]), observations=[observation])
                done = False
                while not done:
                    command = rng.choice(info["admissible_commands"])
                    reply["text"] = f"{rng.choice(THOUGHTS)}\nAction: {command}"
                    [action] = agent.act([0])
                    observation, reward, terminated, truncated, info = env.step(action)
                    agent.observe(0, action, observation, reward, info)
                    trajectory.actions.append(action)
                    trajectory.turn_rewards.append(float(reward))
                    trajectory.won = bool(info.get("won"))
                    trajectory.terminated, trajectory.truncated = terminated, truncated
                    done = terminated or truncated
                trajectory.record = agent.end(0)
                if trajectory.num_turns == turns:
                    break
            else:
                raise RuntimeError(f"no episode of {turns} turns in {max_tries} tries on {env_id}: "
                                   "raise max_turns or pick other tasks")
            episode = Episode.from_trajectory(trajectory)
            episode.validate()
            episodes.append(episode)
    finally:
        env.close()
    return episodes


def textworld_env_kwargs(config: str, count: int) -> dict[str, Any]:
    """Held-out TextWorld games (generated once, then cached), the engine in-process."""
    from turngym.envs.textworld import materialise, textworld_tasks

    tasks = materialise(textworld_tasks(config, "eval", n=count), workers=2, progress=False)
    return {"tasks": tasks, "engine_isolation": "none"}


# What measuring reads of an episode; saved flat, so a GPU machine loads them without turngym.
SAVED_FIELDS = ("group", "task", "prompt_ids", "completion_ids", "env_mask", "turn_index", "turn_ends", "logprobs",
                "turn_rewards", "won", "terminated", "truncated", "truncation_reason", "invalid_actions")


def save_episodes(path: Path, episodes: dict[int, list[Episode]], *, vocab_size: int, pad_id: int,
                  source: dict[str, Any]) -> None:
    """Write episodes (and what measuring needs of the tokenizer) as JSON."""
    import json

    def flat(episode: Episode) -> dict[str, Any]:
        return {name: getattr(episode, name) for name in SAVED_FIELDS}

    payload = {"source": source, "vocab_size": vocab_size, "pad_id": pad_id,
               "episodes": {str(turns): [flat(e) for e in group] for turns, group in episodes.items()}}
    path.write_text(json.dumps(payload))


def load_episodes(path: Path, turns: Sequence[int], count: int) -> tuple[dict[int, list[Any]], int, int]:
    """Episodes saved by :func:`save_episodes`, as plain records (no turngym import needed), with the
    tokenizer's vocabulary size and pad id."""
    import json

    payload = json.loads(path.read_text())
    episodes: dict[int, list[Any]] = {}
    for turn_count in turns:
        saved = payload["episodes"].get(str(turn_count), [])
        if len(saved) < count:
            raise ValueError(f"{path} holds {len(saved)} episodes of {turn_count} turns, not {count}: "
                             "delete it to record new ones, or ask for fewer")
        episodes[turn_count] = [SimpleNamespace(**e) for e in saved[:count]]
    return episodes, payload["vocab_size"], payload["pad_id"]


def record_episodes(args: argparse.Namespace) -> tuple[dict[int, list[Any]], int, int]:
    """The run's episodes per turn count, with the tokenizer's vocabulary size and pad id.

    With ``--episodes-file``, episodes are read from that file when it exists and written there
    when it does not: a machine without TextWorld (the GPU machine) measures the same episodes.
    """
    path = Path(args.episodes_file) if args.episodes_file else None
    if path is not None and path.exists():
        return load_episodes(path, args.turns, args.episodes)
    tokenizer = load_tokenizer(args.model)
    env_kwargs = textworld_env_kwargs(args.config, args.episodes)
    episodes = {turns: play_episodes(tokenizer, "turngym/TextWorld-v0", turns, args.episodes, env_kwargs=env_kwargs,
                                     seed=args.seed) for turns in args.turns}
    if path is not None:
        save_episodes(path, episodes, vocab_size=len(tokenizer), pad_id=tokenizer.pad_token_id,
                      source={"tokenizer": args.model, "config": args.config, "seed": args.seed})
    return episodes, len(tokenizer), tokenizer.pad_token_id


# ---------------------------------------------------------------------------- the two layouts
@dataclass
class Sample:
    """One training sequence: the loss covers the tokens where ``loss_mask`` is 1."""

    input_ids: list[int]
    loss_mask: list[int]
    advantages: list[float]

    def __len__(self) -> int:
        return len(self.input_ids)


def turn_advantages(episodes: Sequence[Episode], seed: int = 0) -> list[list[float]]:
    """One advantage per turn of each episode. Their values do not change the cost; drawn from a
    seeded normal so that a test can compare the two layouts' gradients."""
    rng = random.Random(seed)
    return [[rng.gauss(0.0, 1.0) for _ in episode.turn_ends] for episode in episodes]


def packed_samples(episodes: Sequence[Episode], advantages: Sequence[Sequence[float]]) -> list[Sample]:
    """Ours: one sample per episode; the loss covers the sampled tokens of every turn."""
    samples = []
    for episode, turn_adv in zip(episodes, advantages, strict=True):
        prompt = len(episode.prompt_ids)
        samples.append(Sample(
            input_ids=episode.prompt_ids + episode.completion_ids,
            loss_mask=[0] * prompt + list(episode.env_mask),
            advantages=[0.0] * prompt + [turn_adv[t] * m for t, m in zip(episode.turn_index, episode.env_mask)],
        ))
    return samples


def turn_spans(episode: Episode) -> list[tuple[int, int]]:
    """``(start, end)`` in ``completion_ids`` of each turn's sampled tokens (``end`` exclusive).

    A turn's sampled tokens are contiguous in the token record: the generation, then (context only)
    a forced end-of-turn token and the environment's reply.
    """
    spans = []
    for turn, last in enumerate(episode.turn_ends):
        start = last
        while start > 0 and episode.env_mask[start - 1] == 1 and episode.turn_index[start - 1] == turn:
            start -= 1
        spans.append((start, last + 1))
    return spans


def per_turn_samples(episodes: Sequence[Episode], advantages: Sequence[Sequence[float]]) -> list[Sample]:
    """verl-agent's layout: one sample per turn, the whole history as its prompt, the turn's sampled
    tokens as its completion. Samples are in episode order, then turn order."""
    samples = []
    for episode, turn_adv in zip(episodes, advantages, strict=True):
        for turn, (start, end) in enumerate(turn_spans(episode)):
            history = episode.prompt_ids + episode.completion_ids[:start]
            completion = episode.completion_ids[start:end]
            samples.append(Sample(history + completion, [0] * len(history) + [1] * len(completion),
                                  [0.0] * len(history) + [turn_adv[turn]] * len(completion)))
    return samples


def build_layout(layout: str, episodes: Sequence[Episode], advantages: Sequence[Sequence[float]]) -> list[Sample]:
    if layout == "packed":
        return packed_samples(episodes, advantages)
    if layout == "per-turn":
        return per_turn_samples(episodes, advantages)
    raise ValueError(f"unknown layout {layout!r}; choose from {', '.join(LAYOUTS)}")


def micro_batches(samples: Sequence[Sample], size: int) -> list[list[Sample]]:
    """Consecutive groups of ``size`` samples, in order (TRL does not sort by length either)."""
    return [list(samples[i:i + size]) for i in range(0, len(samples), size)]


def token_counts(samples: Sequence[Sample], micro_batch_size: int) -> dict[str, int]:
    """Samples, micro-batches, trained tokens, and tokens processed without and with right padding."""
    batches = micro_batches(samples, micro_batch_size)
    return {
        "samples": len(samples),
        "micro_batches": len(batches),
        # the first token is never predicted: a sequence's loss covers positions 1..L-1
        "trained": sum(sum(s.loss_mask[1:]) for s in samples),
        "unpadded": sum(len(s) for s in samples),
        "padded": sum(len(batch) * max(len(s) for s in batch) for batch in batches),
    }


# ---------------------------------------------------------------------------- a training step
def collate(batch: Sequence[Sample], pad_id: int, device: Any) -> dict[str, Any]:
    """Right-padded tensors of one micro-batch."""
    import torch

    width = max(len(s) for s in batch)

    def pad(rows: list[list[Any]], value: Any, dtype: Any) -> Any:
        return torch.tensor([row + [value] * (width - len(row)) for row in rows], dtype=dtype, device=device)

    return {
        "input_ids": pad([s.input_ids for s in batch], pad_id, torch.long),
        "attention_mask": pad([[1] * len(s) for s in batch], 0, torch.long),
        "loss_mask": pad([s.loss_mask for s in batch], 0, torch.bool),
        "advantages": pad([s.advantages for s in batch], 0.0, torch.float32),
    }


def _selective_log_softmax() -> Callable[[Any, Any], Any]:
    """TRL's memory-lean ``log_softmax`` then ``gather``; an equivalent where TRL is not installed
    (the GPU machine)."""
    try:
        from trl.trainer.utils import selective_log_softmax
    except ImportError:
        def selective_log_softmax(logits: Any, index: Any) -> Any:
            return logits.log_softmax(-1).gather(-1, index.unsqueeze(-1)).squeeze(-1)
    return selective_log_softmax


def token_logprobs(model: Any, batch: dict[str, Any], head: str) -> tuple[Any, Any]:
    """Log-probabilities of the trained tokens of a micro-batch (flat) and their advantages.

    ``head="trained"`` runs the output layer only where a trained token is predicted, so it costs
    the same in both layouts (they train the same tokens); ``"all"`` is the plain forward pass,
    with logits at every position.
    """
    targets = batch["input_ids"][:, 1:]
    selected = batch["loss_mask"][:, 1:]
    selective_log_softmax = _selective_log_softmax()
    if head == "trained":
        hidden = model.base_model(input_ids=batch["input_ids"],
                                  attention_mask=batch["attention_mask"]).last_hidden_state
        logits = model.get_output_embeddings()(hidden[:, :-1][selected]).float()
        logprobs = selective_log_softmax(logits, targets[selected])
    elif head == "all":
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
        logprobs = selective_log_softmax(logits, targets)[selected].float()
    else:
        raise ValueError(f"unknown head {head!r}; choose 'trained' or 'all'")
    return logprobs, batch["advantages"][:, 1:][selected]


def train_step(model: Any, optimizer: Any, samples: Sequence[Sample], micro_batch_size: int, pad_id: int,
               head: str = "trained", *, update: bool = True) -> float:
    """Forward and backward over every micro-batch (gradients accumulate), then the optimizer step.

    loss = -sum_i A_i log pi(token_i) / N, over the step's N trained tokens: one normaliser for the
    whole step makes both layouts' objective (and gradient) identical.
    """
    device = next(model.parameters()).device
    total = token_counts(samples, micro_batch_size)["trained"]
    loss_sum = 0.0
    for batch in micro_batches(samples, micro_batch_size):
        logprobs, advantages = token_logprobs(model, collate(batch, pad_id, device), head)
        loss = -(advantages * logprobs).sum() / total
        loss.backward()
        loss_sum += float(loss.detach())
    if update:
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)  # keep the buffers, as the baseline does
    return loss_sum


# ---------------------------------------------------------------------------- measurement
@dataclass(frozen=True)
class ModelSpec:
    """What a measuring process builds (the named model, or random weights of a config's shape) and
    how it runs (``threads``: torch's CPU threads, None for torch's default)."""

    model: str
    config: str | None
    vocab_size: int
    device: str = "cpu"
    dtype: str = "fp32"
    lr: float = 1e-6
    threads: int | None = None


def load_model(spec: ModelSpec) -> Any:
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    if spec.config is None:
        from turngym.agents.models import load_policy

        model, _ = load_policy(spec.model, device=spec.device, dtype=DTYPES[spec.dtype])
    else:
        from transformers import Qwen2Config, Qwen2ForCausalLM

        torch.manual_seed(0)
        config = Qwen2Config(vocab_size=spec.vocab_size, **MODEL_CONFIGS[spec.config])
        with torch.device(spec.device):  # initialised where it runs: a CPU init of 0.5B weights takes far longer
            model = Qwen2ForCausalLM(config)
        model = model.to(dtype=getattr(torch, DTYPES[spec.dtype]))
    return model.train()


def make_optimizer(model: Any, lr: float) -> Any:
    """AdamW with its state and the gradient buffers allocated now, as in a trainer's steady state.

    They take the same memory in both layouts, so they belong to the baseline that peak memory is
    measured over. The state comes from one step on zero gradients, which (no weight decay) leaves
    the weights as they are.
    """
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    for parameter in model.parameters():
        parameter.grad = torch.zeros_like(parameter)
    optimizer.step()
    optimizer.zero_grad(set_to_none=False)
    return optimizer


_LOADED: dict[ModelSpec, tuple[Any, Any]] = {}  # in-process measurements reuse the model


def measure(spec: ModelSpec, samples: list[Sample], micro_batch_size: int, pad_id: int, head: str,
            fresh_process: bool) -> dict[str, float | None]:
    """Time one training step after a warm-up; measure its peak memory over the memory held before.

    The warm-up is the forward and backward pass of the step's longest micro-batch, so that
    allocations and kernel choices of that size happen before the clock starts; it cannot raise
    the peak above the step's own. Wall time and the process's CPU time (all threads) are both
    kept: on a shared machine another process taking a core stretches a 2-thread step's wall time.

    Memory is the peak over the baseline (weights, gradient buffers, AdamW state; on CPU also the
    libraries): on CUDA torch's peak allocated memory, on CPU the peak RSS (``ru_maxrss``), reset
    at the baseline through ``/proc/self/clear_refs``. Without the reset a spawned process's
    ``ru_maxrss`` starts at its parent's RSS and includes the model's loading. CPU memory is only
    measured in a fresh process: freed memory the allocator keeps would hide a later step's peak.
    """
    import torch

    _selective_log_softmax()  # imports TRL now: a first import inside the measured window would count as step memory

    if spec.threads:
        torch.set_num_threads(spec.threads)
    if spec not in _LOADED:
        model = load_model(spec)
        _LOADED[spec] = (model, make_optimizer(model, spec.lr))
    model, optimizer = _LOADED[spec]
    cuda = torch.device(spec.device).type == "cuda"
    _synchronise(cuda)
    peak_known = (cuda or fresh_process) and _reset_peak_memory(cuda)
    baseline = torch.cuda.memory_allocated() if cuda else _current_rss()
    longest = max(micro_batches(samples, micro_batch_size), key=lambda batch: max(len(s) for s in batch))
    train_step(model, optimizer, longest, micro_batch_size, pad_id, head, update=False)
    optimizer.zero_grad(set_to_none=False)
    _synchronise(cuda)
    start, cpu_start = time.perf_counter(), time.process_time()
    train_step(model, optimizer, samples, micro_batch_size, pad_id, head)
    _synchronise(cuda)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    peak = None
    if peak_known:
        high = torch.cuda.max_memory_allocated() if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        peak = high - baseline
    return {"seconds": seconds, "cpu_seconds": cpu_seconds, "peak_bytes": peak, "baseline_bytes": baseline}


def _reset_peak_memory(cuda: bool) -> bool:
    """Start a new high-water mark; False where the platform cannot (then no peak is reported)."""
    import torch

    if cuda:
        torch.cuda.reset_peak_memory_stats()
        return True
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")  # Linux >= 4.0: reset the peak RSS (VmHWM, and with it ru_maxrss)
        return True
    except OSError:
        return False


def _current_rss() -> int:
    """This process's resident memory now, in bytes (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _synchronise(cuda: bool) -> None:
    import torch

    if cuda:
        torch.cuda.synchronize()


def measure_in_fresh_process(*args: Any) -> dict[str, float | None]:
    """:func:`measure` in a new process, which holds nothing but the model and the optimizer."""
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(measure, *args, fresh_process=True).result()


# ---------------------------------------------------------------------------- the run
def load_tokenizer(model: str) -> Any:
    from transformers import AutoTokenizer

    from turngym.agents.models import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(model))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def run(args: argparse.Namespace, say: Callable[[str], None]) -> dict[int, dict[str, dict[str, Any]]]:
    """Measure every (turns, layout) ``args.repeats`` times, interleaved; returns counts and runs."""
    all_episodes, vocab_size, pad_id = record_episodes(args)
    spec = ModelSpec(args.model, args.model_config, vocab_size, args.device, args.dtype, threads=args.threads)
    fresh = torch_device_type(args.device) == "cpu"
    results: dict[int, dict[str, dict[str, Any]]] = {}
    for turns, episodes in all_episodes.items():
        advantages = turn_advantages(episodes, args.seed)
        results[turns] = {}
        for layout in LAYOUTS:
            samples = build_layout(layout, episodes, advantages)
            results[turns][layout] = {"samples": samples, "counts": token_counts(samples, args.micro_batch_size),
                                      "runs": []}
        counts = {layout: results[turns][layout]["counts"] for layout in LAYOUTS}
        say(f"{turns} turns: {args.episodes} episodes ({episode_shape(episodes)}); tokens processed: packed "
            f"{counts['packed']['padded']}, per-turn {counts['per-turn']['padded']}")
    for repeat in range(args.repeats):
        # Alternate which layout goes first, so that a drift in machine load favours neither.
        order = LAYOUTS if repeat % 2 == 0 else LAYOUTS[::-1]
        for turns in args.turns:
            for layout in order:
                entry = results[turns][layout]
                job = (spec, entry["samples"], args.micro_batch_size, pad_id, args.head)
                result = measure_in_fresh_process(*job) if fresh else measure(*job, fresh_process=False)
                entry["runs"].append(result)
                memory = f", peak +{result['peak_bytes'] / 2**20:.0f} MiB" if result["peak_bytes"] is not None else ""
                say(f"[repeat {repeat + 1}/{args.repeats}] {turns} turns, {layout}: {result['seconds']:.2f} s "
                    f"({result['cpu_seconds']:.2f} CPU s){memory}")
    return results


def episode_shape(episodes: Sequence[Episode]) -> str:
    """Mean lengths in tokens: first prompt, a turn's sampled reply, an environment turn."""
    turns = sum(len(e.turn_ends) for e in episodes)
    sampled = sum(sum(e.env_mask) for e in episodes)
    context = sum(len(e.completion_ids) for e in episodes) - sampled
    prompt = statistics.mean(len(e.prompt_ids) for e in episodes)
    return (f"prompt {prompt:.0f}, reply {sampled / turns:.1f}, environment turn "
            f"{context / max(turns - len(episodes), 1):.1f} tokens on average")


def torch_device_type(device: str) -> str:
    return device.split(":")[0]


def summarise(entry: dict[str, Any]) -> dict[str, Any]:
    """Medians over the repeats, with the token counts."""
    runs = entry["runs"]
    seconds = statistics.median(r["seconds"] for r in runs)
    peaks = [r["peak_bytes"] for r in runs if r["peak_bytes"] is not None]
    counts = entry["counts"]
    return {**counts, "seconds": seconds, "cpu_seconds": statistics.median(r["cpu_seconds"] for r in runs),
            "peak_mib": statistics.median(peaks) / 2**20 if peaks else None,
            "trained_per_s": counts["trained"] / seconds, "padded_per_s": counts["padded"] / seconds}


def print_table(results: dict[int, dict[str, dict[str, Any]]]) -> None:
    print("| turns | layout | samples | trained tokens | tokens processed (padded) | unpadded | step s | step CPU s | "
          "trained tokens/s | processed tokens/s | peak memory MiB |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for turns, entries in results.items():
        rows = {layout: summarise(entries[layout]) for layout in LAYOUTS}
        for layout, r in rows.items():
            peak = f"{r['peak_mib']:.0f}" if r["peak_mib"] is not None else "-"
            label = "packed (ours)" if layout == "packed" else "per-turn"
            print(f"| {turns} | {label} | {r['samples']} | {r['trained']} | {r['padded']} | {r['unpadded']} | "
                  f"{r['seconds']:.2f} | {r['cpu_seconds']:.2f} | {r['trained_per_s']:.0f} | {r['padded_per_s']:.0f} | "
                  f"{peak} |")
        a, b = rows["packed"], rows["per-turn"]

        def ratio(key: str, bold: bool = False, a: dict[str, Any] = a, b: dict[str, Any] = b) -> str:
            if not a[key] or not b[key]:
                return "-"
            text = f"{b[key] / a[key]:.2f}x"
            return f"**{text}**" if bold else text

        print(f"| {turns} | per-turn / packed | {ratio('samples')} | {ratio('trained')} | {ratio('padded', True)} | "
              f"{ratio('unpadded')} | {ratio('seconds', True)} | {ratio('cpu_seconds', True)} | "
              f"{ratio('trained_per_s')} | {ratio('padded_per_s')} | {ratio('peak_mib', True)} |")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct",
                        help="the model (with --model-config: only its tokenizer)")
    parser.add_argument("--model-config", choices=sorted(MODEL_CONFIGS), help="random weights of this shape")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default=None, help="default: fp32 on CPU, bf16 on CUDA")
    parser.add_argument("--config", default="w2-o3-q4", help="TextWorld config of the episodes' games")
    parser.add_argument("--turns", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--episodes", type=int, default=2, help="episodes per turn count")
    parser.add_argument("--micro-batch-size", type=int, default=2, help="samples per micro-batch, both layouts")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed steps per (turns, layout); the median is reported (0: record the episodes only)")
    parser.add_argument("--head", choices=("trained", "all"), default="trained",
                        help="output layer only where a trained token is predicted, or at every position")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: torch's). On a busy machine 1 thread keeps CPU time honest: "
                             "threads waiting for a descheduled sibling spin and burn CPU time")
    parser.add_argument("--episodes-file", help="JSON of the episodes: read if it exists, else recorded and written "
                                                 "(to measure on a machine without TextWorld)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.dtype = args.dtype or ("fp32" if torch_device_type(args.device) == "cpu" else "bf16")

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    start, load = time.perf_counter(), os.getloadavg()[0]
    results = run(args, say)
    if args.repeats == 0:  # only the episodes were wanted (to carry them to another machine)
        return
    name = args.model_config or args.model
    isolation = "each measurement in a fresh process" if torch_device_type(args.device) == "cpu" else "in one process"
    print(f"\n{name} ({args.dtype}) on {args.device}, torch threads {torch.get_num_threads()}, {args.episodes} "
          f"TextWorld {args.config} episodes per turn count, micro-batch {args.micro_batch_size} samples, output layer "
          f"at {args.head} positions, median of {args.repeats} steps ({isolation}); "
          f"{time.perf_counter() - start:.0f} s in all, 1-minute load average {load:.2f} at the start and "
          f"{os.getloadavg()[0]:.2f} at the end\n")
    print_table(results)
    held = statistics.median(r["baseline_bytes"] for entries in results.values() for e in entries.values()
                             for r in e["runs"])
    what = "allocated by torch" if torch_device_type(args.device) != "cpu" else "resident, with the libraries"
    print(f"\nMemory held before every step (weights, gradient buffers, AdamW state; {what}): {held / 2**20:.0f} MiB. "
          "Peak memory above is the step's own, over that.")


if __name__ == "__main__":
    main()
