"""The gold patch as a walkthrough through the SWE tools: ``view`` what it touches, ``edit`` it, ``submit``.

Under the ``tools`` protocol the oracle rebuilds the gold patch the way an agent would, one hunk at a time:

1. ``view`` the hunk's region of the file, :data:`VIEW_CONTEXT` lines either side;
2. ``edit`` with ``old_str`` = the bugged text the hunk changes (from its first to its last changed line) and
   ``new_str`` = the gold text. When ``old_str`` occurs more than once in the file (or is empty: a pure insertion),
   it is widened by whole lines of the file, one above, then one below, until it occurs exactly once (no second
   occurrence at all, overlapping ones included), which is what the ``edit`` tool requires;
3. ``submit``.

Hunks are applied in order to a copy of each file (read from the episode's sandbox after set-up), so every
``old_str`` is checked against the file as it is at that turn. A file the patch adds is written with one ``bash``
command, a file it deletes is removed with one. What the tools cannot rebuild exactly (a rename, a binary patch, a
file with carriage returns, which the ``edit`` tool's text mode would rewrite) raises :class:`WalkthroughError`; the
world then falls back to the gold patch applied with ``git apply`` (:func:`~turngym.envs.swe.instances.oracle_actions`).

The unified diff is parsed by ``unidiff`` (hunk positions, line kinds, the "\\ No newline at end of file" marker).
"""

from __future__ import annotations

import base64
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from turngym.envs.tools import ToolCall

VIEW_CONTEXT = 3  # lines shown above and below the region a hunk changes


class WalkthroughError(ValueError):
    """The gold patch cannot be rebuilt with the SWE tools (the world falls back to ``git apply``)."""


@dataclass(frozen=True)
class _Hunk:
    source_start: int  # 1-based line of the hunk in the original file (0 for an empty file)
    lines: tuple[tuple[str, str], ...]  # (kind, text with its line ending): kind ' ', '-' or '+'


def _hunks(patched_file) -> list[_Hunk]:
    hunks = []
    for hunk in patched_file:
        lines: list[tuple[str, str]] = []
        for line in hunk:
            if line.line_type == "\\":  # "\ No newline at end of file": the line before it has no line ending
                if lines:
                    kind, text = lines[-1]
                    lines[-1] = (kind, text.removesuffix("\n"))
                continue
            lines.append((line.line_type, line.value))
        hunks.append(_Hunk(hunk.source_start, tuple(lines)))
    return hunks


def patch_files(patch: str) -> list[str]:
    """The files whose bugged text the walkthrough needs (those the patch modifies)."""
    return [f.path for f in _parse(patch) if not f.is_added_file and not f.is_removed_file]


def _parse(patch: str):
    try:
        from unidiff import PatchSet
        from unidiff.errors import UnidiffParseError
    except ImportError:
        raise WalkthroughError("unidiff is not installed (pip install unidiff)") from None

    try:
        files = PatchSet.from_string(patch)
    except UnidiffParseError as error:
        raise WalkthroughError(f"the gold patch is not a unified diff unidiff can read: {error}") from None
    if not files:
        raise WalkthroughError("the gold patch changes no file")
    for patched in files:
        if patched.is_rename or getattr(patched, "is_binary_file", False):
            raise WalkthroughError(f"{patched.path}: renames and binary patches are not rebuilt with the tools")
    return files


def _occurs_once(text: str, part: str) -> bool:
    first = text.find(part)
    return bool(part) and first >= 0 and text.find(part, first + 1) < 0


def tool_walkthrough(patch: str, files: Mapping[str, str | None]) -> list[ToolCall]:
    """The calls that rebuild ``patch`` from the bugged files (``files``: path -> text, None when absent), then submit.

    Raises :class:`WalkthroughError` when the patch does not apply to ``files`` or the tools cannot rebuild it.
    """
    calls: list[ToolCall] = []
    for patched in _parse(patch):
        path = patched.path
        if patched.is_removed_file:
            calls.append(ToolCall("bash", {"command": f"rm -- {shlex.quote(path)}"}))
            continue
        if patched.is_added_file:
            calls.append(ToolCall("bash", {"command": _write_file(path, "".join(
                text for hunk in _hunks(patched) for kind, text in hunk.lines if kind != "-"))}))
            continue
        text = files.get(path)
        if text is None:
            raise WalkthroughError(f"the gold patch modifies {path}, which is not in the repository")
        if "\r" in text:
            raise WalkthroughError(f"{path} has carriage returns, which the edit tool's text mode would rewrite")
        calls += _file_calls(path, text, _hunks(patched))
    return [*calls, ToolCall("submit", {})]


