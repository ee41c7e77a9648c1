"""Training an agent people already have: a harness's episodes, through the proxy, as training samples.

A *harness* is the user's own agent loop: a function that plays one episode of a turngym world, talking to the
policy only through an OpenAI-compatible base URL (:class:`HarnessEpisode`). :class:`HarnessRunner` plays a
training step's episodes that way: it serves the policy behind the proxy (:mod:`turngym.agents.proxy_server`, on a
thread, loopback), gives each episode its own base URL (``.../episodes/ID/v1``, so the harness needs no header),
runs the harnesses concurrently (their calls batch in the proxy) and turns each episode's calls into an
:class:`~turngym.trainers.episodes.Episode` whose turns are its calls (:class:`~turngym.agents.proxy.CallsRecord`):

* call t trains on exactly the context it was given (the per-turn layout), whatever the harness did to its
  history; a call whose history was edited is marked ``rewritten`` and kept or dropped (``harness_rewrites``);
* a world step's reward goes to the last call made before it, so turn-level credit (``turn_rloo``'s
  return-to-go) flows across the calls; a call with no step after it (a harness's own tool, a second call in a
  turn) earns 0 of its own;
* ``harness_reward`` (``module:function(messages, task) -> float``) adds a score over the episode's final messages
  to the last call: a reward for worlds judged by their transcript.

The runner has :class:`~turngym.trainers.rollout.EpisodeRunner`'s ``play`` interface, so the trainer's step, its
estimators and its layouts take harness episodes unchanged.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from turngym.agents.backends import HFBackend
from turngym.agents.base import stable_seed
from turngym.agents.episode_table import Trajectory
from turngym.agents.proxy import CallStore, CapturedCall, calls_record, chosen_calls
from turngym.envs.tasks import Task, TaskSet
from turngym.trainers.episodes import Episode

logger = logging.getLogger(__name__)

# plays one episode (with the config's harness_kwargs); may return the episode's final messages
Harness = Callable[..., Any]
RewardFunction = Callable[[list[dict[str, Any]], dict[str, Any]], float]  # (messages, task) -> reward


@dataclass
class HarnessEpisode:
    """What a harness is given for one episode: where the policy is served, and the world to play.

    ``base_url`` and ``api_key`` go to ``openai.OpenAI(base_url=..., api_key=...)``; ``model`` is the served
    model's name; ``env`` is the world with this episode's task fixed (``env.reset()`` starts it, once); ``task`` is
    the task's public record.
    """

    base_url: str
    api_key: str
    model: str
    env: Any
    task: dict[str, Any]
    seed: int
    episode_id: str


@dataclass
class StepRecord:
    """One world step a harness made: after which call, its reward, whether it ended the episode, its info."""

    after_call: int
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]
    observation: str


class RecordedWorld:
    """The world a harness plays: reset to its task, each step recorded against the calls made so far.

    Not a gymnasium wrapper on purpose: a harness gets ``reset``/``step``/``action_space`` and nothing that would
    let it pick another task or reach the grading.
    """

    def __init__(self, env: Any, task: Task, store: CallStore, episode_id: str) -> None:
        self._env, self._task, self._store, self._episode = env, task, store, episode_id
        self.steps: list[StepRecord] = []
        self.first_observation: str | None = None
        self.first_info: dict[str, Any] = {}
        self.done = False

    @property
    def action_space(self) -> Any:
        return self._env.action_space

    @property
    def observation_space(self) -> Any:
        return self._env.observation_space

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        if self.first_observation is not None:
            raise RuntimeError("a harness episode is one play of its task: reset() is called once")
        observation, info = self._env.reset(seed=seed, options={"task": self._task})
        self.first_observation, self.first_info = observation, dict(info)
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.first_observation is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            raise RuntimeError("the episode has ended; its harness should stop")
        observation, reward, terminated, truncated, info = self._env.step(action)
        calls = self._store.count(self._episode)
        self.steps.append(StepRecord(max(calls - 1, 0), float(reward), bool(terminated), bool(truncated),
                                     dict(info), observation))
        self.done = bool(terminated or truncated)
        return observation, reward, terminated, truncated, info


def load_callable(spec: str, what: str) -> Callable:
    """``module:function`` or ``path/to/file.py:function``, imported; a one-line error naming ``what``."""
    target, _, name = spec.rpartition(":")
    if not target or not name:
        raise ValueError(f"{what} is 'module:function' or 'path/to/file.py:function', got {spec!r}")
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise ValueError(f"{what}: no file {target}")
        module_name = f"turngym_user_{path.stem}"
        loader = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(loader)
        sys.modules[module_name] = module
        loader.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    function = getattr(module, name, None)
    if not callable(function):
        raise ValueError(f"{what}: {target} has no function {name!r}")  # noqa: TRY004 - a bad config value
    return function


@dataclass
class HarnessEpisodeResult:
    """What the runner keeps of one harness episode before it becomes an Episode."""

    calls: list[CapturedCall]
    world: RecordedWorld
    messages: list[dict[str, Any]] | None
    error: str | None = None
    episode_id: str = ""


def _truncation_reason(result: HarnessEpisodeResult, last: StepRecord | None) -> str | None:
    """Why a harness episode did not end in the world's own terminal state (None when it did)."""
    if last is not None and last.terminated:
        return None
    if result.error:
        return "harness_timeout" if result.error == "harness_timeout" else "harness_error"
    if last is not None and last.truncated:
        return last.info.get("truncation_reason") or "max_turns"
    return "harness_stopped"  # the harness returned before the world ended the episode


