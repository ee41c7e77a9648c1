"""Playing the SWE world's oracle through its tools, and checking in the sandbox that the tree is the gold patch's."""

from __future__ import annotations

from turngym.envs.tools import ToolCall


def same_as_gold_command(patch: str) -> str:
    """A bash command that exits 0 when the working tree is the base commit plus ``patch`` (a scratch index holds
    base + patch; the working tree and the real index are left alone)."""
    from turngym.envs.swe.workspace import GIT

    return (f"export GIT_INDEX_FILE=/tmp/gold.index; {GIT} read-tree HEAD && "
            f"{GIT} apply --cached <<'GOLD'\n{patch}GOLD\n{GIT} diff --exit-code --stat && echo SAME_AS_GOLD")


def play_tools_walkthrough(env, task) -> dict:
    _, info = env.reset(options={"task": task})
    calls = [ToolCall.from_action(action) for action in info["walkthrough"]]
    assert calls[-1].name == "submit" and {c.name for c in calls[:-1]} <= {"view", "edit"}
    assert any(c.name == "edit" for c in calls)
    for call in calls[:-1]:
        observation, reward, terminated, truncated, step = env.step(call.to_action())
        assert not step["invalid_action"] and "<returncode>0</returncode>" in observation, observation
        assert not (terminated or truncated)
    patch = task.payload["patch"] if task.payload["patch"].endswith("\n") else task.payload["patch"] + "\n"
    check = ToolCall("bash", {"command": same_as_gold_command(patch)}).to_action()
    observation, *_ = env.step(check)
    assert "SAME_AS_GOLD" in observation, (task.id, observation)
    _, reward, terminated, _, step = env.step(calls[-1].to_action())
    assert terminated and step["won"] and step["resolved"] and reward == 1.0, (task.id, step.get("tests"))
    return step