def _file_calls(path: str, text: str, hunks: list[_Hunk]) -> list[ToolCall]:
    lines = text.splitlines(keepends=True)
    calls: list[ToolCall] = []
    shift = 0  # lines added minus lines removed by the hunks already applied
    for hunk in hunks:
        changed = [i for i, (kind, _) in enumerate(hunk.lines) if kind in "+-"]
        if not changed:
            continue
        first, last = changed[0], changed[-1]
        # where the first changed line sits in the file as it is now
        start = max(hunk.source_start - 1, 0) + shift + sum(kind != "+" for kind, _ in hunk.lines[:first])
        old = [t for kind, t in hunk.lines[first : last + 1] if kind != "+"]
        new = [t for kind, t in hunk.lines[first : last + 1] if kind != "-"]
        end = start + len(old)
        if "".join(lines[start:end]) != "".join(old):
            raise WalkthroughError(f"the gold patch does not apply to {path} at line {start + 1}")
        current = "".join(lines)
        low, high, below = start, end, False
        while not _occurs_once(current, "".join(lines[low:high])):
            if (below or low == 0) and high < len(lines):
                high += 1
            elif low > 0:
                low -= 1
            else:
                break
            below = not below
        old_str = "".join(lines[low:high])
        if not _occurs_once(current, old_str):  # an empty file: nothing to anchor an edit on
            calls.append(ToolCall("bash", {"command": _write_file(path, "".join(new))}))
        else:
            if lines:
                calls.append(ToolCall("view", {"path": path, "start": max(1, start + 1 - VIEW_CONTEXT),
                                               "end": min(len(lines), max(end, start + 1) + VIEW_CONTEXT)}))
            new_str = "".join(lines[low:start]) + "".join(new) + "".join(lines[end:high])
            calls.append(ToolCall("edit", {"path": path, "old_str": old_str, "new_str": new_str}))
        lines[start:end] = "".join(new).splitlines(keepends=True)
        shift += len(new) - len(old)
    return calls


def _write_file(path: str, content: str) -> str:
    """One shell command that writes ``content`` to ``path`` exactly (a quoted here-document when it can be)."""
    quoted = shlex.quote(path)
    mkdir = f"mkdir -p -- {shlex.quote(path.rsplit('/', 1)[0])} && " if "/" in path else ""
    marker = "TURNGYM_EOF"
    while marker in content:
        marker += "_"
    if content.endswith("\n") or not content:
        return f"{mkdir}cat > {quoted} <<'{marker}'\n{content}{marker}"
    encoded = base64.b64encode(content.encode()).decode()
    return f"{mkdir}printf '%s' {encoded} | base64 -d > {quoted}"


# ---------------------------------------------------------------------- reading the bugged files in the sandbox
def read_files_command(paths: list[str]) -> str:
    """A shell command printing each file as ``FILE <path b64> <content b64>`` (``NONE <path b64>`` if absent)."""
    rows = []
    for path in paths:
        name, quoted = base64.b64encode(path.encode()).decode(), shlex.quote(path)
        rows.append(f"if [ -f {quoted} ]; then printf 'FILE {name} '; base64 -w0 -- {quoted}; printf '\\n'; "
                    f"else printf 'NONE {name}\\n'; fi")
    return "\n".join(rows) or ":"


def parse_read_files(output: str) -> dict[str, str | None]:
    """:func:`read_files_command`'s output as ``{path: text or None}`` (text decoded as UTF-8)."""
    files: dict[str, str | None] = {}
    for row in output.splitlines():
        kind, _, rest = row.partition(" ")
        if kind not in ("FILE", "NONE"):
            continue
        name, _, content = rest.partition(" ")
        path = base64.b64decode(name).decode()
        try:
            files[path] = base64.b64decode(content).decode("utf-8") if kind == "FILE" else None
        except UnicodeDecodeError:
            raise WalkthroughError(f"{path} is not UTF-8 text") from None
    return files
