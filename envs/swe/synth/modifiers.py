"""Procedural bugs: SWE-smith's libcst modifiers applied to the functions and classes of a file.

The modifiers are ``swesmith``'s own (``swesmith.bug_gen.procedural.python``: operator flips and swaps,
changed constants, broken chains, removed conditionals / loops / assignments / wrappers, inverted
if/else, shuffled lines, removed bases or methods, shuffled methods). They need ``libcst`` and nothing else,
but ``swesmith.bug_gen.procedural/__init__.py`` imports every language's modifiers at import time, and
those import tree-sitter grammars (``tree_sitter_cpp``, ...) that a Python-only user has no reason to
install (``pip install swesmith libcst`` gives ``ModuleNotFoundError: tree_sitter_cpp``). So
:func:`swesmith_modifiers` puts an empty package object in ``sys.modules`` for that one package (its
``__path__`` pointing at the real folder) before importing the Python submodules: the Python modifiers
then import with libcst alone, unchanged. ``swesmith.bug_gen.adapters.python`` (its ``PythonEntity``)
imports ``astor`` for stubs turngym never asks for, so :class:`Entity` computes the same tags and
complexity here (``_analyze_properties`` and ``complexity``, written after the adapter's).

An entity's rewrite is spliced back into the file at the entity's lines, re-indented; a mutation is
kept only if the whole file still compiles and differs from the original.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import sys
import types
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

INSTALL_HINT = "pip install swesmith libcst  (swesmith's Python modifiers need libcst only)"


@lru_cache(maxsize=1)
def swesmith_modifiers() -> tuple[type, ...]:
    """swesmith's Python modifier classes, imported without the other languages' tree-sitter grammars."""
    spec = importlib.util.find_spec("swesmith")
    if spec is None or spec.origin is None or importlib.util.find_spec("libcst") is None:
        raise ImportError(f"procedural bugs need swesmith's modifiers and libcst: {INSTALL_HINT}")
    root = Path(spec.origin).parent
    importlib.import_module("swesmith.bug_gen")
    name = "swesmith.bug_gen.procedural"
    if name not in sys.modules:
        # The real __init__ imports the C++, Go, Java, JS, Rust and TypeScript modifiers (tree-sitter).
        stub = types.ModuleType(name, "swesmith's procedural package, loaded by turngym without other languages")
        stub.__path__ = [str(root / "bug_gen" / "procedural")]  # type: ignore[attr-defined]
        stub.__package__ = name
        sys.modules[name] = stub
    python = importlib.import_module("swesmith.bug_gen.procedural.python")
    return tuple(type(m) for m in python.MODIFIERS_PYTHON)


def _entity_base() -> type:
    swesmith_modifiers()
    from swesmith.constants import CodeEntity

    return CodeEntity


def _tags(node: ast.AST) -> set[str]:
    """The CodeProperty values of swesmith's PythonEntity._analyze_properties, as strings."""
    nodes = list(ast.walk(node))

    def has(*kinds: type) -> bool:
        return any(isinstance(n, kinds) for n in nodes)

    tags = set()
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        tags.add("is_function")
    elif isinstance(node, ast.ClassDef):
        tags.add("is_class")
    checks = {
        "has_loop": has(ast.For, ast.While), "has_if": has(ast.If),
        "has_if_else": any(isinstance(n, ast.If) and n.orelse for n in nodes), "has_exception": has(ast.Try),
        "has_list_indexing": has(ast.Subscript), "has_function_call": has(ast.Call), "has_return": has(ast.Return),
        "has_list_comprehension": has(ast.ListComp), "has_import": has(ast.Import, ast.ImportFrom),
        "has_assignment": has(ast.Assign), "has_lambda": has(ast.Lambda),
        "has_arithmetic": has(ast.BinOp, ast.UnaryOp),
        "has_decorator": any(isinstance(n, ast.FunctionDef) and n.decorator_list for n in nodes),
        "has_wrapper": has(ast.Try, ast.With),
        "has_parent": any(isinstance(n, ast.ClassDef) and n.bases for n in nodes),
        "has_binary_op": has(ast.BinOp), "has_bool_op": has(ast.BoolOp), "has_unary_op": has(ast.UnaryOp),
        "has_off_by_one": any(isinstance(n, ast.Compare) and len(n.ops) == 1
                              and isinstance(n.ops[0], (ast.Lt, ast.Gt, ast.LtE, ast.GtE)) for n in nodes),
    }
    return tags | {key for key, value in checks.items() if value}


