"""One training step on scripted episodes, for the single- vs two-process comparison in test_distributed.

    accelerate launch --config_file recipes/configs/accelerate/cpu-2proc.yaml tests/distributed_step.py OUT ALGORITHM...
    python tests/distributed_step.py OUT ALGORITHM...

Writes OUT (torch.save, main process): for each algorithm, a fresh tiny policy's every episode's token advantages
in global order, its parameter change after one SGD step, and the logged loss. The algorithms share one launch:
a process start (torch, TRL, accelerate, gloo's rendezvous) cost more than a step.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

from accelerate.utils import gather_object
from helpers_llm import scripted_signals_backend as scripted
from helpers_llm import tiny_llama, word_tokenizer
from test_trainer import SIGNALS, make_args

from turngym.envs.signals import signal_tasks
from turngym.trainers.trainer import TurnGymTrainer

GLOBAL_BATCH = 12  # 3 groups of 4: with 2 processes, the middle group is split across them


def step(work: Path, algorithm: str, world: int) -> dict | None:
    """One step of ``algorithm`` from a fresh policy (seeded: the same whichever algorithms ran before it)."""
    import os

    work.mkdir(parents=True, exist_ok=True)
    tokenizer = word_tokenizer(work / f"tokenizer-{os.environ.get('RANK', '0')}")
    model = tiny_llama(len(tokenizer)).train()
    start = [p.detach().clone() for p in model.parameters()]
    # tis_cap=None: scripted replies report logprob 0, there is no sampler mismatch to correct
    args = make_args(work, algorithm=algorithm, tis_cap=None, per_device_train_batch_size=GLOBAL_BATCH // world,
                     optim="sgd", learning_rate=1.0, lr_scheduler_type="constant", max_grad_norm=0.0,
                     shuffle_dataset=False)
    trainer = TurnGymTrainer(model, args, tasks=signal_tasks("train", 6, **SIGNALS), processing_class=tokenizer,
                             backend=scripted(tokenizer))
    captured = {}
    score = trainer._generate_and_score_completions

    def capture(inputs):
        output = score(inputs)
        mask = output["completion_mask"] * output["tool_mask"]
        captured["advantages"] = gather_object([
            [round(a, 6) for a, m in zip(row.tolist(), keep.tolist(), strict=True) if m]
            for row, keep in zip(output["advantages"], mask, strict=True)])
        return output

    trainer._generate_and_score_completions = capture
    trainer.train()
    trainer.accelerator.wait_for_everyone()
    if not trainer.accelerator.is_main_process:
        return None
    parameters = trainer.accelerator.unwrap_model(trainer.model).parameters()
    delta = torch.cat([(p.detach() - s).flatten() for p, s in zip(parameters, start, strict=True)])
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    return {"advantages": captured["advantages"], "delta": delta, "loss": losses[0], "world": world}


def main(out: str, *algorithms: str) -> None:
    import os

    world = int(os.environ.get("WORLD_SIZE", "1"))
    results = {algorithm: step(Path(out).parent / algorithm, algorithm, world)
               for algorithm in algorithms or ("turn_rloo",)}
    if int(os.environ.get("RANK", "0")) == 0:
        torch.save(results, out)
    # Leave together and tear gloo down explicitly: a rank that exits while its peer still holds the
    # process group can abort in gloo's destructor ("terminate called without an active exception").
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:])
