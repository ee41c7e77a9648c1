"""The command line: users' worlds (--import, --env module:Class), per-world defaults, and one-line
errors for bad input, raised before any work starts."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from http.server import HTTPServer

import gymnasium
import pytest

from tests.conftest import README_MODULE
from tests.helpers_http import JSONHandler
from turngym.recipes.cli import build_parser, main

pytestmark = pytest.mark.usefixtures("one_torch_thread")

EVAL_IDS = {f"guess/{n}" for n in range(4, 21, 4)}  # the README world's held-out tasks


def error_of(capsys, argv: list[str]) -> str:
    """Run the CLI on bad input: exit status 2, nothing on stdout, one line on stderr."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip() and not ("Warning" in line or "warnings.warn" in line)]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"turngym {argv[0]}: error: "), lines[0]
    assert "|" not in out  # no result table: the run never started
    return lines[0]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# ---------------------------------------------------------------------- the README world on the command line
def test_readme_world_evaluates_in_process_with_import(readme_world, capsys):
    # --workers 0: a forkserver started by an earlier test would not see this test's sys.path (see below)
    code = main(["eval", "--import", README_MODULE, "--env", "myorg/GuessNumber-v0", "--agent", "oracle",
                 "--agent", "random", "--episodes", "5", "--workers", "0", "--out", str(readme_world / "out")])
    assert code == 0
    table = capsys.readouterr().out
    assert "| oracle | free_form | guess-number:eval | 5 | 100.0 %" in table
    assert "| random |" in table
    rows = [json.loads(line) for line in (readme_world / "out" / "oracle.jsonl").read_text().splitlines()]
    assert {row["task"]["id"] for row in rows} == EVAL_IDS  # the held-out split, by default
    assert all(row["won"] and not any(row["invalid_actions"]) for row in rows)


