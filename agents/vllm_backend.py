"""The vLLM backend: vLLM (its CPU build or CUDA), a colocated ``vllm.LLM`` in the policy's dtype with weight
sync, or TRL's ``VLLMClient`` (server mode); its continuous batching on vLLM's own scheduler
(:class:`EngineDecoder`, :class:`ServerDecoder`); and the weight sync itself (:func:`sync_vllm_weights`, or in two
halves for a pipeline: :func:`vllm_snapshot` when the trainer publishes, :func:`load_vllm_weights` at a safe point).
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import threading
import weakref
from collections.abc import Hashable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from turngym.agents.generation import Decoder, Finished, Generation, GenerationRequest, SamplingConfig, request_seed


class VLLMBackend:
    """vLLM generation: a ``vllm.LLM`` in this process (colocated), or TRL's ``VLLMClient`` (server mode).

    Pass ``llm``, a ``vllm.LLM`` (build one with :meth:`colocated`: the policy's dtype, logprobs after
    temperature), or ``client``, a :class:`trl.generation.vllm_client.VLLMClient` talking to a vLLM server
    (``vllm serve``, which ``trl vllm-serve`` launches; start it with ``--logprobs-mode processed_logprobs``).
    Token ids in, token ids out: vLLM gets each episode's full ids (its prefix cache reuses the history) and
    returns the ids it sampled, which are the ids trained on. Only ``stop_ids`` end a turn (the model's own EOS
    is ignored, as in :class:`HFBackend`). Colocated on CUDA, each request's seed is the episode's seed and its
    length, as in :class:`HFBackend`, so a turn's sample does not depend on its batch (on CPU, and in server mode,
    the engine's seeded stream: see ``_own_seeds``); the draws differ from HF's (another random stream), greedy
    turns agree.

    Logprobs are vLLM's ``processed_logprobs``: ``log softmax(logits / T)`` (T = 1 when greedy), after top-k/top-p
    truncation when those are set.
    """

    def __init__(self, *, client: Any = None, llm: Any = None) -> None:
        if (client is None) == (llm is None):
            raise ValueError("VLLMBackend needs exactly one of client= (TRL VLLMClient) or llm= (vllm.LLM)")
        self.client, self.llm = client, llm
        self.lock = threading.RLock()  # one thread at a time drives the engine (a pipeline's sampler, the trainer)
        self._request_numbers = itertools.count()
        self._in_flight: dict[str, set[int]] = {}  # request id -> its stop ids, until it finishes
        self._finished: dict[str, Generation] = {}  # finished in the engine, not yet collected by its caller
        self._pool: ThreadPoolExecutor | None = None  # server mode's decoder: one request a turn, sent concurrently

    @classmethod
    def colocated(cls, model: str, *, dtype: str = "float32", seed: int = 0, max_model_len: int = 4096,
                  kv_cache_gib: float = 1.0, **llm_kwargs: Any) -> VLLMBackend:
        """A ``vllm.LLM`` of ``model`` (a folder or Hub name) in this process, generating in ``dtype``.

        ``dtype`` should be the policy's (vLLM's ``"auto"`` turns an fp32 checkpoint into bf16, whose logprobs are
        ~0.03 nats off the fp32 trainer's). The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``),
        so :meth:`publish` reaches its model; on CPU the KV cache takes ``kv_cache_gib``
        (``VLLM_CPU_KVCACHE_SPACE``, unless set). Other keyword arguments go to ``vllm.LLM``.
        """
        return cls(llm=make_llm(model, dtype=dtype, seed=seed, max_model_len=max_model_len, kv_cache_gib=kv_cache_gib,
                                enable_prefix_caching=True, logprobs_mode="processed_logprobs", **llm_kwargs))

    @classmethod
    def holding(cls, model: Any, model_path: str, engine: VLLMBackend | None = None, *,
                seed: int = 0) -> VLLMBackend:
        """A colocated engine holding ``model``'s current weights: ``engine`` synced to it, or (None) a new one built
        from ``model_path`` (a folder or Hub name of the same architecture) in ``model``'s dtype, its context
        ``model``'s (at most 4096). One engine serves a run's successive policies (a study's evaluations, RFT's
        rounds): building one costs far more than a weight sync. torch's global generator, which vLLM's CPU build
        samples from, is reseeded with ``seed``, so what the engine samples next does not depend on what it sampled
        before (greedy decoding draws nothing)."""
        import torch

        if engine is None:
            dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
            longest = getattr(model.config, "max_position_embeddings", None) or 4096
            engine = cls.colocated(model_path, dtype=dtype, seed=seed, max_model_len=min(4096, longest))
        else:
            engine.sync_weights(model)
        torch.manual_seed(seed)
        return engine

    def release(self, key: Hashable) -> None:
        """vLLM manages its own cache."""

    def cache_prefix(self, ids: Sequence[int]) -> None:
        """vLLM's prefix caching covers shared prompts."""

    # ------------------------------------------------------------------ weights
    def publish(self, model: Any, version: int) -> None:
        """A :class:`~turngym.agents.generation.WeightPublisher`: load ``model``'s current weights (LoRA adapters
        merged) into the colocated engine, which serves only the latest (``version`` is not kept); see
        :func:`sync_vllm_weights`."""
        if self.llm is None:
            raise ValueError("publish needs a colocated vllm.LLM; in server mode TRL's trainer syncs the server")
        with self.lock:
            self._check_idle("load weights")
            sync_vllm_weights(self.llm, model)

    def sync_weights(self, model: Any) -> None:
        """:meth:`publish` without a version."""
        self.publish(model, 0)

    def load_weights(self, weights: list[tuple[str, Any]]) -> None:
        """Load a :func:`vllm_snapshot` (weights under vLLM's checkpoint names) into the colocated engine; only
        while no request is in flight (:attr:`idle`), so that every turn is sampled by one set of weights."""
        with self.lock:
            self._check_idle("load weights")
            load_vllm_weights(self.llm, weights)

    @property
    def idle(self) -> bool:
        """No request of this backend is in the engine (or at the server): weights may change now."""
        return not self._in_flight

    def _check_idle(self, what: str) -> None:
        if self._in_flight:
            raise RuntimeError(f"cannot {what} while {len(self._in_flight)} requests are in flight: every turn must "
                               "be sampled by one set of weights (wait until the decoder is idle)")

    # ------------------------------------------------------------------ generation
    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingConfig,
                 stop_ids: Sequence[int]) -> list[Generation]:
        """Each request's turn, all in one batch (lockstep). Colocated, with a :meth:`decoder`'s requests in flight
        the engine is stepped here for both (``vllm.LLM.generate`` would collect the decoder's outputs as its
        own): theirs wait for the decoder, these return."""
        if not requests:
            return []
        if self.client is not None:
            return self._client_generate(requests, sampling, stop_ids)
        with self.lock:
            if self._in_flight:
                ids = [self._add(r, sampling, stop_ids) for r in requests]
                while not all(i in self._finished for i in ids):
                    self._step()
                return [self._finished.pop(i) for i in ids]
            params = [sampling_params(sampling, stop_ids, request_seed(r) if self._own_seeds else None)
                      for r in requests]
            outputs = self.llm.generate([{"prompt_token_ids": list(r.ids)} for r in requests], params,
                                        use_tqdm=False)
            return [read_output(output, set(stop_ids)) for output in outputs]

    def decoder(self, sampling: SamplingConfig, stop_ids: Sequence[int]) -> Decoder:
        """Continuous batching on vLLM's own scheduler (:mod:`turngym.agents.decoding` picks it): colocated, a turn
        is a request added to the engine, which joins the running batch at the engine's next step, and leaves it
        finished (:class:`EngineDecoder`); in server mode each turn is its own HTTP request, sent at once, which
        the server's scheduler batches with the others in flight (:class:`ServerDecoder`)."""
        if self.client is not None:
            return ServerDecoder(self, sampling, stop_ids)
        return EngineDecoder(self, sampling, stop_ids)

    @property
    def _own_seeds(self) -> bool:
        # vLLM's CPU build cannot seed requests one by one: when a seeded request's prefill is split over steps it
        # rewinds the request's generator offset, which CPU generators lack ("CPU Generator does not use offset").
        # There each draw comes from the engine's own seeded stream instead.
        from vllm.platforms import current_platform

        return not current_platform.is_cpu()

    def _add(self, request: GenerationRequest, sampling: SamplingConfig, stop_ids: Sequence[int]) -> str:
        """Queue one turn in the colocated engine (it joins at the engine's next step); its request id."""
        from vllm.sampling_params import RequestOutputKind

        request_id = f"turngym-{next(self._request_numbers)}"  # vLLM.generate's own ids are plain numbers
        params = sampling_params(sampling, stop_ids, request_seed(request) if self._own_seeds else None)
        params.output_kind = RequestOutputKind.FINAL_ONLY  # only finished requests come back from step()
        self.llm.llm_engine.add_request(request_id, {"prompt_token_ids": list(request.ids)}, params)
        self._in_flight[request_id] = set(stop_ids)
        return request_id

    def _step(self) -> None:
        """One engine step (one scheduler iteration); the requests it finished wait in ``_finished``."""
        for output in self.llm.llm_engine.step():
            if output.finished and output.request_id in self._in_flight:
                self._finished[output.request_id] = read_output(output, self._in_flight.pop(output.request_id))

    def _client_generate(self, requests: Sequence[GenerationRequest], sampling: SamplingConfig,
                         stop_ids: Sequence[int]) -> list[Generation]:
        stop = set(stop_ids)
        output = self.client.generate(
            prompts=[r.ids for r in requests],
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k,
            max_tokens=sampling.max_new_tokens,
            logprobs=0,
            # No seed: one request's seed applies to every prompt in it, so a group's identical first prompts
            # drew one reply 4 times, and on vLLM's CPU build a seeded split prefill kills the server
            # (tests/test_vllm_server.py). Draws come from the server's own stream (`vllm serve --seed`).
            generation_kwargs={"stop_token_ids": list(stop_ids), "ignore_eos": True},
        )
        return [
            Generation(list(ids), [float(lp[0]) for lp in lps], bool(ids) and ids[-1] in stop)
            for ids, lps in zip(output["completion_ids"], output["logprobs"], strict=True)
        ]


