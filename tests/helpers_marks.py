"""Marks that keep `make test` near 15 minutes on 2 cores: of an exhaustive set of cases, the fast suite runs a
representative few and `make test-slow` runs every one."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable

import pytest


def _slow(case):
    return pytest.param(case, marks=pytest.mark.slow)


def first_fast(cases, count: int, *, sort: bool = True) -> list:
    """``cases`` (sorted unless ``sort`` is false), the first ``count`` as they are, the rest marked ``slow``."""
    ordered = sorted(cases) if sort else list(cases)
    return [case if i < count else _slow(case) for i, case in enumerate(ordered)]


def first_of_each(cases: Iterable, group: Callable[[object], Hashable],
                  slow_anyway: Callable[[object], bool] = lambda case: False) -> list:
    """``cases`` in order, the first of each ``group(case)`` as it is (unless ``slow_anyway``), the rest ``slow``."""
    params, seen = [], set()
    for case in cases:
        fast = group(case) not in seen and not slow_anyway(case)
        if fast:
            seen.add(group(case))
        params.append(case if fast else _slow(case))
    return params
