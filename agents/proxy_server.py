"""The policy behind an OpenAI-compatible endpoint: ``/v1/chat/completions`` and ``/v1/models``, every call kept.

:class:`PolicyService` answers one request (validated as the OpenAI API does, rendered by the model's own chat
template, tools included, sampled through a :class:`~turngym.agents.proxy_sampler.BatchingSampler`) and records
each sample as a :class:`~turngym.agents.proxy.CapturedCall`. :func:`build_app` serves it over HTTP (FastAPI), and
:class:`ProxyServer` runs that app on a thread (training, tests); ``turngym proxy`` runs it in the foreground.

A call names its episode, first found wins:

1. the base URL: ``http://HOST:PORT/episodes/EPISODE/v1`` (nothing in the harness changes but its base URL);
2. the header ``X-Turngym-Episode: EPISODE``;
3. the request's ``user`` field.

With none, the call is an episode of its own. Errors are the API's: ``{"error": {"message", "type", "param",
"code"}}`` with its HTTP status (400 bad request, 401 no token, 404 unknown episode, 413 too large, 429 too many
at once, 500 the backend failed), which the ``openai`` client raises as its own exception classes.

What is not served: images and audio (a text policy), ``logit_bias``, penalties, ``top_logprobs`` and structured
``response_format`` (each would change what is sampled or needs what the backend does not return), and forced
tool choice: ``tool_choice`` ``"required"`` or a named function is accepted, but a reply without a call comes back
as text (no constrained decoding).
"""


import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Self

from turngym.agents.base import stable_seed
from turngym.agents.generation import Generation, GenerationRequest, SamplingConfig
from turngym.agents.proxy import (
    CallStore,
    CapturedCall,
    PromptBuilder,
    ProxyRequestError,
    cut_at_stop,
    normalise_messages,
    normalise_tools,
    reply_message,
)
from turngym.agents.proxy_sampler import BatchingSampler
from turngym.envs.serving import (
    bearer_matches,
    bind_socket,
    check_serving_token,
    http_settings,
    resolve_token,
)

logger = logging.getLogger(__name__)

