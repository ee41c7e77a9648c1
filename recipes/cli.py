"""The ``turngym`` command line.

    turngym envs                                   list registered worlds
    turngym generate --config w2-o3-q4 --split eval   pre-generate (and hash) games
    turngym eval --agent oracle --config w2-o3-q4 --split eval --episodes 100
    turngym eval --agent llm --model HuggingFaceTB/SmolLM2-135M-Instruct --episodes 20
    turngym eval --import my_world --env myorg/GuessNumber-v0 --agent oracle   your own world
    turngym eval --env turngym/Signals-v0 --agent random --samples-per-task 8 --pass-at 1 4   pass@k
    turngym view results/eval -o episodes.html     one static HTML page of the episodes in a results folder
    turngym play turngym/TextWorld-v0              play a world yourself
    turngym serve turngym/Signals-v0 --port 8000   serve a world over OpenEnv (docs/scaling.md)
    turngym eval --env turngym/Signals-v0 --env-server ws://host:8000 --agent oracle   play a served world
    turngym check-template --model NAME            is the chat template append-only?
    turngym sft --config recipes/configs/textworld-sft.yaml [--field value ...]   SFT warm start on expert demos
    turngym train --config recipes/configs/textworld-ppo.yaml [--field value ...]   RL on whole episodes
    turngym compare --config recipes/configs/compare/textworld-demo.yaml   algorithms at an equal budget
    turngym budget --config recipes/configs/budget/textworld.yaml           SFT demos vs RL episodes
    turngym demo                                   the embedded default job (SFT, then PPO / GRPO / turn-RLOO)

Bad input is reported in one line (``turngym <command>: error: ...``, exit status 2) before any
work starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
CONFIG_DIR = Path(__file__).resolve().parent / "configs"


class UsageError(Exception):
    """Bad command-line input; ``main`` prints it as one line and exits with status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``turngym eval: error: ...``) instead of usage and exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: error: {message}")


def _int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


POSITIVE, NON_NEGATIVE = _int_at_least(1), _int_at_least(0)


# ---------------------------------------------------------------------- worlds and their options
def _load_worlds(args: argparse.Namespace) -> None:
    """Import ``--import`` modules, register a ``--env module:Class`` world, and check the env id."""
    from turngym.envs.registry import import_worlds, require_registered, resolve_env

    import_worlds(getattr(args, "imports", None) or [])
    if getattr(args, "env", None):
        args.env = resolve_env(args.env)
        require_registered(args.env)


def _env_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The world's options from the command line, checked against its constructor."""
    kwargs: dict[str, Any] = {"reward_mode": args.reward_mode, "action_protocol": args.protocol}
    if args.max_turns:
        kwargs["max_turns"] = args.max_turns
    if args.config is not None:
        kwargs["config"] = args.config
    for item in args.env_arg or []:
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise ValueError(f"--env-arg expects KEY=VALUE (VALUE may be JSON), got {item!r}")
        try:
            kwargs[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key.strip()] = value
    _check_env_kwargs(args.env, kwargs, config_given=args.config is not None)
    return kwargs


def _check_env_kwargs(env_id: str, kwargs: dict[str, Any], *, config_given: bool) -> None:
    from turngym.envs.registry import check_world_options, world_options

    accepted = world_options(env_id)
    if config_given and accepted is not None and "config" not in accepted:
        raise ValueError(f"--config is TextWorld's game config; {env_id} takes no 'config' option "
                         "(give a world's own options with --env-arg KEY=VALUE)")
    check_world_options(env_id, kwargs)


def _split(args: argparse.Namespace, kwargs: dict[str, Any]) -> str:
    from turngym.envs.panels import eval_split

    return args.split or eval_split(args.env, kwargs)


def _task_set(args: argparse.Namespace, kwargs: dict[str, Any]):
    """The evaluation panel of a world: its first ``--episodes`` tasks of ``--split`` (the server's, with
    ``--env-server``)."""
    from turngym.envs.panels import task_panel

    if getattr(args, "env_server", None):
        from turngym.envs.openenv.client import served_panel

        return served_panel(args.env_server, _split(args, kwargs), args.episodes)
    return task_panel(args.env, _split(args, kwargs), args.episodes, kwargs, workers=args.workers or None)


def _check_out(out: str | None, option: str = "--out") -> None:
    """Create ``out`` and make sure a file can be written there, before the run rather than after it."""
    if out is None:
        return
    path = Path(out).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"{option} {out} is a file; give a folder (it is created when missing)")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path):
            pass
    except OSError as error:
        raise ValueError(f"{option} {out} is not a writable folder ({error.strerror or error}); "
                         "choose another one") from None


def _set_threads(threads: int | None) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)


