"""Where a synthesized task set's repositories come from: a registry package's sdist, or a local directory.

The source distribution of ``NAME==VERSION`` (many ship their tests) is found on pip's configured indexes and
find-links and downloaded into the cache, outside git, without running any of its code; it is unpacked
(:func:`.isolated.unpack`) and cleaned (bytecode, ``*.egg-info``, VCS folders out) into the repository the tasks use
(``repo_path``). Everything below the cache root is keyed by name and version, so a second run reuses it.

No code of a package runs on this machine outside the sandbox. ``pip download --no-binary :all:`` would run the
sdist's build backend (its ``setup.py``) on the host to read its metadata, so the sdist is found with ``unearth``
(PDM's finder: indexes, find-links, yanked and Requires-Python rules as pip applies them) and fetched as a file;
the tests' requirements are installed from wheels only (``--only-binary :all:``), since building an sdist runs it,
and never from a direct URL (:func:`install_requirements`). Fetching and unpacking run in a child process
(:mod:`.isolated`).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from turngym.envs.swe.sandbox.base import READ_ONLY_DIRS
from turngym.envs.swe.synth.isolated import BLOCK, IsolatedFailure, one_line, run_isolated

logger = logging.getLogger(__name__)

TEST_DIR_NAMES = ("test", "tests", "testing")
DEPS_DIR = READ_ONLY_DIRS[0]  # the tests' requirements, installed into the repository; read-only in the sandbox
SKIP_DIRS = {DEPS_DIR, ".git", ".hg", ".svn", "__pycache__", ".tox", ".nox", ".eggs", "build", "dist", ".mypy_cache",
             ".pytest_cache", "node_modules", ".venv", "venv"}
NOT_SOURCE_DIRS = {"docs", "doc", "examples", "example", "benchmarks", "bench", "scripts", "tools", "ci", ".github"}
# Bumped when the preparation of a repository changes: repositories and state of older preparations are not reused.
LAYOUT = "v3"  # v3: the package's own dist-info in the requirements folder (importlib.metadata finds it)
CONFTEST_MARK = "# turngym-synth: the package's own code (and the tests' requirements) importable, as an install would"
# Written at the top of the repository's root conftest.py (protected at grading: restored to its base version).
# The paths go right after the standard library, never before it: a module the agent writes (src/json.py) can
# never shadow one the runner or the tests import from the standard library, and an older copy of the package
# installed in the system's dist-packages never shadows the repository's. (PYTHONPATH in the test command would
# put them before the standard library, in the runner's own trusted process too.)
CONFTEST_HEAD = CONFTEST_MARK + """
import os as _turngym_os
import sys as _turngym_sys


def _turngym_paths():
    root = _turngym_os.path.dirname(_turngym_os.path.abspath(__file__))
    wanted = [root] + [_turngym_os.path.join(root, entry) for entry in {entries!r}]
    stdlib = [i for i, p in enumerate(_turngym_sys.path)
              if p and "-packages" not in p and p.startswith(_turngym_sys.base_prefix)]
    at = stdlib[-1] + 1 if stdlib else 0
    for path in wanted:
        if path in _turngym_sys.path:
            _turngym_sys.path.remove(path)
    _turngym_sys.path[at:at] = wanted


_turngym_paths()
del _turngym_paths
# turngym-synth: end
"""
_SPEC = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]{0,99})==([A-Za-z0-9._+!-]{1,64})$")  # a cache path each


class SourceError(Exception):
    """A package whose source cannot be used; the message is the one-line reason for the report."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


def cache_root() -> Path:
    """``$TURNGYM_CACHE/swe-synth`` (default ``~/.cache/turngym/swe-synth``): sdists, repositories, state."""
    root = os.environ.get("TURNGYM_CACHE") or Path.home() / ".cache" / "turngym"
    return Path(root) / "swe-synth"


@dataclass(frozen=True)
class Source:
    """One repository to synthesize from."""

    name: str  # the distribution name (or the local folder's name)
    version: str  # the version, or "local-<hash>" for a directory
    spec: str  # what the user gave: "name==version" or a path
    sdist_sha256: str = ""  # of the downloaded archive (the manifest pins it)

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"


