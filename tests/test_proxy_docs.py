"""docs/proxy.md's three steps, run as written (a tiny policy and a tiny budget appended): `turngym proxy` serves in
its own process, the example harness's __main__ plays one episode against it as another and every call is recorded
(exact ids and logprobs, spliced); `turngym train` trains the harness."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def commands() -> list[list[str]]:
    """The docs' shell commands, in order."""
    blocks = re.findall(r"```bash\n(.*?)```", (REPO_ROOT / "docs" / "proxy.md").read_text(), flags=re.DOTALL)
    return [shlex.split(line) for block in blocks for line in block.splitlines() if line.strip()]


def test_the_docs_commands_are_the_three_steps():
    proxy, harness, train = commands()
    assert proxy[:2] == ["turngym", "proxy"] and "--record" in proxy
    assert harness[:2] == ["python", "examples/openai_harness.py"] and "/episodes/try-1/v1" in harness[-1]
    assert train == ["turngym", "train", "--config", "recipes/configs/harness-signals.yaml"]


@pytest.mark.timeout(300)
def test_step_2_serves_the_policy_and_records_the_example_harnesss_calls(tiny_policy, tmp_path):
    from turngym.envs.openenv.server import ChildServer

    proxy, harness, _ = commands()
    record = tmp_path / proxy[proxy.index("--record") + 1]
    argv = [a for a in proxy[2:]]
    argv[argv.index("--port") + 1] = "0"  # a free port, not the docs' 8001
    argv[argv.index("--record") + 1] = str(record)
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    ready = re.compile(r"turngym proxy: serving \S+ \(hf\) at (?P<url>http://\S+)/v1;")
    command = [sys.executable, "-m", "turngym.recipes.cli", "proxy", *argv, "--model", str(tiny_policy),
               "--max-tokens", "4"]
    with ChildServer(command, ready=ready, cwd=str(REPO_ROOT), environment=environment) as server:
        root = server.url
        base = harness[-1].replace("http://127.0.0.1:8001", root)
        played = subprocess.run([sys.executable, *harness[1:-1], base, "--max-tokens", "4"], cwd=REPO_ROOT,
                                env=environment, capture_output=True, text=True, timeout=240, check=False)
    assert played.returncode == 0, played.stderr[-2000:]
    calls = int(re.search(r"played one episode: (\d+) model calls", played.stdout).group(1))
    lines = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    assert calls >= 1 and len(lines) == calls
    assert [(c["episode"], c["index"], c["choice"]) for c in lines] == [("try-1", i, 0) for i in range(calls)]
    for before, made in zip([None, *lines], lines, strict=False):
        assert made["prompt_ids"] and all(isinstance(t, int) for t in made["prompt_ids"] + made["completion_ids"])
        assert 1 <= len(made["completion_ids"]) <= 4 and len(made["logprobs"]) == len(made["completion_ids"])
        assert all(lp <= 0 for lp in made["logprobs"]) and made["delivered"] and not made["rewritten"]
        if before is not None:  # the harness sent each reply back unchanged: its sampled ids are the history
            assert made["parent"] == [before["index"], 0]
            assert made["prompt_ids"][: len(before["prompt_ids"]) + len(before["completion_ids"])] == \
                before["prompt_ids"] + before["completion_ids"]


@pytest.mark.timeout(600)
def test_step_3_trains_the_example_harness_with_its_command(tiny_policy, tmp_path, monkeypatch, capsys, caplog):
    from turngym.recipes.cli import main

    *_, train = commands()
    monkeypatch.chdir(REPO_ROOT)
    tiny = ["--model_name_or_path", str(tiny_policy), "--max_steps", "1", "--num_generations", "2",
            "--per_device_train_batch_size", "2", "--harness_kwargs", '{"max_tokens": 4, "max_calls": 4}',
            "--output_dir", str(tmp_path / "run"), "--disable_tqdm", "true", "--threads", "1"]
    caplog.set_level("DEBUG", logger="turngym.trainers.harness")
    assert main(train[1:] + tiny) == 0
    out = capsys.readouterr()
    assert f"policy saved to {tmp_path / 'run'}" in out.out
    played = [r.getMessage() for r in caplog.records if r.name == "turngym.trainers.harness"]
    assert any("2 harness episodes played" in message for message in played)  # the step's rollouts: the harness
    assert (tmp_path / "run" / "model.safetensors").exists()
