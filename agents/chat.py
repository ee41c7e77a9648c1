"""Exact multi-turn token bookkeeping with a model's chat template.

An episode is kept as one growing list of token ids, never re-tokenised:

* the first prompt is the chat template's rendering of ``[system, user]`` with the generation prompt;
* each assistant turn is the ids the model sampled, ending with the end-of-turn token;
* each environment turn is the *delta* the template adds for that one user message after an
  assistant turn: everything after the assistant's end-of-turn token, up to and including the
  next generation prompt (e.g. ``"\\n<|im_start|>user\\n{obs}<|im_end|>\\n<|im_start|>assistant\\n"``).

The delta is rendered and tokenised once per message, from a fixed two-turn stand-in
conversation, so earlier turns are never decoded and encoded again (the re-tokenisation drift
other systems suffer). :func:`check_chat_template` tells whether a tokenizer's template is
append-only, i.e. whether rendering the whole history would give the same ids.

Templates that are *not* append-only (a thinking model's template that strips earlier ``<think>``
blocks, say) are handled by the same rule by default: turngym keeps the sequence append-only and exactly
as sampled. The model then sees its earlier thinking, which the template would have hidden, but every
token it was conditioned on while sampling is the token it is trained on, so training stays exact. With
``history: strip_thinking`` (:mod:`turngym.agents.histories`) the model is given its earlier replies as the
template writes them (:meth:`ChatFormat.history_text`), and each turn trains on its own context.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# Stand-in contents used to locate one message's delta inside the template's rendering.
_USER_STAND_IN = "turngym-user-stand-in"
_ASSISTANT_STAND_IN = "turngym-assistant-stand-in"


class ChatTemplateError(ValueError):
    """The tokenizer's chat template cannot be used for exact multi-turn bookkeeping."""