def parse_spec(spec: str) -> tuple[str, str] | None:
    match = _SPEC.match(spec.strip())
    return (match.group(1), match.group(2)) if match else None


MAX_SDIST_BYTES = 256 * 1024 * 1024
MAX_INDEX_PAGE_BYTES = 64 * 1024 * 1024  # a generous bound: the largest page of this machine's index is 30 kB
UNPACK_SECONDS = 120.0  # a real sdist unpacks in seconds; a crafted header can make tarfile spin (CVE-2024-6232)
SDIST_SUFFIXES = (".tar.gz", ".zip")


PIP_TRUE, PIP_FALSE = ("y", "yes", "t", "true", "on", "1"), ("", "n", "no", "f", "false", "off", "0")  # pip's strtobool


def registry_sources() -> tuple[list[str], list[str]]:
    """``(index URLs, find-links)`` as pip is configured here: ``PIP_*`` variables first, then the download and
    global sections of pip's configuration files (read through ``pip config list``); ``no-index`` drops the
    indexes. pip's defaults (PyPI, no find-links) where nothing says otherwise."""
    command = [sys.executable, "-m", "pip", "config", "list"]
    try:
        listed = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        listed = ""
    options: dict[str, dict[str, str]] = {}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        section, _, option = key.strip().rpartition(".")
        options.setdefault(option, {})[section] = value.strip().strip("'\"")
    for option in ("index-url", "extra-index-url", "find-links", "no-index"):
        variable = "PIP_" + option.upper().replace("-", "_")
        if variable in os.environ:
            options.setdefault(option, {})[":env:"] = os.environ[variable]

    def value(option: str) -> str | None:
        found = options.get(option, {})
        return next((found[s] for s in (":env:", "download", "global") if s in found), None)

    indexes = [value("index-url") or "https://pypi.org/simple/", *(value("extra-index-url") or "").split()]
    no_index = (value("no-index") or "").strip().lower()
    if no_index not in (*PIP_TRUE, *PIP_FALSE):  # pip itself refuses such a value
        raise SourceError(f"pip's no-index is {one_line(no_index)[:40]!r}, which is neither yes nor no")
    if no_index in PIP_TRUE:
        indexes = []
    return indexes, (value("find-links") or "").split()


def fetch_sdist(name: str, version: str, root: Path, timeout: float = 600.0,
                sources: tuple[list[str], list[str]] | None = None) -> Path:
    """The sdist of ``name==version`` in ``root/sdists`` (downloaded once, no code of it run), found and fetched in
    a child process under a ``timeout``-second deadline (:mod:`.isolated`: a hostile index page or link cannot
    hang, crash or fill this one). ``sources``: ``(index URLs, find-links)``; default :func:`registry_sources`."""
    target = root / "sdists" / f"{name}-{version}"
    existing = sorted(p for p in target.glob("*") if p.is_file()) if target.is_dir() else []
    if existing:
        return existing[0]
    index_urls, find_links = sources if sources is not None else registry_sources()
    staging = Path(tempfile.mkdtemp(prefix=".download-", dir=_mkdir(root / "sdists")))
    try:
        try:
            run_isolated("turngym.envs.swe.synth.source:find_and_download", name, version, index_urls, find_links,
                         str(staging), min(timeout, 60.0), timeout=timeout,
                         what=f"fetching the sdist of {name}=={version}",
                         file_bytes=MAX_SDIST_BYTES + BLOCK)
        except IsolatedFailure as failure:
            raise SourceError(str(failure).replace("SourceError: ", "")) from None
        files = [p for p in staging.iterdir() if p.is_file()]
        if len(files) != 1:
            raise SourceError(f"fetching the sdist of {name}=={version} left {len(files)} files")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return min(p for p in target.iterdir() if p.is_file())


