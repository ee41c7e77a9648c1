"""Tools a world offers, in the OpenAI function format, and the check of one call against them.

A world declares its tools as JSON Schema function specs (:func:`function_tool`); under the ``tools`` action
protocol each action is one call, written as JSON (:meth:`ToolCall.to_action`), and the world checks it
(:func:`check_call`) before it acts. A malformed call, an unknown tool or bad arguments is an invalid action
with the reason as feedback, never an exception.

JSON Schema checking is jsonschema's (Draft 2020-12): a hand-written subset would accept what the schema
forbids.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")  # OpenAI's rule for function names
MAX_CALL_CHARS = 65_536  # a call longer than this is refused unread (model output can be huge)
# What decoding a model's JSON can raise: JSONDecodeError, and the ValueError of an integer over Python's
# digit limit (a 5,000-digit number); RecursionError for nesting deeper than the interpreter's stack.
DECODE_ERRORS = (ValueError, RecursionError)


class ToolCallError(ValueError):
    """A call that cannot be read: not JSON, no name, arguments that are not an object."""


@dataclass(frozen=True)
class ToolCall:
    """One call: the tool's name and its arguments (a JSON object)."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def to_action(self) -> str:
        """The call as the action string a world under the ``tools`` protocol steps on."""
        return json.dumps({"name": self.name, "arguments": dict(self.arguments)}, ensure_ascii=False)

    @classmethod
    def from_action(cls, action: str) -> ToolCall:
        """The call an action string holds (:meth:`to_action`'s form); :class:`ToolCallError`, with a reason a
        model can act on, when it holds none."""
        if len(action) > MAX_CALL_CHARS:
            raise ToolCallError(f"the tool call is {len(action)} characters long; at most {MAX_CALL_CHARS}")
        try:
            value = json.loads(action)
        except DECODE_ERRORS as error:
            raise ToolCallError(f"the tool call is not valid JSON ({_short(str(error))})") from None
        return call_from_object(value)


def call_from_object(value: Any, *, arguments_key: str = "arguments") -> ToolCall:
    """A decoded JSON value, ``{"name": ..., "arguments": {...}}`` (or another ``arguments_key``, e.g. Llama's
    ``parameters``), as a :class:`ToolCall`. Arguments given as a JSON string holding an object are accepted
    (some models write them so)."""
    if not isinstance(value, dict):
        raise ToolCallError(f"a tool call is a JSON object with \"name\" and \"{arguments_key}\", "
                            f"got {type(value).__name__}")
    name = value.get("name")
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        raise ToolCallError(f"the tool call's \"name\" must be a tool's name, got {_short(repr(name))}")
    arguments = value.get(arguments_key, value.get("arguments", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except DECODE_ERRORS:
            raise ToolCallError(f"the arguments of {name!r} are a string that is not a JSON object") from None
    if not isinstance(arguments, dict):
        raise ToolCallError(f"the arguments of {name!r} must be a JSON object, got {type(arguments).__name__}")
    return ToolCall(name, arguments)


def function_tool(name: str, description: str, properties: Mapping[str, Any],
                  required: Sequence[str] | None = None) -> dict[str, Any]:
    """One tool in the OpenAI function format (what chat templates take as ``tools=``): ``properties`` is the
    JSON Schema of each argument; all are required unless ``required`` says otherwise; no other argument is
    allowed."""
    if not TOOL_NAME.match(name):
        raise ValueError(f"tool names are 1-64 letters, digits, '_', '.' or '-', got {name!r}")
    parameters = {"type": "object", "properties": dict(properties),
                  "required": list(properties) if required is None else list(required),
                  "additionalProperties": False}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


def tool_names(tools: Sequence[Mapping[str, Any]]) -> list[str]:
    return [tool["function"]["name"] for tool in tools]


def check_call(call: ToolCall, tools: Sequence[Mapping[str, Any]]) -> str | None:
    """Why ``call`` is not a valid call of ``tools`` (None when it is): an unknown tool, or arguments that break
    the tool's JSON Schema (the first error, with where it is)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    spec = next((tool["function"] for tool in tools if tool["function"]["name"] == call.name), None)
    if spec is None:
        return f"unknown tool {_short(repr(call.name))}; the tools are {', '.join(tool_names(tools))}"
    error = best_match(Draft202012Validator(spec.get("parameters") or {"type": "object"}).iter_errors(
        dict(call.arguments)))
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path)
    return f"bad arguments for {call.name}{f' at {where}' if where else ''}: {_short(error.message)}"


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
