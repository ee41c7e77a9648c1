"""TRL's colocated vLLM engine, built in the policy's dtype.

TRL builds its colocated engine (``trl.generation.vllm_generation.LLM``) with no dtype, and vLLM's ``auto``
samples an fp32 policy in bf16 (logprobs ~0.03 nats off the trainer's). While TRL builds it,
:func:`vllm_in_policy_dtype` makes that ``LLM`` turngym's :func:`~turngym.agents.backends.make_llm` in the
policy's dtype. It swaps a public name of TRL's module, not a private method; the adapter
(``trainers/trainer.py``) is still the only module that overrides TRL's privates.
"""

from __future__ import annotations

import contextlib
from typing import Any

from turngym.trainers.config import TurnGymConfig


@contextlib.contextmanager
def vllm_in_policy_dtype(model: Any, args: TurnGymConfig) -> Any:
    """TRL builds its colocated vLLM engine with no dtype, and vLLM's ``auto`` samples an fp32 policy in bf16
    (logprobs ~0.03 nats off the trainer's): while TRL builds it, its ``LLM`` is turngym's ``make_llm`` in the
    policy's dtype (the engine in this process, the trainer's torch threads kept)."""
    if not (args.use_vllm and args.vllm_mode == "colocate"):
        yield
        return
    import functools

    import trl.generation.vllm_generation as trl_vllm

    from turngym.agents.backends import make_llm

    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    built_by_trl = trl_vllm.LLM
    trl_vllm.LLM = functools.partial(make_llm, dtype=dtype)
    try:
        yield
    finally:
        trl_vllm.LLM = built_by_trl
