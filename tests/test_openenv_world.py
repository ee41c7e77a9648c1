"""`turngym/OpenEnv-v0`: an OpenEnv server played as a world plays exactly like the world it serves.

Every server here is a real child process on 127.0.0.1: `turngym serve turngym/Signals-v0`, or a plain
OpenEnv server that is not turngym's (tests/helpers_openenv.py).
"""

from __future__ import annotations

import json
import socket
import time

import pytest

pytest.importorskip("openenv")

from tests.helpers_openenv import SECRET, GenericServer
from tests.test_openenv_serve import REVEAL, SIGNALS, TOKEN, WORLD, token, trajectory_fields  # noqa: F401 - a fixture
from turngym import envs
from turngym.agents.baselines import OracleAgent, RandomAgent
from turngym.agents.evaluate import evaluate
from turngym.envs.checker import check_text_env
from turngym.envs.openenv.client import served_panel
from turngym.envs.openenv.protocol import jsonable
from turngym.envs.openenv.server import ServerProcess
from turngym.envs.openenv.world import observation_text
from turngym.envs.panels import task_panel
from turngym.recipes.cli import main

OPENENV = "turngym/OpenEnv-v0"


@pytest.fixture(scope="module")
def server(token):  # noqa: F811 - the fixture imported above, requested so the server starts after it
    with ServerProcess(SIGNALS, env_kwargs=WORLD, max_sessions=8, panel_size=8, extra_args=REVEAL) as process:
        yield process


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("agent", [OracleAgent, RandomAgent])
def test_the_same_agent_plays_the_same_episodes_through_openenv_as_directly(server, agent):
    tasks = task_panel(SIGNALS, "eval", 6, WORLD)
    assert task_panel(OPENENV, "eval", 6, {"base_url": server.url}).fingerprint == tasks.fingerprint
    direct = evaluate(agent(seed=5), SIGNALS, tasks, env_kwargs=WORLD, batch=3, seed=11, progress=False)
    played = evaluate(agent(seed=5), OPENENV, tasks, env_kwargs={"base_url": server.url}, batch=3, seed=11,
                      progress=False)
    assert trajectory_fields(played.trajectories) == trajectory_fields(direct.trajectories)
    assert played.overall == direct.overall
    assert any(0 < r < 1 for t in played.trajectories for r in t.turn_rewards)  # the server's dense rewards


@pytest.mark.timeout(300)
def test_every_step_and_info_matches_the_direct_world(server):
    task = task_panel(SIGNALS, "eval", 3, WORLD)[2]
    direct = envs.make(SIGNALS, **WORLD)
    played = envs.make(OPENENV, base_url=server.url)
    try:
        here, there = direct.reset(seed=1, options={"task": task}), played.reset(seed=1, options={"task": task})
        assert there == (here[0], jsonable(here[1]))
        walkthrough = here[1]["walkthrough"]
        wrong = next(c for c in ("stop", "go") if c != walkthrough[0])
        for action in ["jump", wrong, *walkthrough]:  # inadmissible, wrong, then the win
            a, b = direct.step(action), played.step(action)
            assert b[:4] == a[:4]
            assert b[4] == jsonable(a[4])
        assert b[2] and b[4]["won"] and b[4]["episode_reward"] == pytest.approx(1.0)
        assert b[4]["reward_components"] == {"outcome": 1.0, "progress": pytest.approx(1 / 3)}
        # Bad model output is refused here, with feedback; it never travels and the episode goes on.
        played.reset(seed=1, options={"task": task})
        for bad in ["", "x" * 100_000, "\x00\xff\x1b[2J", "stop\nrm -rf /"]:
            observation, reward, terminated, truncated, info = played.step(bad)
            assert info["invalid_action"] and observation.startswith("Invalid action:") and reward == 0.0
            assert not (terminated or truncated)
        assert played.step(walkthrough[0])[1] == pytest.approx(1 / 3)
    finally:
        played.close()
        direct.close()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("reward_mode", ["dense", "sparse"])
