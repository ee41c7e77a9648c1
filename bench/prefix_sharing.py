"""The loss's forward and backward pass with and without shared prefixes (``share_prefixes``), SmolLM2-135M-Instruct.

    .venv/bin/python bench/prefix_sharing.py [--scenarios group window] [--rounds 3] [--threads 1]
    # GPU: random weights of Qwen2.5-0.5B's shape (no model to load on an offline machine), bf16
    python bench/prefix_sharing.py --device cuda --model-config qwen2.5-0.5b --scenarios group window history

Each measurement is one forward + backward pass of the trainer's loss forward
(:func:`turngym.trainers.logprobs.scored_logprobs` unshared, :func:`turngym.trainers.prefix_sharing.
shared_prefix_logprobs` shared; loss = sum of advantages x log-probabilities, every completion token scored) in a
fresh child process, so that each reports its own peak resident memory. The variants alternate within each round
(AB, BA, AB...) and the medians are printed, with their ratio.

Scenarios (random token ids from the vocabulary, seeded: the same rows in both variants):

* ``group``: one group of 8 episodes, a 300-token shared prompt, completions of 150-250 tokens (whole-episode rows).
* ``window``: the per-turn rows of one 10-turn episode with ``history_window: 2``: a 300-token first prompt, replies
  of 15-25 tokens and observations of 40-80; row t is the first prompt, turns t-2 and t-1, and turn t's reply.
* ``history``: the same episode's per-turn rows with the whole history (a harness's calls, a rewritten history):
  row t's context holds every earlier row. Unshared, 10 turns hold about 6,800 tokens: more than a 24 GB machine
  keeps for backward in fp32; ``--turns 6`` fits.

Measured per pass: seconds (``time.perf_counter``, torch with ``--threads`` threads), the bytes of the tensors the
autograd graph saves for backward (each storage counted once: the activation memory the pass holds, measured exactly
whatever the machine's load), and the child's peak resident memory (``ru_maxrss``; the model, its gradients and the
allocator's caching included). With ``--checkpointing`` the checkpointed layers save through their own hooks, which
the meter does not see: the peak resident memory is the measure then. The machine's load average is printed: on a
loaded machine compare the ratio, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ importable, also when a test loads this file
from train_throughput import DTYPES, MODEL_CONFIGS, ModelSpec, load_model  # the training bench's models

PROMPT, GROUP, TURNS = 300, 8, 10
QWEN_VOCABULARY = 151_936  # Qwen2.5's, for --model-config


def scenario_rows(name: str, vocabulary: int, turns: int = TURNS) -> tuple[list[list[int]], list[list[int]]]:
    """(prompts, completions) of a scenario, seeded."""
    import torch

    generator = torch.Generator().manual_seed(0)

    def ids(count: int) -> list[int]:
        return torch.randint(100, vocabulary, (count,), generator=generator).tolist()

    def length(low: int, high: int) -> int:
        return int(torch.randint(low, high + 1, (1,), generator=generator))

    prompt = ids(PROMPT)
    if name == "group":
        return [prompt] * GROUP, [ids(length(150, 250)) for _ in range(GROUP)]
    replies = [ids(length(15, 25)) for _ in range(turns)]
    observations = [ids(length(40, 80)) for _ in range(turns)]
    window = 2 if name == "window" else turns
    prompts = [prompt + [x for k in range(max(0, t - window), t) for x in replies[k] + observations[k]]
               for t in range(turns)]
    return prompts, replies


def saved_bytes_meter():
    """A ``saved_tensors_hooks`` context and a function giving the bytes of the distinct storages it saw saved."""
    import torch

    storages: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    return torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor), lambda: sum(storages.values())


def child(scenario: str, variant: str, threads: int, checkpointing: bool, turns: int, model_config: str | None = None,
          device: str = "cpu", dtype: str = "fp32") -> dict:
    """One forward + backward pass in this process (on CUDA: after one untimed pass of the same rows)."""
    import torch

    torch.set_num_threads(threads)
    from turngym.trainers.layouts import pad

    # QWEN_VOCABULARY shapes random weights only; SmolLM2 keeps its own, read back from its config
    model = load_model(ModelSpec("HuggingFaceTB/SmolLM2-135M-Instruct", model_config, QWEN_VOCABULARY, device, dtype))
    vocabulary, pad_id = model.config.vocab_size, 0  # padding is masked out: any id does
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    prompts, completions = scenario_rows(scenario, vocabulary, turns)
    input_ids = torch.cat([pad(prompts, pad_id, "left", torch.long), pad(completions, pad_id, "right", torch.long)], 1)
    attention = torch.cat([pad([[1] * len(p) for p in prompts], 0, "left", torch.long),
                           pad([[1] * len(c) for c in completions], 0, "right", torch.long)], 1)
    scored = pad([[1] * len(c) for c in completions], 0, "right", torch.long).bool()
    advantages = torch.randn(scored.shape, generator=torch.Generator().manual_seed(1))
    input_ids, attention, scored, advantages = (t.to(device) for t in (input_ids, attention, scored, advantages))
    sequences = [p + c for p, c in zip(prompts, completions, strict=True)]
    cuda = torch.device(device).type == "cuda"
    if cuda:
        one_pass(model, variant, input_ids, attention, scored, advantages)
        model.zero_grad(set_to_none=False)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        held = torch.cuda.memory_allocated()
    hooks, saved = saved_bytes_meter()
    start = time.perf_counter()
    with hooks:
        loss = one_pass(model, variant, input_ids, attention, scored, advantages)
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = (torch.cuda.max_memory_allocated() - held if cuda else
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1e3)
    norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters() if p.grad is not None]))
    return {"seconds": seconds, "saved_gb": saved() / 1e9, "peak_gb": peak / 1e9, "rows": len(sequences),
            "tokens": sum(map(len, sequences)), "tokens_encoded": tokens_encoded(sequences, variant),
            "loss": loss.item(), "grad_norm": norm.item()}


def one_pass(model, variant: str, input_ids, attention, scored, advantages):
    """The loss's forward (shared or unshared) and its backward; returns the loss."""
    from turngym.trainers.logprobs import scored_logprobs
    from turngym.trainers.prefix_sharing import shared_prefix_logprobs

    logprobs = shared_prefix_logprobs if variant == "shared" else scored_logprobs
    logps, _ = logprobs(model, input_ids, attention, scored, 1.0)
    loss = (advantages * logps.to(advantages.dtype)).sum()
    loss.backward()
    return loss


