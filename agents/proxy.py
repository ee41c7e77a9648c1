"""What the OpenAI-compatible proxy keeps of each call: the exact ids a harness's model call was given and sampled.

A user's own agent (a loop written against the ``openai`` package, a framework, a coding harness) talks to the
policy through ``/v1/chat/completions`` (:mod:`turngym.agents.proxy_server`). Each call is kept as a
:class:`CapturedCall`: the prompt ids the model was given, the ids it sampled and their logprobs, keyed by the
episode the harness names. Each call later trains as one sample on its own context (the per-turn layout of
:class:`~turngym.agents.records.TokenRecord`), so what is trained is always what was sampled.

How a call's prompt ids are made (:class:`PromptBuilder`):

* **splice** (the default): when the request's messages are an earlier call's messages, that call's reply as the
  proxy returned it, and new messages after it, the prompt is that call's prompt ids, the ids it sampled (closed
  with the end-of-turn token when the model did not stop on its own) and the template's rendering of the new
  messages: the history is the model's own tokens, never re-tokenised (the rule :class:`~turngym.agents.llm.LLMAgent`
  follows, so a harness playing like it gets the same ids);
* otherwise, and always in **template** mode, the chat template renders the whole request.

A call whose prompt does not extend an earlier call's prompt and sampled ids is **rewritten**: the harness (or a
template that strips earlier reasoning) changed the history. It is marked, and trains on its own context or is
dropped (``on_rewrite``); it is never stitched onto ids the model did not sample.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from turngym.agents.chat import ChatFormat
from turngym.agents.records import TokenRecord
from turngym.agents.tool_calls import parse_tool_calls, syntax_of_template

ROLES = ("system", "developer", "user", "assistant", "tool")
REWRITE_POLICIES = ("own_context", "drop")
MAX_MESSAGES = 4096


class ProxyRequestError(ValueError):
    """A request the proxy refuses, with what the OpenAI API would answer: HTTP status, error type and code."""

    def __init__(self, message: str, *, status: int = 400, code: str | None = None, param: str | None = None,
                 kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.code, self.param, self.kind = status, code, param, kind

    def body(self) -> dict[str, Any]:
        """The OpenAI error body: ``{"error": {"message", "type", "param", "code"}}``."""
        return {"error": {"message": str(self), "type": self.kind, "param": self.param, "code": self.code}}


@dataclass
class CapturedCall:
    """One model call of a harness's episode, as the exact ids the model was given and sampled.

    ``rewritten``: the prompt does not extend an earlier call's prompt and sampled ids (the history was edited).
    ``delivered``: the reply reached the client (False when it disconnected first: the harness never saw it).
    """

    episode: str
    index: int  # the call's number in its episode (arrival order)
    choice: int  # which of the request's ``n`` samples
    messages: list[dict[str, Any]]  # the request's messages, normalised
    tools: list[dict[str, Any]] | None
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    stopped: bool  # the last sampled id is a stop token (the model ended its turn itself)
    finish_reason: str  # "stop" | "length" | "tool_calls"
    reply: dict[str, Any]  # the assistant message returned
    parent: tuple[int, int] | None = None  # (index, choice) of the call whose reply this call's history extends
    rewritten: bool = False
    delivered: bool = True
    version: int = 0  # the policy version that sampled it (optimizer steps)
    created: float = field(default_factory=time.time)

    @property
    def key(self) -> tuple[int, int]:
        return (self.index, self.choice)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------- request messages
def normalise_messages(messages: Any) -> list[dict[str, Any]]:
    """The request's messages in the form chat templates take; :class:`ProxyRequestError` naming the bad field.

    Text parts (``[{"type": "text", "text": ...}]``) are joined; ``developer`` is a system message; an assistant
    message's tool-call arguments, a JSON string in the API, become the object templates render."""
    if not isinstance(messages, list) or not messages:
        raise ProxyRequestError("'messages' must be a non-empty list", param="messages")
    if len(messages) > MAX_MESSAGES:
        raise ProxyRequestError(f"'messages' holds {len(messages)} messages; at most {MAX_MESSAGES}",
                                param="messages")
    return [_message(m, f"messages[{i}]") for i, m in enumerate(messages)]


