"""Deadlines that count the time the caller ran, not the time it was stopped.

A deadline is there to catch a world or an engine that hangs. When the caller and its children are stopped together
(SIGSTOP of a process tree, a suspended machine) or starved for long, the monotonic clock runs on, and on resuming
every deadline has passed although nothing hung: an algorithm study's TextWorld engine was killed in ``load()``
that way after its process tree was paused for 12 minutes, and the study's evaluation stage crashed.

So a wait asked for ``t`` seconds that returns after more than ``t + SLACK`` counts as ``t + SLACK``: the rest is
time in which the caller was not running. Waits are cut into slices of at most ``SLICE`` seconds, so a stop
anywhere in a long wait is seen. A child that hangs while its caller runs still misses its deadline on time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

SLACK = 2.0  # seconds a wait may overrun before the overrun counts as stopped time
SLICE = 1.0  # the longest single wait


class RunningClock:
    """``time.monotonic()`` less the stopped time its waits saw (:meth:`wait`)."""

    def __init__(self) -> None:
        self.stopped = 0.0  # seconds not counted

    def now(self) -> float:
        return time.monotonic() - self.stopped

    def wait(self, waiter: Callable[[float], T], seconds: float) -> T:
        """``waiter(s)`` for ``s = min(seconds, SLICE)``; what it took past ``s + SLACK`` is not counted."""
        seconds = min(max(seconds, 0.0), SLICE)
        start = time.monotonic()
        result = waiter(seconds)
        overrun = time.monotonic() - start - seconds - SLACK
        if overrun > 0:
            self.stopped += overrun
        return result


def poll_within(poll: Callable[[float], bool], timeout: float) -> bool:
    """Whether ``poll(s)`` (a connection's ``poll``) sees an answer within ``timeout`` seconds of running time."""
    clock = RunningClock()
    deadline = clock.now() + timeout
    while (left := deadline - clock.now()) > 0:
        if clock.wait(poll, left):
            return True
    return poll(0)  # an answer at the deadline still counts
