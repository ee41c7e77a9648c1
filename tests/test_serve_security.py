"""Issue 24: `turngym serve` assumes hostile clients, and remote pools assume a hostile server.

Written as an attacker would: real `turngym serve` child processes on 127.0.0.1 driven by raw HTTP
requests and raw WebSocket frames; a hostile "server" (raw frames: NaN rewards, huge observations,
absurd deadlines) and an HTTP server that drips bytes, both in this process. Each test asserts what
the attacker gets. (The servers get their token through $TURNGYM_SERVE_TOKEN, as a user would set it.)
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time
from urllib.parse import urlsplit

import pytest

pytest.importorskip("openenv")

from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from tests.conftest import REPO_ROOT
from tests.helpers_http import DrippingServer, ScriptedServer
from tests.helpers_openenv import HostileServer, observation
from turngym import envs
from turngym.envs.openenv.client import served_panel
from turngym.envs.openenv.pool import RemotePool
from turngym.envs.openenv.protocol import TurnAction
from turngym.envs.openenv.server import ServerProcess
from turngym.envs.vector import LocalPool

SIGNALS = "turngym/Signals-v0"
WORLD = {"reward_mode": "dense", "turns": 3, "colours": 2}
TOKEN = "s3cret-token-for-the-attack-tests"
TOKEN_ENV = "TURNGYM_SERVE_TOKEN"
IDLE = 1.5  # the Signals server's --idle-timeout (seconds)
SOLUTIONS = ("walkthrough", "FAIL_TO_PASS", "PASS_TO_PASS", "test_patch", '"patch"', "repo_path", "setup_patch",
             "test_cmd", str(REPO_ROOT))


@pytest.fixture(autouse=True)
def no_token_here(monkeypatch):
    """The attacker's process does not have the token (each test hands it over where it means to)."""
    monkeypatch.delenv(TOKEN_ENV, raising=False)


@pytest.fixture(scope="module")
def signals():
    """Signals, token required, at most 2 sessions idle for at most IDLE s, tasks from clients allowed."""
    extra = ["--idle-timeout", str(IDLE), "--allow-client-tasks"]
    with ServerProcess(SIGNALS, env_kwargs=WORLD, max_sessions=2, panel_size=4, extra_args=extra,
                       environment={TOKEN_ENV: TOKEN}) as server:
        yield server


@pytest.fixture(scope="module")
def swe():
    """The SWE world with its shipped tasks (gold patches, hidden tests, repositories on this machine), defaults."""
    with ServerProcess("turngym/SWE-v0", max_sessions=2, panel_size=2, environment={TOKEN_ENV: TOKEN}) as server:
        yield server


