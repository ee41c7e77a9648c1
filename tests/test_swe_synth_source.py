"""A hostile package given to `turngym swe synth`: none of its code runs on this machine (the sdist is found and
downloaded as a file, where ``pip download`` would build its metadata, running its ``setup.py``; the tests'
requirements install from wheels only), an archive that would unpack too large is refused, and a file too deep for
Python's parser costs its own bugs, not the package. Hermetic: a local find-links folder and a file:// index."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from turngym.envs.swe.synth.source import SourceError, fetch_sdist, install_requirements, prepare_repo, registry_sources


def hostile_sdist(folder: Path, name: str, marker: Path, requires=(), extra_files=None) -> Path:
    """``name-1.0.tar.gz`` whose setup.py writes ``marker`` when anything builds it (``requires``: its
    Requires-Dist lines; ``extra_files``: more files, path -> bytes)."""
    tree = folder / "src" / f"{name}-1.0"
    tree.mkdir(parents=True)
    (tree / "setup.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
                                   f"from setuptools import setup\nsetup(name={name!r}, version='1.0')\n")
    (tree / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
                                   + "".join(f"Requires-Dist: {line}\n" for line in requires))
    for relative, data in (extra_files or {}).items():
        (tree / relative).parent.mkdir(parents=True, exist_ok=True)
        (tree / relative).write_bytes(data)
    (tree / "tests").mkdir()
    (tree / "tests" / "test_it.py").write_text("def test_it():\n    assert True\n")
    folder.mkdir(parents=True, exist_ok=True)
    archive = folder / f"{name}-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname=tree.name)
    return archive


def test_the_sdist_is_fetched_without_running_its_setup_py(tmp_path):
    marker = tmp_path / "setup-py-ran"
    archive = hostile_sdist(tmp_path / "links", "hostilepkg", marker)
    got = fetch_sdist("hostilepkg", "1.0", tmp_path / "cache", sources=([], [str(tmp_path / "links")]))
    assert got.read_bytes() == archive.read_bytes()
    assert not marker.exists(), "the sdist's setup.py ran on the host"
    assert fetch_sdist("hostilepkg", "1.0", tmp_path / "cache", sources=([], [])) == got  # cached: no index needed


def test_an_index_whose_hash_does_not_match_the_archive_is_refused(tmp_path):
    archive = hostile_sdist(tmp_path / "files", "listedpkg", tmp_path / "ran")
    page = tmp_path / "simple" / "listedpkg"
    page.mkdir(parents=True)
    good = hashlib.sha256(archive.read_bytes()).hexdigest()
    page.joinpath("index.html").write_text(
        f'<html><body><a href="{archive.as_uri()}#sha256={"0" * 64}">{archive.name}</a></body></html>')
    index = (tmp_path / "simple").as_uri()
    with pytest.raises(SourceError, match="sha256 is not the one the index lists"):
        fetch_sdist("listedpkg", "1.0", tmp_path / "cache", sources=([index], []))
    assert not list((tmp_path / "cache" / "sdists").glob("listedpkg*/*")), "a refused archive stays out of the cache"
    page.joinpath("index.html").write_text(
        f'<html><body><a href="{archive.as_uri()}#sha256={good}">{archive.name}</a></body></html>')
    assert fetch_sdist("listedpkg", "1.0", tmp_path / "cache", sources=([index], [])).read_bytes() == \
        archive.read_bytes()


def test_a_hash_the_finder_does_not_know_is_refused_not_skipped(tmp_path):
    """unearth keeps only the hash names it knows from a link's #fragment; a name it dropped is still a hash the
    index lists, and one that cannot be checked here refuses the archive (as in a JSON index page)."""
    archive = hostile_sdist(tmp_path / "files", "oddhash", tmp_path / "ran")
    page = tmp_path / "simple" / "oddhash"
    page.mkdir(parents=True)
    page.joinpath("index.html").write_text(
        f'<html><body><a href="{archive.as_uri()}#whirlpool={"0" * 128}">{archive.name}</a></body></html>')
    with pytest.raises(SourceError, match="lists only whirlpool hashes, which cannot be checked here"):
        fetch_sdist("oddhash", "1.0", tmp_path / "cache", sources=([(tmp_path / "simple").as_uri()], []))
    sha3 = hashlib.sha3_256(archive.read_bytes()).hexdigest()  # one hashlib knows and unearth does not: checked
    page.joinpath("index.html").write_text(
        f'<html><body><a href="{archive.as_uri()}#sha3_256={"0" * 64}">{archive.name}</a></body></html>')
    with pytest.raises(SourceError, match="sha3_256 is not the one the index lists"):
        fetch_sdist("oddhash", "1.0", tmp_path / "cache", sources=([(tmp_path / "simple").as_uri()], []))
    page.joinpath("index.html").write_text(
        f'<html><body><a href="{archive.as_uri()}#sha3_256={sha3}">{archive.name}</a></body></html>')
    assert fetch_sdist("oddhash", "1.0", tmp_path / "cache",
                       sources=([(tmp_path / "simple").as_uri()], [])).read_bytes() == archive.read_bytes()


def test_an_index_on_the_network_cannot_point_at_a_file_of_this_machine(tmp_path):
    """An http index page whose link is file:///...: the host would copy a local file of its own into the cache."""
    import threading
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    local = hostile_sdist(tmp_path / "private", "localfile", tmp_path / "ran")
    page = tmp_path / "served" / "simple" / "localfile"
    page.mkdir(parents=True)
    page.joinpath("index.html").write_text(f'<html><body><a href="{local.as_uri()}">{local.name}</a></body></html>')
    handler = partial(SimpleHTTPRequestHandler, directory=str(tmp_path / "served"))
    handler.log_message = lambda *args: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        index = f"http://127.0.0.1:{server.server_address[1]}/simple"
        with pytest.raises(SourceError, match=r"an index on the network \(http://127\.0\.0\.1.*\) points at a file "
                                              r"of this machine; refused"):
            fetch_sdist("localfile", "1.0", tmp_path / "cache", sources=([index], []))
    finally:
        server.shutdown()
    assert not list((tmp_path / "cache" / "sdists").glob("localfile*/*"))


