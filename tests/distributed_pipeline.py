"""Pipelined rollouts in several processes, for test_distributed: K = 0 and then K = 1 in the same processes.

    accelerate launch --config_file recipes/configs/accelerate/cpu-2proc.yaml tests/distributed_pipeline.py OUT

Each run trains 3 steps with learning rate 0 and Hugging Face sampling at temperature 1 (seeded per episode), so
every episode depends on its step's seed and its global number. Writes OUT (torch.save, main process): for each K,
every step's episodes (prompt ids, completion ids, sampler logprobs) gathered in global order, and the staleness
each step logged.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

from accelerate.utils import gather_object
from helpers_llm import tiny_llama, word_tokenizer
from test_trainer import SIGNALS, make_args

from turngym.envs.signals import signal_tasks
from turngym.trainers.trainer import TurnGymTrainer

GLOBAL_BATCH = 12  # 3 groups of 4: with 2 processes, the middle group is split across them


def played(work: Path, tokenizer, k: int, world: int) -> dict:
    model = tiny_llama(len(tokenizer)).train()
    args = make_args(work / f"k{k}", per_device_train_batch_size=GLOBAL_BATCH // world, learning_rate=0.0,
                     max_steps=3, max_staleness=k, temperature=1.0, max_new_tokens_per_turn=3)
    trainer = TurnGymTrainer(model, args, tasks=signal_tasks("train", 8, **SIGNALS), processing_class=tokenizer)
    steps: list[list] = []
    score = trainer._generate_and_score_completions

    def capture(inputs):
        output = score(inputs)  # TRL puts each row's Episode on it (rollout_func's "episode")
        steps.append(gather_object([(list(row["episode"].prompt_ids), list(row["episode"].completion_ids),
                                     list(row["episode"].logprobs)) for row in inputs]))
        return output

    trainer._generate_and_score_completions = capture
    trainer.train()
    staleness = [row.get("pipeline/staleness_max") for row in trainer.state.log_history if "loss" in row]
    trainer.accelerator.wait_for_everyone()
    return {"steps": steps, "staleness": staleness}


def main(out: str) -> None:
    import os

    world = int(os.environ.get("WORLD_SIZE", "1"))
    work = Path(out).parent
    torch.set_num_threads(1)
    tokenizer = word_tokenizer(work / f"tokenizer-{os.environ.get('RANK', '0')}")
    runs = {k: played(work, tokenizer, k, world) for k in (0, 1)}
    if int(os.environ.get("RANK", "0")) == 0:
        torch.save({"world": world, **runs}, out)
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:])
