"""A study's generation backend (``backend: auto | hf | vllm``), without vLLM: how ``auto`` resolves, what a study
records, and the one line that refuses resuming a study on the other backend. The studies themselves on vLLM, and
their outcomes against HF's, are tests/test_vllm_study.py (marker ``vllm``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from turngym.recipes import compare_algorithms
from turngym.recipes.study import Study
from turngym.recipes.study_config import StudyConfig, resolve_backend, vllm_imports


def fake_vllm(tmp_path: Path, monkeypatch, body: str) -> None:
    """A ``vllm`` package with ``body`` as its ``__init__``, first on ``sys.path`` (and none imported yet)."""
    package = tmp_path / "fake" / "vllm"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path / "fake"))
    monkeypatch.delitem(sys.modules, "vllm", raising=False)


def no_vllm(monkeypatch) -> None:
    missing = (False, "vLLM is not installed in this interpreter")
    monkeypatch.setattr("turngym.recipes.study_config.vllm_imports", lambda: missing)


def study_config(tmp_path: Path, **overrides) -> StudyConfig:
    data = {"name": "tiny", "results_dir": str(tmp_path / "results"),
            "world": {"model_name_or_path": "policy", "env_id": "turngym/Signals-v0", "num_train_tasks": 8},
            "rl": {"num_generations": 2, "per_device_train_batch_size": 4},
            "algorithms": {"grpo": {}}, "episodes": 8, "evaluation": {"num_tasks": 2, "overlap": "report"}}
    return StudyConfig.from_dict({**data, **overrides})


def test_auto_is_vllm_exactly_where_import_vllm_works(tmp_path, monkeypatch):
    fake_vllm(tmp_path, monkeypatch, "__version__ = '9.9.9'\n")
    assert vllm_imports() == (True, "vLLM 9.9.9 imports in this interpreter")
    assert resolve_backend("auto") == ("vllm", "backend auto: vLLM 9.9.9 imports in this interpreter")
    assert resolve_backend("hf")[0] == "hf"  # asked for: HF even where vLLM imports


def test_auto_is_hf_where_vllm_is_installed_but_does_not_import(tmp_path, monkeypatch):
    fake_vllm(tmp_path, monkeypatch, "raise ImportError('libcudart.so.12: cannot open shared object file')\n")
    usable, why = vllm_imports()
    assert not usable and why == ("import vllm fails here (ImportError: libcudart.so.12: cannot open shared object "
                                  "file)")
    assert resolve_backend("auto") == ("hf", f"backend auto: {why}")
    with pytest.raises(ValueError, match="^backend vllm: import vllm fails here") as error:
        resolve_backend("vllm")
    assert "\n" not in str(error.value) and ".venv-vllm/bin/turngym" in str(error.value)


def test_auto_is_hf_without_vllm_and_an_unknown_backend_is_refused(tmp_path, monkeypatch):
    no_vllm(monkeypatch)
    assert resolve_backend("auto") == ("hf", "backend auto: vLLM is not installed in this interpreter")
    with pytest.raises(ValueError, match="backend vllm: vLLM is not installed in this interpreter; run the study "
                                         r"with \.venv-vllm/bin/turngym"):
        resolve_backend("vllm")
    with pytest.raises(ValueError, match="backend must be one of auto, hf, vllm, got 'tpu'"):
        study_config(tmp_path, backend="tpu")


def test_a_study_records_the_backend_it_resolved_to_and_refuses_to_resume_on_the_other(tmp_path, monkeypatch):
    no_vllm(monkeypatch)
    config = study_config(tmp_path)  # backend: auto
    study = Study(config, compare_algorithms.arms_of(config), progress=False)
    assert study.backend == "hf"
    assert study.backend_line() == ("study tiny: generation on HF (transformers); backend auto: vLLM is not installed "
                                    "in this interpreter")
    assert json.loads((study.out / "config.json").read_text())["backend"] == "hf"  # resolved, not "auto"
    assert Study.recorded_backend(config) == "hf"

    # The same study where vLLM imports: auto would now mean vLLM, so it is refused in one line.
    monkeypatch.setattr("turngym.recipes.study_config.vllm_imports", lambda: (True, "vLLM 0.0 imports here"))
    with pytest.raises(ValueError) as error:
        Study(config, compare_algorithms.arms_of(config), progress=False)
    message = str(error.value)
    assert "\n" not in message
    assert message == (f"{study.out} ran on the hf backend and this run resolves to vllm (backend auto: vLLM 0.0 "
                       "imports here); their outcomes differ within the numerical gap, so a study stays on one: "
                       "resume it with --backend hf (backend: hf) where it imports, or start over with --restart")
    assert Study.changed_options(config) == []  # not a changed config: the demo must not start over for it

    # backend: hf resumes it; --restart starts it over on vLLM.
    resumed = Study(study_config(tmp_path, backend="hf"), compare_algorithms.arms_of(config), progress=False)
    assert resumed.backend == "hf"
    restarted = Study(config, compare_algorithms.arms_of(config), restart=True, progress=False)
    assert json.loads((restarted.out / "config.json").read_text())["backend"] == "vllm"


def test_a_study_saved_before_backends_were_recorded_evaluated_on_hf(tmp_path, monkeypatch):
    config = study_config(tmp_path)
    folder = Path(config.results_dir) / config.name
    folder.mkdir(parents=True)
    legacy = config.to_dict()
    del legacy["backend"]
    (folder / "config.json").write_text(json.dumps(legacy))
    assert Study.changed_options(config) == []
    assert Study.recorded_backend(config) == "hf"
    monkeypatch.setattr("turngym.recipes.study_config.vllm_imports", lambda: (True, "vLLM 0.0 imports here"))
    with pytest.raises(ValueError, match="ran on the hf backend and this run resolves to vllm"):
        Study(config, compare_algorithms.arms_of(config), progress=False)


def test_the_backend_decides_rl_generation(tmp_path, monkeypatch):
    no_vllm(monkeypatch)
    config = study_config(tmp_path, rl={"num_generations": 2, "per_device_train_batch_size": 4, "use_vllm": True})
    study = Study(config, compare_algorithms.arms_of(config), progress=False)
    arm = next(arm for arm in study.all_arms if arm.trains_rl)
    assert study.rl_config(arm, "policy", 0, tmp_path / "rl").use_vllm is False  # hf: rl's use_vllm is overruled

    monkeypatch.setattr("turngym.recipes.study_config.vllm_imports", lambda: (True, "vLLM 0.0 imports here"))
    config = study_config(tmp_path, name="on-vllm")
    study = Study(config, compare_algorithms.arms_of(config), progress=False)
    assert study.backend == "vllm" and "RL rollouts, RFT sampling and held-out evaluations" in study.backend_line()
    rl = study.rl_config(arm, "policy", 0, tmp_path / "rl")
    assert rl.use_vllm is True and rl.vllm_mode == "colocate"  # TRL's colocated engine, as `turngym train` uses


def test_compare_demo_and_budget_take_a_backend(monkeypatch, capsys):
    from turngym.recipes.cli import main

    for command in ("compare", "demo", "budget"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "--backend {auto,hf,vllm}" in capsys.readouterr().out


def test_a_held_engine_is_synced_to_the_next_policy_and_its_random_stream_reseeded():
    """VLLMBackend.holding with an engine (a study's evaluations, RFT's rounds) builds nothing: it loads the policy's
    weights and reseeds torch's generator, which vLLM's CPU build samples from."""
    import torch

    from turngym.agents.backends import VLLMBackend

    class Engine:
        def __init__(self) -> None:
            self.synced = []

        def sync_weights(self, model) -> None:
            self.synced.append(model)

    engine = Engine()
    torch.manual_seed(123)
    torch.rand(3)
    assert VLLMBackend.holding("the policy", "not built", engine, seed=7) is engine
    assert engine.synced == ["the policy"]
    drawn = torch.rand(3)
    torch.manual_seed(7)
    assert torch.equal(drawn, torch.rand(3))
