"""Row layouts (trainers/layouts.py): TRL's padding rebuilt without TRL, and the rollout's hand-over."""

from __future__ import annotations

import pytest
import torch

from turngym.trainers.episodes import Episode
from turngym.trainers.layouts import drop_rows, pad, padded, rollout_rows

trl_utils = pytest.importorskip("trl.trainer.utils")


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("multiple", [None, 1, 4, 8])
def test_pad_is_trls_pad(side, multiple):
    rows = [[5, 6, 7], [8], [], [1, 2, 3, 4, 5]]
    ours = pad(rows, -1, side, torch.long, multiple=multiple)
    theirs = trl_utils.pad([torch.tensor(r, dtype=torch.long) for r in rows], padding_value=-1, padding_side=side,
                           pad_to_multiple_of=multiple)
    assert ours.dtype == theirs.dtype and torch.equal(ours, theirs)
    floats = [[0.5, -1.25], [3.0]]
    assert torch.equal(pad(floats, 0.0, side, torch.float32, multiple=multiple),
                       trl_utils.pad([torch.tensor(r) for r in floats], padding_value=0.0, padding_side=side,
                                     pad_to_multiple_of=multiple))


def test_padded_rows_and_dropped_rows():
    assert padded([[1.0, 2.0], [3.0]], 3).tolist() == [[1.0, 2.0, 0.0], [3.0, 0.0, 0.0]]
    rows = {"completion_ids": torch.zeros(3, 2, dtype=torch.long), "tool_mask": torch.ones(3, 2, dtype=torch.long)}
    drop_rows(rows, [False, True, False])
    assert rows["tool_mask"].tolist() == [[1, 1], [0, 0], [1, 1]]


def test_the_rollout_hands_over_whole_episodes_or_first_turns():
    one = Episode.from_ids(prompt_ids=[1, 2], completion_ids=[3, 4, 5, 6], env_mask=[1, 0, 1, 1],
                           turn_index=[0, 0, 1, 1], turn_ends=[0, 3], logprobs=[-0.5, 0.0, -0.25, -0.75],
                           turn_rewards=[0.0, 1.0])
    whole = rollout_rows([one], per_turn=False)
    assert whole["prompt_ids"] == [[1, 2]] and whole["completion_ids"] == [[3, 4, 5, 6]]
    assert whole["env_mask"] == [[1, 0, 1, 1]] and whole["episode"] == [one]
    first = rollout_rows([one], per_turn=True)
    (sample, *_) = one.turn_samples()
    assert first["prompt_ids"] == [sample.prompt_ids] and first["completion_ids"] == [sample.completion_ids]
    assert first["env_mask"] == [[1] * len(sample.completion_ids)] and first["episode"] == [one]
