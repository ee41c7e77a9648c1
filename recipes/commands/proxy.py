"""``turngym proxy``: serve a policy behind an OpenAI-compatible endpoint, every call kept as exact ids
(docs/proxy.md)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from turngym.recipes.commands.common import NON_NEGATIVE, POSITIVE


def cmd_proxy(args: argparse.Namespace) -> int:
    from turngym.agents.proxy_server import PROXY_TOKEN_ENV
    from turngym.envs.serving import check_serving_token, resolve_token

    token = resolve_token(args.token, PROXY_TOKEN_ENV)
    check_serving_token(args.host, token, PROXY_TOKEN_ENV)  # refused before the model loads
    from turngym.agents.models import make_backend
    from turngym.agents.proxy import CallStore
    from turngym.agents.proxy_sampler import BatchingSampler
    from turngym.agents.proxy_server import PolicyService, ProxyServer, ProxySettings

    backend, tokenizer = make_backend(args.model, backend=args.backend, device=args.device, seed=args.seed,
                                      max_context=args.max_context, vllm_server=args.vllm_server)
    sink = _jsonl_sink(Path(args.record)) if args.record else None
    store = CallStore(open_episodes=True, sink=sink)
    settings = ProxySettings(model_name=args.served_name or Path(args.model).name, render=args.render,
                             max_context=args.max_context, default_max_tokens=args.max_tokens, seed=args.seed,
                             max_pending=args.max_pending)
    sampler = BatchingSampler(backend, window=args.batch_window, max_batch=args.max_batch)
    service = PolicyService(tokenizer, sampler, store, settings)
    server = ProxyServer(service, host=args.host, port=args.port, token=token,
                         log_level="info" if args.verbose else "warning")
    print(f"turngym proxy: serving {settings.model_name} ({args.backend}) at {server.base_url}; an episode's own "
          f"base URL: {server.root}/episodes/EPISODE/v1"
          + (f"; calls recorded to {args.record}" if args.record else "") + ". Ctrl-C stops it.", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        print("turngym proxy: stopped", file=sys.stderr)
    finally:
        server.close()
        sampler.close()
    sys.stdout.flush()
    os._exit(0)


def _jsonl_sink(path: Path) -> Any:
    """Append each call, as one JSON line, to ``path`` (a lock keeps lines whole across threads)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()

    def write(call: Any) -> None:
        line = json.dumps(call.to_json(), ensure_ascii=False)
        with lock, path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")

    return write


def add(sub) -> None:
    from turngym.agents.models import DEFAULT_MODEL

    p = sub.add_parser("proxy", help="serve a policy behind an OpenAI-compatible endpoint, keeping every call's "
                                     "token ids (train your own agent loop: docs/proxy.md)")
    p.add_argument("--model", default=DEFAULT_MODEL, help="the policy: a local folder or the embedded default")
    p.add_argument("--backend", default="hf", choices=["hf", "vllm"], help="generation backend")
    p.add_argument("--vllm-server", default=None, help="with --backend vllm: a vLLM server's URL (trl vllm-serve)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (beyond loopback a token is required)")
    p.add_argument("--port", type=NON_NEGATIVE, default=8001, help="0 picks a free port")
    p.add_argument("--token", default=None,
                   help="the API key every client must send; default: $TURNGYM_PROXY_TOKEN (keeps it off the "
                        "command line). Required beyond loopback")
    p.add_argument("--served-name", default=None, help="the model name /v1/models lists (default: the folder's)")
    p.add_argument("--render", default="splice", choices=["splice", "template"],
                   help="splice: a reply sent back unchanged stays the sampled ids; template: render every request")
    p.add_argument("--max-context", type=POSITIVE, default=4096, help="prompt and reply tokens at most")
    p.add_argument("--max-tokens", type=POSITIVE, default=512, help="a reply's tokens when a request names none")
    p.add_argument("--max-pending", type=POSITIVE, default=4096, help="requests in flight at once (more get 429)")
    p.add_argument("--max-batch", type=POSITIVE, default=64, help="requests generated together at most")
    p.add_argument("--batch-window", type=float, default=0.005,
                   help="seconds to wait after a request for others to join its batch")
    p.add_argument("--record", default=None, help="append every call (ids, logprobs, messages) to this JSONL file")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verbose", action="store_true", help="log every request")
    p.set_defaults(func=cmd_proxy)