# ---------------------------------------------------------------------- commands
def cmd_envs(args: argparse.Namespace) -> int:
    from turngym import envs

    _load_worlds(args)
    for env_id in envs.text_world_ids():
        print(env_id)
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    if args.world == "alfworld":
        from turngym.envs.alfworld import alfworld_tasks, materialise

        tasks = materialise(alfworld_tasks(args.split, n=args.n), workers=args.workers)
    else:
        from turngym.envs.textworld import materialise, textworld_tasks

        tasks = materialise(textworld_tasks(args.config, args.split, n=args.n), workers=args.workers)
    print(f"{len(tasks)} games ready for {tasks.name} (fingerprint {tasks.fingerprint})")
    if args.manifest:
        Path(args.manifest).write_text(tasks.to_jsonl())
        print(f"manifest written to {args.manifest}")
    return 0


def _agent_config(args: argparse.Namespace):
    """The LLM agent's prompt, parsing and sampling; the response prefix follows the action format."""
    from turngym.agents.llm import LLMAgentConfig, reply_format

    action_format, prefix = reply_format(args.env, args.action_format, args.response_prefix)
    fields: dict[str, Any] = {}
    if args.system_prompt is not None:  # as in training configs: "" means no system message
        fields["system_prompt"] = args.system_prompt or None
    return LLMAgentConfig(
        action_format=action_format, response_prefix=prefix, temperature=args.temperature, top_p=args.top_p,
        max_new_tokens=args.max_new_tokens, max_context_tokens=args.max_context, seed=args.seed, **fields,
    )


def _make_agent(name: str, args: argparse.Namespace):
    from turngym.agents import make_baseline

    if name not in ("llm", "openai"):
        return make_baseline(name, seed=args.seed)
    from turngym.agents.models import make_llm_agent

    backend = "openai" if name == "openai" else args.backend
    return make_llm_agent(args.model, backend=backend, device=args.device, config=_agent_config(args),
                          openai_base_url=args.base_url, vllm_server=args.vllm_server)


def _check_endpoint(base_url: str | None) -> None:
    """Fail now, not after a run of empty episodes, when no OpenAI-compatible server answers."""
    import openai

    url = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    client = openai.OpenAI(base_url=url, api_key=os.environ.get("OPENAI_API_KEY", "EMPTY"), timeout=10.0,
                           max_retries=0)
    try:
        client.models.list()
    except openai.APIConnectionError as error:
        raise ValueError(f"--agent openai: no server answers at {url} ({error}); start one (e.g. `vllm serve MODEL "
                         "--port 8000`) and pass --base-url http://localhost:8000/v1") from None
    except openai.AuthenticationError:
        raise ValueError(f"--agent openai: the server at {url} refused the API key; set OPENAI_API_KEY") from None
    except openai.APIStatusError:
        pass  # it answered: a server without a model list can still serve chat completions


def _require_answers(report, args: argparse.Namespace) -> None:
    episodes = report.trajectories
    if episodes and all(t.truncation_reason == "api_error" for t in episodes):
        raise ValueError(f"every episode of {report.agent} ended with an API error: the server at "
                         f"{args.base_url or os.environ.get('OPENAI_BASE_URL')} answered no request; check --model "
                         "(the served model's name) and the server's log")


def cmd_eval(args: argparse.Namespace) -> int:
    from turngym.agents import evaluate, markdown_table

    _load_worlds(args)
    kwargs = _env_kwargs(args)
    _check_out(args.out)
    pool_options = _pool_options(args)
    _check_samples(args)
    if "openai" in args.agent:
        _check_endpoint(args.base_url)
    _set_threads(args.threads)
    agents = [_make_agent(name, args) for name in args.agent]  # a missing model fails before games are made
    tasks = _task_set(args, kwargs)
    reports = []
    for agent in agents:
        out = Path(args.out) / f"{_file_name(agent.name)}.jsonl" if args.out else None
        report = evaluate(agent, args.env, tasks, env_kwargs=kwargs, num_workers=args.workers, seed=args.seed,
                          trajectories_path=out, samples_per_task=args.samples_per_task, pass_at=args.pass_at,
                          pool_options=pool_options)
        _require_answers(report, args)
        reports.append(report)
        if args.out:
            (Path(args.out) / f"{_file_name(agent.name)}.json").write_text(json.dumps(report.to_dict(), indent=1))
    print(markdown_table(reports))
    _hint_invalid_actions(reports)
    if args.out:
        print(f"\ntrajectories and reports written under {args.out}/")
    return 0