def sampling_params(sampling: SamplingConfig, stop_ids: Sequence[int], seed: int | None) -> Any:
    """vLLM's ``SamplingParams`` of one turn: only ``stop_ids`` end it (the model's EOS is ignored), one logprob (the
    sampled token's), ids out (no detokenizing)."""
    from vllm import SamplingParams  # optional dependency, imported on use

    return SamplingParams(temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k or -1,
                          max_tokens=sampling.max_new_tokens, logprobs=0, stop_token_ids=list(stop_ids),
                          ignore_eos=True, detokenize=False, seed=seed)


def read_output(output: Any, stop: set[int]) -> Generation:
    """A finished ``RequestOutput``: the ids vLLM sampled and their logprobs, and whether a stop id ended it."""
    completion = output.outputs[0]
    ids = list(completion.token_ids)
    steps = completion.logprobs or []
    if len(steps) != len(ids):
        raise RuntimeError(f"vLLM returned {len(steps)} logprobs for {len(ids)} sampled ids")
    lps = [float(step[token].logprob) for step, token in zip(steps, ids, strict=True)]
    return Generation(ids, lps, bool(ids) and ids[-1] in stop)


class EngineDecoder:
    """Continuous batching on the colocated engine's scheduler: :meth:`add` is ``llm_engine.add_request`` (the turn
    joins the running batch at the engine's next step, vLLM packing and chunking prefills itself), :meth:`step` one
    ``llm_engine.step()`` (finished turns leave). The same sampling, ids and logprobs as :meth:`VLLMBackend.generate`
    (:func:`sampling_params`, :func:`read_output`); greedy, the same turns as lockstep."""

    def __init__(self, backend: VLLMBackend, sampling: SamplingConfig, stop_ids: Sequence[int]) -> None:
        self.backend, self.sampling, self.stop_ids = backend, sampling, list(stop_ids)
        self._keys: dict[str, Hashable] = {}  # request id -> the turn's key, while in flight

    def add(self, request: GenerationRequest) -> None:
        with self.backend.lock:
            self._keys[self.backend._add(request, self.sampling, self.stop_ids)] = request.key

    def step(self) -> list[Finished]:
        backend = self.backend
        with backend.lock:
            if self._keys and not any(i in backend._finished for i in self._keys):  # a lockstep call may have
                backend._step()                                                    # stepped them already
            done = [i for i in self._keys if i in backend._finished]
            return [(self._keys.pop(i), backend._finished.pop(i)) for i in done]

    @property
    def busy(self) -> bool:
        return bool(self._keys)


