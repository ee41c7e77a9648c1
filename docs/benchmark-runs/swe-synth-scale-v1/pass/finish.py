"""End the re-validation pass: check the whole list's set, then make its rows, report and manifest the committed ones.

Without ``--apply`` it only checks and says what it would do (nothing changes). The checks, each a reason to stop:

- the set (``~/.cache/turngym/swe-synth/sets/scale-v1``, pass/run.sh's second command) lists every package of
  recipes/configs/swe-synth-packages.txt and was made by the current grader;
- no voiding false alarm and no void a rerun did not repeat (each is a grader bug to fix, not a task to drop);
- the learning plan's panels (docs/plans/2026-11-28-swe-synth-learning.md): at least 20 easy tasks in ``eval``
  (when it is short, held-out packages are added in the plan's order, its status of 2026-12-04) and the 15 easy
  ``eval_seen`` tasks its ``seen`` panel was fixed at (the extension stopped at click, same status).

``--apply`` then saves the cache's rows (pass/save.py), replaces validate/ with the set's packages' rows (not those of
a reserved package screened ahead and left out) and the set's report
(validate/report-scale-v1.json), copies the set's manifest to recipes/configs/swe-synth-scale-v1.manifest.json,
writes the grader's sha256 to grader.sha256, and removes revalidate/, revalidation.json, screening-cache/ and pass/
(git rm). The counts in docs/benchmarks.md and docs/worlds/swe.md stay for a person to update: it prints the set's
report to paste from.

    .venv/bin/python docs/benchmark-runs/swe-synth-scale-v1/pass/finish.py [--apply]
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUN_DIR = HERE.parent
REPO = RUN_DIR.parents[2]
SET = Path.home() / ".cache/turngym/swe-synth/sets/scale-v1"
PACKAGES = REPO / "recipes/configs/swe-synth-packages.txt"
MANIFEST = REPO / "recipes/configs/swe-synth-scale-v1.manifest.json"
PANEL = 20
SEEN_PANEL = 15  # the plan's status of 2026-12-04: the extension stopped at click
HELD_OUT_RESERVE = ("xmltodict==0.13.0", "webcolors==1.13", "termcolor==2.4.0")  # the plan's status of 2026-12-04


def listed_packages() -> list[str]:
    """The packages file's specs (its reserved ones are a comment)."""
    lines = PACKAGES.read_text().splitlines()
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


def easy_by_split(report: dict) -> dict[str, int]:
    """Easy tasks by split, from the set's statistics."""
    return {split: tiers.get("easy", 0) for split, tiers in report["statistics"]["tiers_by_split"].items()}


def problems() -> list[str]:
    from turngym.envs.swe.synth.pipeline import grader_hash

    if not (SET / "report.json").is_file():
        return [f"no set at {SET}: pass/run.sh's second command has not ended"]
    report = json.loads((SET / "report.json").read_text())
    found: list[str] = []
    specs = listed_packages()
    missing = sorted(set(specs) - {p["spec"] for p in report["packages"]})
    if missing:
        found.append(f"the set lacks {len(missing)} listed packages: {', '.join(missing)}")
    if report.get("grader_sha256") != grader_hash():
        found.append(f"the set was made by grader {report.get('grader_sha256')}, not the current {grader_hash()}")
    if report.get("false_alarms") or report.get("unrepeated_voids"):
        found.append(f"{len(report.get('false_alarms', []))} voiding false alarms and "
                     f"{len(report.get('unrepeated_voids', []))} unrepeated voids: grader bugs to fix first")
    easy = easy_by_split(report)
    print(f"easy tasks by split: {easy}")
    if easy.get("eval_seen", 0) < SEEN_PANEL:
        found.append(f"eval_seen has {easy.get('eval_seen', 0)} easy tasks, fewer than the {SEEN_PANEL} of the study's "
                     "seen panel: say in the plan's status what the new grader dropped, before going on")
    if easy.get("eval", 0) < PANEL:
        found.append(f"eval has {easy.get('eval', 0)} easy tasks (< {PANEL}): the plan adds held-out packages to "
                     f"--eval-repos one at a time, in its order ({', '.join(HELD_OUT_RESERVE)}), skipping those "
                     "already in the set")
    return found


def git(*args: str) -> None:
    subprocess.run(["git", *args], cwd=REPO, check=True)


def apply() -> None:
    from turngym.envs.swe.synth.pipeline import grader_hash

    sys.path.insert(0, str(HERE))
    import save

    save.save()
    validate, revalidate = RUN_DIR / "validate", RUN_DIR / "revalidate"
    for old in validate.glob("*.jsonl"):
        old.unlink()
    report = json.loads((SET / "report.json").read_text())
    in_set = {package["key"] for package in report["packages"]}
    for rows in sorted(revalidate.glob("*.jsonl")):
        if save.cache_name(rows.name)[0] in in_set:  # not a reserved package screened ahead and left unused
            shutil.copy(rows, validate / rows.name)
    shutil.copy(SET / "report.json", validate / "report-scale-v1.json")
    shutil.copy(SET / "manifest.json", MANIFEST)
    (RUN_DIR / "grader.sha256").write_text(grader_hash() + "\n")
    git("add", "-A", str(validate), str(MANIFEST), str(RUN_DIR / "grader.sha256"))
    git("rm", "-r", "-q", "--cached", "--ignore-unmatch", str(revalidate), str(RUN_DIR / "revalidation.json"),
        str(RUN_DIR / "screening-cache"), str(HERE))
    for path in (revalidate, RUN_DIR / "screening-cache", HERE):
        shutil.rmtree(path, ignore_errors=True)
    (RUN_DIR / "revalidation.json").unlink(missing_ok=True)
    print(subprocess.run([sys.executable, "-m", "turngym.recipes.cli", "swe", "report", str(SET)],
                         capture_output=True, text=True, check=False).stdout)
    print("Done: commit, then update the counts in docs/benchmarks.md, docs/worlds/swe.md ('Task sets at scale') and "
          f"{RUN_DIR / 'README.md'}, and run: pytest tests/test_swe_synth.py -k committed")


def main() -> int:
    found = problems()
    for problem in found:
        print("not yet:", problem)
    if found:
        return 1
    if "--apply" not in sys.argv:
        print("ready: run again with --apply")
        return 0
    apply()
    return 0


if __name__ == "__main__":
    sys.exit(main())
