"""`turngym serve` (OpenEnv) and RemotePool: a served world plays exactly like a local one, and fails like one.

Every server here is a real `turngym serve` child process on 127.0.0.1, with a token (in
$TURNGYM_SERVE_TOKEN, as a user would set it: every client here, the trainer's included, sends it
from there) and --reveal-solutions (the oracle and these comparisons read the walkthrough).
tests/test_serve_security.py attacks the servers and pools.
"""

from __future__ import annotations

import socket
import time

import pytest

pytest.importorskip("openenv")

from tests.conftest import REPO_ROOT
from tests.helpers_pool import assert_one_episode_truncated
from turngym.agents.baselines import OracleAgent, RandomAgent
from turngym.agents.evaluate import evaluate
from turngym.envs.openenv.client import TurnGymClient, served_panel
from turngym.envs.openenv.pool import RemotePool
from turngym.envs.openenv.protocol import jsonable
from turngym.envs.openenv.server import ServerProcess
from turngym.envs.panels import task_panel
from turngym.envs.pools import register_pool_backend
from turngym.envs.vector import LocalPool, make_pool
from turngym.recipes.cli import main

SIGNALS = "turngym/Signals-v0"
WORLD = {"reward_mode": "dense", "turns": 3, "colours": 2}  # test_trainer's Signals, in dense mode
# Short keepalive, so that the idle test below outlasts a ping timeout and many pings. 2 s of timeout was missed once
# by a full suite beside two niced studies on the 2 cores (load 5): a timeout is a liveness bound, not a speed
# requirement, so it has room here.
KEEPALIVE = {"ping_interval": 0.2, "ping_timeout": 5.0}
TOKEN = "a-test-token-of-32-characters-ok"
REVEAL = ["--reveal-solutions"]


@pytest.fixture(scope="module", autouse=True)
def token():
    """The servers of this module require TOKEN; their clients find it in $TURNGYM_SERVE_TOKEN."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TURNGYM_SERVE_TOKEN", TOKEN)
        yield TOKEN


@pytest.fixture(scope="module")
def server(token):
    extra = ["--ping-interval", str(KEEPALIVE["ping_interval"]), "--ping-timeout", str(KEEPALIVE["ping_timeout"]),
             *REVEAL]
    with ServerProcess(SIGNALS, env_kwargs=WORLD, max_sessions=12, panel_size=8, extra_args=extra) as process:
        yield process


def trajectory_fields(trajectories):
    return [(t.task, t.actions, t.observations, t.turn_rewards, t.terminated, t.truncated, t.truncation_reason, t.won)
            for t in trajectories]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("agent", [OracleAgent, RandomAgent])
def test_a_served_world_evaluates_exactly_like_a_local_one(server, agent):
    tasks = task_panel(SIGNALS, "eval", 6, WORLD)
    local = evaluate(agent(seed=5), SIGNALS, tasks, env_kwargs=WORLD, batch=3, seed=11, progress=False)
    remote = evaluate(agent(seed=5), SIGNALS, tasks, env_kwargs=WORLD, num_workers=3, seed=11, progress=False,
                      pool_options={"backend": "remote", "server": server.url})
    assert trajectory_fields(remote.trajectories) == trajectory_fields(local.trajectories)
    assert remote.overall == local.overall
    assert any(0 < r < 1 for t in remote.trajectories for r in t.turn_rewards)  # dense rewards travelled


@pytest.mark.timeout(300)
def test_every_step_and_info_matches_the_local_world(server):
    task = task_panel(SIGNALS, "eval", 2, WORLD)[1]
    local = LocalPool.from_id(SIGNALS, 1, env_kwargs=WORLD)
    remote = RemotePool(server.url, 1, env_id=SIGNALS, env_kwargs=WORLD, **KEEPALIVE)
    try:
        here = local.reset_some({0: {"task": task}}, {0: 3})[0]
        there = remote.reset_some({0: {"task": task}}, {0: 3})[0]
        assert there == (here[0], jsonable(here[1]))
        walkthrough = here[1]["walkthrough"]
        wrong = next(c for c in ("stop", "go", "wait", "turn") if c != walkthrough[0])
        for action in ["\x00 binary", "x" * 5000, wrong, *walkthrough]:  # invalid, invalid, wrong, then the win
            a, b = local.step_some({0: action})[0], remote.step_some({0: action})[0]
            assert (b.observation, b.reward, b.terminated, b.truncated) == (a.observation, a.reward, a.terminated,
                                                                             a.truncated)
            assert b.info == jsonable(a.info)
            if a.terminated or a.truncated:
                break
        assert b.terminated and b.info["won"] and b.info["episode_reward"] == pytest.approx(1.0)
    finally:
        remote.close()
        local.close()


@pytest.mark.timeout(300)
def test_a_served_world_trains_exactly_like_a_local_one(server, tmp_path):
    """One training step's episodes and per-token advantages, with the worlds here and on the server."""
    from helpers_llm import word_tokenizer
    from test_trainer import SIGNALS as TRAINER_WORLD
    from test_trainer import make_trainer, one_batch, played

    assert {**TRAINER_WORLD, "reward_mode": "dense"} == WORLD
    tokenizer = word_tokenizer(tmp_path / "words")
    outputs, episodes = [], []
    for where, options in (("local", {}), ("remote", {"env_backend": "remote", "env_server": server.url})):
        trainer = make_trainer(tmp_path / where, tokenizer, **options)
        try:
            batch = one_batch(trainer)
            outputs.append(trainer._generate_and_score_completions(batch))
            episodes.append(played(batch))
        finally:
            trainer.runner.close()
    assert isinstance(trainer.runner.args.pool_options()["server"], str)
    local, remote = episodes
    assert [(e.task, e.turn_rewards, e.completion_ids, e.env_mask) for e in remote] == \
           [(e.task, e.turn_rewards, e.completion_ids, e.env_mask) for e in local]
    assert outputs[1]["advantages"].tolist() == outputs[0]["advantages"].tolist()
    assert any(r for e in remote for r in e.turn_rewards)


