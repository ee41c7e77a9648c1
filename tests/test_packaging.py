"""Issue 47.4: `make install` is quiet except for real problems. Every folder that holds package data is itself in
pyproject's `packages` (setuptools otherwise warns, at length, once per folder: about 1,000 lines per install), and
installing the package with pip -q, as the Makefile does, prints nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib

from tests.conftest import REPO_ROOT


def setuptools_config() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def data_folders() -> set[str]:
    """The packages (dotted names) setuptools sees for the files package-data ships: the longest importable prefix
    of each file's folder, below its package."""
    config = setuptools_config()
    folders = config["package-dir"]
    names = set()
    for package, patterns in config["package-data"].items():
        mapped = max((name for name in folders if package == name or package.startswith(f"{name}.")), key=len)
        root = REPO_ROOT / folders[mapped] / package[len(mapped):].lstrip(".").replace(".", "/")
        for pattern in patterns:
            for path in root.glob(pattern):
                parts = []  # as setuptools reads them: the folder's leading parts that Python could import
                for part in path.parent.relative_to(root).parts:
                    if not part.isidentifier():
                        break
                    parts.append(part)
                if path.is_file() and parts:
                    names.add(".".join([package, *parts]))
    return names


def test_every_folder_with_package_data_is_a_listed_package():
    listed = set(setuptools_config()["packages"])
    assert len(data_folders()) > 20
    assert sorted(data_folders() - listed) == []


def test_pip_installs_the_package_without_a_word(tmp_path):
    """The Makefile's pip step (-q), on a copy of the checkout (files git does not ignore): no setuptools warnings."""
    source = tmp_path / "src"
    listing = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    tracked = subprocess.run(listing, cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, tracked):
        if (REPO_ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, source / name)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                           "--no-compile", "--target", str(tmp_path / "target"), str(source)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout + done.stderr == ""
    shipped = tmp_path / "target" / "turngym"
    assert (shipped / "recipes" / "configs" / "signals-ppo.yaml").is_file()
    assert any((shipped / "envs" / "swe" / "data" / "repos").iterdir())
