"""turngym.trl_env: turngym worlds behind TRL's ``environment_factory``, unit by unit and in TRL's own
GRPOTrainer (a tiny model that calls the ``act`` tool, two training steps on Signals)."""

from __future__ import annotations

import importlib.util
import inspect
import json
import pickle
import subprocess
import sys
from typing import ClassVar

import pytest

from turngym import trl_env
from turngym.envs.signals import COMMANDS, RULE, signal_tasks
from turngym.trl_env import TurnGymEnvironment

SIGNALS = "turngym/Signals-v0"


@pytest.fixture
def env():
    with trl_env.environment_factory(SIGNALS, reward_mode="dense")() as environment:
        yield environment


def first_row(split="train", **kwargs):
    pytest.importorskip("datasets")
    return trl_env.task_dataset(SIGNALS, split, 1, **kwargs)[0]


def signals_of(row) -> list[str]:
    return json.loads(row["task"])["payload"]["signals"]


# ---------------------------------------------------------------------- reset / act / get_reward
def test_reset_starts_the_rows_task_and_act_steps_the_world_to_the_episode_reward(env):
    row = first_row()
    observation = env.reset(**row)
    signals = signals_of(row)
    assert observation == f"Obey the traffic lights. The light is {signals[0]}."
    assert env.info["task"]["id"] == row["task_id"] == "signals/train/0" and env.turns == 0 and not env.done

    wrong = next(c for c in COMMANDS if c != RULE[signals[0]])
    assert env.act(wrong).startswith("Wrong.")
    answers = [env.act(RULE[signal]) for signal in signals]
    assert answers[0] == f"Right. The light is {signals[1]}."
    assert answers[-1].startswith("Right. You made it through.\n\n[Episode over: won after 4 turns; episode reward 1")
    assert env.done and env.won and env.turns == 4
    assert env.turn_rewards == pytest.approx([0.0, 1 / 3, 1 / 3, 1 / 3])  # dense: 1/T per right command
    assert env.get_reward() == pytest.approx(1.0) == pytest.approx(sum(env.turn_rewards))


def test_a_second_reset_starts_a_fresh_episode_on_the_same_instance(env):
    env.reset(**first_row())
    env.act("stop")
    eval_row = first_row("eval")
    assert env.reset(**eval_row).endswith(f"The light is {signals_of(eval_row)[0]}.")
    assert env.turns == 0 and env.get_reward() == 0.0 and env.info["task"]["id"] == "signals/eval/10000"


@pytest.mark.parametrize("command", ["", "   ", "x" * 100_000, "go\x00\x07", "go\nstop", b"go\xff\xfe", 7, None,
                                     ["go"]])
def test_bad_commands_are_invalid_actions_with_feedback_never_a_crash(env, command):
    env.reset(**first_row())
    answer = env.act(command)
    assert env.turns == 1 and env.invalid_actions == 1 and env.info["invalid_action"]
    assert env.get_reward() == 0.0 and not env.done
    if isinstance(command, str | bytes):  # refused before the world: the reason and the hint come back
        assert answer.startswith("Invalid action: ") and "Reply with one command: go, stop, turn, wait." in answer
    else:  # a non-text argument reaches the world as JSON text, which refuses it
        assert answer.startswith("Wrong.") and env.info["invalid_reason"] == "not an admissible command"


def test_acting_after_the_episode_or_before_any_reset_is_a_clear_error():
    environment = TurnGymEnvironment(SIGNALS, max_turns=2)
    with pytest.raises(ValueError, match=r"no episode is running: reset\(\) starts one"):
        environment.act("go")
    with pytest.raises(RuntimeError, match="before any reset"):
        environment.get_reward()
    environment.reset(**first_row())
    environment.act("wait")
    assert "[Episode over: turn limit reached after 2 turns; episode reward 0." in environment.act("wait")
    # TRL turns a tool's exception into {"error": message} for the model to read
    with pytest.raises(ValueError, match=r"the episode is over \(turn limit reached after 2 turns\); act accepts no"):
        environment.act("go")
    assert environment.turns == 2 and environment.get_reward() == 0.0


def test_a_task_is_found_by_id_in_the_worlds_tasks_or_its_panel_for_the_split(env):
    assert "The light is" in env.reset(task_id="signals/train/3")  # the world's own (train) tasks
    assert env.reset(task_id="signals/eval/10002", split="eval") == env.reset(task=signal_tasks("eval", 3)[2].to_dict())
    assert env.info["task"]["id"] == "signals/eval/10002"
    with pytest.raises(ValueError, match="give the row a 'split' column"):
        env.reset(task_id="signals/eval/10002")
    with pytest.raises(KeyError, match="signals/eval/99"):
        env.reset(task_id="signals/eval/99", split="eval")
    with pytest.raises(ValueError, match="plays turngym/Signals-v0, but the row asks for turngym/TextWorld-v0"):
        env.reset(env_id="turngym/TextWorld-v0", task_id="signals/train/0")
    env.reset(seed=3, prompt=[{"role": "user", "content": "ignored"}], anything="else")  # no task: the world draws
    assert env.info["task"]["split"] == "train"