PROXY_TOKEN_ENV = "TURNGYM_PROXY_TOKEN"
EPISODE_HEADER = "x-turngym-episode"
MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_STOPS = 4
EPISODE_ID = re.compile(r"[A-Za-z0-9._:-]{1,200}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass
class ProxySettings:
    """How the proxy samples and what it accepts.

    ``max_context``: prompt and reply tokens at most (the model's positions); ``default_max_tokens``: a reply's
    tokens when the request names none; ``max_pending``: requests in flight at once (more get 429).
    """

    model_name: str = "turngym-policy"
    render: str = "splice"
    max_context: int = 4096
    default_max_tokens: int = 512
    max_n: int = 16
    seed: int = 0
    max_pending: int = 4096
    version: int = 0  # the policy version sampling now (in training: the rollout batches played so far)
    force_temperature: float | None = None  # training: every call samples at the trainer's temperature


@dataclass
class Completion:
    """One answered request: the API's response body and the calls it recorded (one per choice)."""

    body: dict[str, Any]
    calls: list[CapturedCall] = field(default_factory=list)
    stream: bool = False  # the client asked for server-sent events
    include_usage: bool = False


@dataclass
class _Request:
    """A validated request."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    tool_choice: Any
    n: int
    sampling: SamplingConfig
    stops: list[str]
    seed: int | None
    logprobs: bool
    stream: bool
    include_usage: bool


@dataclass
class _Pending:
    """A checked request with its prompt, waiting for its generations."""

    request: _Request
    episode: str
    index: int
    prompt: Any
    sampling: SamplingConfig
    requests: list[GenerationRequest]


def check_episode_id(episode: Any) -> str:
    """An episode id a client may name: 1-200 printable ASCII characters (it keys the calls and is logged)."""
    if not (isinstance(episode, str) and EPISODE_ID.fullmatch(episode)):
        shown = repr(episode)[:60]
        raise ProxyRequestError(f"an episode id is 1-200 letters, digits and . _ : - characters; got {shown}",
                                param="episode", code="invalid_episode_id")
    return episode


def parse_request(body: Any, settings: ProxySettings) -> _Request:
    """A chat-completions body checked as the API checks it; :class:`ProxyRequestError` naming the field."""
    if not isinstance(body, dict):
        raise ProxyRequestError("the request body must be a JSON object")
    if not isinstance(body.get("model"), str):
        raise ProxyRequestError("'model' is required (a string)", param="model")
    n = body.get("n", 1) if body.get("n") is not None else 1
    if not _is_int(n) or not 1 <= n <= settings.max_n:
        raise ProxyRequestError(f"'n' must be an integer from 1 to {settings.max_n}", param="n")
    temperature = body.get("temperature", 1.0)
    temperature = 1.0 if temperature is None else temperature
    if not _is_number(temperature) or not 0 <= temperature <= 2:
        raise ProxyRequestError("'temperature' must be a number from 0 to 2", param="temperature")
    top_p = 1.0 if body.get("top_p") is None else body["top_p"]
    if not _is_number(top_p) or not 0 < top_p <= 1:
        raise ProxyRequestError("'top_p' must be a number in (0, 1]", param="top_p")
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if limit is not None and (not _is_int(limit) or limit < 1):
        raise ProxyRequestError("'max_tokens' must be a positive integer", param="max_tokens")
    stops = body.get("stop")
    stops = [] if stops is None else [stops] if isinstance(stops, str) else stops
    if not (isinstance(stops, list) and len(stops) <= MAX_STOPS and all(isinstance(s, str) and s for s in stops)):
        raise ProxyRequestError(f"'stop' must be a string or a list of at most {MAX_STOPS} non-empty strings",
                                param="stop")
    seed = body.get("seed")
    if seed is not None and not _is_int(seed):
        raise ProxyRequestError("'seed' must be an integer", param="seed")
    _refuse_unserved(body)
    options = body.get("stream_options") or {}
    return _Request(
        messages=normalise_messages(body.get("messages")), tools=normalise_tools(body.get("tools")),
        tool_choice=body.get("tool_choice", "auto"), n=n,
        sampling=SamplingConfig(float(temperature), float(top_p), 0, int(limit or settings.default_max_tokens)),
        stops=stops, seed=seed, logprobs=bool(body.get("logprobs")), stream=bool(body.get("stream")),
        include_usage=isinstance(options, dict) and bool(options.get("include_usage")))


def _refuse_unserved(body: dict[str, Any]) -> None:
    """Options that would change what is sampled, or ask for what the backend does not return."""
    for name in ("presence_penalty", "frequency_penalty"):
        if body.get(name) not in (None, 0, 0.0):
            raise ProxyRequestError(f"'{name}' is not served: it would change the distribution the policy is "
                                    "trained on", param=name, code="unsupported_parameter")
    if body.get("logit_bias"):
        raise ProxyRequestError("'logit_bias' is not served: it would change the distribution the policy is "
                                "trained on", param="logit_bias", code="unsupported_parameter")
    if body.get("top_logprobs") not in (None, 0):
        raise ProxyRequestError("'top_logprobs' is not served: the backend returns the sampled token's logprob "
                                "only", param="top_logprobs", code="unsupported_parameter")
    fmt = body.get("response_format")
    if fmt not in (None, {"type": "text"}):
        raise ProxyRequestError("'response_format' other than text is not served (no constrained decoding)",
                                param="response_format", code="unsupported_parameter")


class PolicyService:
    """Answers chat-completion requests with a policy and keeps every call (see the module doc).

    Args:
        tokenizer: the policy's tokenizer and chat template.
        sampler: generates (and batches) for every request.
        store: where the calls go, by episode.
        settings: see :class:`ProxySettings`.
    """

    def __init__(self, tokenizer: Any, sampler: BatchingSampler, store: CallStore | None = None,
                 settings: ProxySettings | None = None) -> None:
        self.tokenizer, self.sampler = tokenizer, sampler
        self.store = store or CallStore()
        self.settings = settings or ProxySettings()
        self.prompts = PromptBuilder(tokenizer, render=self.settings.render)
        self._pending = 0
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ one request
    def complete(self, body: Any, episode: str | None = None) -> Completion:
        """Validate, render, sample and record one request (blocking); raises :class:`ProxyRequestError`."""
        with self.admitted():
            pending = self.prepare(body, episode)
            return self.finish(pending, self.sampler.generate(pending.requests, pending.sampling,
                                                              self.prompts.stop_ids))

    async def complete_async(self, body: Any, episode: str | None = None) -> Completion:
        """:meth:`complete` for the server's event loop: rendering and decoding on worker threads, and no thread
        held while the request waits for its batch (so batches are not capped by a thread pool's size)."""
        import asyncio

        from starlette.concurrency import run_in_threadpool

        with self.admitted():
            pending = await run_in_threadpool(self.prepare, body, episode)
            future = self.sampler.submit(pending.requests, pending.sampling, self.prompts.stop_ids)
            generations = await asyncio.wrap_future(future)
            return await run_in_threadpool(self.finish, pending, generations)

    @contextmanager
    def admitted(self) -> Iterator[None]:
        """Count the request in flight, or refuse it (429) past ``max_pending``."""
        with self._lock:
            if self._pending >= self.settings.max_pending:
                raise ProxyRequestError(f"{self._pending} requests are in flight, the most this proxy takes; "
                                        "retry shortly", status=429, code="rate_limit_exceeded",
                                        kind="rate_limit_error")
            self._pending += 1
        try:
            yield
        finally:
            with self._lock:
                self._pending -= 1

    def prepare(self, body: Any, episode: str | None) -> _Pending:
        """The request checked and its prompt rendered: what to generate."""
        request = parse_request(body, self.settings)
        episode = check_episode_id(episode) if episode is not None else f"call-{uuid.uuid4().hex}"
        index, earlier = self.store.begin(episode)
        prompt = self.prompts.build(request.messages, request.tools, earlier)
        room = self.settings.max_context - len(prompt.ids)
        if room < 1:
            raise ProxyRequestError(
                f"this model's maximum context length is {self.settings.max_context} tokens; the messages hold "
                f"{len(prompt.ids)}", param="messages", code="context_length_exceeded")
        temperature = self.settings.force_temperature
        sampling = SamplingConfig(request.sampling.temperature if temperature is None else temperature,
                                  request.sampling.top_p if temperature is None else 1.0, 0,
                                  min(request.sampling.max_new_tokens, room))
        base = request.seed if request.seed is not None else stable_seed(self.settings.seed, episode, index)
        requests = [GenerationRequest(key=f"{episode}#{choice}", ids=list(prompt.ids),
                                      seed=stable_seed(base, choice) % 2**62) for choice in range(request.n)]
        return _Pending(request, episode, index, prompt, sampling, requests)

    def finish(self, pending: _Pending, generations: Sequence[Generation]) -> Completion:
        """The calls of what was generated, and the API's response body."""
        calls = [self._call(pending.episode, pending.index, choice, pending.request, pending.prompt, generation,
                            pending.sampling) for choice, generation in enumerate(generations)]
        return Completion(self._body(calls, pending.request, len(pending.prompt.ids)), calls,
                          pending.request.stream, pending.request.include_usage)

    def _call(self, episode: str, index: int, choice: int, request: _Request, prompt: Any, generation: Generation,
              sampling: SamplingConfig) -> CapturedCall:
        ids, logprobs, stopped = list(generation.ids), list(generation.logprobs), generation.stopped
        stop_ids = set(self.prompts.stop_ids)
        shown = ids[:-1] if stopped and ids and ids[-1] in stop_ids else ids
        text = self.tokenizer.decode(shown, skip_special_tokens=False)
        finish = "stop" if stopped else "length"
        cut = cut_at_stop(shown, lambda x: self.tokenizer.decode(x, skip_special_tokens=False), request.stops)
        if cut is not None:  # a stop string: the ids through it were sampled; the text before it is the reply
            kept, text = cut
            ids, logprobs, stopped, finish = ids[:kept], logprobs[:kept], False, "stop"
        reply, has_calls = reply_message(text, tools=request.tools, tool_choice=request.tool_choice,
                                         syntax=self.prompts.syntax, call_prefix=f"call_{index}_{choice}")
        if has_calls:
            finish = "tool_calls"
        return CapturedCall(episode=episode, index=index, choice=choice, messages=request.messages,
                            tools=request.tools, prompt_ids=list(prompt.ids), completion_ids=ids, logprobs=logprobs,
                            stopped=stopped, finish_reason=finish, reply=reply, parent=prompt.parent,
                            rewritten=prompt.rewritten, version=self.settings.version)

    def _body(self, calls: list[CapturedCall], request: _Request, prompt_tokens: int) -> dict[str, Any]:
        completion_tokens = sum(len(c.completion_ids) for c in calls)
        choices = []
        for call in calls:
            choice: dict[str, Any] = {"index": call.choice, "message": call.reply,
                                      "finish_reason": call.finish_reason, "logprobs": None}
            if request.logprobs:
                choice["logprobs"] = {"content": self._logprobs(call)}
            choices.append(choice)
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": self.settings.model_name, "choices": choices, "system_fingerprint": None,
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}}

    def _logprobs(self, call: CapturedCall) -> list[dict[str, Any]]:
        entries = []
        for token, logprob in zip(call.completion_ids, call.logprobs, strict=True):
            text = self.tokenizer.decode([token], skip_special_tokens=False)
            entries.append({"token": text, "logprob": float(logprob), "bytes": list(text.encode("utf-8")),
                            "top_logprobs": []})
        return entries

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [self.model_card()]}

    def model_card(self) -> dict[str, Any]:
        return {"id": self.settings.model_name, "object": "model", "created": 0, "owned_by": "turngym"}


