"""TRL's vLLM engine: built in the policy's dtype, sampling the rollouts, given the weights through one publisher.

TRL builds its colocated engine (``trl.generation.vllm_generation.LLM``) with no dtype, and vLLM's ``auto``
samples an fp32 policy in bf16 (logprobs ~0.03 nats off the trainer's). While TRL builds it,
:func:`vllm_in_policy_dtype` makes that ``LLM`` turngym's :func:`~turngym.agents.backends.make_llm` in the
policy's dtype. It swaps a public name of TRL's module, not a private method; the adapter
(``trainers/trainer.py``) is still the only module that overrides TRL's privates.

Once TRL has built it, :func:`trl_vllm_sampler` gives the rollouts their backend on that engine and the
:class:`~turngym.agents.generation.WeightPublisher` the trainer's weights reach it through: turngym's sync for a
colocated engine (:meth:`~turngym.agents.vllm_backend.VLLMBackend.publish`), TRL's own otherwise
(:class:`TRLWeightSync`). With pipelined rollouts (``max_staleness`` > 0), :func:`pipelined_vllm` gives the
pipeline's sampler the engine and the versioned policy that owns its weights.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from turngym.agents.generation import WeightPublisher
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


class TRLWeightSync:
    """A :class:`~turngym.agents.generation.WeightPublisher` over TRL's own sync (``VLLMGeneration.sync_weights``,
    saved before the trainer rebinds it): a vLLM server (TRL's ``VLLMClient`` sends it the weights), or a colocated
    engine whose weights are sharded (DeepSpeed, FSDP: TRL gathers them). TRL's sync reads the trainer's model
    itself: ``model`` and ``version`` go unused."""

    def __init__(self, sync: Callable[[], None]) -> None:
        self.sync = sync

    def publish(self, model: Any, version: int) -> None:
        self.sync()


def trl_vllm_sampler(generation: Any, *, sharded: bool) -> tuple[Callable[[Any], Any], WeightPublisher]:
    """The rollouts' backend factory on TRL's vLLM engine (``generation``, TRL's ``VLLMGeneration``: a colocated
    ``vllm.LLM`` or a server's client), and its publisher: for a colocated engine the backend itself (TRL's sync,
    vLLM's ``load_weights``, fails on vLLM's CPU build in fp32 and would leave a tied head stale), TRL's own sync
    for a server or ``sharded`` weights."""
    from turngym.agents.backends import VLLMBackend

    llm = getattr(generation, "llm", None)
    if llm is None:  # server mode: TRL makes the client on the main process only; read when a rollout plays
        return (lambda model: VLLMBackend(client=generation.vllm_client)), TRLWeightSync(generation.sync_weights)
    engine = VLLMBackend(llm=llm)
    return (lambda model: engine), (TRLWeightSync(generation.sync_weights) if sharded else engine)


def pipelined_vllm(generation: Any, publisher: WeightPublisher, model: Any, *, sharded: bool,
                   processes: int) -> tuple[Callable[[Any], Any], Any]:
    """With ``max_staleness`` K > 0, the pipeline's sampler on TRL's vLLM engine: its backend factory and the
    :class:`~turngym.trainers.pipeline.VersionedPolicy` that owns the engine's weights (``publisher`` is what
    :func:`trl_vllm_sampler` returned, ``model`` the trainer's).

    * colocated: :class:`~turngym.trainers.pipeline.EnginePolicy` (the trainer publishes snapshots, the sampler loads
      them into the engine at its safe points);
    * a server (one training process): :class:`~turngym.trainers.pipeline.ServerPolicy` (TRL's sync, run on the
      trainer's thread between steps when the sampler asks).
    """
    from turngym.agents.backends import VLLMBackend
    from turngym.trainers.pipeline import EnginePolicy, ServerPolicy

    if sharded:
        raise ValueError("max_staleness > 0 with vLLM does not work with DeepSpeed or FSDP: their weights reach the "
                         "engine by TRL's sync, a collective that every process must join at once, while each "
                         "process's sampler refreshes at its own time; set max_staleness 0, or train without sharding")
    if getattr(generation, "enable_sleep_mode", False):
        raise ValueError("max_staleness > 0 does not work with vllm_enable_sleep_mode: the engine would sleep through "
                         "the optimizer steps, when the pipeline samples; set one of them off")
    llm = getattr(generation, "llm", None)
    if llm is not None:
        engine = publisher if isinstance(publisher, VLLMBackend) else VLLMBackend(llm=llm)
        return (lambda sampled_by: engine), EnginePolicy(engine, model)
    if processes > 1:
        raise ValueError("max_staleness > 0 with vllm_mode server runs in one training process: TRL opens the "
                         "server's client on the main process only; use vllm_mode colocate, or one process")
    client = VLLMBackend(client=generation.vllm_client)
    return (lambda sampled_by: client), ServerPolicy(publisher, client, model)
