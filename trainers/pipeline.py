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

The thread samples from its own copy of the policy (:class:`PolicyCopy`), refreshed at safe points with the
weights the trainer publishes after each optimizer step: between batches, or, with ``partial_rollouts``,
between turns, so an episode may span a weight update (each turn carries the version that sampled it, and
the episode's cached keys and values are dropped so each turn is sampled by one version).

K = 0 (the default) does not use this module: rollouts play in the trainer's own step, as before.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from transformers import TrainerCallback

from turngym.agents.generation import WeightPublisher
from turngym.trainers.metrics import staleness_metrics


class PolicyCopy:
    """The sampler's copy of the policy and its version; the trainer publishes (a
    :class:`~turngym.agents.generation.WeightPublisher`), the sampler refreshes."""

    def __init__(self, model: Any) -> None:
        self.model = copy.deepcopy(model).eval()
        for parameter in self.model.parameters():
            parameter.requires_grad_(False)
        self.version = 0
        self._published: tuple[dict[str, Any], int] | None = None
        self._lock = threading.Lock()
        self.changed = threading.Condition(self._lock)
        self.latest = 0  # the newest published version (refreshed or not)

    def publish(self, model: Any, version: int) -> None:
        """The trainer's weights after ``version`` optimizer steps (a copy: training goes on)."""
        state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
        with self.changed:
            self._published, self.latest = (state, version), version
            self.changed.notify_all()

    def refresh(self) -> bool:
        """Load the newest published weights, if any are newer; True when the weights changed."""
        with self._lock:
            published, self._published = self._published, None
        if published is None:
            return False
        state, version = published
        self.model.load_state_dict(state)
        self.version = version
        return True

    def wait_for(self, version: int, stop: threading.Event) -> None:
        """Block until ``version`` is published (or ``stop`` is set)."""
        with self.changed:
            while self.latest < version and not stop.is_set():
                self.changed.wait(timeout=0.5)


class VersionedBackend:
    """A generation backend that records, per episode, the policy version of each turn; with
    ``refresh_between_turns`` it loads newly published weights before each generation call."""

    def __init__(self, inner: Any, policy: PolicyCopy, *, refresh_between_turns: bool) -> None:
        self.inner, self.policy, self.refresh_between_turns = inner, policy, refresh_between_turns
        self.versions: dict[Hashable, list[int]] = {}

    def generate(self, requests: Sequence[Any], sampling: Any, stop_ids: Sequence[int]) -> list[Any]:
        if self.refresh_between_turns and self.policy.refresh():
            getattr(self.inner, "_caches", {}).clear()  # keys and values of the old weights: re-encoded
        for request in requests:
            self.versions.setdefault(request.key, []).append(self.policy.version)
        return self.inner.generate(requests, sampling, stop_ids)

    def release(self, key: Hashable) -> None:
        self.inner.release(key)

    def cache_prefix(self, ids: Sequence[int]) -> None:
        self.inner.cache_prefix(ids)


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
        policy: the sampler's :class:`PolicyCopy`.
        max_staleness: K, in policy versions (optimizer steps).
        steps_per_batch: S, optimizer steps per rollout batch.
        partial_rollouts: refresh the weights between turns (an episode may span updates), not only between
            batches.
    """

    def __init__(self, play: Play, plan: Callable[[int], list[str]], policy: PolicyCopy, *, max_staleness: int,
                 steps_per_batch: int = 1, partial_rollouts: bool = False) -> None:
        if max_staleness < 1:
            raise ValueError(f"a pipeline needs max_staleness >= 1 (0 plays in the trainer's step), got "
                             f"{max_staleness}")
        self.play, self.plan, self.policy = play, plan, policy
        self.max_staleness, self.steps_per_batch, self.partial = max_staleness, steps_per_batch, partial_rollouts
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
            self.policy.publish(model, generation * self.steps_per_batch)
            self._thread = threading.Thread(target=self._run, args=(generation,), name="turngym-rollouts",
                                            daemon=True)
            self._thread.start()
        start = time.perf_counter()
        with self._done:
            while generation not in self._results:
                self._done.wait(timeout=0.5)
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
        """The trainer's weights after ``version`` optimizer steps, for the sampler's :class:`PolicyCopy` (a
        :class:`~turngym.agents.generation.WeightPublisher`)."""
        self.policy.publish(model, version)

    def close(self) -> None:
        self._stop.set()
        with self.policy.changed:
            self.policy.changed.notify_all()
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
        self.policy.refresh()  # between batches, always
        task_ids = list(self.plan(generation))
        backend: list[VersionedBackend] = []

        def wrap(inner: Any) -> VersionedBackend:
            backend.append(VersionedBackend(inner, self.policy, refresh_between_turns=self.partial))
            return backend[-1]

        version = self.policy.version
        episodes = self.play(generation, task_ids, wrap)
        return PlayedBatch(generation, task_ids, episodes, self._versions(len(episodes), backend, version))

    @staticmethod
    def _versions(count: int, backends: list[VersionedBackend], start: int) -> list[list[int]]:
        """Each episode's turn versions; ``play`` numbers a batch's episodes 0..count-1 in order. An episode that
        ended before its first turn (its prompt too long) has the version the batch started with."""
        recorded: dict[Hashable, list[int]] = {}
        for backend in backends:
            recorded.update(backend.versions)
        return [recorded.get(number) or [start] for number in range(count)]


class SamplerPlan:
    """Rollout batch g's task keys, read ahead from a fresh copy of the trainer's sampler.

    The sampler yields each batch's indices ``repeat`` times in a row (TRL's ``RepeatSampler`` layout, which
    the trainer's own sampler keeps), epoch after epoch; a copy built with the same seed yields the same
    indices, and :meth:`RolloutPipeline.take` checks each batch against the trainer's.
    """

    def __init__(self, sampler: Any, prompts: Sequence[str], batch_size: int, repeat: int) -> None:
        self.sampler, self.prompts, self.batch_size, self.repeat = sampler, list(prompts), batch_size, repeat
        self._batches: list[list[str]] = []

    def __call__(self, generation: int) -> list[str]:
        while len(self._batches) <= generation:
            indices = list(iter(self.sampler))
            block = self.batch_size * self.repeat
            if len(indices) < block:
                raise RuntimeError(f"the sampler yields {len(indices)} indices an epoch, fewer than one rollout "
                                   f"batch ({self.batch_size} x {self.repeat})")
            self._batches += [[self.prompts[i] for i in indices[start : start + self.batch_size]]
                              for start in range(0, len(indices) - block + 1, block)]
        return self._batches[generation]


def rollout_pipeline(args: Any, worlds: Sequence[Any], tokenizer: Any, backend: Any, model: Any, sampler: Any,
                     prompts: Sequence[str]) -> RolloutPipeline:
    """The trainer's pipeline: its own :class:`~turngym.trainers.rollout.EpisodeRunner` (own pools, used only by
    the pipeline's thread), a copy of ``model``, and the plan read from a copy of the trainer's ``sampler``.
    Batch g plays with the seed the trainer would give it in its own step, so a policy that does not change
    plays the same episodes with or without the pipeline."""
    from turngym.trainers.rollout import EpisodeRunner, rollout_seed

    if args.world_size > 1:
        raise ValueError(f"max_staleness > 0 runs in one process ({args.world_size} here): set max_staleness 0")
    runner = EpisodeRunner(args, worlds, tokenizer, backend)
    make_backend = runner.backend
    policy = PolicyCopy(model)
    steps = args.steps_per_generation * args.num_iterations

    def play(generation: int, task_ids: list[str], wrap: Callable[[Any], Any]) -> list[Any]:
        runner.backend = lambda sampled_by: wrap(make_backend(sampled_by))
        _, episodes = runner.play(task_ids, policy.model, seed=rollout_seed(args.seed, generation * steps))
        return episodes

    pipeline = RolloutPipeline(play, SamplerPlan(sampler, prompts, args.generation_batch_size, steps), policy,
                               max_staleness=args.max_staleness, steps_per_batch=steps,
                               partial_rollouts=args.partial_rollouts)
    pipeline.on_close = runner.close
    return pipeline


class PublishWeights(TrainerCallback):
    """After each optimizer step, the trainer's weights go to a sampler through its
    :class:`~turngym.agents.generation.WeightPublisher` (version = global step), e.g. a :class:`RolloutPipeline`."""

    def __init__(self, publisher: WeightPublisher) -> None:
        self.publisher = publisher

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        self.publisher.publish(model, state.global_step)
