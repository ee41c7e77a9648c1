"""``turngym eval`` (agents on a world's held-out tasks) and ``turngym play`` (a world in the terminal).

Both take the world's options (``common.env_options``); eval adds the agents' and the LLM's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from turngym.recipes.commands.common import (
    DEFAULT_MODEL,
    NON_NEGATIVE,
    POSITIVE,
    check_out,
    env_kwargs,
    env_options,
    load_worlds,
    set_threads,
)


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


def agent_config(args: argparse.Namespace):
    """The LLM agent's prompt, parsing and sampling; the response prefix follows the action format."""
    from turngym.agents.llm import LLMAgentConfig, reply_format

    action_format, prefix = reply_format(args.env, args.action_format, args.response_prefix,
                                         tools=args.protocol == "tools")
    fields: dict[str, Any] = {}
    if args.system_prompt is not None:  # as in training configs: "" means no system message
        fields["system_prompt"] = args.system_prompt or None
    return LLMAgentConfig(
        action_format=action_format, response_prefix=prefix, temperature=args.temperature, top_p=args.top_p,
        max_new_tokens=args.max_new_tokens, max_context_tokens=args.max_context, seed=args.seed,
        stop_after_action=args.stop_after_action, history=args.history,
        compact_budget_tokens=args.compact_budget_tokens, compact_summary=args.compact_summary, **fields,
    )