def tokens_encoded(sequences: list[list[int]], variant: str) -> int:
    """Tokens the backbone encodes: each tree node once when shared, every row whole when not."""
    from turngym.trainers.prefix_sharing import levels, prefix_tree

    if variant != "shared":
        return sum(map(len, sequences))
    return sum(len(n.tokens) for level in levels(prefix_tree(sequences)) for n in level)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", nargs="+", default=["group", "window"], choices=["group", "window", "history"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads in each child (1: see the docstring)")
    parser.add_argument("--checkpointing", action="store_true", help="gradient checkpointing (non-reentrant)")
    parser.add_argument("--turns", type=int, default=TURNS, help="turns of the per-turn scenarios' episode")
    parser.add_argument("--model-config", choices=sorted(MODEL_CONFIGS),
                        help="random weights of this shape (Qwen2.5's vocabulary) instead of SmolLM2-135M-Instruct")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default=None, help="default: fp32 on CPU, bf16 on CUDA")
    parser.add_argument("--child", nargs=2, metavar=("SCENARIO", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.dtype = args.dtype or ("bf16" if args.device.startswith("cuda") else "fp32")
    if args.child:
        print(json.dumps(child(*args.child, args.threads, args.checkpointing, args.turns, args.model_config,
                               args.device, args.dtype)))
        return
    print(f"load average at start: {Path('/proc/loadavg').read_text().split()[:3]}, threads {args.threads}, "
          f"checkpointing {args.checkpointing}, turns {args.turns}, {args.model_config or 'SmolLM2-135M-Instruct'} "
          f"({args.dtype}) on {args.device}", flush=True)
    peak_label = "peak allocated over the weights" if args.device.startswith("cuda") else "peak RSS"
    environment = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "HF_HUB_OFFLINE": "1"}
    for scenario in args.scenarios:
        runs: dict[str, list[dict]] = {"unshared": [], "shared": []}
        for round_ in range(args.rounds):
            order = ["unshared", "shared"] if round_ % 2 == 0 else ["shared", "unshared"]
            for variant in order:
                command = [sys.executable, __file__, "--child", scenario, variant, "--threads", str(args.threads),
                           "--turns", str(args.turns)]
                command += ["--checkpointing"] if args.checkpointing else []
                command += ["--device", args.device, "--dtype", args.dtype]
                command += ["--model-config", args.model_config] if args.model_config else []
                done = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
                if done.returncode != 0:
                    raise SystemExit(f"{scenario}/{variant} failed (exit {done.returncode}, -9: out of memory?):"
                                     f"\n{done.stderr[-3000:]}")
                result = json.loads(done.stdout.strip().splitlines()[-1])
                runs[variant].append(result)
                print(f"  {scenario} round {round_ + 1} {variant:8s} {result['seconds']:7.1f} s  saved "
                      f"{result['saved_gb']:.2f} GB  {peak_label} {result['peak_gb']:.2f} GB  loss {result['loss']:.4f}"
                      f"  grad norm {result['grad_norm']:.6f}  load {os.getloadavg()[0]:.1f}", flush=True)
        median = {v: {key: statistics.median(r[key] for r in rs) for key in ("seconds", "saved_gb", "peak_gb")}
                  for v, rs in runs.items()}
        first = runs["shared"][0]
        print(f"{scenario}: {first['rows']} rows, {first['tokens']} tokens, {first['tokens_encoded']} encoded when "
              f"shared ({first['tokens'] / first['tokens_encoded']:.2f}x fewer)")
        for key, label in (("seconds", "seconds"), ("saved_gb", "saved for backward (GB)"),
                           ("peak_gb", f"{peak_label} (GB)")):
            plain, shared = median["unshared"][key], median["shared"][key]
            print(f"  {label:26s} unshared {plain:8.2f}  shared {shared:8.2f}  ratio {plain / shared:.2f}x")
    print(f"load average at the end: {Path('/proc/loadavg').read_text().split()[:3]}")


if __name__ == "__main__":
    main()
