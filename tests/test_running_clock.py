"""Deadlines count the time the caller ran (envs/running_clock.py): a paused process tree is not a hung engine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from turngym.envs import running_clock
from turngym.envs.running_clock import SLACK, RunningClock, poll_within


class FakeTime:
    """A monotonic clock that moves only when a fake poll says so."""

    def __init__(self) -> None:
        self.t = 100.0

    def monotonic(self) -> float:
        return self.t


@pytest.fixture
def fake_time(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(running_clock.time, "monotonic", fake.monotonic)
    return fake


def test_a_wait_that_overruns_by_more_than_the_slack_counts_the_rest_as_stopped(fake_time):
    clock = RunningClock()
    start = clock.now()

    def waiter(took):
        def wait(seconds):
            fake_time.t += took
            return False
        return wait

    clock.wait(waiter(1.0 + SLACK), 1.0)  # late, but within the slack: all of it counts
    assert clock.now() - start == pytest.approx(1.0 + SLACK) and clock.stopped == 0.0
    clock.wait(waiter(700.0), 5.0)  # asked for 5 s, the slice is 1 s: 1 + SLACK count, the rest was stopped
    assert clock.stopped == pytest.approx(700.0 - 1.0 - SLACK)
    assert clock.now() - start == pytest.approx(2 * (1.0 + SLACK))


def test_an_answer_after_a_long_stop_comes_within_the_deadline_and_a_hang_still_misses_it(fake_time):
    def poll_answering_after(running_seconds, stop_at=None, stop_for=0.0):
        """A connection's poll: the answer comes after ``running_seconds`` of the caller's time; the caller is
        stopped for ``stop_for`` seconds once its clock passes ``stop_at``."""
        state = {"ran": 0.0, "stopped": False}

        def poll(seconds):
            if state["ran"] >= running_seconds:
                return True
            step = min(seconds, running_seconds - state["ran"])
            fake_time.t += step
            state["ran"] += step
            if stop_at is not None and not state["stopped"] and state["ran"] >= stop_at:
                fake_time.t += stop_for
                state["stopped"] = True
            return state["ran"] >= running_seconds
        return poll

    # 12 minutes stopped half a second in; the engine answers after 3 s of running time, within its 10 s
    assert poll_within(poll_answering_after(3.0, stop_at=0.5, stop_for=720.0), 10.0)
    # an engine that hangs while the caller runs misses its deadline on time
    start = fake_time.t
    assert not poll_within(poll_answering_after(1e9), 10.0)
    assert fake_time.t - start == pytest.approx(10.0)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_an_isolated_engine_survives_its_caller_being_paused_with_its_process_tree():
    """The study's crash, for real: a caller and its engine stopped together (SIGSTOP to the process group) for
    longer than the call's deadline, then continued. The engine's call needs CPU time after the pause; before
    the running clock, the caller killed it on resuming ("did not answer spin() within 10s and was killed")."""
    caller = ("from turngym.envs.isolation import IsolatedEngine\n"
              "engine = IsolatedEngine('tests.helpers_engines:SpinningEngine', name='spinner')\n"
              "engine.start(); print('calling', flush=True)\n"
              "try:\n    print(engine.call('spin', 2.0, timeout=10.0), flush=True)\n"
              "except Exception as error:\n    print(error, flush=True)\n"
              "engine.close()\n")
    process = subprocess.Popen([sys.executable, "-c", caller], stdout=subprocess.PIPE, text=True,
                               start_new_session=True, env=os.environ.copy())
    try:
        assert process.stdout.readline().strip() == "calling"
        time.sleep(0.5)
        os.killpg(process.pid, signal.SIGSTOP)  # the caller and its engine, as a paused study's tree
        time.sleep(12.0)
        os.killpg(process.pid, signal.SIGCONT)
        out, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert out.strip() == "spun", out
