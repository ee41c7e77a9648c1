"""Engine sessions that fail on purpose, for the engine-failure tests of TextWorldEnv.

They must live at module level in an importable module: the isolated engine runs in a child
process (``python -m turngym.envs.isolation <fd> tests.helpers_engines:HangingSession``) that imports its
factory by name. The tests make ``tests.helpers_engines`` importable in the child through
``PYTHONPATH`` (see ``tests/conftest.py``).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from turngym.envs.textworld.engine import TextWorldSession

HANG_COMMAND = "hang now"
CRASH_COMMAND = "crash now"


class HangingSession(TextWorldSession):
    """A normal session, except that the command ``"hang now"`` never returns."""

    def step(self, command: str) -> dict[str, Any]:
        if command == HANG_COMMAND:
            time.sleep(3600)
        return super().step(command)


class CrashingSession(TextWorldSession):
    """A normal session, except that the command ``"crash now"`` kills the process with SIGSEGV."""

    def step(self, command: str) -> dict[str, Any]:
        if command == CRASH_COMMAND:
            os.kill(os.getpid(), signal.SIGSEGV)
        return super().step(command)


class RaisingSession(TextWorldSession):
    """A normal session, except that the command ``"raise now"`` raises a Python exception."""

    def step(self, command: str) -> dict[str, Any]:
        if command == "raise now":
            raise RuntimeError("injected engine error")
        return super().step(command)


class SpinningEngine:
    """An engine whose ``spin(seconds)`` uses that much CPU time before it answers (time a stopped process does not
    get, unlike a sleep's)."""

    def spin(self, seconds: float) -> str:
        start = time.process_time()
        while time.process_time() - start < seconds:
            pass
        return "spun"