def request(url: str, path: str, body: dict | None = None, token: str | None = TOKEN) -> tuple[int, str]:
    """One raw HTTP request (POST when there is a body): (status, body text)."""
    parts = urlsplit(url.replace("ws://", "http://"))
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    try:
        connection.request("POST" if body is not None else "GET", path,
                           body=json.dumps(body) if body is not None else None, headers=headers)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def session(url: str, token: str | None = TOKEN):
    """A raw WebSocket session (what any client of the server is), the token in its handshake."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return connect(f"{url}/ws", additional_headers=headers, open_timeout=10, max_size=None)


def ask(ws, kind: str, data: dict | None = None) -> dict:
    ws.send(json.dumps({"type": kind, **({"data": data} if data is not None else {})}))
    return json.loads(ws.recv(timeout=60))


def refused_handshake(url: str, token: str | None) -> int:
    with pytest.raises(InvalidStatus) as refused:
        session(url, token).close()
    return refused.value.response.status_code


# ---------------------------------------------------------------------- the server
@pytest.mark.timeout(120)
def test_a_stranger_without_the_token_gets_401_on_every_route_and_the_websocket(signals):
    for path, body in [("/Signals-v0/splits", None), ("/Signals-v0/task", {"split": "eval", "index": 0}),
                       ("/Signals-v0/task_range", {"split": "eval", "start": 0, "stop": 4}), ("/schema", None),
                       ("/docs", None), ("/openapi.json", None), ("/metadata", None)]:
        for token in (None, "wrong-token-wrong-token", TOKEN + "x"):
            status, text = request(signals.url, path, body, token)
            assert status == 401, (path, token, status, text[:200])
            assert "signals/" not in text
    assert refused_handshake(signals.url, None) == 401
    assert refused_handshake(signals.url, "wrong-token-wrong-token") == 401
    assert request(signals.url, "/health", token=None)[0] == 200  # a liveness probe needs no token
    assert request(signals.url, "/Signals-v0/splits")[0] == 200  # the token opens it

    # turngym's own clients say what is missing, and play once they have it (argument or environment).
    with pytest.raises(ConnectionError, match=f"refused this client's token: set {TOKEN_ENV}"):
        RemotePool(signals.url, 1, connect_timeout=5)
    with pytest.raises(ConnectionError, match=f"refused this client's token: set {TOKEN_ENV}"):
        served_panel(signals.url, "eval", 2)
    with pytest.raises(ConnectionError, match=f"refused this client's token: set {TOKEN_ENV}"):
        envs.make("turngym/OpenEnv-v0", base_url=signals.url)
    assert len(served_panel(signals.url, "eval", 2, token=TOKEN)) == 2
    pool = RemotePool(signals.url, 1, env_id=SIGNALS, token=TOKEN)
    try:
        assert pool.reset_some({0: {"task": "signals/eval/10000"}})[0][1]["task"]["id"] == "signals/eval/10000"
    finally:
        pool.close()


@pytest.mark.timeout(120)
def test_serve_refuses_to_listen_beyond_loopback_without_a_token():
    command = [sys.executable, "-m", "turngym.recipes.cli", "serve", SIGNALS, "--port", "0", "--host", "0.0.0.0"]
    environment = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    for extra, message in [([], f"reachable from other machines: give the server a token (set {TOKEN_ENV}"),
                           (["--token", "short"], "use at least 16")]:
        try:
            done = subprocess.run(command + extra, capture_output=True, text=True, timeout=30, env=environment,
                                  check=False)
        except subprocess.TimeoutExpired:
            pytest.fail(f"`turngym serve --host 0.0.0.0 {' '.join(extra)}` started serving everyone")
        assert done.returncode == 2 and message in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.timeout(120)
def test_a_client_cannot_make_the_server_read_a_host_path_or_run_its_command(swe, tmp_path):
    """The attack: a SWE task whose repo_path is a directory of the host (copied into the sandbox, then
    `cat`), or whose image, test command or setup patch is the client's. Refused before any sandbox."""
    secret = tmp_path / "root-only"
    secret.mkdir()
    (secret / "id_rsa").write_text("PRIVATE KEY")
    listed = json.loads(request(swe.url, "/SWE-v0/task", {"split": "eval", "index": 0})[1])["task"]
    record = {**{k: v for k, v in listed["payload"].items() if k != "setup_patch"},
              "patch": "", "test_patch": "", "FAIL_TO_PASS": ["t"], "PASS_TO_PASS": []}
    hostile = [
        {**listed, "id": "attacker/1", "payload": {**record, "repo_path": str(secret)}},
        {**listed, "payload": {**record, "repo_path": str(secret)}},  # a served id, another payload
        {**listed, "id": "attacker/2", "payload": {**record, "image": "attacker/image:latest",
                                                   "test_cmd": "cat /etc/shadow", "setup_patch": "x"}},
    ]
    with session(swe.url) as ws:
        for task in hostile:
            answer = ask(ws, "reset", {"task": task})
            if answer["type"] == "observation":  # the server took it: what does the agent's first command see?
                answer = ask(ws, "step", {"command": "```bash\ncat id_rsa\n```"})
            assert "PRIVATE KEY" not in json.dumps(answer)
            assert answer["type"] == "error", answer
        assert "in none of the served splits" in json.dumps(answer) and "--allow-client-tasks" in json.dumps(answer)
        assert "not the task this server serves under that id" in json.dumps(ask(ws, "reset", {"task": hostile[1]}))


@pytest.mark.timeout(120)
def test_even_with_client_tasks_allowed_no_host_path_image_or_command_gets_through(signals):
    attacks = [{"repo_path": "/root"}, {"image": "evil"}, {"test_cmd": "rm -rf /"}, {"setup_patch": "x"},
               {"config_dir": "x"}, {"signals": ["red"], "where": "/etc/passwd"}, {"signals": ["../../../etc"]}]
    with session(signals.url) as ws:
        for extra in attacks:
            task = {"world": "signals", "id": "attacker/1", "split": "eval", "difficulty": "",
                    "payload": {"signals": ["red", "green"], **extra}}
            answer = ask(ws, "reset", {"task": task})
            assert answer["type"] == "error" and "may not name host paths, images or commands" in json.dumps(answer)
        wrong_world = {"world": "swe", "id": "attacker/2", "split": "eval", "payload": {"signals": ["red"]}}
        assert "this server plays ['signals']" in json.dumps(ask(ws, "reset", {"task": wrong_world}))
        for seed in (-1, 2**70, "7"):
            assert ask(ws, "reset", {"seed": seed})["type"] == "error"
        # A harmless task of the client's own plays.
        task = {"world": "signals", "id": "mine/1", "split": "eval", "payload": {"signals": ["red", "green"]}}
        assert ask(ws, "reset", {"task": task})["data"]["metadata"]["task"]["id"] == "mine/1"