def find_and_download(name: str, version: str, index_urls: list[str], find_links: list[str], folder: str,
                      timeout: float) -> str:
    """Find the sdist of ``name==version`` with ``unearth`` and download it into ``folder``; its path. Run in a
    child by :func:`fetch_sdist`."""
    try:
        import httpx
        from unearth import PackageFinder
    except ImportError:
        raise SourceError("fetching a registry package needs unearth: pip install 'unearth>=0.17,<0.18'") from None
    finder = PackageFinder(index_urls=index_urls, find_links=find_links, no_binary=[name],
                           session=_capped_client(index_urls))
    try:
        packages = [p for p in finder.find_matches(f"{name}=={version}")
                    if p.link.filename.lower().endswith(SDIST_SUFFIXES) and not p.link.is_vcs
                    and p.link.url.lower().startswith(("https://", "http://", "file://"))]
    except (httpx.HTTPError, ValueError, OSError) as error:  # an unreachable or malformed index
        raise SourceError(f"no sdist of {name}=={version}: {type(error).__name__}: {str(error)[:160]}") from None
    if not packages:
        raise SourceError(f"no sdist of {name}=={version} on {', '.join(index_urls + find_links) or 'no index'}")
    link = packages[0].link
    if link.url.lower().startswith("file://") and (link.comes_from or "").lower().startswith(("http://", "https://")):
        raise SourceError(f"{link.filename}: an index on the network ({link.comes_from}) points at a file of this "
                          "machine; refused")
    archive = Path(folder) / Path(link.filename).name
    _download(finder.session, link, archive, timeout, httpx.HTTPError)
    return str(archive)


def _capped_client(index_urls: list[str]):
    """unearth's own client (file:// too, the indexes' credentials), whose ``get`` (how it reads an index page)
    holds at most :data:`MAX_INDEX_PAGE_BYTES` of the page, as decoded: a gzip bomb stops at the cap, not at the
    child's address-space limit. unearth reads a page whole with ``get`` and offers no limit of its own."""
    import httpx
    from unearth.auth import MultiDomainBasicAuth
    from unearth.fetchers import PyPIClient

    class CappedClient(PyPIClient):
        def get(self, url, **kwargs):
            with self.stream("GET", url, **kwargs) as response:
                held, size = [], 0
                for block in response.iter_bytes():
                    size += len(block)
                    if size > MAX_INDEX_PAGE_BYTES:
                        raise SourceError(f"the index page {one_line(str(url))[:120]} is over "
                                          f"{MAX_INDEX_PAGE_BYTES >> 20} MB")
                    held.append(block)
            # the bytes are decoded already: the rebuilt response must not decode them again
            headers = [(k, v) for k, v in response.headers.multi_items()
                       if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
            return httpx.Response(response.status_code, headers=headers, content=b"".join(held),
                                  request=response.request, history=response.history)

    client = CappedClient()
    client.auth = MultiDomainBasicAuth(index_urls=index_urls)
    return client


def _download(session, link, path: Path, timeout: float, http_error: type[Exception]) -> None:
    """``link`` to ``path``, at most :data:`MAX_SDIST_BYTES`, checked against the index's hash when it gives one."""
    listed = {name.lower(): values for name, values in (link.hash_option or {}).items()}
    # unearth reads only the hash names it knows from a link's #fragment: any other name is a hash it dropped
    for name, values in parse_qs(urlsplit(link.url).fragment).items():
        if name.lower() not in ("egg", "subdirectory"):
            listed.setdefault(name.lower(), values)
    expected = {name: values for name, values in listed.items() if name in hashlib.algorithms_guaranteed}
    if listed and not expected:
        raise SourceError(f"{link.filename}: the index lists only {', '.join(sorted(listed))} hashes, which "
                          "cannot be checked here")
    name = "sha256" if "sha256" in expected else next(iter(expected), None)
    digest = hashlib.new(name) if name else None
    written = 0
    try:
        with session.stream("GET", link.url_without_fragment, timeout=timeout) as response, open(path, "wb") as out:
            response.raise_for_status()
            for block in response.iter_bytes():
                written += len(block)
                if written > MAX_SDIST_BYTES:
                    raise SourceError(f"{link.filename} is over {MAX_SDIST_BYTES >> 20} MB")
                if digest:
                    digest.update(block)
                out.write(block)
    except (http_error, OSError) as error:  # transport and status errors, a file:// link that is not there
        raise SourceError(f"cannot download {link.filename}: {type(error).__name__}: {str(error)[:160]}") from None
    if digest and digest.hexdigest() not in [value.lower() for value in expected[name]]:
        raise SourceError(f"{link.filename}: its {name} is not the one the index lists; not the archive it names")


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _copy_clean(src: Path, dst: Path) -> None:
    """Copy a source tree without VCS folders, bytecode, build outputs, egg-info or symlinks out of it."""
    def ignore(directory: str, names: list[str]) -> set[str]:
        skipped = set()
        for name in names:
            path = Path(directory) / name
            if name in SKIP_DIRS or name.endswith((".egg-info", ".pyc", ".pyo", ".so", ".pyd")) or path.is_symlink():
                skipped.add(name)
        return skipped

    shutil.copytree(src, dst, ignore=ignore, symlinks=False)


def spec_name(spec: str) -> str:
    """The repository's name for ``name==version`` or a local directory (what splits and records call it)."""
    parsed = parse_spec(spec)
    if parsed:
        return parsed[0]
    try:
        name = Path(spec).expanduser().resolve().name
    except (OSError, ValueError, RuntimeError):
        name = spec.rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)[:100]


