"""The package's shape: one namespace, optional extras, no import cycles."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.test_packaging import data_folders

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"envs": "turngym.envs", "agents": "turngym.agents", "trainers": "turngym.trainers",
           "recipes": "turngym.recipes", "turngym": "turngym"}
TOP_LEVEL_IMPORT = re.compile(r"^\s*(?:import|from)\s+(envs|agents|trainers|recipes)\b(?!\w)", re.MULTILINE)


def python_files() -> list[Path]:
    skipped = {".git", "data", "build"}  # and every virtual environment (.venv, .venv-vllm...)
    return [p for p in ROOT.rglob("*.py")
            if not skipped & set(p.relative_to(ROOT).parts) and not p.relative_to(ROOT).parts[0].startswith(".venv")]


def test_no_code_imports_the_folders_as_top_level_packages():
    offenders = [f"{p.relative_to(ROOT)}: {m.group(0).strip()}" for p in python_files()
                 for m in TOP_LEVEL_IMPORT.finditer(p.read_text())]
    assert not offenders, "import them as turngym.<folder>:\n" + "\n".join(offenders)


def test_the_distribution_installs_only_the_turngym_namespace():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert all(p == "turngym" or p.startswith("turngym.") for p in setuptools["packages"])
    assert set(setuptools["package-dir"].values()) == set(FOLDERS)
    data = data_folders()  # folders of package data: listed as (namespace) packages, without an __init__.py
    for package in setuptools["packages"]:  # every listed package exists where the mapping says
        top, *rest = package.split(".")[1:] or ["turngym"]
        folder = ROOT / (setuptools["package-dir"].get(f"turngym.{top}", "turngym") if top != "turngym" else "turngym")
        assert (folder.joinpath(*rest) / "__init__.py").exists() or package in data, package
    # ... and every package folder is listed: a wheel leaves an unlisted one out (editable installs hide it)
    listed = set(setuptools["packages"])
    for dotted, folder in setuptools["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            if "data" in parts or "__pycache__" in parts:
                continue
            assert ".".join((dotted, *parts)) in listed, f"{'.'.join((dotted, *parts))} is not in pyproject's packages"


def module_graph() -> dict[str, set[str]]:
    """Every turngym module and the turngym modules it imports, at top level or inside functions."""
    modules = {}
    for folder, name in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if {"data", "tools"} & set(parts):
                continue
            modules[".".join([name, *(p for p in parts if p != "__init__")])] = path
    graph = {}
    for module, path in modules.items():
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("turngym"):
                imported |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                             for a in node.names}
            elif isinstance(node, ast.Import):
                imported |= {a.name for a in node.names if a.name.startswith("turngym")}
        graph[module] = {m for m in imported if m in modules and m != module}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt] if nxt in path else [*path, nxt]
            if nxt not in state and (cycle := visit(nxt, [*path, nxt])):
                return cycle
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start, [start])):
            return cycle
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles_even_through_function_local_imports():
    graph = module_graph()
    assert len(graph) > 40 and "turngym.envs.swe.env" in graph["turngym.envs.swe"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


# The layers, lowest first: each imports only the ones before it (what two layers need goes down to the lower one).
LAYERS = ("turngym.envs", "turngym.agents", "turngym.trainers", "turngym.recipes")


def layer_of(module: str) -> int | None:
    return next((i for i, layer in enumerate(LAYERS) if module == layer or module.startswith(f"{layer}.")), None)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module from a higher layer, as ``importer -> imported``."""
    return sorted(f"{module} -> {imported}" for module, targets in graph.items() for imported in targets
                  if (low := layer_of(module)) is not None and (high := layer_of(imported)) is not None and high > low)


def test_upward_imports_finds_one():
    graph = {"turngym.envs.a": {"turngym.agents.b", "turngym.envs.c"}, "turngym.agents.b": {"turngym.envs.a"},
             "turngym.trainers.d": {"turngym.recipes"}, "turngym.envs.c": set(), "turngym": {"turngym.recipes"}}
    assert upward_imports(graph) == ["turngym.envs.a -> turngym.agents.b", "turngym.trainers.d -> turngym.recipes"]


def test_layers_import_downward_only_even_inside_functions():
    """envs imports no agents, trainers or recipes; agents no trainers or recipes; trainers no recipes."""
    graph = module_graph()
    assert {layer_of(module) for module in graph} >= set(range(len(LAYERS)))
    offenders = upward_imports(graph)
    assert not offenders, "imports that point up a layer (move what both need down):\n" + "\n".join(offenders)


BLOCK_EXTRAS = """
import importlib.abc, sys
class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {'textworld', 'alfworld', 'torch', 'transformers', 'trl', 'docker'}:
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None
sys.meta_path.insert(0, Missing())
"""


def run_without_extras(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK_EXTRAS + code], capture_output=True, text=True, cwd="/",
                          timeout=120, check=False)


def test_the_core_works_without_any_extra_and_each_extra_is_named_when_missing():
    result = run_without_extras("""
import gymnasium as gym
import turngym
env = gym.make("turngym/Signals-v0")
print("checks:", len(turngym.check_text_env(env)))
for target in ("gym.make('turngym/TextWorld-v0')", "gym.make('turngym/ALFWorld-v0')", "import turngym.trainers"):
    try:
        exec(target)
    except ImportError as error:
        print("refused:", error)
""")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("checks:") and int(lines[0].split()[1]) > 10
    assert 'pip install "turngym[textworld]"' in lines[1] and "turngym/TextWorld-v0" in lines[1]
    assert 'pip install "turngym[alfworld]"' in lines[2]
    assert 'pip install "turngym[train]"' in lines[3]


def test_an_uninstalled_clone_says_how_to_install_not_circular_import():
    """`import turngym` from a clone that was never installed names the fix, not a circular import."""
    done = subprocess.run([sys.executable, "-S", "-c", "import turngym"], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, cwd="/", check=False)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: turngym is not installed") and "make install" in last
    assert "circular" not in done.stderr
