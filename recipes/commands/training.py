"""``turngym sft`` and ``turngym train``: subcommands whose options are a TRL config dataclass.

argparse hands their whole command line over untouched; here ``--import``, ``--threads`` and the help
options are taken out and the rest goes to TRL's ``TrlParser`` (``--config FILE.yaml`` plus
``--field value`` overrides), with turngym's one-line errors. The parser (``trainers.config_cli.ConfigParser``) shows
the fields by group: world, rollout, estimator, critic, then TRL's config and ModelConfig's LoRA fields.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import logging
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from turngym.recipes.commands.common import CONFIG_DIR, POSITIVE, UsageError, check_out, set_threads


@dataclass
class _TrlArgs:
    """The arguments of ``turngym train``/``sft`` that are turngym's, and the rest (for TrlParser)."""

    rest: list[str] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)
    threads: int | None = None
    help: str | None = None  # "short" or "all"
    resume: bool = False  # train: continue the run in --output_dir (its newest checkpoint)
    overwrite: bool = False  # train: delete the run in --output_dir and start over


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
        elif item in ("--resume", "--overwrite") and prog.endswith(" train"):
            setattr(parsed, item[2:], True)
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
    if _option_value(argv, "config") or _option_value(argv, "env_id"):  # the model defaults to SmolLM2
        return
    raise UsageError(
        f"{prog}: error: give a config file, e.g. `{prog} --config {example}` (more in recipes/configs/), "
        "or at least --env_id (the policy defaults to SmolLM2-135M-Instruct); `" + prog + " --help` lists the fields")


def _check_model_early(argv: Sequence[str]) -> None:
    """A mistyped model (on the command line or in the YAML config): one line at once, before TRL is imported."""
    from turngym.agents.models import check_model

    given = _given([a for a in argv if a not in ("-h", "--help", "--help-all")], "model_name_or_path")
    if given:
        check_model(given)


def _given(argv: Sequence[str], name: str) -> str | None:
    """Field ``name`` as the command line sets it, else as the ``--config`` YAML file does (None: neither)."""
    import yaml

    value = _option_value(argv, name)
    config = _option_value(argv, "config")
    if value is None and config and Path(config).expanduser().is_file():
        try:
            data = yaml.safe_load(Path(config).expanduser().read_text())
        except yaml.YAMLError:
            return None  # _check_yaml reports it
        value = data.get(name) if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


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
    from turngym.trainers.config_cli import yaml_type_problems

    problems = yaml_type_problems(data, config_class)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ValueError(f"config file {path}: {problems[0]}{more}")