# What a package's own files can make copying, reading or installing them raise (a conftest.py that is a folder or
# not UTF-8, a marker that cannot be evaluated, a tree too deep): a SourceError for that package, not a crash.
TREE_ERRORS = (OSError, shutil.Error, ValueError, RecursionError)


def prepare_repo(spec: str, root: Path | None = None, pins: list[str] | None = None,
                 sdist_sha256: str = "") -> tuple[Source, Path]:
    """``(source, repository directory)`` for ``name==version`` or a local directory, in the cache.

    With a manifest's ``sdist_sha256`` the archive must be that one; with its ``pins`` (``name==version`` of the
    requirements it was built with) exactly those are installed, none of their dependencies, and a repository
    already in the cache must hold them. Raises :class:`SourceError` with a one-line reason (no sdist, not an
    archive, a different archive or requirements, no test files)."""
    root = root or cache_root()
    parsed = parse_spec(spec)
    if parsed is None:
        local = Path(spec).expanduser()
        try:
            is_dir = local.is_dir()
        except (OSError, ValueError):  # a name too long for the file system, a NUL byte
            is_dir = False
        if not is_dir:
            raise SourceError(f"{spec[:200]!r} is neither NAME==VERSION nor a directory")
        if root.resolve().is_relative_to(local.resolve()):
            raise SourceError(f"{spec} holds the cache ({root}): copying it would copy the cache into itself")
        try:
            tree = _tree_digest(local)
        except TREE_ERRORS as error:
            raise SourceError(f"{spec}: {type(error).__name__}: {error}") from None
        source = Source(name=spec_name(spec), version=f"local-{tree[:12]}", spec=str(local.resolve()))
        repo = root / "repos" / LAYOUT / source.key
        if not repo.is_dir():
            staging = Path(tempfile.mkdtemp(prefix=f".{source.key}-", dir=_mkdir(root / "repos" / LAYOUT)))
            try:
                _copy_clean(local, staging / "repo")
                write_path_conftest(staging / "repo")
                os.replace(staging / "repo", repo)
            except TREE_ERRORS as error:
                raise SourceError(f"{spec}: {type(error).__name__}: {error}") from None
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    else:
        name, version = parsed
        archive = fetch_sdist(name, version, root)
        source = Source(name=name, version=version, spec=spec, sdist_sha256=sha256_file(archive))
        if sdist_sha256 and source.sdist_sha256 != sdist_sha256:
            raise SourceError(f"the sdist of {spec} ({archive.name}) has sha256 {source.sdist_sha256[:16]}..., the "
                              f"manifest's {sdist_sha256[:16]}...: not the archive the set was made from")
        repo = root / "repos" / LAYOUT / source.key
        if not repo.is_dir():
            staging = Path(tempfile.mkdtemp(prefix=f".{source.key}-", dir=_mkdir(root / "repos" / LAYOUT)))
            try:
                try:
                    run_isolated("turngym.envs.swe.synth.isolated:unpack", str(archive), str(staging / "x"),
                                 timeout=UNPACK_SECONDS, what=f"unpacking {archive.name}")
                except IsolatedFailure as failure:
                    raise SourceError(str(failure)) from None
                entries = list((staging / "x").iterdir())
                if not entries:
                    raise SourceError(f"{archive.name} is empty")
                top = entries[0] if len(entries) == 1 and entries[0].is_dir() else staging / "x"
                try:
                    _copy_clean(top, staging / "repo")
                    if pins is None:
                        install_requirements(staging / "repo", requirements(top))
                    else:
                        install_requirements(staging / "repo", pins, exact=True)
                    write_own_metadata(top, staging / "repo", source)
                    write_path_conftest(staging / "repo")
                except TREE_ERRORS as error:
                    raise SourceError(f"{source.key}: {type(error).__name__}: {error}") from None
                os.replace(staging / "repo", repo)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    if pins is not None and installed_requirements(repo) != sorted(pins):
        raise SourceError(f"{source.key}: the cached repository's requirements {installed_requirements(repo)} are not "
                          f"the manifest's {sorted(pins)}; remove {repo} to install them again")
    if not test_files(repo):
        raise SourceError(f"{source.key} ships no test files (test_*.py or *_test.py)")
    return source, repo


