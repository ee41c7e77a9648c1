"""bench/async_pipeline.py's GPU projection and report, on hand-computed numbers (no timings are asserted)."""

from __future__ import annotations

import json

import pytest

from tests.helpers_scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("bench/async_pipeline.py")


def test_the_projection_overlaps_only_what_the_devices_allow(bench):
    # W = 2 s of worlds, G = 8 s of generation, U = 10 s of update on this CPU.
    # s = 1, own devices: K = 0 pays 2 + 8 + 10 = 20, K >= 1 max(10, 10) = 10: 2x.
    assert bench.projected_speedup(2, 8, 10, 1, shared_device=False) == pytest.approx(2.0)
    # one shared device: K >= 1 pays max(10, 8 + 10) = 18: 20 / 18.
    assert bench.projected_speedup(2, 8, 10, 1, shared_device=True) == pytest.approx(20 / 18)
    # s = 2: rollout 2 + 4 = 6, update 5; K = 0 pays 11; own devices max(6, 5) = 6; shared max(6, 4 + 5) = 9.
    assert bench.projected_speedup(2, 8, 10, 2, shared_device=False) == pytest.approx(11 / 6)
    assert bench.projected_speedup(2, 8, 10, 2, shared_device=True) == pytest.approx(11 / 9)
    # worlds only (G = U = 0 after a huge speed-up): nothing left to overlap them with.
    assert bench.projected_speedup(5, 8, 10, 1e9, shared_device=False) == pytest.approx(1.0)


def run(k: int, steady: float, idle: float, update: float, repeat: int = 0) -> dict:
    return {"world": "latency", "backend": "hf", "k": k, "steps": 4, "wall_s": 100.0, "episodes_per_s": 0.3,
            "steady_episodes_per_s": steady, "trainer_idle_s_per_step": idle, "trainer_idle_share": 0.5,
            "update_s_per_step": update, "sampler_idle_s_per_step": 0.0, "staleness_mean": 0.5 * k,
            "peak_rss_mb": 1000, "repeat": repeat}


def test_the_report_reads_a_saved_run_back(bench, tmp_path, capsys, monkeypatch):
    runs = [run(0, 0.2, 12.0, 20.0), run(1, 0.3, 1.0, 21.0), run(1, 0.25, 1.0, 21.0, repeat=1),
            run(0, 0.25, 12.0, 20.0, repeat=1)]
    saved = tmp_path / "runs.json"
    saved.write_text(json.dumps({"command": "python bench/async_pipeline.py", "date": "2026-11-29", "cores": 2,
                                 "worlds": {"latency": {"world_s_per_step": 4.0, "world_s": [4.0]}}, "runs": runs}))
    monkeypatch.setattr("sys.argv", ["async_pipeline.py", "--report", str(saved), "--gpu-factors", "1"])
    bench.main()
    out = capsys.readouterr().out
    assert "latency hf K=1: 1.25x (1.50x, 1.00x)" in out  # 0.3 / 0.2 and 0.25 / 0.25, median 1.25
    # the projection from repeat 0's K = 0 run: W 4, G 12 - 4 = 8, U 20; s = 1: 32 / 20 and 32 / 28
    assert "| latency | hf | 4.0 | 8.0 | 20.0 | 1.60x | 1.14x |" in out