@pytest.mark.timeout(120)
def test_no_reply_gives_away_the_gold_patch_hidden_tests_walkthrough_or_server_paths(swe, signals):
    replies = [request(swe.url, "/SWE-v0/splits")[1],
               request(swe.url, "/SWE-v0/tasks", {"split": "eval"})[1],
               request(swe.url, "/SWE-v0/task", {"split": "train", "index": 1})[1],
               request(swe.url, "/SWE-v0/task_range", {"split": "train", "start": 0, "stop": 2})[1]]
    with session(swe.url) as ws:
        replies.append(json.dumps(ask(ws, "state")))
    with session(signals.url) as ws:
        replies.append(json.dumps(ask(ws, "state")))
        first = ask(ws, "reset", {"split": "eval", "index": 1})
        replies += [json.dumps(first), json.dumps(ask(ws, "step", {"command": "stop"}))]
    assert '"problem_statement"' in replies[1] and '"signals/eval/' in replies[-2]  # the tasks are there
    for reply in replies:
        for secret in SOLUTIONS:
            assert secret not in reply, (secret, reply[:300])
    # The panels still check out: their fingerprint is the listed tasks'.
    assert len(served_panel(swe.url, "eval", token=TOKEN)) == 2


@pytest.mark.timeout(120)
def test_no_http_reset_and_no_mcp_sessions_outside_the_cap_and_idle_sessions_are_closed(signals):
    """The attack: two plain HTTP requests (MCP's session/create) fill both session slots forever;
    an HTTP /reset builds a world outside the cap; two silent WebSockets hold the slots forever."""
    create = {"jsonrpc": "2.0", "method": "openenv/session/create", "params": {}, "id": 1}
    for _ in range(2):
        assert request(signals.url, "/mcp", create)[0] == 404
    assert request(signals.url, "/reset", {"seed": 0})[0] in (404, 405)
    assert request(signals.url, "/step", {"action": {"command": "stop"}})[0] in (404, 405)
    with pytest.raises(InvalidStatus) as attach:  # nor riding on another client's session
        connect(f"{signals.url}/ws?session_id=x", additional_headers={"Authorization": f"Bearer {TOKEN}"},
                open_timeout=10).close()
    assert attach.value.response.status_code == 403

    with contextlib.ExitStack() as stack:
        silent = [stack.enter_context(session(signals.url)) for _ in range(2)]  # both slots, then nothing
        for ws in silent:
            assert ask(ws, "state")["type"] == "state"
        with session(signals.url) as third:  # full
            assert "CAPACITY_REACHED" in third.recv(timeout=10)
        started = time.monotonic()
        for ws in silent:
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=IDLE + 10)
            assert closed.value.rcvd.code == 1001 and "idle" in closed.value.rcvd.reason
        assert time.monotonic() - started < IDLE + 5
        with session(signals.url) as fresh:  # the slots were freed
            assert ask(fresh, "reset", {"split": "eval", "index": 0})["type"] == "observation"


@pytest.mark.timeout(120)
def test_a_reset_that_raised_leaves_the_session_and_a_pool_slot_usable(signals):
    """gymnasium's passive checker remembered the reset that raised and failed every later step."""
    broken = {"world": "signals", "id": "mine/2", "split": "eval", "payload": {"signals": ["purple"]}}  # KeyError
    with session(signals.url) as ws:
        assert ask(ws, "reset", {"task": broken})["type"] == "error"
        assert ask(ws, "step", {"command": "stop"})["type"] == "error"  # no episode runs
        assert ask(ws, "reset", {"task": {"world": "signals", "id": "mine/3", "split": "eval",
                                          "payload": {"signals": ["red", "green"]}}})["type"] == "observation"
        step = ask(ws, "step", {"command": "stop"})
        assert step["type"] == "observation" and step["data"]["reward"] > 0, step
    # The same in this process: a LocalPool's slot.
    pool = LocalPool.from_id(SIGNALS, 1, env_kwargs=WORLD)
    try:
        with pytest.raises(KeyError):
            pool.reset_some({0: {"task": broken}})
        pool.reset_some({0: {"task": {**broken, "payload": {"signals": ["red", "green"]}}}})
        result = pool.step_some({0: "stop"})[0]
        assert result.reward > 0 and not result.truncated
    finally:
        pool.close()


