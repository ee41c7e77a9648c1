"""bench/judge_agreement.py: a judge's agreement with the true outcome, measured with scripted judge models (a perfect
one, a constant one, one that fails), on saved evaluations written here."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

SPEC = importlib.util.spec_from_file_location("judge_agreement", Path(__file__).parents[1] / "bench/judge_agreement.py")
ja = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(ja)


class Scripted:
    """Replies made by ``reply(request)``, one per request."""

    name = "scripted"

    def __init__(self, reply) -> None:
        self.reply, self.batches = reply, []

    def complete(self, requests):
        self.batches.append(len(requests))
        return [self.reply(r) for r in requests]


def nonce_of(request) -> str:
    return re.search(r'"id": "([0-9a-f]{16})"', request.messages[-1]["content"]).group(1)


def episodes_of(request) -> list[str]:
    """The framed texts of a request (one for pointwise, one per episode for a group)."""
    framed = r"\[\[(?:SUBMISSION|EPISODE \d+) [0-9a-f]{16}\]\]\n(.*?)\n\[\[END"
    return re.findall(framed, request.messages[-1]["content"], re.DOTALL)


def perfect(request) -> str:
    scores = [10 if ja.END_MARK in text else 0 for text in episodes_of(request)]
    if "EPISODE 1" in request.messages[-1]["content"]:
        return json.dumps({"id": nonce_of(request), "scores": scores, "reason": "r"})
    return json.dumps({"id": nonce_of(request), "score": scores[0], "reason": "r"})


def constant(request) -> str:
    if "EPISODE 1" in request.messages[-1]["content"]:
        return json.dumps({"id": nonce_of(request), "scores": [5, 5], "reason": "r"})
    return json.dumps({"id": nonce_of(request), "score": 5, "reason": "r"})


def episode(task: int, won: bool, rewards: tuple[float, ...]) -> dict:
    ends = ["You unlock the safe.\n\n*** The End ***\n\nYou scored 1 out of a possible 1."] if won else []
    turns = ["You take the key.", "Nothing happens."][: len(rewards) - len(ends)] + ends
    return {"task": {"id": f"textworld/test/{task}", "split": "eval", "difficulty": "test"},
            "observations": [f"Quest {task}: take the key, unlock the safe.", *turns],
            "actions": [f"action {i}" for i in range(len(turns))], "turn_rewards": list(rewards), "won": won,
            "invalid_actions": [False] * len(turns), "truncated": not won, "truncation_reason": None if won else
            "max_turns", "record": {"replies": []}, "episode_reward": sum(rewards), "outcome": "won" if won else "x"}


@pytest.fixture
def saved(tmp_path):
    """Two saved evaluations of the same 6 tasks: 'base' wins none, 'trained' wins tasks 0, 2 and 4."""
    files = []
    for label, wins in (("base", set()), ("trained", {0, 2, 4})):
        path = tmp_path / label / "seed0-held_out.jsonl"
        path.parent.mkdir()
        rows = [episode(t, t in wins, (0.25, 0.75) if t in wins else (0.25 * (t % 2), 0.0)) for t in range(6)]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        files.append(str(path))
    return files


def judged(files, model, **kwargs):
    from turngym.envs.judges import Judge

    episodes = [t for path in files for t in ja.load_episodes(path)]
    return ja.measure(Judge(model), episodes, resamples=200, log=lambda line: None, **kwargs)


def test_a_perfect_judge_agrees_with_every_outcome_pointwise_and_ranked(saved):
    report = judged(saved, Scripted(perfect))
    point = report["pointwise"]
    assert point["episodes"] == 12 and point["won"] == 3 and point["judged"] == 12 and point["failed"] == 0
    assert point["auc"]["value"] == 1.0 and point["auc"]["low"] == 1.0
    assert point["accuracy_at_midpoint"]["value"] == 1.0
    assert point["spearman_return"]["value"] > 0.8 and point["seconds_per_judgement"] >= 0
    group = report["group"]
    assert group["groups"] == 6 and group["failed"] == 0 and group["calls"] == 6
    assert group["ranked"]["pairs_with_one_winner"] == 3 and group["ranked"]["winner_above_loser"]["value"] == 1.0
    assert report["transcript_string_auc"] == 1.0


def test_a_constant_judge_is_at_chance(saved):
    report = judged(saved, Scripted(constant))
    assert report["pointwise"]["auc"]["value"] == 0.5
    assert report["pointwise"]["accuracy_at_midpoint"]["value"] == 9 / 12  # "lost" every time: right on the 9 losses
    assert report["pointwise"]["spearman_return"]["value"] is None  # constant scores: no rank correlation
    assert report["group"]["ranked"]["winner_above_loser"]["value"] == 0.5


def test_failed_judgements_are_counted_never_scored_and_a_lenient_read_is_kept_apart(saved):
    def flaky(request):  # every won episode, and groups, get prose with a number in it
        if "EPISODE 1" in request.messages[-1]["content"] or ja.END_MARK in episodes_of(request)[0]:
            return "The agent did well. Score: 9"
        return perfect(request)

    report = judged(saved, Scripted(flaky))
    point = report["pointwise"]
    assert point["failed"] == 3 and point["judged"] == 9 and point["failure_rate"] == 0.25
    assert point["failure_reasons"] == {"the reply is not one JSON object": 3}
    assert point["auc"]["value"] is None  # only losses were judged: no AUC, never a 0 for the failures
    rows = report["episodes"]
    assert [(r["score"], r["lenient"]) for r in rows if r["won"]] == [(None, 0.9)] * 3
    assert point["lenient_read"]["read"] == 12 and point["lenient_read"]["auc"]["value"] == 1.0
    assert report["group"]["failed"] == 6 and report["group"]["ranked"]["scored"] == 0


def test_the_statistics():
    assert ja.auc([0.1, 0.4, 0.35, 0.8], [False, False, True, True]) == 0.75
    assert ja.auc([1.0, 1.0], [True, True]) is None
    assert ja.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert ja.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    interval = ja.bootstrap(list(range(20)), lambda s: sum(s) / len(s), resamples=300)
    assert interval["low"] < 9.5 < interval["high"] and interval["value"] == 9.5
    assert ja.lenient_score('[JSON Object: {id: 506a, score: 10, reason: "x"}]') == 10
    assert ja.lenient_score("The answer is Sydney.") is None and ja.lenient_score("score: 42") is None


def test_the_command_writes_the_per_episode_record(saved, tmp_path):
    out = tmp_path / "agreement.json"
    assert ja.main(["--episodes", *saved, "--per-file", "4", "--resamples", "50", "--out", str(out)],
                   model=Scripted(perfect)) == 0
    report = json.loads(out.read_text())
    assert report["per_file"] == 4 and report["sources"] == {"base": 4, "trained": 4}
    assert [(r["source"], r["task"], r["won"], r["score"]) for r in report["episodes"]][3:5] == [
        ("base", "textworld/test/3", False, 0.0), ("trained", "textworld/test/0", True, 1.0)]
    assert report["pointwise"]["auc"]["value"] == 1.0 and report["group"]["groups"] == 4


def test_the_committed_measurements_give_back_the_published_numbers():
    """docs/rewards.md and docs/results.md print these (the default judge on 60 TextWorld episodes; SWE's signal)."""
    outcomes = Path(__file__).parents[1] / "docs" / "measurements"
    report = json.loads((outcomes / "judge-agreement-textworld-q4.json").read_text())
    rows, point = report["episodes"], report["pointwise"]
    summary = ja.pointwise_summary(rows, point["seconds"], point["requests"], resamples=50)
    assert (summary["episodes"], summary["won"], summary["judged"], summary["failed"]) == (60, 5, 0, 60)
    assert [round(x, 2) for x in summary["failure_rate_wilson95"]] == [0.94, 1.0]
    assert summary["auc"]["value"] is None and round(summary["seconds_per_judgement"], 1) == 20.2
    assert summary["lenient_read"]["read"] == 8 and not any(r["won"] for r in rows if r["lenient"] is not None)
    assert ja.auc([float(r["end_mark"]) for r in rows], [r["won"] for r in rows]) == 1.0
    assert report["group"]["groups"] == 30 and report["group"]["failed"] == 30
    assert round(report["group"]["seconds_per_call"], 1) == 40.2
    swe = json.loads((outcomes / "swe-default-policy-signal.json").read_text())["episodes"]
    assert len(swe) == 8 and {e["pass_ratio"] for e in swe} == {0.0} and not any(e["resolved"] for e in swe)
    assert sum(e["invalid_actions"] for e in swe) == 72 and sum(e["p2p_total"] for e in swe) == 125