def _pool_options(args: argparse.Namespace) -> dict[str, Any]:
    """Where the worlds play: ``--env-server`` (remote sessions) or ``--env-backend``."""
    if args.env_server:
        if args.env_backend not in (None, "remote"):
            raise ValueError(f"--env-server plays on that server; it does not go with --env-backend {args.env_backend}")
        return {"backend": "remote", "server": args.env_server}
    if args.env_backend == "remote":
        raise ValueError("--env-backend remote needs --env-server URL (start one with `turngym serve ENV_ID`)")
    return {"backend": args.env_backend} if args.env_backend else {}


def _check_samples(args: argparse.Namespace) -> None:
    """pass@k needs k <= samples per task, and samples that can differ (an LLM sampling at a temperature)."""
    from turngym.agents.evaluate import check_pass_at

    samples = args.samples_per_task
    check_pass_at(samples, args.pass_at or [])  # before the panel is built: that may take minutes
    if samples > 1 and args.temperature == 0 and {"llm", "openai"} & set(args.agent):
        raise ValueError(f"--samples-per-task {samples} with --temperature 0 (greedy) plays the same episode "
                         f"{samples} times per task; give a temperature for pass@k, e.g. --temperature 0.7")


def _hint_invalid_actions(reports: list) -> None:
    """A model that writes almost no valid command was most likely never shown the world's commands."""
    for report in reports:
        if report.agent not in ("oracle", "random") and report.overall.invalid_action_rate >= 0.9:
            rate = report.overall.invalid_action_rate
            print(f"\nnote: {report.agent} wrote an invalid action on {rate:.0%} of turns ({report.action_protocol}). "
                  "An untuned model rarely guesses a world's commands: try --protocol "
                  "choose_index or admissible_in_prompt, or an SFT warm start (turngym sft); the trajectories "
                  "(--out) show its replies.")


def _file_name(agent_name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in agent_name)


def _play_tasks(args: argparse.Namespace, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``--split`` for any world: as the world's own ``split`` option, or as the split's tasks."""
    from turngym.envs.panels import task_panel
    from turngym.envs.registry import world_options

    split = _split(args, kwargs)
    if "split" in (world_options(args.env) or ()):
        return {"split": split}
    return {"tasks": task_panel(args.env, split, None, kwargs, progress=False)}


def cmd_play(args: argparse.Namespace) -> int:
    import gymnasium as gym

    _load_worlds(args)
    kwargs = _env_kwargs(args)
    env = gym.make(args.env, **kwargs, **_play_tasks(args, kwargs))
    observation, info = env.reset(seed=args.seed)
    print(f"[{info['task']['id']}] up to {info['max_turns']} turns. Type a command; Ctrl-D quits.\n")
    print(observation)
    while True:
        try:
            action = input("> ")
        except EOFError:
            print()
            break
        observation, reward, terminated, truncated, info = env.step(action)
        print(observation + (f"\n[reward {reward:+.2f}]" if reward else ""))
        if terminated or truncated:
            outcome = "won" if info["won"] else ("lost" if info["lost"] else f"truncated ({info['truncation_reason']})")
            print(f"\nEpisode over after {info['turn']} turns: {outcome}, return {info['episode_reward']:.2f}.")
            break
    env.close()
    return 0


def cmd_check_template(args: argparse.Namespace) -> int:
    from transformers import AutoTokenizer

    from turngym.agents.chat import check_chat_template
    from turngym.agents.models import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(args.model))
    report = check_chat_template(tokenizer)
    print(f"{args.model}\n{report.summary()}")
    return 0


# ---------------------------------------------------------------------- train and sft: TRL configs
@dataclass
class _TrlArgs:
    """The arguments of ``turngym train``/``sft`` that are turngym's, and the rest (for TrlParser)."""

    rest: list[str] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)
    threads: int | None = None
    help: str | None = None  # "short" or "all"


def _split_trl_args(argv: Sequence[str], prog: str) -> _TrlArgs:
    parsed, items = _TrlArgs(), iter(argv)
    for item in items:
        name, equals, value = item.partition("=")
        if name in ("--import", "--threads"):
            value = value if equals else next(items, "")
            if not value or value.startswith("--"):
                raise UsageError(f"{prog}: error: {name} needs a value")
            if name == "--import":
                parsed.imports.append(value)
            else:
                parsed.threads = _threads(value, prog)
        elif item in ("-h", "--help", "--help-all"):
            parsed.help = "all" if item == "--help-all" else "short"
        else:
            parsed.rest.append(item)
    return parsed


def _threads(value: str, prog: str) -> int:
    try:
        return POSITIVE(value)
    except argparse.ArgumentTypeError as error:
        raise UsageError(f"{prog}: error: argument --threads: {error}") from None


def _option_value(argv: Sequence[str], name: str) -> str | None:
    """The value of ``--name value`` or ``--name=value`` in ``argv`` (the last one), or None."""
    found = None
    for index, item in enumerate(argv):
        if item == f"--{name}" and index + 1 < len(argv):
            found = argv[index + 1]
        elif item.startswith(f"--{name}="):
            found = item.split("=", 1)[1]
    return found


