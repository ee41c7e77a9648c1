"""``RayPool``: the :class:`~turngym.envs.vector.EnvPool` interface over worlds in Ray actors.

Ray schedules the env workers: ``num_envs`` worlds live in actors of ``worlds_per_actor`` worlds
each, every actor asking for ``num_cpus_per_actor`` CPUs, so Ray places them on whichever nodes of
the cluster have the CPUs (``scheduling_strategy="SPREAD"`` by default: across nodes first). The
pool keeps EnvPool's semantics:

* a deadline per call (``step_timeout``: 60 s, or the world's ``max_step_seconds`` plus 30 s;
  ``reset_timeout``);
* a world that raises is rebuilt inside its actor: ``worker_error``;
* an actor that dies (``worker_crash``) or misses a deadline (``worker_timeout``, the actor is
  killed) is replaced by a new one. Its *other* worlds were lost with it: their episodes come
  back truncated too, on their next step (``worker_crash``, naming the world that failed);
* a failed reset raises (a bad task is a setup error).

    ray start --head                                  # or ray.init() in the script
    pool = make_pool("turngym/TextWorld-v0", 64, backend="ray", num_workers=16)   # 16 actors x 4 worlds

Needs the ``ray`` extra: ``pip install "turngym[ray]"``. See docs/scaling.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym

from turngym._extras import require
from turngym.envs.pool_api import DEFAULT_STEP_TIMEOUT, EnvFactory, call_env, declared_step_timeout
from turngym.envs.pools import RETRY, Call, DeadlinePool, Failure, TransportBase

logger = logging.getLogger(__name__)


class WorldActor:
    """A Ray actor's body: a few worlds, each called by one thread at a time (``max_concurrency``)."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]]) -> None:
        self.env_fns = list(env_fns)
        self.envs = [make() for make in self.env_fns]

    def call(self, slot: int, kind: str, payload: Any) -> tuple[bool, Any]:
        """(True, answer) or (False, the error) after rebuilding the world that raised."""
        env = self.envs[slot]
        try:
            return True, call_env(env, kind, payload)
        except Exception as error:  # reported to the pool as worker_error
            logger.exception("world %d raised", slot)
            try:
                env.close()
            except Exception:  # it is being replaced anyway
                logger.debug("closing a broken world raised", exc_info=True)
            self.envs[slot] = self.env_fns[slot]()
            return False, f"{type(error).__name__}: {error}"

    def max_step_seconds(self) -> list[float | None]:
        return [getattr(env.unwrapped, "max_step_seconds", None) for env in self.envs]

    def close(self) -> None:
        for env in self.envs:
            env.close()


