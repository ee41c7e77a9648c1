"""Characterisation of the rollout's schedules, recorded before the rollout was split into an episode table and
schedules (issue 41).

For each schedule (lockstep, eager, continuous: per token and per turn, with a batching window, over a
backend without a decoder of its own) and the paths they share (an agent that ends an episode, a per-episode
agent, repeated tasks, episode numbers from an offset), ``run_episodes`` plays Signals episodes with a tiny
seeded model over a pool whose worlds answer after a fixed number of ticks (:class:`TickPool`: no wall
clock, so the interleaving of turns and world steps is the same on every run). Every episode must match the
recording (``schedule_characterisation.json``) token for token (prompt ids, completion ids, env mask),
its actions, rewards and outcome too, logprobs to 1e-5; so must the trace of the schedule's calls on the
pool and the agent, and the decoding passes it took.

Re-record only on purpose (a deliberate change of behaviour): ``TURNGYM_RECORD_SCHEDULES=1 pytest <this file>``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers_llm import scripted_signals_backend, tiny_llama, word_tokenizer

from turngym.agents.backends import HFBackend
from turngym.agents.baselines import RandomAgent
from turngym.agents.llm import LLMAgent, LLMAgentConfig
from turngym.agents.rollout import run_episodes
from turngym.envs.pool_api import Reply
from turngym.envs.signals import COMMANDS, signal_tasks
from turngym.envs.vector import LocalPool

pytestmark = pytest.mark.usefixtures("one_torch_thread")

RECORDING = Path(__file__).with_name("schedule_characterisation.json")
RECORD = os.environ.get("TURNGYM_RECORD_SCHEDULES") == "1"
WORLD = {"turns": 3, "reward_mode": "dense"}

# name: the agent ("hf", "scripted" or "random"), its config, and run_episodes' schedule arguments
CASES: dict[str, dict[str, Any]] = {
    "lockstep": {"agent": "hf", "run": {}},
    "lockstep-first-episode-10": {"agent": "hf", "run": {"first_episode": 10}},
    "lockstep-context-limit": {"agent": "hf", "config": {"max_context_tokens": 96}},
    "eager": {"agent": "hf", "run": {"lockstep": False}},
    "eager-context-limit": {"agent": "hf", "config": {"max_context_tokens": 96}, "run": {"lockstep": False}},
    "eager-per-episode-agent": {"agent": "random", "run": {}},
    "continuous": {"agent": "hf", "run": {"continuous": True, "progress": "characterised"}},
    "continuous-context-limit": {"agent": "hf", "config": {"max_context_tokens": 96}, "run": {"continuous": True}},
    "continuous-join-per-turn": {"agent": "hf", "config": {"join": "turn"}, "run": {"continuous": True}},
    "continuous-window": {"agent": "hf", "run": {"continuous": True, "batch_window": 1e6}},
    "continuous-turn-batcher": {"agent": "scripted", "run": {"continuous": True}},
}


class TickPool:
    """A :class:`LocalPool` whose worlds answer a fixed number of ticks after each call (1 to 3, by world and
    call), and a trace of what the schedule asked of it.

    Time is counted in ticks, not seconds: a poll (``timeout=0``) is one decoding iteration later than the
    last, so one tick passes; a blocking receive waits (jumps the clock) until an answer is in, or every answer
    for ``wait_all``. Answers come back in the order they came in (world number breaking ties).
    """

    def __init__(self, inner: LocalPool, trace: list[str]) -> None:
        self.inner, self.num_envs, self.trace = inner, inner.num_envs, trace
        self.clock, self.calls = 0, 0
        self.in_flight: dict[int, tuple[int, Reply]] = {}  # world -> (tick its answer is in, the answer)

    def send(self, index: int, kind: Any, payload: Any = None) -> None:
        self.inner.send(index, kind, payload)
        (reply,) = self.inner.receive()
        self.calls += 1
        self.in_flight[index] = (self.clock + 1 + (index + self.calls) % 3, reply)
        self.trace.append(f"{reply.kind}{index}")

    def receive(self, *, wait_all: bool = True, timeout: float | None = None) -> list[Reply]:
        due = sorted(tick for tick, _ in self.in_flight.values())
        if timeout == 0 and not wait_all:
            self.clock += 1
            mode = "poll"
        elif due:
            self.clock = max(self.clock, due[-1] if wait_all else due[0])
            mode = "all" if wait_all else "block" if timeout is None else "window"
        else:
            mode = "none"
        ready = sorted((tick, index) for index, (tick, _) in self.in_flight.items() if tick <= self.clock)
        replies = [self.in_flight.pop(index)[1] for _, index in ready]
        self.trace.append(f"{mode}:{','.join(str(r.index) for r in replies)}")
        return replies


def traced(agent: Any, trace: list[str]) -> Any:
    """``agent`` with its act, submit, advance and end calls written to ``trace`` (advance: when it ends turns;
    submit: when it is given turns)."""

    def wrap(name: str, write: Any) -> None:
        method = getattr(agent, name)

        def call(*args: Any) -> Any:
            result = method(*args)
            entry = write(args, result)
            if entry:
                trace.append(entry)
            return result

        setattr(agent, name, call)

    wrap("act", lambda args, result: f"act{list(args[0])}")
    wrap("end", lambda args, result: f"end{args[0]}")
    if hasattr(agent, "submit"):
        wrap("submit", lambda args, result: f"submit{list(args[0])}" if args[0] else "")
        wrap("advance", lambda args, result: f"advance{[e for e, _ in result]}" if result else "")
    return agent


@pytest.fixture(scope="module")
def words(tmp_path_factory):
    return word_tokenizer(tmp_path_factory.mktemp("words"))


@pytest.fixture(scope="module")
def policy(words):
    """A tiny Llama whose head favours the four commands and the end of turn: varied replies, some right."""
    model = tiny_llama(len(words))
    head = torch.nn.Linear(model.config.hidden_size, len(words), bias=True)
    with torch.no_grad():
        head.weight.copy_(model.lm_head.weight)
        head.bias.zero_()
        head.bias[words.convert_tokens_to_ids(COMMANDS)] = 3.0
        head.bias[words.convert_tokens_to_ids("<|im_end|>")] = 2.5
    model.lm_head = head
    return model.eval()


@pytest.fixture(scope="module")
def recording():
    if RECORD:
        found: dict = {}
        yield found
        RECORDING.write_text("{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(found.items()))
                             + "\n}\n")
    else:
        yield json.loads(RECORDING.read_text())


def play(case: dict[str, Any], words: Any, policy: Any) -> dict[str, Any]:
    """Seven Signals episodes (the first task twice) on three worlds: the episodes, the trace, the passes."""
    trace: list[str] = []
    backend = None
    if case["agent"] == "random":
        agent = RandomAgent(seed=5)
    else:
        backend = (HFBackend(policy, pad_id=words.pad_token_id) if case["agent"] == "hf"
                   else scripted_signals_backend(words)(None))
        config = {"action_format": "last_line", "max_new_tokens": 4, "temperature": 1.0, "seed": 3,
                  **case.get("config", {})}
        agent = LLMAgent(backend, words, LLMAgentConfig(**config))
    tasks = signal_tasks("train", n=6, turns=WORLD["turns"])
    pool = TickPool(LocalPool.from_id("turngym/Signals-v0", 3, env_kwargs=WORLD), trace)
    played = run_episodes(traced(agent, trace), pool, [tasks[0], *tasks], seed=1, **case.get("run", {}))
    return {"episodes": [episode(t) for t in played], "trace": trace,
            "forward_passes": getattr(backend, "forward_passes", None)}


def episode(trajectory: Any) -> dict[str, Any]:
    found = {"task": trajectory.task["id"], "sample": trajectory.sample, "observations": trajectory.observations,
             "actions": trajectory.actions, "turn_rewards": trajectory.turn_rewards,
             "invalid_actions": trajectory.invalid_actions, "outcome": trajectory.outcome,
             "terminated": trajectory.terminated, "truncated": trajectory.truncated,
             "truncation_reason": trajectory.truncation_reason}
    if trajectory.tokens is not None:
        record = trajectory.tokens
        found |= {"prompt_ids": record.prompt_ids, "completion_ids": record.completion_ids,
                  "env_mask": record.env_mask, "turn_index": record.turn_index, "turn_ends": record.turn_ends,
                  "logprobs": [round(x, 6) for x in record.logprobs], "replies": record.replies,
                  "forced_end_of_turn": record.forced_end_of_turn, "context_truncated": record.context_truncated}
    return found


def without_logprobs(episodes: list[dict]) -> list[dict]:
    return [{key: value for key, value in e.items() if key != "logprobs"} for e in episodes]


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_schedule_plays_the_recorded_episodes(words, policy, recording, name):
    got = json.loads(json.dumps(play(CASES[name], words, policy)))
    if RECORD:
        recording[name] = got
        return
    assert name in recording, f"no recording for {name}: record with TURNGYM_RECORD_SCHEDULES=1"
    expected = recording[name]
    assert len(got["episodes"]) == len(expected["episodes"])
    for i, (a, b) in enumerate(zip(got["episodes"], expected["episodes"], strict=True)):
        assert without_logprobs([a]) == without_logprobs([b]), f"{name}: episode {i} differs"
        assert a.get("logprobs") == pytest.approx(b.get("logprobs"), abs=1e-5), f"{name}: episode {i}'s logprobs differ"
    assert got["trace"] == expected["trace"], f"{name}: the schedule's calls differ"
    assert got["forward_passes"] == expected["forward_passes"]


def test_the_schedules_play_the_same_episodes(recording):
    """Every schedule of the same agent plays the same episodes (the recording is not of a broken schedule)."""
    if RECORD:
        pytest.skip("recording")
    for group in (["lockstep", "eager", "continuous", "continuous-join-per-turn", "continuous-window"],
                  ["lockstep-context-limit", "eager-context-limit", "continuous-context-limit"]):
        first = without_logprobs(recording[group[0]]["episodes"])
        for name in group[1:]:
            assert without_logprobs(recording[name]["episodes"]) == first, name

class OneTurnAtATime:
    """A schedule of one's own (what a new module in agents/schedules/ holds): the agent answers one waiting
    episode per call, the others wait for the next round."""

    def run(self, agent, table) -> None:
        waiting: list[int] = []
        while table.playing:
            table.begin()
            waiting += table.receive(wait_all=not waiting, timeout=0 if waiting else None)
            if waiting:
                episode = waiting.pop(0)
                table.act(episode, agent.act([episode])[0])


def test_a_schedule_of_ones_own_plays_the_same_episodes(words, policy, recording):
    """``run_episodes(schedule=...)`` takes any object with ``run(agent, table)``: the same episodes as lockstep."""
    if RECORD:
        pytest.skip("recording")
    got = json.loads(json.dumps(play({"agent": "hf", "run": {"schedule": OneTurnAtATime()}}, words, policy)))
    expected = recording["lockstep"]["episodes"]
    assert without_logprobs(got["episodes"]) == without_logprobs(expected)
    for a, b in zip(got["episodes"], expected, strict=True):
        assert a["logprobs"] == pytest.approx(b["logprobs"], abs=1e-5)
    assert [entry for entry in got["trace"] if entry.startswith("act")][:3] == ["act[1]", "act[0]", "act[2]"]

def test_a_schedule_is_given_alone_or_by_the_flags(words, policy):
    pool = LocalPool.from_id("turngym/Signals-v0", 1, env_kwargs=WORLD)
    with pytest.raises(ValueError, match="not both"):
        run_episodes(RandomAgent(), pool, list(signal_tasks("train", n=1)), schedule=OneTurnAtATime(), lockstep=True)