# ---------------------------------------------------------------------- what GRPOTrainer takes
def test_the_factory_pickles_and_checks_the_world_and_its_options_up_front():
    factory = pickle.loads(pickle.dumps(trl_env.environment_factory(SIGNALS, turns=2)))  # AsyncGRPOTrainer pickles it
    environment = factory()
    assert isinstance(environment, TurnGymEnvironment) and environment.env_kwargs == {"turns": 2}
    with pytest.raises(ValueError, match="no environment 'turngym/Signal-v0'; did you mean 'turngym/Signals-v0'"):
        trl_env.environment_factory("turngym/Signal-v0")
    with pytest.raises(ValueError, match="takes no option 'turn' \\(did you mean 'turns'"):
        trl_env.environment_factory(SIGNALS, turn=2)


def test_trl_sees_exactly_one_tool_with_a_schema_built_from_its_docstring():
    # How GRPOTrainer 1.16 lists an environment's tools (grpo_trainer.py, environment_factory set-up).
    members = [name for name, _ in inspect.getmembers(TurnGymEnvironment, predicate=inspect.isfunction)]
    tools = [name for name in members if name not in ("reset", "get_reward") and not name.startswith("_")]
    assert tools == [trl_env.TOOL_NAME] and {"reset", "get_reward"} <= set(members)
    transformers = pytest.importorskip("transformers")
    schema = transformers.utils.get_json_schema(TurnGymEnvironment(SIGNALS).act)["function"]
    assert schema["name"] == "act" and schema["description"].startswith("Execute one command in the text world")
    assert schema["parameters"]["required"] == ["command"]
    assert schema["parameters"]["properties"]["command"]["type"] == "string"


def test_under_the_tools_protocol_trl_sees_the_worlds_own_tools():
    """The SWE world's bash, edit, view and submit, listed the way GRPOTrainer lists tools, with the schemas
    transformers builds from them (what the chat template renders); a call steps the world through its checks."""
    from turngym.envs.swe.actions import swe_tools

    factory = pickle.loads(pickle.dumps(trl_env.environment_factory("turngym/SWE-v0", action_protocol="tools")))
    environment = factory()
    members = [name for name, _ in inspect.getmembers(type(environment), predicate=inspect.isfunction)]
    tools = [name for name in members if name not in ("reset", "get_reward") and not name.startswith("_")]
    assert sorted(tools) == ["bash", "edit", "submit", "view"] and "act" not in members
    transformers = pytest.importorskip("transformers")
    for spec in swe_tools():
        spec = spec["function"]
        schema = transformers.utils.get_json_schema(getattr(environment, spec["name"]))["function"]
        assert schema["name"] == spec["name"] and schema["description"] == spec["description"]
        assert set(schema["parameters"]["properties"]) == set(spec["parameters"]["properties"])
        assert set(schema["parameters"].get("required", [])) == set(spec["parameters"]["required"])
    if importlib.util.find_spec("datasets"):
        prompt = trl_env.task_dataset(SIGNALS, "eval", 1, env_kwargs={"action_protocol": "tools"})[0]["prompt"]
        assert "`act`" not in str(prompt) and prompt[0]["content"] == trl_env.TOOLS_SYSTEM_PROMPT
    signals = trl_env.environment_factory(SIGNALS, action_protocol="tools")()
    signals.reset(task_id="signals/train/0")
    assert signals.command(command="go") == "Right. The light is green."
    assert "unknown tool" not in signals.command(command=["not", "text"])  # the world's schema check answers
    assert signals.invalid_actions == 1 and "is not of type 'string'" in signals.info["invalid_reason"]
    signals.command(command="go", sudo=True)  # an argument the schema forbids: an invalid action, not an exception
    assert signals.invalid_actions == 2 and "'sudo' was unexpected" in signals.info["invalid_reason"]


