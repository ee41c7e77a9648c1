"""Shared helpers of the source red team's reproducers (see README.md).

Every reproducer makes a :class:`Case`: a fresh temporary folder for all its files (removed afterwards), pip made
hermetic (``PIP_NO_INDEX=1``, no configuration file, no find-links but the case's own, no proxy: only local files
and 127.0.0.1), and one attacked call whose verdict it prints as its last line, ``CASE <name>: <outcome>`` (the
folder's path written ``{case}``), exiting 1 on a violation of the claim: code of the package ran on the host, a
file was written outside the cache root, an exception other than ``SourceError`` (or a ``SourceError`` of several
lines), the call ran past its deadline, or the cache grew past what the caps allow.

``turngym`` is imported from the checkout this folder lives in: the interpreter's own ``turngym`` when that is this
checkout (its ``.venv``, an editable install), else a folder that maps ``turngym`` onto this checkout the way
pyproject's ``package-dir`` does, first on ``sys.path`` here and in the child processes the code starts.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import os
import re
import shutil
import signal
import sys
import tarfile
import tempfile
import threading
import time
import tomllib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _import_this_checkout() -> None:
    spec = importlib.util.find_spec("turngym")
    if spec is not None and spec.origin and Path(spec.origin).resolve() == ROOT / "turngym" / "__init__.py":
        return
    shim = Path(tempfile.mkdtemp(prefix="swe-source-redteam-import-"))
    atexit.register(shutil.rmtree, shim, True)
    package = shim / "turngym"
    package.mkdir()
    for entry in (ROOT / "turngym").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    folders = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for dotted, folder in folders.items():
        if dotted.count(".") == 1:
            (package / dotted.split(".", 1)[1]).symlink_to(ROOT / folder)
    sys.path.insert(0, str(shim))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(shim), os.environ.get("PYTHONPATH")) if p)


_import_this_checkout()
from turngym.envs.swe.synth import source  # after the import path is set
from turngym.envs.swe.synth.source import SourceError

if not Path(source.__file__).resolve().is_relative_to(ROOT):
    sys.exit(f"turngym comes from {source.__file__}, not from this checkout {ROOT}")

UNPACK_SECONDS = getattr(source, "UNPACK_SECONDS", 120.0)  # the code's deadline on unpacking (none before the fixes)
MAX_UNPACKED_BYTES = 2 * 1024 ** 3
CACHE_BOUND = MAX_UNPACKED_BYTES + 2 * 256 * 1024 ** 2  # what the caps allow in the cache after one call, and more

# Hermetic: never a real index, never the machine's pip configuration, never a proxy.
os.environ["PIP_NO_INDEX"] = "1"
os.environ["PIP_CONFIG_FILE"] = os.devnull
for _variable in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "http_proxy", "https_proxy", "all_proxy",
                  "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
    os.environ.pop(_variable, None)
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"

# An in-tree PEP 517 backend with no build requirements: whatever builds the sdist runs it, and it writes a marker.
BACKEND = '''
import pathlib
pathlib.Path({marker!r}).write_text("code of the package ran on the host\\n")
def get_requires_for_build_wheel(config_settings=None): return []
def get_requires_for_build_sdist(config_settings=None): return []
def prepare_metadata_for_build_wheel(d, config_settings=None): raise SystemExit("stop after proving execution")
def build_wheel(d, config_settings=None, metadata_directory=None): raise SystemExit("stop")
def build_sdist(d, config_settings=None): raise SystemExit("stop")
'''


def one_line(text: object, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _terminate(signum, frame) -> None:  # run_all's timeout: unwind, so that the folder is removed
    raise SystemExit(128 + signum)


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def tar_tree(tree: Path, out_dir: Path) -> Path:
    """``tree`` as ``out_dir/<tree name>.tar.gz``."""
    archive = _mkdir(out_dir) / f"{tree.name}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname=tree.name)
    return archive


def add_symlink_ladder(tar: tarfile.TarFile, path: str, steps: str, component: str = "d" * 240) -> str:
    """Nested ``component`` folders under ``path``, each also reachable through a one-letter symlink of ``steps``
    (``path/a -> d..d``, ``path/d..d/b -> d..d``, ...): a real path past PATH_MAX. The deepest folder's path."""
    for step in steps:
        folder = tarfile.TarInfo(os.path.join(path, component))
        folder.type, folder.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(folder)
        link = tarfile.TarInfo(os.path.join(path, step))
        link.type, link.linkname = tarfile.SYMTYPE, component
        tar.addfile(link)
        path = os.path.join(path, component)
    return path