def _complexity(node: ast.AST) -> int:
    """swesmith's PythonEntity.complexity: 1 + decision points."""
    total = 1
    for n in ast.walk(node):
        if isinstance(n, (ast.If, ast.While, ast.For)):
            total += 1
        elif isinstance(n, ast.BoolOp):
            total += len(n.values) - 1
        elif isinstance(n, ast.Try):
            total += len(n.handlers)
        elif isinstance(n, ast.Compare):
            total += len(n.ops)
    return total


@dataclass(frozen=True)
class Span:
    """A function or class of a source file: where it is and what it is."""

    path: str  # relative to the repository root
    qualname: str
    kind: str  # "function" or "class"
    start: int  # first line (the first decorator's), 1-based
    def_line: int  # the ``def`` / ``class`` line
    end: int
    indent: str
    source: str  # dedented


def spans(path: str, text: str) -> list[Span]:
    """Every function and class of ``text`` (nested ones too), in source order."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # a file too deep for the parser: no bug from it
        return []
    lines = text.splitlines(keepends=True)
    found: list[Span] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qualname = f"{prefix}{child.name}"
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                end = child.end_lineno or child.lineno
                block = lines[start - 1 : end]
                first = block[0]
                indent = first[: len(first) - len(first.lstrip())]
                if all(line.startswith(indent) or not line.strip() for line in block):
                    source = "".join(line.removeprefix(indent) for line in block)
                    kind = "class" if isinstance(child, ast.ClassDef) else "function"
                    found.append(Span(path, qualname, kind, start, child.lineno, end, indent, source))
                walk(child, qualname + ".")
            else:
                walk(child, prefix)

    walk(tree, "")
    return found


def make_entity(span: Span) -> Any:
    """A swesmith CodeEntity for ``span`` (tags and complexity as swesmith's PythonEntity computes them)."""
    base = _entity_base()
    from swesmith.constants import CodeProperty

    tree = ast.parse(span.source)
    node = tree.body[0]
    tags = {CodeProperty(value) for value in _tags(node) if value in {p.value for p in CodeProperty}}
    complexity = _complexity(node)

    class Entity(base):  # type: ignore[misc, valid-type]
        def _analyze_properties(self) -> None:
            self._tags = set(tags)

        @property
        def complexity(self) -> int:
            return complexity

        @property
        def name(self) -> str:
            return span.qualname

        @property
        def signature(self) -> str:
            return span.source.splitlines()[0]

        @property
        def stub(self) -> str:
            return span.source

    return Entity(file_path=span.path, indent_level=0, indent_size=4, line_end=span.end, line_start=span.start,
                  node=node, src_code=span.source)


@dataclass(frozen=True)
class Mutation:
    """One procedural bug: the file's new text and where it came from."""

    path: str
    qualname: str
    modifier: str  # swesmith's strategy name, e.g. func_pm_op_change
    original: str
    mutated: str
    seed: int

    @property
    def key(self) -> str:
        digest = hashlib.sha256(f"{self.path}\0{self.qualname}\0{self.modifier}\0{self.mutated}".encode())
        return digest.hexdigest()[:10]


def seed_for(*parts: object) -> int:
    """A 32-bit seed from the parts (stable across runs and machines, unlike ``hash``)."""
    return int(hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()[:8], 16)


def mutate(span: Span, text: str, modifier_class: type, seed: int, likelihood: float | None = None) -> Mutation | None:
    """Apply one modifier to one span of ``text``; None when it does not apply, changes nothing or breaks
    compilation of the file."""
    entity = make_entity(span)
    modifier = modifier_class(seed=seed) if likelihood is None else modifier_class(likelihood=likelihood, seed=seed)
    if not modifier.can_change(entity):
        return None
    try:
        rewrite = modifier.modify(entity)
    except Exception:  # noqa: BLE001 - a modifier that trips on a construct yields no bug, not a crash
        return None
    if rewrite is None or not getattr(rewrite, "rewrite", None):
        return None
    body = rewrite.rewrite if rewrite.rewrite.endswith("\n") else rewrite.rewrite + "\n"
    indented = "".join(span.indent + line if line.strip() else line for line in body.splitlines(keepends=True))
    lines = text.splitlines(keepends=True)
    new_text = "".join(lines[: span.start - 1]) + indented + "".join(lines[span.end :])
    if new_text == text:
        return None
    try:
        compile(new_text, span.path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return Mutation(span.path, span.qualname, modifier.name, text, new_text, seed)