def test_task_dataset_writes_one_row_per_task_with_the_task_itself():
    pytest.importorskip("datasets")
    dataset = trl_env.task_dataset(SIGNALS, "eval", 5, env_kwargs={"turns": 2})
    assert len(dataset) == 5 and dataset["task_id"] == [f"signals/eval/{10_000 + i}" for i in range(5)]
    row = dataset[0]
    assert row["env_id"] == row["environment"] == SIGNALS and row["split"] == "eval" and row["difficulty"] == "2x2"
    assert len(json.loads(row["task"])["payload"]["signals"]) == 2  # the panel follows the world's options
    system, user = row["prompt"]
    assert system == {"role": "system", "content": trl_env.SYSTEM_PROMPT}
    assert user["role"] == "user" and user["content"].startswith("Reply with one command: go, stop, turn, wait.")
    mine = signal_tasks("train", 6)
    mine_first = trl_env.task_dataset(SIGNALS, "train", 2, tasks=mine, system_prompt=None)
    assert mine_first["task_id"] == ["signals/train/0", "signals/train/1"] and len(mine_first[0]["prompt"]) == 1
    with pytest.raises(KeyError, match="has no split 'eval'"):
        trl_env.task_dataset(SIGNALS, "eval", tasks=mine)


def test_episode_metrics_log_the_episodes_and_add_no_reward():
    environments = [TurnGymEnvironment(SIGNALS, reward_mode="dense") for _ in range(2)]
    for environment, signals in zip(environments, (["red", "red"], ["green", "red"]), strict=True):
        environment.reset(task={"world": "signals", "id": "s", "split": "train", "difficulty": "", "payload":
                                {"signals": signals}})
    environments[0].act("stop")
    environments[0].act("stop")  # won in 2 turns
    environments[1].act("")  # invalid, and the model stopped there
    logged = {}
    rewards = trl_env.episode_metrics(prompts=["p", "p"], environments=environments, log_metric=logged.__setitem__)
    assert rewards == [None, None] and trl_env.reward_functions() == [trl_env.episode_metrics]
    assert logged == {"turngym/won": 0.5, "turngym/finished": 0.5, "turngym/invalid_action_rate": 0.5,
                      "turngym/turns": 1.5, "turngym/episode_reward": 0.5}


def test_importing_the_adapter_needs_neither_trl_nor_torch():
    blocked = ("import importlib.abc, sys\n"
               "class Missing(importlib.abc.MetaPathFinder):\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               "        if name.split('.')[0] in {'trl', 'torch', 'transformers', 'datasets'}:\n"
               "            raise ModuleNotFoundError(name)\n"
               "sys.meta_path.insert(0, Missing())\n"
               "from turngym import trl_env\n"
               "env = trl_env.environment_factory('turngym/Signals-v0')()\n"
               "print(env.reset(task_id='signals/train/0'), '|', env.act('go'))\n"
               "try:\n"
               "    trl_env.task_dataset('turngym/Signals-v0')\n"
               "except ImportError as error:\n"
               "    print(error)\n")
    result = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    played, refused = result.stdout.splitlines()
    assert played == "Obey the traffic lights. The light is green. | Right. The light is green."
    assert 'pip install "turngym[train]"' in refused and "task_dataset" in refused


