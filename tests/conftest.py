"""Shared test set-up: make ``tests.helpers_engines`` importable here and in engine child processes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# ``import tests.helpers_engines`` must work whatever directory pytest is started from.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


@pytest.fixture
def engine_pythonpath(monkeypatch: pytest.MonkeyPatch) -> str:
    """Let ``python -m envs.isolation`` child processes import ``tests.helpers_engines``.

    The child inherits the parent's ``sys.path`` only through ``PYTHONPATH``.
    """
    existing = os.environ.get("PYTHONPATH")
    value = str(REPO_ROOT) + (os.pathsep + existing if existing else "")
    monkeypatch.setenv("PYTHONPATH", value)
    return value