@dataclass(frozen=True)
class ChatFormat:
    """Renders the first prompt and each environment message's delta as token ids.

    Args:
        tokenizer: a Hugging Face tokenizer with a chat template.
        system_prompt: the system message (``None``: no system message; note that some templates,
            SmolLM2's among them, then insert their own).
        response_prefix: text the model's turn starts with, placed after the generation prompt
            (e.g. ``"Action:"``). It is part of the prompt side (masked out of the loss).
        tools: the world's tools under the ``tools`` protocol, passed to the template as ``tools=``; a tool's
            answer to a call is then rendered as the template's tool message (:meth:`tool_delta_ids`).
    """

    tokenizer: Any
    system_prompt: str | None = None
    response_prefix: str = ""
    tools: Any = None  # the world's tools (OpenAI function format), rendered by the template (``tools=``)

    def __post_init__(self) -> None:
        if not getattr(self.tokenizer, "chat_template", None):
            raise ChatTemplateError(
                f"{type(self.tokenizer).__name__} has no chat_template; set tokenizer.chat_template "
                "to a Jinja template (see transformers' chat templating docs)"
            )
        object.__setattr__(self, "_eot_text", _end_of_turn_text(self))
        ids = self.tokenizer.convert_tokens_to_ids(self._eot_text) if self._eot_text else None
        unk = getattr(self.tokenizer, "unk_token_id", None)
        if not isinstance(ids, int) or ids == unk:
            encoded = self.tokenizer.encode(self._eot_text, add_special_tokens=False) if self._eot_text else []
            if len(encoded) != 1:
                raise ChatTemplateError(
                    f"the chat template ends an assistant turn with {self._eot_text!r}, which is not one token; "
                    "exact bookkeeping needs a single end-of-turn token the model can sample"
                )
            ids = encoded[0]
        object.__setattr__(self, "_eot_id", int(ids))
        object.__setattr__(self, "_prefix_ids", self.encode(self.response_prefix))

    # ------------------------------------------------------------------ public
    @property
    def end_of_turn_id(self) -> int:
        """The token that ends an assistant turn (generation stops on it)."""
        return self._eot_id

    @property
    def end_of_turn_text(self) -> str:
        return self._eot_text

    def stop_ids(self) -> list[int]:
        """Token ids that end a turn: the end-of-turn token and the tokenizer's EOS."""
        ids = {self._eot_id}
        eos = getattr(self.tokenizer, "eos_token_id", None)
        if isinstance(eos, int):
            ids.add(eos)
        return sorted(ids)

    def line_break_ids(self) -> list[int]:
        """Every token whose text holds a line break (``\\n``): with a response prefix the action is the rest of
        its line, so these end the turn too (``LLMAgentConfig.stop_after_action``)."""
        return line_break_ids(self.tokenizer)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False)) if text else []

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = False) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def messages(self, first_user_message: str) -> list[dict[str, str]]:
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt is not None else []
        return [*system, {"role": "user", "content": first_user_message}]

    def prompt_ids(self, first_user_message: str, *, response_prefix: bool = True) -> list[int]:
        """The template's rendering of ``[system, user]`` with the generation prompt (and the response prefix,
        unless ``response_prefix`` is false)."""
        text = self._render(self.messages(first_user_message), add_generation_prompt=True)
        return self.encode(text) + (self._prefix_ids if response_prefix else [])

    def shared_prefix_ids(self) -> list[int]:
        """The first ids every episode's prompt starts with (the system prompt and the template's
        framing), found as the common part of two renderings with different user messages, less
        one token so that no token straddles the boundary."""
        a = self.encode(self._render(self.messages("A"), add_generation_prompt=True))
        b = self.encode(self._render(self.messages("Z"), add_generation_prompt=True))
        common = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        return a[: max(common - 1, 0)]

    def env_delta_ids(self, message: str) -> list[int]:
        """The ids the template adds for one user message after an assistant turn's end-of-turn
        token, through the next generation prompt (and response prefix)."""
        return self.encode(self.env_delta_text(message)) + self._prefix_ids

    def env_delta_text(self, message: str) -> str:
        stand_in = [
            *self.messages(_USER_STAND_IN),
            {"role": "assistant", "content": _ASSISTANT_STAND_IN},
        ]
        full = self._render([*stand_in, {"role": "user", "content": message}], add_generation_prompt=True)
        anchor = _ASSISTANT_STAND_IN + self._eot_text
        at = full.rfind(anchor)
        if at < 0:
            raise ChatTemplateError(
                f"the chat template does not write an assistant message as its content followed by {self._eot_text!r}; "
                "cannot locate one message's delta"
            )
        return full[at + len(anchor) :]

    def history_text(self, reply: str) -> str:
        """An earlier assistant reply as the template writes it once a user message follows (Qwen3's and
        DeepSeek-R1's drop its ``<think>`` block); ``reply`` itself where the template's rendering does not show
        where the reply's text is."""
        before = self.messages(_USER_STAND_IN)
        opened = self._render(before, add_generation_prompt=True)
        full = self._render([*before, {"role": "assistant", "content": reply},
                             {"role": "user", "content": _USER_STAND_IN + "-next"}], add_generation_prompt=False)
        end = full.rfind(self._eot_text, 0, full.rfind(_USER_STAND_IN + "-next"))
        if not full.startswith(opened) or end < len(opened):
            return reply
        return full[len(opened): end]

    def tool_delta_ids(self, result: str, name: str, call_id: str) -> list[int]:
        """The ids the template adds for a tool's answer (``role: tool``) to the call ``name`` the assistant turn
        made, after that turn's end-of-turn token, through the next generation prompt."""
        return self.encode(self.tool_delta_text(result, name, call_id)) + self._prefix_ids

    def tool_delta_text(self, result: str, name: str, call_id: str) -> str:
        # The stand-in turn makes the call, so templates that check a tool message follows one (Mistral's) render it.
        before = [*self.messages(_USER_STAND_IN), tool_call_message(name, {}, call_id)]
        closed = self._render(before, add_generation_prompt=False)
        full = self._render([*before, {"role": "tool", "tool_call_id": call_id, "name": name, "content": result}],
                            add_generation_prompt=True)
        cut = closed.rfind(self._eot_text)
        if cut < 0 or full[: cut + len(self._eot_text)] != closed[: cut + len(self._eot_text)]:
            raise ChatTemplateError(
                f"the chat template does not close a tool-calling assistant turn with {self._eot_text!r} and keep it "
                "when the tool's answer follows; cannot locate a tool message's delta")
        return full[cut + len(self._eot_text) :]

    # ------------------------------------------------------------------ helpers
    def _render(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool) -> str:
        extra = {"tools": self.tools} if self.tools else {}
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt,
                                                  **extra)


