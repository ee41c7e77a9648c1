"""An agent loop written only against the official ``openai`` package: the kind of harness people already have.

It plays one episode of a text world with two tools: ``act`` sends a command to the world, ``note`` keeps a
thought without acting (so a turn may take several calls). A reply without a tool call is read as a command, its
last line. Nothing here imports turngym: turngym calls :func:`play` once per episode with

* ``episode.base_url``, ``episode.api_key``, ``episode.model``: where the policy is served (turngym's proxy);
* ``episode.env``: the world, with the episode's task fixed (``reset()`` once, then ``step(command)``).

Trained with turn-level RLOO, unchanged (docs/proxy.md)::

    turngym train --config recipes/configs/harness-signals.yaml

Or one episode against a policy served by ``turngym proxy`` (this file's ``__main__``, which makes the world)::

    python examples/openai_harness.py --base-url http://127.0.0.1:8001/episodes/try-1/v1
"""

from __future__ import annotations

import json
from typing import Any

from openai import OpenAI

SYSTEM = ("Obey the traffic lights. Each turn, call `act` with one command; "
          "`note` writes a thought down without acting.")
TOOLS = [
    {"type": "function", "function": {
        "name": "act", "description": "Send one command to the world.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "note", "description": "Write a thought down; the world does not change.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}},
]
MAX_NOTES_PER_TURN = 2


def play(episode: Any, *, max_tokens: int = 16, max_calls: int = 24) -> list[dict[str, Any]]:
    """One episode, at most ``max_calls`` model calls of ``max_tokens`` each; returns its messages."""
    client = OpenAI(base_url=episode.base_url, api_key=episode.api_key)
    observation, _ = episode.env.reset()
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": observation}]
    done, notes = False, 0
    for _ in range(max_calls):
        if done:
            break
        response = client.chat.completions.create(model=episode.model, messages=messages, tools=TOOLS,
                                                  max_tokens=max_tokens)
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:  # plain text: its last line is the command
            lines = (message.content or "").strip().splitlines()
            observation, done = step(episode.env, lines[-1] if lines else "")
            messages.append({"role": "user", "content": observation})
            notes = 0
            continue
        for call in message.tool_calls:
            result, acted, done = run_tool(episode.env, call.function.name, call.function.arguments, notes)
            notes = 0 if acted else notes + 1
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
            if done:
                break
    return messages


def run_tool(env: Any, name: str, arguments: str, notes: int) -> tuple[str, bool, bool]:
    """(the tool's answer, whether it acted on the world, whether the episode ended)."""
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        return "The arguments are not valid JSON.", False, False
    if not isinstance(args, dict):
        return "The arguments must be a JSON object.", False, False
    if name == "act":
        observation, done = step(env, str(args.get("command", "")))
        return observation, True, done
    if name == "note":
        if notes >= MAX_NOTES_PER_TURN:
            return "Enough notes: act now.", False, False
        return "Noted.", False, False
    return f"There is no tool {name!r}; use act or note.", False, False


def step(env: Any, command: str) -> tuple[str, bool]:
    observation, _, terminated, truncated, _ = env.step(command)
    return observation, bool(terminated or truncated)


if __name__ == "__main__":  # one Signals episode against a served policy (the world comes from turngym here only)
    import argparse
    from types import SimpleNamespace

    import gymnasium

    import turngym  # noqa: F401 - registers the worlds

    parser = argparse.ArgumentParser(description="play one turngym/Signals-v0 episode through an OpenAI endpoint")
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--api-key", default="none")
    parser.add_argument("--model", default="turngym-policy")
    parser.add_argument("--max-tokens", type=int, default=16)
    options = parser.parse_args()
    world = gymnasium.make("turngym/Signals-v0", turns=3, colours=2)
    played = play(SimpleNamespace(base_url=options.base_url, api_key=options.api_key, model=options.model,
                                  env=world), max_tokens=options.max_tokens)
    calls = sum(1 for m in played if m["role"] == "assistant")
    print(f"played one episode: {calls} model calls, {len(played)} messages")
