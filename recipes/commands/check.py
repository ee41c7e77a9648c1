"""``turngym check``: exactly what a model will see in a world, before any run: the rendered first prompt (with its
token count), the tools, and the first turn's delta (the ids the world's first answer appends).

It plays one turn through the LLM agent's own code (a scripted reply stands in for the model: the world's first
expert action, else its first admissible command), so what it prints is what evaluation and training feed the model.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from turngym.recipes.commands.common import env_kwargs, env_options, load_worlds
from turngym.recipes.commands.evaluate import agent_config, llm_options, play_tasks

RULE = "-" * 80


def first_action(info: dict[str, Any]) -> str:
    """The action the scripted first turn takes: the expert's first step, else the first admissible command (as a
    call under the tools protocol), else ``look``; in the episode's protocol."""
    from turngym.envs.core import protocol_action

    walkthrough = info.get("walkthrough") or []
    command = (walkthrough[:1] or info.get("admissible_calls") or info.get("admissible_commands") or ["look"])[0]
    return protocol_action(command, info)


def scripted_reply(action: str, syntax: str | None) -> str:
    """What a model writes to take ``action``: a call in its own syntax under tools, else the action itself."""
    if syntax is None:
        return f" {action}"
    from turngym.agents.tool_calls import format_tool_call
    from turngym.envs.tools import ToolCall

    return format_tool_call(ToolCall.from_action(action), syntax)


def cmd_check(args: argparse.Namespace) -> int:
    import gymnasium as gym
    from transformers import AutoTokenizer

    from turngym.agents.backends import ScriptedBackend
    from turngym.agents.llm import LLMAgent
    from turngym.agents.models import check_model, resolve_model

    check_model(args.model)
    load_worlds(args)
    kwargs = env_kwargs(args)
    tokenizer = AutoTokenizer.from_pretrained(resolve_model(args.model))
    env = gym.make(args.env, **kwargs, **play_tasks(args, kwargs))
    observation, info = env.reset(seed=args.seed)
    action = first_action(info)
    agent: LLMAgent
    agent = LLMAgent(ScriptedBackend(lambda request: scripted_reply(action, agent.tool_syntax_of(0)), tokenizer.encode),
                     tokenizer, agent_config(args))
    agent.begin(0, observation, info)
    syntax = agent.tool_syntax_of(0)
    (taken,) = agent.act([0])
    observation, reward, terminated, truncated, step = env.step(taken)
    if not (terminated or truncated):
        agent.observe(0, taken, observation, reward, step)
        agent.act([0])  # appends the world's answer (the delta) before the second reply
    record = agent.end(0)
    env.close()

    def show(ids: list[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=False)

    tools = info.get("tools")
    print(f"world {args.env} ({info['action_protocol']}, {info['reward_mode']} rewards), task {info['task']['id']}, "
          f"up to {info['max_turns']} turns; model {args.model}")
    if tools:
        listed = "\n".join(json.dumps(tool) for tool in tools)
        print(f"\ntools ({len(tools)}; calls read in the {syntax} syntax):\n{listed}")
    else:
        print("\ntools: none (the model replies in text)")
    print(f"\nfirst prompt ({len(record.prompt_ids)} tokens), as the model sees it:\n{RULE}\n{show(record.prompt_ids)}"
          f"\n{RULE}")
    first_end = record.turn_ends[0] + 1 if record.turn_ends else len(record.completion_ids)
    delta = []
    for token, sampled in zip(record.completion_ids[first_end:], record.env_mask[first_end:], strict=True):
        if sampled:
            break
        delta.append(token)
    reply = record.replies[0] if record.replies else ""
    cut = (f", cut at {agent.config.sampling.max_new_tokens} tokens (--max-new-tokens)"
           if record.forced_end_of_turn[:1] == [True] else "")
    print(f"\nturn 1: a reply of {first_end} tokens{cut}, {reply.strip()!r}, parsed as {taken!r} "
          f"({'invalid: ' + str(step.get('invalid_reason')) if step.get('invalid_action') else 'valid'})")
    if terminated or truncated:
        print("the episode ended on turn 1: no delta follows")
        return 0
    print(f"\nthe world's answer appends {len(delta)} tokens (the first turn's delta):\n{RULE}\n{show(delta)}\n{RULE}")
    return 0


def add(sub) -> None:
    p = sub.add_parser("check", help="what a model sees in a world: first prompt, tools, token count, first delta")
    env_options(p)
    p.add_argument("--seed", type=int, default=0, help="the reset seed (which task of the split, for most worlds)")
    llm_options(p)
    p.set_defaults(func=cmd_check)
