"""Shared test set-up: make ``tests.helpers_engines`` importable here and in engine child processes."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# Under pytest-xdist, share the cores between workers: torch would otherwise start one thread per
# core in every worker, and the oversubscribed workers ran the trainer tests 5-10x slower.
_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _workers > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _workers)))

# Training runs in fp32 here whatever the CPU: a run's default precision follows the CPU's native bf16
# (trainers.config.cpu_computes_bf16), and the exact and recorded numbers must not depend on the machine.
# Set in the environment so that the `turngym` processes tests start inherit it.
os.environ["TURNGYM_CPU_BF16"] = "0"

# ``import tests.helpers_engines`` must work whatever directory pytest is started from.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


@pytest.fixture
def engine_pythonpath(monkeypatch: pytest.MonkeyPatch) -> str:
    """Let ``python -m turngym.envs.isolation`` child processes import ``tests.helpers_engines``.

    The child inherits the parent's ``sys.path`` only through ``PYTHONPATH``.
    """
    existing = os.environ.get("PYTHONPATH")
    value = str(REPO_ROOT) + (os.pathsep + existing if existing else "")
    monkeypatch.setenv("PYTHONPATH", value)
    return value


README_MODULE = "readme_guess_number"


def readme_world_code() -> str:
    """The README's GuessNumber block, as written. (Here, not in test_core: importing a test module under a
    second name would register its worlds again, with other classes.)"""
    blocks = re.findall(r"```python\n(.*?)```", (REPO_ROOT / "README.md").read_text(), flags=re.DOTALL)
    matches = [block for block in blocks if "class GuessNumber" in block]
    assert len(matches) == 1, "README.md should hold exactly one GuessNumber example"
    return matches[0]


@pytest.fixture
def readme_world(tmp_path, monkeypatch) -> Path:
    """The README's GuessNumber block, saved verbatim as an importable module (``README_MODULE``) in a fresh
    folder, which is the working directory."""
    (tmp_path / f"{README_MODULE}.py").write_text(readme_world_code())
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, README_MODULE, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="module")
def one_torch_thread():
    """Two cores shared with other workers: one intra-op thread is ~10x faster than two here.
    Modules that train or generate with torch use it: ``pytestmark = pytest.mark.usefixtures(...)``."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory):
    """A 2-layer Llama and its locally trained tokenizer, saved together in one folder."""
    from tests.helpers_llm import save_tiny_policy

    return save_tiny_policy(tmp_path_factory.mktemp("tiny-policy"))


@pytest.fixture
def make_swe_env(tmp_path):
    """``make_swe_env(**kwargs)``: SWE worlds on the bwrap sandbox and the shipped tasks (unless told otherwise),
    all closed at the end of the test. The SWE test modules name it ``make_env``."""
    from turngym.envs.swe import SWEEnv, swe_tasks

    made = []

    def factory(**kwargs):
        kwargs.setdefault("sandbox", "bwrap")
        kwargs.setdefault("tasks", swe_tasks(None))
        made.append(SWEEnv(workspace_root=tmp_path / "sandboxes", **kwargs))
        return made[-1]

    yield factory
    for env in made:
        env.close()


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    """The tiny BPE tokenizer with SmolLM2's chat template (a module may define its own ``tokenizer``)."""
    from tests.helpers_llm import train_tokenizer

    return train_tokenizer(tmp_path_factory.mktemp("tokenizer"))


@pytest.fixture(scope="module")
def model(tokenizer):
    """A 2-layer Llama with random weights over ``tokenizer``'s vocabulary."""
    from tests.helpers_llm import tiny_llama

    return tiny_llama(len(tokenizer))
