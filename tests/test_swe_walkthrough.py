"""Issue 42, point 6: the gold patch rebuilt through the SWE tools (view, edit, submit).

The unit tests check the edits on files made here (a hunk whose text occurs several times, a pure insertion, hunks
shifting each other, a last line without a line ending); the sandbox test plays the walkthrough of every shipped task
in bwrap and checks, in the sandbox, that the working tree is the base plus the gold patch before submitting it.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers_swe import play_tools_walkthrough, same_as_gold_command
from turngym.envs.swe.sandbox import backend_available
from turngym.envs.swe.walkthrough import WalkthroughError, parse_read_files, read_files_command, tool_walkthrough
from turngym.envs.tools import ToolCall

BWRAP_PROBLEM = backend_available("bwrap")
needs_bwrap = pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=f"bwrap sandbox unavailable: {BWRAP_PROBLEM}")


def git_diff(tmp_path, path: str, before: str, after: str) -> str:
    """The patch ``git diff`` writes for the change (as gold patches are written)."""
    import subprocess

    repo = tmp_path / "repo"
    if not (repo / ".git").exists():
        repo.mkdir()
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / path).write_text(before)
    subprocess.run(["git", "add", path], cwd=repo, check=True)
    (repo / path).write_text(after)
    return subprocess.run(["git", "diff", path], cwd=repo, capture_output=True, text=True, check=True).stdout


def play(text: str, calls: list[ToolCall], path: str) -> str:
    """The edits as the edit tool makes them: refused unless old_str occurs exactly once."""
    for call in calls:
        if call.name == "edit":
            assert call.arguments["path"] == path
            assert text.count(call.arguments["old_str"]) == 1, call.arguments["old_str"]
            text = text.replace(call.arguments["old_str"], call.arguments["new_str"], 1)
    return text


# four functions of six lines each; f1 tests x > 0, the others x < 0
SOURCE = "".join(f"def f{i}(x):\n    if x {'>' if i == 1 else '<'} 0:\n        return 0\n    return x\n\n\n"
                 for i in range(4))


def test_a_hunk_whose_text_occurs_several_times_gets_a_unique_old_str(tmp_path):
    # the bug flips f2's comparison: the bugged line also occurs in f1, so it is widened by the line above
    bugged = SOURCE.replace("def f2(x):\n    if x < 0:", "def f2(x):\n    if x > 0:")
    calls = tool_walkthrough(git_diff(tmp_path, "m.py", bugged, SOURCE), {"m.py": bugged})
    assert [c.name for c in calls] == ["view", "edit", "submit"]
    assert bugged.count("    if x > 0:\n") == 2
    assert calls[1].arguments == {"path": "m.py", "old_str": "def f2(x):\n    if x > 0:\n",
                                  "new_str": "def f2(x):\n    if x < 0:\n"}
    assert calls[0].arguments == {"path": "m.py", "start": 11, "end": 17}  # line 14, three lines either side
    assert play(bugged, calls, "m.py") == SOURCE
    # a pure insertion (the bug deleted f3's early return): nothing to replace, widened until unique
    bugged = SOURCE.replace("def f3(x):\n    if x < 0:\n        return 0\n", "def f3(x):\n    if x < 0:\n")
    calls = tool_walkthrough(git_diff(tmp_path, "m.py", bugged, SOURCE), {"m.py": bugged})
    edit = calls[1].arguments
    assert edit["old_str"] == "    if x < 0:\n    return x\n"  # the line above occurs 3 times; with the one below, once
    assert edit["new_str"] == "    if x < 0:\n        return 0\n    return x\n"
    assert play(bugged, calls, "m.py") == SOURCE


def test_several_hunks_shift_each_other_and_a_last_line_without_a_line_ending(tmp_path):
    bugged = "".join(f"line {i}\n" for i in range(40)) + "x = 1\nx = 1\nend"
    gold = bugged.replace("line 3\n", "line 3\nline 3b\n").replace("line 30\n", "").replace("x = 1\nend", "x = 2\nend!")
    patch = git_diff(tmp_path, "a.txt", bugged, gold)
    assert "\\ No newline at end of file" in patch and patch.count("@@ -") == 3
    calls = tool_walkthrough(patch, {"a.txt": bugged})
    assert [c.name for c in calls] == ["view", "edit"] * 3 + ["submit"]
    assert play(bugged, calls, "a.txt") == gold


def test_added_and_deleted_files_are_shell_commands_and_a_patch_that_does_not_apply_is_refused(tmp_path):
    patch = ("diff --git a/new.py b/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/new.py\n@@ -0,0 +1,2 @@\n"
             "+a = 1\n+b = 2\n"
             "diff --git a/old.py b/old.py\ndeleted file mode 100644\n--- a/old.py\n+++ /dev/null\n@@ -1 +0,0 @@\n"
             "-gone\n")
    calls = tool_walkthrough(patch, {})
    assert [c.name for c in calls] == ["bash", "bash", "submit"]
    assert calls[0].arguments["command"] == "cat > new.py <<'TURNGYM_EOF'\na = 1\nb = 2\nTURNGYM_EOF"
    assert calls[1].arguments["command"] == "rm -- old.py"
    patch = git_diff(tmp_path, "m.py", "a\n", "b\n")
    with pytest.raises(WalkthroughError, match="does not apply to m.py at line 1"):
        tool_walkthrough(patch, {"m.py": "c\n"})
    with pytest.raises(WalkthroughError, match="carriage returns"):
        tool_walkthrough(patch, {"m.py": "a\r\n"})
    with pytest.raises(WalkthroughError, match="modifies m.py, which is not in the repository"):
        tool_walkthrough(patch, {"m.py": None})


def test_the_files_read_in_the_sandbox_come_back_exactly(tmp_path):
    import subprocess

    (tmp_path / "sub dir").mkdir()
    (tmp_path / "sub dir" / "é.py").write_text("x = 'é'\n\n")
    command = read_files_command(["sub dir/é.py", "missing.py"])
    output = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert parse_read_files(output) == {"sub dir/é.py": "x = 'é'\n\n", "missing.py": None}


# ---------------------------------------------------------------------- in the sandbox
# Three shipped tasks in the default run: one hunk, two hunks (intervals-2), three hunks in one file (graphkit-3); the
# slow test plays all 26 (40 s on 2 cores).
FAST_TASKS = ("turngym__configlite-1", "turngym__intervals-2", "turngym__graphkit-3")


@needs_bwrap
@pytest.mark.parametrize("which", [pytest.param("fast"), pytest.param("all", marks=pytest.mark.slow)])
def test_the_tools_walkthrough_resolves_the_shipped_tasks_and_rebuilds_the_gold_patch(make_swe_env, which):
    from turngym.envs.swe import swe_tasks

    env = make_swe_env(action_protocol="tools")
    tasks = swe_tasks(None)
    assert len(tasks) >= 26
    for task in tasks if which == "all" else [tasks.by_id(t) for t in FAST_TASKS]:
        step = play_tools_walkthrough(env, task)
        assert not step["grading_tampered"]
    # the check itself can fail: an edit that is not the gold patch is told apart
    first = tasks[0]
    _, info = env.reset(options={"task": first})
    env.step(ToolCall("bash", {"command": "echo '# extra' >> " + json.loads(info["walkthrough"][1])["arguments"]
                               ["path"]}).to_action())
    observation, *_ = env.step(ToolCall("bash", {"command": same_as_gold_command(first.payload["patch"])})
                               .to_action())
    assert "SAME_AS_GOLD" not in observation and "<returncode>1</returncode>" in observation
