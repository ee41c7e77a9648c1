"""Concurrent requests batched into one generation call: the proxy's sampler.

Requests arrive on many threads (one per HTTP request); a backend (:class:`~turngym.agents.generation.TokenBackend`)
is driven from one thread. :class:`BatchingSampler` queues each request with a future, and its thread takes what
has queued (waiting ``window`` seconds after the first arrival for more), groups it by sampling settings, and
calls the backend once per group: concurrent episodes of a harness decode in one batch, as the LLM agent's live
episodes do.

Written here rather than taken from vLLM's server: the proxy serves any turngym backend (HF, a colocated vLLM,
a scripted one in tests) and keeps the exact ids, which an engine's own server does not hand back per call.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from turngym.agents.generation import Generation, GenerationRequest, SamplingConfig, TokenBackend

logger = logging.getLogger(__name__)


@dataclass
class _Job:
    requests: list[GenerationRequest]
    sampling: SamplingConfig
    stop_ids: tuple[int, ...]
    future: Future


class SamplerClosed(RuntimeError):
    """The sampler was closed before the request could run."""


class BatchingSampler:
    """Runs ``backend.generate`` on one thread for requests submitted from any thread.

    Args:
        backend: the generation backend (swap it with :meth:`set_backend`, e.g. after a training step).
        window: seconds to wait after a request arrives for others to join its batch.
        max_batch: requests per backend call at most.
        max_cached: episodes whose KV cache the backend may keep (the least recently used are released).
    """

    def __init__(self, backend: TokenBackend, *, window: float = 0.005, max_batch: int = 64,
                 max_cached: int = 256) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self.window, self.max_batch, self.max_cached = window, max_batch, max_cached
        self._backend = backend
        self._backend_lock = threading.Lock()
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._recent: OrderedDict[Hashable, None] = OrderedDict()
        self.batches: list[int] = []  # requests per backend call (for tests and the bench)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="turngym-proxy-sampler", daemon=True)
        self._thread.start()

    def set_backend(self, backend: TokenBackend) -> None:
        """Generate with ``backend`` from the next batch on."""
        with self._backend_lock:
            self._backend = backend
            self._recent.clear()

    def submit(self, requests: Sequence[GenerationRequest], sampling: SamplingConfig,
               stop_ids: Sequence[int]) -> Future:
        """A future of the generations of ``requests`` (in order)."""
        future: Future = Future()
        if self._closed:
            future.set_exception(SamplerClosed("the proxy's sampler is closed"))
            return future
        self._queue.put(_Job(list(requests), sampling, tuple(stop_ids), future))
        return future

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingConfig,
                 stop_ids: Sequence[int]) -> list[Generation]:
        """:meth:`submit` and wait."""
        return self.submit(requests, sampling, stop_ids).result()

    def close(self) -> None:
        self._closed = True
        self._queue.put(None)
        self._thread.join(timeout=30)

    # ------------------------------------------------------------------ the sampling thread
    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                break
            jobs = [first]
            deadline = time.monotonic() + self.window
            while sum(len(j.requests) for j in jobs) < self.max_batch:
                try:
                    job = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if job is None:
                    self._queue.put(None)  # close after this batch
                    break
                jobs.append(job)
            for group in _by_settings(jobs):
                self._generate(group)
        while True:  # closed: fail what is left
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return
            if job is not None and not job.future.done():
                job.future.set_exception(SamplerClosed("the proxy's sampler is closed"))

    def _generate(self, jobs: list[_Job]) -> None:
        requests = [r for job in jobs for r in job.requests]
        try:
            with self._backend_lock:
                generations = self._backend.generate(requests, jobs[0].sampling, jobs[0].stop_ids)
                self._forget_old([r.key for r in requests])
        except Exception as error:  # the backend's failure fails these requests, not the thread
            logger.exception("the proxy's backend failed on a batch of %d requests", len(requests))
            for job in jobs:
                if not job.future.done():
                    job.future.set_exception(error)
            return
        self.batches.append(len(requests))
        at = 0
        for job in jobs:
            job.future.set_result(generations[at: at + len(job.requests)])
            at += len(job.requests)

    def _forget_old(self, keys: list[Hashable]) -> None:
        for key in keys:
            self._recent.pop(key, None)
            self._recent[key] = None
        while len(self._recent) > self.max_cached:
            old, _ = self._recent.popitem(last=False)
            self._backend.release(old)


def _by_settings(jobs: list[_Job]) -> list[list[_Job]]:
    """Jobs grouped by (sampling, stop ids), each group at most as it arrived."""
    groups: dict[tuple, list[_Job]] = {}
    for job in jobs:
        groups.setdefault((job.sampling, job.stop_ids), []).append(job)
    return list(groups.values())
