"""Carry the re-validation's cache between machines: copy its rows into the repository (default) or back into the
cache (``--restore``), so a machine replaced between sessions resumes the pass instead of starting it over.

- Validation rows (``validate.jsonl``, ``validate-regraded[-N].jsonl``) go to ``revalidate/KEY[.regraded[-N]].jsonl``;
  a row holds only for the same record and grader, so a restored row of another grader is simply validated again.
- With ``--screening``, screening's and the baseline's cache (``screen.jsonl``, ``baseline.json``: the pipeline's,
  not the grader's) goes xz-compressed to ``screening-cache/`` (1.1 MB for the 22 packages; removed when the pass
  ends). It is deterministic and rebuilt on a new machine in a few hours, so by default it is not saved.

    python docs/benchmark-runs/swe-synth-scale-v1/pass/save.py [--screening] [--restore]
"""

import lzma
import re
import shutil
import sys
from pathlib import Path

CACHE = Path.home() / ".cache/turngym/swe-synth"
WORK = CACHE / "work/v3"
RUN_DIR = Path(__file__).resolve().parent.parent
ROWS = RUN_DIR / "revalidate"
SCREENING = RUN_DIR / "screening-cache"


def cache_name(saved_name: str) -> tuple[str, str]:
    """(package key, the cache's file name) of a saved rows file."""
    match = re.fullmatch(r"(.+?)(?:\.regraded(?:-(\d+))?)?\.jsonl", saved_name)
    key, round_ = match.group(1), match.group(2)
    if saved_name.endswith(".regraded.jsonl"):
        return key, "validate-regraded.jsonl"
    return key, f"validate-regraded-{round_}.jsonl" if round_ else "validate.jsonl"


def saved_name(key: str, cache_file: str) -> str:
    if cache_file == "validate.jsonl":
        return f"{key}.jsonl"
    if cache_file == "validate-regraded.jsonl":
        return f"{key}.regraded.jsonl"
    return f"{key}.regraded-{cache_file.removeprefix('validate-regraded-').removesuffix('.jsonl')}.jsonl"


def restore() -> None:
    for saved in sorted(ROWS.glob("*.jsonl")):
        key, name = cache_name(saved.name)
        (WORK / key).mkdir(parents=True, exist_ok=True)
        shutil.copy(saved, WORK / key / name)
        print("restored", saved.name)
    for saved in sorted(SCREENING.glob("*.xz")):
        key, name = saved.name.removesuffix(".xz").split("__", 1)
        (WORK / key).mkdir(parents=True, exist_ok=True)
        data = lzma.decompress(saved.read_bytes())
        target = WORK / key / name
        if not target.exists() or target.stat().st_size < len(data):  # never shorten a cache that went further
            target.write_bytes(data)
            print("restored", saved.name)


def save(screening: bool = False) -> None:
    ROWS.mkdir(exist_ok=True)
    for package in sorted(WORK.glob("*")):
        for rows in package.glob("validate*.jsonl"):
            shutil.copy(rows, ROWS / saved_name(package.name, rows.name))
        for name in ("baseline.json", "screen.jsonl") if screening else ():
            SCREENING.mkdir(exist_ok=True)
            if (package / name).exists():
                (SCREENING / f"{package.name}__{name}.xz").write_bytes(
                    lzma.compress((package / name).read_bytes(), preset=9))
    print("saved", len(list(ROWS.glob("*.jsonl"))), "rows files,",
          sum(f.stat().st_size for f in SCREENING.glob("*.xz")), "bytes of screening cache")


if __name__ == "__main__":
    restore() if "--restore" in sys.argv else save("--screening" in sys.argv)