@pytest.mark.timeout(300)
def test_the_task_api_serves_the_local_panel_and_openenv_clients_play_by_split_and_index(server):
    local = task_panel(SIGNALS, "eval", 5, WORLD)
    assert served_panel(server.url, "eval", 5).fingerprint == local.fingerprint
    assert served_panel(server.url, "train").fingerprint == task_panel(SIGNALS, "train", 8, WORLD).fingerprint
    with pytest.raises(ValueError, match="no split 'test'"):
        served_panel(server.url, "test")
    # OpenEnv's own client API: reset by the task API's split and index, step with {"command": ...}.
    with TurnGymClient(base_url=server.url).sync() as client:
        result = client.reset(split="eval", index=2, seed=0)
        meta = result.metadata
        assert meta["task"]["id"] == local[2].id and not result.done
        assert meta["task_panel"]["fingerprint"] == served_panel(server.url, "eval").fingerprint
        step = client.step(meta["info"]["walkthrough"][0])
        assert step.reward == pytest.approx(1 / WORLD["turns"]) and not step.done
        assert step.metadata["truncated"] is False and step.metadata["terminated"] is False
        assert client.state().env_id == SIGNALS and client.state().turn == 1


@pytest.mark.timeout(300)
def test_an_idle_or_busy_client_keeps_its_session(server):
    """While a model generates, the session must live: no idle reaping, and keepalive pings are answered
    from the pool's own thread even while the caller's thread is busy."""
    pool = RemotePool(server.url, 1, env_id=SIGNALS, **KEEPALIVE)
    try:
        _, info = pool.reset_some({0: {"task": "signals/eval/10000"}})[0]
        time.sleep(1.5 * KEEPALIVE["ping_timeout"])  # idle
        busy_until = time.monotonic() + 1.5 * KEEPALIVE["ping_timeout"]
        while time.monotonic() < busy_until:  # a busy thread holding the GIL in short slices
            sum(range(10_000))
        result = pool.step_some({0: info["walkthrough"][0]})[0]
        assert not result.truncated and result.reward > 0 and pool.respawns == 0
    finally:
        pool.close()


