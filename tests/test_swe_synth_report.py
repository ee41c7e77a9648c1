"""``turngym swe report``: a synthesized set's report.json as markdown tables (envs/swe/synth/report.py)."""

from __future__ import annotations

import json

import pytest

from turngym.envs.swe.synth.report import f2p_buckets, render

SUMMARY = {
    "packages": [
        {"spec": "a==1", "name": "a", "status": "ok", "tests_kept": 10, "tests_collected": 12, "tests_flaky": 2,
         "screened": 40, "kept_mutations": 9, "drops": {"no test fails": 25, "the bug hangs the tests": 1,
                                                        "validate: PASS_TO_PASS fails on the bug": 4, "x": 1},
         "false_alarms": [{"instance_id": "a.1", "alarms": ["..."]}], "gold_disagreements": {"t::u": 2},
         "gold_gradings_disagreeing": 1, "regraded": 1, "validation_seconds": [3.0, 5.0, 10.0]},
        {"spec": "b==2", "name": "b", "status": "dropped", "reason": "no test files"},
    ],
    "tasks": 7, "splits": {"train": 6, "eval_seen": 1}, "gold_gradings": 3, "false_alarms": [{"instance_id": "a.1"}],
    "gold_gradings_disagreeing": 1, "gold_gradings_with_reference_states": 2,
    "unrepeated_voids": [{"instance_id": "a.2"}, {"instance_id": "a.3"}],
    "gold_disagreements": {"a-1: t::u": 2}, "seconds_per_validation": 6.0, "drops": {"no test fails": 25},
    "statistics": {"repositories": {"a": 7}, "modifiers": {"op_swap": 2, "remove_cond": 5},
                   "tiers": {"easy": 3, "hard": 4}, "runner": {"pytest": 7},
                   "fail_to_pass": {"median": 3, "histogram": {"1": 2, "3": 1, "5": 1, "6": 1, "19": 1, "20": 1}}},
}


def test_fail_to_pass_counts_fall_into_the_docs_buckets():
    assert f2p_buckets({"1": 2, "3": 1, "5": 1, "6": 1, "19": 1, "20": 1}) == {
        "1": 2, "2-5": 2, "6-10": 1, "11-19": 1, "20+": 1}


def test_the_report_has_a_row_per_package_and_the_sets_totals():
    text = render(SUMMARY, {"a": "train", "b": "eval"})
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert rows["a==1"] == ("| a==1 | train | 10/12 (2 flaky) | 40 | 9 | 7 | no test fails 25; "
                            "validate: PASS_TO_PASS fails on the bug 4; the bug hangs the tests 1; other 1 | "
                            "1 of 3 | 1 validation, 1 test | 1 | 5.0 / 6.0 |")
    assert rows["b==2"].startswith("| b==2 | eval | - | - | - | 0 | package dropped: no test files |")
    older_package = {k: v for k, v in SUMMARY["packages"][0].items() if k not in ("gold_gradings_disagreeing",
                                                                                   "regraded")}
    assert "| 1 of 3 | 1 test | - | 5.0 / 6.0 |" in render({**SUMMARY, "packages": [older_package]})
    assert ("| grader false alarms that void a grading (on the gold patch or the bug, repeated by every rerun) "
            "| 1 of 3 (33.3 %) |") in text
    assert "(a false alarm on a test, not a void; the task is rebuilt without it) | 1 of 3 (33.3 %), 2 test results |" \
        in text
    older = render({k: v for k, v in SUMMARY.items()
                    if k not in ("gold_gradings_disagreeing", "gold_gradings_with_reference_states")})
    assert "the task is rebuilt without it) | - |" in older  # a report written before the count was kept
    assert "| void gradings a rerun did not repeat (flaky tasks, dropped) | 2 |" in text
    assert "before validator 8, only pairs the probes refused) | 2 |" in text
    assert "only pairs the probes refused) | - |" in older  # a report written before reference states
    assert "| remove_cond | 5 |\n| op_swap | 2 |" in text  # most common first
    assert "FAIL_TO_PASS median 3; runner modes: pytest 7" in text
    assert "| tier | tasks |\n|---|---:|\n| easy | 3 |\n| hard | 4 |" in text  # a report with no tiers by split


