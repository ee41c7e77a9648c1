"""SFT warm start: demos are RL rollout records token for token, the loss is on assistant tokens only
(as TRL's SFTTrainer actually builds the labels), a tiny model learns Signals, the CLI, and errors."""

from __future__ import annotations

import json
from math import comb
from pathlib import Path

import pytest
import torch

from turngym.agents.backends import Generation, ScriptedBackend
from turngym.agents.llm import LLMAgent
from turngym.agents.rollout import run_episodes
from turngym.envs.panels import task_panel
from turngym.envs.vector import LocalPool
from turngym.recipes.cli import main
from turngym.trainers.episodes import Episode
from turngym.trainers.sft import (
    EVAL_REPORT_FILE,
    NoDemosError,
    TurnGymSFTConfig,
    build_trainer,
    collect_demos,
    collect_policy_demos,
    demo_dataset,
    demo_reply,
    parse_config,
    run_sft,
    sft_example,
    won_episodes,
)

SIGNALS = "turngym/Signals-v0"
TEXTWORLD = "turngym/TextWorld-v0"
SIGNALS_YAML = Path(__file__).resolve().parent.parent / "recipes" / "configs" / "signals-sft.yaml"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def policy(tiny_policy) -> Path:
    return tiny_policy


@pytest.fixture(scope="module")
def tokenizer(policy):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(policy)


def sft_config(tmp_path: Path, policy: Path, **overrides) -> TurnGymSFTConfig:
    options = {
        "output_dir": str(tmp_path / "sft"), "model_name_or_path": str(policy), "env_id": SIGNALS,
        "env_kwargs": {"turns": 3, "colours": 2}, "reward_mode": "dense", "num_demos": 4, "max_length": 8192,
        "system_prompt": "Obey the lights. {format_instruction}", "report_to": "none", "save_strategy": "no",
        "gradient_checkpointing": False, "disable_tqdm": True, "seed": 0,
    }
    return TurnGymSFTConfig(**{**options, **overrides})


def written_reply(action: str, action_format: str, response_prefix: str) -> str:
    """How a reply is written, spelled out here independently of trainers.sft.demo_reply."""
    if action_format == "tags":
        return f"<action>{action}</action>"
    return f" {action}" if response_prefix else f"Action: {action}"


def rl_rollout(config: TurnGymSFTConfig, tokenizer, tasks, actions: list[list[str]], action_format: str):
    """What the RL rollout records when the model's replies are these actions, in the given format."""
    turn = {}

    def reply(request):
        t = turn[request.key] = turn.get(request.key, -1) + 1
        return written_reply(actions[request.key][t], action_format, config.response_prefix)

    encode = lambda text: tokenizer.encode(text, add_special_tokens=False)
    agent = LLMAgent(ScriptedBackend(reply, encode), tokenizer, config.agent_config())
    pool = LocalPool.from_id(config.env_id, 1, env_kwargs={**config.world_kwargs(), "tasks": tasks})
    try:
        return run_episodes(agent, pool, list(tasks), seed=config.demo_seed)
    finally:
        pool.close()


# ---------------------------------------------------------------------- demos = RL records
@pytest.mark.parametrize(
    ("env_id", "env_kwargs", "action_format", "response_prefix"),
    [
        (TEXTWORLD, {"config": "w2-o3-q4"}, "prefix", ""),
        (SIGNALS, {"turns": 3, "colours": 4}, "prefix", "Action:"),
        (SIGNALS, {"turns": 2, "colours": 4}, "tags", ""),
    ],
    ids=["textworld-prefix", "signals-response-prefix", "signals-tags"],
)
def test_demo_tokens_equal_an_rl_rollout_of_the_same_actions(tmp_path, policy, tokenizer, env_id, env_kwargs,
                                                             action_format, response_prefix):
    # TextWorld plays the eval split: its first games are the ones tests/test_llm_agent.py already generates.
    config = sft_config(tmp_path, policy, env_id=env_id, env_kwargs=env_kwargs, train_split="eval", num_demos=2,
                        action_format=action_format, response_prefix=response_prefix, system_prompt=None)
    demos, stats = collect_demos(config, tokenizer, progress=False)
    assert stats.kept == stats.played == 2 and not stats.dropped
    tasks = task_panel(env_id, "eval", 2, config.world_kwargs(), progress=False)
    rollouts = rl_rollout(config, tokenizer, tasks, [d.actions for d in demos], action_format)
    for trajectory, rollout in zip(demos, rollouts, strict=True):
        demo, record = Episode.from_trajectory(trajectory), rollout.tokens
        assert rollout.won
        assert demo.prompt_ids == record.prompt_ids
        assert demo.completion_ids == record.completion_ids
        assert demo.env_mask == record.env_mask
        assert sft_example(demo)["assistant_masks"] == [0] * len(record.prompt_ids) + record.env_mask
        if not response_prefix:  # the chat template's own rendering of the conversation gives the same ids
            assert sft_example(demo)["input_ids"] == template_ids(tokenizer, config, rollout, action_format)


