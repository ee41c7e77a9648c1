"""Eager: the agent acts on each world's answer as soon as it arrives."""

from __future__ import annotations

from turngym.agents.schedules.lockstep import Lockstep


class Eager(Lockstep):
    """Lockstep's rounds, each waiting only for the first answers in: every world is kept busy (the default for a
    per-episode agent: scripts, baselines)."""

    wait_all = False