@pytest.mark.timeout(300)
def test_textworld_configs_are_names_seeds_are_bounded_and_generation_is_timed(tmp_path):
    """The attack: a TextWorld task whose config is `../../attacker` loads the story file of a directory the
    client names; a new seed makes the server generate a game, as long as it takes."""
    pytest.importorskip("textworld")
    cache = tmp_path / "cache"
    extra = ["--allow-client-tasks", "--generation-timeout", "0.3"]
    with ServerProcess("turngym/TextWorld-v0", env_kwargs={"config": "w2-o3-q4"}, max_sessions=2, panel_size=1,
                       extra_args=extra, environment={TOKEN_ENV: TOKEN, "TURNGYM_CACHE": str(cache)},
                       startup_timeout=240) as server:
        served = next(cache.glob("textworld-*/w2-o3-q4/1"))  # the eval panel's game
        shutil.copytree(served, tmp_path / "attacker" / "1")  # a story file where the attacker says
        with session(server.url) as ws:
            for config in ("../../attacker", "w2-o3-q4/../../../attacker", "w2-o3-q4\n"):
                task = {"world": "textworld", "id": "attacker/1", "split": "eval",
                        "payload": {"config": config, "seed": 1}}
                answer = json.dumps(ask(ws, "reset", {"task": task}))
                assert '"error"' in answer and ("not a config name" in answer or "is a path" in answer), answer
            for seed in (-1, 2**40, "1"):
                task = {"world": "textworld", "id": "attacker/2", "split": "eval",
                        "payload": {"config": "w2-o3-q4", "seed": seed}}
                assert "a TextWorld seed is an integer" in json.dumps(ask(ws, "reset", {"task": task}))
            started = time.monotonic()
            task = {"world": "textworld", "id": "mine/1", "split": "eval",
                    "payload": {"config": "w2-o3-q4", "seed": 77}}
            answer = ask(ws, "reset", {"task": task})
            assert "took more than 0.3 s" in json.dumps(answer) and time.monotonic() - started < 10
            assert ask(ws, "reset", {"split": "eval", "index": 0})["type"] == "observation"  # the panel plays


# ---------------------------------------------------------------------- the pools
def scripted(*steps: str):
    """A hostile server's answers: a reset, then ``steps`` in turn."""
    replies = iter(steps)

    def answer(kind, message):
        return observation("ready") if kind == "reset" else next(replies, None)

    return answer


@pytest.mark.timeout(120)
def test_a_hostile_server_cannot_stall_poison_or_flood_a_remote_pool():
    huge = "A" * 2_000_000
    steps = (observation("x", math.nan), observation("x", 0.1, info={"episode_reward": math.inf}),
             observation(huge), observation("B" * 60_000_000))
    with HostileServer(scripted(*steps), max_step_seconds=1e9) as hostile:
        pool = RemotePool(hostile.url, 1, connect_timeout=5)
        try:
            assert pool.step_timeout <= 3600.0  # its 1e9 s is no deadline
            for reason in ("nan", "inf"):
                pool.reset_some({0: None})
                result = pool.step_some({0: "go"})[0]
                assert result.truncated and result.info["truncation_reason"] == "worker_error", result
                failure = result.info["worker_failure"]
                assert "not a finite number" in failure and reason in failure
                assert math.isfinite(result.reward)
            pool.reset_some({0: None})
            result = pool.step_some({0: "go"})[0]
            assert len(result.observation) <= 65_536 and "characters cut" in result.observation
            assert result.observation.startswith("AAAA") and not result.truncated
            result = pool.step_some({0: "go"})[0]  # 60 MB: more than any message a pool takes
            assert result.truncated and result.info["truncation_reason"] == "env_disconnected"
            assert len(result.observation) < 1000
        finally:
            pool.close()
        # A deadline of the client's choosing: a server that never answers is given max_step_timeout.
        pool = RemotePool(hostile.url, 1, connect_timeout=5, max_step_timeout=1.0)
        try:
            pool.reset_some({0: None})
            started = time.monotonic()
            result = pool.step_some({0: "go"})[0]  # no answer, ever
            assert result.info["truncation_reason"] == "worker_timeout" and time.monotonic() - started < 8
        finally:
            pool.close()


@pytest.mark.timeout(120)
def test_a_hostile_server_cannot_stall_or_poison_an_openenv_world():
    with HostileServer(scripted(observation("x", math.nan)), max_step_seconds=1e9) as hostile:
        world = envs.make("turngym/OpenEnv-v0", base_url=hostile.url, connect_timeout=5)
        try:
            assert world.unwrapped.step_timeout <= 3600.0
            world.reset(seed=0)
            _, reward, _, truncated, info = world.step("go")
            assert truncated and info["truncation_reason"] == "env_error" and reward == 0.0
            assert "not a finite number" in info["openenv_failure"]
        finally:
            world.close()


@pytest.mark.timeout(120)
def test_a_server_dripping_bytes_cannot_hold_served_panel_past_its_timeout():
    with DrippingServer(interval=0.5, total=30.0) as dripping:
        started = time.monotonic()
        with pytest.raises(ConnectionError, match="did not answer within 2 s"):
            served_panel(dripping.url, "eval", timeout=2.0)
        assert time.monotonic() - started < 4.0


@pytest.mark.timeout(120)
def test_an_http10_server_dripping_its_body_cannot_hold_served_panel_past_its_timeout():
    """Issue 40: an HTTP/1.0 answer has no length and ends when the server hangs up; http.client hands the
    socket to the response and forgets it, so the watchdog found none to shut and the call waited for the
    server (here 30 s, one byte every 0.2 s)."""
    with DrippingServer(interval=0.2, total=30.0, http10=True) as dripping:
        started = time.monotonic()
        with pytest.raises(ConnectionError, match="did not answer within 1 s"):
            served_panel(dripping.url, "eval", timeout=1.0)
        assert time.monotonic() - started < 3.0  # an upper bound only: the deadline and a margin


