"""A hostile package given to `turngym swe synth`: none of its code runs on this machine (the sdist is found and
downloaded as a file, where ``pip download`` would build its metadata, running its ``setup.py``; the tests'
requirements install from wheels only), an archive that would unpack too large is refused, and a file too deep for
Python's parser costs its own bugs, not the package. Hermetic: a local find-links folder and a file:// index."""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path

import pytest

from turngym.envs.swe.synth.source import SourceError, fetch_sdist, install_requirements, prepare_repo, registry_sources


def hostile_sdist(folder: Path, name: str, marker: Path) -> Path:
    """``name-1.0.tar.gz`` whose setup.py writes ``marker`` when anything builds it."""
    tree = folder / "src" / f"{name}-1.0"
    tree.mkdir(parents=True)
    (tree / "setup.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
                                   f"from setuptools import setup\nsetup(name={name!r}, version='1.0')\n")
    (tree / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (tree / "tests").mkdir()
    (tree / "tests" / "test_it.py").write_text("def test_it():\n    assert True\n")
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


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_an_archive_that_unpacks_too_large_is_refused_before_unpacking(kind, tmp_path, monkeypatch):
    import shutil

    from turngym.envs.swe.synth import source

    tree = tmp_path / "src" / "big-1.0"
    tree.mkdir(parents=True)
    (tree / "data.txt").write_bytes(b"0" * 100_000)  # compresses to almost nothing
    archive = Path(shutil.make_archive(str(tmp_path / "big-1.0"), "gztar" if kind == "tar.gz" else "zip",
                                       tmp_path / "src"))
    source.check_unpacked_size(archive)  # within the limits
    monkeypatch.setattr(source, "MAX_UNPACKED_BYTES", 50_000)
    with pytest.raises(SourceError, match="unpacks to over"):
        source.check_unpacked_size(archive)
    monkeypatch.setattr(source, "MAX_UNPACKED_BYTES", 10 ** 9)
    monkeypatch.setattr(source, "MAX_MEMBERS", 1)
    with pytest.raises(SourceError, match="unpacks to over"):
        source.check_unpacked_size(archive)


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
