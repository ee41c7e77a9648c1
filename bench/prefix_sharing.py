"""The loss's forward and backward pass with and without shared prefixes (``share_prefixes``), SmolLM2-135M-Instruct.

    .venv/bin/python bench/prefix_sharing.py [--scenarios group window] [--rounds 3] [--threads 1]

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

PROMPT, GROUP, TURNS = 300, 8, 10


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


def child(scenario: str, variant: str, threads: int, checkpointing: bool, turns: int) -> dict:
    """One forward + backward pass in this process."""
    import torch

    torch.set_num_threads(threads)
    from turngym.agents.models import load_policy
    from turngym.trainers.layouts import pad
    from turngym.trainers.logprobs import scored_logprobs
    from turngym.trainers.prefix_sharing import levels, prefix_tree, shared_prefix_logprobs

    model, tokenizer = load_policy()
    model.train()
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    prompts, completions = scenario_rows(scenario, len(tokenizer), turns)
    input_ids = torch.cat([pad(prompts, tokenizer.pad_token_id, "left", torch.long),
                           pad(completions, tokenizer.pad_token_id, "right", torch.long)], 1)
    attention = torch.cat([pad([[1] * len(p) for p in prompts], 0, "left", torch.long),
                           pad([[1] * len(c) for c in completions], 0, "right", torch.long)], 1)
    scored = pad([[1] * len(c) for c in completions], 0, "right", torch.long).bool()
    advantages = torch.randn(scored.shape, generator=torch.Generator().manual_seed(1))
    sequences = [p + c for p, c in zip(prompts, completions, strict=True)]
    forest = prefix_tree(sequences)
    encoded = sum(len(n.tokens) for level in levels(forest) for n in level)
    hooks, saved = saved_bytes_meter()
    start = time.perf_counter()
    with hooks:
        if variant == "shared":
            logps, _ = shared_prefix_logprobs(model, input_ids, attention, scored, 1.0)
        else:
            logps, _ = scored_logprobs(model, input_ids, attention, scored, 1.0)
        loss = (advantages * logps).sum()
    loss.backward()
    seconds = time.perf_counter() - start
    norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters() if p.grad is not None]))
    return {"seconds": seconds, "saved_gb": saved() / 1e9, "peak_rss_gb": resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss / 1e6, "rows": len(sequences), "tokens": sum(map(len, sequences)),
        "tokens_encoded": encoded if variant == "shared" else sum(map(len, sequences)), "loss": loss.item(),
        "grad_norm": norm.item()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", nargs="+", default=["group", "window"], choices=["group", "window", "history"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads in each child (1: see the docstring)")
    parser.add_argument("--checkpointing", action="store_true", help="gradient checkpointing (non-reentrant)")
    parser.add_argument("--turns", type=int, default=TURNS, help="turns of the per-turn scenarios' episode")
    parser.add_argument("--child", nargs=2, metavar=("SCENARIO", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child, args.threads, args.checkpointing, args.turns)))
        return
    print(f"load average at start: {Path('/proc/loadavg').read_text().split()[:3]}, threads {args.threads}, "
          f"checkpointing {args.checkpointing}, turns {args.turns}", flush=True)
    environment = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "HF_HUB_OFFLINE": "1"}
    for scenario in args.scenarios:
        runs: dict[str, list[dict]] = {"unshared": [], "shared": []}
        for round_ in range(args.rounds):
            order = ["unshared", "shared"] if round_ % 2 == 0 else ["shared", "unshared"]
            for variant in order:
                command = [sys.executable, __file__, "--child", scenario, variant, "--threads", str(args.threads),
                           "--turns", str(args.turns)]
                command += ["--checkpointing"] if args.checkpointing else []
                done = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
                if done.returncode != 0:
                    raise SystemExit(f"{scenario}/{variant} failed (exit {done.returncode}, -9: out of memory?):"
                                     f"\n{done.stderr[-3000:]}")
                result = json.loads(done.stdout.strip().splitlines()[-1])
                runs[variant].append(result)
                print(f"  {scenario} round {round_ + 1} {variant:8s} {result['seconds']:7.1f} s  saved "
                      f"{result['saved_gb']:.2f} GB  peak RSS {result['peak_rss_gb']:.2f} GB  loss {result['loss']:.4f}"
                      f"  grad norm {result['grad_norm']:.6f}  load {os.getloadavg()[0]:.1f}", flush=True)
        median = {v: {key: statistics.median(r[key] for r in rs) for key in ("seconds", "saved_gb", "peak_rss_gb")}
                  for v, rs in runs.items()}
        first = runs["shared"][0]
        print(f"{scenario}: {first['rows']} rows, {first['tokens']} tokens, {first['tokens_encoded']} encoded when "
              f"shared ({first['tokens'] / first['tokens_encoded']:.2f}x fewer)")
        for key, label in (("seconds", "seconds"), ("saved_gb", "saved for backward (GB)"),
                           ("peak_rss_gb", "peak RSS (GB)")):
            plain, shared = median["unshared"][key], median["shared"][key]
            print(f"  {label:26s} unshared {plain:8.2f}  shared {shared:8.2f}  ratio {plain / shared:.2f}x")
    print(f"load average at the end: {Path('/proc/loadavg').read_text().split()[:3]}")


if __name__ == "__main__":
    main()