def episode_of_calls(result: HarnessEpisodeResult, task: Task, key: str, *, end_of_turn_id: int,
                     on_rewrite: str = "own_context", reward: RewardFunction | None = None) -> Episode | None:
    """The :class:`Episode` of a harness's episode: its calls as turns, the world's rewards on the calls that
    preceded each step, ``reward`` over the final messages on the last call. None when no call is left."""
    calls = chosen_calls(result.calls, on_rewrite)
    if not calls:
        return None
    record = calls_record(calls, end_of_turn_id)
    position = {c.index: t for t, c in enumerate(calls)}
    turn_rewards, invalid = [0.0] * len(calls), [False] * len(calls)
    for step in result.world.steps:  # a step after a dropped call goes to the latest kept call before it
        kept = [t for index, t in position.items() if index <= step.after_call]
        turn = max(kept) if kept else 0
        turn_rewards[turn] += step.reward
        invalid[turn] = invalid[turn] or bool(step.info.get("invalid_action"))
    components: dict[str, float] = {}
    if reward is not None:
        messages = result.messages or [*calls[-1].messages, calls[-1].reply]
        score = float(reward(messages, {"id": task.id, "split": task.split, "payload": dict(task.payload)}))
        turn_rewards[-1] += score
        components["harness_reward"] = score
    last = result.world.steps[-1] if result.world.steps else None
    reason = _truncation_reason(result, last)
    observations = [result.world.first_observation or ""] + [s.observation for s in result.world.steps]
    trajectory = Trajectory(
        task={"id": task.id, "split": task.split, "difficulty": task.difficulty, "harness_episode": result.episode_id},
        observations=observations, actions=[a or "" for a in record.actions], turn_rewards=turn_rewards,
        invalid_actions=invalid, won=bool(last and last.info.get("won")),
        terminated=bool(last and last.terminated), truncated=not (last and last.terminated),
        truncation_reason=reason, record=record,
        reward_components=components)
    episode = Episode(trajectory, key)
    episode.validate()
    return episode


