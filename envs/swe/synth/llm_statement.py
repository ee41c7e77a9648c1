"""An optional LLM writer of problem statements: the procedural statement reworded by any chat model.

The procedural statement (:mod:`.statement`) is all the writer sees: the failing tests, the end of a traceback, the
failures' messages, never the patch. The model rewords it as the issue a user would file. Its reply is then checked
as the procedural statement is (:func:`.statement.leaks`: no line the bug changed, bugged or original, quoted), and
cleaned (control characters out, at most :data:`MAX_CHARS`), and must name a failing test and not repeat itself (a
small model's loop). A reply that fails a check, an empty one or a failed request keeps the procedural statement,
with the reason counted in the package's report; the writer never drops a task and never crashes a run.

The model is any :class:`turngym.envs.judges.JudgeModel` (:func:`turngym.agents.judge_models.make_judge_model`):
``openai:MODEL`` for an OpenAI-compatible endpoint (``--statement-base-url`` or ``$OPENAI_BASE_URL``, key in
``$OPENAI_API_KEY``), or ``hf:NAME`` / ``vllm:NAME`` for a local model. Requests are greedy with a fixed seed.

A served model's replies need not repeat, so every reply is kept in the package's ``statements.jsonl`` (keyed by
the writer, this prompt and the procedural record; the checks run on every use): a rerun, or a regeneration from the
manifest on a machine with that cache, writes the same set without calling the model again. Statements are written
after validation, which never depends on them, so changing the writer re-validates nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from turngym.envs.judges import JudgeRequest

SYSTEM = (
    "You turn the raw material of a bug report into the GitHub issue a user of a Python package would file. "
    "Write a one-line title, then what the user ran and what they saw: which tests fail and the error messages, "
    "quoting the lines of output that matter. Do not guess the cause, do not suggest a fix, and do not add code, "
    "file names or line numbers that are not in the material. Plain text or Markdown, no preamble."
)
PROMPT = "Package: {package} {version}\n\nWhat the user saw:\n\n{statement}"
PROMPT_VERSION = 1  # raise when SYSTEM or PROMPT changes: every cached reply is then asked for again
MAX_CHARS = 6_000
MAX_NEW_TOKENS = 512
# A reply that compresses below this share of its size repeats itself (a small model's loop). Measured on cachetools'
# 74 tasks: the procedural statements compress to 0.24-0.65 of their size, SmolLM2-135M's replies to 0.04-0.17.
MIN_COMPRESSED_SHARE = 0.2
MIN_CHARS_FOR_REPETITION = 200  # a short text compresses badly whatever it says
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def changed_lines_of(patch: str) -> list[str]:
    """The stripped, non-empty lines a unified diff adds or removes (the bug's lines and the lines it replaced)."""
    return sorted({line[1:].strip() for line in patch.splitlines()
                   if line[:1] in "+-" and not line.startswith(("+++", "---")) and line[1:].strip()})


def failing_names(record: dict) -> list[str]:
    """The FAIL_TO_PASS tests' function names (``test_x`` of ``tests/t.py::C::test_x[3]``)."""
    return sorted({t.split("::")[-1].split("[")[0] for t in record.get("FAIL_TO_PASS", [])})


def clean_reply(reply: object, changed: Sequence[str], failing: Sequence[str] = ()) -> tuple[str | None, str]:
    """``(statement, "")`` for a usable reply, else ``(None, why not)``. Pure: the checks every reply gets. With
    ``failing`` (test names), the reply must name one of them: a report says what fails."""
    from turngym.envs.swe.synth.statement import leaks

    if isinstance(reply, BaseException):
        return None, f"the writer failed ({type(reply).__name__})"
    if not isinstance(reply, str):
        return None, "the writer's reply was not text"
    text = _CONTROL.sub("", reply.replace("\r\n", "\n")).strip()
    if len(text) > MAX_CHARS:
        cut = text.rfind("\n", 0, MAX_CHARS)
        text = text[: cut if cut > 0 else MAX_CHARS].rstrip()
    if not text:
        return None, "the writer's reply was empty"
    if leaks(text, list(changed)):
        return None, "the writer quoted the change"
    encoded = text.encode()
    compressed = len(zlib.compress(encoded, 9))
    if len(encoded) >= MIN_CHARS_FOR_REPETITION and compressed < MIN_COMPRESSED_SHARE * len(encoded):
        return None, "the writer's reply repeats itself"
    if failing and not any(name in text for name in failing):
        return None, "the writer's reply names no failing test"
    return text + "\n", ""


def statement_key(writer: str, record: dict) -> str:
    """The cache key of one statement: the writer, the prompt's version and the procedural record."""
    payload = json.dumps([writer, PROMPT_VERSION, record["instance_id"], record["problem_statement"],
                          record["setup_patch"]], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def _request(record: dict, seed: int) -> JudgeRequest:
    synth = record.get("synth") or {}
    version = "" if str(synth.get("version", "")).startswith("local-") else synth.get("version", "")
    user = PROMPT.format(package=synth.get("package", record["repo"]), version=version,
                         statement=record["problem_statement"])
    return JudgeRequest(messages=({"role": "system", "content": SYSTEM}, {"role": "user", "content": user}),
                        max_new_tokens=MAX_NEW_TOKENS, temperature=0.0, seed=seed)


def _cached(path: Path) -> dict[str, dict]:
    rows: dict[str, dict] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line an interruption cut: that statement is written again
            rows[row["key"]] = row
    return rows


def rewrite_statements(records: list[dict], model: Any, writer: str, cache: Path,
                       seed: int = 0) -> tuple[list[dict], Counter[str]]:
    """``records`` with their statements reworded by ``model`` (named ``writer`` in the records and the cache),
    and the count of statements kept procedural, by reason. Cached in ``cache`` (a jsonl file)."""
    replies: dict[str, object] = {key: row["reply"] for key, row in _cached(cache).items() if "reply" in row}
    keys = [statement_key(writer, r) for r in records]
    todo = [i for i, key in enumerate(keys) if key not in replies]
    if todo:
        answers = model.complete([_request(records[i], seed) for i in todo])
        cache.parent.mkdir(parents=True, exist_ok=True)
        with cache.open("a", encoding="utf-8") as out:
            for i, answer in zip(todo, answers, strict=True):
                replies[keys[i]] = answer
                if not isinstance(answer, BaseException):  # a failed request is tried again on the next run
                    row = {"key": keys[i], "instance_id": records[i]["instance_id"], "reply": answer}
                    out.write(json.dumps(row, sort_keys=True) + "\n")
    kept: Counter[str] = Counter()
    out_records = []
    for record, key in zip(records, keys, strict=True):
        # the raw reply is what is cached: the checks apply on every run, so a new check needs no new request
        text, reason = clean_reply(replies[key], changed_lines_of(record["setup_patch"]), failing_names(record))
        synth = dict(record.get("synth") or {})
        if text:
            synth["statement_writer"] = writer
            out_records.append({**record, "problem_statement": text, "synth": synth})
        else:
            kept[f"statement kept procedural: {reason}"] += 1
            synth["statement_writer"] = "procedural"
            out_records.append({**record, "synth": synth})
    return out_records, kept