def _did_you_mean(name: str, known: set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _parser(config_class: type, prog: str, *, summary: str | None = None, full_help: bool = True):
    """TRL's parser for ``config_class``, its fields grouped (``ConfigParser``), with one-line errors; for help
    (``summary``), also the options this command takes out before parsing."""
    from turngym.trainers.config_cli import ConfigParser

    class Parser(ConfigParser):
        def error(self, message: str) -> None:  # type: ignore[override]
            raise UsageError(f"{prog}: error: {message}")

    parser = Parser(config_class, prog=prog, full_help=full_help, description=summary, add_help=False,
                    usage=f"{prog} [--config FILE.yaml] [--import MODULE] [--threads N] "
                    + ("[--resume | --overwrite] " if prog.endswith(" train") else "") + "[--field value ...]")
    if summary is not None:
        own = parser.add_argument_group("turngym options")
        own.add_argument("-h", "--help", action="help", help="this help; --help-all: every field, TRL's too")
        own.add_argument("--config", metavar="FILE.yaml", help="fields from YAML (examples in recipes/configs/); "
                                                               "options after it override the file")
        own.add_argument("--import", metavar="MODULE", help="import a module that registers worlds (repeatable)")
        own.add_argument("--threads", metavar="N", help="torch CPU threads")
        parser._action_groups.insert(0, parser._action_groups.pop())  # first
    return parser


def _parse_trl_config(config_class: type, argv: list[str], prog: str):
    """``config_class`` from ``--config FILE.yaml`` and ``--field value`` overrides, with one-line errors."""
    if _option_value(argv, "config"):
        _check_yaml(_option_value(argv, "config"), config_class)
    config, unknown = _parser(config_class, prog).parse_args_and_config(argv, return_remaining_strings=True)
    if unknown:
        known = {f.name for f in dataclasses.fields(config_class)}
        flags = [u for u in unknown if u.startswith("--")]
        hint = _did_you_mean(flags[0][2:].split("=")[0], known) if flags else ""
        raise UsageError(f"{prog}: error: unknown option(s) {' '.join(unknown)}{hint}; `{prog} --help` lists them")
    return config


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

    defaults = {"logging_steps": "1"}  # one summary line per step (trainers.runs.StepSummary)
    if importlib.util.find_spec("trackio") is None:
        return defaults
    return {**defaults, "report_to": "trackio", "project": "turngym"}


def _trl_command(args: argparse.Namespace, config_class: type, example: str, summary: str,
                 defaults: dict[str, str] | None = None):
    """The config of ``turngym train``/``sft``: help, imports, threads and checks, then TrlParser (``defaults``:
    options set unless the command line or the YAML config sets them), and the options taken out of the command line
    (:class:`_TrlArgs`)."""
    prog = f"turngym {args.command}"
    options = _split_trl_args(args.config_args, prog)
    if options.help:  # the fields by group: world, rollout, estimator, critic, TRL's config, model (LoRA)
        print(_parser(config_class, prog, summary=summary, full_help=options.help == "all").format_help())
        raise SystemExit(0)
    from turngym.envs.registry import import_worlds

    import_worlds(options.imports)
    _require_something_to_run(options.rest, prog, example)
    config = _parse_trl_config(config_class, _with_defaults(options.rest, defaults or {}), prog)
    config.imports = list(dict.fromkeys([*config.imports, *options.imports]))
    from turngym.agents.models import check_model

    check_model(config.model_name_or_path)  # from defaults too
    check_out(config.output_dir, "--output_dir")
    set_threads(options.threads)
    if not args.verbose:  # progress, demo counts and the eval table are the point of the run: show them
        logging.getLogger("turngym.trainers").setLevel(logging.INFO)
    return config, options


def cmd_sft(args: argparse.Namespace) -> int:
    """SFT warm start: every field of TurnGymSFTConfig (and TRL's SFTConfig) is an option."""
    _check_model_early(args.config_args)
    from turngym.trainers.sft import TurnGymSFTConfig, run_sft

    config, _ = _trl_command(args, TurnGymSFTConfig, "recipes/configs/textworld-sft.yaml",
                             "SFT warm start on expert (oracle) episodes, in the chat format the RL rollout uses.")
    output = run_sft(config)
    print(f"SFT model and tokenizer saved to {output}; continue with RL: turngym train --model_name_or_path {output}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    """RL on whole episodes. Every field of TurnGymConfig (and TRL's GRPOConfig) is an option;
    ``--config FILE.yaml`` sets them from YAML, and options given after it override the file.

    A folder that holds a run is resumed (the same config, or ``--resume``) or refused (``--overwrite`` clears it);
    Ctrl-C stops the run with one line: the step, what was saved, the command that resumes."""
    _check_model_early(args.config_args)
    from turngym.trainers.config import TurnGymConfig

    config, options = _trl_command(
        args, TurnGymConfig, "recipes/configs/signals-ppo.yaml",
        "RL on whole episodes: PPO, GRPO, RLOO, turn-level RLOO/GRPO, GiGPO.", _train_defaults())
    config.resolve()  # imports and registry lookups: a bad world or algorithm fails before the model loads
    resume = _resume_or_refuse(config, options, args.config_args)
    if resume == "finished":
        return 0
    command = " ".join(shlex.quote(a) for a in ["turngym", "train", *args.config_args] if a != "--overwrite")
    trainer = None
    try:
        trainer = _trainer(config)
        trainer.train(resume_from_checkpoint=resume)
        trainer.save_model(config.output_dir)
    except KeyboardInterrupt:
        print(_stopped(config, trainer.state.global_step if trainer else None, command), file=sys.stderr)
        return 130
    from turngym.trainers.runs import finish_run

    finish_run(config.output_dir, trainer.state.global_step)
    critic = " (critic in critic/)" if getattr(trainer.critic, "enabled", True) else ""
    print(f"turngym train: policy saved to {config.output_dir}{critic}")
    return 0


def _trainer(config):
    """The trainer, with a checkpoint every ``save_minutes`` (unless save_strategy is no) and one summary line
    per step."""
    from turngym.trainers.runs import TimedCheckpoints, step_lines
    from turngym.trainers.trainer import TurnGymTrainer

    trainer = TurnGymTrainer(args=config)
    if _strategy(config.save_strategy) != "no" and config.save_minutes > 0:
        trainer.add_callback(TimedCheckpoints(config.save_minutes))
    step_lines(trainer)
    return trainer


def _strategy(value: Any) -> str:
    return str(getattr(value, "value", value))


def _resume_or_refuse(config, options: _TrlArgs, argv: Sequence[str]) -> str | bool | None:
    """What ``turngym train`` does with ``--output_dir``: start a run (None), resume one (a checkpoint folder or
    True), say it is finished ("finished"), or refuse in one line (a UsageError naming --resume and --overwrite)."""
    from turngym.trainers.runs import RunFolder, keep_samples_up_to, start_run

    prog, out = "turngym train", config.output_dir
    if options.resume and options.overwrite:
        raise UsageError(f"{prog}: error: --resume continues the run in {out}, --overwrite deletes it: give one")
    folder = RunFolder.read(out)
    explicit = config.resume_from_checkpoint
    if explicit not in (None, "", False):  # the TRL field: a checkpoint, or true/last for the newest
        explicit = True if str(explicit).lower() in ("true", "last") else explicit
        start_run(out, config, ["turngym", "train", *argv], run_id=(folder.record or {}).get("run_id"))
        return explicit
    if options.overwrite and folder.holds_run:
        print(f"{prog}: --overwrite: deleted the run in {out} ({folder.describe()})", file=sys.stderr)
        folder.clear()
    elif folder.holds_run:
        same = folder.same_run(config)
        if not (options.resume or same):
            raise UsageError(f"{prog}: error: --output_dir {out} holds another run ({folder.describe()}"
                             f"{_differences(folder, config)}); --resume continues it with this command's config, "
                             "--overwrite deletes it and starts over, or choose another --output_dir")
        finished = (folder.record or {}).get("finished")
        if same and finished is not None and (folder.latest is None or folder.latest[0] <= finished):
            print(f"{prog}: --output_dir {out} holds this run, finished at step {finished}; "
                  "--overwrite trains it again")
            return "finished"
        if folder.latest is None:
            raise UsageError(f"{prog}: error: --output_dir {out} holds a run with no checkpoint to resume (it stopped "
                             "before its first save); --overwrite deletes it and starts over")
        step, checkpoint = folder.latest
        print(f"{prog}: resuming from {folder.describe(config.max_steps)}", file=sys.stderr)
        keep_samples_up_to(out, step)  # the steps after the checkpoint play again
        start_run(out, config, ["turngym", "train", *argv], run_id=(folder.record or {}).get("run_id"))
        return str(checkpoint)
    start_run(out, config, ["turngym", "train", *argv])
    return None


def _differences(folder, config) -> str:
    """``; differs in learning_rate, max_steps`` (the first few fields), or nothing without a run file."""
    from turngym.trainers.runs import run_fields

    if not folder.record or "config" not in folder.record:
        return ""
    before, now = folder.record["config"], run_fields(config)
    names = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
    more = f" and {len(names) - 4} more" if len(names) > 4 else ""
    return f"; its config differs in {', '.join(names[:4])}{more}" if names else ""


def _stopped(config, step: int | None, command: str) -> str:
    """The one line Ctrl-C prints: the step reached, the newest checkpoint, the command that resumes."""
    from turngym.trainers.runs import RunFolder

    folder = RunFolder.read(config.output_dir)
    where = "before the first step" if not step else f"at step {step}"
    if folder.latest is None:
        return (f"turngym train: stopped {where}; nothing saved yet (a checkpoint comes every save_minutes "
                f"minutes and every save_steps steps); start again with: {command} --overwrite")
    return (f"turngym train: stopped {where}; saved {folder.latest[1].name} (step {folder.latest[0]}) in "
            f"{config.output_dir}; resume with: {command} --resume")


def add(sub) -> None:
    # prefix_chars="+": the subparser takes no options itself, so every "--field value" (and --help)
    # reaches cmd_train/cmd_sft, which take --import, --threads and --help out and hand the rest to TrlParser.
    for name, func, text in (
        ("sft", cmd_sft, "SFT warm start on expert (oracle) episodes; `turngym sft --help` lists the fields"),
        ("train", cmd_train, "RL on whole episodes (PPO, GRPO, RLOO family, GiGPO); `turngym train --help`"),
    ):
        p = sub.add_parser(name, add_help=False, prefix_chars="+", help=text)
        p.add_argument("config_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        p.set_defaults(func=func)