class ServerDecoder:
    """Continuous batching on a vLLM server's scheduler: each turn is its own request, sent at once from a small
    thread pool, so the server batches the turns in flight as they arrive and leave; :meth:`step` waits up to
    ``poll_s`` for one to finish and returns those that have."""

    def __init__(self, backend: VLLMBackend, sampling: SamplingConfig, stop_ids: Sequence[int], *,
                 workers: int = 32, poll_s: float = 0.01) -> None:
        self.backend, self.sampling, self.stop_ids, self.poll_s = backend, sampling, list(stop_ids), poll_s
        self.workers = workers
        self._pending: dict[Future, tuple[Hashable, str]] = {}  # -> (the turn's key, its request id)

    def add(self, request: GenerationRequest) -> None:
        backend = self.backend
        with backend.lock:
            if backend._pool is None:
                backend._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="turngym-vllm")
            number = f"turngym-{next(backend._request_numbers)}"
            backend._in_flight[number] = set(self.stop_ids)
        future = backend._pool.submit(backend._client_generate, [request], self.sampling, self.stop_ids)
        self._pending[future] = (request.key, number)

    def step(self) -> list[Finished]:
        if not self._pending:
            return []
        done, _ = wait(list(self._pending), timeout=self.poll_s, return_when=FIRST_COMPLETED)
        finished = []
        for future in done:
            key, number = self._pending.pop(future)
            with self.backend.lock:  # add() writes it from other threads
                self.backend._in_flight.pop(number, None)
            finished.append((key, future.result()[0]))
        return finished

    @property
    def busy(self) -> bool:
        return bool(self._pending)


