"""Records of other synthesized sets (SWE-smith) as turngym's SWE-bench records, for machines that are online.

A SWE-smith row (``SWE-bench/SWE-smith`` on the Hub: ``instance_id, repo, patch, FAIL_TO_PASS, PASS_TO_PASS,
image_name, problem_statement``) carries the *bug* as its ``patch``, to be applied to the repository its image
holds; turngym's record carries it as ``setup_patch`` and the fix (the bug reversed) as ``patch``:

    import datasets
    from turngym.envs.swe import SWEInstance
    from turngym.envs.swe.synth.external import from_swesmith
    rows = datasets.load_dataset("SWE-bench/SWE-smith", split="train")
    instances = [SWEInstance.from_record(from_swesmith(row)) for row in rows.select(range(100))]

SWE-Gym and SWE-bench rows are already in turngym's format: ``load_instances("SWE-Gym/SWE-Gym")``.
"""

from __future__ import annotations

import re
from typing import Any

_HUNK = re.compile(r"^@@ -(\d+(?:,\d+)?) \+(\d+(?:,\d+)?) @@(.*)$")


def reverse_patch(patch: str) -> str:
    """The unified diff that undoes ``patch`` (what ``git apply -R`` applies), for modified files."""
    out: list[str] = []
    removed: list[str] = []
    added: list[str] = []

    def flush() -> None:  # a change block: its removals first, as git writes them
        out.extend(removed + added)
        removed.clear()
        added.clear()

    header = True  # between "diff --git" and the first hunk: "--- " and "+++ " name files, not lines
    for line in patch.splitlines(keepends=True):
        hunk = _HUNK.match(line.rstrip("\n"))
        if line.startswith("diff --git "):
            flush()
            header = True
            out.append(line)
        elif hunk:
            flush()
            header = False
            out.append(f"@@ -{hunk.group(2)} +{hunk.group(1)} @@{hunk.group(3)}\n")
        elif header and line.startswith("--- "):
            out.append("+++ " + line[4:].replace("a/", "b/", 1))
        elif header and line.startswith("+++ "):
            out.insert(len(out) - 1, "--- " + line[4:].replace("b/", "a/", 1))
        elif header and line.startswith("index "):
            old, _, rest = line[6:].partition("..")
            new, _, mode = rest.rstrip("\n").partition(" ")
            out.append(f"index {new}..{old}{' ' + mode if mode else ''}\n")
        elif not header and line.startswith("-"):
            added.append("+" + line[1:])
        elif not header and line.startswith("+"):
            removed.append("-" + line[1:])
        else:
            flush()
            out.append(line)
    flush()
    return "".join(out)


def from_swesmith(row: dict[str, Any]) -> dict[str, Any]:
    """A SWE-smith row as a turngym record: the bug as ``setup_patch``, its reverse as the gold ``patch``, no
    hidden tests (SWE-smith's tests are the repository's own, visible), the row's image."""
    bug = row["patch"]
    return {
        "instance_id": row["instance_id"], "repo": row["repo"], "base_commit": "",
        "problem_statement": row.get("problem_statement") or "", "patch": reverse_patch(bug), "setup_patch": bug,
        "test_patch": "", "FAIL_TO_PASS": row["FAIL_TO_PASS"], "PASS_TO_PASS": row["PASS_TO_PASS"],
        "image_name": row.get("image_name"), "hints_text": "", "difficulty": row["instance_id"].rsplit(".", 1)[-1]
        .split("__")[0],
    }