# ---------------------------------------------------------------------- over HTTP
def stream_chunks(body: dict[str, Any], include_usage: bool) -> list[str]:
    """A finished completion as the API's server-sent events: the role and content (and tool calls) of each choice,
    then its finish reason, the usage if asked, and ``[DONE]``."""
    head = {k: body[k] for k in ("id", "created", "model", "system_fingerprint")}
    events = []
    for choice in body["choices"]:
        message = choice["message"]
        delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
        chunks = [{"index": choice["index"], "delta": delta, "logprobs": choice["logprobs"], "finish_reason": None},
                  {"index": choice["index"], "delta": {}, "logprobs": None, "finish_reason": choice["finish_reason"]}]
        events += [{**head, "object": "chat.completion.chunk", "choices": [c]} for c in chunks]
    if include_usage:
        events.append({**head, "object": "chat.completion.chunk", "choices": [], "usage": body["usage"]})
    return [f"data: {json.dumps(e, ensure_ascii=False)}\n\n" for e in events] + ["data: [DONE]\n\n"]


def build_app(service: PolicyService, *, token: str | None = None) -> Any:
    """The FastAPI app serving ``service``; with ``token``, every request but ``/health`` needs
    ``Authorization: Bearer TOKEN`` (the ``openai`` client's ``api_key``)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, StreamingResponse
    app = FastAPI(title="turngym proxy", docs_url=None, redoc_url=None, openapi_url=None)

    def error(problem: ProxyRequestError) -> JSONResponse:
        headers = {"Retry-After": "1"} if problem.status == 429 else None
        return JSONResponse(problem.body(), status_code=problem.status, headers=headers)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    @app.get("/episodes/{episode}/v1/models")
    async def models() -> dict[str, Any]:
        return service.models()

    @app.get("/v1/models/{model}")
    @app.get("/episodes/{episode}/v1/models/{model}")
    async def model(model: str) -> Any:
        if model != service.settings.model_name:
            return error(ProxyRequestError(f"the model {model!r} does not exist; this proxy serves "
                                           f"{service.settings.model_name!r}", status=404,
                                           code="model_not_found"))
        return service.model_card()

    @app.post("/v1/chat/completions")
    @app.post("/episodes/{episode}/v1/chat/completions")
    async def chat_completions(request: Request) -> Any:
        try:
            body = await _read_json(request)
            named = request.path_params.get("episode") or request.headers.get(EPISODE_HEADER) or (
                body.get("user") if isinstance(body, dict) and isinstance(body.get("user"), str) else None)
            completion = await service.complete_async(body, named)
        except ProxyRequestError as problem:
            return error(problem)
        except Exception:  # the backend failed: the API's server error, the proxy stays up
            logger.exception("the proxy failed on a request")
            return error(ProxyRequestError("the policy failed to generate; see the proxy's log", status=500,
                                           kind="server_error", code="backend_error"))
        if completion.stream:
            service.store.add(completion.calls)
            return StreamingResponse(iter(stream_chunks(completion.body, completion.include_usage)),
                                     media_type="text/event-stream")
        if await request.is_disconnected():  # the harness will never see this reply: no later call continues it
            for call in completion.calls:
                call.delivered = False
        service.store.add(completion.calls)
        return completion.body

    return TokenGuard(app, token) if token is not None else app


class TokenGuard:
    """ASGI middleware: every request but ``/health`` carries ``Authorization: Bearer TOKEN`` (else the API's 401).

    A plain ASGI wrapper rather than FastAPI's ``@app.middleware``: that one hands the endpoint a copy of the
    request stream, on which a client's disconnect is never seen."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path") != "/health":
            header = dict(scope.get("headers") or ()).get(b"authorization")
            if not bearer_matches(header, self.token):
                from starlette.responses import JSONResponse

                problem = ProxyRequestError("a valid API key is required (Authorization: Bearer TOKEN)", status=401,
                                            code="invalid_api_key", kind="authentication_error")
                await JSONResponse(problem.body(), status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def _read_json(request: Any) -> Any:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise ProxyRequestError(f"the request body is {declared} bytes; at most {MAX_BODY_BYTES}", status=413,
                                code="request_too_large")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise ProxyRequestError(f"the request body is over {MAX_BODY_BYTES} bytes", status=413,
                                    code="request_too_large")
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks))
    except (ValueError, RecursionError) as problem:
        raise ProxyRequestError(f"the request body is not valid JSON ({str(problem)[:120]})") from None