def test_an_index_page_is_held_only_up_to_its_cap_as_decoded(tmp_path):
    """A gzip page that inflates past the cap is refused there, not read whole (the red team's 1.5 MB page inflated
    to 1.5 GB in the child); a page under it, gzipped, is read as before."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from turngym.envs.swe.synth import source

    archive = hostile_sdist(tmp_path / "files", "gzpage", tmp_path / "ran")
    page = f'<html><body><a href="/f/{archive.name}">{archive.name}</a></body></html>'.encode()

    class Handler(BaseHTTPRequestHandler):
        padding = 0

        def do_GET(self):
            if self.path.startswith("/f/"):
                body, extra = archive.read_bytes(), []
            else:
                body, extra = gzip.compress(page + b" " * Handler.padding), [("Content-Encoding", "gzip")]
            self.send_response(200)
            for key, value in [("Content-Type", "text/html"), ("Content-Length", str(len(body))), *extra]:
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    index = f"http://127.0.0.1:{server.server_address[1]}/simple"
    try:
        assert fetch_sdist("gzpage", "1.0", tmp_path / "a", sources=([index], [])).read_bytes() == \
            archive.read_bytes()
        Handler.padding = source.MAX_INDEX_PAGE_BYTES  # about 64 kB gzipped
        with pytest.raises(SourceError, match=r"the index page http://127\.0\.0\.1:\d+/simple/gzpage/ is over 64 MB"):
            fetch_sdist("gzpage", "1.0", tmp_path / "b", sources=([index], []))
    finally:
        server.shutdown()


def test_a_version_with_no_sdist_is_one_line_naming_where_it_looked(tmp_path):
    hostile_sdist(tmp_path / "links", "onlyone", tmp_path / "ran")
    with pytest.raises(SourceError, match=r"no sdist of onlyone==2\.0 on .*links"):
        fetch_sdist("onlyone", "2.0", tmp_path / "cache", sources=([], [str(tmp_path / "links")]))


def test_a_requirement_with_only_an_sdist_is_refused_without_building_it(tmp_path, monkeypatch):
    marker = tmp_path / "setup-py-ran"
    hostile_sdist(tmp_path / "links", "sdistonly", marker)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "links"))
    (tmp_path / "repo").mkdir()
    with pytest.raises(SourceError, match="cannot install the tests' requirements"):
        install_requirements(tmp_path / "repo", ["sdistonly==1.0"])
    assert not marker.exists(), "a requirement's setup.py ran on the host"


def test_unpacking_makes_only_regular_files_and_folders_inside_and_counts_real_bytes(tmp_path, monkeypatch):
    """Links, devices and FIFOs are left out (a hard link is no full copy), a member that climbs out is refused, and
    the caps count the bytes written, not headers that may lie."""
    from turngym.envs.swe.synth import isolated

    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w") as tar:
        for name, data in (("pkg-1.0/tests/test_it.py", b"def test_it():\n    pass\n"), ("pkg-1.0/big", b"0" * 5000)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for kind, link in ((tarfile.SYMTYPE, "/etc/passwd"), (tarfile.LNKTYPE, "pkg-1.0/big"), (tarfile.FIFOTYPE, "")):
            info = tarfile.TarInfo(f"pkg-1.0/odd-{kind.decode()}")
            info.type, info.linkname = kind, link
            tar.addfile(info)
    isolated.unpack(str(archive), str(tmp_path / "out"))
    made = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*"))
    assert made == ["pkg-1.0", "pkg-1.0/big", "pkg-1.0/tests", "pkg-1.0/tests/test_it.py"]
    monkeypatch.setattr(isolated, "MAX_UNPACKED_BYTES", 4000)
    with pytest.raises(ValueError, match="unpacks to over"):
        isolated.unpack(str(archive), str(tmp_path / "again"))
    monkeypatch.setattr(isolated, "MAX_UNPACKED_BYTES", 10 ** 9)
    monkeypatch.setattr(isolated, "MAX_MEMBERS", 2)
    with pytest.raises(ValueError, match="over 2 files"):
        isolated.unpack(str(archive), str(tmp_path / "third"))
    climbing = tmp_path / "b.zip"
    with zipfile.ZipFile(climbing, "w") as handle:
        handle.writestr("pkg-1.0/../../outside.py", "x = 1\n")
    with pytest.raises(ValueError, match="would leave the archive's folder"):
        isolated.unpack(str(climbing), str(tmp_path / "zip"))
    assert not (tmp_path / "outside.py").exists()


def test_a_hostile_archive_is_one_line_from_its_own_process(tmp_path, monkeypatch):
    """A truncated archive (EOFError in tarfile) or one climbing out comes back as one SourceError line; the
    unpacking ran in a child process, whose limits and deadline a crafted archive cannot get past."""
    for name, content in (("cut-1.0.tar.gz", gzip.compress(b"x" * 10_000)[:200]), ("out-1.0.tar.gz", None)):
        links = tmp_path / name / "links"
        links.mkdir(parents=True)
        if content is None:
            with tarfile.open(links / name, "w:gz") as tar:
                info = tarfile.TarInfo("../escaped.py")
                info.size = 2
                tar.addfile(info, io.BytesIO(b"x\n"))
        else:
            (links / name).write_bytes(content)
        monkeypatch.setenv("PIP_NO_INDEX", "1")
        monkeypatch.setenv("PIP_FIND_LINKS", str(links))
        with pytest.raises(SourceError, match=f"unpacking {name}") as caught:
            prepare_repo(name.rsplit("-", 1)[0] + "==1.0", root=tmp_path / name / "cache")
        assert "\n" not in str(caught.value)
    assert not list(tmp_path.rglob("escaped.py"))


def test_a_link_that_never_ends_is_cut_at_the_deadline(tmp_path):
    """A FIFO named like an sdist in a find-links folder: opening it blocks forever, in the child; the parent cuts
    it at the deadline and says so in one line."""
    links = tmp_path / "links"
    links.mkdir()
    os.mkfifo(links / "stuck-1.0.tar.gz")
    with pytest.raises(SourceError, match=r"fetching the sdist of stuck==1\.0 took over 5 s"):
        fetch_sdist("stuck", "1.0", tmp_path / "cache", timeout=5, sources=([], [str(links)]))


def test_a_direct_url_requirement_is_refused_not_built(tmp_path, monkeypatch):
    """pip builds a requirement given as a direct URL whatever --only-binary says, so a package (or a wheel among
    its dependencies) that declares one is refused before pip sees it, and the URL's sdist never runs."""
    marker = tmp_path / "setup-py-ran"
    served = hostile_sdist(tmp_path / "elsewhere", "evildep", marker)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    links = tmp_path / "links"
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    hostile_sdist(links, "asksforurl", tmp_path / "unused", requires=[f"evildep @ {served.as_uri()}"])
    with pytest.raises(SourceError, match="evildep is required from a direct URL"):
        prepare_repo("asksforurl==1.0", root=tmp_path / "cache")
    wheel = links / "innocent-1.0-py3-none-any.whl"
    files = {"innocent/__init__.py": b"", "innocent-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\n"
             b"Tag: py3-none-any\n", "innocent-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: innocent\n"
             f"Version: 1.0\nRequires-Dist: evildep @ {served.as_uri()}\n".encode()}
    record = "".join(f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},"
                     f"{len(d)}\n" for n, d in files.items()) + "innocent-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as handle:
        for name, data in {**files, "innocent-1.0.dist-info/RECORD": record.encode()}.items():
            handle.writestr(name, data)
    hostile_sdist(links, "asksinnocent", tmp_path / "unused", requires=["innocent"])
    with pytest.raises(SourceError, match="evildep is required from a direct URL"):
        prepare_repo("asksinnocent==1.0", root=tmp_path / "cache")
    assert not marker.exists(), "a requirement's code ran on the host"