def template_ids(tokenizer, config, rollout, action_format) -> list[int]:
    system = config.agent_config().system_message(config.agent_config().parser())
    messages = [{"role": "system", "content": system}, {"role": "user", "content": rollout.observations[0]}]
    for action, observation in zip(rollout.actions, rollout.observations[1:], strict=True):
        messages += [{"role": "assistant", "content": written_reply(action, action_format, "")},
                     {"role": "user", "content": observation}]
    text = tokenizer.apply_chat_template(messages[:-1], tokenize=False)  # the last observation is never shown
    ids = tokenizer.encode(text, add_special_tokens=False)
    newline = tokenizer.encode("\n", add_special_tokens=False)
    assert ids[-len(newline):] == newline  # ChatML's newline after the last <|im_end|> is not the model's
    return ids[: -len(newline)]


# ---------------------------------------------------------------------- the loss mask, as TRL builds it
def labelled_runs(labels: list[int]) -> list[list[int]]:
    """The contiguous runs of labelled (not -100) positions."""
    runs: list[list[int]] = []
    for position, label in enumerate(labels):
        if label == -100:
            continue
        if runs and runs[-1][-1] == position - 1:
            runs[-1].append(position)
        else:
            runs.append([position])
    return runs


def collate(trainer, rows: int) -> dict:
    """A batch as SFTTrainer's own collator builds it from its prepared dataset."""
    return trainer.data_collator([trainer.train_dataset[i] for i in range(rows)])


@pytest.mark.parametrize("response_prefix", ["", "Action:"], ids=["no-prefix", "response-prefix"])
def test_trl_labels_are_the_assistant_tokens_only(tmp_path, policy, tokenizer, response_prefix):
    config = sft_config(tmp_path, policy, response_prefix=response_prefix, num_demos=3)
    demos, _ = collect_demos(config, tokenizer, progress=False)
    trainer = build_trainer(config, tokenizer, demo_dataset(demos))
    batch = collate(trainer, len(demos))
    assert set(batch) >= {"input_ids", "labels", "attention_mask"}
    for row, trajectory in enumerate(demos):
        example = sft_example(Episode.from_trajectory(trajectory))
        length = len(example["input_ids"])
        ids, labels = batch["input_ids"][row].tolist(), batch["labels"][row].tolist()
        assert ids[:length] == example["input_ids"]
        # -100 exactly where the token is not the assistant's (prompt, env deltas, padding)
        assert labels == [i if m else -100 for i, m in zip(ids, example["assistant_masks"] + [0] * (len(ids) - length))]
        # and, read independently of the mask: each labelled run is one whole reply with its end-of-turn token
        replies = [tokenizer.decode([ids[p] for p in run]) for run in labelled_runs(labels)]
        assert replies == [written_reply(a, "prefix", response_prefix) + "<|im_end|>" for a in trajectory.actions]
        if response_prefix:  # the response prefix is prompt side: never labelled
            prefix = tokenizer.encode(response_prefix, add_special_tokens=False)
            starts = [run[0] for run in labelled_runs(labels)]
            assert all(ids[s - len(prefix):s] == prefix and set(labels[s - len(prefix):s]) == {-100} for s in starts)