# ---------------------------------------------------------------------- running it
class ProxyServer:
    """The proxy's app on a background thread (a context manager): ``base_url`` (``http://HOST:PORT/v1``) and
    :meth:`episode_url` once it listens; :meth:`close` stops it.

    Args:
        service: what answers the requests.
        host, port: where to listen (port 0: a free one). Beyond loopback a ``token`` is required
            (else ``$TURNGYM_PROXY_TOKEN``).
    """

    def __init__(self, service: PolicyService, *, host: str = "127.0.0.1", port: int = 0, token: str | None = None,
                 header_timeout: float = 10.0, log_level: str = "warning") -> None:
        import uvicorn

        self.service = service
        self.token = resolve_token(token, PROXY_TOKEN_ENV)
        check_serving_token(host, self.token, PROXY_TOKEN_ENV)
        self.socket = bind_socket(host, port)
        config = uvicorn.Config(build_app(service, token=self.token), log_level=log_level, limit_concurrency=None,
                                **http_settings(header_timeout), timeout_graceful_shutdown=5,
                                backlog=2048)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]},
                                       name="turngym-proxy", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the proxy's server did not start")
            time.sleep(0.01)
        address = self.socket.getsockname()
        host_part = f"[{address[0]}]" if ":" in address[0] else address[0]
        self.root = f"http://{host_part}:{address[1]}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def episode_url(self, episode: str) -> str:
        """The base URL a harness uses for one episode (the episode id is in the path)."""
        return f"{self.root}/episodes/{episode}/v1"

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        self.socket.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def episode_ids(prefix: str, count: int) -> list[str]:
    """``count`` fresh episode ids (URL-safe)."""
    return [f"{prefix}-{uuid.uuid4().hex[:12]}-{i}" for i in range(count)]


__all__: Sequence[str] = ("Completion", "PolicyService", "ProxyServer", "ProxySettings", "build_app",
                          "parse_request", "stream_chunks")