# ---------------------------------------------------------------------- the red team's second round
def raw_ask(ws, text: str | bytes) -> dict:
    ws.send(text)
    return json.loads(ws.recv(timeout=30))


def rpc(method: str, **params) -> str:
    return json.dumps({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}})


@pytest.mark.timeout(120)
def test_mcp_and_other_messages_on_the_websocket_never_reach_openenv_nor_build_worlds_outside_the_cap(signals):
    """The attack (/tmp/redteam/mcp*.py): OpenEnv's /ws takes {"type": "mcp"} messages, whose
    openenv/session/create hands out session ids and openenv/session/close closes any session by id; the
    closed session's socket then rebuilt its world on the next reset, outside --max-sessions."""
    with session(signals.url) as victim, session(signals.url) as attacker:
        assert ask(victim, "reset", {"split": "eval", "index": 0})["type"] == "observation"
        for ws, message in [(victim, rpc("openenv/session/create")), (attacker, rpc("tools/list")),
                            (attacker, rpc("openenv/session/close", session_id="0" * 32)),
                            (attacker, '{"type": "nope"}'), (attacker, "[1, 2]"), (attacker, '"state"'),
                            (attacker, "[" * 100_000 + "]" * 100_000), (attacker, b'{"type": "state"}')]:
            answer = raw_ask(ws, message)
            assert answer["type"] == "error" and answer["data"]["code"] in ("UNKNOWN_TYPE", "INVALID_JSON"), answer
            assert "session_id" not in json.dumps(answer) and "result" not in answer["data"]
        # Both sessions go on; the server still holds exactly two (a third is refused).
        assert ask(victim, "step", {"command": "stop"})["type"] == "observation"
        assert ask(attacker, "state")["type"] == "state"
        with session(signals.url) as third:
            assert "CAPACITY_REACHED" in third.recv(timeout=10)


def test_a_closed_session_never_builds_its_world_again():
    """However a session gets closed (OpenEnv destroys it, e.g. by id), its socket's next reset must not
    build a world that no session slot accounts for."""
    from turngym.envs.openenv.server import ServedWorld, TurnGymEnvironment

    environment = TurnGymEnvironment(ServedWorld.prepare(SIGNALS, WORLD, panel_size=2))
    assert environment.reset(split="eval", index=0).text
    environment.close()
    with pytest.raises(RuntimeError, match="closed"):
        environment.reset(split="eval", index=0)
    assert environment._env is None
    with pytest.raises(RuntimeError):
        environment.step(TurnAction(command="stop"))


@pytest.mark.timeout(120)
def test_silent_or_dripping_connections_without_a_token_cannot_lock_the_server_out():
    """The attack (/tmp/redteam/slow*.py): 70 TCP connections that never send a byte (or drip a header line
    every few seconds) filled uvicorn's limit_concurrency (open connections, max-sessions + 64): every route
    answered 503 for as long as they stayed open."""
    header_timeout = 1.5
    with ServerProcess(SIGNALS, env_kwargs=WORLD, max_sessions=2, panel_size=2, environment={TOKEN_ENV: TOKEN},
                       extra_args=["--header-timeout", str(header_timeout)]) as server:
        address = urlsplit(server.url.replace("ws://", "http://"))
        opened = time.monotonic()
        with contextlib.ExitStack() as stack:
            idle = [stack.enter_context(socket.create_connection((address.hostname, address.port), timeout=5))
                    for _ in range(70)]
            dripping = [stack.enter_context(socket.create_connection((address.hostname, address.port), timeout=5))
                        for _ in range(20)]
            for i, sock in enumerate(dripping):
                sock.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n" if i % 2 else
                             b"GET /health HTTP/1.1\r\nHost: x\r\n")
            time.sleep(0.3)
            for sock in dripping:
                sock.sendall(b"X-a: b\r\n")
            # A client with the token is served at once, by HTTP and by WebSocket.
            started = time.monotonic()
            assert request(server.url, "/Signals-v0/splits")[0] == 200
            assert request(server.url, "/health", token=None)[0] == 200
            with session(server.url) as ws:
                assert ask(ws, "reset", {"split": "eval", "index": 0})["type"] == "observation"
            assert time.monotonic() - started < 5
            # And the attacker's connections are closed once they have had header_timeout to send a request.
            for sock in idle + dripping:
                sock.settimeout(max(opened + header_timeout + 5 - time.monotonic(), 0.1))
                try:
                    with contextlib.suppress(ConnectionResetError):
                        while sock.recv(4096):
                            pass
                except TimeoutError:
                    pytest.fail(f"an idle connection was still open {time.monotonic() - opened:.1f} s after it opened")
            assert time.monotonic() - opened < header_timeout + 5


