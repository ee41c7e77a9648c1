"""Show once that the trainer's LoRA test fails when a sync loads the base weights without merging the adapters."""
import sys

import pytest
import torch

from turngym.agents import backends, vllm_backend


def syncs_without_merging(llm, model):  # the sabotage: the engine gets the base weights, never the adapters
    with torch.no_grad():
        llm.collective_rpc(vllm_backend._reload_weights, args=(list(backends.vllm_parameters(model)),))
    llm.reset_prefix_cache()


vllm_backend.sync_vllm_weights = syncs_without_merging  # what VLLMBackend.publish, the trainer's publisher, calls
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-m", "vllm", "tests/test_vllm_trainer.py", "-k", "lora"]))
