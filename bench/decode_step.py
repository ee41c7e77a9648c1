"""One decoding step of the policy: ms per step for 1 and 8 rows, with 1 and 2 torch threads, idle and busy.

SmolLM2-135M-Instruct, a static KV cache of 600 with 300 cached tokens, 20 steps each. ``--busy N`` also runs
the same grid while N other processes spin on the CPU (a stand-in for another job on the machine), so the
idle and busy ratios come from one run.

    python bench/decode_step.py --busy 2
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def spin(stop) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def step_ms(model, rows: int, threads: int, steps: int = 20) -> float:
    import torch
    from transformers import StaticCache

    torch.set_num_threads(threads)
    cache = StaticCache(config=model.config, max_cache_len=600)
    with torch.inference_mode():
        ids = torch.randint(0, 1000, (rows, 300))
        model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
        start = time.perf_counter()
        for i in range(steps):
            model(input_ids=ids[:, :1], position_ids=torch.full((rows, 1), 300 + i),
                  cache_position=torch.tensor([300 + i]), past_key_values=cache, use_cache=True, logits_to_keep=1)
    return (time.perf_counter() - start) / steps * 1000


def grid(model) -> dict[tuple[int, int], float]:
    return {(threads, rows): step_ms(model, rows, threads) for threads in (2, 1) for rows in (8, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--busy", type=int, default=0, help="also measure beside N spinning processes")
    args = parser.parse_args()
    from turngym.agents.models import load_policy

    model, _ = load_policy(args.model, device="cpu")
    model.eval()
    results = {"idle": grid(model)}
    if args.busy:
        stop = multiprocessing.Event()
        spinners = [multiprocessing.Process(target=spin, args=(stop,), daemon=True) for _ in range(args.busy)]
        for process in spinners:
            process.start()
        try:
            results[f"beside {args.busy} busy processes"] = grid(model)
        finally:
            stop.set()
            for process in spinners:
                process.join()
    print(f"cores {os.cpu_count()}\n\n| machine | threads | rows | ms / decoding step |\n|---|---:|---:|---:|")
    for machine, timings in results.items():
        for (threads, rows), ms in timings.items():
            print(f"| {machine} | {threads} | {rows} | {ms:.1f} |")
    for machine, timings in results.items():
        print(f"{machine}: 8 rows, 2 threads / 1 thread = {timings[(2, 8)] / timings[(1, 8)]:.2f}x the time; "
              f"8 rows / 1 row (1 thread) = {timings[(1, 8)] / timings[(1, 1)]:.2f}x")


if __name__ == "__main__":
    main()