def never_ending(reward: object = 0.0, *, info: dict | None = None, reset_info: dict | None = None, **kwargs):
    """A hostile server's answers: a reset (with ``reset_info``), then the same step, forever."""
    def answer(kind, message):
        return observation("ready", None, info=reset_info) if kind == "reset" else observation(
            "again", reward, info=info, **kwargs)

    return answer


def assert_both_clients_truncate(url: str, failure: str, attack: object) -> None:
    """A RemotePool and a turngym/OpenEnv-v0 world each play one step against ``url``: both truncate the episode
    on their first step with ``failure`` in the reason, and pay nothing for it."""
    pool = RemotePool(url, 1, connect_timeout=5)
    try:
        pool.reset_some({0: None})
        result = pool.step_some({0: "go"})[0]
        assert result.truncated and result.info["truncation_reason"] == "worker_error", (attack, result)
        assert failure in result.info["worker_failure"] and result.reward == 0.0, (attack, result)
    finally:
        pool.close()
    world = envs.make("turngym/OpenEnv-v0", base_url=url, connect_timeout=5)
    try:
        world.reset(seed=0)
        _, reward, _, truncated, info = world.step("go")
        assert truncated and info["truncation_reason"] == "env_error" and reward == 0.0, (attack, info)
        assert failure in info["openenv_failure"], (attack, info)
    finally:
        world.close()


@pytest.mark.timeout(120)
def test_finite_rewards_too_large_for_the_advantages_truncate_the_episode():
    """The attack (/tmp/redteam/c1.py, c2.py): 1.7e308 a turn is finite, but two turns sum to inf and the
    advantages to NaN; a reward of 400 digits (a JSON integer) raised OverflowError in OpenEnv-v0."""
    for reward in (1.7e308, -1e308, 2e6, 10**400):
        with HostileServer(never_ending(reward)) as hostile:
            assert_both_clients_truncate(hostile.url, "beyond the reward cap of 1e+06", reward)
    # The cap is the client's to choose.
    with HostileServer(never_ending(2e6)) as hostile:
        pool = RemotePool(hostile.url, 1, connect_timeout=5, max_abs_reward=1e7)
        try:
            pool.reset_some({0: None})
            assert pool.step_some({0: "go"})[0].reward == 2e6
        finally:
            pool.close()


@pytest.mark.timeout(120)
def test_a_declared_deadline_of_400_digits_is_capped_not_an_overflow():
    with HostileServer(never_ending(), max_step_seconds=10**400) as hostile:
        pool = RemotePool(hostile.url, 1, connect_timeout=5)
        try:
            assert pool.step_timeout == 3600.0
        finally:
            pool.close()
        world = envs.make("turngym/OpenEnv-v0", base_url=hostile.url, connect_timeout=5)
        try:
            assert world.unwrapped.step_timeout == 3600.0
        finally:
            world.close()


@pytest.mark.timeout(120)
def test_the_client_decides_when_an_episode_on_a_server_ends_at_the_latest():
    """The attack (/tmp/redteam/c3.py): a server that never ends an episode, or declares max_turns=10**9."""
    for declared in (None, 10**9):
        with HostileServer(never_ending(reset_info={"max_turns": declared})) as hostile:
            pool = RemotePool(hostile.url, 1, connect_timeout=5)
            try:
                for limit in (100, 7):  # the default, then the client's own
                    if limit == 7:
                        pool.close()
                        pool = RemotePool(hostile.url, 1, connect_timeout=5, max_turns=7)
                    pool.reset_some({0: None})
                    results = [pool.step_some({0: "go"})[0] for _ in range(limit)]
                    assert [r.truncated for r in results] == [False] * (limit - 1) + [True], declared
                    assert results[-1].info["truncation_reason"] == "max_turns"
            finally:
                pool.close()
            # OpenEnv-v0: the server's limit, at most max_turns_cap (100); without one, the usual default (50).
            for options, limit in (({}, 100 if declared else 50), ({"max_turns_cap": 5}, 5), ({"max_turns": 4}, 4)):
                world = envs.make("turngym/OpenEnv-v0", base_url=hostile.url, connect_timeout=5, **options)
                try:
                    world.reset(seed=0)
                    ends = [world.step("go")[3] for _ in range(limit)]
                    assert ends == [False] * (limit - 1) + [True], (declared, options)
                finally:
                    world.close()
    # A server's own shorter limit still ends the episode first.
    with HostileServer(never_ending(reset_info={"max_turns": 3})) as hostile:
        pool = RemotePool(hostile.url, 1, connect_timeout=5)
        try:
            pool.reset_some({0: None})
            assert [pool.step_some({0: "go"})[0].truncated for _ in range(3)] == [False, False, True]
        finally:
            pool.close()