def _message(message: Any, where: str) -> dict[str, Any]:
    if not isinstance(message, dict):
        raise ProxyRequestError(f"{where} must be an object with a 'role'", param=where)
    role = message.get("role")
    if role not in ROLES:
        raise ProxyRequestError(f"{where}.role must be one of {', '.join(ROLES)}, got {role!r}", param=where)
    out: dict[str, Any] = {"role": "system" if role == "developer" else role,
                           "content": _content(message.get("content"), f"{where}.content")}
    if role == "assistant" and message.get("tool_calls"):
        out["tool_calls"] = [_tool_call(c, f"{where}.tool_calls[{j}]")
                             for j, c in enumerate(_list(message["tool_calls"], f"{where}.tool_calls"))]
    if role == "tool":
        out["tool_call_id"] = str(message.get("tool_call_id") or "")
    if isinstance(message.get("name"), str):
        out["name"] = message["name"]
    return out


def _list(value: Any, where: str) -> list:
    if not isinstance(value, list):
        raise ProxyRequestError(f"{where} must be a list", param=where)
    return value


def _content(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise ProxyRequestError(f"{where}: only text parts are served by a text policy, got {kind!r}",
                                        param=where)
            texts.append(part["text"])
        return "".join(texts)
    raise ProxyRequestError(f"{where} must be a string or a list of text parts", param=where)


def _tool_call(call: Any, where: str) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise ProxyRequestError(f"{where} must be {{'type': 'function', 'function': {{'name', 'arguments'}}}}",
                                param=where)
    return {"id": str(call.get("id") or ""), "type": "function",
            "function": {"name": function["name"], "arguments": _arguments(function.get("arguments"))}}


def _arguments(arguments: Any) -> Any:
    """A call's arguments as templates render them: the object a JSON string holds (else the string itself)."""
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except ValueError:
            return arguments
        return value if isinstance(value, dict) else arguments
    return arguments if arguments is not None else {}


def normalise_tools(tools: Any) -> list[dict[str, Any]] | None:
    """The request's ``tools`` (OpenAI function format), checked; None when there are none."""
    if tools is None or tools == []:
        return None
    for i, tool in enumerate(_list(tools, "tools")):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not (isinstance(tool, dict) and tool.get("type", "function") == "function" and isinstance(function, dict)
                and isinstance(function.get("name"), str)):
            raise ProxyRequestError(f"tools[{i}] must be {{'type': 'function', 'function': {{'name', ...}}}}",
                                    param=f"tools[{i}]")
    return tools


def same_message(sent: dict[str, Any], returned: dict[str, Any]) -> bool:
    """Whether the harness sent back ``returned`` (the proxy's reply) unchanged: the same text and the same calls
    (names and arguments; call ids may be the harness's own)."""
    if sent.get("role") != "assistant" or sent.get("content", "") != returned.get("content", ""):
        return False
    calls = [(c["function"]["name"], c["function"]["arguments"]) for c in sent.get("tool_calls", [])]
    mine = [(c["function"]["name"], _arguments(c["function"]["arguments"])) for c in returned.get("tool_calls", [])]
    return calls == mine


# ---------------------------------------------------------------------- prompt ids
@dataclass
class Prompt:
    """A request's prompt: its ids, the call whose reply it extends (if any), and whether it was rewritten."""

    ids: list[int]
    parent: tuple[int, int] | None
    rewritten: bool


class PromptBuilder:
    """A request's prompt ids from the chat template, splicing in the ids of earlier calls (see the module doc).

    Args:
        tokenizer: the policy's tokenizer and chat template.
        render: ``"splice"`` (an earlier call's sampled ids stand for its reply) or ``"template"`` (the template
            renders every request whole).
    """

    def __init__(self, tokenizer: Any, *, render: str = "splice") -> None:
        if render not in ("splice", "template"):
            raise ValueError(f"render must be 'splice' or 'template', got {render!r}")
        self.tokenizer, self.render = tokenizer, render
        self.chat = ChatFormat(tokenizer)
        self.stop_ids = self.chat.stop_ids()
        self.syntax = syntax_of_template(getattr(tokenizer, "chat_template", None))

    def text(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, *,
             generation_prompt: bool) -> str:
        extra = {"tools": tools} if tools else {}
        try:
            return self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                      add_generation_prompt=generation_prompt, **extra)
        except Exception as error:  # noqa: BLE001 - a template raises what its Jinja code raises (TemplateError...)
            raise ProxyRequestError(f"the model's chat template cannot render these messages: "
                                    f"{type(error).__name__}: {str(error)[:200]}", param="messages") from None

    def encode(self, text: str) -> list[int]:
        return self.chat.encode(text)

    def build(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
              earlier: Sequence[CapturedCall]) -> Prompt:
        """The prompt of a request whose episode made the calls ``earlier`` (in arrival order)."""
        parent = self._parent(messages, tools, earlier)
        if parent is not None and self.render == "splice":
            spliced = self._splice(parent, messages, tools)
            if spliced is not None:
                return Prompt(spliced, parent.key, False)
        ids = self.encode(self.text(messages, tools, generation_prompt=True))
        if parent is None:  # the history is not an earlier call's reply: does it extend any call's ids at all?
            extended = [c for c in earlier if c.delivered and _starts_with(ids, c.prompt_ids + c.completion_ids)]
            parent = max(extended, key=lambda c: c.key) if extended else None
        rewritten = bool(earlier) and (parent is None or not _starts_with(ids, parent.prompt_ids
                                                                           + parent.completion_ids))
        return Prompt(ids, parent.key if parent is not None else None, rewritten)

    def _parent(self, messages: list[dict[str, Any]], tools: Any,
                earlier: Sequence[CapturedCall]) -> CapturedCall | None:
        """The latest call whose messages and reply begin ``messages`` (the harness continued its reply)."""
        for call in reversed(earlier):
            n = len(call.messages)
            if (call.delivered and call.tools == tools and len(messages) > n and messages[:n] == call.messages
                    and same_message(messages[n], call.reply)):
                return call
        return None

    def _splice(self, parent: CapturedCall, messages: list[dict[str, Any]], tools: Any) -> list[int] | None:
        """``parent``'s ids, its sampled ids (closed) and the template's text for the messages after its reply;
        None when the template does not end the reply with its end-of-turn token (then: render whole).

        The new messages' text starts after the end-of-turn token that closes ``parent``'s reply: the n-th in the
        whole rendering, n counted in the rendering that ends with that reply (a template that rewrites the
        history before it, stripping earlier reasoning, changes the text but not the number of turns)."""
        n = len(parent.messages) + 1
        closed = self.text(messages[:n], tools, generation_prompt=False)
        whole = self.text(messages, tools, generation_prompt=True)
        eot = self.chat.end_of_turn_text
        turns = closed.count(eot)
        if turns == 0 or closed[closed.rfind(eot) + len(eot):].strip():  # the reply is not closed by it
            return None
        at = -len(eot)
        for _ in range(turns):
            at = whole.find(eot, at + len(eot))
            if at < 0:
                return None
        end = [] if parent.stopped else [self.chat.end_of_turn_id]  # as LLMAgent closes a turn it did not end
        return parent.prompt_ids + parent.completion_ids + end + self.encode(whole[at + len(eot):])