def test_a_broken_tree_is_a_source_error_not_a_crash(tmp_path, monkeypatch):
    """A conftest.py that is a folder (IsADirectoryError) or not UTF-8, a marker that cannot be evaluated: each
    was an exception out of prepare_repo that stopped the whole run."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    links = tmp_path / "links"
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    cases = {"dirconftest": {"conftest.py/x.txt": b"x"}, "latinconftest": {"conftest.py": b"# \xe9\xff\n"}}
    for name, extra in cases.items():
        hostile_sdist(links, name, tmp_path / "unused", extra_files=extra)
        with pytest.raises(SourceError, match=name):
            prepare_repo(f"{name}==1.0", root=tmp_path / "cache")
    hostile_sdist(links, "badmarker", tmp_path / "unused", requires=['six; python_version > "x" and os_name ~= "1"'])
    with pytest.raises(SourceError):
        prepare_repo("badmarker==1.0", root=tmp_path / "cache")


def test_a_registry_spec_becomes_a_repository_from_pips_configured_sources_without_running_it(tmp_path, monkeypatch):
    """``NAME==VERSION`` through the pipeline's own entry, with pip's sources from its environment variables."""
    marker = tmp_path / "setup-py-ran"
    hostile_sdist(tmp_path / "links", "viapip", marker)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "links"))
    assert registry_sources() == ([], [str(tmp_path / "links")])
    source, repo = prepare_repo("viapip==1.0", root=tmp_path / "cache")
    assert source.key == "viapip-1.0" and (repo / "tests" / "test_it.py").is_file() and (repo / "setup.py").is_file()
    assert not marker.exists(), "the sdist's setup.py ran on the host"
    monkeypatch.setenv("PIP_NO_INDEX", "Off")
    monkeypatch.setenv("PIP_INDEX_URL", "https://index.invalid/simple/")
    assert registry_sources()[0][0] == "https://index.invalid/simple/"
    monkeypatch.setenv("PIP_NO_INDEX", "maybe")  # pip refuses it; read as "no", it would reach the indexes
    with pytest.raises(SourceError, match="pip's no-index is 'maybe', which is neither yes nor no"):
        registry_sources()


def test_a_source_file_too_deep_for_pythons_parser_yields_no_bug_not_a_dropped_package():
    """``1 + 1 + ...`` 200,000 terms long makes ``ast.parse`` raise RecursionError, not SyntaxError: that file
    gives no span to mutate, and the package's other files still do."""
    from turngym.envs.swe.synth.modifiers import spans

    assert spans("deep.py", "x = " + " + ".join(["1"] * 200_000) + "\n") == []
    assert [s.qualname for s in spans("fine.py", "def f():\n    return 1\n")] == ["f"]