@pytest.mark.timeout(120)
def test_no_number_from_a_server_is_nan_or_inf_and_its_components_never_replace_the_clients():
    """The attack (/tmp/redteam/c4.py): NaN in pass_ratio, won, turn, optimal_length (reset), in the metadata's
    reward_components while the info's are finite; the server's 'outcome' replacing OpenEnv-v0's own."""
    step_attacks = [{"info": {"pass_ratio": math.nan}}, {"info": {"won": math.nan}}, {"info": {"turn": math.inf}},
                    {"info": {"nested": {"deep": [1.0, -math.inf]}}},
                    {"metadata": {"reward_components": {"progress": math.nan}}}]
    for attack in step_attacks:
        with HostileServer(never_ending(0.5, **attack)) as hostile:
            assert_both_clients_truncate(hostile.url, "not a finite number", attack)
    # A reset whose numbers are not finite fails, as a refused reset does.
    with HostileServer(never_ending(reset_info={"optimal_length": math.nan})) as hostile:
        pool = RemotePool(hostile.url, 1, connect_timeout=5)
        try:
            with pytest.raises(RuntimeError, match="optimal_length=nan is not a finite number"):
                pool.reset_some({0: None})
        finally:
            pool.close()
        world = envs.make("turngym/OpenEnv-v0", base_url=hostile.url, connect_timeout=5)
        try:
            with pytest.raises(RuntimeError, match="optimal_length=nan is not a finite number"):
                world.reset(seed=0)
        finally:
            world.close()
    # OpenEnv-v0 computes outcome and progress from the rewards; the server's other components pass.
    lying = {"reward_components": {"outcome": 1e5, "progress": 7.0, "score": 0.5}}
    with HostileServer(never_ending(0.0, info=lying)) as hostile:
        world = envs.make("turngym/OpenEnv-v0", base_url=hostile.url, connect_timeout=5)
        try:
            world.reset(seed=0)
            _, _, _, _, info = world.step("go")
            assert info["reward_components"] == {"outcome": 0.0, "progress": 0.0, "score": 0.5}
        finally:
            world.close()


PANEL_SPLITS = b'[{"name": "eval", "num_tasks": 5, "taskset": "t", "version": "1", "fingerprint": "f"}]'
PANEL_TASKS = json.dumps({"tasks": [{"world": "w", "id": f"w/{i}", "split": "eval", "payload": {}}
                                    for i in range(5)]}).encode()


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("answers", "n", "what"), [
    ({"splits": b"[" * 200_000 + b"]" * 200_000}, 2, "nested too deeply"),
    ({"splits": b'[{"nom": 1}]'}, 2, "not a list of splits with names"),
    ({"splits": PANEL_SPLITS.replace(b"5,", b'"5",')}, 2, "not a count"),
    ({"splits": PANEL_SPLITS.replace(b'"f"', b"null")}, 2, "fingerprint=None"),
    ({"task_range": PANEL_TASKS}, 2, "answered 5 tasks of 'eval' for the 2 asked for"),
    ({"task_range": b'{"tasks": [{"world": "w", "id": "w/0", "split": "eval"}, 7]}'}, 2, "not turngym tasks"),
    ({"task_range": b'{"tasks": [{"id": "w/0"}, {"id": "w/1"}]}'}, 2, "not turngym tasks"),
    ({"task_range": b'{"tasks": [1e999]}'}, 1, "not turngym tasks"),
    ({"task_range": b'{"tasks": [{"world": "w", "id": "w/0", "split": "train", "payload": {}}]}'}, 1, "split"),
    ({"list_environments": b'{"a": 1}'}, 2, "lists no environment"),
])
def test_a_malformed_task_panel_is_one_clear_error_naming_the_server(answers, n, what):
    """The attack (/tmp/redteam/c6.py): answers that raised raw RecursionError, KeyError or TypeError in
    served_panel, and more tasks than asked for, taken as they came."""
    with ScriptedServer({"list_environments": b'["X"]', "splits": PANEL_SPLITS, "task_range": PANEL_TASKS,
                         **answers}) as server:
        with pytest.raises(ValueError) as refused:
            served_panel(server.url, "eval", n, timeout=10)
        assert what in str(refused.value) and "127.0.0.1" in str(refused.value), refused.value
        assert "Traceback" not in str(refused.value)


@pytest.mark.parametrize("config", ["w300-o300-q20", "w17-o3-q4", "w2-o25-q4", "w2-o3-q13", "w01-o03-q04",
                                    "w2-o03-q4", "coin-300", "treasure-031", "cooking-r1-t1-g1"])