class RayPool(DeadlinePool):
    """``len(env_fns)`` worlds in Ray actors (see the module docstring).

    Args:
        env_fns: one picklable callable per world that builds it (``RayPool.from_id`` makes them).
        worlds_per_actor: worlds in one actor (they share its process and its CPUs).
        num_cpus_per_actor: the CPUs each actor asks Ray for; this is what places the actors.
        step_timeout, reset_timeout: deadlines, as in EnvPool.
        scheduling_strategy: Ray's placement ("SPREAD": across nodes; "DEFAULT": Ray's packing).
        ready_timeout: seconds for every actor to start; a cluster without the CPUs fails with an
            error naming what it has instead of waiting forever.
        ray_init: arguments of ``ray.init`` when Ray is not started yet (default: join the cluster
            that ``RAY_ADDRESS`` or a running ``ray start`` names, else start one on this machine).
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], *, worlds_per_actor: int = 1,
                 num_cpus_per_actor: float = 1.0, step_timeout: float | None = None, reset_timeout: float = 300.0,
                 scheduling_strategy: str = "SPREAD", ready_timeout: float = 120.0,
                 ray_init: Mapping[str, Any] | None = None) -> None:
        require("ray", extra="ray", feature="The Ray env backend")
        import ray

        if not env_fns:
            raise ValueError("a pool needs at least one environment")
        if worlds_per_actor < 1:
            raise ValueError(f"worlds_per_actor must be at least 1, got {worlds_per_actor}")
        if num_cpus_per_actor < 0:
            raise ValueError(f"num_cpus_per_actor must be >= 0, got {num_cpus_per_actor}")
        if not ray.is_initialized():
            ray.init(**{"include_dashboard": False, "log_to_driver": False, **dict(ray_init or {})})
        actors = ActorTransport(env_fns, worlds_per_actor, {"num_cpus": float(num_cpus_per_actor),
                                                            "scheduling_strategy": scheduling_strategy})
        super().__init__(actors, step_timeout=DEFAULT_STEP_TIMEOUT, reset_timeout=reset_timeout)
        self.env_fns = actors.env_fns
        self.num_envs = actors.size
        self.worlds_per_actor = worlds_per_actor
        self.num_actors = actors.num_actors
        self.num_cpus_per_actor = float(num_cpus_per_actor)
        self.scheduling_strategy = scheduling_strategy
        declared = actors.start_all(ready_timeout)
        self.step_timeout = float(step_timeout) if step_timeout is not None else declared_step_timeout(declared)

    @classmethod
    def from_id(cls, env_id: str, num_envs: int, *, env_kwargs: Mapping[str, Any] | None = None,
                **pool_kwargs: Any) -> RayPool:
        """``num_envs`` copies of ``gymnasium.make(env_id, **env_kwargs)`` in Ray actors."""
        if num_envs < 1:
            raise ValueError(f"a pool needs at least one environment, got num_envs={num_envs}")
        kwargs = dict(env_kwargs or {})
        return cls([EnvFactory(env_id, kwargs) for _ in range(num_envs)], **pool_kwargs)

    def actor_of(self, index: int) -> int:
        return self.transport.actor_of(index)

    def close(self, *, graceful: bool = True) -> None:
        """Close the worlds (``graceful``: give them 10 s) and end the actors."""
        self._abandon_all()
        self.transport.close(graceful=graceful)


class _Ticket:
    """One call on one world of an actor: its object ref (None: answered already, ``failure``), and the
    actor's generation when it started (an answer from a replaced actor is stale)."""

    __slots__ = ("call", "failure", "generation", "index", "ref")

    def __init__(self, index: int, call: Call, ref: Any, generation: int, failure: Failure | None = None) -> None:
        self.index, self.call, self.ref, self.generation, self.failure = index, call, ref, generation, failure