@pytest.mark.timeout(120)
def test_a_server_that_asks_for_other_options_or_is_full_is_refused_clearly(server):
    with pytest.raises(ValueError, match=r"reward_mode='sparse' \(the server's is 'dense'\)"):
        RemotePool(server.url, 1, env_id=SIGNALS, env_kwargs={**WORLD, "reward_mode": "sparse"})
    with pytest.raises(ValueError, match="serves turngym/Signals-v0.*env_id 'turngym/TextWorld-v0'"):
        RemotePool(server.url, 1, env_id="turngym/TextWorld-v0")
    with pytest.raises(ConnectionError, match="no free session.*--max-sessions"):
        RemotePool(server.url, 13)
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    started = time.monotonic()
    with pytest.raises(ConnectionError, match=f"no turngym server answers at ws://127.0.0.1:{port}"):
        RemotePool(f"127.0.0.1:{port}", 1, connect_timeout=5)
    assert time.monotonic() - started < 30


@pytest.mark.timeout(300)
def test_failures_truncate_like_local_workers_and_a_dead_server_never_hangs(tmp_path):
    # The served world: 'raise' raises, 'sleep' hangs, 'die' kills the server process.
    module = tmp_path / "misbehaving_world.py"
    module.write_text("from tests.helpers_pool import MisbehavingWorld\nfrom turngym import envs\n"
                      "envs.register('testpool/Misbehaving-v0', entry_point=MisbehavingWorld)\n")
    with ServerProcess("testpool/Misbehaving-v0", max_sessions=6, panel_size=None, extra_args=["--import", str(module)],
                       environment={"PYTHONPATH": str(REPO_ROOT)}) as served:
        pool = RemotePool(served.url, 2, step_timeout=3.0, connect_timeout=5.0)
        try:
            for action, reason in [("raise", "worker_error"), ("sleep", "worker_timeout")]:
                pool.reset_some({0: None, 1: None})
                results = pool.step_some({0: action, 1: "win"})
                assert_one_episode_truncated(results, reason)
                assert pool.reset_some({0: None})[0][0] == "ready"  # the respawned session plays on
            assert pool.respawns == 2
            pool.reset_some({0: None, 1: None})
            started = time.monotonic()
            died = pool.step_some({0: "die"})[0]  # the server process dies mid-episode
            other = pool.step_some({1: "echo"})[1]  # a session of the same server, mid-episode too
            assert time.monotonic() - started < 15.0  # found out from the connection, not a long wait
            for result in (died, other):
                assert result.truncated and result.info["truncation_reason"] == "env_disconnected"
            with pytest.raises(RuntimeError, match=f"reset failed on worker 0 \\({served.url}\\): env_disconnected"):
                pool.reset_some({0: None})
        finally:
            pool.close()


@pytest.mark.timeout(300)
@pytest.mark.slow  # two server starts: 15-35 s; a dead server's truncation is in the fast suite
def test_a_server_restarted_between_episodes_is_reconnected_to():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    extra = ["--port", str(port), *REVEAL]  # the same address after the restart
    first = ServerProcess(SIGNALS, env_kwargs=WORLD, max_sessions=2, panel_size=2, extra_args=extra)
    pool = RemotePool(first.url, 1, env_id=SIGNALS, env_kwargs=WORLD)
    try:
        _, info = pool.reset_some({0: {"task": "signals/eval/10000"}})[0]
        assert pool.step_some({0: info["walkthrough"][0]})[0].reward > 0
        first.kill()
        with ServerProcess(SIGNALS, env_kwargs=WORLD, max_sessions=2, panel_size=2, extra_args=extra) as second:
            assert second.url == first.url
            # The next episode's reset finds its session gone, opens one on the new server and starts there.
            _, again = pool.reset_some({0: {"task": "signals/eval/10000"}})[0]
            assert pool.respawns == 1 and again["turn"] == 0
            assert pool.step_some({0: again["walkthrough"][0]})[0].reward > 0
            second.kill()  # and a step whose server is gone is truncated, never retried elsewhere
            lost = pool.step_some({0: again["walkthrough"][1]})[0]
            assert lost.truncated and lost.info["truncation_reason"] == "env_disconnected"
    finally:
        pool.close()
        first.close()