def tool_call_message(name: str, arguments: dict[str, Any], call_id: str, content: str = "") -> dict[str, Any]:
    """An assistant message that calls ``name``, as chat templates take it."""
    return {"role": "assistant", "content": content,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]}


def _end_of_turn_text(chat: ChatFormat) -> str:
    """What the template writes right after an assistant message's content: its end-of-turn token.

    Found by rendering a stand-in conversation and reading the special token that follows the
    assistant's content (falling back to the tokenizer's EOS token).
    """
    rendered = chat._render(
        [*chat.messages(_USER_STAND_IN), {"role": "assistant", "content": _ASSISTANT_STAND_IN}],
        add_generation_prompt=False,
    )
    at = rendered.rfind(_ASSISTANT_STAND_IN)
    if at < 0:
        raise ChatTemplateError("the chat template drops assistant messages; it cannot render a multi-turn episode")
    after = rendered[at + len(_ASSISTANT_STAND_IN) :]
    specials = sorted(getattr(chat.tokenizer, "all_special_tokens", []) or [], key=len, reverse=True)
    decoder = getattr(chat.tokenizer, "added_tokens_decoder", {}) or {}
    added = [t.content if hasattr(t, "content") else str(t) for t in decoder.values()]
    for token in [*specials, *sorted(added, key=len, reverse=True)]:
        if token and after.startswith(token):
            return token
    eos = getattr(chat.tokenizer, "eos_token", None)
    if eos and after.startswith(eos):
        return eos
    raise ChatTemplateError(
        f"the chat template follows an assistant message with {after[:20]!r}, not a special end-of-turn token"
    )


# ---------------------------------------------------------------------- conformance check
@dataclass
class Drift:
    """One way the template's own rendering differs from turngym's append-only sequence."""

    kind: str  # "history_rewritten" | "token_boundary" | "text_after_end_of_turn"
    turn: int
    detail: str


@dataclass
class TemplateReport:
    """Whether a chat template is append-only, and how any drift shows.

    ``append_only``: rendering the history after each turn extends the previous rendering
    (no earlier text changes). ``token_exact``: tokenising the template's rendering of the
    whole episode gives exactly turngym's ids. ``text_after_end_of_turn`` is what the template
    writes after an assistant's end-of-turn token (``"\\n"`` for ChatML); turngym puts it in
    the following environment delta, so the model is never trained to produce it.
    """

    end_of_turn: str
    text_after_end_of_turn: str
    append_only: bool
    token_exact: bool
    drifts: list[Drift] = field(default_factory=list)

    @property
    def exact_training(self) -> bool:
        """Always true: turngym trains on the ids it sampled with, whatever the template does."""
        return True

    def summary(self) -> str:
        lines = [
            f"end-of-turn token {self.end_of_turn!r}, then {self.text_after_end_of_turn!r} (kept in the env delta)",
            (
                f"append-only: {'yes' if self.append_only else 'NO'}; whole-history tokenisation equals turngym's ids: "
                f"{'yes' if self.token_exact else 'NO'}"
            ),
        ]
        lines += [f"  turn {d.turn}: {d.kind}: {d.detail}" for d in self.drifts]
        if not self.append_only:
            lines.append(
                "  fallback: turngym keeps the episode append-only, exactly as sampled; training stays exact, "
                "but the model sees history the template would have rewritten (history: strip_thinking gives it "
                "the template's history, each turn trained on its own context)"
            )
        return "\n".join(lines)


_PROBE_TURNS = (
    ("You are in a kitchen. There is a fridge.", "<think>\nThe fridge may hold food.\n</think>\nopen fridge"),
    ("You open the fridge. It contains an apple.", "<think>\nTake it.\n</think>\ntake apple"),
    ("You take the apple.\n\n  Indented line, trailing spaces  ", "eat apple"),
)


