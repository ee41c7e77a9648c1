"""Show once that test_vllm's sync tests fail when the weight sync is skipped (issue 27, 'show it once')."""
import sys

import pytest

from turngym.agents import backends

backends.sync_vllm_weights = lambda llm, model: None  # the sabotage: a sync that loads nothing
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-m", "vllm", "tests/test_vllm.py", "-k", "sync"]))