def make_llm(model: str, *, dtype: str, kv_cache_gib: float = 1.0, **llm_kwargs: Any) -> Any:
    """``vllm.LLM(model, dtype=dtype, **llm_kwargs)`` with its engine in this process, as a colocated trainer needs.

    The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), so weight sync reaches its model, and
    on CPU its KV cache takes ``kv_cache_gib`` (``VLLM_CPU_KVCACHE_SPACE``); either is left alone where set. vLLM's
    CPU worker would also drop torch to one thread and disable ``torch.set_num_threads`` for the whole process:
    the trainer shares both, so they are kept.
    """
    import os

    import torch

    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", f"{kv_cache_gib:g}")
    os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))
    try:
        from vllm import LLM
    except ImportError as error:
        raise ImportError("the vLLM backend needs vLLM: `pip install 'turngym[vllm]'` (its CPU build; "
                          "`turngym[gpu]` on CUDA), or `make test-vllm`, which installs it into .venv-vllm") from error
    global _live_engines
    set_num_threads = torch.set_num_threads
    gc.collect()  # engines dropped in cycles are finalized (their memory freed) before this one takes its own
    _live_engines += 1  # counted while it builds: a collection meanwhile must not tear its groups down
    shared = False
    try:
        llm = LLM(model=model, dtype=dtype, **llm_kwargs)
        shared = _share_distributed_state(llm)
        return llm
    finally:
        if not shared:
            _live_engines -= 1
        torch.set_num_threads = set_num_threads
        # vLLM's engine core calls gc.freeze() when it starts (a server's startup heap, kept out of collections) and
        # gc.unfreeze() only in shutdown(), which nothing calls on a colocated engine. Every object alive then (the
        # trainer being built, its model, critic and optimizer) would never be collected: a study process that ran
        # a PPO stage and then another RL stage grew to 22.6 GB and was killed. The heap goes back to the collector.
        gc.unfreeze()


_live_engines = 0  # colocated engine cores built by make_llm and not yet finalized


def _share_distributed_state(llm: Any) -> bool:
    """Let ``llm``'s in-process engine core tear down the process's distributed state only if it is the last one.

    vLLM finalizes a collected in-process engine with ``EngineCore.shutdown``, which ends in
    ``cleanup_dist_env_and_memory()``: it destroys the process-wide model-parallel groups every colocated engine
    uses. Since the heap is no longer frozen, an engine dropped inside a reference cycle is collected whenever the
    collector runs, possibly after the next engine was built: that engine then fails mid-generate ("pipeline model
    parallel group is not initialized"; make test-vllm, a study's eval stage after its RL stage). Here an engine
    core finalized while another is alive releases its own executor and scheduler only; the last one does vLLM's
    full shutdown. An engine in another process (``VLLM_ENABLE_V1_MULTIPROCESSING=1``) is left to vLLM. An engine
    counts from before it starts building (:func:`make_llm`); True when it stays counted until finalized.
    """
    client = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    finalizer, core = getattr(client, "_finalizer", None), getattr(client, "engine_core", None)
    if finalizer is None or not hasattr(core, "model_executor") or not finalizer.detach():
        return False
    weakref.finalize(client, _retire_engine_core, core)
    return True