def test_an_unsampled_end_of_turn_token_is_not_in_the_loss(tmp_path, policy, tokenizer):
    """A turn cut at max_new_tokens gets an end-of-turn token the model never sampled: masked like env text."""

    class NeverStops(ScriptedBackend):
        def generate(self, requests, sampling, stop_ids):
            ids = tokenizer.encode("Action: stop stop stop", add_special_tokens=False)[: sampling.max_new_tokens]
            return [Generation(ids, [0.0] * len(ids), False) for _ in requests]

    config = sft_config(tmp_path, policy, max_new_tokens_per_turn=3, max_turns=2, response_prefix="")
    tasks = task_panel(SIGNALS, "train", 1, config.world_kwargs(), progress=False)
    agent = LLMAgent(NeverStops(lambda r: "", tokenizer.encode), tokenizer, config.agent_config())
    pool = LocalPool.from_id(SIGNALS, 1, env_kwargs={**config.world_kwargs(), "tasks": tasks})
    (trajectory,) = run_episodes(agent, pool, list(tasks))
    episode = Episode.from_trajectory(trajectory)
    assert trajectory.tokens.forced_end_of_turn == [True, True]
    trainer = build_trainer(config, tokenizer, demo_dataset([episode]))
    batch = collate(trainer, 1)
    ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
    end_of_turn = tokenizer.convert_tokens_to_ids("<|im_end|>")
    sampled = labelled_runs(labels)
    assert [len(run) for run in sampled] == [3, 3]  # the sampled ids only
    for run in sampled:
        assert ids[run[-1] + 1] == end_of_turn and labels[run[-1] + 1] == -100  # the forced token right after
    # collect_demos drops such episodes: the cut reply no longer parses to the oracle's command
    with pytest.raises(NoDemosError, match="max_new_tokens_per_turn"):
        collect_demos(sft_config(tmp_path, policy, max_new_tokens_per_turn=2, response_prefix=""), tokenizer,
                      progress=False)


# ---------------------------------------------------------------------- learning
def chance_of_winning(turns: int, max_turns: int, commands: int = 4) -> float:
    """A uniform random command each turn, wrong ones cost a turn (strict=False): P(turns right in max_turns)."""
    p = 1 / commands
    return sum(comb(max_turns, k) * p**k * (1 - p) ** (max_turns - k) for k in range(turns, max_turns + 1))


def test_sft_on_signals_beats_chance_on_held_out_tasks(tmp_path, policy, tokenizer):
    config = sft_config(tmp_path, policy, num_demos=16, eval_split="eval", num_eval_tasks=16, learning_rate=5e-3,
                        lr_scheduler_type="constant", num_train_epochs=20, per_device_train_batch_size=8,
                        logging_steps=10)
    from transformers import AutoModelForCausalLM

    from turngym.envs.panels import task_panel
    from turngym.trainers.rollout import evaluate_policy

    held_out = task_panel(config.env_id, "eval", 16, config.world_kwargs(), progress=False)
    base = evaluate_policy(AutoModelForCausalLM.from_pretrained(policy), tokenizer, config, held_out, progress=False)
    output = run_sft(config)
    report = json.loads((output / EVAL_REPORT_FILE).read_text())["overall"]
    chance = chance_of_winning(turns=3, max_turns=6)  # 6 turns: the world's default, 2x the optimal length
    assert chance == pytest.approx(0.169, abs=1e-3)
    assert base.overall.success_rate <= chance
    assert report["success_rate"] >= 0.75 and report["success_ci95"][0] > chance + 0.3
    per_turn_accuracy = 3 * report["mean_return"] / report["mean_turns"]  # dense: 1/3 per right command
    assert per_turn_accuracy > 1 / 4 + 0.5


# ---------------------------------------------------------------------- CLI
def test_cli_parses_yaml_with_overrides():
    config = parse_config(["--config", str(SIGNALS_YAML), "--learning_rate", "0.25", "--num_demos", "5",
                           "--env_kwargs", '{"turns": 2, "colours": 3}'])
    assert isinstance(config, TurnGymSFTConfig)
    assert config.learning_rate == 0.25 and config.num_demos == 5 and config.env_kwargs == {"turns": 2, "colours": 3}
    assert config.env_id == SIGNALS and config.max_length == 512 and config.eval_split == "eval"  # from the YAML
    assert config.use_cpu == (not torch.cuda.is_available()) and not config.bf16
    with pytest.raises(ValueError, match="demo_source"):
        parse_config(["--config", str(SIGNALS_YAML), "--demo_source", "human"])


