"""Untrusted bytes handled in a child process: a package's index pages, its sdist download and its archive.

A registry package is untrusted input, and so is the index a user points at. Python's own parsers of it are not
safe to run in the synthesis process itself: this Python's ``tarfile`` has known bugs that let an archive write
outside the folder its ``data`` filter guards (the CVE-2025-4517 class, fixed in 3.11.13) or spin on a crafted pax
header (CVE-2024-6232); a page or archive can declare gigabytes of names or contents; a ``file://`` link to a FIFO
or an index that drips one byte a minute never ends. So each step runs in a fresh process
(:func:`run_isolated`) with a wall-clock deadline and limits on its memory and on the size of any file it writes,
and the archive is unpacked by :func:`unpack`, which makes only regular files and folders, each inside the
destination, counting the bytes it actually writes. Whatever goes wrong comes back as one line.

Why not ``shutil.unpack_archive(filter="data")``: it trusts ``tarfile``'s own checks (above), writes hard links
as full copies (a 3.6 kB archive of 300 links became 302 MB), and sizes come from headers that can lie.
"""

from __future__ import annotations

import importlib
import json
import resource
import stat
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

MAX_UNPACKED_BYTES = 2 * 1024 ** 3
MAX_MEMBERS = 200_000
CHILD_MEMORY_BYTES = 4 * 1024 ** 3  # address space of a child: the index pages, the download, tarfile's headers
BLOCK = 1 << 20


class IsolatedFailure(Exception):
    """What a child process reported (one line), or that it ran past its deadline or died."""


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line (whitespace runs collapsed), at most ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


RESULT = "turngym-isolated-result "  # the child's last line: this, then its JSON answer


def _limits(memory_bytes: int, file_bytes: int) -> Callable[[], None]:
    def apply() -> None:
        for limit, value in ((resource.RLIMIT_AS, memory_bytes), (resource.RLIMIT_FSIZE, file_bytes)):
            try:
                resource.setrlimit(limit, (value, value))
            except (ValueError, OSError):
                pass
    return apply


def run_isolated(function: str, *args: Any, timeout: float, what: str,
                 memory_bytes: int = CHILD_MEMORY_BYTES, file_bytes: int = MAX_UNPACKED_BYTES) -> Any:
    """``function(*args)`` (``"module:name"``, JSON arguments and result) in a fresh ``python -m`` process under
    a ``timeout``-second deadline and the limits; its return value, or :class:`IsolatedFailure` with one line
    saying what went wrong in ``what``. A plain subprocess rather than multiprocessing: nothing of the caller's
    ``__main__`` is imported again in the child (a user's script without a main guard would run twice)."""
    command = [sys.executable, "-m", "turngym.envs.swe.synth.isolated", function, json.dumps(list(args))]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False,
                              preexec_fn=_limits(memory_bytes, file_bytes), stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise IsolatedFailure(f"{what} took over {timeout:.0f} s") from None
    last = (done.stdout.strip().splitlines() or [""])[-1]
    if not last.startswith(RESULT):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise IsolatedFailure(f"{what} ended without an answer (exit status {done.returncode}: {tail})")
    ok, value = json.loads(last[len(RESULT):])
    if not ok:
        raise IsolatedFailure(f"{what}: {value}")
    return value


def _main(function: str, arguments: str) -> None:
    module, _, name = function.partition(":")
    try:
        value = [True, getattr(importlib.import_module(module), name)(*json.loads(arguments))]
    except BaseException as error:  # noqa: BLE001 - anything the untrusted input causes is reported, as one line
        value = [False, one_line(f"{type(error).__name__}: {error}")]
    sys.stdout.write("\n" + RESULT + json.dumps(value) + "\n")
    sys.stdout.flush()


class _Budget:
    """Members and bytes an unpacking may still make."""

    def __init__(self) -> None:
        self.members = self.bytes = 0

    def member(self) -> None:
        self.members += 1
        if self.members > MAX_MEMBERS:
            raise ValueError(f"the archive holds over {MAX_MEMBERS} files")

    def add(self, size: int) -> None:
        self.bytes += size
        if self.bytes > MAX_UNPACKED_BYTES:
            raise ValueError(f"the archive unpacks to over {MAX_UNPACKED_BYTES >> 30} GB")


def _target(dest: Path, name: str) -> Path | None:
    """Where member ``name`` goes under ``dest`` (None for the archive's root itself). A name that is absolute or
    climbs out (``..``) is refused: no symlink is ever made under ``dest``, so the joined path stays inside it."""
    parts = name.replace("\\", "/").split("/")
    if name.startswith("/") or ".." in parts or "\x00" in name or (parts and parts[0].endswith(":")):
        raise ValueError(f"member {name[:120]!r} would leave the archive's folder")
    clean = [part for part in parts if part not in ("", ".")]
    return dest.joinpath(*clean) if clean else None


def _write(source, target: Path, budget: _Budget) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "wb") as out:
        while block := source.read(BLOCK):
            budget.add(len(block))
            out.write(block)


def unpack(archive: str, dest: str) -> None:
    """Unpack ``archive`` (.tar.gz, .tar.bz2, .tar.xz, .tar or .zip) into ``dest``: regular files and folders
    only (links, devices and FIFOs are left out), every one inside ``dest``, plain permissions, and at most
    :data:`MAX_MEMBERS` entries and :data:`MAX_UNPACKED_BYTES` bytes as written. Raises ``ValueError`` naming
    what is wrong. Meant to run through :func:`run_isolated`."""
    root, budget = Path(dest), _Budget()
    root.mkdir(parents=True, exist_ok=True)
    if archive.endswith(".zip"):
        with zipfile.ZipFile(archive) as handle:
            for info in handle.infolist():
                budget.member()
                target = _target(root, info.filename)
                mode = info.external_attr >> 16
                if target is None:
                    continue
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                elif not mode or stat.S_ISREG(mode):
                    with handle.open(info) as source:
                        _write(source, target, budget)
        return
    with tarfile.open(archive) as handle:
        for member in handle:
            budget.member()
            target = _target(root, member.name)
            if target is None:
                continue
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
            elif member.isreg():
                source = handle.extractfile(member)
                if source is not None:
                    _write(source, target, budget)


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[2])
