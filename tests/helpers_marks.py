"""Marks that keep `make test` near 15 minutes on 2 cores: of an exhaustive set of cases, the fast suite runs the
first few and `make test-slow` runs every one."""

from __future__ import annotations

import pytest


def first_fast(cases, count: int, *, sort: bool = True) -> list:
    """``cases`` (sorted unless ``sort`` is false), the first ``count`` as they are, the rest marked ``slow``."""
    ordered = sorted(cases) if sort else list(cases)
    return [case if i < count else pytest.param(case, marks=pytest.mark.slow) for i, case in enumerate(ordered)]
