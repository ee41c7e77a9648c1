"""``turngym stats A B``: one study's seeds run into separate results folders (another machine, another session)
merge into one outcome record, and every way two files can disagree is refused in one line."""

from __future__ import annotations

import json

import pytest

from turngym.recipes.cli import main
from turngym.recipes.outcome_files import OutcomeFileError, merge_records


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