def test_a_clients_textworld_config_is_bounded_and_has_one_name(config):
    """The attack (/tmp/redteam/twbig.py, inj.py): w300-o300-q20 made the server generate a huge game;
    w01-o03-q04 is w1-o3-q4 under a second name (a second cache entry, a second generation)."""
    pytest.importorskip("textworld")
    from turngym.envs.openenv.security import textworld_game

    with pytest.raises(ValueError, match="too large for a client's task|not one a client's task may name"):
        textworld_game({"config": config, "seed": 1})
    assert textworld_game({"config": "w16-o24-q12", "seed": 1}) == ("w16-o24-q12", 1)
    assert textworld_game({"config": "w2-o3-q4", "seed": 7}) == ("w2-o3-q4", 7)
    assert textworld_game({"config": config, "seed": 1}, served_configs=[config]) == (config, 1)  # the server's own


@pytest.mark.timeout(60)
def test_a_timed_out_generation_leaves_no_process_and_no_scratch_folder(tmp_path, monkeypatch):
    """The attack: a generation past --generation-timeout was SIGKILLed alone; its scratch folder stayed in
    the cache, and the compilers it had started lived on."""
    pytest.importorskip("textworld")
    from turngym.envs.openenv import security
    from turngym.envs.textworld.generation import game_directory

    monkeypatch.setenv("TURNGYM_CACHE", str(tmp_path))
    scratch_parent = game_directory("w2-o3-q4", 4242).parent
    grandchild_pid = tmp_path / "grandchild.pid"
    generator = (  # what a generator does: a scratch folder, a compiler started, then a long wait
        "import os, subprocess, sys, time, pathlib\n"
        f"parent = pathlib.Path({str(scratch_parent)!r}); parent.mkdir(parents=True, exist_ok=True)\n"
        "(parent / '.4242-abc').mkdir(); (parent / '.4242-abc' / 'game.ni').write_text('x')\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"pathlib.Path({str(grandchild_pid)!r}).write_text(str(child.pid))\n"
        "time.sleep(60)\n")
    monkeypatch.setattr(security, "_generator_command", lambda config, seed: [sys.executable, "-c", generator])
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="took more than 1.5 s"):
        security.generate_textworld("w2-o3-q4", 4242, 1.5)
    assert time.monotonic() - started < 15
    assert not list(scratch_parent.glob(".4242-*"))
    pid = int(grandchild_pid.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the generator's child {pid} outlived the timeout")


@pytest.mark.parametrize("task", [
    {"payload": {"signals": ["red", value]}} for value in
    (" /etc/passwd", "\n/etc", "./x", "%2e%2e/x", "%252e%252e/x", "／etc／passwd", "\u2024\u2024/x")
] + [
    {"id": "../../../etc/passwd"}, {"id": "/etc/passwd"}, {"split": "/etc"}, {"difficulty": "/x"},
    {"content_hash": "~/x"}, {"id": "mine/./x"}, {"extra": "/etc/passwd"},
    {"payload": {"signals": ["red"], "repo_p\u0430th": "x"}}, {"payload": {"signals": ["red"], "ｐａｔｈ": "x"}},
    {"payload": {"signals": ["red"], "REPO\u2010PATH": "x"}},
])
def test_every_field_of_a_clients_task_is_screened_after_normalisation(task):
    """The attack (/tmp/redteam/inj.py): paths with a leading space or newline, './', percent-encoded or
    full-width; only the payload was screened (id '../../../etc/passwd' passed); look-alike keys."""
    from turngym.envs.openenv.security import client_task

    base = {"world": "signals", "id": "mine/1", "split": "eval", "difficulty": "", "payload": {"signals": ["red"]}}
    assert client_task(base, worlds={"signals"}, generation_timeout=1).id == "mine/1"
    with pytest.raises(ValueError, match="refused|not a plain name|fields"):
        client_task({**base, **task}, worlds={"signals"}, generation_timeout=1)


@pytest.mark.timeout(120)
def test_a_served_id_path_is_refused_by_the_server_too(signals):
    with session(signals.url) as ws:
        task = {"world": "signals", "id": "../../../etc/passwd", "split": "eval", "payload": {"signals": ["red"]}}
        answer = ask(ws, "reset", {"task": task})
        assert answer["type"] == "error" and "not a plain name" in json.dumps(answer)


def test_sparse_rewards_are_not_given_away_by_the_progress_components():
    """The attack (/tmp/redteam/tw1.py): a sparse-mode world served its per-step progress in
    reward_components (TextWorld's progress, score, intermediate_reward): a walkthrough oracle by trial."""
    from turngym.envs.openenv.server import ServedWorld, TurnGymEnvironment

    for reveal in (False, True):
        served = ServedWorld.prepare(SIGNALS, {**WORLD, "reward_mode": "sparse"}, panel_size=2,
                                     reveal_solutions=reveal)
        environment = TurnGymEnvironment(served)
        try:
            for command in ("stop", "go", "wait"):
                environment.reset(split="eval", index=0)
                answer = environment.step(TurnAction(command=command))
                shown = {*answer.metadata["reward_components"], *answer.metadata["info"]["reward_components"]}
                if reveal:
                    assert "progress" in shown
                else:
                    assert shown <= {"outcome", "invalid_penalty"}, shown
        finally:
            environment.close()