def _make_agent(name: str, args: argparse.Namespace):
    from turngym.agents import make_baseline

    if name not in ("llm", "openai"):
        return make_baseline(name, seed=args.seed)
    from turngym.agents.models import make_llm_agent

    backend = "openai" if name == "openai" else args.backend
    return make_llm_agent(args.model, backend=backend, device=args.device, config=agent_config(args),
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

    if args.compare:
        return compare_saved(*args.compare)

    if "llm" in args.agent:  # a mistyped --model: one line now, before worlds, torch and games
        from turngym.agents.models import check_model

        check_model(args.model)
    if args.workers is None:  # an LLM decodes many episodes' turns for about the price of one: play them together
        args.workers = 0 if "llm" in args.agent else 2
    load_worlds(args)
    kwargs = env_kwargs(args)
    check_out(args.out)
    pool_options = _pool_options(args)
    _check_samples(args)
    if "openai" in args.agent:
        _check_endpoint(args.base_url)
    set_threads(args.threads)
    agents = [_make_agent(name, args) for name in args.agent]  # a missing model fails before games are made
    tasks = _task_set(args, kwargs)
    reports = []
    log = _error_log(args.out)
    with _world_errors_to(log):  # a world that raises: its tracebacks go to the log, one line to the console
        for agent in agents:
            out = Path(args.out) / f"{_file_name(agent.name)}.jsonl" if args.out else None
            report = evaluate(agent, args.env, tasks, env_kwargs=kwargs, num_workers=args.workers, batch=args.batch,
                              seed=args.seed, trajectories_path=out, samples_per_task=args.samples_per_task,
                              pass_at=args.pass_at, pool_options=pool_options)
            _require_answers(report, args)
            reports.append(report)
            if args.out:
                (Path(args.out) / f"{_file_name(agent.name)}.json").write_text(json.dumps(report.to_dict(), indent=1))
    print(markdown_table(reports))
    _hint_invalid_actions(reports)
    if args.out:
        print(f"\ntrajectories and reports written under {args.out}/")
    crashed = sum(report.overall.env_errors for report in reports)
    if crashed:
        episodes = sum(report.overall.episodes for report in reports)
        print(f"turngym eval: error: the world raised in {crashed} of {episodes} episodes (env_error in the table; "
              f"they count as failures); tracebacks in {log}", file=sys.stderr)
        return 1
    return 0


def _error_log(out: str | None) -> Path:
    """Where the world's tracebacks go: ``OUT/env_errors.log``, or a file in the temporary folder."""
    if out:
        return Path(out) / "env_errors.log"
    import tempfile

    return Path(tempfile.gettempdir()) / f"turngym-eval-{os.getpid()}-env_errors.log"


@contextlib.contextmanager
def _world_errors_to(path: Path) -> Iterator[None]:
    """Send the pools' reports of a world that raised (a traceback each, and the worker respawns) to ``path``, not
    to the console; the file is written only when there is one."""
    handler = logging.FileHandler(path, delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    loggers = [logging.getLogger(name) for name in ("turngym.envs.vector", "turngym.envs.pools")]
    before = [(logger.propagate, logger.level) for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.propagate = False
        logger.setLevel(min(logger.getEffectiveLevel(), logging.WARNING))
    try:
        yield
    finally:
        for logger, (propagate, level) in zip(loggers, before, strict=True):
            logger.removeHandler(handler)
            logger.propagate = propagate
            logger.setLevel(level)
        handler.close()


def compare_saved(a: str, b: str) -> int:
    """``turngym eval --compare A B``: two saved evaluations, paired by task (recipes/eval_compare.py)."""
    from turngym.recipes.eval_compare import compare_evaluations, comparison_table, read_evaluation

    first, second = read_evaluation(a), read_evaluation(b)
    print(comparison_table(first, second, compare_evaluations(first, second)))
    return 0


def _pool_options(args: argparse.Namespace) -> dict[str, Any]:
    """Where the worlds play: ``--env-server`` (remote sessions) or ``--env-backend``."""
    from turngym.envs.vector import check_server

    backend = args.env_backend or ("remote" if args.env_server else None)
    if backend is None:
        return {}
    check_server(backend, args.env_server or None, names=("--env-backend", "--env-server"))
    return {"backend": backend, **({"server": args.env_server} if args.env_server else {})}


def _check_samples(args: argparse.Namespace) -> None:
    """pass@k needs k <= samples per task, and samples that can differ (an LLM sampling at a temperature)."""
    from turngym.agents.evaluate import check_pass_at

    samples = args.samples_per_task
    check_pass_at(samples, args.pass_at or [])  # before the panel is built: that may take minutes
    if samples > 1 and args.temperature == 0 and {"llm", "openai"} & set(args.agent):
        raise ValueError(f"--samples-per-task {samples} with --temperature 0 (greedy) plays the same episode "
                         f"{samples} times per task; give a temperature for pass@k, e.g. --temperature 0.7")


def _hint_invalid_actions(reports: list) -> None:
    """A model that writes almost no valid command was most likely never shown the world's commands; a baseline
    whose every action was invalid measures nothing (its actions do not reach the world)."""
    for report in reports:
        if report.agent in ("oracle", "random") and report.overall.invalid_action_rate >= 1.0:
            print(f"\nwarning: every action of the {report.agent} baseline was invalid ({report.action_protocol}): "
                  "its row measures nothing. The world's admissible commands (or, under --protocol tools, its calls "
                  "for them: TextEnv._command_call) do not match what it accepts.", file=sys.stderr)
        if report.agent not in ("oracle", "random") and report.overall.invalid_action_rate >= 0.9:
            rate = report.overall.invalid_action_rate
            print(f"\nnote: {report.agent} wrote an invalid action on {rate:.0%} of turns ({report.action_protocol}). "
                  "An untuned model rarely guesses a world's commands: try --protocol "
                  "choose_index or admissible_in_prompt, or an SFT warm start (turngym sft); the trajectories "
                  "(--out) show its replies.")


def _file_name(agent_name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in agent_name)


def play_tasks(args: argparse.Namespace, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``--split`` for any world: as the world's own ``split`` option, or as the split's tasks."""
    from turngym.envs.panels import task_panel
    from turngym.envs.registry import world_options

    split = _split(args, kwargs)
    if "split" in (world_options(args.env) or ()):
        return {"split": split}
    return {"tasks": task_panel(args.env, split, None, kwargs, progress=False)}


def cmd_play(args: argparse.Namespace) -> int:
    import gymnasium as gym

    load_worlds(args)
    kwargs = env_kwargs(args)
    env = gym.make(args.env, **kwargs, **play_tasks(args, kwargs))
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


def llm_options(p: argparse.ArgumentParser) -> None:
    llm = p.add_argument_group("LLM agent")
    llm.add_argument("--model", default=DEFAULT_MODEL, help="Hub name or local folder")
    llm.add_argument("--backend", default="hf", choices=["hf", "vllm"], help="generation backend for --agent llm")
    llm.add_argument("--device", default="cpu")
    llm.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (the default for evaluation)")
    llm.add_argument("--top-p", type=float, default=1.0)
    llm.add_argument("--max-new-tokens", type=POSITIVE, default=None,
                     help="cap per turn (default: 16 when a line break ends the turn, else 48)")
    llm.add_argument("--max-context", type=POSITIVE, default=4096,
                     help="tokens; past it the episode ends as truncated")
    llm.add_argument("--action-format", default=None, choices=["prefix", "last_line", "tags", "raw"],
                     help="default: the world's (raw for SWE: the whole reply), else prefix")
    llm.add_argument("--response-prefix", default=None,
                     help="text each reply starts with (default: 'Action:' with the prefix format, else none); "
                          "match the training config's response_prefix")
    llm.add_argument("--stop-after-action", action=argparse.BooleanOptionalAction, default=True,
                     help="with a response prefix, a line break ends the turn (match the training config's)")
    llm.add_argument("--system-prompt", default=None,
                     help="default: the agent's; '' for none; may contain {format_instruction}. Match the "
                          "training config's system_prompt to reproduce its evaluation")
    llm.add_argument("--history", default="append", choices=["append", "strip_thinking", "compact"],
                     help="what the model is given of its earlier turns (match the training config's history; "
                          "docs/agents.md)")
    llm.add_argument("--compact-budget-tokens", type=POSITIVE, default=None,
                     help="--history compact: the context size past which the oldest turns are summarised")
    llm.add_argument("--compact-summary", default="rule", choices=["rule", "policy"],
                     help="--history compact: the dropped turns' actions listed (rule), or a summary the model writes")
    llm.add_argument("--base-url", help="OpenAI-compatible endpoint for --agent openai, e.g. http://host:8000/v1")
    llm.add_argument("--vllm-server", help="a vLLM server's URL (vllm serve, trl vllm-serve) for --backend vllm "
                     "(default: vLLM in-process; docs/agents.md)")


def add(sub) -> None:
    p = sub.add_parser("eval", help="evaluate agents on held-out tasks")
    env_options(p)
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
    p.add_argument("--workers", type=NON_NEGATIVE, default=None,
                   help="env worker processes (0: in this process; default 0 with --agent llm, else 2)")
    p.add_argument("--batch", type=POSITIVE, default=16,
                   help="with --workers 0: episodes side by side (an LLM decodes their turns in one pass)")
    p.add_argument("--env-backend", default=None, choices=["process", "ray", "remote"],
                   help="where the worlds run: --workers worker processes (default), --workers Ray actors, or "
                        "sessions on --env-server")
    p.add_argument("--env-server", metavar="URL",
                   help="play the world (and the tasks) served at URL by `turngym serve`, e.g. ws://host:8000")
    p.add_argument("--threads", type=POSITIVE, default=None, help="torch CPU threads (default: torch's)")
    p.add_argument("--out", help="folder for trajectories (JSONL) and reports (JSON)")
    p.add_argument("--compare", nargs=2, metavar=("A", "B"),
                   help="compare two saved evaluations (a trajectories file DIR/<agent>.jsonl, or a folder with one), "
                        "paired by task; plays nothing")
    llm_options(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("play", help="play a world in the terminal")
    env_options(p, env_positional=True)
    p.add_argument("--seed", type=int, default=None)
    p.set_defaults(func=cmd_play)
