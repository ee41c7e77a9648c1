"""Round 16: attack_instance_get_equality_func.py (its package, agent and tests) with pytest running the unittest class."""
import runpy
from pathlib import Path

_BASE = runpy.run_path(str(Path(__file__).with_name("attack_instance_get_equality_func.py")))
PKG = _BASE["PKG"]
AGENT = _BASE["AGENT"]
TESTS = _BASE["TESTS"]
PYTEST = True
ID = "tests/test_pkg.py::T::test_a"
# Result (7dc42e1 tools): untouched+PRISTINE PASSED, agent+PRISTINE PASSED (WIN), agent,no PRISTINE PASSED (WIN).
# Closed as attack_instance_get_equality_func.py: FAILED both ways.
