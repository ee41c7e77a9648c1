"""``turngym serve``: serve a world over OpenEnv (HTTP + WebSocket), one world per session (docs/scaling.md)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from turngym.recipes.commands.common import NON_NEGATIVE, POSITIVE, env_kwargs, env_options, load_worlds


def cmd_serve(args: argparse.Namespace) -> int:
    from turngym.envs.openenv.security import check_serving_token, resolve_token

    check_serving_token(args.host, resolve_token(args.token))  # refused before the server's imports (gradio: ~3 s)
    from turngym.envs.openenv.server import serve

    load_worlds(args)
    kwargs = env_kwargs(args)

    def ready(url: str, served: Any) -> None:
        panels = ", ".join(f"{split} {len(p)} ({p.fingerprint})" for split, p in served.panels.items()) or "none"
        print(f"turngym serve: serving {served.env_id} at {url} (at most {args.max_sessions} sessions; "
              f"task panels: {panels}). Ctrl-C stops it.", flush=True)

    serve(args.env, kwargs, host=args.host, port=args.port, max_sessions=args.max_sessions,
          panel_size=args.panel_size, ping_interval=args.ping_interval, ping_timeout=args.ping_timeout,
          on_ready=ready, log_level="info" if args.verbose else "warning", token=args.token,
          idle_timeout=args.idle_timeout, allow_client_tasks=args.allow_client_tasks,
          reveal_solutions=args.reveal_solutions, generation_timeout=args.generation_timeout,
          header_timeout=args.header_timeout)
    # Stopped. A world stuck in a step would still hold its session's thread, which Python joins at
    # exit: leave without waiting for it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def add(sub) -> None:
    p = sub.add_parser("serve", help="serve a world over OpenEnv (HTTP + WebSocket), one world per session")
    env_options(p, env_positional=True, env_required=True, split=False)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    p.add_argument("--port", type=NON_NEGATIVE, default=8000, help="0 picks a free port")
    p.add_argument("--max-sessions", type=POSITIVE, default=64, help="worlds played at once (one per session)")
    p.add_argument("--panel-size", type=POSITIVE, default=100,
                   help="tasks per split listed by the task API (/<name>/tasks ...)")
    p.add_argument("--ping-interval", type=float, default=20.0, help="seconds between WebSocket keepalive pings")
    p.add_argument("--ping-timeout", type=float, default=20.0,
                   help="seconds without a pong before a vanished client's session is dropped")
    p.add_argument("--token", default=None,
                   help="the token every client must send (Authorization: Bearer TOKEN); default: "
                        "$TURNGYM_SERVE_TOKEN, which keeps it off the command line. Required beyond loopback")
    p.add_argument("--idle-timeout", type=float, default=1800.0,
                   help="seconds a session may wait for its client's next message before it is closed")
    p.add_argument("--allow-client-tasks", action="store_true",
                   help="also play tasks that clients send (never host paths, images or commands); "
                        "default: only the served panels' tasks, by id")
    p.add_argument("--reveal-solutions", action="store_true",
                   help="send walkthroughs, gold patches and hidden tests to clients (an oracle agent needs them)")
    p.add_argument("--generation-timeout", type=float, default=300.0,
                   help="seconds to generate the game of a client's task (with --allow-client-tasks)")
    p.add_argument("--header-timeout", type=float, default=10.0,
                   help="seconds a connection may take to send a whole request's headers before it is closed "
                        "(connections that send nothing, or drip bytes, hold no session)")
    p.set_defaults(func=cmd_serve)

