"""Server mode, for real: TRL's ``VLLMClient`` against a vLLM OpenAI server (the CPU build) in another process.

``VLLMBackend(client=VLLMClient(url))`` is what ``turngym eval --backend vllm --vllm-server URL`` plays with. The
module starts ``python -m vllm.entrypoints.openai.api_server`` on SmolLM2-135M-Instruct in fp32, with the
colocated engine's settings (processed logprobs, prefix caching), and checks over real HTTP:

* conformance: greedy multi-turn TextWorld episodes are token-for-token the HF backend's, logprobs within bound;
* the id hand-off: at temperature 1 the record's ids are the server's (their logprobs are HF's teacher-forced);
* a group of identical prompts (an RL group's first turn) gets its own draw per episode, not one draw four times;
* split prefills survive on the CPU build, and the CLI evaluates through the server.

Weight sync to a server is not tested: TRL 1.16 syncs a server through NCCL only (CUDA); see docs/agents.md.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import socket
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1800)]  # the server starts in 2-5 min on 2 cores

if os.environ.get("TURNGYM_REQUIRE_VLLM") == "1":  # make test-vllm: a broken vLLM install fails, never skips
    importlib.import_module("vllm")
else:
    pytest.importorskip("vllm", reason="vLLM is not installed here: run `make test-vllm`")

import requests

from tests.helpers_vllm import (
    check_sampling_with_split_prefills,
    greedy_logprob_gaps_against_hf,
    sampled_logprob_gaps,
    textworld_panel,
)
from turngym.agents.backends import GenerationRequest, SamplingConfig, VLLMBackend
from turngym.agents.models import DEFAULT_MODEL, load_policy, resolve_model

LOGPROB_BOUND = 1e-3  # as tests/test_vllm.py: fp32 both sides, kernels apart (~3e-5 nats)
START_TIMEOUT_S = 600  # the CPU build compiles and warms up for minutes on 2 cores


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def smollm2() -> str:
    return resolve_model(DEFAULT_MODEL)


# Run first in the server's process: SIGTERM it when this test process dies, however it dies (a killed pytest skips
# the fixture's teardown; an orphaned server and its engine held 3.4 GB here). In the child itself, after exec, since
# a preexec_fn is unsafe in a process with threads.
DIE_WITH_PARENT = ("import ctypes, os, signal, sys; "
                   "ctypes.CDLL('libc.so.6').prctl(1, signal.SIGTERM); "  # 1: PR_SET_PDEATHSIG
                   "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")


@pytest.fixture(scope="module")
def server(smollm2, tmp_path_factory):
    """A vLLM OpenAI server on a free local port; its log is printed if it dies before it answers."""
    port = free_port()
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
           "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-c", DIE_WITH_PARENT, "-m", "vllm.entrypoints.openai.api_server", "--model", smollm2,
               "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--max-model-len", "4096",
               "--seed", "0", "--enable-prefix-caching", "--logprobs-mode", "processed_logprobs"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:
            if process.poll() is not None:
                pytest.fail(f"the vLLM server exited with {process.returncode}:\n{log.read_text()[-4000:]}")
            try:
                if requests.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the vLLM server did not answer in {START_TIMEOUT_S} s:\n{log.read_text()[-4000:]}")
            time.sleep(2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="module")
def backend(server) -> VLLMBackend:
    from trl.generation.vllm_client import VLLMClient

    return VLLMBackend(client=VLLMClient(base_url=server))


@pytest.fixture(scope="module")
def policy(smollm2):
    return load_policy(smollm2)


@pytest.fixture(scope="module")
def tasks():
    return textworld_panel(4)


def test_greedy_episodes_through_the_server_equal_the_hf_backends(backend, policy, tasks):
    gaps = greedy_logprob_gaps_against_hf(backend, *policy, tasks)
    print(f"server, greedy: {len(gaps)} sampled tokens equal; |logprob gap| max {max(gaps):.2e}")
    assert max(gaps) < LOGPROB_BOUND


def test_sampled_ids_from_the_server_are_the_ids_trained_on(backend, policy, tasks):
    """Temperature 1: the ids the server sent are the record's, and their logprobs are the trainer's."""
    gaps = sampled_logprob_gaps(backend, *policy, tasks)
    print(f"server, sampled: {len(gaps)} tokens; |server - HF teacher-forced logprob| max {max(gaps):.2e}")
    assert all(math.isfinite(g) for g in gaps) and max(gaps) < LOGPROB_BOUND


def test_a_group_of_identical_prompts_gets_a_draw_per_episode(backend):
    """An RL group's first turn: 8 episodes, one prompt. One seed shared by the batch would draw the same reply
    8 times (every advantage 0); each episode must get its own draw."""
    prompt = [1] + [100 + i for i in range(40)]
    requests_ = [GenerationRequest(key, prompt, seed=key) for key in range(8)]
    generations = backend.generate(requests_, SamplingConfig(temperature=1.0, max_new_tokens=8), stop_ids=[2])
    assert len({tuple(g.ids) for g in generations}) > 1, [g.ids for g in generations]


def test_sampling_through_the_server_survives_prefills_split_over_steps(backend):
    """As tests/test_vllm.py; a seeded split prefill would kill the CPU build's server (it answers nothing after)."""
    check_sampling_with_split_prefills(backend)


def test_turngym_eval_plays_through_the_server(server, smollm2, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "turngym.recipes.cli", "eval", "--agent", "llm", "--backend", "vllm", "--vllm-server",
         server, "--model", smollm2, "--env", "turngym/TextWorld-v0", "--config", "w2-o3-q2", "--episodes", "2",
         "--max-turns", "4", "--out", str(tmp_path / "out")],
        check=False, capture_output=True, text=True, timeout=900, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    [report_file] = (tmp_path / "out").glob("*.json")
    report = json.loads(report_file.read_text())
    assert report["agent"].startswith("vllm:") and report["overall"]["episodes"] == 2, report
    assert report["overall"]["infrastructure_failures"] == 0