def _require_something_to_run(argv: Sequence[str], prog: str, example: str) -> None:
    if _option_value(argv, "config") or (_option_value(argv, "model_name_or_path") and _option_value(argv, "env_id")):
        return
    raise UsageError(
        f"{prog}: error: give a config file, e.g. `{prog} --config {example}` (more in recipes/configs/), "
        "or at least --model_name_or_path and --env_id; `" + prog + " --help` lists the fields")


def _check_yaml(path: str, config_class: type) -> None:
    """The YAML file exists, parses, is a mapping, and names only fields of ``config_class``."""
    import yaml

    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"config file {path} not found (the shipped ones are in {CONFIG_DIR})")
    try:
        data = yaml.safe_load(file.read_text())
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        problem = getattr(error, "problem", None) or error
        raise ValueError(f"config file {path} is not valid YAML{line}: {problem}") from None
    if not isinstance(data, dict):
        kind = type(data).__name__  # a content error (ValueError), not a caller's wrong type
        raise ValueError(f"config file {path} must be a YAML mapping of field: value, got {kind}")  # noqa: TRY004
    known = {f.name for f in dataclasses.fields(config_class)} | {"env"}  # env: variables TrlParser sets
    for key in data:
        if key not in known:
            raise ValueError(f"config file {path}: unknown field {key!r}{_did_you_mean(str(key), known)}")