def check_chat_template(
    tokenizer: Any,
    *,
    system_prompt: str | None = "You are playing a text game.",
    turns: Sequence[tuple[str, str]] = _PROBE_TURNS,
    tools: bool = False,
    tool_syntax: str | None = None,
) -> TemplateReport:
    """Play a scripted episode through :class:`ChatFormat` and compare with the template's own
    rendering of the whole history after every turn.

    ``turns`` are (user message, assistant reply) pairs; the default includes ``<think>`` blocks,
    so a template that strips earlier thinking shows up as ``history_rewritten``. With ``tools`` the
    template is given a ``command`` tool, every reply calls it (written in ``tool_syntax``, default the
    template's) with the reply's last line, and every later message is the tool's answer (a ``tool`` message).
    """
    from turngym.agents.tool_calls import format_tool_call, syntax_of_template
    from turngym.envs.tools import ToolCall, function_tool

    probe_tools = [function_tool("command", "A command for the world.", {"command": {"type": "string"}})]
    chat = ChatFormat(tokenizer, system_prompt=system_prompt, tools=probe_tools if tools else None)
    syntax = (tool_syntax or syntax_of_template(tokenizer.chat_template)) if tools else None
    if tools and syntax is None:
        raise ChatTemplateError("the chat template shows no tool-call syntax; name one (tool_syntax)")
    messages = chat.messages(turns[0][0])
    ids = chat.prompt_ids(turns[0][0])
    drifts: list[Drift] = []
    append_only = token_exact = True
    previous_text = chat._render(messages, add_generation_prompt=True)
    for turn, (_, reply) in enumerate(turns, start=1):
        call_id = f"call{turn:05d}"
        if tools:
            call = ToolCall("command", {"command": reply.split("\n")[-1]})
            ids += chat.encode(format_tool_call(call, syntax)) + [chat.end_of_turn_id]
            messages.append(tool_call_message(call.name, dict(call.arguments), call_id))
        else:
            ids += chat.encode(reply) + [chat.end_of_turn_id]
            messages.append({"role": "assistant", "content": reply})
        renders = [chat._render(messages, add_generation_prompt=False)]
        more = turn < len(turns)
        if more:
            answer = turns[turn][0]
            if tools:
                ids += chat.tool_delta_ids(answer, "command", call_id)
                messages.append({"role": "tool", "tool_call_id": call_id, "name": "command", "content": answer})
            else:
                ids += chat.env_delta_ids(answer)
                messages.append({"role": "user", "content": answer})
            renders.append(chat._render(messages, add_generation_prompt=True))
        for rendered in renders:
            if append_only and not rendered.startswith(previous_text):
                append_only = False
                at = _first_difference(previous_text, rendered)
                drifts.append(Drift("history_rewritten", turn,
                                    f"at character {at}: had {previous_text[at:at + 40]!r}, "
                                    f"now {rendered[at:at + 40]!r}"))
            previous_text = rendered
        # a finished episode's rendering may end with text after the last end-of-turn token: compare the common part
        template_ids = chat.encode(rendered)[: len(ids)]
        if template_ids != ids:
            token_exact = False
            if append_only and not any(d.kind == "token_boundary" for d in drifts):
                at = _first_difference(template_ids, ids)
                drifts.append(Drift("token_boundary", turn,
                                    f"token {at}: template {template_ids[at:at + 3]} vs turngym {ids[at:at + 3]}"))
    after = chat._render(
        [*chat.messages(_USER_STAND_IN), {"role": "assistant", "content": _ASSISTANT_STAND_IN}],
        add_generation_prompt=False,
    ).split(_ASSISTANT_STAND_IN + chat.end_of_turn_text, 1)[-1]
    if after:
        drifts.insert(0, Drift("text_after_end_of_turn", 0,
                               f"the template writes {after!r} after {chat.end_of_turn_text!r}; "
                               "turngym keeps it in the env delta"))
    return TemplateReport(chat.end_of_turn_text, after, append_only, token_exact, drifts)


def _first_difference(a: Sequence[Any], b: Sequence[Any]) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


_LINE_BREAKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def line_break_ids(tokenizer: Any) -> list[int]:
    """Ids of the vocabulary's tokens that decode to text holding ``\\n`` (each tokenizer's, found once).

    Decoded rather than matched by token string: byte-level BPE writes a newline as ``Ċ``, SentencePiece as
    ``<0x0A>``, and a token may carry one inside (``".\\n"``)."""
    try:
        return _LINE_BREAKS[tokenizer]
    except (KeyError, TypeError):
        pass
    texts = tokenizer.batch_decode([[i] for i in range(len(tokenizer))])
    ids = [i for i, text in enumerate(texts) if "\n" in text]
    try:
        _LINE_BREAKS[tokenizer] = ids
    except TypeError:  # a tokenizer that cannot be weakly referenced is not cached
        pass
    return ids