OWN_METADATA_INSTALLER = "turngym-synth"  # the INSTALLER of the package's own dist-info: not a requirement


def write_own_metadata(top: Path, repo: Path, source: Source) -> None:
    """The package's own ``NAME-VERSION.dist-info/METADATA`` (its sdist's ``PKG-INFO``, the same format) in the
    read-only requirements folder, so ``importlib.metadata.version(NAME)`` at import or in a test finds the
    version an install would have recorded (humanize 4.9.0 reads it at import and dropped at baseline without it).
    Its ``INSTALLER`` marks it as no requirement of the manifest's."""
    pkg_info = top / "PKG-INFO"
    if not pkg_info.is_file():
        return
    folder = repo / DEPS_DIR / f"{re.sub(r'[^A-Za-z0-9.]+', '_', source.name)}-{source.version}.dist-info"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(pkg_info, folder / "METADATA")
    (folder / "INSTALLER").write_text(OWN_METADATA_INSTALLER + "\n", encoding="utf-8")


def installed_requirements(repo: Path) -> list[str]:
    """``name==version`` of every distribution installed in the repository's requirements folder (the pins a
    manifest records), the package's own dist-info (:func:`write_own_metadata`) left out."""
    found = []
    for metadata in sorted((repo / DEPS_DIR).glob("*.dist-info/METADATA")):
        installer = metadata.with_name("INSTALLER")
        if installer.is_file() and installer.read_text(encoding="utf-8", errors="replace").strip() == \
                OWN_METADATA_INSTALLER:
            continue
        fields = dict(line.split(": ", 1) for line in metadata.read_text(encoding="utf-8", errors="replace")
                      .split("\n\n", 1)[0].splitlines() if ": " in line)
        if "Name" in fields and "Version" in fields:
            found.append(f"{fields['Name'].strip()}=={fields['Version'].strip()}")
    return sorted(found)


