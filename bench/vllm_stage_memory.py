"""Does a finished RL stage on colocated vLLM give its memory back? Stages one after another in one process.

Each stage builds a TurnGymTrainer on TRL's colocated engine (SmolLM2, Signals, one step), trains, and is dropped;
the resident memory after training and after dropping it, and whether the trainer, model, engine and critic are
still alive, are printed per stage (docs/benchmarks.md, "Several vLLM stages in one process"):

    .venv-vllm/bin/python bench/vllm_stage_memory.py ppo turn_rloo
"""

import os
import sys
import tempfile
import weakref

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from turngym.agents.models import DEFAULT_MODEL
from turngym.recipes.study_memory import release_freed_memory
from turngym.trainers.config import TurnGymConfig
from turngym.trainers.trainer import TurnGymTrainer


def resident_gb() -> dict[str, float]:
    """This process's resident memory now (VmRSS) and at its peak (VmHWM), in GB."""
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status if line.startswith(("VmRSS", "VmHWM")))
    return {name: round(int(value.split()[0]) * 1024 / 1e9, 2) for name, value in fields.items()}


def stage_config(out: str, algorithm: str) -> TurnGymConfig:
    """One step on Signals with TRL's colocated engine (tests/test_vllm_trainer.py's settings)."""
    critic = {"critic_learning_rate": 1e-4} if algorithm == "ppo" else {}
    return TurnGymConfig(
        model_name_or_path=DEFAULT_MODEL, env_id="turngym/Signals-v0", env_kwargs={"turns": 3, "colours": 2},
        num_train_tasks=8, num_eval_tasks=0, reward_mode="dense", max_turns=3, action_protocol="admissible_in_prompt",
        action_format="prefix", response_prefix="Action:", max_new_tokens_per_turn=4, algorithm=algorithm,
        num_generations=4, per_device_train_batch_size=16, learning_rate=1e-5, beta=0.0, temperature=1.0,
        max_completion_length=256, max_steps=1, use_cpu=True, bf16=False, report_to="none", save_strategy="no",
        eval_strategy="no", logging_steps=1, output_dir=out, seed=0, use_vllm=True, vllm_mode="colocate",
        vllm_max_model_length=1024, **critic)


def main(algorithms: list[str]) -> None:
    alive: dict[str, weakref.ref] = {}
    for stage, algorithm in enumerate(algorithms):
        trainer = TurnGymTrainer(args=stage_config(tempfile.mkdtemp(), algorithm))
        trainer.train()
        alive |= {f"{stage}:trainer": weakref.ref(trainer), f"{stage}:model": weakref.ref(trainer.model),
                  f"{stage}:engine": weakref.ref(trainer.vllm_generation.llm.llm_engine)}
        if hasattr(trainer.critic, "model"):
            alive[f"{stage}:critic"] = weakref.ref(trainer.critic.model)
        print(f"{algorithm}: trained {resident_gb()}", flush=True)
        del trainer
        release_freed_memory()
        print(f"{algorithm}: dropped {resident_gb()}; still alive: "
              f"{[name for name, ref in alive.items() if ref() is not None] or 'none'}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["ppo", "turn_rloo"])