def serve(handler: type[BaseHTTPRequestHandler]) -> str:
    """Serve ``handler`` on 127.0.0.1 (a free port) in a daemon thread; the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


class QuietHandler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def reply(self, data: bytes, content_type: str = "text/html", **headers: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(data)


def tree_bytes(path: Path) -> int:
    """Disk blocks under ``path``, in bytes (hard links each counted: what the unpacking wrote)."""
    total = 0
    for folder, _, files in os.walk(path, onerror=lambda error: None):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
            except OSError:
                pass
    return total


class Case:
    """One attack: its folder (``dir``), the cache root it gives the code (``cache``), a folder an escape would
    write into (``outside``), a find-links folder (``links``, set as ``PIP_FIND_LINKS``) and the markers of every
    hostile tree it made. :meth:`run` runs the attacked call and ends the process."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dir = Path(tempfile.mkdtemp(prefix=f"rt-{re.sub(r'[^A-Za-z0-9]+', '-', name)}-"))
        self.cache = self.dir / "cache"
        self.outside = _mkdir(self.dir / "outside")
        self.links = _mkdir(self.dir / "links")
        self.markers: list[Path] = []
        self.violations: list[str] = []
        tmp = _mkdir(self.dir / "tmp")
        self._skipped = {self.cache, tmp, self.dir / "pip-cache"}  # the cache root, TMPDIR and pip's own cache
        os.environ.update(TMPDIR=str(tmp), PIP_CACHE_DIR=str(self.dir / "pip-cache"),
                          TURNGYM_CACHE=str(self.dir / "default-cache"), PIP_FIND_LINKS=str(self.links))
        tempfile.tempdir = str(tmp)
        os.chdir(_mkdir(self.dir / "cwd"))  # the code's working directory, and the child processes'
        signal.signal(signal.SIGTERM, _terminate)

    def marker(self, name: str) -> Path:
        path = self.dir / f"MARKER-{name}-code-ran"
        self.markers.append(path)
        return path

    def tree(self, name: str, version: str = "1.0", requires=(), extra_files: dict | None = None) -> Path:
        """An sdist tree whose in-tree PEP 517 backend (and setup.py) writes this case's marker of ``name`` when
        anything builds it; ``requires``: its Requires-Dist lines; ``extra_files``: relative path -> bytes or str."""
        marker = self.marker(name)
        tree = self.dir / "src" / f"{name}-{version}"
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir(parents=True)
        (tree / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "evilbackend"\n'
                                             'backend-path = ["."]\n')
        (tree / "evilbackend.py").write_text(BACKEND.format(marker=str(marker)))
        (tree / "setup.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('setup.py ran')\n")
        (tree / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                       + "".join(f"Requires-Dist: {line}\n" for line in requires))
        (tree / "tests").mkdir()
        (tree / "tests" / "test_it.py").write_text("def test_it():\n    assert True\n")
        for relative, data in (extra_files or {}).items():
            path = tree / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data if isinstance(data, bytes) else data.encode())
        return tree

    def sdist(self, name: str, version: str = "1.0", folder: Path | None = None, **tree_options) -> Path:
        """:meth:`tree` packed as ``NAME-VERSION.tar.gz`` in ``folder`` (default the find-links folder)."""
        return tar_tree(self.tree(name, version, **tree_options), folder or self.links)

    def _outside_entries(self) -> set[str]:
        """Every path under the case's folder but the cache root, TMPDIR, pip's cache and the folders that hold
        the cache root (the code makes those), relative to the folder."""
        found = set()
        for folder, dirs, files in os.walk(self.dir, onerror=lambda error: None):
            dirs[:] = [d for d in dirs if Path(folder, d) not in self._skipped]
            found |= {os.path.relpath(os.path.join(folder, name), self.dir) for name in dirs + files}
        return found - {os.path.relpath(p, self.dir) for p in self.cache.parents if p.is_relative_to(self.dir)}

    def violation(self, text: str) -> None:
        self.violations.append(text)

    def run(self, call: Callable[[], Any], *, deadline: float, judge: Callable[[Any], str] | None = None) -> None:
        """Run ``call``, print ``CASE name: outcome`` and exit (1 on a violation), the folder removed. ``judge``
        says what an accepted result means (``"contained: ..."``, ``"accepted: ..."``; it may call
        :meth:`violation`); ``deadline``: the seconds the code's own deadlines allow the call."""
        code = 1
        try:
            before = self._outside_entries()
            start = time.monotonic()
            result = error = crash = None
            try:
                result = call()
            except SourceError as caught:
                error = caught
            except Exception as caught:  # noqa: BLE001 - anything but SourceError is the finding
                crash = caught
            seconds = time.monotonic() - start
            if crash is not None:
                kind = type(crash).__qualname__
                kind = kind if type(crash).__module__ == "builtins" else f"{type(crash).__module__}.{kind}"
                self.violation(f"crash: {kind}: {one_line(crash, 160)}")
            ran = [m.name for m in self.markers if m.exists()]
            if ran:
                self.violation(f"code of the package ran on the host ({', '.join(ran)})")
            written = sorted(self._outside_entries() - before - {m.name for m in self.markers})
            if written:
                self.violation(f"written outside the cache root: {', '.join(written[:3])}")
            if seconds > deadline:
                self.violation(f"took {seconds:.0f} s, past its {deadline:.0f} s deadline")
            if error is not None and "\n" in str(error):
                self.violation(f"a SourceError of {len(str(error).splitlines())} lines")
            used = tree_bytes(self.cache)
            if used > CACHE_BOUND:
                self.violation(f"the cache holds {used >> 20} MB after the call")
            if error is not None:
                outcome = f"refused: SourceError: {error}"
            elif crash is not None:
                outcome = ""
            else:
                outcome = judge(result) if judge else f"accepted: {one_line(result, 200)}"
            if self.violations:
                outcome = "VIOLATION: " + "; ".join(self.violations)
            code = 1 if self.violations else 0
            print(f"CASE {self.name}: {outcome.replace(str(self.dir), '{case}')}", flush=True)
        finally:
            os.chdir(self.dir.parent)
            shutil.rmtree(self.dir, ignore_errors=True)
        sys.exit(code)


def prepare(spec: str, case: Case) -> Callable[[], Any]:
    """The pipeline's entry, ``prepare_repo(spec)`` into the case's cache."""
    return lambda: source.prepare_repo(spec, root=case.cache)


def repo_entries(repo: Path) -> str:
    """What of note a prepared repository holds: symlinks, setuid/setgid files, its size."""
    links = [p for p in repo.rglob("*") if p.is_symlink()]
    special = [p for p in repo.rglob("*") if not p.is_symlink() and p.is_file() and p.stat().st_mode & 0o6000]
    return (f"{len(links)} symlinks, {len(special)} setuid/setgid files, {tree_bytes(repo) >> 10} kB on disk")

