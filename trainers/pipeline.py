"""Bounded-staleness pipelining: the rollouts of coming steps play while the trainer trains.

With ``max_staleness = K > 0`` a background thread plays rollout batch g as soon as the policy it may use is
published: batch g trains at optimizer step ``s_g = g * S`` (S optimizer steps per rollout batch), and may be
sampled by any policy version ``v >= s_g - K`` (version v: the policy after v optimizer steps). So batches
g+1..g+K play while batch g trains, and every token is at most K versions older than the policy it trains:

    staleness(episode) = s_g - min(version of its turns) <= K

The sampler waits for version ``s_g - K`` before it starts batch g and only ever loads newer weights, so no
episode can be staler than K; :meth:`RolloutPipeline.take` checks it anyway and refuses a batch that is (a
scheduling bug, never trained on). TIS corrects what staleness leaves: the sampler's logprobs are its own, the
trainer's are recomputed in the loss (:mod:`turngym.trainers.tis`).

The thread samples with a :class:`VersionedPolicy`, refreshed at safe points with the weights the trainer
publishes after each optimizer step: between batches, or, with ``partial_rollouts``, between turns, so an episode
may span a weight update (each turn carries the version that sampled it). The policy is the sampler's own Hugging
Face copy (:class:`PolicyCopy`; at a refresh the episodes' cached keys and values are dropped, so each turn is
sampled by one version), or with ``use_vllm`` TRL's vLLM engine: colocated (:class:`EnginePolicy`: the published
weights load into the engine while no request is in flight, so a continuous batch on vLLM's scheduler refreshes only
when it empties), or a server (:class:`ServerPolicy`: TRL's sync, run on the trainer's thread between its steps,
when the sampler asks between batches). The pipeline then owns the engine's weights: TRL's own sync before a
rollout does nothing (``TurnGymTrainer._publish_weights``).

With several training processes each process's pipeline plays its share of each batch (:class:`SamplerPlan`), as
its trainer would.

K = 0 (the default) does not use this module: rollouts play in the trainer's own step, as before.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import TrainerCallback

from turngym.agents.generation import WeightPublisher
from turngym.trainers.metrics import staleness_metrics


class VersionedPolicy:
    """The sampler's policy and its version: the trainer publishes (a
    :class:`~turngym.agents.generation.WeightPublisher`: a snapshot of its weights after ``version`` optimizer
    steps), the sampler refreshes at safe points (:meth:`refresh` loads the newest snapshot). Subclasses say what
    a snapshot is, how it loads, and when loading is safe:

    * :class:`PolicyCopy`: a Hugging Face copy of the policy, sampled by its own backend;
    * :class:`EnginePolicy`: the colocated vLLM engine's weights (TRL's engine, shared with the trainer);
    * :class:`ServerPolicy`: a vLLM server's weights, sent by TRL's own sync from the trainer's thread.

    ``model`` is what the rollout's backend factory is given (the copy; the trainer's model for an engine, whose
    backend ignores it and whose config only is read).
    """

    model: Any

    def __init__(self) -> None:
        self.version = 0  # the version the sampler's weights are now
        self.latest = 0  # the newest published version (loaded or not)
        self._published: tuple[Any, int] | None = None
        self._lock = threading.Lock()
        self.changed = threading.Condition(self._lock)

    def publish(self, model: Any, version: int) -> None:
        """The trainer's weights after ``version`` optimizer steps (a snapshot: training goes on)."""
        state = self._snapshot(model)
        with self.changed:
            self._published, self.latest = (state, version), version
            self.changed.notify_all()

    def refresh(self, *, block: bool = True) -> bool:
        """Load the newest published weights, if any are newer and loading is safe now (:meth:`_can_load`); True
        when the weights changed. ``block``: wait until it is safe (between batches) rather than keep the old ones
        (between turns)."""
        while True:
            with self._lock:
                if self._published is None:
                    return False
                if self._can_load():
                    published, self._published = self._published, None
                    break
            if not block:
                return False
            time.sleep(0.01)
        state, version = published
        self._load(state)
        self.version = version
        return True

    def wait_for(self, version: int, stop: threading.Event) -> None:
        """Block until ``version`` is published (or ``stop`` is set)."""
        with self.changed:
            while self.latest < version and not stop.is_set():
                self.changed.wait(timeout=0.5)

    def serve(self) -> None:
        """The trainer's thread, between optimizer steps: do what the sampler asked of it (:class:`ServerPolicy`)."""

    def stop(self, stopping: bool = True) -> None:
        """The pipeline closes (``stopping``): release anything the sampler waits on; False when it starts again."""
        with self.changed:
            self.changed.notify_all()

    # ------------------------------------------------------------------ what a policy is
    def _snapshot(self, model: Any) -> Any:
        raise NotImplementedError

    def _load(self, state: Any) -> None:
        raise NotImplementedError

    def _can_load(self) -> bool:
        return True