# ---------------------------------------------------------------------- TRL's own GRPOTrainer
# A tiny policy that can call the tool: a word-level tokenizer whose tool-call scaffold is two tokens,
# a ChatML template that renders tools, tool calls and tool messages (prefix-preserving, as TRL's
# multi-turn loop requires), and the response template TRL parses tool calls with.
CALL_OPEN = '<tool_call>{"name": "act", "arguments": {"command": "'
CALL_CLOSE = '"}}</tool_call>'
TOOL_TEMPLATE = (
    "{%- if tools %}{{- '<|im_start|>system\\nTools:' }}{%- for tool in tools %}{{- ' ' + tool.function.name }}"
    "{%- endfor %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'assistant' %}{{- '<|im_start|>assistant\\n' + (message.content or '') }}"
    "{%- for call in message.tool_calls or [] %}{{- '<tool_call>' + {'name': call.function.name, "
    "'arguments': call.function.arguments} | tojson + '</tool_call>' }}{%- endfor %}{{- '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
RESPONSE_TEMPLATE = {  # transformers' response-parsing spec: a tool call is <tool_call>JSON</tool_call>
    "defaults": {"role": "assistant"},
    "start_anchor_pattern": r"<\|im_start\|>\s*assistant\s*",
    "fields": {
        "tool_calls": {"open": "<tool_call>", "close_pattern": r"</tool_call>\s*", "repeats": True, "content": "json",
                       "transform": {"type": "function", "function": "{content}"}},
        "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
    },
}


def tool_calling_tokenizer(directory):
    from helpers_llm import signals_vocabulary, word_tokenizer

    words = sorted({*signals_vocabulary(), "tool", "Tools", "act", "Send", "each", "command", "with", "the", "`",
                    "Episode", "over", "won", "after", "turns", "turn", "limit", "reached", "episode", "reward", "Do",
                    "not", "call", "again", "[", "]", ";", "0", "1"})
    tokenizer = word_tokenizer(directory, words, chat_template=TOOL_TEMPLATE)
    tokenizer.add_tokens([CALL_OPEN, CALL_CLOSE])
    tokenizer.response_template = RESPONSE_TEMPLATE
    return tokenizer


def demonstrations(tokenizer, factory, rows, rng) -> list[list[int]]:
    """Whole episodes played through the adapter with uniformly random commands, rendered as tool calls:
    a warm start that teaches the tool-call format only, so the policy's returns still vary."""
    environment = factory()
    sequences = []
    for row in rows:
        messages = [*row["prompt"][:-1], {**row["prompt"][-1], "content": row["prompt"][-1]["content"]
                                          + environment.reset(**row)}]
        while not environment.done:
            command = rng.choice(COMMANDS)
            call = {"type": "function", "function": {"name": "act", "arguments": {"command": command}}}
            messages += [{"role": "assistant", "content": "", "tool_calls": [call]},
                         {"role": "tool", "name": "act", "content": environment.act(command)}]
        messages.append({"role": "assistant", "content": ""})  # the episode is over: stop calling the tool
        sequences.append(tokenizer.apply_chat_template(messages, tools=[environment.act], tokenize=True,
                                                       return_dict=False))
    return sequences


def warm_start(model, sequences, steps=60, lr=3e-3):
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for step in range(steps):
        ids = torch.tensor([sequences[step % len(sequences)]])
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return loss.item()


class RecordingEnvironment(TurnGymEnvironment):
    """Remembers every episode TRL scored (get_reward is called once per rollout)."""

    scored: ClassVar[list[dict]] = []

    def get_reward(self) -> float:
        reward = super().get_reward()
        RecordingEnvironment.scored.append({"task": self.info["task"]["id"], "turns": self.turns, "reward": reward,
                                            "turn_rewards": self.turn_rewards, "done": self.done})
        return reward


def test_trls_grpo_trainer_trains_on_a_turngym_world_through_the_adapter(tmp_path, one_torch_thread, monkeypatch):
    torch = pytest.importorskip("torch")
    trl = pytest.importorskip("trl")
    import random

    from helpers_llm import tiny_llama

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.manual_seed(0)
    tokenizer = tool_calling_tokenizer(tmp_path / "tokenizer")
    dataset = trl_env.task_dataset(SIGNALS, "train", 8)
    model = tiny_llama(len(tokenizer))
    loss = warm_start(model, demonstrations(tokenizer, trl_env.environment_factory(SIGNALS), dataset,
                                            random.Random(0)))
    assert loss < 1.5, f"the warm start did not learn the tool-call format (loss {loss:.2f})"
    before = {name: p.detach().clone() for name, p in model.named_parameters()}

    RecordingEnvironment.scored = []
    args = trl.GRPOConfig(output_dir=str(tmp_path / "run"), per_device_train_batch_size=8, num_generations=8,
                          max_steps=2, max_completion_length=128, max_tool_calling_iterations=10, learning_rate=1e-3,
                          beta=0.0, temperature=1.0, logging_steps=1, report_to="none", save_strategy="no",
                          use_cpu=True, bf16=False, seed=0, disable_tqdm=True)
    trainer = trl.GRPOTrainer(model=model, processing_class=tokenizer, args=args, train_dataset=dataset,
                              environment_factory=lambda: RecordingEnvironment(SIGNALS, reward_mode="dense"),
                              reward_funcs=trl_env.reward_functions())
    trainer.train()

    scored = RecordingEnvironment.scored
    assert len(scored) == 16  # 2 steps x 8 rollouts, each scored by get_reward
    assert sum(e["turns"] for e in scored) >= 16, "the model's tool calls did not step the world"
    assert any(e["done"] for e in scored), "no episode reached its end through the tool"
    for episode in scored:  # the reward TRL trained on is the episode's, turn by turn from the world
        assert episode["reward"] == pytest.approx(sum(episode["turn_rewards"]))
    assert len({round(e["reward"], 6) for e in scored}) > 1, "every episode earned the same reward"
    logs = [entry for entry in trainer.state.log_history if "rewards/RecordingEnvironment/mean" in entry]
    assert len(logs) == 2
    for entry, step in zip(logs, (scored[:8], scored[8:]), strict=True):
        assert entry["rewards/RecordingEnvironment/mean"] == pytest.approx(sum(e["reward"] for e in step) / 8)
        assert entry["reward"] == pytest.approx(entry["rewards/RecordingEnvironment/mean"])  # metrics add nothing
        assert entry["turngym/turns"] == pytest.approx(sum(e["turns"] for e in step) / 8)
        assert entry["tools/call_frequency"] > 0
    changed = [name for name, p in trainer.model.named_parameters() if not torch.equal(p.detach(), before[name])]
    assert changed, "GRPO left every weight unchanged"
