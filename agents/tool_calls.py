"""A model's native tool-call syntax, read back into :class:`~turngym.envs.tools.ToolCall` s.

Chat templates that take ``tools=`` teach the model one of a few call syntaxes:

* ``hermes`` (Hermes, Qwen 2.5/3, SmolLM3): ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``,
  one block per call, text allowed around the blocks;
* ``llama3`` (Llama 3.1-3.3): the whole reply is ``{"name": ..., "parameters": {...}}``, optionally after
  ``<|python_tag|>``;
* ``mistral``: ``[TOOL_CALLS]`` then a JSON list of ``{"name", "arguments"}`` objects (v3), or
  ``[TOOL_CALLS]name[ARGS]{...}`` per call (v11 and later).

:func:`syntax_of_template` picks the syntax from the template's text; a user can name one instead.
:func:`parse_tool_calls` never raises: it returns the calls it read and, when the reply holds a broken call
(truncated JSON, a missing closing tag, a bad name), the reason. ``<think>`` blocks are dropped first.

These parsers are written here rather than taken from transformers (whose ``parse_response`` needs a
per-model response schema most templates lack) or vLLM (its tool parsers need the vLLM server): a reply is
parsed the same way in training, evaluation and SFT rendering, offline.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from turngym.agents.actions import THINK_BLOCK
from turngym.envs.tools import DECODE_ERRORS, MAX_CALL_CHARS, ToolCall, ToolCallError, call_from_object

SYNTAXES = ("hermes", "llama3", "mistral")
_HERMES_BLOCK = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.DOTALL)
_MISTRAL_V11 = re.compile(r"\[TOOL_CALLS\]\s*([A-Za-z0-9_.-]+)\s*\[ARGS\]")


@dataclass
class ParsedReply:
    """What a reply held: its calls in order, and why a broken one could not be read (None if none was)."""

    calls: list[ToolCall] = field(default_factory=list)
    error: str | None = None


def syntax_of_template(template: str | None) -> str | None:
    """The call syntax a chat template teaches (None when it shows none)."""
    text = template or ""
    if "<tool_call>" in text:
        return "hermes"
    if "[TOOL_CALLS]" in text:
        return "mistral"
    if "<|python_tag|>" in text or "ipython" in text:
        return "llama3"
    return None


def parse_tool_calls(reply: str, syntax: str) -> ParsedReply:
    """The calls in ``reply`` written in ``syntax`` (one of :data:`SYNTAXES`); never raises."""
    if syntax not in SYNTAXES:
        raise ValueError(f"tool-call syntax must be one of {', '.join(SYNTAXES)}, got {syntax!r}")
    text = THINK_BLOCK.sub("", reply if isinstance(reply, str) else "")
    try:
        return {"hermes": _hermes, "llama3": _llama3, "mistral": _mistral}[syntax](text)
    except ToolCallError as error:
        return ParsedReply(error=str(error))
    except DECODE_ERRORS as error:  # a decoder's error the parsers missed is still a reason, never a crash
        return ParsedReply(error=f"the tool call cannot be read ({str(error)[:120]})")


def _hermes(text: str) -> ParsedReply:
    calls = []
    for body, closing in _HERMES_BLOCK.findall(text):
        if not closing:
            raise ToolCallError("the tool call is cut off: <tool_call> without </tool_call>")
        calls.append(_decode_call(body.strip()))
    return ParsedReply(calls)


def _llama3(text: str) -> ParsedReply:
    body = text.strip().removeprefix("<|python_tag|>").strip()
    if not body.startswith("{"):
        return ParsedReply()  # a plain answer, not a call
    return ParsedReply([_decode_call(body, arguments_key="parameters")])


def _mistral(text: str) -> ParsedReply:
    if "[TOOL_CALLS]" not in text:
        return ParsedReply()
    if _MISTRAL_V11.search(text):
        calls, decoder = [], json.JSONDecoder()
        for match in _MISTRAL_V11.finditer(text):
            rest = text[match.end():].lstrip()
            try:
                arguments, _ = decoder.raw_decode(rest[:MAX_CALL_CHARS])
            except DECODE_ERRORS:
                raise ToolCallError(f"the arguments of {match.group(1)!r} are not valid JSON") from None
            calls.append(call_from_object({"name": match.group(1), "arguments": arguments}))
        return ParsedReply(calls)
    calls = []
    for body in text.split("[TOOL_CALLS]")[1:]:  # each marker opens a list (or one object) of calls
        value = _decode(body.strip())
        calls += [call_from_object(item) for item in (value if isinstance(value, list) else [value])]
    return ParsedReply(calls)


def _decode_call(body: str, *, arguments_key: str = "arguments") -> ToolCall:
    return call_from_object(_decode(body), arguments_key=arguments_key)


def _decode(body: str):
    """The JSON value ``body`` starts with (trailing text, e.g. an end-of-turn marker, is ignored)."""
    if len(body) > MAX_CALL_CHARS:
        raise ToolCallError(f"the tool call is {len(body)} characters long; at most {MAX_CALL_CHARS}")
    try:
        value, _ = json.JSONDecoder().raw_decode(body)
    except DECODE_ERRORS as error:
        cut = (isinstance(error, json.JSONDecodeError) and "Expecting" in str(error)
               and error.pos >= len(body.rstrip()) - 1)
        reason = "cut off" if cut else "not valid JSON"
        raise ToolCallError(f"the tool call is {reason} ({str(error)[:120]})") from None
    return value


def format_tool_call(call: ToolCall, syntax: str) -> str:
    """The reply a model of ``syntax`` writes to make ``call`` (what SFT demos of tool-call episodes are);
    :func:`parse_tool_calls` reads it back as exactly ``call``."""
    arguments = json.dumps(dict(call.arguments), ensure_ascii=False)
    name = json.dumps(call.name)
    if syntax == "hermes":
        return f'<tool_call>\n{{"name": {name}, "arguments": {arguments}}}\n</tool_call>'
    if syntax == "llama3":
        return f'{{"name": {name}, "parameters": {arguments}}}'
    if syntax == "mistral":
        return f'[TOOL_CALLS][{{"name": {name}, "arguments": {arguments}}}]'
    raise ValueError(f"tool-call syntax must be one of {', '.join(SYNTAXES)}, got {syntax!r}")


def calls_action(calls: list[ToolCall]) -> str | None:
    """The action a reply's calls make: one call as its JSON; several, a JSON list (which a world refuses: one
    call a turn); none, None (an invalid action)."""
    if not calls:
        return None
    if len(calls) == 1:
        return calls[0].to_action()
    return json.dumps([{"name": c.name, "arguments": dict(c.arguments)} for c in calls], ensure_ascii=False)


def tools_instructions(tools: list[dict], syntax: str) -> str:
    """The tools and how to call them, for the system message of a model whose chat template ignores ``tools=``
    (written after Hermes' own instructions; the example call is in ``syntax``)."""
    signatures = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
    example = format_tool_call(ToolCall("<function-name>", {"<argument>": "<value>"}), syntax)
    return ("You may call one of these tools, given as JSON function signatures within <tools></tools> XML tags:\n"
            f"<tools>\n{signatures}\n</tools>\nTo call one, reply with exactly:\n{example}")
