"""``turngym stats A B``: one study's seeds run into separate results folders (another machine, another session)
merge into one outcome record, and every way two files can disagree is refused in one line."""

from __future__ import annotations

import json

import pytest

from turngym.recipes.cli import main
from turngym.recipes.outcome_files import OutcomeFileError, agreement_markdown, cell_agreement, merge_records


def record(arms: dict[str, dict[str, list[float]]], *, name: str = "tiny", fingerprint: str = "abc") -> dict:
    """``{arm: {seed: [outcome of game g0, g1, ...]}}`` as an outcome record (SFT-only has no RL episodes)."""
    return {"name": name, "panels": {"held_out": fingerprint}, "arms": {
        label: {"demos": 4, "episodes": 0 if label == "sft-only" else 8, "null": False,
                "outcomes": {seed: {"held_out": {f"g{i}": v for i, v in enumerate(row)}}
                             for seed, row in seeds.items()}}
        for label, seeds in arms.items()}}


def test_seeds_from_two_runs_merge_and_a_cell_both_hold_alike_is_kept_once():
    first = record({"sft-only": {"1": [1, 0], "2": [0, 0]}, "ppo": {"1": [1, 1], "2": [1, 0]}})
    # The second machine reran seed 2's SFT-only arm (a check that its warm start reproduces) and ran RFT.
    second = record({"sft-only": {"2": [0, 0]}, "rft": {"2": [0, 1]}})
    merged = merge_records([("a.json", first), ("b.json", second)])
    assert list(merged["arms"]) == ["sft-only", "ppo", "rft"]
    assert merged["arms"]["sft-only"]["outcomes"] == {"1": {"held_out": {"g0": 1, "g1": 0}},
                                                      "2": {"held_out": {"g0": 0, "g1": 0}}}
    assert merged["arms"]["rft"]["outcomes"] == {"2": {"held_out": {"g0": 0, "g1": 1}}}
    assert merged["panels"] == {"held_out": "abc"}


@pytest.mark.parametrize(("second", "message"), [
    (record({"sft-only": {"2": [0, 1]}}), "arm 'sft-only', seed 2, panel 'held_out' differs from a.json on 1 of 2"),
    (record({"ppo": {"3": [1, 1]}}, fingerprint="xyz"), "fingerprint xyz, not abc"),
    (record({"ppo": {"3": [1, 1]}}, name="other"), "study 'other', not 'tiny'"),
    ({**record({}), "arms": {"ppo": {"demos": 4, "episodes": 16, "null": False, "outcomes": {}}}},
     "arm 'ppo' is {'demos': 4, 'episodes': 16, 'null': False}, not {'demos': 4, 'episodes': 8"),
])
def test_files_that_disagree_are_refused_naming_both(second, message):
    first = record({"sft-only": {"2": [0, 0]}, "ppo": {"2": [1, 0]}})
    with pytest.raises(OutcomeFileError, match="^b.json: ") as error:
        merge_records([("a.json", first), ("b.json", second)])
    assert message in str(error.value)


def test_stats_merges_files_and_writes_the_merged_record(tmp_path, capsys):
    a, b, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "merged.json"
    a.write_text(json.dumps(record({"sft-only": {"1": [0, 0, 1, 0]}, "ppo": {"1": [1, 1, 1, 0]}})))
    b.write_text(json.dumps(record({"sft-only": {"2": [0, 1, 0, 0]}, "ppo": {"2": [1, 1, 0, 1]}})))
    assert main(["stats", str(a), str(b), "--merged-out", str(out)]) == 0
    table = capsys.readouterr().out
    assert "| ppo |" in table and "75.0" in table  # 6 of 8 games over both seeds
    assert json.loads(out.read_text())["arms"]["ppo"]["outcomes"].keys() == {"1", "2"}

    b.write_text(json.dumps(record({"sft-only": {"1": [1, 1, 1, 1]}})))
    assert main(["stats", str(a), str(b)]) == 2
    assert "differs from" in capsys.readouterr().err
    rates = tmp_path / "rates.json"
    rates.write_text(json.dumps({"seeds": [0], "studies": {"s": {"sft-only": [50]}}}))
    assert main(["stats", str(a), str(rates)]) == 2
    assert "per-seed rates do not merge" in capsys.readouterr().err