def test_cli_help_lists_the_config_fields(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["sft", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "--num_demos" in out and "--env_kwargs" in out and "--learning_rate" in out


def test_cli_one_step_run_saves_a_model_rl_can_start_from(tmp_path, policy):
    from turngym.agents.models import load_policy

    output = tmp_path / "out"
    rc = main(["sft", "--config", str(SIGNALS_YAML), "--model_name_or_path", str(policy), "--output_dir", str(output),
               "--num_demos", "2", "--max_steps", "1", "--learning_rate", "1e-2", "--num_eval_tasks", "2",
               "--disable_tqdm", "true"])
    assert rc == 0
    stats = json.loads((output / "sft_demos.json").read_text())
    assert stats["kept"] == 2 and stats["assistant_tokens"] > 0
    assert json.loads((output / EVAL_REPORT_FILE).read_text())["overall"]["episodes"] == 2
    model, tokenizer = load_policy(str(output))
    before, original = load_policy(str(policy))
    assert tokenizer.chat_template == original.chat_template and tokenizer.get_vocab() == original.get_vocab()
    assert any(not torch.equal(a, b) for a, b in zip(model.parameters(), before.parameters(), strict=True))


# ---------------------------------------------------------------------- the policy's own wins
class SpelledPolicy:
    """A policy that replies a Signals command chosen by the episode and the turn (varied, so some episodes win),
    spelled one character per token: ids no tokenizer would produce from the text, so training on decoded and
    re-tokenised text would show. It remembers every episode's sampled ids, in order."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer, self.sampled = tokenizer, {}

    def generate(self, requests, sampling, stop_ids):
        from turngym.agents.backends import Generation
        from turngym.agents.base import stable_seed
        from turngym.envs.signals import COMMANDS

        generations = []
        for request in requests:
            command = COMMANDS[stable_seed(request.key, len(request.ids)) % len(COMMANDS)]
            ids = [i for char in f" {command}" for i in self.tokenizer.encode(char, add_special_tokens=False)]
            ids.append(stop_ids[0])
            self.sampled.setdefault(request.key, []).extend(ids)
            generations.append(Generation(ids, [0.0] * len(ids), True))
        return generations

    def release(self, key) -> None:
        """Nothing is cached."""

    def cache_prefix(self, ids) -> None:
        """Nothing is cached."""


def test_policy_demos_keep_the_wins_on_the_ids_the_policy_sampled(tmp_path, policy, tokenizer):
    from turngym.agents.evaluate import evaluate

    config = sft_config(tmp_path, policy, demo_source="policy", num_demos=16, demo_samples_per_task=2,
                        skip_train_tasks=3)
    # won_episodes on its own: wins kept (in order), every loss and truncation dropped and counted.
    tasks = task_panel(config.env_id, "train", 8, config.world_kwargs(), progress=False)
    agent = LLMAgent(SpelledPolicy(tokenizer), tokenizer, config.agent_config(temperature=0.7))
    played = evaluate(agent, config.env_id, tasks, env_kwargs=config.world_kwargs(), batch=8, progress=False,
                      samples_per_task=2).trajectories
    kept, dropped = won_episodes(played)
    wins = [t for t in played if t.won]
    assert 0 < len(wins) < len(played) and [e.trajectory for e in kept] == wins and all(e.won for e in kept)
    assert sum(dropped.values()) == len(played) - len(wins) and set(dropped) <= {"lost", "truncated_max_turns"}

    # A round: tasks after skip_train_tasks, num_demos episodes; each kept demo trains on exactly the sampled ids.
    backend = SpelledPolicy(tokenizer)
    demos, stats = collect_policy_demos(config, None, tokenizer, backend=backend, progress=False)
    round_tasks = task_panel(config.env_id, "train", 11, config.world_kwargs(), progress=False).take(8, start=3)
    assert stats.taskset == round_tasks.name and stats.taskset_fingerprint == round_tasks.fingerprint
    assert (stats.played, stats.kept) == (16, len(demos)) and 0 < stats.kept < 16
    assert stats.kept + sum(stats.dropped.values()) == 16 and all(d.won for d in demos)
    order = [t.id for t in round_tasks]
    for demo in demos:
        key = demo.trajectory.sample * len(order) + order.index(demo.trajectory.task["id"])  # sample-major plays
        row = sft_example(demo)
        assert row["input_ids"] == demo.prompt_ids + demo.completion_ids
        trained = [token for token, mask in zip(row["input_ids"], row["assistant_masks"], strict=True) if mask]
        assert trained == backend.sampled[key]  # the policy's own ids, not decoded and re-tokenised text
        retokenised = tokenizer.encode(tokenizer.decode(trained), add_special_tokens=False)
        assert retokenised != trained  # (which would differ: the test can tell the two apart)


def test_no_policy_win_is_a_clear_one_line_error(tmp_path, policy, tokenizer):
    config = sft_config(tmp_path, policy, demo_source="policy", max_turns=1)  # 3 signals, 1 turn: never a win
    with pytest.raises(NoDemosError, match=r"round 1 of 1: the policy won 0 of 4 episodes at temperature 0.7 "
                                           r"\(dropped: 4 truncated_max_turns\)") as error:
        collect_policy_demos(config, None, tokenizer, backend=SpelledPolicy(tokenizer), progress=False)
    assert "\n" not in str(error.value)


def test_policy_demo_options_are_checked():
    assert parse_config(["--config", str(SIGNALS_YAML), "--demos", "policy", "--rounds", "3"]).rounds == 3
    with pytest.raises(ValueError, match="demo_source: policy"):
        TurnGymSFTConfig(output_dir="unused", report_to="none", rounds=2)  # the oracle's demos never change
    with pytest.raises(ValueError, match="a multiple of demo_samples_per_task"):
        TurnGymSFTConfig(output_dir="unused", report_to="none", demo_source="policy", num_demos=6,
                         demo_samples_per_task=4)
    with pytest.raises(ValueError, match="set demo_temperature"):
        TurnGymSFTConfig(output_dir="unused", report_to="none", demo_source="policy", num_demos=8,
                         demo_samples_per_task=4, demo_temperature=0.0)
    with pytest.raises(ValueError, match="demo_backend shape policy demos"):
        TurnGymSFTConfig(output_dir="unused", report_to="none", demo_backend="vllm")  # the oracle samples nothing
    with pytest.raises(ValueError, match="demo_backend"):
        TurnGymSFTConfig(output_dir="unused", report_to="none", demo_source="policy", demo_backend="sglang")
    assert parse_config(["--config", str(SIGNALS_YAML), "--demos", "policy", "--demo_backend", "vllm"]).demo_backend \
        == "vllm"


def test_a_sampler_gives_each_round_a_backend_holding_the_policy_it_has_then(tmp_path, policy, tokenizer):
    """``sampler(model, seed)`` (how a study lends RFT its vLLM engine): called once a round, with the policy as
    the round before left it and the round's seed (demo_seed + round), and what it returns samples that round."""
    from turngym.trainers.sft import train_on_policy_demos

    calls, backends = [], []

    def sampler(model, seed):
        calls.append(([p.detach().clone() for p in model.parameters()], seed))
        backends.append(SpelledPolicy(tokenizer))
        return backends[-1]

    config = sft_config(tmp_path, policy, env_kwargs={"turns": 1, "colours": 2}, demo_source="policy", rounds=2,
                        num_demos=8, demo_samples_per_task=2, demo_seed=5, max_steps=1, learning_rate=1e-2)
    _, rounds = train_on_policy_demos(config, tokenizer, progress=False, sampler=sampler)
    assert [seed for _, seed in calls] == [5, 6] and all(backend.sampled for backend in backends)
    assert [r.played for r in rounds] == [8, 8] and all(r.kept > 0 for r in rounds)
    (first, _), (second, _) = calls
    assert any(not torch.equal(a, b) for a, b in zip(first, second, strict=True))  # round 1's step, then round 2


def test_cli_demos_policy_samples_keeps_the_wins_and_fine_tunes_round_after_round(tmp_path, policy, tokenizer,
                                                                                 monkeypatch):
    from turngym.agents.models import load_policy

    seen = []  # each round's sampling model: round 2 samples with the model round 1 fine-tuned

    def backend(model, tokenizer_):
        seen.append([p.detach().clone() for p in model.parameters()])
        return SpelledPolicy(tokenizer)

    monkeypatch.setattr("turngym.trainers.sft.policy_backend", backend)
    output = tmp_path / "out"
    rc = main(["sft", "--config", str(SIGNALS_YAML), "--model_name_or_path", str(policy), "--output_dir", str(output),
               "--env_kwargs", '{"turns": 1, "colours": 2}',  # one right command in 2 turns: many wins, some losses
               "--demos", "policy", "--rounds", "2", "--num_demos", "8", "--demo_samples_per_task", "2",
               "--skip_train_tasks", "4", "--max_steps", "1", "--learning_rate", "1e-2", "--num_eval_tasks", "2",
               "--disable_tqdm", "true"])
    assert rc == 0
    record = json.loads((output / "sft_demos.json").read_text())
    assert record["demo_source"] == "policy" and record["samples_per_task"] == 2 and len(record["rounds"]) == 2
    assert [r["taskset"].rsplit("[", 1)[1] for r in record["rounds"]] == ["4:8]", "8:12]"]  # fresh tasks each round
    assert all(r["played"] == 8 and 0 < r["kept"] <= 8 and r["assistant_tokens"] > 0 for r in record["rounds"])
    base, _ = load_policy(str(policy))
    final, _ = load_policy(str(output))
    first, second = seen
    assert all(torch.equal(a, b) for a, b in zip(first, base.parameters(), strict=True))  # round 1: the start policy
    assert any(not torch.equal(a, b) for a, b in zip(second, first, strict=True))  # round 2: after round 1's step
    assert any(not torch.equal(a, b) for a, b in zip(final.parameters(), second, strict=True))  # round 2's step


# ---------------------------------------------------------------------- SWE: the tools walkthrough (issue 42.6)
def test_swe_demos_are_the_tools_walkthrough_as_tool_calls_in_the_models_syntax(tmp_path, policy, tokenizer):
    """turngym sft under the tools protocol: each demo plays view, edit and submit calls, written as Hermes tool calls
    (the SmolLM2 template ignores tools=, so the system message describes them), and the loss sees only them."""
    from turngym.envs.swe.sandbox import backend_available
    from turngym.envs.tools import ToolCall

    if backend_available("bwrap") is not None:
        pytest.skip(f"bwrap sandbox unavailable: {backend_available('bwrap')}")
    config = TurnGymSFTConfig(
        output_dir=str(tmp_path / "sft"), model_name_or_path=str(policy), env_id="turngym/SWE-v0",
        env_kwargs={"sandbox": "bwrap", "workspace_root": str(tmp_path)}, action_protocol="tools", num_demos=2,
        max_length=32768, max_new_tokens_per_turn=4096, report_to="none", save_strategy="no", disable_tqdm=True)
    demos, stats = collect_demos(config, tokenizer, progress=False)
    assert stats.kept == stats.played == 2 and not stats.dropped
    for demo in demos:
        names = [ToolCall.from_action(action).name for action in demo.actions]
        assert names[-1] == "submit" and "edit" in names and set(names) <= {"view", "edit", "submit"}
        episode = Episode.from_trajectory(demo)
        example = sft_example(episode)
        ids, mask = example["input_ids"], example["assistant_masks"]
        trained = tokenizer.decode([i for i, m in zip(ids, mask, strict=True) if m])
        assert trained.count("<tool_call>") == len(names) and '"name": "edit"' in trained
        assert "old_str" in trained and "<returncode>" not in trained  # the sandbox's answers are not trained on
        prompt = tokenizer.decode(episode.prompt_ids)
        assert '"name": "edit"' in prompt and "<tool_call>" in prompt  # the tools, described in the system message


# ---------------------------------------------------------------------- errors
def test_no_oracle_win_is_a_clear_error(tmp_path, policy, tokenizer):
    config = sft_config(tmp_path, policy, max_turns=1)  # 3 signals, 1 turn: the oracle can never win
    with pytest.raises(NoDemosError, match=r"won 0 of 4 episodes \(dropped: 4 truncated_max_turns\).*raise max_turns"):
        collect_demos(config, tokenizer, progress=False)


def test_a_command_the_action_format_cannot_express_is_a_clear_error():
    options = TurnGymSFTConfig(output_dir="unused", report_to="none")
    assert (options.action_format, options.response_prefix) == ("prefix", "Action:")  # the defaults, as eval's
    assert demo_reply("go north", options.agent_config()) == " go north"  # the prefix is on the prompt side
    config = options.agent_config(response_prefix="")
    assert demo_reply("go north", config) == "Action: go north"
    with pytest.raises(NoDemosError, match="action_format='raw'"):
        demo_reply("```bash\ngit apply fix.patch\n```", config)