def _did_you_mean(name: str, known: set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _parse_trl_config(config_class: type, argv: list[str], prog: str):
    """``config_class`` from ``--config FILE.yaml`` and ``--field value`` overrides, with one-line errors."""
    from trl import TrlParser

    class Parser(TrlParser):
        def error(self, message: str) -> None:  # type: ignore[override]
            raise UsageError(f"{prog}: error: {message}")

    if _option_value(argv, "config"):
        _check_yaml(_option_value(argv, "config"), config_class)
    config, unknown = Parser([config_class], prog=prog).parse_args_and_config(argv, return_remaining_strings=True)
    if unknown:
        known = {f.name for f in dataclasses.fields(config_class)}
        flags = [u for u in unknown if u.startswith("--")]
        hint = _did_you_mean(flags[0][2:].split("=")[0], known) if flags else ""
        raise UsageError(f"{prog}: error: unknown option(s) {' '.join(unknown)}{hint}; `{prog} --help` lists them")
    return config


def _own_help(config_class: type, prog: str, summary: str) -> str:
    """Help listing turngym's own fields of ``config_class``, then a line on TRL's."""
    trl_base = next(c for c in config_class.__mro__ if c.__module__.split(".")[0] in ("trl", "transformers"))
    parser = argparse.ArgumentParser(
        prog=prog, add_help=False, formatter_class=argparse.RawDescriptionHelpFormatter,
        usage=f"{prog} [--config FILE.yaml] [--import MODULE] [--threads N] [--field value ...]",
        description=summary,
        epilog=(f"Every field of TRL's {trl_base.__name__} (and transformers' TrainingArguments) is accepted too, "
                "e.g.\n"
                "--output_dir, --learning_rate, --max_steps, --per_device_train_batch_size, --seed, --bf16;\n"
                f"`{prog} --help-all` lists all of them. Options given after --config override the file."))
    turngym = parser.add_argument_group("turngym options")
    turngym.add_argument("--config", metavar="FILE.yaml", help=f"fields from YAML (examples in {CONFIG_DIR})")
    turngym.add_argument("--import", metavar="MODULE", help="import a module that registers worlds (repeatable)")
    turngym.add_argument("--threads", metavar="N", help="torch CPU threads")
    for cls, declared in _own_fields(config_class):
        group = parser.add_argument_group(f"{cls.__name__} fields")
        for spec in declared:
            group.add_argument(f"--{spec.name}", metavar=spec.name.upper(), help=_field_help(spec))
    return parser.format_help()


def _own_fields(config_class: type) -> list[tuple[type, list[dataclasses.Field]]]:
    """The fields each turngym class in ``config_class``'s MRO declares itself (subclass first)."""
    found = []
    for cls in config_class.__mro__:
        if dataclasses.is_dataclass(cls) and cls.__module__.startswith("turngym"):
            names = vars(cls).get("__annotations__", {})
            found.append((cls, [f for f in dataclasses.fields(cls) if f.name in names]))
    return [(cls, declared) for cls, declared in found if declared]


def _field_help(spec: dataclasses.Field) -> str:
    text = spec.metadata.get("help", "")
    default = spec.default_factory() if spec.default_factory is not dataclasses.MISSING else spec.default
    text = text if "default" in text.lower() else f"{text} (default: {default!r})"
    return text.replace("%", "%%")


def _with_defaults(argv: list[str], defaults: dict[str, str]) -> list[str]:
    """``argv`` plus ``--name value`` for each of ``defaults`` that neither the command line nor the YAML
    config (``--config``) sets."""
    import yaml

    in_yaml: dict[str, Any] = {}
    config = _option_value(argv, "config")
    if config and Path(config).expanduser().is_file():
        try:
            in_yaml = yaml.safe_load(Path(config).expanduser().read_text()) or {}
        except yaml.YAMLError:
            pass  # _check_yaml reports it
    given = set(in_yaml) if isinstance(in_yaml, dict) else set()
    extra = [(f"--{name}", value) for name, value in defaults.items()
             if name not in given and _option_value(argv, name) is None]
    return [*argv, *(item for pair in extra for item in pair)]


def _train_defaults() -> dict[str, str]:
    """``turngym train``'s own defaults: local experiment tracking with trackio (when installed): metrics and a
    few episodes per step go to a local database (``$TRACKIO_DIR``, default ~/.cache/huggingface/trackio), never
    to the network unless ``--trackio_space_id`` names a Space; ``trackio show --project turngym`` opens it."""
    import importlib.util

    if importlib.util.find_spec("trackio") is None:
        return {}
    return {"report_to": "trackio", "project": "turngym"}


def _trl_command(args: argparse.Namespace, config_class: type, example: str, summary: str,
                 defaults: dict[str, str] | None = None):
    """The config of ``turngym train``/``sft``: help, imports, threads and checks, then TrlParser (``defaults``:
    options set unless the command line or the YAML config sets them)."""
    prog = f"turngym {args.command}"
    options = _split_trl_args(args.config_args, prog)
    if options.help == "short":
        print(_own_help(config_class, prog, summary))
        raise SystemExit(0)
    if options.help == "all":
        from trl import TrlParser

        TrlParser([config_class], prog=prog).parse_args_and_config(["--help"])
    from turngym.envs.registry import import_worlds

    import_worlds(options.imports)
    _require_something_to_run(options.rest, prog, example)
    config = _parse_trl_config(config_class, _with_defaults(options.rest, defaults or {}), prog)
    config.imports = list(dict.fromkeys([*config.imports, *options.imports]))
    _check_out(config.output_dir, "--output_dir")
    _set_threads(options.threads)
    if not args.verbose:  # progress, demo counts and the eval table are the point of the run: show them
        logging.getLogger("turngym.trainers").setLevel(logging.INFO)
    return config


def cmd_sft(args: argparse.Namespace) -> int:
    """SFT warm start: every field of TurnGymSFTConfig (and TRL's SFTConfig) is an option."""
    from turngym.trainers.sft import TurnGymSFTConfig, run_sft

    config = _trl_command(args, TurnGymSFTConfig, "recipes/configs/textworld-sft.yaml",
                          "SFT warm start on expert (oracle) episodes, in the chat format the RL rollout uses.")
    output = run_sft(config)
    print(f"SFT model and tokenizer saved to {output}; continue with RL: turngym train --model_name_or_path {output}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    """RL on whole episodes. Every field of TurnGymConfig (and TRL's GRPOConfig) is an option;
    ``--config FILE.yaml`` sets them from YAML, and options given after it override the file."""
    from turngym.trainers.config import TurnGymConfig
    from turngym.trainers.trainer import TurnGymTrainer

    config = _trl_command(args, TurnGymConfig, "recipes/configs/signals-ppo.yaml",
                          "RL on whole episodes: PPO, GRPO, RLOO, turn-level RLOO/GRPO, GiGPO.", _train_defaults())
    trainer = TurnGymTrainer(args=config)
    resume = config.resume_from_checkpoint
    resume = True if str(resume).lower() in ("true", "last") else resume  # True: the newest checkpoint
    trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(config.output_dir)
    critic = " (critic in critic/)" if trainer.critic is not None else ""
    print(f"turngym train: policy saved to {config.output_dir}{critic}")
    return 0


# ---------------------------------------------------------------------- demo and studies
DEMO_CONFIG = CONFIG_DIR / "compare" / "textworld-demo.yaml"
# `turngym demo --quick`: turn-level RLOO and its null control, in the recipe whose null keeps the 3-point rule.
QUICK_DEMO_CONFIG = CONFIG_DIR / "compare" / "textworld-demo-quick.yaml"


def cmd_demo(args: argparse.Namespace) -> int:
    """The embedded default: SFT warm start, then PPO, GRPO and turn-level RLOO at one budget, on CPU."""
    if args.baselines:
        return _baselines_demo(args)
    from turngym.recipes import compare_algorithms
    from turngym.recipes.study import Study, load_config

    name, path = ("demo-quick", QUICK_DEMO_CONFIG) if args.quick else ("demo", DEMO_CONFIG)
    args.config, args.name, args.seeds, args.episodes, args.only = str(path), name, None, None, None
    config = load_config(path, name=name, results_dir=args.results_dir)
    if not args.restart and Study.changed_options(config):
        print(f"{Path(args.results_dir) / name}/ holds a run of an earlier demo config: starting over")
        args.restart = True
    print(f"turngym demo: {path.name} (results in {Path(args.results_dir) / name}/; rerun to resume)")
    return compare_algorithms.main_with(args)


def _baselines_demo(args: argparse.Namespace) -> int:
    """Oracle and random agents on held-out TextWorld games: the world's floor and ceiling in seconds."""
    from turngym.agents import OracleAgent, RandomAgent, evaluate, markdown_table
    from turngym.envs.textworld import materialise, textworld_tasks

    started = time.perf_counter()
    config, episodes = "w2-o3-q4", 50
    print(f"turngym demo --baselines: oracle and random agents on {episodes} held-out TextWorld {config} games\n")
    tasks = materialise(textworld_tasks(config, "eval", n=episodes), workers=2)
    reports = []
    for protocol in ("free_form", "choose_index"):
        for agent in (OracleAgent(), RandomAgent(seed=0)):
            reports.append(evaluate(agent, "turngym/TextWorld-v0", tasks, env_kwargs={"action_protocol": protocol},
                                    num_workers=2, seed=0))
    print(markdown_table(reports))
    print(f"\ntask panel {tasks.name}, fingerprint {tasks.fingerprint}; {time.perf_counter() - started:.0f} s")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from turngym.recipes import compare_algorithms

    return compare_algorithms.main_with(args)


def cmd_stats(args: argparse.Namespace) -> int:
    """The table of a study's outcomes file, recomputed with today's intervals."""
    from turngym.recipes.study import recompute, recomputed_markdown

    path = Path(args.outcomes)
    if path.is_dir():
        path = path / "outcomes.json"
    if not path.is_file():
        raise FileNotFoundError(f"no outcomes file at {path}: a study writes results/<name>/outcomes.json")
    print(recomputed_markdown(recompute(json.loads(path.read_text()), args.reference, args.panel)), end="")
    return 0


def cmd_budget(args: argparse.Namespace) -> int:
    from turngym.recipes import sft_rl_budget

    return sft_rl_budget.main_with(args)


def cmd_serve(args: argparse.Namespace) -> int:
    from turngym.envs.openenv.server import serve

    _load_worlds(args)
    kwargs = _env_kwargs(args)

    def ready(url: str, served: Any) -> None:
        panels = ", ".join(f"{split} {len(p)} ({p.fingerprint})" for split, p in served.panels.items()) or "none"
        print(f"turngym serve: serving {served.env_id} at {url} (at most {args.max_sessions} sessions; "
              f"task panels: {panels}). Ctrl-C stops it.", flush=True)

    serve(args.env, kwargs, host=args.host, port=args.port, max_sessions=args.max_sessions,
          panel_size=args.panel_size, ping_interval=args.ping_interval, ping_timeout=args.ping_timeout,
          on_ready=ready, log_level="info" if args.verbose else "warning", token=args.token,
          idle_timeout=args.idle_timeout, allow_client_tasks=args.allow_client_tasks,
          reveal_solutions=args.reveal_solutions, generation_timeout=args.generation_timeout)
    # Stopped. A world stuck in a step would still hold its session's thread, which Python joins at
    # exit: leave without waiting for it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def cmd_view(args: argparse.Namespace) -> int:
    from turngym.recipes import view

    return view.main_with(args)


# ---------------------------------------------------------------------- the parser
def _import_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import a module that registers worlds (repeatable): a dotted name or a .py file")


def _env_options(p: argparse.ArgumentParser, *, env_positional: bool = False, env_required: bool = False,
                 split: bool = True) -> None:
    _import_option(p)
    env_help = "gymnasium id of the world, or module:Class (a TextEnv subclass, registered as module/Class-v0)"
    if env_positional:
        p.add_argument("env", nargs=None if env_required else "?", default="turngym/TextWorld-v0", help=env_help)
    else:
        p.add_argument("--env", default="turngym/TextWorld-v0", help=env_help)
    p.add_argument("--config", default=None, help="TextWorld only: the game config, e.g. w2-o3-q4 (its default)")
    if split:
        p.add_argument("--split", default=None, help="default: the world's held-out split, 'eval' "
                                                     "(ALFWorld: eval = eval_seen, or eval_unseen)")
    p.add_argument("--reward-mode", default="sparse", choices=["sparse", "dense"])
    p.add_argument("--protocol", default="free_form", choices=["free_form", "admissible_in_prompt", "choose_index"])
    p.add_argument("--max-turns", type=POSITIVE, default=None, help="default: the world's (2x the optimal length)")
    p.add_argument("--env-arg", action="append", metavar="KEY=VALUE",
                   help="a constructor option of the world (VALUE may be JSON); repeatable")


def _llm_options(p: argparse.ArgumentParser) -> None:
    llm = p.add_argument_group("LLM agent")
    llm.add_argument("--model", default=DEFAULT_MODEL, help="Hub name or local folder")
    llm.add_argument("--backend", default="hf", choices=["hf", "vllm"], help="generation backend for --agent llm")
    llm.add_argument("--device", default="cpu")
    llm.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (the default for evaluation)")
    llm.add_argument("--top-p", type=float, default=1.0)
    llm.add_argument("--max-new-tokens", type=POSITIVE, default=48, help="cap per turn")
    llm.add_argument("--max-context", type=POSITIVE, default=4096,
                     help="tokens; past it the episode ends as truncated")
    llm.add_argument("--action-format", default=None, choices=["prefix", "last_line", "tags", "raw"],
                     help="default: the world's (raw for SWE: the whole reply), else prefix")
    llm.add_argument("--response-prefix", default=None,
                     help="text each reply starts with (default: 'Action:' with the prefix format, else none); "
                          "match the training config's response_prefix")
    llm.add_argument("--system-prompt", default=None,
                     help="default: the agent's; '' for none; may contain {format_instruction}. Match the "
                          "training config's system_prompt to reproduce its evaluation")
    llm.add_argument("--base-url", help="OpenAI-compatible endpoint for --agent openai, e.g. http://host:8000/v1")
    llm.add_argument("--vllm-server", help="TRL vllm-serve URL for --backend vllm (default: vLLM in-process)")


def _add_eval(sub) -> None:
    p = sub.add_parser("eval", help="evaluate agents on held-out tasks")
    _env_options(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--agent", action="append", choices=["oracle", "random", "llm", "openai"],
                   help="repeatable (default: oracle and random); llm: a model through --backend; "
                        "openai: a served model at --base-url")
    p.add_argument("--episodes", type=POSITIVE, default=100, help="first N tasks of the split")
    p.add_argument("--samples-per-task", type=POSITIVE, default=1, metavar="N",
                   help="play each task N times (independent samples; an LLM needs --temperature > 0) for pass@k")
    p.add_argument("--pass-at", type=POSITIVE, nargs="+", default=None, metavar="K",
                   help="report the unbiased pass@K for each K <= N, with a bootstrap 95 %% CI over tasks "
                        "(default with N > 1: 1 and N)")
    p.add_argument("--workers", type=NON_NEGATIVE, default=2, help="env worker processes (0: in this process)")
    p.add_argument("--env-backend", default=None, choices=["process", "ray", "remote"],
                   help="where the worlds run: --workers worker processes (default), --workers Ray actors, or "
                        "sessions on --env-server")
    p.add_argument("--env-server", metavar="URL",
                   help="play the world (and the tasks) served at URL by `turngym serve`, e.g. ws://host:8000")
    p.add_argument("--threads", type=POSITIVE, default=None, help="torch CPU threads (default: torch's)")
    p.add_argument("--out", help="folder for trajectories (JSONL) and reports (JSON)")
    _llm_options(p)
    p.set_defaults(func=cmd_eval)


def _add_serve(sub) -> None:
    p = sub.add_parser("serve", help="serve a world over OpenEnv (HTTP + WebSocket), one world per session")
    _env_options(p, env_positional=True, env_required=True, split=False)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    p.add_argument("--port", type=NON_NEGATIVE, default=8000, help="0 picks a free port")
    p.add_argument("--max-sessions", type=POSITIVE, default=64, help="worlds played at once (one per session)")
    p.add_argument("--panel-size", type=POSITIVE, default=100,
                   help="tasks per split listed by the task API (/<name>/tasks ...)")
    p.add_argument("--ping-interval", type=float, default=20.0, help="seconds between WebSocket keepalive pings")
    p.add_argument("--ping-timeout", type=float, default=20.0,
                   help="seconds without a pong before a vanished client's session is dropped")
    p.add_argument("--token", default=None,
                   help="the token every client must send (Authorization: Bearer TOKEN); default: "
                        "$TURNGYM_SERVE_TOKEN, which keeps it off the command line. Required beyond loopback")
    p.add_argument("--idle-timeout", type=float, default=1800.0,
                   help="seconds a session may wait for its client's next message before it is closed")
    p.add_argument("--allow-client-tasks", action="store_true",
                   help="also play tasks that clients send (never host paths, images or commands); "
                        "default: only the served panels' tasks, by id")
    p.add_argument("--reveal-solutions", action="store_true",
                   help="send walkthroughs, gold patches and hidden tests to clients (an oracle agent needs them)")
    p.add_argument("--generation-timeout", type=float, default=300.0,
                   help="seconds to generate the game of a client's task (with --allow-client-tasks)")
    p.set_defaults(func=cmd_serve)


def _add_generate(sub) -> None:
    p = sub.add_parser("generate", help="generate and cache TextWorld or ALFWorld games")
    p.add_argument("--world", default="textworld", choices=["textworld", "alfworld"])
    p.add_argument("--config", default="w2-o3-q4")
    p.add_argument("--split", default="eval", choices=["train", "eval", "all", "eval_seen", "eval_unseen"],
                   help="ALFWorld: train, eval_seen (= eval), eval_unseen or all")
    p.add_argument("-n", type=POSITIVE, default=None, help="first n seeds of each split")
    p.add_argument("--workers", type=POSITIVE, default=None)
    p.add_argument("--manifest", help="write the task set (ids and content hashes) as JSONL")
    p.set_defaults(func=cmd_generate)


def _add_studies(sub) -> None:
    p = sub.add_parser("demo", help="the embedded default: SFT, then PPO / GRPO / turn-RLOO at one budget (CPU)")
    p.add_argument("--restart", action="store_true", help="delete results/demo/ and start over (default: resume)")
    p.add_argument("--results-dir", default="results", help="parent folder of demo/")
    p.add_argument("--baselines", action="store_true", help="only the oracle and random agents (seconds)")
    p.add_argument("--quick", action="store_true",
                   help="turn-level RLOO and its null control only, at lr 5e-6 and 32 episodes a step "
                        "(textworld-demo-quick.yaml; results/demo-quick/; about 31 min)")
    p.set_defaults(func=cmd_demo)

    from turngym.recipes import compare_algorithms, sft_rl_budget

    p = sub.add_parser("compare", help="compare RL algorithms at an equal episode budget: table, plot, JSON")
    compare_algorithms.add_arguments(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("stats", help="recompute a study's table from its per-game outcomes (outcomes.json)")
    p.add_argument("outcomes", help="results/<name>/ or an outcomes.json (e.g. one committed under docs/outcomes/)")
    p.add_argument("--reference", help="the arm every other is paired with (default: SFT-only, else the first)")
    p.add_argument("--panel", default="held_out", help="which evaluation panel (default: held_out)")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("budget", help="split a fixed budget between SFT demos and RL episodes: table and plot")
    sft_rl_budget.add_arguments(p)
    p.set_defaults(func=cmd_budget)

    from turngym.recipes import view

    p = sub.add_parser("view", help="one static HTML page of the episodes in a results folder or episode file")
    view.add_arguments(p)
    p.set_defaults(func=cmd_view)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="turngym", description="Multi-turn RL for LLM agents.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("envs", help="list registered worlds")
    _import_option(p)
    p.set_defaults(func=cmd_envs)
    _add_generate(sub)
    _add_eval(sub)

    p = sub.add_parser("play", help="play a world in the terminal")
    _env_options(p, env_positional=True)
    p.add_argument("--seed", type=int, default=None)
    p.set_defaults(func=cmd_play)
    _add_serve(sub)

    p = sub.add_parser("check-template", help="is a model's chat template append-only? (exact token bookkeeping)")
    p.add_argument("--model", default=DEFAULT_MODEL, help="Hub name or local folder")
    p.set_defaults(func=cmd_check_template)

    # Subcommands whose options are a TRL config dataclass. prefix_chars="+": the subparser takes no
    # options itself, so every "--field value" (and --help) reaches cmd_train/cmd_sft, which take
    # --import, --threads and --help out and hand the rest to TrlParser.
    for name, func, text in (
        ("sft", cmd_sft, "SFT warm start on expert (oracle) episodes; `turngym sft --help` lists the fields"),
        ("train", cmd_train, "RL on whole episodes (PPO, GRPO, RLOO family, GiGPO); `turngym train --help`"),
    ):
        p = sub.add_parser(name, add_help=False, prefix_chars="+", help=text)
        p.add_argument("config_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        p.set_defaults(func=func)
    _add_studies(sub)
    return parser


def _message(error: BaseException) -> str:
    return str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except UsageError as error:
        print(error, file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if getattr(args, "agent", "unset") is None:
        args.agent = ["oracle", "random"]
    try:
        return args.func(args)
    except UsageError as error:
        print(error, file=sys.stderr)
        return 2
    # ImportError: a missing extra; ConnectionError: no server answers at --env-server
    except (ValueError, KeyError, FileNotFoundError, ImportError, ConnectionError) as error:
        print(f"turngym {args.command}: error: {_message(error)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