def test_it_keeps_the_text_env_contract(server, reward_mode):
    world = envs.make(OPENENV, base_url=server.url, reward_mode=reward_mode)
    try:
        ran = check_text_env(world)
        assert "the walkthrough wins" in ran and "gymnasium check_env" in ran
        _, info = world.reset(seed=0)  # no task given: the server draws one, and says which
        assert info["task"]["id"].startswith("signals/train/") and info["max_turns"] == 2 * WORLD["turns"]
        rewards = [world.step(command)[1] for command in info["walkthrough"]]
        assert rewards == ([0.0, 0.0, 1.0] if reward_mode == "sparse" else pytest.approx([1 / 3] * 3))
        # One right command, then wrong ones up to the turn limit: sparse pays the return (1/3) at the end.
        _, info = world.reset(seed=0)
        wrong = next(c for c in ("stop", "go") if c != info["walkthrough"][1])
        played = [world.step(command) for command in [info["walkthrough"][0]] + [wrong] * 5]
        assert played[-1][3] and played[-1][4]["truncation_reason"] == "max_turns"
        expected = [0.0] * 5 + [1 / 3] if reward_mode == "sparse" else [1 / 3] + [0.0] * 5
        assert [r for _, r, *_ in played] == pytest.approx(expected)
    finally:
        world.close()


@pytest.mark.timeout(300)
def test_turngym_eval_and_play_use_the_servers_held_out_split(server, tmp_path, capsys, monkeypatch):
    code = main(["eval", "--env", OPENENV, "--env-arg", f"base_url={server.url}", "--agent", "oracle",
                 "--episodes", "4", "--out", str(tmp_path)])
    assert code == 0, capsys.readouterr().err
    report = json.loads((tmp_path / "oracle.json").read_text())
    assert report["taskset_fingerprint"] == served_panel(server.url, "eval", 4).fingerprint
    assert report["overall"]["episodes"] == 4 and report["overall"]["success_rate"] == 1.0
    episodes = [json.loads(line) for line in (tmp_path / "oracle.jsonl").read_text().splitlines()]
    assert {e["task"]["split"] for e in episodes} == {"eval"}
    capsys.readouterr()
    monkeypatch.setattr("builtins.input", lambda prompt="": (_ for _ in ()).throw(EOFError))  # Ctrl-D at once
    assert main(["play", OPENENV, "--env-arg", f"base_url={server.url}", "--seed", "0"]) == 0
    assert capsys.readouterr().out.startswith("[signals/eval/")


@pytest.mark.timeout(120)
def test_a_missing_or_unreachable_server_is_a_one_line_error(capsys):
    # --threads 1: on a busy machine eval's hint about torch's threads would be a line of its own (load-dependent)
    assert main(["eval", "--env", OPENENV, "--agent", "oracle", "--threads", "1"]) == 2
    err = capsys.readouterr().err
    assert "needs base_url" in err and "--env-arg base_url=" in err and len(err.splitlines()) == 1
    with pytest.raises(ValueError, match="needs base_url"):
        envs.make(OPENENV)
    port = free_port()
    started = time.monotonic()
    with pytest.raises(ConnectionError, match=f"no OpenEnv server answers at ws://127.0.0.1:{port}") as error:
        envs.make(OPENENV, base_url=f"127.0.0.1:{port}", connect_timeout=5)
    assert len(str(error.value).splitlines()) == 1 and time.monotonic() - started < 30
    assert main(["play", OPENENV, "--env-arg", f"base_url=127.0.0.1:{port}"]) == 2
    assert "no OpenEnv server answers" in capsys.readouterr().err


@pytest.mark.timeout(120)
def test_a_full_server_is_refused_in_one_clear_line(server):
    """The server holds 8 sessions: the 9th world is told the server is full, however its refusal arrives
    (an error frame, or a close with the refusal still buffered), and no world is left half-open."""
    worlds = [envs.make(OPENENV, base_url=server.url) for _ in range(8)]
    try:
        for _ in range(3):
            with pytest.raises(ConnectionError, match="has no free session.*--max-sessions") as error:
                envs.make(OPENENV, base_url=server.url)
            assert len(str(error.value).splitlines()) == 1
    finally:
        for world in worlds:
            world.close()
    envs.make(OPENENV, base_url=server.url).close()  # the sessions were given back


