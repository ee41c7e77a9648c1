"""The multi-turn trainer: advantages inside the real TRL step, the critic, metrics, config and CLI."""

from __future__ import annotations

import math
import random
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from helpers_llm import scripted_signals_backend, tiny_llama, word_tokenizer
from trl import GRPOTrainer

from turngym.envs.signals import COMMANDS, signal_tasks
from turngym.trainers import advantages as adv
from turngym.trainers.advantages import zero_signal_groups
from turngym.trainers.config import ALGORITHMS, TurnGymConfig
from turngym.trainers.critic import NoCritic, value_loss, value_model, without_dropout
from turngym.trainers.episodes import Episode, group_keys
from turngym.trainers.estimators import (
    AdvantageBatch,
    Algorithm,
    estimator_names,
    get_estimator,
    null_rng,
    register_estimator,
    shuffled_over_model_tokens,
    token_kl,
    turn_advantages,
    unregister_estimator,
)
from turngym.trainers.tis import truncated_importance_weights
from turngym.trainers.trainer import LossForward, TurnGymTrainer
from turngym.trainers.worlds import train_tasks

SIGNALS = {"turns": 3, "colours": 2}
LORA = {"use_peft": True, "lora_r": 4, "lora_alpha": 8, "lora_target_modules": ["q_proj", "v_proj"]}


def make_args(tmp_path: Path, **overrides) -> TurnGymConfig:
    fields = {"output_dir": str(tmp_path / "run"), "env_id": "turngym/Signals-v0", "env_kwargs": SIGNALS,
              "reward_mode": "dense", "action_format": "last_line", "max_new_tokens_per_turn": 2,
              "algorithm": "turn_rloo", "num_generations": 4, "per_device_train_batch_size": 8, "max_steps": 1,
              "learning_rate": 1e-2, "logging_steps": 1, "report_to": "none", "save_strategy": "no",
              "max_completion_length": 64, "seed": 0, "disable_tqdm": True}
    return TurnGymConfig(**{**fields, **overrides})


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return word_tokenizer(tmp_path_factory.mktemp("words"))




def make_trainer(tmp_path, tokenizer, *, backend="scripted", tasks=None, saved=False, **overrides) -> TurnGymTrainer:
    model = tiny_llama(len(tokenizer)).train()
    if saved:  # loaded from a folder, as TRL needs to build a reference model (beta > 0)
        from transformers import AutoModelForCausalLM

        model.save_pretrained(tmp_path / "policy")
        model = AutoModelForCausalLM.from_pretrained(tmp_path / "policy").train()
    if backend == "scripted":
        overrides.setdefault("tis_cap", None)  # scripted replies report logprob 0: nothing to correct
    args = make_args(tmp_path, **overrides)
    return TurnGymTrainer(model, args, tasks=tasks or signal_tasks("train", 8, **SIGNALS), processing_class=tokenizer,
                          backend=scripted_signals_backend(tokenizer) if backend == "scripted" else None)


def one_batch(trainer: TurnGymTrainer) -> list[dict]:
    return next(iter(trainer.get_train_dataloader()))


# ---------------------------------------------------------------------- pure parts
def test_group_keys_follow_trls_order_and_refuse_mixed_groups():
    assert group_keys(["a", "a", "b", "b"], 2) == [0, 0, 1, 1]
    with pytest.raises(RuntimeError, match="mixes tasks"):
        group_keys(["a", "b", "b", "b"], 2)


def test_turn_advantages_dispatch_to_the_estimators():
    rewards, groups = [[0.0, 1.0], [1.0], [0.5, 0.5, 0.5]], [0, 0, 0]
    assert turn_advantages("turn_rloo", rewards, groups) == adv.turn_rloo(rewards, groups)
    assert turn_advantages("turn_grpo", rewards, groups) == adv.turn_grpo(rewards, groups)
    # Episode-level: every turn carries the episode's advantage. RLOO, returns 1, 1, 1.5:
    assert turn_advantages("rloo", rewards, groups) == [[-0.25, -0.25], [-0.25], [0.5, 0.5, 0.5]]
    grpo = adv.episode_grpo([1.0, 1.0, 1.5], groups)
    assert turn_advantages("grpo", rewards, groups)[2] == [grpo[2]] * 3
    with pytest.raises(ValueError):
        turn_advantages("ppo", rewards, groups)


def test_turn_grpo_honours_batch_scaling():
    """scale_rewards='batch' reaches turn_grpo (it used to fall back to the group's std)."""
    rewards, groups = [[0.0, 1.0], [1.0], [0.5, 0.5, 0.5], [3.0], [0.0]], [0, 0, 0, 1, 1]
    batch = turn_advantages("turn_grpo", rewards, groups, scale="batch")
    assert batch == adv.turn_grpo(rewards, groups, scale="batch")
    assert batch != turn_advantages("turn_grpo", rewards, groups, scale="group")
    assert turn_advantages("turn_grpo", rewards, groups, scale=False) == adv.turn_grpo(rewards, groups, scale="none")


def test_turn_baseline_alone_help_says_what_turn_rloo_does(tmp_path):
    """'return': baseline 0, so a turn no other episode reached gets its own return-to-go."""
    from dataclasses import fields

    text = next(f for f in fields(TurnGymConfig) if f.name == "turn_baseline_alone").metadata["help"]
    assert "baseline 0" in text and "own return-to-go" in text and "mean" not in text
    rewards = [[0.0, 0.0, 1.0], [1.0]]  # the first episode's turns 1 and 2 are its own: A = G = 1
    assert adv.turn_rloo(rewards, [0, 0], alone="return")[0][1:] == [1.0, 1.0]
    assert adv.turn_rloo(rewards, [0, 0], alone="zero")[0][1:] == [0.0, 0.0]


