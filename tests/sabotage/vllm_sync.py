"""Show once that test_vllm's sync tests fail when the weight sync is skipped (issue 27, 'show it once')."""
import sys

import pytest

from turngym.agents import vllm_backend

# the sabotage: a sync that loads nothing (VLLMBackend.publish, every colocated engine's publisher, calls this one)
vllm_backend.sync_vllm_weights = lambda llm, model: None
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-m", "vllm", "tests/test_vllm.py", "-k", "sync"]))
