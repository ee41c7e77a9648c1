"""Optional dependencies: each world and the trainers name the extra that installs what they need."""

from __future__ import annotations

import importlib.util


def require(module: str, *, extra: str, feature: str) -> None:
    """Raise a clear ImportError when ``module`` (from the ``extra``) is not installed."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken install, or a finder that refuses it
        found = False
    if not found:
        raise ImportError(f"{feature} needs the {module!r} package, which is not installed. "
                          f'Install it with: pip install "turngym[{extra}]"')
