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


def bad_characters(text: str) -> bool:
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
    if bad_characters(command):
        return ParsedAction(error="the command contains control characters or undecodable bytes")
    if _is_submit(command):
        return ParsedAction(submit=True)
    return ParsedAction(command=command)


# ---------------------------------------------------------------------- the tools protocol (SWE-agent style)
def swe_tools() -> list[dict]:
    """The SWE world's tools under the ``tools`` protocol: ``bash``, ``edit`` (str_replace), ``view``, ``submit``."""
    from turngym.envs.tools import function_tool

    text = {"type": "string"}
    return [
        function_tool("bash", "Run one shell command in a fresh bash shell in the repository; the exit code and "
                      "output come back.", {"command": {**text, "description": "the command"}}),
        function_tool("edit", "Replace the one occurrence of old_str in a file with new_str; an error, and no "
                      "change, when old_str occurs zero or several times.",
                      {"path": {**text, "description": "the file, relative to the repository or absolute"},
                       "old_str": {**text, "minLength": 1, "description": "the exact text to replace"},
                       "new_str": {**text, "description": "the text to put in its place"}}),
        function_tool("view", "Show a file with line numbers, whole or lines start to end (1-based, inclusive).",
                      {"path": text, "start": {"type": "integer", "minimum": 1},
                       "end": {"type": "integer", "minimum": 1}}, required=["path"]),
        function_tool("submit", "Submit the repository for grading; this ends the episode.", {}),
    ]


# Run inside the sandbox by python3 with `args` (the call's arguments) defined. The arguments travel base64-encoded,
# so no text of theirs is ever shell syntax. A path written as a traceback writes it (`src/pkg/x.py:180`), which the
# SFT-only policy did in 5 of 10 held-out episodes, gets a hint naming the file.
_PATH_HINT = """
import pathlib, re, sys
def path_hint(path, how):
    match = re.fullmatch(r"(.+?)(?::[0-9]+)+:?", str(path))
    if match and pathlib.Path(match.group(1)).is_file():
        return f" (the file is {match.group(1)}; {how})"
    return ""
"""
_EDIT = _PATH_HINT + """
path = pathlib.Path(args["path"])
try:
    text = path.read_text()
except (OSError, UnicodeDecodeError) as error:
    sys.exit(f"edit: cannot read {path}: {error}{path_hint(path, 'a path names the file alone')}")
count = text.count(args["old_str"])
if count != 1:
    more = "; include more of the surrounding lines to make it unique" if count else ""
    sys.exit(f"edit: old_str occurs {count} times in {path}; it must occur exactly once{more}. Nothing changed.")
path.write_text(text.replace(args["old_str"], args["new_str"], 1))
print(f"edited {path}")
"""
_VIEW = _PATH_HINT + """
path = pathlib.Path(args["path"])
try:
    lines = path.read_text().splitlines()
except (OSError, UnicodeDecodeError) as error:
    sys.exit(f"view: cannot read {path}: {error}{path_hint(path, 'choose lines with start and end')}")
start, end = args.get("start", 1), args.get("end", len(lines))
for number in range(start, min(end, len(lines)) + 1):
    print(f"{number:6d}\\t{lines[number - 1]}")
"""


def tool_command(name: str, arguments: dict) -> str:
    """The shell command (or :data:`SUBMIT`) a checked call of :func:`swe_tools` stands for."""
    import base64
    import json

    if name == "bash":
        return arguments["command"]
    if name == "submit":
        return SUBMIT
    payload = base64.b64encode(json.dumps(arguments).encode()).decode()
    script = {"edit": _EDIT, "view": _VIEW}[name]
    return (f"python3 - <<'TURNGYM_TOOL'\nimport base64, json\nargs = json.loads(base64.b64decode('{payload}'))\n"
            f"{script}TURNGYM_TOOL")
