"""Problem statements without an LLM, written from what a user would report.

A user who hits a bug reports what they saw: which tests fail, the assertion message, the end of the
traceback. So the statement is made of exactly that, from the failing run of the bugged repository,
and never of the fix: every line that quotes a line the mutation changed (the bug's line, or the
original line the gold patch restores) is left out of the traceback, so the statement never shows the
patch or the mutated line verbatim (:func:`leaks` checks it, and the pipeline drops a task it finds).
The wording varies between a few templates, chosen by the task's seed.
"""

from __future__ import annotations

import difflib
import re

from turngym.envs.swe.synth.runner import failure_messages, failure_sections

MAX_TAIL_LINES = 25
MAX_TESTS_LISTED = 8
MIN_CONTAINED = 8  # a changed line this long, or any with an operator, may not appear inside a statement line
_BARE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*:?")  # `pass`, `else:`, `merge`: only a whole line of it counts
# an object's default repr holds its memory address, different on every run: written as 0x... (same set anywhere)
_ADDRESS = re.compile(r"\bat 0x[0-9a-fA-F]{6,}\b")

OPENINGS = (
    "After installing {package} {version}, some of its own tests fail for me.",
    "I'm seeing test failures in {package} {version}.",
    "Running the test suite of {package} {version} gives failures.",
)
CLOSINGS = (
    "These tests should pass.",
    "Expected: the tests above pass, as they do in a correct build.",
    "Could you take a look? The tests above are expected to pass.",
)


def changed_lines(original: str, mutated: str) -> list[str]:
    """The stripped, non-empty lines the mutation added or removed."""
    lines = set()
    for line in difflib.unified_diff(original.splitlines(), mutated.splitlines(), lineterm="", n=0):
        if line.startswith(("+++", "---", "@@")):
            continue
        if line[:1] in "+-" and line[1:].strip():
            lines.add(line[1:].strip())
    return sorted(lines)


def distinctive(changed_line: str) -> bool:
    """Whether a changed line must not appear even inside a longer line: one with a letter or digit that is
    long or more than a bare word (``i += 1``, ``return x * 2``; not ``pass``, ``else:`` or ``)``)."""
    return any(ch.isalnum() for ch in changed_line) and (
        len(changed_line) >= MIN_CONTAINED or not _BARE_WORD.fullmatch(changed_line))


def _quotes(line: str, changed: list[str]) -> bool:
    text = line.strip()
    if not text:
        return False
    return any(text == c or (distinctive(c) and c in text) for c in changed)


def leaks(statement: str, changed: list[str]) -> list[str]:
    """The changed lines a statement quotes (empty when it quotes none)."""
    return [c for c in changed if any(_quotes(line, [c]) for line in statement.splitlines())]


def _section_for(test_id: str, sections: dict[str, list[str]]) -> list[str] | None:
    parts = test_id.split("::")[1:]
    for key in (".".join(parts), parts[-1] if parts else "", "::".join(parts)):
        if key and key in sections:
            return sections[key]
    return None


def write_statement(package: str, version: str, failing: list[str], log: str, changed: list[str],
                    seed: int) -> str:
    """The issue text for a task whose ``failing`` tests fail in ``log`` (pytest ``-rA --tb=short``)."""
    log = _ADDRESS.sub("at 0x...", log)
    sections = failure_sections(log)
    messages = failure_messages(log)
    listed = failing[:MAX_TESTS_LISTED]
    more = len(failing) - len(listed)
    first = failing[0]
    name = first.split("::")[-1]
    title = f"{name} fails" if len(failing) == 1 else f"{name} and {len(failing) - 1} other test(s) fail"
    version = "" if version.startswith("local-") else version  # a local directory has no release to name
    opening = OPENINGS[seed % len(OPENINGS)].format(package=package, version=version).replace(" ,", ",")
    out = [title, "", opening.replace("  ", " ").replace(" .", "."), ""]
    out.append("Failing test:" if len(failing) == 1 else "Failing tests:")
    out += [f"    {test}" for test in listed]
    if more:
        out.append(f"    ... and {more} more")
    section = _section_for(first, sections)
    if section:
        kept = [line for line in section if not _quotes(line, changed)]
        while kept and not kept[-1].strip():
            kept.pop()
        tail = kept[-MAX_TAIL_LINES:]
        if tail:
            out += ["", f"The end of the traceback of {name}:", "", "```", *tail, "```"]
    others = [(t, messages.get(t, "")) for t in listed[1:] if messages.get(t)]
    # a message pytest cut at the terminal's width ("AttributeError: '...") says nothing: left out
    others = [(t, m) for t, m in others if not _quotes(m, changed) and not (m.endswith("...") and len(m) < 60)]
    if others:
        out += ["", "The other failures say:"]
        out += [f"- {t.split('::')[-1]}: {m[:300]}" for t, m in others[:5]]
    elif not section and messages.get(first) and not _quotes(messages[first], changed):
        out += ["", f"It fails with: {messages[first][:300]}"]
    out += ["", CLOSINGS[(seed // 7) % len(CLOSINGS)]]
    return "\n".join(out) + "\n"