def test_keep_first_uses_the_earlier_files_cell_of_a_named_arm_and_reports_what_differed():
    committed = record({"sft-only": {"2": [0, 1, 1]}, "ppo": {"2": [1, 0, 1]}})
    # A warm start re-made on another machine: its SFT-only re-evaluation differs on g0 and g2; a new arm trained
    # from it; and PPO's cell rerun, reproduced game by game.
    remade = record({"sft-only": {"2": [1, 1, 0]}, "ppo": {"2": [1, 0, 1]}, "ppo-sparse": {"2": [1, 1, 1]}})
    records = [("main.json", committed), ("tier2.json", remade)]
    merged = merge_records(records, keep_first=["sft-only"])
    assert merged["arms"]["sft-only"]["outcomes"]["2"]["held_out"] == {"g0": 0, "g1": 1, "g2": 1}
    assert merged["arms"]["ppo-sparse"]["outcomes"]["2"]["held_out"] == {"g0": 1, "g1": 1, "g2": 1}
    rows = cell_agreement(records)
    assert [(r["arm"], r["first_wins"], r["wins"], r["differing"], r["games"]) for r in rows] == [
        ("sft-only", 2, 2, ["g0", "g2"], 3), ("ppo", 2, 2, [], 3)]
    table = agreement_markdown(rows)
    assert "| sft-only | 2 | held_out | main.json | 2 | tier2.json | 2 | 2 of 3 (g0, g2) |" in table
    assert "| ppo | 2 | held_out | main.json | 2 | tier2.json | 2 | 0 of 3 (reproduced) |" in table
    # Only the named arm may differ: PPO's cell differing is still refused.
    changed = record({"sft-only": {"2": [1, 1, 0]}, "ppo": {"2": [0, 0, 1]}})
    with pytest.raises(OutcomeFileError, match="arm 'ppo', seed 2, panel 'held_out' differs from main.json on 1 of 3"):
        merge_records([("main.json", committed), ("tier2.json", changed)], keep_first=["sft-only"])
    with pytest.raises(OutcomeFileError, match="--keep-first names arms no file holds: 'sft_only'"):
        merge_records(records, keep_first=["sft_only"])


def test_a_cell_only_one_file_holds_is_not_an_agreement_row_and_a_game_one_file_lacks_differs():
    first = record({"ppo": {"1": [1, 0]}})
    second = record({"ppo": {"2": [1, 1]}})
    assert cell_agreement([("a", first), ("b", second)]) == []
    assert agreement_markdown([]) == ""
    partial = {**record({}), "arms": {"ppo": {"demos": 4, "episodes": 8, "null": False,
                                              "outcomes": {"1": {"held_out": {"g0": 1}}}}}}
    [row] = cell_agreement([("a", first), ("b", partial)])
    assert row["differing"] == ["g1"] and row["games"] == 2 and row["wins"] == 1


def test_stats_keep_first_prints_the_agreement_table(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(record({"sft-only": {"1": [0, 0, 1, 0]}, "ppo": {"1": [1, 1, 1, 0]}})))
    b.write_text(json.dumps(record({"sft-only": {"1": [0, 1, 1, 0]}, "ppo-sparse": {"1": [1, 1, 0, 1]}})))
    assert main(["stats", str(a), str(b)]) == 2
    assert "differs from" in capsys.readouterr().err
    assert main(["stats", str(a), str(b), "--keep-first", "sft-only"]) == 0
    out = capsys.readouterr().out
    assert "| sft-only | 1 | held_out |" in out and "1 of 4 (g1)" in out
    assert "| ppo-sparse |" in out
    assert main(["stats", str(a), "--keep-first", "sft-only"]) == 2
    assert "give two or more" in capsys.readouterr().err
