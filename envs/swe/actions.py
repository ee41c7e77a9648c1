"""The SWE world's action format: one shell command in a fenced block (mini-swe-agent style), or submit.

    I will look at the parser first.
    ```bash
    grep -n "def parse" src/pkg/parser.py
    ```

Text outside the block (reasoning) is allowed. Exactly one ``bash``/``sh``/``shell`` (or untagged)
block is a command; blocks in other languages are ignored. ``submit`` (alone, or as the block's
command), or mini-swe-agent's ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``, ends the episode
and sends the repository to grading.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

SUBMIT = "submit"
SUBMIT_SENTINELS = ("submit", "echo complete_task_and_submit_final_output")
COMMAND_LANGUAGES = frozenset({"", "bash", "sh", "shell", "console", "zsh"})
FORMAT_HINT = (
    "Reply with exactly one shell command in a fenced block (```bash\\n<command>\\n```), or `submit` when done."
)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_ALLOWED_CONTROLS = frozenset("\n\t")


@dataclass(frozen=True)
class ParsedAction:
    """A command to run, a submission, or why the reply is not a valid action."""

    command: str | None = None
    submit: bool = False
    error: str | None = None


def _bad_characters(text: str) -> bool:
    """Control characters (except newline and tab), lone surrogates from undecodable bytes, NUL."""
    return any(ch not in _ALLOWED_CONTROLS and unicodedata.category(ch) in ("Cc", "Cs", "Co", "Cn") for ch in text)


def _is_submit(command: str) -> bool:
    first = " ".join(command.strip().splitlines()[0].split()).lower() if command.strip() else ""
    return any(first == s or first.startswith((s + " ", s + "&&")) for s in SUBMIT_SENTINELS)


def parse_action(text: str, max_chars: int) -> ParsedAction:
    """Parse one model reply; never raises on bad input."""
    text = text.replace("\r\n", "\n")
    if not text.strip():
        return ParsedAction(error="the reply is empty")
    if len(text) > max_chars:
        return ParsedAction(error=f"the reply is {len(text)} characters long; the limit is {max_chars}")
    blocks = [body for language, body in _FENCE.findall(text) if language.lower() in COMMAND_LANGUAGES]
    if not blocks:
        if _is_submit(text) and len(text.strip()) <= len("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"):
            return ParsedAction(submit=True)
        return ParsedAction(error="no command found")
    if len(blocks) > 1:
        return ParsedAction(error=f"found {len(blocks)} command blocks; run exactly one command per turn")
    command = blocks[0].strip("\n").rstrip()
    if not command.strip():
        return ParsedAction(error="the command block is empty")
    if _bad_characters(command):
        return ParsedAction(error="the command contains control characters or undecodable bytes")
    if _is_submit(command):
        return ParsedAction(submit=True)
    return ParsedAction(command=command)