def test_a_source_file_over_the_size_limit_gets_no_bug(tmp_path, monkeypatch):
    from turngym.envs.swe.synth import pipeline

    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    body = "def f(x):\n    if x > 1:\n        return x + 1\n    return x - 1\n"
    (repo / "pkg" / "small.py").write_text(body)
    (repo / "pkg" / "big.py").write_text(body + "#" * 2000 + "\n")
    base = {"trace": {"tests/test_x.py::test_f": [["pkg/small.py", 1], ["pkg/big.py", 1]]}}
    monkeypatch.setattr(pipeline, "MAX_SOURCE_BYTES", 1000)
    mutations, _, units = pipeline.candidate_mutations(repo, base, "pkg-1", pipeline.SynthConfig(max_candidates=50))
    assert units == 1 and mutations and {m.path for m in mutations} == {"pkg/small.py"}


def test_a_local_folder_that_holds_the_cache_is_refused_and_odd_specs_are_one_line(tmp_path):
    home = tmp_path / "home"
    (home / "proj").mkdir(parents=True)
    with pytest.raises(SourceError, match="holds the cache"):
        prepare_repo(str(home), root=home / ".cache" / "turngym" / "swe-synth")
    assert not (home / ".cache").exists() or not list((home / ".cache").rglob("proj"))
    with pytest.raises(SourceError, match="neither NAME==VERSION nor a directory"):
        prepare_repo("pkg==" + "1" * 5000, root=tmp_path / "cache")
