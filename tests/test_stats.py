"""`turngym stats` as a user runs it: every outcome file the project commits prints its table, and a malformed
one (wrong type, bad cell, missing key, unknown arm or panel, empty, binary) is one line naming the file and what
is wrong, exit status 2, never a traceback or a table of `nan %` (issues 40 and 47)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from turngym.recipes.cli import main

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs" / "outcomes").rglob("*") if p.is_file())
GOOD = {"name": "tiny", "panels": {"held_out": "abc"}, "arms": {
    "sft-only": {"demos": 4, "episodes": 0, "null": False,
                 "outcomes": {"0": {"held_out": {"t1": 1.0, "t2": 0.0, "t3": 1.0}}}},
    "rl": {"demos": 4, "episodes": 8, "null": False,
           "outcomes": {"0": {"held_out": {"t1": 1.0, "t2": 1.0, "t3": 0.0}}}},
}}


def cell(value) -> dict:
    """GOOD with one cell replaced."""
    record = json.loads(json.dumps(GOOD))
    record["arms"]["rl"]["outcomes"]["0"]["held_out"]["t2"] = value
    return record


def test_every_committed_outcome_file_is_listed():
    assert len(COMMITTED) >= 7 and "docs/outcomes/textworld-headline.json" in COMMITTED


@pytest.mark.parametrize("name", COMMITTED)
def test_stats_prints_the_table_of_every_committed_outcome_file(name, capsys):
    """Each file under docs/outcomes/ (a new one too: the list is the folder's) is a table stats reads."""
    assert main(["stats", str(ROOT / name)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert out.startswith(("| policy |", "### ")) and "(reference)" in out
    assert "nan" not in out and " % (" in out


def test_the_per_seed_rates_give_back_the_published_seed_level_intervals(capsys):
    assert main(["stats", str(ROOT / "docs" / "outcomes" / "issue14-per-seed.json")]) == 0
    out = capsys.readouterr().out
    results = (ROOT / "docs" / "results.md").read_text()
    assert "| turn_rloo | 65 / 71 / 73 | 69.7 % (59.3-80.0) | +1 / +10 / +6 | +5.7 (-5.5 to +16.9) |" in out
    assert "+5.7 (-5.5 to +16.9)" in results and "-8.3 (-28.4 to +11.7)" in out and "-8.3 (-28.4 to +11.7)" in results


def test_per_game_records_and_sampled_runs_are_tables_of_one_seed(capsys):
    assert main(["stats", str(ROOT / "docs" / "outcomes" / "tool-calls-2026-11-26.json"),
                 "--reference", "sft-free_form"]) == 0
    out = capsys.readouterr().out
    assert "| sft-tools | 50.0 % (35.2-64.8) |" in out and "vs sft-free_form" in out  # 20 and 11 of 40 won
    assert main(["stats", str(ROOT / "docs" / "outcomes" / "readme-world-2026-11-26.json")]) == 0
    assert "| run 3 (the README's): warm start + RL (output_dir) | 60.0 %" in capsys.readouterr().out  # 24 of 40


MALFORMED = {  # file content -> what the one line says
    "a_list": ([GOOD], "a JSON list without \"arms\""),
    "a_string": ("outcomes", "a JSON string without"),
    "arms_a_list": ({"arms": [1, 2]}, '"arms" is a JSON list, not an object'),
    "no_arms": ({"name": "x", "panels": {}}, 'without "arms", "runs" or "studies"'),
    "no_outcomes": ({"arms": {"a": {"demos": 1}}}, "arm 'a' has neither \"outcomes\""),
    "string_cell": (cell("1.0"), "task 't2' is \"1.0\", not a number in [0, 1]"),
    "bool_cell": (cell(True), "task 't2' is true, not a number"),
    "nan_cell": (cell(float("nan")), "task 't2' is nan, not a finite number"),
    "infinite_cell": (cell(float("inf")), "task 't2' is inf, not a finite number"),
    "cell_above_one": (cell(1.2), "task 't2' is 1.2, outside [0, 1]"),
    "cell_below_zero": (cell(-0.1), "task 't2' is -0.1, outside [0, 1]"),
    "seeds_a_list": ({"arms": {"a": {"outcomes": [0.5]}}}, "arm 'a''s outcomes is a JSON list, not an object"),
    "demos_a_string": ({"arms": {"a": {**GOOD["arms"]["rl"], "demos": "4"}}}, "arm 'a''s demos is \"4\", not a count"),
    "null_a_number": ({"arms": {"a": {**GOOD["arms"]["rl"], "null": 1}}}, "arm 'a''s null is 1, not true or false"),
    "won_a_string": ({"arms": {"a": {"games": {"t": {"won": "yes"}}}}}, "game 't': won is \"yes\""),
    "won_missing": ({"arms": {"a": {"games": {"t": {"turns": 3}}}}}, "game 't': won is null"),
    "samples_empty": ({"runs": [{"run": "r", "arms": {"a": {"t": []}}}]}, "run 'r', arm 'a', task 't' is empty"),
    "sample_above_one": ({"runs": [{"run": "r", "arms": {"a": {"t": [0, 2]}}}]}, "a sample is 2, outside [0, 1]"),
    "rate_above_100": ({"seeds": [0, 1], "studies": {"s": {"a": [50, 120]}}}, "seed 1: the rate is 120, outside"),
    "rates_short": ({"seeds": [0, 1], "studies": {"s": {"a": [50]}}}, "has 1 rates for 2 seeds"),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_outcome_file_is_one_line_naming_it(name, tmp_path, capsys):
    content, message = MALFORMED[name]
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(content))
    assert main(["stats", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith(f"turngym stats: error: {path}: ") and message in captured.err, captured.err


@pytest.mark.parametrize(("data", "message"), [
    (b"", "the file is empty; expected a study's outcomes.json"),
    (b"  \n", "the file is empty"),
    (bytes(range(256)) * 4, "not JSON"),
    (b'{"arms": {"a": {"outcomes": {"0": {"held_out": {"t": NaN}}}}}}', "task 't' is nan, not a finite number"),
    (b'{"arms": {"a": {"outcomes": {"0": {"held_out": {"t": Infinity}}}}}}', "task 't' is inf, not a finite"),
    (b'{"arms": {"a": {"outcomes": {"0": {"held_out": {"t": ' + b"9" * 5000 + b"}}}}}}", "not JSON"),
    (b"[" * 100_000, "nested too deeply"),
])
def test_empty_binary_or_unreadable_bytes_are_one_line(data, message, tmp_path, capsys):
    path = tmp_path / "outcomes.json"
    path.write_bytes(data)
    assert main(["stats", str(tmp_path)]) == 2  # a folder means its outcomes.json
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: " in err and message in err, err


def test_an_unknown_panel_or_reference_is_refused_listing_the_known_ones(tmp_path, capsys):
    path = tmp_path / "outcomes.json"
    path.write_text(json.dumps(GOOD))
    assert main(["stats", str(path), "--panel", "nope"]) == 2
    assert capsys.readouterr().err == f"turngym stats: error: {path}: no panel 'nope'; the panels are 'held_out'\n"
    assert main(["stats", str(path), "--reference", "ppo"]) == 2
    assert capsys.readouterr().err == (f"turngym stats: error: {path}: no arm 'ppo' for --reference; the arms are "
                                       "'sft-only', 'rl'\n")
    rates = ROOT / "docs" / "outcomes" / "issue14-per-seed.json"
    assert main(["stats", str(rates), "--reference", "ppo"]) == 2  # not in every study
    assert "study 'demo at lr 5e-6' has no arm 'ppo'" in capsys.readouterr().err
    assert main(["stats", str(rates), "--panel", "held_out"]) == 2
    assert "per-seed rates, which have no panels" in capsys.readouterr().err
    assert main(["stats", str(path), "--reference", "rl"]) == 0 and "vs rl" in capsys.readouterr().out


def test_an_arm_without_outcomes_on_the_panel_is_refused_not_printed_as_zero(tmp_path, capsys):
    record = json.loads(json.dumps(GOOD))
    record["arms"]["rl"]["outcomes"]["0"] = {"harder": {"t1": 1.0}}
    path = tmp_path / "outcomes.json"
    path.write_text(json.dumps(record))
    assert main(["stats", str(path)]) == 2
    assert "arm 'rl' has no outcomes on panel 'held_out'" in capsys.readouterr().err


def test_the_command_line_says_it_in_one_line_in_a_subprocess(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(cell(float("nan"))))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-m", "turngym.recipes.cli", "stats", str(path)], capture_output=True,
                         text=True, env=env, timeout=120, check=False)
    assert run.returncode == 2 and run.stdout == "" and "Traceback" not in run.stderr
    line = f"turngym stats: error: {path}: arm 'rl', seed 0, panel 'held_out', task 't2' is nan, not a finite number"
    assert run.stderr.strip().splitlines() == [line]


def test_the_published_algorithm_comparison_is_what_stats_prints(capsys):
    """docs/results.md's tables of issue 43's main study (tier 1, 5 seeds), row by row, from the committed main.json
    (merging new stages into it without republishing the tables fails here)."""
    assert main(["stats", str(ROOT / "docs" / "outcomes" / "algorithm-comparison" / "main.json"),
                 "--plan", "algorithm-comparison"]) == 0
    out = capsys.readouterr().out
    results = (ROOT / "docs" / "results.md").read_text()
    section = results.split("### Main study, tier 1", 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("|---")]
    assert len(rows) >= 7 + 13, "the success table and the families' table"
    missing = [row for row in rows if row not in out.splitlines()]
    assert not missing, missing


TIER2_FILES = ["main.json", "running-tier2-seeds-120-121.json", "running-tier2-seed-122.json",
               "running-tier2-seed-123.json", "running-tier2-seed-124.json",
               "running-tier2-seed-124-ppo-sparse.json"]


def test_the_published_tier_2_is_what_stats_prints(tmp_path, capsys):
    """docs/results.md's tier-2 tables (issue 43: F4, dense against sparse rewards) from the committed stage files:
    their merge is the committed tiers-1-2.json, and every row published is a row stats prints from it."""
    folder = ROOT / "docs" / "outcomes" / "algorithm-comparison"
    merged = tmp_path / "merged.json"
    assert main(["stats", *(str(folder / name) for name in TIER2_FILES), "--keep-first", "sft-only",
                 "--merged-out", str(merged)]) == 0
    capsys.readouterr()
    assert json.loads(merged.read_text()) == json.loads((folder / "tiers-1-2.json").read_text())
    assert main(["stats", str(folder / "tiers-1-2.json"), "--plan", "algorithm-comparison"]) == 0
    out = capsys.readouterr().out.splitlines()
    results = (ROOT / "docs" / "results.md").read_text()
    section = results.split("### Main study, tier 2", 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("|---")]
    assert any(row.startswith("| F4") for row in rows) and any(row.startswith("| ppo-sparse") for row in rows)
    missing = [row for row in rows if row not in out]
    assert not missing, missing