class HarnessRunner:
    """Plays training episodes with a user's harness through the proxy; :class:`EpisodeRunner`'s interface.

    Args:
        args: the run's config (its ``harness_*`` fields, the world, the sampling temperature).
        tasks: the run's training tasks (one world).
        tokenizer: the policy's tokenizer and chat template.
        backend: builds the generation backend from the model to sample with (default: HF).
    """

    def __init__(self, args: Any, tasks: TaskSet | Sequence[Any], tokenizer: Any,
                 backend: Callable | None = None) -> None:
        from turngym.agents.proxy_sampler import BatchingSampler
        from turngym.agents.proxy_server import PolicyService, ProxyServer, ProxySettings
        from turngym.trainers.worlds import World, world_name

        self.args, self.tokenizer = args, tokenizer
        worlds = ([World(world_name(args.env_id), args, train_tasks=tasks)] if isinstance(tasks, TaskSet)
                  else list(tasks))
        if len(worlds) != 1:
            raise ValueError(f"a harness plays one world, got {len(worlds)}")
        self.world = worlds[0]
        self.tasks = {t.id: t for t in (self.world.train_tasks or ())}
        self.world_of = dict.fromkeys(self.tasks, self.world)
        self.backend = backend or (lambda model: HFBackend(model, pad_id=tokenizer.pad_token_id))
        self.harness: Harness = load_callable(args.harness, "harness")
        self.reward = load_callable(args.harness_reward, "harness_reward") if args.harness_reward else None
        self.store = CallStore(open_episodes=False)
        for name in ("httpx", "httpx2", "openai"):  # the harnesses' clients would log every call at INFO
            logging.getLogger(name).setLevel(logging.WARNING)
        self.sampler = BatchingSampler(_NoBackend(), window=0.01)
        settings = ProxySettings(model_name=args.harness_model_name, render=args.harness_render,
                                 max_context=args.harness_max_context, default_max_tokens=args.harness_max_tokens,
                                 seed=args.seed, force_temperature=args.temperature)
        self.service = PolicyService(tokenizer, self.sampler, self.store, settings)
        self.server = ProxyServer(self.service)
        self.api_key = "turngym-local"
        self._envs: list[Any] = []
        self._worlds: dict[str, RecordedWorld] = {}
        self._lock = threading.Lock()
        self.plays = 0

    def play(self, task_ids: Sequence[str], model: Any, *, seed: int, first_episode: int = 0,
             progress: bool | str = False) -> tuple[list[Trajectory], list[Episode]]:
        unknown = sorted({t for t in task_ids if t not in self.tasks})
        if unknown:
            raise KeyError(f"the trainer's dataset names tasks it was not given: {unknown[:5]}")
        self.sampler.set_backend(self.backend(model))
        self.service.settings.version = self.plays
        self.plays += 1
        ids = [f"e{seed % 10**8}-{first_episode + i}" for i in range(len(task_ids))]
        while len(self._envs) < len(task_ids):
            self._envs.append(self._make_env())
        self._worlds = {}
        for episode_id in ids:
            self.store.open(episode_id)
        workers = min(len(task_ids), self.args.harness_concurrency or len(task_ids)) or 1
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="turngym-harness")
        try:
            futures = [pool.submit(self._play_one, episode_id, self.tasks[key], self._envs[i],
                                   stable_seed(seed, first_episode + i) % 2**31)
                       for i, (episode_id, key) in enumerate(zip(ids, task_ids, strict=True))]
            deadline = time.monotonic() + self.args.harness_timeout if self.args.harness_timeout else None
            results = [self._result(f, episode_id, i, deadline)
                       for i, (f, episode_id) in enumerate(zip(futures, ids, strict=True))]
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # a harness past its timeout is left to fail on its own
        logger.debug("%d harness episodes played, %d calls", len(results), sum(len(r.calls) for r in results))
        episodes, end_of_turn = [], self.service.prompts.chat.end_of_turn_id
        for result, key in zip(results, task_ids, strict=True):
            episode = episode_of_calls(result, self.tasks[key], key, end_of_turn_id=end_of_turn,
                                       on_rewrite=self.args.harness_rewrites, reward=self.reward)
            if episode is None:
                raise RuntimeError(f"the harness made no model call in its episode of task {key!r}"
                                   f"{': ' + result.error if result.error else ''}; a harness episode needs at "
                                   "least one call to train on")
            episodes.append(episode)
        return [e.trajectory for e in episodes], episodes

    def _play_one(self, episode_id: str, task: Task, env: Any, seed: int) -> HarnessEpisodeResult:
        world = self._worlds[episode_id] = RecordedWorld(env, task, self.store, episode_id)
        episode = HarnessEpisode(base_url=self.server.episode_url(episode_id), api_key=self.api_key,
                                 model=self.service.settings.model_name, env=world,
                                 task={"id": task.id, "split": task.split}, seed=seed, episode_id=episode_id)
        try:
            messages = self.harness(episode, **(self.args.harness_kwargs or {}))
            error = None
        except Exception as problem:  # noqa: BLE001 - a harness's failure ends its episode, reported
            logger.warning("the harness failed in episode %s: %s: %s", episode_id, type(problem).__name__, problem)
            messages, error = None, f"{type(problem).__name__}: {problem}"
        return HarnessEpisodeResult([], world, messages if isinstance(messages, list) else None, error, episode_id)

    def _result(self, future: Any, episode_id: str, slot: int, deadline: float | None) -> HarnessEpisodeResult:
        """The episode's result; past the deadline its episode is closed (the harness's next call gets 404),
        it ends as truncated (``harness_timeout``) on the calls it made, and its world is replaced."""
        try:
            result = future.result(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            world = self._stuck_world(episode_id, slot)
            logger.warning("the harness's episode %s ran past harness_timeout (%s s)", episode_id,
                           self.args.harness_timeout)
            result = HarnessEpisodeResult([], world, None, "harness_timeout", episode_id)
        result.calls = self.store.close(episode_id)
        return result

    def _stuck_world(self, episode_id: str, slot: int) -> RecordedWorld:
        """The record of a harness still running, and a fresh world for its slot (the old one is still in use)."""
        world = self._worlds.get(episode_id)
        self._envs[slot] = self._make_env()
        return world if world is not None else RecordedWorld(self._envs[slot], None, self.store, episode_id)

    def _make_env(self) -> Any:
        from turngym.envs.registry import make

        return make(self.world.options.env_id, **self.world.options.world_kwargs())

    def close(self) -> None:
        self.server.close()
        self.sampler.close()
        for env in self._envs:
            env.close()
        self._envs = []


class _NoBackend:
    """The sampler's backend until the first step gives it the policy's."""

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the proxy has no policy yet: it serves during the trainer's rollouts")

    def release(self, key: Any) -> None:
        pass