def detached_copy(model: Any) -> Any:
    """A deep copy of ``model`` that computes with its own weights only.

    TRL's trainer patches the policy's ``forward`` with a closure over the original module's bound ``forward``
    (``trl.trainer.utils.add_fused_lm_head``); a deep copy keeps that closure, so the copy's forward pass would run
    the original module, the trainer's live weights. Such a forward is dropped from the copy, whose class's own
    ``forward`` (the one TRL wrapped) runs instead. Any instance-level ``forward`` whose closure holds a module
    outside the copy (or a bound method of one) is dropped the same way: deepcopy never copies functions, so such a
    closure always reaches the original.
    """
    duplicate = copy.deepcopy(model)
    own = {id(module) for module in duplicate.modules()}
    for module in duplicate.modules():
        forward = module.__dict__.get("forward")
        function = getattr(forward, "__func__", forward)
        for cell in getattr(function, "__closure__", None) or ():
            try:
                held = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            held = getattr(held, "__self__", held)  # a bound method: its module
            if isinstance(held, torch.nn.Module) and id(held) not in own:
                del module.__dict__["forward"]
                break
    return duplicate


class PolicyCopy(VersionedPolicy):
    """A Hugging Face copy of the policy: a snapshot is a clone of the trainer's ``state_dict``, loaded into the copy
    (which only the sampler's thread uses, so any time is safe)."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = detached_copy(model).eval()
        for parameter in self.model.parameters():
            parameter.requires_grad_(False)

    def _snapshot(self, model: Any) -> dict[str, Any]:
        return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}

    def _load(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state)


class EnginePolicy(VersionedPolicy):
    """The colocated vLLM engine's weights (``engine``: the :class:`~turngym.agents.vllm_backend.VLLMBackend` on TRL's
    engine). A snapshot is a clone of the trainer's weights under vLLM's checkpoint names, LoRA adapters merged
    (:func:`~turngym.agents.vllm_backend.vllm_snapshot`); it loads under the engine's lock, only while no request is
    in flight (:attr:`~turngym.agents.vllm_backend.VLLMBackend.idle`: an engine decoder's running turns keep the
    weights they started with)."""

    def __init__(self, engine: Any, model: Any) -> None:
        super().__init__()
        self.engine, self.model = engine, model

    def _snapshot(self, model: Any) -> list[tuple[str, Any]]:
        from turngym.agents.vllm_backend import vllm_snapshot

        return vllm_snapshot(model)

    def _load(self, state: list[tuple[str, Any]]) -> None:
        self.engine.load_weights(state)

    def _can_load(self) -> bool:
        return self.engine.idle


class ServerPolicy(VersionedPolicy):
    """A vLLM server's weights, sent by TRL's own sync (``sync``, a
    :class:`~turngym.trainers.vllm_colocate.TRLWeightSync`: it reads the trainer's live parameters, and with sharded
    weights gathers them, a collective of the trainer's processes). So the sync runs on the trainer's thread between
    optimizer steps, never while the trainer is mid-step: the sampler asks (:meth:`refresh`, between batches, with no
    request at the server), the trainer serves (:meth:`serve`, after each optimizer step and while it waits for a
    batch), and the server's weights are then the version the trainer published last."""

    def __init__(self, sync: Any, backend: Any, model: Any) -> None:
        super().__init__()
        self.sync, self.backend, self.model = sync, backend, model
        self._asked = False
        self._stopped = False

    def publish(self, model: Any, version: int) -> None:
        with self.changed:  # nothing to copy: TRL's sync reads the trainer's weights when it runs
            self.latest = version
            self.changed.notify_all()

    def refresh(self, *, block: bool = True) -> bool:
        """Between batches only (``block``): a turn sent between the trainer's sync and the version's record would
        be recorded with the wrong version, so the sampler waits, with nothing at the server, while it syncs."""
        with self.changed:
            if not block or self.latest <= self.version or not self.backend.idle:
                return False
            wanted, self._asked = self.latest, True
            while self.version < wanted and not self._stopped:
                self.changed.wait(timeout=0.5)
            return self.version >= wanted

    def serve(self) -> None:
        with self.changed:
            if not self._asked:
                return
            self.sync.publish(None, self.latest)  # the trainer's thread, between steps, no request in flight
            self.version, self._asked = self.latest, False
            self.changed.notify_all()

    def stop(self, stopping: bool = True) -> None:
        with self.changed:
            self._stopped = stopping
            self.changed.notify_all()


class VersionedBackend:
    """A generation backend that records, per episode, the policy version of each turn; with
    ``refresh_between_turns`` it loads newly published weights before each generation call (lockstep), or, through
    its :meth:`decoder`, before a turn joins an idle decoder (continuous batching)."""

    def __init__(self, inner: Any, policy: VersionedPolicy, *, refresh_between_turns: bool) -> None:
        self.inner, self.policy, self.refresh_between_turns = inner, policy, refresh_between_turns
        self.versions: dict[Hashable, list[int]] = {}

    def generate(self, requests: Sequence[Any], sampling: Any, stop_ids: Sequence[int]) -> list[Any]:
        self._between_turns()
        for request in requests:
            self.record(request.key)
        return self.inner.generate(requests, sampling, stop_ids)

    def decoder(self, sampling: Any, stop_ids: Sequence[int]) -> Any:
        """The inner backend's own decoder (vLLM's scheduler) with each turn's version recorded as it joins; for a
        backend without one, turns batched per call through :meth:`generate` (:class:`~turngym.agents.decoding.
        TurnBatcher`: a refresh then drops the Hugging Face caches, as in lockstep)."""
        from turngym.agents.decoding import TurnBatcher

        own = getattr(self.inner, "decoder", None)
        return VersionedDecoder(self, own(sampling, stop_ids)) if callable(own) else TurnBatcher(self, sampling,
                                                                                                  stop_ids)

    def record(self, key: Hashable) -> None:
        """The turn of episode ``key`` about to be sampled is sampled by the weights loaded now."""
        self.versions.setdefault(key, []).append(self.policy.version)

    def _between_turns(self) -> None:
        if self.refresh_between_turns and self.policy.refresh(block=False):
            getattr(self.inner, "_caches", {}).clear()  # keys and values of the old weights: re-encoded

    def release(self, key: Hashable) -> None:
        self.inner.release(key)

    def cache_prefix(self, ids: Sequence[int]) -> None:
        self.inner.cache_prefix(ids)


class VersionedDecoder:
    """A backend's own decoder (:class:`~turngym.agents.vllm_backend.EngineDecoder`...) whose turns record the version
    that samples them. Weights change only while the engine is idle (the policy's safe point), so a turn's version
    is the one loaded when it joins; with partial rollouts a refresh is tried then."""

    def __init__(self, backend: VersionedBackend, inner: Any) -> None:
        self.backend, self.inner = backend, inner

    def add(self, request: Any) -> None:
        if not self.inner.busy:
            self.backend._between_turns()
        self.backend.record(request.key)
        self.inner.add(request)

    def step(self) -> list[Any]:
        return self.inner.step()

    @property
    def busy(self) -> bool:
        return self.inner.busy


@dataclass
class PlayedBatch:
    """Rollout batch ``generation``: its episodes, the versions of their turns, how it was made."""

    generation: int
    task_ids: list[str]
    episodes: list[Any]
    versions: list[list[int]]
    waited_for_policy_s: float = 0.0  # the sampler's idle time before it could start this batch
    metrics: dict[str, float] = field(default_factory=dict)


Play = Callable[[int, list[str], Any], list[Any]]  # (generation, task ids, backend wrapper) -> episodes


class RolloutPipeline:
    """Plays rollout batches 0, 1, 2... in a background thread, batch g once version ``g * S - K`` is out.

    Args:
        play: plays one batch: ``play(generation, task_ids, wrap)`` returns its episodes in order, generating
            through ``wrap(backend)`` (a :class:`VersionedBackend`) with :attr:`policy`'s model.
        plan: the task ids of rollout batch g (the trainer's sampler, read ahead).
        policy: the sampler's :class:`VersionedPolicy` (a :class:`PolicyCopy`, or a vLLM engine's or server's).
        max_staleness: K, in policy versions (optimizer steps).
        steps_per_batch: S, optimizer steps per rollout batch.
        partial_rollouts: refresh the weights between turns (an episode may span updates), not only between
            batches.
        first_episode: the number ``play`` gives a batch's first episode (its others follow in order): this
            process's first, with several.
    """

    def __init__(self, play: Play, plan: Callable[[int], list[str]], policy: VersionedPolicy, *, max_staleness: int,
                 steps_per_batch: int = 1, partial_rollouts: bool = False, first_episode: int = 0) -> None:
        if max_staleness < 1:
            raise ValueError(f"a pipeline needs max_staleness >= 1 (0 plays in the trainer's step), got "
                             f"{max_staleness}")
        self.play, self.plan, self.policy = play, plan, policy
        self.max_staleness, self.steps_per_batch, self.partial = max_staleness, steps_per_batch, partial_rollouts
        self.first_episode = first_episode
        self._results: dict[int, PlayedBatch | BaseException] = {}
        self._done = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.on_close: Callable[[], None] | None = None  # e.g. closing the pools the batches play in

    # ------------------------------------------------------------------ the trainer's side
    def take(self, generation: int, task_ids: Sequence[str], model: Any) -> PlayedBatch:
        """Batch ``generation``, once played; ``task_ids`` are the trainer's (they must be the planned ones).
        A batch with an episode staler than K is refused (the schedule cannot make one). The first call starts the
        thread from ``generation`` with ``model``'s weights (a resumed run starts where it stopped)."""
        if self._thread is None:
            self.policy.stop(False)
            self.policy.publish(model, generation * self.steps_per_batch)
            self._thread = threading.Thread(target=self._run, args=(generation,), name="turngym-rollouts",
                                            daemon=True)
            self._thread.start()
        start = time.perf_counter()
        with self._done:
            while generation not in self._results:
                self._done.wait(timeout=0.05)
                self.policy.serve()  # a safe point of the trainer's (between steps): a server's sync, if asked
                if not self._thread.is_alive() and generation not in self._results:
                    raise RuntimeError("the rollout thread stopped without playing batch "
                                       f"{generation}")
            result = self._results.pop(generation)
        if isinstance(result, BaseException):  # the thread's error, raised where the trainer sees it
            raise RuntimeError(f"rollout batch {generation} failed in the pipeline's thread") from result  # noqa: TRY004
        if list(task_ids) != result.task_ids:
            raise RuntimeError(f"pipelined rollouts planned tasks {result.task_ids[:4]}... for batch {generation}, "
                               f"but the trainer's sampler gave {list(task_ids)[:4]}...: the sampler is not "
                               "deterministic (a curriculum?); train with max_staleness 0")
        trained_at = generation * self.steps_per_batch
        staleness = [trained_at - min(versions) for versions in result.versions]
        if max(staleness, default=0) > self.max_staleness:
            raise RuntimeError(f"rollout batch {generation} trains at version {trained_at} but has episodes "
                               f"{max(staleness)} versions old (max_staleness {self.max_staleness}): a pipeline "
                               "scheduling bug; please report it")
        result.metrics = staleness_metrics(staleness, self.max_staleness, trainer_wait_s=time.perf_counter() - start,
                                           sampler_wait_s=result.waited_for_policy_s)
        return result

    def publish(self, model: Any, version: int) -> None:
        """The trainer's weights after ``version`` optimizer steps, for the sampler's :class:`VersionedPolicy` (a
        :class:`~turngym.agents.generation.WeightPublisher`); called between steps, so what the sampler asked of the
        trainer's thread is done too."""
        self.policy.publish(model, version)
        self.policy.serve()

    def close(self) -> None:
        self._stop.set()
        self.policy.stop()
        if self._thread is not None:
            self._thread.join(timeout=600)
            self._thread = None
        self._stop, self._results = threading.Event(), {}  # a later train() starts again
        if self.on_close is not None:
            self.on_close()

    # ------------------------------------------------------------------ the sampler's side
    def _run(self, generation: int) -> None:
        while not self._stop.is_set():
            needed = generation * self.steps_per_batch - self.max_staleness
            waited = time.perf_counter()
            self.policy.wait_for(needed, self._stop)
            if self._stop.is_set():
                return
            waited = time.perf_counter() - waited
            try:
                result = self._play_batch(generation)
                result.waited_for_policy_s = waited
            except BaseException as error:  # noqa: BLE001 - handed to the trainer, which raises it
                result = error
            with self._done:
                self._results[generation] = result
                self._done.notify_all()
            if isinstance(result, BaseException):
                return
            generation += 1

    def _play_batch(self, generation: int) -> PlayedBatch:
        self.policy.refresh(block=True)  # between batches, always
        task_ids = list(self.plan(generation))
        backend: list[VersionedBackend] = []

        def wrap(inner: Any) -> VersionedBackend:
            backend.append(VersionedBackend(inner, self.policy, refresh_between_turns=self.partial))
            return backend[-1]

        version = self.policy.version
        episodes = self.play(generation, task_ids, wrap)
        numbers = range(self.first_episode, self.first_episode + len(episodes))
        return PlayedBatch(generation, task_ids, episodes, self._versions(numbers, backend, version))

    @staticmethod
    def _versions(numbers: range, backends: list[VersionedBackend], start: int) -> list[list[int]]:
        """Each episode's turn versions; ``play`` numbers a batch's episodes ``numbers`` in order. An episode that
        ended before its first turn (its prompt too long) has the version the batch started with."""
        recorded: dict[Hashable, list[int]] = {}
        for backend in backends:
            recorded.update(backend.versions)
        return [recorded.get(number) or [start] for number in numbers]


class SamplerPlan:
    """Rollout batch g's task keys, read ahead from a fresh copy of the trainer's sampler: this process's share.

    The sampler yields each batch's indices ``repeat`` times in a row (TRL's ``RepeatSampler`` layout, which
    the trainer's own sampler keeps), epoch after epoch; a copy built with the same seed yields the same
    indices, and :meth:`RolloutPipeline.take` checks each batch against the trainer's.

    With P processes, accelerate deals the sampler's indices out in per-process batches of ``batch_size / P``
    (TRL's dataloader batch: ``per_device_train_batch_size x steps_per_generation``), round robin: process i gets
    the i-th slice of each rollout batch, ``indices[i * b : (i + 1) * b]`` with ``b = batch_size / P`` (the
    first copy of the block; its repeats go to the same processes).
    """

    def __init__(self, sampler: Any, prompts: Sequence[str], batch_size: int, repeat: int, *,
                 process_index: int = 0, num_processes: int = 1) -> None:
        if batch_size % num_processes:
            raise ValueError(f"a rollout batch of {batch_size} does not split over {num_processes} processes")
        self.sampler, self.prompts, self.batch_size, self.repeat = sampler, list(prompts), batch_size, repeat
        share = batch_size // num_processes
        self._slice = slice(process_index * share, (process_index + 1) * share)
        self._batches: list[list[str]] = []

    def __call__(self, generation: int) -> list[str]:
        while len(self._batches) <= generation:
            indices = list(iter(self.sampler))
            block = self.batch_size * self.repeat
            if len(indices) < block:
                raise RuntimeError(f"the sampler yields {len(indices)} indices an epoch, fewer than one rollout "
                                   f"batch ({self.batch_size} x {self.repeat})")
            self._batches += [[self.prompts[i] for i in indices[start : start + self.batch_size][self._slice]]
                              for start in range(0, len(indices) - block + 1, block)]
        return self._batches[generation]


def rollout_pipeline(args: Any, worlds: Sequence[Any], tokenizer: Any, backend: Any, model: Any, sampler: Any,
                     prompts: Sequence[str], *, policy: VersionedPolicy | None = None) -> RolloutPipeline:
    """The trainer's pipeline: its own :class:`~turngym.trainers.rollout.EpisodeRunner` (own pools, used only by
    the pipeline's thread), generating through ``backend`` (a factory) with ``policy`` (default: a
    :class:`PolicyCopy` of ``model``; a vLLM engine's: :func:`~turngym.trainers.vllm_colocate.pipelined_vllm`),
    and this process's share of the plan read from a copy of the trainer's ``sampler``.
    Batch g plays with the seed the trainer would give it in its own step, and this process's episodes are
    numbered as there (from ``process_index x`` its share), so a policy that does not change plays the same
    episodes with or without the pipeline."""
    from turngym.trainers.rollout import EpisodeRunner, rollout_seed

    runner = EpisodeRunner(args, worlds, tokenizer, backend)
    make_backend = runner.backend
    policy = policy if policy is not None else PolicyCopy(model)
    steps = args.steps_per_generation * args.num_iterations
    first = args.process_index * (args.generation_batch_size // args.world_size)  # as the trainer's own step

    def play(generation: int, task_ids: list[str], wrap: Callable[[Any], Any]) -> list[Any]:
        runner.backend = lambda sampled_by: wrap(make_backend(sampled_by))
        _, episodes = runner.play(task_ids, policy.model, seed=rollout_seed(args.seed, generation * steps),
                                  first_episode=first)
        return episodes

    plan = SamplerPlan(sampler, prompts, args.generation_batch_size, steps, process_index=args.process_index,
                       num_processes=args.world_size)
    pipeline = RolloutPipeline(play, plan, policy, max_staleness=args.max_staleness, steps_per_batch=steps,
                               partial_rollouts=args.partial_rollouts, first_episode=first)
    pipeline.on_close = runner.close
    return pipeline


class PublishWeights(TrainerCallback):
    """After each optimizer step, the trainer's weights go to a sampler through its
    :class:`~turngym.agents.generation.WeightPublisher` (version = global step), e.g. a :class:`RolloutPipeline`."""

    def __init__(self, publisher: WeightPublisher) -> None:
        self.publisher = publisher

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        self.publisher.publish(model, state.global_step)