def _tree_digest(directory: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(directory.rglob("*")):
        if path.is_file() and not (set(path.relative_to(directory).parts) & SKIP_DIRS):
            digest.update(path.relative_to(directory).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _walk_py(repo: Path) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(repo):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info"))
        for filename in sorted(filenames):
            if filename.endswith(".py"):
                found.append((Path(dirpath) / filename).relative_to(repo).as_posix())
    return found


def is_test_path(path: str) -> bool:
    """A test file or a file under a test directory (what grading protects), or a conftest.py."""
    parts = path.split("/")
    name = parts[-1]
    if name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py") or name == "tests.py":
        return True
    return in_test_directory(path)


def in_test_directory(path: str) -> bool:
    """A file under a test directory (``tests/helpers.py``): the grading restores a graded test file's directory."""
    return any(part in TEST_DIR_NAMES or part.startswith("test") for part in path.split("/")[:-1])


def test_files(repo: Path) -> list[str]:
    return [p for p in _walk_py(repo) if is_test_path(p) and p.rsplit("/", 1)[-1] != "conftest.py"
            and (p.rsplit("/", 1)[-1].startswith("test") or p.endswith("_test.py"))]


def source_files(repo: Path) -> list[str]:
    """Python files a bug may go in: not tests, not set-up scripts, docs or examples."""
    return [p for p in _walk_py(repo) if not is_test_path(p) and p.split("/")[0] not in NOT_SOURCE_DIRS
            and p not in ("setup.py", "noxfile.py", "fabfile.py", "tasks.py", "conf.py")]


def write_path_conftest(repo: Path) -> None:
    """Make the package (root or ``src/``) and the installed requirements importable by pytest in the sandbox,
    the way installing the package would, through the root ``conftest.py`` (see :data:`CONFTEST_HEAD`)."""
    entries = [e for e in python_path(repo).split(":") if e]
    conftest = repo / "conftest.py"
    old = conftest.read_text(encoding="utf-8") if conftest.is_file() else ""
    if CONFTEST_MARK in old:
        return
    head = CONFTEST_HEAD.replace("{entries!r}", repr(entries))
    conftest.write_text(head + ("\n" + old if old else ""), encoding="utf-8")


def needs_pytest(repo: Path) -> bool:
    """Whether the tests need the root conftest.py's paths (src layout, installed requirements): then the runner's
    pytest mode grades them (its unittest mode reads no conftest.py)."""
    return bool(python_path(repo))


def python_path(repo: Path) -> str:
    """Extra sys.path entries the tests need, relative to the root and ``:``-separated: ``src`` for a src
    layout, and the dependencies' folder when there is one."""
    entries = []
    if any((repo / "src").glob("*/__init__.py")) or any((repo / "src").glob("*.py")):
        entries.append("src")
    if (repo / DEPS_DIR).is_dir():
        entries.append(DEPS_DIR)
    return ":".join(entries)


TEST_EXTRAS = ("test", "tests", "testing")
SANDBOX_PYTHON = {**default_environment(), "python_version": "3.11", "python_full_version": "3.11.2",
                  "implementation_name": "cpython", "platform_python_implementation": "CPython"}  # for markers
# The sandbox's own pytest runs every suite (turngym's grading plugin is checked against it), so pytest and its
# plugins are never installed next to the tests.
NOT_INSTALLED = re.compile(r"^(pytest|pytest[-_].*|coverage|tox|nox|pre-commit|mypy|flake8|ruff|black)$",
                           re.IGNORECASE)


def _declared(top: Path) -> list[str]:
    """Requirement lines of an unpacked sdist: PKG-INFO's ``Requires-Dist``, else an ``*.egg-info/requires.txt``
    (older setuptools), its ``[extra]`` / ``[extra:marker]`` / ``[:marker]`` sections turned into markers."""
    info = top / "PKG-INFO"
    lines = info.read_text(encoding="utf-8", errors="replace").splitlines() if info.is_file() else []
    found = [line.split(":", 1)[1].strip() for line in lines if line.startswith("Requires-Dist:")]
    if found:
        return found
    for requires in sorted(top.glob("*.egg-info/requires.txt")) + sorted(top.glob("src/*.egg-info/requires.txt")):
        marker = ""
        for raw in requires.read_text(encoding="utf-8", errors="replace").splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("[") and line.endswith("]"):
                extra, _, condition = line[1:-1].partition(":")
                parts = ([f'extra == "{extra}"'] if extra else []) + ([f"({condition})"] if condition else [])
                marker = " and ".join(parts)
                continue
            found.append(f"{line}; {marker}" if marker else line)
        if found:
            break
    return found


def requirements(top: Path) -> list[str]:
    """The runtime requirements and the test extras of an unpacked sdist, for the sandbox's Python 3.11."""
    found = []
    for line in _declared(top):
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if NOT_INSTALLED.match(requirement.name):
            continue
        marker = requirement.marker
        wanted = marker is None or marker.evaluate({**SANDBOX_PYTHON, "extra": ""}) or any(
            marker.evaluate({**SANDBOX_PYTHON, "extra": extra}) for extra in TEST_EXTRAS)
        if wanted:
            found.append(_plain_requirement(line))
    return sorted(set(found))


def install_requirements(repo: Path, wanted: list[str], timeout: float = 600.0, exact: bool = False) -> None:
    """Install ``wanted`` and their dependencies for the sandbox's ``/usr/bin/python3`` into
    ``repo/.turngym-deps`` (the sandbox has no network at test time, so this happens now). ``exact``: these pins
    only, none of their dependencies (a manifest's list is already complete).

    No requirement's code runs here: pip installs from wheels only (``--only-binary :all:``; building an sdist runs
    it) and with ``--no-deps``, one round of requirements at a time, since pip would build a dependency given as a
    direct URL (``evil @ file:///...``, even one a wheel declares) whatever ``--only-binary`` says. Each round's
    dependencies are read from the wheels just installed; a direct URL anywhere is refused, and so is a set whose
    installed versions do not satisfy every requirement among them."""
    if not wanted:
        return
    deadline, target, done = time.monotonic() + timeout, repo / DEPS_DIR, set()
    pending = [_plain_requirement(line) for line in wanted]
    extras: dict[str, set[str]] = {}  # extras asked of each distribution, whose dependencies count too
    while pending:
        _pip_install(pending, target, deadline)
        for line in pending:
            requirement = Requirement(line)
            done.add(canonicalize_name(requirement.name))
            extras.setdefault(canonicalize_name(requirement.name), set()).update(requirement.extras)
        if exact:
            break
        while True:  # an extra asked of an installed wheel may add its own dependencies
            found, before = _dependencies(target, extras), {name: set(asked) for name, asked in extras.items()}
            for line in found:
                requirement = Requirement(line)
                extras.setdefault(canonicalize_name(requirement.name), set()).update(requirement.extras)
            if extras == before:
                break
        installed = {canonicalize_name(name) for name in _installed_versions(target)}
        pending = sorted({line for line in found if canonicalize_name(Requirement(line).name) not in done | installed})
    shutil.rmtree(target / "bin", ignore_errors=True)
    if not exact:
        _check_satisfied(target, extras)


def _plain_requirement(line: str) -> str:
    """``line`` as a plain requirement (name, extras, version specifiers), or :class:`SourceError` for a direct
    URL, which pip would fetch and build outside any sandbox."""
    try:
        requirement = Requirement(line)
    except InvalidRequirement:
        raise SourceError(f"not a requirement: {line[:120]!r}") from None
    if requirement.url:
        raise SourceError(f"{requirement.name} is required from a direct URL ({requirement.url[:100]}); only "
                          "wheels from the index are installed (building it would run its code here)")
    requirement.marker = None
    return str(requirement)


def _pip_install(requirements_: list[str], target: Path, deadline: float) -> None:
    left = deadline - time.monotonic()
    command = ["/usr/bin/python3", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
               "--no-warn-script-location", "--only-binary", ":all:", "--no-deps", "--target", str(target),
               *requirements_]
    with tempfile.TemporaryDirectory(prefix="turngym-pip-") as empty:  # a requirement is never a file found here
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=max(left, 1), check=False,
                                  cwd=empty)
        except subprocess.TimeoutExpired:
            raise SourceError("installing the tests' requirements took too long") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise SourceError(f"cannot install the tests' requirements {requirements_}: {last[:200]}")


def _installed_versions(target: Path) -> dict[str, str]:
    return {line.split("==", 1)[0]: line.split("==", 1)[1] for line in installed_requirements(target.parent)}


def _dependencies(target: Path, extras: dict[str, set[str]]) -> list[str]:
    """The requirements the installed wheels declare for the sandbox's Python, with the ``extras`` asked of each
    (markers evaluated; a direct URL is :class:`SourceError`), as plain requirement lines."""
    found = []
    for dist in importlib.metadata.distributions(path=[str(target)]):
        asked = {""} | extras.get(canonicalize_name(dist.metadata["Name"] or ""), set())
        for line in dist.requires or ():
            marker = Requirement(line).marker
            if marker is None or any(marker.evaluate({**SANDBOX_PYTHON, "extra": extra}) for extra in asked):
                found.append(_plain_requirement(line))
    return sorted(set(found))


def _check_satisfied(target: Path, extras: dict[str, set[str]]) -> None:
    versions = {canonicalize_name(name): version for name, version in _installed_versions(target).items()}
    for line in _dependencies(target, extras):
        requirement = Requirement(line)
        have = versions.get(canonicalize_name(requirement.name))
        if have is None or not requirement.specifier.contains(have, prereleases=True):
            raise SourceError(f"the tests' requirements conflict: {line} is needed, {have or 'nothing'} is installed")
