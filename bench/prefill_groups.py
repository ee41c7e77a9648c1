"""Prefill in length groups against one padded pass, on the same recorded rollout.

One lockstep batched rollout (16 TextWorld episodes, the default model) is recorded: every
generate call's requests and the tokens sampled. The calls are then replayed through
``HFBackend`` with each variant, forcing the recorded tokens, so every variant does exactly the
same work: the same turns, the same new tokens, the same number of decoding steps.

* ``prefill_group_cost=None``: each turn's new tokens are encoded in one pass, every row padded
  to the longest;
* ``prefill_group_cost=32`` (the default): rows are split into groups of similar length
  (``turngym.agents.backends.prefill_groups``).

The variants alternate ``--repeats`` times; it prints prefill seconds, padded share and total
seconds per replay, and the median ratio of single-pass to grouped time.

    python bench/prefill_groups.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from turngym.agents import hf_backend
from turngym.agents.backends import GenerationRequest, HFBackend
from turngym.agents.llm import LLMAgent, LLMAgentConfig
from turngym.agents.rollout import run_episodes
from turngym.envs.textworld import materialise, textworld_tasks
from turngym.envs.vector import LocalPool

VARIANTS = {"one padded pass": None, "length groups": 32}
_real_sample, _real_row_generator = hf_backend._sample, hf_backend._row_generator  # restored after each replay


class RecordingBackend(HFBackend):
    """Keeps every call's requests and the sampled ids."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[list[GenerationRequest], Any, list[int], list[list[int]]]] = []

    def generate(self, requests, sampling, stop_ids):
        generations = super().generate(requests, sampling, stop_ids)
        self.calls.append((list(requests), sampling, list(stop_ids), [g.ids for g in generations]))
        return generations


class TimedPrefillBackend(HFBackend):
    """Times the prefill passes and counts their real and padded tokens."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.prefill_seconds, self.real_tokens, self.padded_tokens = 0.0, 0, 0

    def _prefill(self, batch):
        start = time.perf_counter()
        logits = super()._prefill(batch)
        self.prefill_seconds += time.perf_counter() - start
        self.real_tokens += sum(batch.new_lengths)
        self.padded_tokens += sum((end - first) * width for first, end, width in batch.groups)
        return logits


class _Forced:
    """Stands in for a row's random generator: yields the recorded tokens instead of sampling."""

    def __init__(self, tokens: list[int]) -> None:
        self.tokens, self.step = tokens, 0


def _forced_sample(logits, sampling, generators, active):
    # the real sampler's work (softmax, logprobs) still runs; only the drawn token is replaced
    _, logprobs = _real_sample(logits, sampling, [None] * len(generators), active)
    tokens = []
    for forced in generators:
        tokens.append(forced.tokens[min(forced.step, len(forced.tokens) - 1)])
        forced.step += 1
    return tokens, logprobs


def record(model, tokenizer, tasks, args) -> tuple[list[list[int]], list]:
    backend = RecordingBackend(model, pad_id=tokenizer.pad_token_id)
    agent = LLMAgent(backend, tokenizer, LLMAgentConfig(temperature=1.0, max_new_tokens=args.max_new_tokens,
                                                        response_prefix="Action:", seed=0))
    pool = LocalPool.from_id("turngym/TextWorld-v0", len(tasks), env_kwargs={"tasks": tasks})
    try:
        run_episodes(agent, pool, list(tasks), seed=0, progress="recording")
    finally:
        pool.close()
    return [p.ids for p in backend._prefixes], backend.calls


def replay(model, tokenizer, prefixes, calls, group_cost) -> dict[str, float]:
    backend = TimedPrefillBackend(model, pad_id=tokenizer.pad_token_id, prefill_group_cost=group_cost)
    for ids in prefixes:
        backend.cache_prefix(ids)
    forced: dict[tuple[int, int], _Forced] = {}
    hf_backend._row_generator = lambda seed, position, device: forced[(seed, position)]
    hf_backend._sample = _forced_sample
    try:
        start = time.perf_counter()
        for requests, sampling, stop_ids, sampled in calls:
            forced.clear()
            forced.update({(r.seed, len(r.ids)): _Forced(ids) for r, ids in zip(requests, sampled, strict=True)})
            backend.generate(requests, sampling, stop_ids)
        total = time.perf_counter() - start
    finally:
        hf_backend._row_generator, hf_backend._sample = _real_row_generator, _real_sample
    return {"total_s": total, "prefill_s": backend.prefill_seconds, "passes": backend.forward_passes,
            "padded_share": 1 - backend.real_tokens / backend.padded_tokens, "cache_misses": _misses(backend, calls)}


def _misses(backend: HFBackend, calls) -> int:
    """Episodes whose last request was not served from their own cache (should be 0)."""
    requests, _, _, sampled = calls[-1]
    return sum(backend._caches.get(r.key) is None or backend._caches[r.key].ids != r.ids + s[:-1]
               for r, s in zip(requests, sampled, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--config", default="w2-o3-q4", help="TextWorld config of the tasks")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import torch

    from turngym.agents.models import load_policy

    torch.set_grad_enabled(False)
    tasks = materialise(textworld_tasks(args.config, "eval", n=args.episodes), workers=2)
    model, tokenizer = load_policy(args.model)
    prefixes, calls = record(model, tokenizer, tasks, args)
    replay(model, tokenizer, prefixes, calls[:2], None)  # warm-up
    results: dict[str, list[dict[str, float]]] = {label: [] for label in VARIANTS}
    for _ in range(args.repeats):
        for label, cost in VARIANTS.items():
            results[label].append(replay(model, tokenizer, prefixes, calls, cost))
    tokens = sum(len(ids) for *_, sampled in calls for ids in sampled)
    print(f"\n{args.model}, torch threads {torch.get_num_threads()}: {len(calls)} recorded generate calls, "
          f"{args.episodes} TextWorld {args.config} episodes, {tokens} sampled tokens, replayed {args.repeats}x\n")
    print("| prefill | forward passes | padded share of prefill tokens | prefill s | total s |")
    print("|---|---:|---:|---:|---:|")
    for label, runs in results.items():
        for r in runs:
            assert r["cache_misses"] == 0, "a replayed episode missed its cache: the replay did different work"
            print(f"| {label} | {r['passes']} | {100 * r['padded_share']:.1f} % | {r['prefill_s']:.2f} | "
                  f"{r['total_s']:.2f} |")
    single, grouped = results["one padded pass"], results["length groups"]
    prefill = statistics.median(s["prefill_s"] / g["prefill_s"] for s, g in zip(single, grouped, strict=True))
    total = statistics.median(s["total_s"] / g["total_s"] for s, g in zip(single, grouped, strict=True))
    print(f"\none padded pass / length groups, median of {args.repeats}: prefill time {prefill:.2f}x, "
          f"whole rollout's generation time {total:.2f}x")


if __name__ == "__main__":
    main()
