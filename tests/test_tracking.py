"""Experiment tracking: the trainer's decoded episode samples (with per-turn advantages) and `turngym train`'s
default, local trackio logging, which never touches the network."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_llm import scripted_signals_backend, tiny_llama, word_tokenizer

from turngym.envs.signals import signal_tasks
from turngym.recipes.commands.training import _with_defaults
from turngym.trainers.config import TurnGymConfig
from turngym.trainers.trainer import EPISODE_SAMPLES, TurnGymTrainer, sample_table_row, turn_advantages

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return word_tokenizer(tmp_path_factory.mktemp("words"))




def test_the_trainer_writes_each_steps_episodes_with_their_turn_advantages(tmp_path, tokenizer):
    args = TurnGymConfig(output_dir=str(tmp_path / "run"), env_id="turngym/Signals-v0",
                         env_kwargs={"turns": 3, "colours": 2}, reward_mode="dense", action_format="last_line",
                         max_new_tokens_per_turn=2, algorithm="turn_rloo", num_generations=4,
                         per_device_train_batch_size=8, max_steps=2, learning_rate=1e-2, logging_steps=1,
                         report_to="none", save_strategy="no", max_completion_length=64, seed=0, disable_tqdm=True,
                         tis_cap=None, episode_samples=8)
    tasks = signal_tasks("train", 8, turns=3, colours=2)
    trainer = TurnGymTrainer(tiny_llama(len(tokenizer)).train(), args, tasks=tasks, processing_class=tokenizer,
                             backend=scripted_signals_backend(tokenizer))
    trainer.train()
    records = [json.loads(line) for line in (tmp_path / "run" / EPISODE_SAMPLES).read_text().splitlines()]
    assert [r["step"] for r in records] == [1] * 8 + [2] * 8
    for step in (1, 2):
        batch = [r for r in records if r["step"] == step]
        groups = [r["group"] for r in batch]
        assert groups[0] == groups[3] != groups[4] == groups[7]  # two groups of 4 consecutive episodes
        # Each turn's logged advantage is turn-level RLOO over its group, recomputed here from the turn rewards.
        expected = turn_advantages("turn_rloo", [r["turn_rewards"] for r in batch], groups)
        for record, advantages in zip(batch, expected, strict=True):
            assert record["turn_advantages"] == pytest.approx(advantages, abs=1e-5)
            assert len(record["turn_advantages"]) == record["num_turns"] == len(record["actions"])
            assert record["observations"] and record["record"]["replies"] and "completion_ids" not in record["record"]
    row = sample_table_row(records[0])
    assert row["task"] == records[0]["task"]["id"] and row["transcript"].startswith("1. ")
    assert f"A {records[0]['turn_advantages'][0]:+.3f}" in row["transcript"]

    from turngym.recipes.view import load_sources, render_page

    page = render_page(load_sources(tmp_path / "run"))
    assert "<th>advantage</th>" in page and page.count('<section class="episode') == 16 and "step 2" in page


def test_episode_samples_can_be_turned_off(tmp_path):
    with pytest.raises(ValueError, match="episode_samples"):
        TurnGymConfig(output_dir=str(tmp_path), report_to="none", env_id="turngym/Signals-v0", episode_samples=-1)


def test_train_defaults_apply_only_where_nothing_is_given(tmp_path):
    defaults = {"report_to": "trackio", "project": "turngym"}
    assert _with_defaults(["--env_id", "x"], defaults) == ["--env_id", "x", "--report_to", "trackio",
                                                            "--project", "turngym"]
    assert _with_defaults(["--report_to", "none"], defaults) == ["--report_to", "none", "--project", "turngym"]
    assert _with_defaults(["--report_to=tensorboard"], defaults)[:1] == ["--report_to=tensorboard"]
    config = tmp_path / "run.yaml"
    config.write_text("report_to: none\nproject: mine\n")
    assert _with_defaults(["--config", str(config)], defaults) == ["--config", str(config)]


# Runs `turngym train` in a fresh process (trackio reads TRACKIO_DIR when it is imported) with every
# non-loopback connection and name lookup refused and recorded.
NO_NETWORK = """
import json, os, socket, sys
attempts = []
LOCAL = {"127.0.0.1", "::1", "localhost", None}
def _host(address):
    return address[0] if isinstance(address, tuple) else None
def _guard(original):
    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and _host(address) not in LOCAL:
            attempts.append(f"connect {address}")
            raise OSError("network refused by the test")
        return original(self, address)
    return connect
socket.socket.connect = _guard(socket.socket.connect)
socket.socket.connect_ex = _guard(socket.socket.connect_ex)
_resolve = socket.getaddrinfo
def getaddrinfo(host, *args, **kwargs):
    if host not in LOCAL:
        attempts.append(f"resolve {host}")
        raise socket.gaierror("name lookup refused by the test")
    return _resolve(host, *args, **kwargs)
socket.getaddrinfo = getaddrinfo
from turngym.recipes.cli import main
try:
    code = main(sys.argv[1:])
finally:
    with open(os.environ["NETWORK_LOG"], "w") as handle:
        json.dump(attempts, handle)
sys.exit(code)
"""


def test_turngym_train_logs_to_a_local_trackio_project_and_never_to_the_network(tmp_path, tokenizer):
    policy = tmp_path / "policy"
    tokenizer.save_pretrained(policy)
    tiny_llama(len(tokenizer)).save_pretrained(policy)
    env = {**os.environ, "TRACKIO_DIR": str(tmp_path / "trackio"), "NETWORK_LOG": str(tmp_path / "network.json"),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    for variable in ("TRACKIO_SPACE_ID", "TRACKIO_SERVER_URL"):
        env.pop(variable, None)
    command = [sys.executable, "-c", NO_NETWORK, "train", "--env_id", "turngym/Signals-v0",
               "--env_kwargs", '{"turns": 2, "colours": 2}', "--model_name_or_path", str(policy),
               "--output_dir", str(tmp_path / "run"), "--max_steps", "2", "--num_generations", "2",
               "--per_device_train_batch_size", "4", "--num_train_tasks", "4", "--max_new_tokens_per_turn", "2",
               "--max_completion_length", "64", "--action_format", "last_line", "--save_strategy", "no",
               "--logging_steps", "1", "--episode_samples", "2", "--run_name", "tiny", "--disable_tqdm", "true",
               "--threads", "1"]  # no --report_to: turngym train's default is trackio
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((tmp_path / "network.json").read_text()) == []  # not one connection or lookup
    database = tmp_path / "trackio" / "turngym.db"  # the project is "turngym"
    assert database.is_file(), sorted(p.name for p in (tmp_path / "trackio").iterdir())
    with sqlite3.connect(database) as connection:
        rows = [(name, json.loads(metrics)) for name, metrics in
                connection.execute("select run_name, metrics from metrics order by id")]
    assert {name for name, _ in rows} == {"tiny"}
    scalars = [m for _, m in rows if "train/episode/return" in m or "episode/return" in m]
    assert len(scalars) >= 2  # one log per step
    tables = [m["episodes/samples"] for _, m in rows if "episodes/samples" in m]
    assert len(tables) == 2 and all(t["_type"] == "trackio.table" for t in tables)
    first = tables[0]["_value"]
    assert len(first) == 2 and first[0]["task"].startswith("signals/train/")
    assert first[0]["transcript"].startswith("1. ")
    assert {"step", "outcome", "return", "turns", "group"} <= set(first[0])
    assert (tmp_path / "run" / EPISODE_SAMPLES).is_file()