def _starts_with(ids: Sequence[int], prefix: Sequence[int]) -> bool:
    return len(ids) >= len(prefix) and list(ids[: len(prefix)]) == list(prefix)


# ---------------------------------------------------------------------- replies
def cut_at_stop(ids: list[int], decode: Callable[[list[int]], str], stops: Sequence[str]) -> tuple[int, str] | None:
    """Where a stop string first appears in the decoded ``ids``: (how many ids it takes, the text before it), or
    None. Found by bisection (decoding a prefix only grows its text)."""
    text = decode(ids)
    found = [(text.find(s), s) for s in stops if s and s in text]
    if not found:
        return None
    at, stop = min(found)
    low, high = 1, len(ids)
    while low < high:
        middle = (low + high) // 2
        if stop in decode(ids[:middle]) and decode(ids[:middle]).find(stop) == at:
            high = middle
        else:
            low = middle + 1
    return low, text[:at]


def reply_message(text: str, *, tools: list[dict[str, Any]] | None, tool_choice: Any, syntax: str | None,
                  call_prefix: str) -> tuple[dict[str, Any], bool]:
    """The assistant message for a sampled ``text``: its tool calls read in the template's syntax when the request
    offered tools (and ``tool_choice`` is not ``"none"``); whether it holds calls."""
    if tools and tool_choice != "none" and syntax is not None:
        parsed = parse_tool_calls(text, syntax)
        if parsed.calls and parsed.error is None:
            calls = [{"id": f"{call_prefix}_{i}", "type": "function",
                      "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments), ensure_ascii=False)}}
                     for i, c in enumerate(parsed.calls)]
            return {"role": "assistant", "content": _outside_calls(text, syntax), "tool_calls": calls}, True
    return {"role": "assistant", "content": text}, False


def _outside_calls(text: str, syntax: str) -> str | None:
    """The reply's text around its calls (None when there is none, as the API sends)."""
    if syntax == "hermes":
        rest = re.sub(r"<tool_call>.*?</tool_call>", "", text, flags=re.DOTALL).strip()
    elif syntax == "mistral":
        rest = text.split("[TOOL_CALLS]", 1)[0].strip()
    else:
        rest = ""
    return rest or None


# ---------------------------------------------------------------------- the calls of every episode
class UnknownEpisode(ProxyRequestError):
    def __init__(self, episode: str) -> None:
        super().__init__(f"no open episode {episode!r}: open it first (the trainer opens each episode it plays)",
                         status=404, code="episode_not_found", param="episode")


class CallStore:
    """Every episode's calls, in arrival order; safe across threads.

    Args:
        open_episodes: a request may name any episode (it is opened on first use); else only episodes opened with
            :meth:`open` are served (training: each call belongs to an episode the trainer plays).
        sink: called with each call once it is recorded (e.g. appended to a JSONL file).
        max_episodes: open episodes kept at most; past it the least recently used one is forgotten (a long-lived
            proxy's memory stays bounded; its calls are in the sink, if any).
        max_calls: calls one episode may make (each request scans its episode's calls for the one it continues).
    """

    def __init__(self, *, open_episodes: bool = True, sink: Callable[[CapturedCall], None] | None = None,
                 max_episodes: int = 10_000, max_calls: int = 4_096) -> None:
        self.open_episodes, self.sink = open_episodes, sink
        self.max_episodes, self.max_calls = max_episodes, max_calls
        self._calls: dict[str, list[CapturedCall]] = {}
        self._next: dict[str, int] = {}
        self._lock = threading.Lock()

    def open(self, episode: str) -> None:
        with self._lock:
            if episode in self._calls:
                raise ValueError(f"episode {episode!r} is already open")
            self._calls[episode], self._next[episode] = [], 0

    def close(self, episode: str) -> list[CapturedCall]:
        """The episode's calls (in arrival order); later requests naming it are refused (unless episodes are
        open)."""
        with self._lock:
            self._next.pop(episode, None)
            return sorted(self._calls.pop(episode, []), key=lambda c: c.key)

    def begin(self, episode: str) -> tuple[int, list[CapturedCall]]:
        """A number for a new call of ``episode`` and the calls recorded so far."""
        with self._lock:
            if episode not in self._next:
                if not self.open_episodes:
                    raise UnknownEpisode(episode)
                self._calls[episode], self._next[episode] = [], 0
                while len(self._next) > self.max_episodes:  # forget the least recently used
                    oldest = next(iter(self._next))
                    self._next.pop(oldest)
                    self._calls.pop(oldest, None)
            index = self._next.pop(episode)
            if index >= self.max_calls:
                self._next[episode] = index
                raise ProxyRequestError(f"episode {episode!r} has made {index} calls, the most one episode may "
                                        "make; start another episode", code="episode_too_long", param="episode")
            self._next[episode] = index + 1  # re-inserted: the most recently used
            return index, list(self._calls[episode])

    def add(self, calls: Sequence[CapturedCall]) -> None:
        with self._lock:
            kept = self._calls.get(calls[0].episode) if calls else None
            if kept is None:
                return  # closed while the call was generating: the episode's samples were already taken
            kept.extend(calls)
        if self.sink is not None:
            for call in calls:
                self.sink(call)

    def undelivered(self, episode: str, index: int) -> None:
        """The reply of call ``index`` never reached its client (it disconnected): no later call continues it."""
        with self._lock:
            for call in self._calls.get(episode, []):
                if call.index == index:
                    call.delivered = False

    def count(self, episode: str) -> int:
        """Calls begun in ``episode`` so far."""
        with self._lock:
            return self._next.get(episode, 0)

    def episodes(self) -> list[str]:
        with self._lock:
            return list(self._calls)


# ---------------------------------------------------------------------- calls as training samples
def chosen_calls(calls: Sequence[CapturedCall], on_rewrite: str = "own_context") -> list[CapturedCall]:
    """The calls an episode trains on, in order: per call number, the choice a later call continued (else the
    first), delivered to the harness; a rewritten call kept (``own_context``) or left out (``drop``)."""
    if on_rewrite not in REWRITE_POLICIES:
        raise ValueError(f"on_rewrite must be one of {', '.join(REWRITE_POLICIES)}, got {on_rewrite!r}")
    continued = {c.parent for c in calls if c.parent is not None}
    by_index: dict[int, list[CapturedCall]] = {}
    for call in calls:
        if call.delivered and not (call.rewritten and on_rewrite == "drop"):
            by_index.setdefault(call.index, []).append(call)
    chosen = []
    for index in sorted(by_index):
        options = sorted(by_index[index], key=lambda c: c.choice)
        chosen.append(next((c for c in options if c.key in continued), options[0]))
    return chosen


def calls_record(calls: Sequence[CapturedCall], end_of_turn_id: int) -> TokenRecord:
    """A harness's episode as a :class:`~turngym.agents.records.TokenRecord` whose turns are its calls (already
    chosen, in order)::

        contexts[t]                   the prompt ids call t was given (whatever the harness sent)
        completion_ids = a_1 a_2 ... a_T
            a_t  the ids call t sampled (env_mask 1), closed with an end-of-turn token it did not sample (env_mask 0)

    ``context_ids(t)`` is ``contexts[t]``, so ``turn_sample(t)`` (the per-turn layout) trains call t on exactly what
    it was given; the calls need not extend each other, so the episode never trains as one sequence.
    """
    from turngym.agents.generation import Generation

    record = TokenRecord(prompt_ids=list(calls[0].prompt_ids) if calls else [])
    for call in calls:
        record.add_context(call.prompt_ids)
        record.add_model_turn(Generation(list(call.completion_ids), list(call.logprobs), call.stopped),
                              end_of_turn_id)
        record.replies.append(call.reply.get("content") or "")
        record.actions.append(json.dumps(call.reply.get("tool_calls"), ensure_ascii=False)
                              if call.reply.get("tool_calls") else call.reply.get("content"))
    return record
