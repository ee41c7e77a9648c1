"""What the OpenAI-compatible proxy costs: the same greedy episodes played directly and through the proxy.

* **proxy**: turngym's own ``openai``-client loop (:class:`~turngym.agents.openai_agent.ChatAPIAgent`, ``E``
  requests in flight) plays E Signals episodes against :class:`~turngym.agents.proxy_server.ProxyServer` on an
  :class:`~turngym.agents.backends.HFBackend`, every call kept;
* **direct**: the same calls' prompt ids given straight to a fresh ``HFBackend`` (``generate``, the E episodes'
  call t batched together, each episode's KV cache kept between its calls as the proxy's is): the model's own work,
  with the sampled ids checked equal to the proxy's, token for token.

For each E it runs ``--rounds`` rounds, proxy and direct alternated, and prints seconds per model call, calls per
second, the proxy / direct time ratio (the overhead: HTTP, JSON, the chat template rendered per request, the
batching window, the client's threads), and the process's peak resident memory. Both generate on a worker thread:
on a loaded machine, torch's two OpenMP threads in the main thread ran one generation several times slower than on a
worker thread (and than one thread anywhere), which would credit the proxy with the difference. The model defaults
to the embedded SmolLM2-135M-Instruct::

    python bench/proxy_overhead.py --concurrency 1 8 32 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def play(agent, tasks, pool_size: int) -> tuple[float, list]:
    from turngym.agents.rollout import run_episodes
    from turngym.envs.vector import LocalPool

    pool = LocalPool.from_id("turngym/Signals-v0", pool_size, env_kwargs={"turns": 3, "colours": 2})
    try:
        started = time.perf_counter()
        trajectories = run_episodes(agent, pool, tasks, seed=0)
        return time.perf_counter() - started, trajectories
    finally:
        pool.close()


def replay(model, tokenizer, episodes: list[list], max_tokens: int, stop_ids: list[int]) -> tuple[float, list]:
    """The episodes' calls given straight to a fresh backend, call t of every episode in one batch: (seconds, the
    sampled ids per episode and call)."""
    from turngym.agents.backends import HFBackend
    from turngym.agents.generation import GenerationRequest, SamplingConfig

    backend = HFBackend(model, pad_id=tokenizer.pad_token_id)
    sampled: list[list[list[int]]] = [[] for _ in episodes]
    started = time.perf_counter()
    for turn in range(max((len(e) for e in episodes), default=0)):
        live = [i for i, e in enumerate(episodes) if turn < len(e)]
        requests = [GenerationRequest(key=i, ids=episodes[i][turn].prompt_ids) for i in live]
        for i, generation in zip(live, backend.generate(requests, SamplingConfig(0.0, 1.0, 0, max_tokens), stop_ids),
                                 strict=True):
            sampled[i].append(generation.ids)
    return time.perf_counter() - started, sampled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="a local policy folder (default: the embedded SmolLM2)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    options = parser.parse_args()

    import torch

    from turngym.agents.backends import HFBackend
    from turngym.agents.llm import LLMAgentConfig
    from turngym.agents.models import DEFAULT_MODEL, load_policy
    from turngym.agents.openai_agent import ChatAPIAgent
    from turngym.agents.proxy import CallStore
    from turngym.agents.proxy_sampler import BatchingSampler
    from turngym.agents.proxy_server import PolicyService, ProxyServer, ProxySettings
    from turngym.envs.signals import signal_tasks

    torch.set_num_threads(options.threads)
    model, tokenizer = load_policy(options.model or DEFAULT_MODEL)
    config = LLMAgentConfig(temperature=0.0, max_new_tokens=options.max_tokens, action_format="last_line",
                            response_prefix="", system_prompt="Obey the traffic lights. Reply with one command.")
    print(f"model {options.model or DEFAULT_MODEL}; {options.max_tokens} tokens a turn, greedy; "
          f"{options.threads} torch threads; {options.rounds} rounds per setting, direct and proxy alternated")
    print(f"{'E':>4} {'calls':>6} {'direct s/call':>14} {'proxy s/call':>13} {'direct calls/s':>15} "
          f"{'proxy calls/s':>14} {'proxy/direct':>13} {'same ids':>9}")
    for concurrency in options.concurrency:
        tasks = list(signal_tasks("eval", concurrency, turns=3, colours=2))
        direct_times, proxy_times, calls, same = [], [], 0, True
        for _ in range(options.rounds):
            store = CallStore()
            service = PolicyService(tokenizer, BatchingSampler(HFBackend(model, pad_id=tokenizer.pad_token_id),
                                                               window=0.002),
                                    store, ProxySettings(max_context=2048, default_max_tokens=options.max_tokens))
            with ProxyServer(service) as server:
                agent = ChatAPIAgent("policy", base_url=server.base_url, api_key="none", config=config,
                                     max_concurrency=concurrency, tag_episodes=True)
                seconds, _ = play(agent, tasks, concurrency)
                proxy_times.append(seconds)
                kept = [store.close(e) for e in store.episodes()]
            service.sampler.close()
            calls = sum(len(c) for c in kept)
            with ThreadPoolExecutor(1) as worker:  # on a thread of its own, as the proxy's sampler generates
                seconds, sampled = worker.submit(replay, model, tokenizer, kept, options.max_tokens,
                                                 service.prompts.stop_ids).result()
            direct_times.append(seconds)
            same = same and sampled == [[c.completion_ids for c in episode] for episode in kept]
        d, p = statistics.median(direct_times), statistics.median(proxy_times)
        print(f"{concurrency:>4} {calls:>6} {d / calls:>14.4f} {p / calls:>13.4f} {calls / d:>15.1f} "
              f"{calls / p:>14.1f} {p / d:>12.2f}x {'yes' if same else 'NO':>9}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    print(f"peak resident memory of this process: {peak:.2f} GB")


if __name__ == "__main__":
    main()