@pytest.mark.timeout(300)
def test_a_server_killed_mid_episode_truncates_the_episode():
    with ServerProcess(SIGNALS, env_kwargs=WORLD, max_sessions=2, panel_size=2, extra_args=REVEAL) as served:
        world = envs.make(OPENENV, base_url=served.url, ping_interval=0.5, ping_timeout=2.0)
        try:
            _, info = world.reset(seed=0)
            assert world.step(info["walkthrough"][0])[1] > 0
            served.kill()
            started = time.monotonic()
            observation, reward, terminated, truncated, info = world.step(info["walkthrough"][1])
            assert time.monotonic() - started < 15
            assert truncated and not terminated and info["truncation_reason"] == "env_disconnected"
            assert "connection to the OpenEnv server was lost" in observation and reward == 0.0
            assert info["episode_reward"] == pytest.approx(1 / 3)
            with pytest.raises(ConnectionError, match="no OpenEnv server answers"):
                world.reset(seed=0)  # no server to reconnect to: a setup error, at once
        finally:
            world.close()


@pytest.mark.timeout(300)
def test_any_openenv_server_plays_as_a_world():
    with GenericServer() as served:
        with pytest.raises(ValueError, match=r"have the fields \['message'\], not 'command'.*action_field"):
            envs.make(OPENENV, base_url=served.url)
        with pytest.raises(ValueError, match=r"observations .* have the fields \['reply', 'tries_left'\]"):
            envs.make(OPENENV, base_url=served.url, action_field="message", observation_field="score")
        world = envs.make(OPENENV, base_url=served.url, action_field="message", step_timeout=2.0).unwrapped
        try:
            assert not world.is_turngym_server
            observation, info = world.reset(seed=4)
            assert observation == "Guess my word (seed 4)." and info["openenv_observation"]["tries_left"] == 3
            assert world.step(SECRET)[1:4] == (1.0, True, False) and world._state.won  # won: the metadata says so
            world.reset(seed=4)
            refused = world.step("y" * 41)  # valid here, but the server's schema refuses it
            assert refused[4]["invalid_action"] and "the server refused it" in refused[0] and not refused[3]
            for guess in ("apple", "pear", "plum"):
                observation, reward, terminated, truncated, info = world.step(guess)
            assert terminated and not truncated and info["lost"] and not info["won"] and reward == 0.0
            assert observation == "No, not plum." and info["openenv_observation"]["tries_left"] == 0
            world.reset(seed=4)
            broke = world.step("raise")
            assert broke[3] and broke[4]["truncation_reason"] == "env_error" and "broke" in broke[0]
            world.reset(seed=4)
            started = time.monotonic()
            hung = world.step("hang")
            assert hung[3] and hung[4]["truncation_reason"] == "env_timeout" and time.monotonic() - started < 10
            assert world.reset(seed=5)[0] == "Guess my word (seed 5)."  # the next episode, on a new session
        finally:
            world.close()
        shown = envs.make(OPENENV, base_url=served.url, action_field="message", observation_field="tries_left",
                          render_observation=None)
        rendered = envs.make(OPENENV, base_url=served.url, action_field="message",
                             render_observation=lambda fields: f"{fields['reply']} [{fields['tries_left']} left]")
        try:
            assert shown.reset(seed=1)[0] == "3"
            assert rendered.reset(seed=1)[0] == "Guess my word (seed 1). [3 left]"
        finally:
            shown.close()
            rendered.close()


def test_an_observation_is_read_as_text():
    assert observation_text({"text": "hi", "metadata": {"x": 1}}) == "hi"
    assert observation_text({"reply": "hi", "tries_left": 2}) == "hi"  # the only text field
    assert observation_text({"prompt": "p", "stdout": "o", "board": "b"}) == "p"  # the first known text field
    assert observation_text({"board": [[0, 1]], "score": 2}) == '{"board": [[0, 1]], "score": 2}'
    assert observation_text({"a": "x", "b": "y"}) == '{"a": "x", "b": "y"}'
    assert observation_text({"score": 2, "reply": "r"}, "score") == "2"
    assert observation_text({"reply": "r"}, "missing") == '{"reply": "r"}'  # nothing is hidden
