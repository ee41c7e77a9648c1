"""Tool calls: the world's check of a call against its JSON Schema tools, and the parsers of each model family's
native call syntax, on hand-written replies, hostile ones included (truncated JSON, several calls, calls inside
text, unicode, huge or binary output). A broken call is a reason, never an exception."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from turngym.agents.tool_calls import SYNTAXES, format_tool_call, parse_tool_calls, syntax_of_template
from turngym.envs.tools import MAX_CALL_CHARS, ToolCall, ToolCallError, check_call, function_tool

TOOLS = [function_tool("bash", "Run a shell command.", {"command": {"type": "string"}}),
         function_tool("edit", "Replace text in a file.", {"path": {"type": "string"}, "old": {"type": "string"},
                                                            "new": {"type": "string"}}),
         function_tool("submit", "Submit the work.", {})]


# ---------------------------------------------------------------------- the world's check
def test_function_tool_is_the_openai_format():
    assert TOOLS[0] == {"type": "function", "function": {
        "name": "bash", "description": "Run a shell command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"],
                       "additionalProperties": False}}}
    with pytest.raises(ValueError, match="tool names"):
        function_tool("rm -rf", "no", {})


@pytest.mark.parametrize(("call", "reason"), [
    (ToolCall("bash", {"command": "ls"}), None),
    (ToolCall("submit", {}), None),
    (ToolCall("shell", {"command": "ls"}), "unknown tool 'shell'; the tools are bash, edit, submit"),
    (ToolCall("bash", {}), "bad arguments for bash: 'command' is a required property"),
    (ToolCall("bash", {"command": 3}), "bad arguments for bash at command: 3 is not of type 'string'"),
    (ToolCall("bash", {"command": "ls", "sudo": True}), ("bad arguments for bash: Additional properties are not "
                                                        "allowed ('sudo' was unexpected)")),
])
def test_a_call_is_checked_against_its_tools_schema(call, reason):
    assert check_call(call, TOOLS) == reason


def test_an_action_string_round_trips_and_a_broken_one_says_why():
    call = ToolCall("edit", {"path": "a.py", "old": "é", "new": "ü\n"})
    assert ToolCall.from_action(call.to_action()) == call
    for action, reason in (("", "not valid JSON"), ("[1, 2]", "got list"), ('{"name": 3}', "must be a tool's name"),
                           ('{"name": "bash", "arguments": [1]}', "must be a JSON object, got list"),
                           ('{"name": "bash", "arguments": "{oops"}', "a string that is not a JSON object"),
                           ("x" * (MAX_CALL_CHARS + 1), "characters long"), ("[" * 50_000, "not valid JSON")):
        with pytest.raises(ToolCallError, match=reason.replace("(", r"\(").replace(")", r"\)")):
            ToolCall.from_action(action)


def test_arguments_written_as_a_json_string_are_read():
    assert ToolCall.from_action('{"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}') == \
        ToolCall("bash", {"command": "ls"})


# ---------------------------------------------------------------------- the parsers
@pytest.mark.parametrize(("template", "syntax"), [
    ("{% for tool in tools %}...<tool_call>\n{\"name\": ...}\n</tool_call>", "hermes"),
    ("{{ '[AVAILABLE_TOOLS]' }}...{{ '[TOOL_CALLS]' }}", "mistral"),
    ("{%- if tools %}<|start_header_id|>ipython<|end_header_id|>", "llama3"),
    ("{% for message in messages %}{{ message.content }}{% endfor %}", None),
    (None, None),
])
def test_the_syntax_comes_from_the_template(template, syntax):
    assert syntax_of_template(template) == syntax


BASH_LS = ToolCall("bash", {"command": "ls -la"})


@pytest.mark.parametrize(("syntax", "reply", "calls"), [
    ("hermes", '<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>', [BASH_LS]),
    ("hermes", 'Let me look first.\n<tool_call>{"name": "bash", "arguments": {"command": "ls -la"}}</tool_call>',
     [BASH_LS]),
    ("hermes", ('<think>maybe <tool_call>{"name": "submit"}</tool_call>?</think>'
               '<tool_call>{"name": "bash", "arguments": {"command": "ls -la"}}</tool_call>'), [BASH_LS]),
    ("hermes", ('<tool_call>{"name": "bash", "arguments": {"command": "ls -la"}}</tool_call>'
               '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'), [BASH_LS, ToolCall("submit", {})]),
    ("hermes", "No tools needed: the answer is 4.", []),
    ("hermes", '<tool_call>{"name": "edit", "arguments": {"path": "ü.py", "old": "→", "new": "😀"}}</tool_call>',
     [ToolCall("edit", {"path": "ü.py", "old": "→", "new": "😀"})]),
    ("llama3", '{"name": "bash", "parameters": {"command": "ls -la"}}', [BASH_LS]),
    ("llama3", '<|python_tag|>{"name": "bash", "parameters": {"command": "ls -la"}}<|eom_id|>', [BASH_LS]),
    ("llama3", "The files are listed above.", []),
    ("mistral", '[TOOL_CALLS][{"name": "bash", "arguments": {"command": "ls -la"}}]', [BASH_LS]),
    ("mistral", '[TOOL_CALLS]bash[ARGS]{"command": "ls -la"}', [BASH_LS]),
    ("mistral", '[TOOL_CALLS]bash[ARGS]{"command": "ls -la"}[TOOL_CALLS]submit[ARGS]{}',
     [BASH_LS, ToolCall("submit", {})]),
    ("mistral", ('[TOOL_CALLS][{"name": "bash", "arguments": {"command": "ls -la"}}]</s>[TOOL_CALLS][{"name": '
                 '"submit", "arguments": {}}]'), [BASH_LS, ToolCall("submit", {})]),  # every marker's calls
    ("mistral", "Done.", []),
])
def test_each_syntax_reads_its_calls(syntax, reply, calls):
    parsed = parse_tool_calls(reply, syntax)
    assert parsed.calls == calls and parsed.error is None


@pytest.mark.parametrize(("syntax", "reply", "reason"), [
    ("hermes", '<tool_call>{"name": "bash", "arguments": {"command": "ls', "cut off: <tool_call> without"),
    ("hermes", '<tool_call>{"name": "bash", "arguments": {"command": "ls"</tool_call>', "cut off"),
    ("hermes", '<tool_call>{"name": "bash", "arguments": {"command": ls}}</tool_call>', "not valid JSON"),
    ("hermes", "<tool_call>[1, 2]</tool_call>", "got list"),
    ("hermes", '<tool_call>{"name": "../../etc/passwd"}</tool_call>', "must be a tool's name"),
    ("hermes", '<tool_call>{"arguments": {}}</tool_call>', "must be a tool's name"),
    ("llama3", '{"name": "bash", "parameters": {"command": ', "cut off"),
    ("llama3", '{"name": "bash", "parameters": "rm"}', "a string that is not a JSON object"),
    ("mistral", '[TOOL_CALLS][{"name": "bash", "arguments": {"command": "ls"}', "cut off"),
    ("mistral", '[TOOL_CALLS]bash[ARGS]{"command": ', "are not valid JSON"),
])
def test_a_broken_call_is_a_reason_not_an_exception(syntax, reply, reason):
    parsed = parse_tool_calls(reply, syntax)
    assert parsed.calls == [] and reason in parsed.error


@pytest.mark.parametrize("syntax", ["hermes", "llama3", "mistral"])
@pytest.mark.parametrize("reply", ["", "\x00\xff\ufffd" * 1000, "<tool_call>" * 10_000, "{" * 200_000,
                                   "[TOOL_CALLS]" + "[" * 100_000, "<tool_call>" + "x" * (MAX_CALL_CHARS + 10)])
def test_hostile_output_never_raises(syntax, reply):
    parsed = parse_tool_calls(reply, syntax)
    assert isinstance(parsed.calls, list) and (parsed.error is None or isinstance(parsed.error, str))


# Issue 40: a number over Python's int digit limit (4,300) raised ValueError out of the decoders, and nesting
# deeper than the interpreter's stack is a RecursionError: both are a reason, never an exception.
HUGE = "9" * 5000
NESTED = "[" * 5000 + "]" * 5000  # deeper than the interpreter's stack, within the length cap


@pytest.mark.parametrize(("syntax", "reply"), [
    ("hermes", f'<tool_call>{{"name": "bash", "arguments": {{"command": {HUGE}}}}}</tool_call>'),
    ("hermes", f'<tool_call>{{"name": "bash", "arguments": "{{\\"command\\": {HUGE}}}"}}</tool_call>'),
    ("hermes", f'<tool_call>{{"name": "bash", "arguments": {{"command": {NESTED}}}}}</tool_call>'),
    ("llama3", f'{{"name": "bash", "parameters": {{"command": {HUGE}}}}}'),
    ("llama3", f'{{"name": "bash", "parameters": {{"command": {NESTED}}}}}'),
    ("mistral", f'[TOOL_CALLS][{{"name": "bash", "arguments": {{"command": {HUGE}}}}}]'),
    ("mistral", f'[TOOL_CALLS]bash[ARGS]{{"command": {HUGE}}}'),
    ("mistral", f'[TOOL_CALLS]bash[ARGS]{{"command": {NESTED}}}'),
])
def test_a_huge_number_or_deep_nesting_is_a_reason_not_an_exception(syntax, reply):
    parsed = parse_tool_calls(reply, syntax)
    assert parsed.calls == [] and ("not valid JSON" in parsed.error or "not a JSON object" in parsed.error)
    assert len(parsed.error) < 300


@pytest.mark.parametrize("action", [
    f'{{"name": "command", "arguments": {{"command": {HUGE}}}}}',
    f'{{"name": {HUGE}, "arguments": {{}}}}',
    f'{{"name": "command", "arguments": "{{\\"command\\": {HUGE}}}"}}',
    f'{{"name": "command", "arguments": {{"command": {NESTED}}}}}',
])
def test_a_huge_number_or_deep_nesting_in_a_call_is_an_invalid_action(action):
    env = signals(max_action_chars=MAX_CALL_CHARS)
    env.reset(seed=0)
    observation, _, terminated, truncated, info = env.step(action)
    assert info["invalid_action"] and not terminated and not truncated
    assert "not valid JSON" in info["invalid_reason"] or "not a JSON object" in info["invalid_reason"]
    assert "Call one tool (command)" in observation
    with pytest.raises(ToolCallError, match="not valid JSON|not a JSON object"):
        ToolCall.from_action(action)


def test_an_unknown_syntax_is_a_configuration_error():
    with pytest.raises(ValueError, match="hermes, llama3, mistral"):
        parse_tool_calls("x", "chatml")


# ---------------------------------------------------------------------- the world's tools protocol
def signals(**kwargs):
    import gymnasium as gym

    import turngym.envs  # noqa: F401 - registers the built-in worlds

    return gym.make("turngym/Signals-v0", action_protocol="tools", **kwargs).unwrapped


def test_a_world_offers_one_command_tool_by_default_and_runs_a_valid_call():
    env = signals()
    _, info = env.reset(seed=0)
    assert info["action_protocol"] == "tools" and [t["function"]["name"] for t in info["tools"]] == ["command"]
    call = ToolCall.from_action(info["walkthrough"][0])  # the walkthrough comes as this world's calls
    command = call.arguments["command"]
    assert call.name == "command" and command in ("stop", "go", "wait", "turn")
    _, _, _, _, step = env.step(call.to_action())
    assert not step["invalid_action"] and step["executed_command"] == command


@pytest.mark.parametrize(("action", "reason"), [
    ("go", "not valid JSON"),
    ('{"name": "bash", "arguments": {"command": "ls"}}', "unknown tool 'bash'; the tools are command"),
    ('{"name": "command", "arguments": {}}', "'command' is a required property"),
    ('{"name": "command", "arguments": {"command": ["a"]}}', "is not of type 'string'"),
    ('{"name": "command", "arguments": {"command": "  "}}', "names an empty command"),
    ('{"name": "command", "arguments": {"command": "a\\nb"}}', "line breaks, control characters"),
])
def test_a_bad_call_is_an_invalid_action_with_its_reason(action, reason):
    env = signals()
    env.reset(seed=0)
    before = env._state.progress
    observation, _, terminated, _, info = env.step(action)
    assert info["invalid_action"] and reason in info["invalid_reason"] and not terminated
    assert "Call one tool (command) with its arguments as a JSON object." in observation
    assert env._state.progress == before


def test_the_tools_protocol_passes_the_world_checker_and_the_oracle_wins_through_it():
    from turngym.agents import OracleAgent, RandomAgent
    from turngym.agents.evaluate import evaluate
    from turngym.envs import check_text_env
    from turngym.envs.signals import signal_tasks

    assert "the walkthrough wins" in check_text_env(signals())  # it raises on a broken promise
    tasks = signal_tasks("eval", n=4)
    oracle = evaluate(OracleAgent(seed=0), "turngym/Signals-v0", tasks, env_kwargs={"action_protocol": "tools"})
    random = evaluate(RandomAgent(seed=0), "turngym/Signals-v0", tasks, env_kwargs={"action_protocol": "tools"})
    assert oracle.overall.success_rate == 1.0 and oracle.overall.invalid_action_rate == 0.0
    assert random.overall.invalid_action_rate < 1.0


def test_a_tools_run_has_no_response_prefix_and_refuses_one():
    from turngym.trainers.config import TurnGymConfig

    config = TurnGymConfig(output_dir="/tmp/unused", env_id="turngym/Signals-v0", action_protocol="tools")
    assert config.agent_config().response_prefix == ""
    with pytest.raises(ValueError, match="response prefix"):
        TurnGymConfig(output_dir="/tmp/unused", env_id="turngym/Signals-v0", action_protocol="tools",
                      response_prefix="Action:").agent_config()


# ---------------------------------------------------------------------- the LLM agent speaks the template's tools
@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize("arguments", [{"command": "go east"}, {"command": "é ü 中文 \\ \"q\""}, {}])
def test_a_formatted_call_parses_back_as_itself(syntax, arguments):
    call = ToolCall("command", arguments)
    assert parse_tool_calls(format_tool_call(call, syntax), syntax).calls == [call]


@pytest.fixture(scope="module", params=SYNTAXES)
def tool_tokenizer(request, tmp_path_factory):
    """A tiny tokenizer whose chat template takes tools= and teaches one call syntax (tests/helpers_llm.py)."""
    from tests.helpers_llm import TOOL_TEMPLATES, train_tokenizer

    template, specials, eos, bos = TOOL_TEMPLATES[request.param]
    directory = tmp_path_factory.mktemp(request.param)
    return request.param, train_tokenizer(directory, template, special_tokens=specials, eos_token=eos, bos_token=bos)


def whole_history_ids(tokenizer, trajectory, tools):
    """The template's own rendering of a tool-call episode, tokenised: every turn a call of ``command`` with the
    action's arguments, every later observation the tool's answer."""
    from turngym.agents.chat import ChatFormat, tool_call_message
    from turngym.agents.llm import LLMAgentConfig

    config = LLMAgentConfig()
    chat = ChatFormat(tokenizer, system_prompt=config.system_message(config.parser(), tools=True), tools=tools)
    messages = chat.messages(trajectory.observations[0])
    for turn, action in enumerate(trajectory.tokens.actions, start=1):
        call = ToolCall.from_action(action)
        messages.append(tool_call_message(call.name, dict(call.arguments), f"call{turn:05d}"))
        if turn < len(trajectory.observations):
            messages.append({"role": "tool", "tool_call_id": f"call{turn:05d}", "name": call.name,
                             "content": trajectory.observations[turn]})
    return chat.encode(chat._render(messages, add_generation_prompt=False))


def test_the_llm_agent_renders_the_tools_and_the_oracle_wins_by_native_calls(tool_tokenizer):
    """The LLM agent's whole path (the template's tools=, the model's call syntax, tool-role answers, the token
    record), replayed with the oracle's calls: every game won, and the record is token for token what the
    template renders for the same conversation."""
    from turngym.agents.evaluate import evaluate
    from turngym.agents.llm import LLMAgentConfig
    from turngym.envs.signals import signal_tasks
    from turngym.trainers.sft import OracleThroughLLM

    syntax, tokenizer = tool_tokenizer
    agent = OracleThroughLLM(tokenizer, LLMAgentConfig(max_new_tokens=200))
    report = evaluate(agent, "turngym/Signals-v0", signal_tasks("eval", n=3), env_kwargs={"action_protocol": "tools"},
                      progress=False)
    assert report.overall.success_rate == 1.0 and report.overall.invalid_action_rate == 0.0
    assert agent.llm.tool_syntax == syntax and not agent.unfaithful
    tools = signals().tools()
    for trajectory in report.trajectories:
        record = trajectory.tokens
        assert all(ToolCall.from_action(a).name == "command" for a in record.actions)
        ids = record.prompt_ids + record.completion_ids
        assert whole_history_ids(tokenizer, trajectory, tools)[: len(ids)] == ids
        sampled = [t for t, m in zip(record.completion_ids, record.env_mask, strict=True) if m]
        assert parse_tool_calls(tokenizer.decode(sampled), syntax).calls  # the calls are what was sampled


def test_a_template_that_ignores_tools_gets_them_in_the_system_message(tokenizer):
    """SmolLM2's template renders no tools=: the agent describes them in the system message, in Hermes' syntax
    (or ``tool_syntax``'s), and reads that syntax back."""
    from turngym.agents.evaluate import evaluate
    from turngym.agents.llm import LLMAgentConfig
    from turngym.envs.signals import signal_tasks
    from turngym.trainers.sft import OracleThroughLLM

    for syntax in (None, "llama3"):
        agent = OracleThroughLLM(tokenizer, LLMAgentConfig(max_new_tokens=200, tool_syntax=syntax))
        report = evaluate(agent, "turngym/Signals-v0", signal_tasks("eval", n=2),
                          env_kwargs={"action_protocol": "tools"}, progress=False)
        assert report.overall.success_rate == 1.0 and report.overall.invalid_action_rate == 0.0
        assert agent.llm.tool_syntax == (syntax or "hermes")
        prompt = tokenizer.decode(report.trajectories[0].tokens.prompt_ids)
        assert "<tools>" in prompt and '"name": "command"' in prompt
        assert ("<tool_call>" in prompt) is (syntax is None)
        assert ('"parameters": {"<argument>"' in prompt) is (syntax == "llama3")  # the example call's syntax


def test_bad_replies_under_tools_are_invalid_actions_and_only_a_call_gets_a_tool_answer(tool_tokenizer):
    from turngym.agents.backends import ScriptedBackend
    from turngym.agents.llm import LLMAgent, LLMAgentConfig
    from turngym.agents.rollout import run_episodes
    from turngym.envs.signals import signal_tasks
    from turngym.envs.vector import make_pool

    syntax, tokenizer = tool_tokenizer
    good = format_tool_call(ToolCall("command", {"command": "wait"}), syntax)
    replies = ["", "I think I should wait.", good[: len(good) // 2], "\x00\xff\ufffd" * 50, good + good,
               format_tool_call(ToolCall("command", {"command": ["a"]}), syntax), good]
    requests = []

    def reply(request):
        requests.append(request)
        return replies[min(len(requests), len(replies)) - 1]

    backend = ScriptedBackend(reply, lambda text: tokenizer.encode(text, add_special_tokens=False))
    agent = LLMAgent(backend, tokenizer, LLMAgentConfig(max_new_tokens=400))
    pool = make_pool("turngym/Signals-v0", 1, env_kwargs={"action_protocol": "tools", "max_turns": len(replies)})
    try:
        (played,) = run_episodes(agent, pool, list(signal_tasks("train", n=1, turns=20)))
    finally:
        pool.close()
    invalid = played.invalid_actions
    assert invalid[:4] == [True] * 4 and invalid[-1] is False  # no call, a cut call, binary: invalid, no crash
    if syntax != "llama3":  # Llama's whole reply is one call: two in a row are not JSON it can read
        assert invalid[4] is True  # two calls at once: the world takes one call a turn
    assert invalid[5] is True  # a call whose arguments break the schema
    chat = agent._tool_chats[next(iter(agent._tool_chats))]
    text = tokenizer.decode(played.tokens.completion_ids)
    tool_answer = chat.tool_delta_text("@@", "command", "call00005").split("@@")[0]
    user_answer = chat.env_delta_text("@@").split("@@")[0]
    # after the replies with no call the world answered in a user turn; after a single call, in a tool turn
    assert text.count(user_answer) >= 4 and tool_answer in text


@pytest.mark.usefixtures("one_torch_thread")
def test_an_rl_step_trains_on_tool_call_episodes(tool_tokenizer, tmp_path):
    """turngym train under the tools protocol: the episodes are calls in the model's syntax answered by tool
    messages; groups get advantages; the step moves the weights; only the sampled call tokens are trained on."""
    import torch

    from tests.helpers_llm import scripted_signals_backend, tiny_llama
    from turngym.envs.signals import signal_tasks
    from turngym.trainers.config import TurnGymConfig
    from turngym.trainers.trainer import TurnGymTrainer

    syntax, tokenizer = tool_tokenizer
    args = TurnGymConfig(output_dir=str(tmp_path), env_id="turngym/Signals-v0", env_kwargs={"turns": 3, "colours": 2},
                         action_protocol="tools", reward_mode="dense", max_new_tokens_per_turn=64,
                         algorithm="turn_rloo", num_generations=4, per_device_train_batch_size=8, max_steps=1,
                         learning_rate=1e-2, logging_steps=1, report_to="none", save_strategy="no",
                         max_completion_length=1024, tis_cap=None, seed=0, disable_tqdm=True)
    model = tiny_llama(len(tokenizer)).train()
    before = [p.detach().clone() for p in model.parameters()]
    trainer = TurnGymTrainer(model, args, tasks=signal_tasks("train", 8, turns=3, colours=2),
                             processing_class=tokenizer, backend=scripted_signals_backend(tokenizer, syntax))
    batch = next(iter(trainer.get_train_dataloader()))
    output = trainer._generate_and_score_completions(batch)
    episodes = [row["episode"] for row in batch]
    assert any(e.turn_rewards != episodes[0].turn_rewards for e in episodes)
    assert output["advantages"].abs().sum() > 0
    for row, episode in enumerate(episodes):
        sampled = [t for t, m in zip(episode.completion_ids, episode.env_mask, strict=True) if m]
        assert parse_tool_calls(tokenizer.decode(sampled), syntax).calls  # the trained tokens are the calls
    trainer.train()
    log = trainer.state.log_history[0]
    assert log["episode/invalid_action_rate"] == 0.0
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_check_template_covers_tool_turns(tool_tokenizer):
    from turngym.agents.chat import check_chat_template

    syntax, tokenizer = tool_tokenizer
    report = check_chat_template(tokenizer, tools=True)
    assert report.append_only and report.token_exact  # tool answers do not move Mistral's tools block
    if syntax == "mistral":  # a user turn does: the tools and system prompt go before the last user message
        assert not check_chat_template(tokenizer).append_only
    with pytest.raises(ValueError, match="tool-call syntax"):
        from tests.helpers_llm import train_tokenizer

        check_chat_template(train_tokenizer(Path(tempfile.mkdtemp())), tools=True)


# ---------------------------------------------------------------------- a served model's tool_calls
def test_the_openai_agent_sends_the_worlds_tools_and_acts_by_its_calls():
    """Over real HTTP: the request carries the world's tools; a tool call is the action, its answer goes back as a
    tool message; bad arguments and two calls at once are invalid actions with their reasons."""
    import json
    import threading
    from http.server import ThreadingHTTPServer

    from tests.helpers_http import JSONHandler
    from turngym.agents.openai_agent import ChatAPIAgent
    from turngym.agents.rollout import run_episodes
    from turngym.envs.signals import signal_tasks
    from turngym.envs.vector import make_pool

    def call(number, arguments):
        return {"id": f"call_{number}", "type": "function",
                "function": {"name": "command", "arguments": json.dumps(arguments)}}

    turns = [[call(0, {"command": "wait"})], [call(1, {"cmd": "wait"})], [call(2, {"command": "a"}),
                                                                          call(3, {"command": "b"})]]
    requests = []

    class ToolServer(JSONHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            requests.append(body)
            self.answer(200, {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                              "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                                  "role": "assistant", "content": None, "tool_calls": turns[len(requests) - 1]}}]})

    server = ThreadingHTTPServer(("127.0.0.1", 0), ToolServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    pool = make_pool("turngym/Signals-v0", 1, env_kwargs={"action_protocol": "tools", "max_turns": 3})
    try:
        agent = ChatAPIAgent("served", base_url=f"http://127.0.0.1:{server.server_port}/v1", api_key="x")
        (played,) = run_episodes(agent, pool, list(signal_tasks("train", n=1, turns=5)))
    finally:
        pool.close()
        server.shutdown()
    assert [t["function"]["name"] for t in requests[0]["tools"]] == ["command"]
    assert [m["role"] for m in played.record.messages] == ["system", "user", "assistant", "tool", "assistant",
                                                           "tool", "assistant"]
    assert played.record.messages[3]["tool_call_id"] == "call_0"
    assert played.record.messages[5]["tool_call_id"] == "call_1"
    assert played.invalid_actions[1:] == [True, True]
    reasons = [m["content"] for m in requests[2]["messages"] if m["role"] == "tool"]
    assert "'command' is a required property" in reasons[-1]