def _retire_engine_core(core: Any) -> None:
    global _live_engines
    _live_engines -= 1
    if _live_engines == 0:
        core.shutdown()
        return
    core.structured_output_manager.clear_backend()
    if core.model_executor:
        core.model_executor.shutdown()
    if core.scheduler:
        core.scheduler.shutdown()


def vllm_parameters(model: Any) -> Iterator[tuple[str, Any]]:
    """``model``'s parameters under the checkpoint names vLLM loads, LoRA adapters merged in.

    A PEFT model must have its adapters merged (``merge_adapter()``) while this is read: the names drop PEFT's
    wrappers (``base_model.model.``, ``.base_layer``, ``modules_to_save.default.``) and skip the adapters' own
    tensors. Tied weights come once (``named_parameters`` deduplicates them).
    """
    peft_prefix = getattr(model, "prefix", None) if hasattr(model, "peft_config") else None
    for name, parameter in model.named_parameters():
        if peft_prefix is not None:
            if peft_prefix in name or "original_module" in name:
                continue
            name = name.removeprefix("base_model.model.").replace(".base_layer", "")
            name = name.replace("modules_to_save.default.", "")
        yield name, parameter.detach()


def sync_vllm_weights(llm: Any, model: Any) -> None:
    """Load ``model``'s weights into the colocated ``llm`` in the engine's dtype, then drop its prefix cache:
    :func:`load_vllm_weights` of ``model``'s :func:`vllm_parameters`, read while LoRA adapters are merged."""
    import torch

    with merged_adapters(model), torch.no_grad():
        load_vllm_weights(llm, list(vllm_parameters(model)))


def vllm_snapshot(model: Any) -> list[tuple[str, Any]]:
    """A copy of ``model``'s weights under vLLM's checkpoint names (LoRA adapters merged), to load later with
    :func:`load_vllm_weights` while training goes on (a pipeline's published policy version)."""
    import torch

    with merged_adapters(model), torch.no_grad():
        return [(name, tensor.clone()) for name, tensor in vllm_parameters(model)]


@contextlib.contextmanager
def merged_adapters(model: Any) -> Iterator[None]:
    """A PEFT model's LoRA adapters merged into its weights while the block runs (unmerged after, for training)."""
    merged = hasattr(model, "peft_config") and hasattr(model, "merge_adapter")
    if merged:
        model.merge_adapter()
    try:
        yield
    finally:
        if merged:
            model.unmerge_adapter()


def load_vllm_weights(llm: Any, weights: list[tuple[str, Any]]) -> None:
    """Load ``weights`` (vLLM's checkpoint names: :func:`vllm_parameters`) into the colocated ``llm`` in the engine's
    dtype, then drop its prefix cache (keys and values of the old weights).

    vLLM's ``model.load_weights`` (TRL's colocated sync) cannot serve here: vLLM's CPU build repacks linear weights
    after loading (its parameters lose their ``weight_loader``), so it fails in fp32. The model runner's
    ``reload_weights`` loads the checkpoint names and repacks again. A head tied to the embeddings is not in the
    checkpoint, so its packed copy is rebuilt from the new embeddings (it would keep the old one).
    """
    import torch

    with torch.no_grad():
        llm.collective_rpc(_reload_weights, args=(weights,))
    llm.reset_prefix_cache()


def _reload_weights(worker: Any, weights: list[tuple[str, Any]]) -> None:
    """Runs on vLLM's worker: reload ``weights`` (checkpoint names) and repack a tied head."""
    worker.model_runner.reload_weights(weights_iterator=iter(weights))
    vllm_model = worker.model_runner.get_model()
    head = getattr(vllm_model, "lm_head", None)
    weight = getattr(head, "weight", None)
    tied = weight is not None and any(m is not head and getattr(m, "weight", None) is weight
                                      for m in vllm_model.modules())
    if tied and hasattr(head, "quant_method"):
        head.quant_method.process_weights_after_loading(head)
