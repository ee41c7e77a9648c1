"""Show once that the sampled-ids test fails when the backend hands over other ids than vLLM sampled (issue 27)."""
import dataclasses
import sys

import pytest

from turngym.agents import backends

generate = backends.VLLMBackend.generate


def drops_the_stop_token(self, requests, sampling, stop_ids):  # the sabotage: the last sampled id is lost
    return [dataclasses.replace(g, ids=g.ids[:-1], logprobs=g.logprobs[:-1]) if len(g.ids) > 1 else g
            for g in generate(self, requests, sampling, stop_ids)]


backends.VLLMBackend.generate = drops_the_stop_token
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-m", "vllm", "tests/test_vllm.py", "-k", "sampled_ids"]))
