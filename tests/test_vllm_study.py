"""A study on vLLM, for real (marker ``vllm``; ``make test-vllm`` runs it in ``.venv-vllm``).

A tiny study of SmolLM2-135M-Instruct (fp32) on Signals, base and one GRPO arm, with ``backend: vllm``: its RL stage
samples through TRL's colocated engine (the trainer's logprobs then match the sampler's to fp32 kernels), and its
evaluations play on the study's own engine, synced to each policy. The same policies evaluated with ``backend: hf``
play token-identical greedy episodes: the backend changes the speed, not the outcomes. (The two backends' RL stages
draw different samples, so their trained policies differ: each policy is compared with itself.)
"""

from __future__ import annotations

import importlib
import json
import os

import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1800)]  # two engines start: the evaluations' and TRL's

if os.environ.get("TURNGYM_REQUIRE_VLLM") == "1":  # make test-vllm: a broken vLLM install fails, never skips
    importlib.import_module("vllm")
else:
    pytest.importorskip("vllm", reason="vLLM is not installed here: run `make test-vllm`")

from turngym.agents.models import DEFAULT_MODEL, resolve_model
from turngym.recipes import compare_algorithms
from turngym.recipes.study import Study
from turngym.recipes.study_config import StudyConfig, resolve_backend


def signals_study(tmp_path, backend: str, name: str) -> StudyConfig:
    return StudyConfig.from_dict({
        "name": name, "results_dir": str(tmp_path / "results"), "backend": backend, "keep_models": True,
        "world": {"model_name_or_path": resolve_model(DEFAULT_MODEL), "env_id": "turngym/Signals-v0",
                  "env_kwargs": {"turns": 3, "colours": 2}, "reward_mode": "dense", "max_turns": 3,
                  "action_protocol": "admissible_in_prompt", "action_format": "prefix", "response_prefix": "Action:",
                  "max_new_tokens_per_turn": 4, "num_train_tasks": 8},
        "rl": {"algorithm": "grpo", "num_generations": 4, "per_device_train_batch_size": 8, "learning_rate": 1e-4,
               "beta": 0.0, "temperature": 1.0, "max_completion_length": 256, "use_cpu": True, "bf16": False,
               "vllm_max_model_length": 1024, "save_strategy": "no"},
        "algorithms": {"grpo": {}}, "episodes": 8,
        "evaluation": {"num_tasks": 8, "curve_points": 0, "overlap": "report"},
    })


def episodes(study: Study, label: str) -> list[dict]:
    """Each held-out episode's replies (the sampled ids' text), actions and outcome, in task order."""
    rows = (study.out / "evals" / label / "seed0-held_out.jsonl").read_text().splitlines()
    return [{"replies": row["record"]["replies"], "actions": row["record"]["actions"], "outcome": row["outcome"],
             "return": row["episode_reward"]} for row in map(json.loads, rows)]


def test_a_study_on_vllm_plays_the_greedy_episodes_hf_plays(tmp_path, capfd):  # capsys: vLLM needs a fileno
    assert resolve_backend("auto")[0] == "vllm"  # vLLM imports here, so auto means vLLM

    summary, out = compare_algorithms.run(signals_study(tmp_path, "vllm", "on-vllm"))
    assert summary["backend"] == {"requested": "vllm", "resolved": "vllm", "why": "backend: vllm"}
    assert capfd.readouterr().out.startswith("study on-vllm: generation on vLLM")
    assert json.loads((out / "config.json").read_text())["backend"] == "vllm"
    rl = json.loads((out / "seed0" / "grpo" / "done.json").read_text())
    assert rl["backend"] == "vllm" and rl["peak_rss_gb"] > 0
    # The RL stage sampled with TRL's colocated vLLM engine, in fp32 and with the policy's weights: TRL logs the
    # sampler-trainer gap only on vLLM, and here it is kernels apart (bf16 or stale weights: ~1e-2 and more).
    (step,) = [h for h in json.loads((out / "seed0" / "grpo" / "log.json").read_text()) if "episode/return" in h]
    assert step["sampling/sampling_logp_difference/max"] < 1e-3
    vllm_study = Study(signals_study(tmp_path, "vllm", "on-vllm"), compare_algorithms.arms_of(
        signals_study(tmp_path, "vllm", "on-vllm")), progress=False)
    for label in ("base", "grpo"):
        assert json.loads((out / "evals" / label / "seed0-held_out.json").read_text())["backend"] == "vllm"

    # The same two policies (the base model, the policy the vLLM study trained) evaluated on HF.
    config = signals_study(tmp_path, "hf", "on-hf")
    hf = Study(config, compare_algorithms.arms_of(config), progress=False)
    policies = {"base": config.world["model_name_or_path"], "grpo": out / "seed0" / "grpo" / "policy"}
    for label, policy in policies.items():
        assert hf.eval_stage(label, policy, 0, "held_out")["backend"] == "hf"
        on_hf, on_vllm = episodes(hf, label), episodes(vllm_study, label)
        assert len(on_hf) == 8 and all(e["replies"] and all(e["replies"]) for e in on_hf)
        assert on_vllm == on_hf, f"{label}: greedy episodes on vLLM differ from HF's"

    # A study begun on vLLM is not resumed on HF.
    with pytest.raises(ValueError, match=r"ran on the vllm backend and this run resolves to hf \(backend: hf\)"):
        Study(signals_study(tmp_path, "hf", "on-vllm"), compare_algorithms.arms_of(config), progress=False)


def test_an_rft_arm_samples_its_rounds_on_the_studys_one_engine(tmp_path, capfd, monkeypatch):
    """RFT on ``backend: vllm``: each round samples on the study's engine, synced to the policy the round before
    trained; the evaluations use the same engine, so the study builds one."""
    from turngym.agents import vllm_backend

    config = signals_study(tmp_path, "vllm", "rft-on-vllm")
    config.world["env_kwargs"] = {"turns": 1, "colours": 2}  # one right command in 3 turns
    config.sft = {"num_demos": 4, "num_train_epochs": 3, "learning_rate": 1e-4, "per_device_train_batch_size": 4,
                  "max_length": 1024, "use_cpu": True, "bf16": False}  # the base model seldom wins: a warm start
    config.algorithms = {"rft": {"algorithm": "rft", "rounds": 2, "demo_samples_per_task": 2, "num_train_epochs": 1,
                                 "learning_rate": 1e-4}}
    built, make_llm = [], vllm_backend.make_llm
    monkeypatch.setattr(vllm_backend, "make_llm", lambda *a, **k: built.append(a) or make_llm(*a, **k))
    synced, holding = [], vllm_backend.VLLMBackend.holding.__func__

    def spy(cls, model, model_path, engine=None, **kwargs):
        synced.append(engine is not None)
        return holding(cls, model, model_path, engine, **kwargs)

    monkeypatch.setattr(vllm_backend.VLLMBackend, "holding", classmethod(spy))
    _, out = compare_algorithms.run(config, arms=["rft"])
    done = json.loads((out / "seed0" / "rft" / "done.json").read_text())
    assert done["backend"] == "vllm" and [r["played"] for r in done["per_round"]] == [4, 4]
    assert done["kept"] > 0 and json.loads((out / "seed0" / "rft" / "policy" / "sft_demos.json").read_text())[
        "backend"] == "vllm"
    # base's evaluation builds the engine; SFT-only's evaluation, RFT's two rounds and its evaluation sync it
    assert len(built) == 1 and synced == [False, True, True, True, True]
    assert json.loads((out / "evals" / "rft" / "seed0-held_out.json").read_text())["backend"] == "vllm"