class ActorTransport(TransportBase):
    """:class:`RayPool`'s worlds, ``worlds_per_actor`` to a Ray actor. A world that raises is rebuilt inside
    its actor (no respawn); an actor that dies or misses a deadline is killed and replaced, and the episodes
    of its other worlds are lost with it: a busy one's answer is stale (a step: its episode ends at the next
    step; a reset: it starts again), an idle one's next step comes back truncated (``worker_crash``)."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], worlds_per_actor: int,
                 actor_options: dict[str, Any]) -> None:
        import ray

        self.env_fns = list(env_fns)
        self.size = len(self.env_fns)
        self.worlds_per_actor = worlds_per_actor
        self.num_actors = -(-self.size // worlds_per_actor)
        self.actor_options = actor_options
        self.respawns = 0
        self._actor_class = ray.remote(WorldActor)
        self._actors: list[Any] = [None] * self.num_actors
        self._generation = [0] * self.num_actors  # bumped at each respawn: stale answers are recognised
        self._busy: set[int] = set()  # worlds whose call is on their actor
        self._lost: dict[int, str] = {}  # world -> why its episode is gone (its actor was replaced)

    def actor_of(self, index: int) -> int:
        return index // self.worlds_per_actor

    def name(self, index: int) -> str:
        return f"world {index}"

    # ----------------------------------------------------------------- the transport
    def submit(self, index: int, call: Call, timeout: float) -> _Ticket:
        actor = self.actor_of(index)
        if call.kind == "reset":
            self._lost.pop(index, None)
        elif index in self._lost:  # the world went down with its actor: this episode is over
            return _Ticket(index, call, None, self._generation[actor],
                           Failure("worker_crash", self._lost.pop(index), respawn=False))
        ref = self._actors[actor].call.remote(index - actor * self.worlds_per_actor, call.kind, call.payload)
        self._busy.add(index)
        return _Ticket(index, call, ref, self._generation[actor])

    def wait(self, handles: list[Any], timeout: float) -> list[Any]:
        import ray

        answered = [t for t in handles if t.ref is None]
        by_ref = {t.ref: t for t in handles if t.ref is not None}
        if not by_ref:
            return answered
        ready, _ = ray.wait(list(by_ref), num_returns=1, timeout=0 if answered else timeout)
        if ready:  # collect whatever else is done too, without waiting
            ready, _ = ray.wait(list(by_ref), num_returns=len(by_ref), timeout=0)
        return answered + [by_ref[ref] for ref in ready]

    def result(self, index: int, handle: _Ticket) -> Any:
        import ray

        if handle.failure is not None:
            return handle.failure
        self._busy.discard(index)
        stale = self._stale(handle)
        if stale and handle.call.kind == "reset":
            return RETRY  # a reset lost with a sibling's actor: start it again
        try:
            ok, value = ray.get(handle.ref, timeout=10.0)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as error:
            detail = f"{type(error).__name__}: {error}".split("\n")[0]
            return self._lost_with_actor(index) if stale else Failure("worker_crash", detail)
        if not ok:
            return Failure("worker_error", value, respawn=False)  # the world was rebuilt inside its actor
        if stale and handle.call.kind == "step" and not (value.terminated or value.truncated):
            self._lost[index] = "its actor was replaced after another of its worlds failed"
        return value

    def overdue(self, index: int, handle: _Ticket) -> Any:
        self._busy.discard(index)
        if not self._stale(handle):
            return super().overdue(index, handle)
        return RETRY if handle.call.kind == "reset" else self._lost_with_actor(index)

    def respawn(self, index: int, failure: Failure) -> None:
        import ray

        actor = self.actor_of(index)
        logger.warning("RayPool actor %d failed on world %d (%s: %s); replacing it", actor, index, failure.reason,
                       failure.detail)
        ray.kill(self._actors[actor])
        self._generation[actor] += 1
        self._actors[actor] = self._start(actor)
        first = actor * self.worlds_per_actor
        for sibling in range(first, min(first + self.worlds_per_actor, self.size)):
            if sibling != index and sibling not in self._busy:
                self._lost[sibling] = f"its actor was replaced after world {index} failed ({failure.reason})"
        self.respawns += 1

    def close(self, *, graceful: bool = True) -> None:
        import ray

        closing = [actor.close.remote() for actor in self._actors if actor is not None and graceful]
        try:
            if closing:
                ray.wait(closing, num_returns=len(closing), timeout=10.0)
        finally:
            for actor in self._actors:
                if actor is not None:
                    ray.kill(actor)
            self._actors = [None] * self.num_actors
            self._busy.clear()

    # ----------------------------------------------------------------- plumbing
    def _stale(self, handle: _Ticket) -> bool:
        return handle.generation != self._generation[self.actor_of(handle.index)]

    def _lost_with_actor(self, index: int) -> Failure:
        return Failure("worker_crash", f"its actor was replaced while world {index} was busy", respawn=False)

    def _start(self, actor: int) -> Any:
        first = actor * self.worlds_per_actor
        fns = self.env_fns[first:first + self.worlds_per_actor]
        return self._actor_class.options(**self.actor_options, max_concurrency=len(fns)).remote(fns)

    def start_all(self, timeout: float) -> list[float | None]:
        """Start every actor; every world's ``max_step_seconds``, once every actor has built its worlds."""
        import ray

        for actor in range(self.num_actors):
            self._actors[actor] = self._start(actor)
        refs = [actor.max_step_seconds.remote() for actor in self._actors]
        ready, pending = ray.wait(refs, num_returns=len(refs), timeout=timeout)
        if pending:
            resources = ray.available_resources()
            self.close(graceful=False)
            raise RuntimeError(
                f"Ray started {len(ready)} of {self.num_actors} env actors in {timeout:.0f} s; each asks for "
                f"{self.actor_options['num_cpus']:g} CPUs and the cluster has {resources.get('CPU', 0):g} free. Add "
                "nodes, lower num_cpus_per_actor or put more worlds in each actor (worlds_per_actor)")
        try:
            return [seconds for declared in ray.get(refs) for seconds in declared]
        except ray.exceptions.RayActorError as error:
            self.close(graceful=False)
            raise RuntimeError(f"an env actor could not build its worlds: {error}") from None
