"""G: a local-folder spec whose tree holds the cache root (``turngym swe synth ~`` with the default
``~/.cache/turngym``). Before the fixes the copy copied the staging folder into itself, level after level, until
the path was too long: shutil.Error, and the partial copy left behind (a 10 kB home grew to 1.6 MB)."""

from __future__ import annotations

import subprocess

import common

case = common.Case("G.local_dir_contains_cache")
home = case.dir / "home"
(home / "proj" / "tests").mkdir(parents=True)
(home / "proj" / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
(home / "notes.txt").write_text("x" * 10_000)
case.cache = home / ".cache" / "turngym" / "swe-synth"  # the cache root given to the code, inside the spec
case._skipped.add(case.cache)


def judge(result) -> str:
    return f"accepted: repository {common.repo_entries(result[1])}"


def call():
    try:
        return common.source.prepare_repo(str(home), root=case.cache)
    finally:
        used = subprocess.run(["du", "-sk", str(home)], capture_output=True, text=True, check=False).stdout.split()
        print(f"the spec's folder after the call: {used[0] if used else '?'} kB (10 kB of notes before)", flush=True)


case.run(call, deadline=120, judge=judge)