def test_make_pool_names_its_backends_and_what_they_need():
    with pytest.raises(ValueError, match="unknown pool backend 'grpc'"):
        make_pool(SIGNALS, 2, backend="grpc")
    with pytest.raises(ValueError, match="backend='remote' needs the server's address"):
        make_pool(SIGNALS, 2, backend="remote")
    with pytest.raises(ValueError, match="only used by backend='remote'"):
        make_pool(SIGNALS, 2, server="ws://127.0.0.1:1")
    with pytest.raises(ValueError, match="expected a server address"):
        RemotePool("ftp://nowhere", 1)


@pytest.mark.timeout(300)
def test_serve_command_errors_are_one_line(capsys):
    assert main(["serve", "turngym/Signalz-v0"]) == 2
    assert "did you mean 'turngym/Signals-v0'" in capsys.readouterr().err
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        assert main(["serve", SIGNALS, "--port", str(taken.getsockname()[1])]) == 2
    finally:
        taken.close()
    err = capsys.readouterr().err
    assert err.startswith("turngym serve: error: port") and "already in use" in err and len(err.splitlines()) == 1
    assert main(["eval", "--env", SIGNALS, "--env-backend", "remote", "--agent", "oracle"]) == 2
    assert "--env-backend='remote' needs the server's address (--env-server)" in capsys.readouterr().err


def test_the_training_config_says_where_the_worlds_run(tmp_path):
    from test_trainer import make_args

    assert make_args(tmp_path).pool_options() == {}
    assert make_args(tmp_path, env_backend="remote", env_server="ws://a:1, ws://b:2").pool_options() == {
        "backend": "remote", "server": ["ws://a:1", "ws://b:2"]}
    assert make_args(tmp_path, env_backend="ray", env_worlds_per_actor=4).pool_options() == {
        "backend": "ray", "worlds_per_actor": 4}
    with pytest.raises(ValueError, match=r"env_backend='remote' needs the server's address \(env_server\)"):
        make_args(tmp_path, env_backend="remote")
    with pytest.raises(ValueError, match=r"env_server \(ws://a:1\) is only used by env_backend='remote'"):
        make_args(tmp_path, env_server="ws://a:1")
    # any registered pool backend, looked up when the config resolves (after `imports`, which may register one)
    with pytest.raises(ValueError, match="unknown pool backend 'grpc'; choose one of process, .*ray"):
        make_args(tmp_path, env_backend="grpc").resolve()
    register_pool_backend("test-config-backend", lambda *args, **kwargs: None)  # never called here
    assert make_args(tmp_path, env_backend="test-config-backend").resolve().pool_options() == {
        "backend": "test-config-backend"}


@pytest.mark.timeout(300)
def test_a_served_tools_world_publishes_its_tool_schema_and_takes_calls():
    """Under the tools protocol the schema is in every reset's info (solutions hidden, tools not), and a call
    steps the served world as it steps a local one."""
    from turngym.envs.tools import ToolCall

    world = {**WORLD, "action_protocol": "tools"}
    task = task_panel(SIGNALS, "eval", 1, world)[0]
    local = LocalPool.from_id(SIGNALS, 1, env_kwargs=world)
    with ServerProcess(SIGNALS, env_kwargs=world, max_sessions=2, panel_size=4) as hidden:
        remote = RemotePool(hidden.url, 1, env_id=SIGNALS, env_kwargs=world)
        try:
            here = local.reset_some({0: {"task": task}}, {0: 3})[0][1]
            there = remote.reset_some({0: {"task": task}}, {0: 3})[0][1]
            assert there["tools"] == jsonable(here["tools"]) and there["action_protocol"] == "tools"
            assert "walkthrough" not in there  # served without --reveal-solutions
            for action in ('{"name": "shell"}', ToolCall("command", {"command": here["walkthrough"][0]}).to_action()):
                a, b = local.step_some({0: action})[0], remote.step_some({0: action})[0]
                assert (b.observation, b.reward, b.info["invalid_action"]) == (a.observation, a.reward,
                                                                              a.info["invalid_action"])
        finally:
            remote.close()
            local.close()