def test_readme_world_evaluates_from_a_shell_with_pythonpath(readme_world):
    """As a user types it: PYTHONPATH names the folder, env workers (2 processes) import the module too."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(readme_world), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "turngym.recipes.cli", "eval", "--import", README_MODULE, "--env",
         "myorg/GuessNumber-v0", "--agent", "oracle", "--agent", "random", "--episodes", "5"],
        capture_output=True, text=True, timeout=300, env=env, cwd=readme_world, check=False)
    assert done.returncode == 0, done.stderr
    assert "| oracle | free_form | guess-number:eval | 5 | 100.0 %" in done.stdout
    assert "| random | free_form | guess-number:eval | 5 |" in done.stdout


def test_env_module_class_registers_the_class_under_a_generated_id(readme_world, capsys):
    code = main(["eval", "--env", f"{README_MODULE}:GuessNumber", "--agent", "oracle", "--episodes", "2",
                 "--workers", "0", "--protocol", "choose_index"])
    assert code == 0
    assert "| oracle | choose_index | guess-number:eval[:2] | 2 | 100.0 %" in capsys.readouterr().out
    assert main(["envs", "--import", README_MODULE]) == 0
    listed = capsys.readouterr().out.split()
    assert f"{README_MODULE}/GuessNumber-v0" in listed and "myorg/GuessNumber-v0" in listed


def test_env_with_a_dotted_module_registers_under_a_valid_id(capsys):
    """A package's world (``pkg.module:Class``): gymnasium's namespaces take no dots, so they become dashes."""
    code = main(["eval", "--env", "turngym.envs.signals:SignalsEnv", "--split", "train", "--agent", "oracle",
                 "--episodes", "2", "--workers", "0"])
    assert code == 0, capsys.readouterr().err
    assert "| oracle |" in capsys.readouterr().out
    assert "turngym-envs-signals/SignalsEnv-v0" in gymnasium.registry


def test_readme_world_trains_with_import(readme_world, tiny_policy, capsys):
    out = readme_world / "run"
    code = main(["train", "--import", README_MODULE, "--env_id", "myorg/GuessNumber-v0",
                 "--model_name_or_path", str(tiny_policy), "--output_dir", str(out), "--max_steps", "1",
                 "--num_generations", "2", "--per_device_train_batch_size", "4", "--num_train_tasks", "2",
                 "--max_turns", "2", "--max_new_tokens_per_turn", "2", "--max_completion_length", "64",
                 "--action_format", "last_line", "--report_to", "none", "--save_strategy", "no",
                 "--disable_tqdm", "true", "--threads", "1"])
    assert code == 0
    assert (out / "model.safetensors").is_file() and (out / "tokenizer_config.json").is_file()
    assert "policy saved to" in capsys.readouterr().out


def test_a_yaml_config_carries_the_imports(readme_world, tiny_policy):
    from turngym.trainers.config import TurnGymConfig

    config = readme_world / "guess.yaml"
    config.write_text(f"imports: [{README_MODULE}]\nenv_id: myorg/GuessNumber-v0\nnum_train_tasks: 2\n"
                      f"model_name_or_path: {tiny_policy}\noutput_dir: {readme_world / 'run'}\nreport_to: none\n")
    from turngym.recipes.commands.training import _parse_trl_config

    parsed = _parse_trl_config(TurnGymConfig, ["--config", str(config)], "turngym train").resolve()
    assert parsed.imports == [README_MODULE] and parsed.env_id == "myorg/GuessNumber-v0"
    assert sys.modules[README_MODULE].GuessNumber  # imported by the config itself (its resolve(), as train does)
    direct = TurnGymConfig(output_dir=str(readme_world / "run"), env_id=f"{README_MODULE}:GuessNumber",
                           report_to="none").resolve()
    assert direct.env_id == f"{README_MODULE}/GuessNumber-v0"


def test_play_honours_split_for_every_world(readme_world, capsys, monkeypatch):
    def no_input(prompt=""):
        raise EOFError

    monkeypatch.setattr("builtins.input", no_input)
    for seed in range(3):
        assert main(["play", "myorg/GuessNumber-v0", "--import", README_MODULE, "--split", "eval",
                     "--seed", str(seed)]) == 0
        task_id = capsys.readouterr().out.split("]")[0].lstrip("[")
        assert task_id in EVAL_IDS
    assert main(["play", "turngym/Signals-v0", "--split", "eval", "--seed", "0"]) == 0
    assert capsys.readouterr().out.startswith("[signals/eval/")
    assert main(["play", "myorg/GuessNumber-v0", "--import", README_MODULE, "--split", "test"]) == 2
    assert "no split 'test'" in capsys.readouterr().err


# ---------------------------------------------------------------------- defaults per world and model
def test_llm_defaults_give_the_default_model_its_action_prefix():
    from turngym.recipes.commands.evaluate import agent_config

    parse = build_parser().parse_args
    config = agent_config(parse(["eval", "--agent", "llm"]))
    assert config.action_format == "prefix" and config.response_prefix == "Action:"
    assert config.parser().parse(config.response_prefix + " go north\nmore text") == "go north"
    assert agent_config(parse(["eval", "--action-format", "last_line"])).response_prefix == ""
    assert agent_config(parse(["eval", "--response-prefix", ""])).response_prefix == ""


def test_eval_system_prompt_matches_the_training_configs():
    from turngym.recipes.commands.evaluate import agent_config
    from turngym.trainers.config import WorldOptions

    parse = build_parser().parse_args
    for flag, value in (("", None), ("--system-prompt=", ""), ("--system-prompt=Play well.", "Play well.")):
        args = parse(["eval", "--response-prefix", "Action:", "--max-new-tokens", "24", *([flag] if flag else [])])
        world = WorldOptions(system_prompt=value, response_prefix="Action:", max_new_tokens_per_turn=24)
        assert agent_config(args).system_prompt == world.agent_config().system_prompt, flag


def test_config_is_a_textworld_option_only(capsys):
    args = build_parser().parse_args(["eval"])
    assert args.config is None and args.split is None  # the world's own defaults apply
    assert "takes no 'config'" in error_of(capsys, ["eval", "--env", "turngym/Signals-v0", "--config", "w2-o3-q4"])


def test_eval_threads_sets_torchs_threads(capsys):
    import torch

    assert main(["eval", "--env", "turngym/Signals-v0", "--agent", "oracle", "--episodes", "1", "--workers", "0",
                 "--threads", "2"]) == 0
    assert torch.get_num_threads() == 2
    torch.set_num_threads(1)
    capsys.readouterr()
    assert "must be at least 1" in error_of(capsys, ["eval", "--threads", "0"])


# ---------------------------------------------------------------------- one-line errors before any work
@pytest.mark.parametrize(("argv", "message"), [
    (["eval", "--episodes", "-5"], "argument --episodes: must be at least 1, got -5"),
    (["eval", "--episodes", "ten"], "expected a whole number, got 'ten'"),
    (["eval", "--workers", "-1"], "argument --workers: must be at least 0"),
    (["generate", "-n", "-2"], "argument -n: must be at least 1, got -2"),
    (["eval", "--env", "turngym/Signal-v0"], "did you mean 'turngym/Signals-v0'"),
    (["play", "turngym/TextWrld-v0"], "did you mean 'turngym/TextWorld-v0'"),
    (["eval", "--env", "turngym/Signals-v0", "--env-arg", "turn=3"], "no option 'turn' (did you mean 'turns'?)"),
    (["eval", "--env", "turngym/Signals-v0", "--env-arg", "turns"], "--env-arg expects KEY=VALUE"),
    (["eval", "--import", "no_such_module_here"], "no module named 'no_such_module_here'"),
    (["eval", "--env", "turngym.envs.signals:NoSuchWorld"], "has no attribute 'NoSuchWorld'"),
    (["eval", "--agent", "gpt"], "argument --agent: invalid choice: 'gpt'"),
])
def test_bad_eval_input_is_one_line(capsys, argv, message):
    assert message in error_of(capsys, argv)


def test_bad_out_is_found_before_the_run(capsys, tmp_path):
    a_file = tmp_path / "file.txt"
    a_file.write_text("")
    assert "is a file" in error_of(capsys, ["eval", "--env", "turngym/Signals-v0", "--out", str(a_file)])
    assert "not a writable folder" in error_of(capsys, ["eval", "--env", "turngym/Signals-v0",
                                                        "--out", str(a_file / "below")])


def test_openai_without_a_server_fails_before_the_run(capsys):
    url = f"http://127.0.0.1:{free_port()}/v1"
    message = error_of(capsys, ["eval", "--env", "turngym/Signals-v0", "--agent", "openai", "--base-url", url])
    assert f"no server answers at {url}" in message and "--base-url" in message


class _RefusingServer(JSONHandler):
    """Lists models, then rejects every chat request (400: not retried by the client)."""

    def do_GET(self):  # http.server's method names
        self.answer(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})

    def do_POST(self):
        self.answer(400, {"error": {"message": "no such model", "type": "invalid_request_error"}})


def test_openai_run_where_every_request_failed_exits_2(capsys):
    server = HTTPServer(("127.0.0.1", 0), _RefusingServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/v1"
        code = main(["eval", "--env", "turngym/Signals-v0", "--agent", "openai", "--base-url", url, "--model", "m",
                     "--episodes", "2", "--workers", "0"])
    finally:
        server.shutdown()
    assert code == 2
    assert "every episode of openai:m ended with an API error" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["train", "sft"])
def test_train_and_sft_without_arguments_explain_what_to_give(capsys, command):
    message = error_of(capsys, [command])
    assert f"turngym {command} --config recipes/configs/" in message
    assert "at least --env_id (the policy defaults to SmolLM2" in message


@pytest.mark.parametrize(("yaml_text", "message"), [
    (None, "not found"),
    ("env_id: turngym/Signals-v0\nalgorithm: [ppo\n", "is not valid YAML at line 3"),
    ("- a\n- b\n", "must be a YAML mapping"),
    ("env_id: turngym/Signals-v0\nlerning_rate: 0.1\n", "unknown field 'lerning_rate' (did you mean 'learning_rate'?)"),
    ("env_id: turngym/Signal-v0\n", "did you mean 'turngym/Signals-v0'"),
    ("env_id: turngym/Signals-v0\nenv_kwargs: {turn: 3}\n", "no option 'turn' (did you mean 'turns'?)"),
])
def test_broken_train_configs_are_one_line(capsys, tmp_path, yaml_text, message):
    path = tmp_path / "run.yaml"
    if yaml_text is not None:
        path.write_text(yaml_text)
    assert message in error_of(capsys, ["train", "--config", str(path), "--output_dir", str(tmp_path / "out")])


def test_bad_train_options_are_one_line(capsys, tmp_path):
    config = ["train", "--config", "recipes/configs/signals-ppo.yaml"]
    assert "(did you mean 'learning_rate'?)" in error_of(capsys, [*config, "--lerning_rate", "3"])
    a_file = tmp_path / "file.txt"
    a_file.write_text("")
    assert "--output_dir" in error_of(capsys, [*config, "--output_dir", str(a_file)])
    assert "--threads: must be at least 1" in error_of(capsys, [*config, "--threads", "0"])
    assert "--import needs a value" in error_of(capsys, ["sft", "--import"])


# ---------------------------------------------------------------------- help
@pytest.mark.parametrize(("command", "own", "base"), [
    ("train", ["--algorithm", "--gamma", "--env_id", "--imports", "--response_prefix"], "GRPOConfig"),
    ("sft", ["--num_demos", "--demo_source", "--env_id", "--env_kwargs"], "SFTConfig"),
])
def test_help_shows_turngyms_own_fields_first(capsys, command, own, base):
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert all(option in text for option in own)
    assert base in text and "--help-all" in text and "--learning_rate" in text
    assert "--lr_scheduler_type" not in text and len(text.splitlines()) < 320  # turngym's own fields, not TRL's
    with pytest.raises(SystemExit):
        main([command, "--help-all"])
    assert "--lr_scheduler_type" in capsys.readouterr().out


def test_import_takes_a_path_to_a_py_file(readme_world):
    from turngym.envs.registry import import_worlds

    file_module = readme_world / "sub" / "other_world.py"
    file_module.parent.mkdir()
    file_module.write_text("VALUE = 3\n")
    assert import_worlds([str(file_module)])[0].VALUE == 3
    assert [m.VALUE for m in import_worlds(str(file_module))] == [3]  # one name, not its characters


def test_eval_sft_and_rl_share_the_reply_format_defaults_per_world():
    """One rule everywhere: the world's own action format (SWE reads the whole reply), else 'prefix'
    with the 'Action:' response prefix; an explicit value always wins."""
    from turngym.agents.llm import reply_format
    from turngym.recipes.commands.evaluate import agent_config
    from turngym.trainers.config import TurnGymConfig

    parse = build_parser().parse_args
    assert reply_format("turngym/TextWorld-v0") == ("prefix", "Action:")
    assert reply_format("turngym/SWE-v0") == ("raw", "")
    assert reply_format("turngym/TextWorld-v0", "last_line") == ("last_line", "")
    assert reply_format("turngym/TextWorld-v0", None, "") == ("prefix", "")
    assert agent_config(parse(["eval", "--env", "turngym/SWE-v0"])).action_format == "raw"
    rl = TurnGymConfig(output_dir="unused", report_to="none", env_id="turngym/SWE-v0").resolve()
    assert (rl.action_format, rl.response_prefix) == ("raw", "")


@pytest.mark.parametrize(("flags", "name", "arms"), [
    ([], "demo", ["base", "sft-only", "ppo", "grpo", "turn_rloo", "turn_rloo-null"]),
    (["--quick"], "demo-quick", ["base", "sft-only", "turn_rloo", "turn_rloo-null"]),
])
def test_the_demo_runs_the_shipped_config_with_its_null_control(tmp_path, monkeypatch, flags, name, arms):
    from turngym.recipes import compare_algorithms

    ran = {}

    def fake_run(config, *, restart=False, progress=True):  # the study itself is the demo's (minutes): not here
        ran["config"] = config
        raise SystemExit(0)

    monkeypatch.setattr(compare_algorithms, "run", fake_run)
    with pytest.raises(SystemExit):
        main(["demo", *flags, "--results-dir", str(tmp_path)])
    config = ran["config"]
    assert config.name == name and config.results_dir == str(tmp_path)
    assert [a.label for a in compare_algorithms.arms_of(config)] == arms
    assert [a.null for a in compare_algorithms.arms_of(config)][-1] is True
    # The quick demo is the recipe whose null keeps the rule: half the step, twice the episodes a step.
    rl = (config.rl["learning_rate"], config.rl["per_device_train_batch_size"], config.episodes)
    assert rl == ((5e-6, 32, 256) if flags else (1e-5, 16, 128))


def test_compare_only_names_unknown_arms(capsys):
    message = error_of(capsys, ["compare", "--config", "recipes/configs/compare/textworld-demo.yaml",
                                "--only", "turn_rloo", "ppo2"])
    assert "--only: no algorithm entry ppo2" in message and "it has ppo, grpo" in message


def test_eval_plays_llm_episodes_side_by_side_in_process_by_default(monkeypatch, capsys):
    """An LLM decodes many episodes' turns for about the price of one: `turngym eval --agent llm` plays --batch of
    them in this process unless --workers is given; the baselines keep 2 worker processes."""
    from turngym.recipes.commands import evaluate as command

    seen = []

    def record(agent, env_id, tasks, **kwargs):
        seen.append((agent.name, kwargs["num_workers"], kwargs["batch"]))
        raise SystemExit(0)  # the call is all this test looks at

    monkeypatch.setattr("turngym.agents.evaluate", record)
    monkeypatch.setattr(command, "_make_agent", lambda name, args: type("A", (), {"name": name})())
    monkeypatch.setattr(command, "_task_set", lambda args, kwargs: [])
    for extra, expected in (([], ("llm", 0, 16)), (["--batch", "4"], ("llm", 0, 4)),
                            (["--workers", "3"], ("llm", 3, 16))):
        with pytest.raises(SystemExit):
            main(["eval", "--env", "turngym/Signals-v0", "--agent", "llm", *extra])
        assert seen.pop() == expected
    with pytest.raises(SystemExit):
        main(["eval", "--env", "turngym/Signals-v0", "--agent", "oracle"])
    assert seen.pop() == ("oracle", 2, 16)
