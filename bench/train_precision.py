"""Training-step cost of the default policy on CPU: fp32 vs bf16 autocast, full fine-tuning vs LoRA.

    .venv/bin/python bench/train_precision.py [--batch 8 --tokens 300 --reps 3]

One optimizer step (forward, token log-probabilities, backward, AdamW) on a batch of random token
ids, the shape of a batch of TextWorld episodes. Every variant runs in the same process on the same
batch, and the script prints each one's best-of-``reps`` time and its ratio to full fp32. This is
the measurement behind the demo's choice of full fine-tuning under bf16 autocast (docs/results.md).
LoRA adapters (rank 16 on every linear layer, peft) save only the weight gradients: the activation
gradients, most of the backward pass, remain.
"""

from __future__ import annotations

import argparse
import time

import torch


def step_seconds(model, params, ids: torch.Tensor, bf16: bool, reps: int) -> float:
    optimizer = torch.optim.AdamW(params, lr=1e-6)
    times = []
    for _ in range(reps + 1):  # the first step warms up allocators and oneDNN kernels
        started = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(ids).logits
        logprobs = torch.log_softmax(logits.float(), dim=-1).gather(-1, ids[..., None]).mean()
        (-logprobs).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - started)
    return min(times[1:])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)

    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM

    from turngym.agents.models import resolve_model

    torch.manual_seed(0)
    path = resolve_model(args.model)
    vocab = AutoConfig.from_pretrained(path).vocab_size
    ids = torch.randint(0, vocab, (args.batch, args.tokens))
    rows = []
    for lora in (False, True):
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).train()
        if lora:
            lora_config = LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM")
            model = get_peft_model(model, lora_config)
        params = [p for p in model.parameters() if p.requires_grad]
        for bf16 in (False, True):
            rows.append(("LoRA r=16" if lora else "full", "bf16 autocast" if bf16 else "fp32",
                         step_seconds(model, params, ids, bf16, args.reps)))
        del model
    baseline = rows[0][2]
    tokens = args.batch * args.tokens
    print(f"{args.model}: one optimizer step on {args.batch} x {args.tokens} tokens, "
          f"{torch.get_num_threads()} threads\n")
    print("| weights trained | precision | s / step | tokens / s | speed vs full fp32 |")
    print("|---|---|---:|---:|---:|")
    for weights, precision, seconds in rows:
        print(f"| {weights} | {precision} | {seconds:.2f} | {tokens / seconds:.0f} | {baseline / seconds:.2f}x |")


if __name__ == "__main__":
    main()