def test_truncated_importance_weights_by_hand():
    trainer_logps = torch.tensor([[-1.0, -2.0, -0.5, -3.0]])
    sampling = trainer_logps - torch.tensor([[math.log(3.0), -math.log(2.0), 0.0, 5.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])  # the last token is an env token
    weights, ratios = truncated_importance_weights(trainer_logps, sampling, mask, cap=2.0)
    assert weights.tolist()[0] == pytest.approx([2.0, 0.5, 1.0, 1.0])  # min(3, 2), 1/2, 1; env: 1
    assert ratios.tolist()[0][:3] == pytest.approx([3.0, 0.5, 1.0])
    sampling[0, 1] = float("nan")  # an unknown sampling logprob: no correction
    assert truncated_importance_weights(trainer_logps, sampling, mask, cap=2.0)[0][0, 1].item() == 1.0


def test_value_loss_by_hand():
    values, old = torch.tensor([[0.5, 1.0, 9.0]]), torch.tensor([[0.0, 0.0, 0.0]])
    returns = torch.tensor([[1.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])  # the third token is an env token
    # Unclipped: (0.5-1)^2 = 0.25 and (1-0)^2 = 1. Clipped at 0.2: V' = 0.2, 0.2 -> 0.64 and 0.04.
    # max: 0.64, 1.0 -> 0.5 * 1.64 / 2 = 0.41; the clipped term was larger on 1 of 2 tokens.
    loss, clipped = value_loss(values, old, returns, mask, 0.2, 2.0)
    assert loss.item() == pytest.approx(0.41)
    assert clipped.item() == pytest.approx(0.5)
    loss, _ = value_loss(values, old, returns, mask, None, 2.0)
    assert loss.item() == pytest.approx(0.5 * 1.25 / 2)


def test_config_validates_and_runs_on_cpu(tmp_path):
    args = make_args(tmp_path)
    assert args.use_cpu and not args.bf16  # CPU runs work out of the box
    with pytest.raises(ValueError, match="algorithm"):  # the registry's checks: resolve(), which the trainer calls
        make_args(tmp_path, algorithm="a2c").resolve()
    with pytest.raises(ValueError, match="ppo"):
        make_args(tmp_path, kl_penalty="reward", algorithm="grpo").resolve()
    with pytest.raises(ValueError, match="JSON object"):
        make_args(tmp_path, env_kwargs="turns=3")
    assert make_args(tmp_path, env_kwargs='{"turns": 5}').env_kwargs == {"turns": 5}
    with pytest.raises(ValueError, match="critic_warmup_steps"):
        make_args(tmp_path, critic_warmup_steps=2, algorithm="grpo").resolve()
    with pytest.raises(ValueError, match="tis_cap"):
        make_args(tmp_path, tis_cap=0.0)


def test_the_critic_learning_rate_defaults_to_ten_times_the_policys(tmp_path, tokenizer):
    assert make_args(tmp_path, algorithm="ppo", learning_rate=2e-6).critic_learning_rate == pytest.approx(2e-5)
    assert make_args(tmp_path, algorithm="ppo", critic_learning_rate=3e-4).critic_learning_rate == 3e-4
    trainer = make_trainer(tmp_path, tokenizer, algorithm="ppo", learning_rate=1e-3)
    assert trainer.critic_optimizer.param_groups[0]["lr"] == pytest.approx(1e-2)


def test_the_critic_is_dropout_free(tokenizer):
    """The value head's default dropout (0.1) and any backbone dropout are zeroed: in train mode the
    critic's values are deterministic, so its regression can fit."""
    from transformers import AutoModelForTokenClassification

    policy = tiny_llama(len(tokenizer), attention_dropout=0.3)
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    critic = value_model(policy).train()
    torch.nn.init.normal_(critic.score.weight)  # the zero-initialised head would hide the noise
    assert torch.equal(critic(input_ids=ids).logits, critic(input_ids=ids).logits)
    assert critic.config.attention_dropout == 0.0 and critic.config.classifier_dropout == 0.0
    # A critic handed to the trainer is made dropout-free the same way.
    config = policy.config.__class__(**{**policy.config.to_dict(), "num_labels": 1})
    user = AutoModelForTokenClassification.from_config(config).train()
    torch.nn.init.normal_(user.score.weight)
    assert not torch.equal(user(input_ids=ids).logits, user(input_ids=ids).logits)  # dropout 0.1 and 0.3
    without_dropout(user)
    assert torch.equal(user(input_ids=ids).logits, user(input_ids=ids).logits)


def test_critic_warmup_steps_train_the_critic_only(tmp_path, tokenizer):
    from transformers import TrainerCallback

    trainer = make_trainer(tmp_path, tokenizer, algorithm="ppo", critic_warmup_steps=1, max_steps=2,
                           critic_learning_rate=1e-2, learning_rate=1e-2)
    snapshots = {0: ([p.detach().clone() for p in trainer.model.parameters()],
                     [p.detach().clone() for p in trainer.critic.parameters()])}

    class Snapshot(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            snapshots[state.global_step] = ([p.detach().clone() for p in trainer.model.parameters()],
                                            [p.detach().clone() for p in trainer.critic.parameters()])

    trainer.add_callback(Snapshot())
    trainer.train()

    def moved(a, b):
        return max((x - y).abs().max().item() for x, y in zip(a, b, strict=True))

    assert moved(snapshots[1][0], snapshots[0][0]) == 0.0  # step 1: the policy did not move...
    assert moved(snapshots[1][1], snapshots[0][1]) > 0.0  # ...the critic did
    assert moved(snapshots[2][0], snapshots[1][0]) > 0.0  # step 2: the policy trains too
    warm = [row.get("critic/warmup") for row in trainer.state.log_history if "episode/return" in row]
    assert warm == [1.0, None]


def test_truncated_importance_sampling_in_the_step(tmp_path, tokenizer):
    """Sampling logprobs perturbed by known amounts: each model token's advantage is multiplied by the
    hand-computed capped ratio min(exp(log pi_train - log pi_sampler), 2), and the gap is logged."""
    trainer = make_trainer(tmp_path, tokenizer, algorithm="turn_rloo", tis_cap=2.0)
    deltas = [math.log(3.0), -math.log(2.0), 0.0, math.log(1.5)]  # log pi_train - log pi_sampler, in turn
    capped = [2.0, 0.5, 1.0, 1.5]
    rollout = trainer.rollout_func

    def perturbed(prompts, trainer_):
        out = rollout(prompts, trainer_)
        for episode in out["episode"]:
            ids = torch.tensor([episode.prompt_ids + episode.completion_ids])
            with torch.no_grad():  # the trainer's logprobs of the sampled tokens, one unpadded sequence
                logits = trainer.model(input_ids=ids).logits[0, len(episode.prompt_ids) - 1: -1] / trainer.temperature
            true = torch.log_softmax(logits.float(), -1).gather(-1, ids[0, len(episode.prompt_ids):, None])[:, 0]
            k = 0
            for i, m in enumerate(episode.env_mask):
                if m:
                    episode.logprobs[i] = true[i].item() - deltas[k % 4]
                    k += 1
        return out

    trainer.rollout_func = perturbed
    forwards = []
    logps_and_entropies = trainer._get_per_token_logps_and_entropies
    trainer._get_per_token_logps_and_entropies = lambda *a, **k: forwards.append(1) or logps_and_entropies(*a, **k)
    batch = one_batch(trainer)
    output = trainer._generate_and_score_completions(batch)
    assert forwards == []  # no forward pass of its own: TIS takes the loss's logprobs (num_iterations = 1)
    del trainer._get_per_token_logps_and_entropies
    episodes = played(batch)
    unweighted = output["advantages"].clone()
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by TRL's training loop
    trainer._compute_loss(trainer.model, output)  # weighs output["advantages"] from its own forward pass
    expected = turn_advantages("turn_rloo", [e.turn_rewards for e in episodes], [i // 4 for i in range(8)])
    gaps, ratios = [], []
    for row, episode in enumerate(episodes):
        plain = adv.spread_over_tokens(expected[row], episode.turn_index, episode.env_mask)
        weights, k = [], 0
        for m in episode.env_mask:
            weights.append(capped[k % 4] if m else 1.0)
            if m:
                gaps.append(abs(deltas[k % 4]))
                ratios.append(math.exp(deltas[k % 4]))
                k += 1
        assert unweighted[row, : len(plain)].tolist() == pytest.approx(plain, abs=1e-6)
        got = output["advantages"][row, : len(plain)].tolist()
        assert got == pytest.approx([a * w for a, w in zip(plain, weights, strict=True)], abs=1e-4)
    metrics = trainer._metrics["train"]
    assert metrics["tis/logp_gap_mean"][-1] == pytest.approx(sum(gaps) / len(gaps), abs=1e-4)
    assert metrics["tis/ratio_mean"][-1] == pytest.approx(sum(ratios) / len(ratios), abs=1e-4)
    assert metrics["tis/ratio_max"][-1] == pytest.approx(3.0, abs=1e-3)
    assert metrics["tis/capped_fraction"][-1] == pytest.approx(sum(r > 2 for r in ratios) / len(ratios))
    # With one update per batch (num_iterations = 1) PPO's ratio is 1 at every update: the clip never fires.
    trainer.train()
    (logged,) = [row for row in trainer.state.log_history if "episode/return" in row]
    assert "tis/logp_gap_mean" in logged and logged["clip_ratio/region_mean"] == 0.0


def test_a_micro_batch_of_zero_advantages_skips_its_passes_and_leaves_the_same_weights(tmp_path, tokenizer,
                                                                                       monkeypatch):
    """Step 1 trains on random advantages, step 2's are all 0. Skipping step 2's forward and backward passes (the
    default) leaves every weight and AdamW moment exactly where the full passes' zero gradient leaves them: AdamW
    still moves the weights on step 1's momentum, which a gradient of None would not. The log says which step was
    skipped; a KL term in the loss turns the skip off."""
    from transformers import TrainerCallback

    scored = TurnGymTrainer._generate_and_score_completions

    def advantages_by_step(self, inputs):  # random on step 1, all 0 on step 2
        output = scored(self, inputs)
        random = torch.randn(output["advantages"].shape, generator=torch.Generator().manual_seed(7))
        output["advantages"] = random if self.state.global_step == 0 else torch.zeros_like(random)
        return output

    monkeypatch.setattr(TurnGymTrainer, "_generate_and_score_completions", advantages_by_step)
    runs = {}
    for skip in (True, False):
        trainer = make_trainer(tmp_path / f"skip-{skip}", tokenizer, max_steps=2, skip_zero_advantage_batches=skip)
        after_step = {}

        class Snapshot(TrainerCallback):
            def on_step_end(self, args, state, control, trainer=trainer, after_step=after_step, **kwargs):
                after_step[state.global_step] = [p.detach().clone() for p in trainer.model.parameters()]

        trainer.add_callback(Snapshot())
        trainer.train()
        moments = [(s["exp_avg"].clone(), s["exp_avg_sq"].clone()) for s in trainer.optimizer.state.values()]
        skipped = [row.get("policy/skipped_zero_advantages") for row in trainer.state.log_history if "loss" in row]
        runs[skip] = after_step, moments, skipped
    (skipping, skip_moments, skip_log), (full, full_moments, full_log) = runs[True], runs[False]
    assert skip_log == [0.0, 1.0] and full_log == [0.0, 0.0]
    assert all(torch.equal(a, b) for a, b in zip(skipping[1], full[1], strict=True))  # the same step 1
    assert any(not torch.equal(a, b) for a, b in zip(skipping[2], skipping[1], strict=True))  # momentum moved them
    assert all(torch.equal(a, b) for a, b in zip(skipping[2], full[2], strict=True))  # exactly as the full passes
    assert len(skip_moments) == len(full_moments) > 0
    assert all(torch.equal(a, c) and torch.equal(b, d) for (a, b), (c, d) in zip(skip_moments, full_moments,
                                                                                strict=True))
    kl = make_trainer(tmp_path / "kl", tokenizer, beta=0.1, saved=True)
    zero = {"advantages": torch.zeros(2, 3)}
    assert make_trainer(tmp_path / "plain", tokenizer)._policy_loss_is_zero(zero)
    assert not kl._policy_loss_is_zero(zero)


def _loss_inputs(trainer: TurnGymTrainer) -> tuple[dict, torch.Tensor, torch.Tensor, int, torch.Tensor]:
    output = trainer._generate_and_score_completions(one_batch(trainer))
    ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
    attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
    return output, ids, attention, output["completion_ids"].size(1), output["completion_mask"] * output["tool_mask"]


@pytest.mark.parametrize("overrides", [{}, {**LORA, "lora_dropout": 0.0}], ids=["full", "lora"])  # no random masks
def test_the_loss_projects_only_its_own_tokens_with_trls_numbers(tmp_path, tokenizer, monkeypatch, overrides):
    """In the loss, only the model's tokens go through the vocabulary (the kernel sees exactly the loss mask's
    positions, fewer than the completion's); their log-probabilities, entropies and gradients are TRL's own
    full-projection ones, and every other position is 0."""
    from turngym.trainers import logprobs

    trainer = make_trainer(tmp_path, tokenizer, algorithm="turn_rloo", **overrides)
    output, ids, attention, width, mask = _loss_inputs(trainer)
    assert 0 < mask.sum() < output["completion_mask"].sum()  # the world's tokens are in the completion
    projected = []
    kernel = logprobs.ChunkedLogProbFunction

    class Counting:
        @staticmethod
        def apply(hidden, *rest):
            projected.append(hidden.size(0))
            return kernel.apply(hidden, *rest)

    monkeypatch.setattr(logprobs, "ChunkedLogProbFunction", Counting)
    trainer.model.train()
    weights = torch.randn(mask.shape)

    def scored(method, model):
        trainer.model.zero_grad(set_to_none=True)
        logps, entropy, _ = method(model, ids, attention, width, compute_entropy=True)
        (logps * weights * mask).sum().backward()
        grads = [p.grad.clone() for p in trainer.model.parameters() if p.grad is not None]
        return logps.detach(), entropy.detach(), grads

    ours = scored(trainer._get_per_token_logps_and_entropies, LossForward(trainer.model, output))  # as in the loss
    assert projected == [mask.sum().item()]
    theirs = scored(lambda *a, **k: GRPOTrainer._get_per_token_logps_and_entropies(trainer, *a, **k), trainer.model)
    assert projected == [mask.sum().item()]  # TRL's own path projects every position (CPU), not through ours
    kept = mask.bool()
    assert torch.allclose(ours[0][kept], theirs[0][kept], atol=1e-5)
    assert torch.allclose(ours[1][kept], theirs[1][kept], atol=1e-5)
    assert (ours[0][~kept] == 0).all() and (ours[1][~kept] == 0).all()
    assert ours[2] and len(ours[2]) == len(theirs[2])
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(ours[2], theirs[2], strict=True))


def test_outside_the_loss_every_completion_token_is_scored_as_by_trl(tmp_path, tokenizer):
    trainer = make_trainer(tmp_path, tokenizer, algorithm="turn_rloo")
    output, ids, attention, width, _ = _loss_inputs(trainer)
    with torch.no_grad():
        ours, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, attention, width, batch_size=3)
        theirs, _, _ = GRPOTrainer._get_per_token_logps_and_entropies(trainer, trainer.model, ids, attention, width)
    assert torch.allclose(ours, theirs, atol=1e-5)
    assert (ours[output["completion_mask"] == 0] == 0).all() and (ours[output["completion_mask"] == 1] < 0).all()


def test_a_scaled_or_softcapped_head_keeps_trls_path(tmp_path, tokenizer):
    from turngym.trainers.logprobs import plain_head

    trainer = make_trainer(tmp_path, tokenizer, algorithm="turn_rloo")
    assert plain_head(trainer.model) and trainer._directly_callable(trainer.model) is trainer.model
    trainer.model.config.final_logit_softcapping = 30.0
    assert not plain_head(trainer.model) and trainer._directly_callable(trainer.model) is None


def test_shuffled_advantages_are_the_steps_advantages_dealt_at_random(tmp_path, tokenizer):
    trainer = make_trainer(tmp_path, tokenizer, algorithm="turn_rloo", shuffle_advantages=True)
    batch = one_batch(trainer)
    output = trainer._generate_and_score_completions(batch)
    episodes = played(batch)
    honest = turn_advantages("turn_rloo", [e.turn_rewards for e in episodes], [i // 4 for i in range(8)])
    groups = [i // 4 for i in range(8)]
    cells = adv.group_turn_cells(groups, [range(len(r)) for r in honest])  # the fair null: within (group, turn)
    rng = null_rng(trainer.args.seed, trainer.state.global_step)  # seeded by (seed, step): reproducible
    dealt = adv.shuffle_advantages(honest, rng, cells)
    assert dealt != honest
    for row, episode in enumerate(episodes):
        tokens = adv.spread_over_tokens(dealt[row], episode.turn_index, episode.env_mask)
        assert output["advantages"][row, : len(tokens)].tolist() == pytest.approx(tokens, abs=1e-6)
    # PPO's null control deals its token advantages over model tokens only.
    one = Episode.from_ids(prompt_ids=[1], completion_ids=[2, 3, 4, 5], env_mask=[1, 0, 1, 1], turn_index=[0, 0, 1, 1],
                           turn_ends=[0, 3], logprobs=[0.0] * 4, turn_rewards=[0.0, 1.0])
    (shuffled,) = shuffled_over_model_tokens([[0.1, 0.0, 0.2, 0.3]], [one], ["g"], "step", random.Random(3))
    assert shuffled[1] == 0.0 and sorted(shuffled) == [0.0, 0.1, 0.2, 0.3]
    # ... and by default within (group, turn): turn 0's one model token keeps its value, turn 1's two swap at most
    for seed in range(5):
        (fair,) = shuffled_over_model_tokens([[0.1, 0.0, 0.2, 0.3]], [one], ["g"], "group", random.Random(seed))
        assert fair[:2] == [0.1, 0.0] and sorted(fair[2:]) == [0.2, 0.3]


def test_skip_train_tasks_leaves_out_the_first_tasks(tmp_path):
    """The SFT demos are the train split's first num_demos tasks; skip_train_tasks keeps RL off them."""
    from turngym.envs.panels import task_panel

    args = make_args(tmp_path, num_train_tasks=6, skip_train_tasks=4)
    demos = task_panel(args.env_id, args.train_split, 4, args.world_kwargs(), progress=False)
    tasks = train_tasks(args)
    assert len(tasks) == 6 and not {t.id for t in tasks} & {t.id for t in demos}
    every = task_panel(args.env_id, args.train_split, 10, args.world_kwargs(), progress=False)
    assert [t.id for t in tasks] == [t.id for t in every][4:]
    assert [t.id for t in train_tasks(make_args(tmp_path, num_train_tasks=6))] == [t.id for t in every][:6]


# ---------------------------------------------------------------------- dynamic sampling, LoRA, KL
def test_zero_signal_groups_by_hand():
    per_turn = [[0.0, 0.0], [0.0], [0.5, -0.5], [0.0, 0.0, 0.0], [1e-12], [0.0]]
    assert zero_signal_groups(per_turn, [0, 0, 1, 1, 2, 2]) == {0, 2}


def _silence_first_group(trainer):
    """Wrap the rollout so the step's first group (episodes 0-3, one task) scores 0 on every turn."""
    rollout = trainer.rollout_func

    def silenced(prompts, trainer_):
        out = rollout(prompts, trainer_)
        for episode in out["episode"][:4]:
            episode.trajectory.turn_rewards = [0.0] * len(episode.trajectory.turn_rewards)
        return out

    trainer.rollout_func = silenced


def test_dynamic_sampling_drop_takes_zero_signal_groups_out_of_the_loss(tmp_path, tokenizer):
    """dynamic_sampling='drop': the all-zero group's rows leave the loss mask and TRL's token normaliser, so the
    step's loss is the informative groups' alone (not diluted by the silent group's tokens), and it is logged."""
    trainer = make_trainer(tmp_path, tokenizer, algorithm="turn_rloo", dynamic_sampling="drop")
    _silence_first_group(trainer)
    batch = one_batch(trainer)
    copy = [dict(x) for x in batch]
    dropped = trainer._generate_and_score_completions(copy)
    episodes = played(copy)
    trainer.args.dynamic_sampling = "off"
    kept = trainer._generate_and_score_completions([dict(x) for x in batch])  # the same scripted episodes
    assert dropped["tool_mask"][:4].sum() == 0  # the silent group is out of the loss...
    assert torch.equal(dropped["tool_mask"][4:], kept["tool_mask"][4:])  # ...the other group is untouched
    assert kept["tool_mask"][:4].sum() > 0 and kept["advantages"][:4].abs().sum() == 0
    informative = sum(sum(e.env_mask) for e in episodes[4:])
    assert dropped["num_items_in_batch"].item() == informative
    assert kept["num_items_in_batch"].item() == sum(sum(e.env_mask) for e in episodes)
    # TRL's dapo loss divides by the kept tokens only: the same gradient, not diluted by the silent group's tokens.
    trainer.current_gradient_accumulation_steps = 1

    def gradient(output):
        trainer.model.zero_grad()
        trainer._compute_loss(trainer.model, output).backward()
        return torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])

    g_dropped, g_kept = gradient(dropped), gradient(kept)
    assert g_kept.abs().max() > 0
    torch.testing.assert_close(g_dropped * informative, g_kept * kept["num_items_in_batch"].item(), rtol=1e-4,
                               atol=1e-6)
    metrics = trainer._metrics["train"]
    assert metrics["dynamic_sampling/dropped_groups"] == [1.0]  # logged by the 'drop' call only
    assert metrics["dynamic_sampling/dropped_fraction"] == [0.5]
    with pytest.raises(ValueError, match="refill"):
        make_args(tmp_path, dynamic_sampling="refill")
    with pytest.raises(ValueError, match="ppo"):
        make_args(tmp_path, dynamic_sampling="drop", algorithm="ppo").resolve()


def test_dynamic_sampling_is_logged_in_training(tmp_path, tokenizer):
    trainer = make_trainer(tmp_path, tokenizer, algorithm="grpo", dynamic_sampling="drop")
    _silence_first_group(trainer)
    trainer.train()
    (logged,) = [row for row in trainer.state.log_history if "episode/return" in row]
    assert logged["dynamic_sampling/dropped_groups"] == 1.0




def test_lora_from_the_config_trains_the_adapter_only_and_saves_it(tmp_path, tokenizer):
    """use_peft from the config: only the LoRA weights move, PPO's critic stays a full model that trains, the
    saved policy is an adapter, and the KL (beta > 0) is to the adapter-free model, the starting one."""
    trainer = make_trainer(tmp_path, tokenizer, algorithm="ppo", learning_rate=1e-2, critic_learning_rate=1e-2,
                           beta=0.1, **LORA)
    from peft import PeftModel

    assert isinstance(trainer.model, PeftModel) and trainer.ref_model is None  # TRL disables the adapter instead
    assert not any("lora" in name for name, _ in trainer.critic.named_parameters())  # a full critic
    policy_before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    critic_before = [p.detach().clone() for p in trainer.critic.parameters()]
    trainer.train()
    moved = {k for k, v in trainer.model.named_parameters() if not torch.equal(v, policy_before[k])}
    assert moved and all("lora_" in k for k in moved)  # the base weights did not move
    assert {k for k in policy_before if "lora_B" in k} <= moved
    assert any(not torch.equal(a, b) for a, b in zip(critic_before, trainer.critic.parameters(), strict=True))
    assert "kl" in trainer.state.log_history[0]
    out = tmp_path / "saved"
    trainer.save_model(str(out))
    assert (out / "adapter_config.json").is_file() and (out / "adapter_model.safetensors").is_file()
    assert not (out / "model.safetensors").exists() and (out / "critic" / "model.safetensors").is_file()


def test_the_kl_reference_is_the_starting_checkpoint(tmp_path, tokenizer):
    """beta > 0: TRL's reference model is the checkpoint the policy was loaded from (with SFT -> RL, the SFT
    model), the KL is logged and grows once the policy moves; a policy that is not its folder is refused."""
    from safetensors.torch import load_file

    trainer = make_trainer(tmp_path, tokenizer, saved=True, algorithm="turn_rloo", beta=0.1, max_steps=2)
    saved = load_file(tmp_path / "policy" / "model.safetensors")
    reference = dict(trainer.ref_model.named_parameters())
    assert saved.keys() <= reference.keys()
    assert all(torch.equal(reference[k], v) for k, v in saved.items())
    trainer.train()
    kl = [row["kl"] for row in trainer.state.log_history if "kl" in row]
    assert len(kl) == 2 and kl[0] == pytest.approx(0.0, abs=1e-6) and kl[1] > 1e-6
    # A policy object whose weights are not its checkpoint's would be pulled towards another model.
    from transformers import AutoModelForCausalLM

    changed = AutoModelForCausalLM.from_pretrained(tmp_path / "policy")
    with torch.no_grad():
        changed.model.norm.weight.add_(1.0)
    with pytest.raises(ValueError, match="KL reference"):
        TurnGymTrainer(changed, make_args(tmp_path, beta=0.1, tis_cap=None), tasks=signal_tasks("train", 8, **SIGNALS),
                       processing_class=tokenizer, backend=scripted_signals_backend(tokenizer))


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="CPU bf16 autocast needs oneDNN")
def test_bf16_on_cpu_trains_under_autocast_and_generates_in_the_weights_dtype(tmp_path, tokenizer):
    trainer = make_trainer(tmp_path, tokenizer, backend="hf", algorithm="ppo", bf16=True,
                           eval_split="eval", num_eval_tasks=2)
    assert trainer.args.use_cpu and trainer.args.bf16  # asked for explicitly: kept on CPU
    trainer.train()  # rollouts run HFBackend on the autocast-wrapped model: its static cache is fp32
    assert "_original_forward" in trainer.model.__dict__  # accelerate did wrap the forward in autocast
    assert trainer.state.log_history[0]["episode/sampled_tokens"] > 0
    assert "eval/success" in trainer.evaluate()  # the trained, still wrapped, model evaluates too


@pytest.mark.parametrize(("forced", "native", "expected"), [("", True, True), ("", False, False), ("0", True, False),
                                                             ("1", False, True)])
def test_cpu_runs_default_to_bf16_where_the_cpu_computes_it(monkeypatch, forced, native, expected):
    """TRL's bf16=None means bf16 on an accelerator; on CPU it means bf16 autocast where the CPU has native bf16
    (AVX512-BF16 or AMX), which TURNGYM_CPU_BF16 overrides; an explicit value is always kept."""
    from turngym.trainers import config as config_module

    monkeypatch.setenv(config_module.CPU_BF16_VARIABLE, forced)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: native)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: True)
    assert config_module.cpu_computes_bf16() is expected
    for given, kept in ((None, expected), (False, False), (True, True)):
        args = SimpleNamespace(use_cpu=True, bf16=given, fp16=True)
        config_module.fix_device(args)
        assert args.bf16 is kept and args.fp16 is False


# ---------------------------------------------------------------------- inside the real TRL step
def played(batch: list[dict]) -> list:
    """The Episode records of a step: rollout_func hands them to TRL, which puts one on each input row."""
    episodes = [row["episode"] for row in batch]
    assert all(isinstance(e, Episode) for e in episodes)
    return episodes


@pytest.mark.parametrize("algorithm", ["turn_rloo", "turn_grpo", "rloo"])
def test_step_advantages_are_the_estimators_on_the_played_episodes(tmp_path, tokenizer, algorithm):
    trainer = make_trainer(tmp_path, tokenizer, algorithm=algorithm)
    batch = one_batch(trainer)
    output = trainer._generate_and_score_completions(batch)
    episodes = played(batch)
    assert len(episodes) == 8 and len({e.task["id"] for e in episodes[:4]}) == 1  # a group is one task
    groups = [i // 4 for i in range(8)]
    expected = turn_advantages(algorithm, [e.turn_rewards for e in episodes], groups)
    mask = output["completion_mask"] * output["tool_mask"]
    for row, episode in enumerate(episodes):
        tokens = adv.spread_over_tokens(expected[row], episode.turn_index, episode.env_mask)
        got = output["advantages"][row, : len(tokens)].tolist()
        assert got == pytest.approx(tokens, abs=1e-6)
        # The loss mask is exactly the sampled tokens: env tokens and padding are out.
        assert mask[row, : len(tokens)].tolist() == episode.env_mask
        assert mask[row, len(tokens):].sum() == 0
    assert any(abs(a) > 0 for row in expected for a in row)  # the scripted replies make a signal


# ---------------------------------------------------------------------- the estimator registry
def test_algorithm_is_an_enum_of_the_registered_estimators(tmp_path):
    assert set(ALGORITHMS) == {a.value for a in Algorithm} <= set(estimator_names())
    args = make_args(tmp_path, algorithm="gigpo").resolve()
    assert args.algorithm is Algorithm.GIGPO and args.algorithm == "gigpo"  # a str Enum: YAML strings still work
    assert args.estimator is get_estimator("gigpo") and not args.estimator.needs_critic
    assert [name for name in ALGORITHMS if get_estimator(name).needs_critic] == ["ppo"]
    with pytest.raises(ValueError, match="algorithm must be one of ppo, grpo, rloo, turn_grpo, turn_rloo, gigpo"):
        make_args(tmp_path, algorithm="a2c").resolve()
    assert make_args(tmp_path, scale_rewards=False).scale_rewards is adv.Scale.NONE  # one scale type
    with pytest.raises(ValueError, match="scale must be one of"):
        make_args(tmp_path, scale_rewards="mean")
    with pytest.raises(ValueError, match="already registered"):
        register_estimator("grpo")(lambda batch, args: [])
    with pytest.raises(ValueError, match="built in"):
        unregister_estimator("grpo")


@pytest.fixture
def episode_sign():
    """A user's estimator: +1 on every turn of an episode above its group's mean return, -1 below."""
    @register_estimator("test_episode_sign")
    def estimator(batch: AdvantageBatch, args) -> list[list[float]]:
        means = batch.group_means(batch.returns)
        batch.metrics["test/groups"] = float(len(set(batch.groups)))
        return [[float((r > m) - (r < m))] * len(t) for r, m, t in
                zip(batch.returns, means, batch.turn_rewards, strict=True)]

    yield estimator
    unregister_estimator("test_episode_sign")


def test_a_registered_estimator_of_ones_own_trains(tmp_path, tokenizer, episode_sign):
    trainer = make_trainer(tmp_path, tokenizer, algorithm="test_episode_sign")
    assert trainer.args.algorithm == "test_episode_sign" and isinstance(trainer.critic, NoCritic)
    batch = one_batch(trainer)
    output = trainer._generate_and_score_completions(batch)
    episodes = played(batch)
    groups = [i // 4 for i in range(8)]
    expected = episode_sign(AdvantageBatch([e.turn_rewards for e in episodes], groups,
                                           [e.anchor_states for e in episodes]), trainer.args)
    assert {a for row in expected for a in row} >= {1.0, -1.0}  # the scripted replies differ in return
    for row, episode in enumerate(episodes):
        tokens = adv.spread_over_tokens(expected[row], episode.turn_index, episode.env_mask)
        assert output["advantages"][row, : len(tokens)].tolist() == pytest.approx(tokens)
    assert trainer._metrics["train"]["test/groups"] == [2.0]  # the estimator's own statistics are logged
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()  # one optimizer step with the user's advantages
    assert trainer.state.global_step == 1
    assert any(not torch.equal(a, b.detach()) for a, b in zip(before, trainer.model.parameters(), strict=True))


def test_an_estimator_that_returns_the_wrong_shape_is_refused(tmp_path, tokenizer):
    @register_estimator("test_one_per_episode")
    def one_per_episode(batch, args):
        return [[0.0] for _ in batch.turn_rewards]

    try:
        trainer = make_trainer(tmp_path, tokenizer, algorithm="test_one_per_episode")
        with pytest.raises(ValueError, match="one advantage per turn"):
            trainer._generate_and_score_completions(one_batch(trainer))
    finally:
        unregister_estimator("test_one_per_episode")


def test_gigpo_step_advantages_use_the_episodes_anchor_states_and_train(tmp_path, tokenizer):
    """GiGPO inside the real TRL step on Signals, whose observations repeat across a group's episodes."""
    trainer = make_trainer(tmp_path, tokenizer, algorithm="gigpo", gamma=0.95, step_advantage_weight=0.5,
                           scale_rewards="none")
    batch = one_batch(trainer)
    output = trainer._generate_and_score_completions(batch)
    episodes = played(batch)
    groups = [i // 4 for i in range(8)]
    states = [e.anchor_states for e in episodes]
    assert all(len(s) == e.num_turns and None not in s for s, e in zip(states, episodes, strict=True))
    assert len({s[0] for s in states[:4]}) == 1  # a group's episodes all start in the task's first state
    expected = adv.gigpo([e.turn_rewards for e in episodes], groups, states, gamma=0.95, step_weight=0.5,
                         scale="none")
    for row, episode in enumerate(episodes):
        tokens = adv.spread_over_tokens(expected[row], episode.turn_index, episode.env_mask)
        assert output["advantages"][row, : len(tokens)].tolist() == pytest.approx(tokens, abs=1e-6)
    episode_level = adv.episode_grpo([e.episode_reward for e in episodes], groups, "none")
    assert any(abs(a - episode_level[i]) > 1e-6 for i, row in enumerate(expected) for a in row)  # A^S at work
    stats = adv.anchor_group_stats(states, groups)
    metrics = trainer._metrics["train"]
    assert metrics["gigpo/anchor_group_size_mean"] == [pytest.approx(stats["mean_size"])]
    assert metrics["gigpo/anchor_shared_step_fraction"] == [pytest.approx(stats["shared_fraction"])]
    assert stats["mean_size"] > 1.0 and 0.0 < stats["shared_fraction"] <= 1.0
    trainer.train()  # the 1-step smoke run
    logged = trainer.state.log_history[0]
    assert trainer.state.global_step == 1 and logged["gigpo/anchor_group_size_mean"] > 1.0


def test_episode_grpo_matches_trls_own_advantages(tmp_path, tokenizer):
    trainer = make_trainer(tmp_path, tokenizer, algorithm="grpo")
    batch = one_batch(trainer)
    theirs = GRPOTrainer._generate_and_score_completions(trainer, [dict(x) for x in batch])["advantages"]
    ours = trainer._generate_and_score_completions([dict(x) for x in batch])
    mask = ours["completion_mask"] * ours["tool_mask"]
    assert torch.allclose(ours["advantages"], theirs.unsqueeze(1) * mask, atol=1e-5)


def test_ppo_step_bootstraps_truncated_episodes_and_trains_the_critic(tmp_path, tokenizer):
    trainer = make_trainer(tmp_path, tokenizer, algorithm="ppo", critic_learning_rate=1e-2, max_steps=2,
                           max_completion_length=256)
    batch = one_batch(trainer)
    output = trainer._generate_and_score_completions(batch)
    episodes = played(batch)
    # Signals episodes that miss a light run out of turns: truncated, and the final observation is
    # appended (environment tokens) for the critic to bootstrap from; terminated ones end on a turn.
    out_of_turns = [e for e in episodes if e.truncation_reason == "max_turns"]
    assert out_of_turns and all(e.env_mask[-1] == 0 for e in out_of_turns)
    assert all(e.env_mask[-1] == 1 for e in episodes if e.terminated)
    assert output["returns"].shape == output["old_values"].shape == output["advantages"].shape
    before = [p.detach().clone() for p in trainer.critic.parameters()]
    trainer.train()
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.critic.parameters(), strict=True))
    logged = {k for row in trainer.state.log_history for k in row}
    for key in ("critic/value_loss", "critic/explained_variance", "episode/success", "episode/return",
                "episode/turns", "episode/invalid_action_rate", "advantages/frac_zero_groups",
                "advantages/turn_0/mean", "entropy", "clip_ratio/region_mean"):
        assert key in logged, key


def test_the_critic_step_in_passes_of_a_few_episodes_equals_one_pass(tmp_path, tokenizer):
    """critic_rows_per_pass splits the value loss's backward by episodes: the same gradients, loss and
    clip fraction as one pass over the batch (the loss is a sum over tokens with a fixed normalizer)."""
    trainer = make_trainer(tmp_path, tokenizer, algorithm="ppo", max_completion_length=256)
    output = trainer._generate_and_score_completions(one_batch(trainer))
    output["old_values"] = output["old_values"] + 0.3 * torch.randn_like(output["old_values"])  # some clipping
    trainer.current_gradient_accumulation_steps = 1  # set by TRL's training loop
    results, passes = [], []
    forward = trainer.critic.forward
    trainer.critic.forward = lambda ids, attention: passes.append(len(ids)) or forward(ids, attention)
    normalizer = output["num_items_in_batch"].clamp(min=1.0)  # one process, one micro-batch: the whole batch's
    for rows in (8, 3, 1):
        trainer.critic.config.rows_per_pass = rows
        trainer.critic.zero_grad(set_to_none=True)
        passes.clear()
        metrics = trainer.critic.loss(output, normalizer, trainer.accelerator.backward)
        assert passes == {8: [8], 3: [3, 3, 2], 1: [1] * 8}[rows]  # only one pass's activations at a time
        results.append(([p.grad.clone() for p in trainer.critic.parameters()],
                        metrics["critic/value_loss"], metrics["critic/clip_fraction"]))
    (whole, loss, clipped), *split = results
    assert 0.0 < clipped < 1.0
    for grads, split_loss, split_clipped in split:
        assert split_loss == pytest.approx(loss, rel=1e-5) and split_clipped == pytest.approx(clipped)
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(whole, grads, strict=True))


def test_gae_in_the_step_uses_the_critics_values(tmp_path, tokenizer):
    trainer = make_trainer(tmp_path, tokenizer, algorithm="ppo", whiten_advantages=False, lam=0.9)
    batch = one_batch(trainer)
    output = trainer._generate_and_score_completions(batch)
    episodes = played(batch)
    for row, episode in enumerate(episodes):
        n = len(episode.completion_ids)
        values = output["old_values"][row, :n].tolist()
        rewards = adv.token_rewards(episode.turn_rewards, episode.turn_ends, n)
        ids = torch.cat([output["prompt_ids"][row], output["completion_ids"][row]]).unsqueeze(0)
        attention = torch.cat([output["prompt_mask"][row], output["completion_mask"][row]]).unsqueeze(0)
        with torch.no_grad():
            every = trainer.critic(ids, attention)[0]
        last = float(every[output["prompt_ids"].size(1) + n - 1]) if episode.truncated else 0.0
        expected, targets = adv.token_gae(rewards, values, episode.env_mask, 1.0, 0.9, last)
        assert output["advantages"][row, :n].tolist() == pytest.approx(expected, abs=1e-5)
        assert output["returns"][row, :n].tolist() == pytest.approx(targets, abs=1e-5)


def test_ppo_kl_penalty_in_the_reward(tmp_path, tokenizer):
    """kl_penalty='reward': r_k -= beta (log pi(a_k) - log pi_ref(a_k)) on every sampled token, and
    no KL term in the loss. The reference is the initial policy, so after a step the two differ."""
    trainer = make_trainer(tmp_path, tokenizer, saved=True, algorithm="ppo", beta=0.5, kl_penalty="reward",
                           whiten_advantages=False, max_steps=2, learning_rate=5e-2)
    trainer.train()  # step 1 moves the policy away from the reference; step 2 pays for it
    batch = one_batch(trainer)
    output = trainer._generate_and_score_completions(batch)
    episodes = played(batch)
    kl, _ = token_kl(output.get("old_per_token_logps"), output["ref_per_token_logps"], episodes)
    assert any(abs(k) > 1e-4 for row in kl for k in row)
    row, episode = 0, episodes[0]
    n = len(episode.completion_ids)
    rewards = adv.token_rewards(episode.turn_rewards, episode.turn_ends, n)
    penalised = [r - 0.5 * k * m for r, k, m in zip(rewards, kl[row], episode.env_mask, strict=False)]
    expected, _ = adv.token_gae(penalised, output["old_values"][row, :n].tolist(), episode.env_mask, 1.0, 0.95, 0.0
                                if not episode.truncated else float(trainer.critic(
                                    torch.cat([output["prompt_ids"], output["completion_ids"]], 1)[:1],
                                    torch.cat([output["prompt_mask"], output["completion_mask"]], 1)[:1],
                                )[0, output["prompt_ids"].size(1) + n - 1]))
    assert output["advantages"][row, :n].tolist() == pytest.approx(expected, abs=1e-4)
    logged = {k for entry in trainer.state.log_history for k in entry}
    assert "kl_in_reward" in logged and "kl" not in logged  # the loss carries no second KL term


def test_the_rollout_caps_completions_at_max_completion_length(tmp_path, tokenizer):
    trainer = make_trainer(tmp_path, tokenizer, max_completion_length=12, env_kwargs={"turns": 6, "colours": 2},
                           tasks=signal_tasks("train", 8, turns=6, colours=2))
    batch = one_batch(trainer)
    trainer._generate_and_score_completions(batch)
    episodes = played(batch)
    assert all(len(e.completion_ids) <= 12 for e in episodes)
    assert any(e.truncation_reason == "context_length" for e in episodes)


# ---------------------------------------------------------------------- learning
def chance_return(turns: int, max_turns: int) -> float:
    """Dense Signals return of a uniform random command each turn, exactly.

    Each turn is right with probability p = 1/4 and a miss does not end the episode, so with X
    right answers in M = ``max_turns`` turns, X ~ Binomial(M, p), and the return is min(X, T) / T:

        E[R] = sum_x C(M, x) p^x (1 - p)^(M - x) min(x, T) / T

    (M = T gives exactly 1/4; the default M = 2T would give about 0.49.)
    """
    p = 1 / len(COMMANDS)
    return sum(math.comb(max_turns, x) * p**x * (1 - p) ** (max_turns - x) * min(x, turns) / turns
               for x in range(max_turns + 1))


# algorithm: (learning rate, optimizer steps). A tiny model first learns to answer with a command
# (one of ~60 tokens), then to read the light; each run takes 10-30 s on 2 quiet cores.
LEARNING = {"ppo": (3e-3, 100), "grpo": (2e-3, 100), "rloo": (2e-3, 100), "turn_grpo": (2e-3, 100),
            "turn_rloo": (2e-3, 100), "gigpo": (2e-3, 100)}


# The fast suite keeps learning for PPO (the critic) and turn-level RLOO (per-turn credit); the others train a step
# there (test_step_advantages_..., test_gigpo_step_..., test_episode_grpo_...) and learn under `make test-slow`:
# each run is 40-60 s beside two other workers, and `make test` is to stay near 15 min.
LEARNING_IN_THE_FAST_SUITE = ("ppo", "turn_rloo")


@pytest.mark.parametrize("algorithm", [a if a in LEARNING_IN_THE_FAST_SUITE else pytest.param(a, marks=pytest.mark.slow)
                                       for a in ALGORITHMS])
def test_each_algorithm_learns_the_signals_rule_above_chance(tmp_path, tokenizer, algorithm):
    learning_rate, steps = LEARNING[algorithm]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 2-layer model gains nothing from threads; xdist runs two tests at once
    try:
        _learn(tmp_path, tokenizer, algorithm, learning_rate, steps)
    finally:
        torch.set_num_threads(threads)


def _learn(tmp_path, tokenizer, algorithm, learning_rate, steps):
    trainer = make_trainer(tmp_path, tokenizer, backend="hf", algorithm=algorithm, learning_rate=learning_rate,
                           critic_learning_rate=1e-3, max_steps=steps, per_device_train_batch_size=32,
                           bootstrap_truncated=False,  # the turn limit is the task's length: nothing follows it
                           max_new_tokens_per_turn=1, eval_temperature=0.0, max_turns=SIGNALS["turns"],
                           system_prompt="", tasks=signal_tasks("train", 32, **SIGNALS))
    trainer.eval_tasks = signal_tasks("eval", 16, **SIGNALS)
    before = trainer.evaluate()["eval/return"]
    trainer.train()
    after = trainer.evaluate()["eval/return"]
    chance = chance_return(SIGNALS["turns"], SIGNALS["turns"])
    assert chance == pytest.approx(0.25)
    print(f"{algorithm}: held-out return {before:.2f} -> {after:.2f} (chance {chance:.2f})")
    assert after >= chance + 0.25, f"{algorithm} did not learn: {before:.2f} -> {after:.2f}, chance {chance:.2f}"
    assert after > before


@pytest.mark.parametrize("max_turns", [3, 6])
def test_chance_is_what_a_random_policy_gets(max_turns):
    import random

    from turngym import envs

    env = envs.make("turngym/Signals-v0", reward_mode="dense", max_turns=max_turns, **SIGNALS)
    rng, total, n = random.Random(0), 0.0, 2000
    for task in signal_tasks("eval", n, **SIGNALS):
        env.reset(options={"task": task})
        done = False
        while not done:
            _, reward, terminated, truncated, _ = env.step(rng.choice(COMMANDS))
            total, done = total + reward, terminated or truncated
    assert total / n == pytest.approx(chance_return(3, max_turns), abs=0.02)


# ---------------------------------------------------------------------- checkpoints
def test_a_killed_run_resumes_exactly_where_it_stopped(tmp_path, tokenizer):
    """Policy, critic, both optimizers and the data order come back: step 3 after a resume from
    checkpoint 2 equals step 3 of a run that was never interrupted."""
    from transformers import TrainerCallback

    class KillAfterStep2(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            control.should_training_stop = state.global_step == 2

    # Scripted replies earn rewards from the first step; which task each episode plays (the data
    # order) decides them.
    options = {"backend": "scripted", "algorithm": "ppo", "max_steps": 3, "save_strategy": "steps", "save_steps": 1,
               "learning_rate": 3e-3, "critic_learning_rate": 3e-3, "temperature": 1.0}
    whole = make_trainer(tmp_path / "whole", tokenizer, **options)
    whole.train()
    killed = make_trainer(tmp_path / "killed", tokenizer, **options)
    killed.add_callback(KillAfterStep2())
    killed.train()
    assert killed.state.global_step == 2
    checkpoint = tmp_path / "killed" / "run" / "checkpoint-2"
    assert (checkpoint / "critic").is_dir() and (checkpoint / "critic_optimizer.pt").is_file()
    resumed = make_trainer(tmp_path / "resumed", tokenizer, **options)
    resumed.train(resume_from_checkpoint=str(checkpoint))
    assert resumed.state.global_step == 3
    for name, model in (("policy", lambda t: t.model), ("critic", lambda t: t.critic)):
        for (key, a), (_, b) in zip(model(whole).named_parameters(), model(resumed).named_parameters(), strict=True):
            torch.testing.assert_close(b, a, rtol=0, atol=1e-6, msg=f"{name} {key} differs after resuming")
    # And the run did move: step 3 is not step 2.
    moved = max((a - b).abs().max().item()
                for a, b in zip(whole.model.parameters(), killed.model.parameters(), strict=True))
    assert moved > 1e-5, moved


# ---------------------------------------------------------------------- configs and the CLI
CONFIG_DIR = Path(__file__).resolve().parents[1] / "recipes" / "configs"
# Every training config, subfolders included (gpu/). accelerate/ holds launcher configs, and compare/ and
# budget/ hold study configs (tests/test_recipes.py builds them).
CONFIGS = sorted(p for p in CONFIG_DIR.rglob("*.yaml")
                 if p.relative_to(CONFIG_DIR).parts[0] not in ("accelerate", "compare", "budget"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(CONFIG_DIR)))
def test_every_shipped_config_parses(path):
    from trl import TrlParser

    from turngym.trainers.sft import TurnGymSFTConfig

    kind = TurnGymSFTConfig if path.stem.endswith("-sft") else TurnGymConfig
    (config,) = TrlParser([kind]).parse_args_and_config(["--config", str(path), "--output_dir", "/tmp/x"])
    assert config.env_id.startswith("turngym/")
    assert kind is TurnGymSFTConfig or config.algorithm in ALGORITHMS


def saved_policy(tmp_path: Path, tokenizer) -> Path:
    """The tiny policy and its tokenizer in one folder, as ``--model_name_or_path`` takes them."""
    policy = tmp_path / "policy"
    tokenizer.save_pretrained(policy)
    tiny_llama(len(tokenizer)).save_pretrained(policy)
    return policy


def test_turngym_train_runs_from_yaml_with_overrides(tmp_path, tokenizer, capsys):
    from turngym.recipes.cli import main

    policy, config = saved_policy(tmp_path, tokenizer), tmp_path / "run.yaml"
    config.write_text(
        "env_id: turngym/Signals-v0\nenv_kwargs: {turns: 2, colours: 2}\nnum_train_tasks: 4\nreward_mode: dense\n"
        "algorithm: ppo\nnum_generations: 2\nper_device_train_batch_size: 4\nmax_steps: 5\nmax_completion_length: 64\n"
        "max_new_tokens_per_turn: 2\naction_format: last_line\nreport_to: none\nsave_strategy: 'no'\n"
        "eval_split: eval\nnum_eval_tasks: 2\neval_strategy: steps\neval_steps: 1\n")
    out = tmp_path / "out"
    code = main(["train", "--config", str(config), "--model_name_or_path", str(policy), "--output_dir", str(out),
                 "--max_steps", "1", "--algorithm", "turn_grpo"])
    assert code == 0
    captured = capsys.readouterr()
    assert "eval at step 1: success" in captured.out + captured.err  # held-out evaluation ran at eval_steps
    assert (out / "model.safetensors").is_file() and (out / "tokenizer_config.json").is_file()
    assert not (out / "critic").exists()  # the command line's turn_grpo replaced the file's ppo
    assert main(["train", "--config", str(config), "--output_dir", str(out), "--algorithm", "a2c"]) == 2


def test_turngym_train_trains_an_estimator_registered_by_an_imported_file(tmp_path, tokenizer, monkeypatch):
    """docs/training.md's example: --import a file that registers an estimator, then --algorithm names it."""
    import sys

    from turngym.recipes.cli import main

    policy, config = saved_policy(tmp_path, tokenizer), tmp_path / "run.yaml"
    config.write_text(
        "env_id: turngym/Signals-v0\nenv_kwargs: {turns: 2, colours: 2}\nnum_train_tasks: 4\nreward_mode: dense\n"
        "num_generations: 2\nper_device_train_batch_size: 4\nmax_steps: 1\nmax_completion_length: 64\n"
        "max_new_tokens_per_turn: 2\naction_format: last_line\nreport_to: none\nsave_strategy: 'no'\n")
    (tmp_path / "my_estimators_cli.py").write_text(
        "from turngym.trainers.estimators import register_estimator\n\n\n"
        "@register_estimator('cli_episode_sign')\n"
        "def episode_sign(batch, args):\n"
        "    means = batch.group_means(batch.returns)\n"
        "    return [[float((r > m) - (r < m))] * len(t) for r, m, t in\n"
        "            zip(batch.returns, means, batch.turn_rewards, strict=True)]\n")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    try:
        assert main(["train", "--config", str(config), "--model_name_or_path", str(policy), "--output_dir", str(out),
                     "--import", "my_estimators_cli.py", "--algorithm", "cli_episode_sign"]) == 0
        assert (out / "model.safetensors").is_file()
    finally:
        unregister_estimator("cli_episode_sign")
        sys.modules.pop("my_estimators_cli", None)


def test_turngym_train_builds_a_lora_policy_from_yaml(tmp_path, tokenizer):
    from turngym.recipes.cli import main

    policy, config = saved_policy(tmp_path, tokenizer), tmp_path / "run.yaml"
    config.write_text(
        "env_id: turngym/Signals-v0\nenv_kwargs: {turns: 2, colours: 2}\nnum_train_tasks: 4\nreward_mode: dense\n"
        "algorithm: ppo\nnum_generations: 2\nper_device_train_batch_size: 4\nmax_steps: 1\n"
        "max_completion_length: 64\nmax_new_tokens_per_turn: 2\naction_format: last_line\nreport_to: none\n"
        "save_strategy: 'no'\nuse_peft: true\nlora_r: 4\nlora_alpha: 8\nlora_target_modules: [q_proj, v_proj]\n")
    out = tmp_path / "out"
    assert main(["train", "--config", str(config), "--model_name_or_path", str(policy), "--output_dir", str(out)]) == 0
    assert (out / "adapter_config.json").is_file() and not (out / "model.safetensors").exists()
    assert (out / "critic" / "model.safetensors").is_file()  # PPO's critic: a full model
    import json

    adapter = json.loads((out / "adapter_config.json").read_text())
    assert adapter["r"] == 4 and adapter["lora_alpha"] == 8 and set(adapter["target_modules"]) == {"q_proj", "v_proj"}