def test_the_tier_table_has_a_column_per_split_in_the_sets_order():
    by_split = {"eval_seen": {"easy": 1}, "train": {"easy": 2, "hard": 4}}
    text = render({**SUMMARY, "statistics": {**SUMMARY["statistics"], "tiers_by_split": by_split}})
    assert "| tier | train | eval_seen | tasks |\n|---|---:|---:|---:|\n| easy | 2 | 1 | 3 |\n| hard | 4 | 0 | 4 |" \
        in text


def test_the_sets_statistics_count_tiers_by_split():
    from turngym.envs.swe.synth.pipeline import statistics

    def record(split, tier):
        return {"synth": {"package": "a", "runner": "pytest"}, "split": split, "difficulty": "op_swap",
                "difficulty_label": {"tier": tier, "failing_tests": 1}, "FAIL_TO_PASS": ["t"]}

    records = [record("train", "easy"), record("train", "hard"), record("eval", "easy"), record("eval", "easy")]
    assert statistics(records)["tiers_by_split"] == {"eval": {"easy": 2}, "train": {"easy": 1, "hard": 1}}


def test_the_cli_reads_a_sets_folder(tmp_path, capsys):
    from turngym.recipes.cli import main

    (tmp_path / "report.json").write_text(json.dumps(SUMMARY))
    (tmp_path / "manifest.json").write_text(json.dumps({"splits": {"repositories": {"a": "test"}}}))
    assert main(["swe", "report", str(tmp_path)]) == 0
    assert "| a==1 | test |" in capsys.readouterr().out
    copy = tmp_path / "docs" / "report-a.json"  # a committed copy of a report: another set's manifest is not its
    copy.parent.mkdir()
    (copy.parent / "manifest.json").write_text(json.dumps({"splits": {"repositories": {"a": "test"}}}))
    copy.write_text(json.dumps(SUMMARY))
    assert main(["swe", "report", str(copy)]) == 0
    assert "| a==1 | - |" in capsys.readouterr().out
    elsewhere = tmp_path / "a.manifest.json"  # the copy's own manifest, committed apart from it
    elsewhere.write_text(json.dumps({"splits": {"repositories": {"a": "eval"}}}))
    assert main(["swe", "report", str(copy), "--manifest", str(elsewhere)]) == 0
    assert "| a==1 | eval |" in capsys.readouterr().out
    assert main(["swe", "report", str(copy), "--manifest", str(tmp_path / "none.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["swe", "report", str(tmp_path / "docs")]) == 2
    assert "no report.json here" in capsys.readouterr().err


def test_the_plot_draws_the_set_and_refuses_a_report_with_no_package(tmp_path, capsys):
    from turngym.envs.swe.synth.report import _drop_kind, plot
    from turngym.recipes.cli import main

    assert [_drop_kind(r) for r in ("no test fails", "the bug hangs the tests", "validate: x")] == [
        "dropped: no test fails", "dropped in screening (other)", "dropped in validation"]
    (tmp_path / "report.json").write_text(json.dumps(SUMMARY))
    assert main(["swe", "report", str(tmp_path), "--plot", str(tmp_path / "set.png")]) == 0
    assert f"plot: {tmp_path / 'set.png'}" in capsys.readouterr().out
    assert (tmp_path / "set.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    only_dropped = {**SUMMARY, "packages": [SUMMARY["packages"][1]]}
    with pytest.raises(ValueError, match="no synthesized package"):
        plot(only_dropped, tmp_path / "none.png")
    assert not (tmp_path / "none.png").exists()
