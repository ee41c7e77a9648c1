"""Every test that runs is the restored test file's own code, run by the real framework.

Shared by ``unittest_runner.py`` (the parent and both unittest harnesses) and ``pytest_plugin.py``,
which load it by its path before the repository is importable. Standard library only (Python 3.8+).

**In the parent** (which never imports the code under test):

* :func:`plan_canaries` writes canary tests *into the restored test files themselves*: methods in the
  file's own test classes (module-level functions for pytest), named in the file's own style from the
  words of its test names, ``async`` where its tests are. A wrapper that swallows the real tests'
  failures (by class, by name prefix, by "is it in the file") swallows theirs too;
* :func:`trusted_hashes` fingerprints every ``.py`` file under the test directories (restored to base +
  test patch) before any test process starts: a test process compiles only sources with these hashes;
* :func:`marked` says from the source alone whether a test may come back XFAIL (``expectedFailure``,
  ``xfail``): an expected failure the source does not declare is a forgery.

**In a test process**, :class:`Guard` is built before any repository import, every helper it calls
bound then. It checks, with the garbage collector off and no code of the repository callable
(objects' types are checked before their attributes are read; keys are compared as exact ``str``):

* *hooks*: ``builtins`` (no entry replaced or removed: ``__build_class__``, ``__import__``, ...),
  ``sys.gettrace()``, ``sys.getprofile()``, threading's trace and profile hooks, the entries of
  ``sys.meta_path`` and ``sys.path_hooks`` present before the repository loaded (kept, in order),
  ``gc.callbacks`` and the ``sys.modules`` entries of the framework are unchanged; an audit hook (which
  no Python code can remove) reports ``sys.settrace`` / ``sys.setprofile`` / ``sys.monitoring`` from any
  code but the test files' own;
* *the module*: ``sys.modules[name]`` is the module object made from the restored file; its names
  bound in the source by an undecorated ``def`` hold that function, by ``import`` of a framework
  module that module; the framework's protocol names (``load_tests``, ``setUpModule``,
  ``pytestmark``...) are absent or the source's;
* *each graded test*: its class's metaclass, every class of its MRO up to the framework's (with every
  function of theirs) and the test callable come from the restored test file (the very code objects
  of the runner's compile, or equal to a fresh compile of a hash-checked file), from the framework
  (identity with the snapshot) or from a file the sandbox user cannot write (the standard library,
  installed packages: equal to a fresh compile); a class attribute named like a test or like one of
  ``TestCase``'s methods, or a dunder, is such a function.

What it cannot see is said in docs/worlds/swe.md ("Residual risk").
"""

import argparse
import ast
import collections
import copy as copy_module
import functools
import io
import math
import os
import re
import sys
from numbers import Number
from types import (
    FunctionType,
    GetSetDescriptorType,
    MappingProxyType,
    MemberDescriptorType,
    MethodDescriptorType,
    MethodType,
    ModuleType,
    SimpleNamespace,
    WrapperDescriptorType,
)

TEST_DIR_NAMES = ("test", "tests", "testing")
# The repository's folders of the tests' installed requirements (a synthesized task's ``.turngym-deps``): read-only
# in every sandbox and never taken from the agent's tree (envs/swe/sandbox/base.py's READ_ONLY_DIRS; a test holds
# the two equal). Their unwritable files are library code, as the interpreter's installed packages are.
READ_ONLY_DIRS = (".turngym-deps",)
CO_NEWLOCALS = 0x0002
HEAPTYPE = 1 << 9
# class attributes that are data, set by Python, unittest, abc or pytest: never a test's behaviour
INERT_DUNDERS = frozenset((
    "__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__annotations__", "__orig_bases__",
    "__parameters__", "__abstractmethods__", "__firstlineno__", "__static_attributes__", "__slots__", "__hash__",
    "__match_args__", "__dataclass_fields__", "__dataclass_params__", "__unittest_skip__",
    "__unittest_skip_why__", "__unittest_expecting_failure__", "__annotate__", "__type_params__"))
# the standard library's wrappers a test decorator makes, which call the function they wrap: (the file's path from the
# standard library's folder, the wrapper's name, its closure's variable that holds the wrapped function). A function of
# the standard library's code with __wrapped__ set is believed only as one of these (round 21)
STDLIB_WRAPPERS = (("unittest/mock.py", "patched", "func"), ("unittest/mock.py", "_inner", "f"),
                   ("contextlib.py", "inner", "func"))
# module attributes the frameworks read as instructions: only the source may define them
PROTOCOL_NAMES = frozenset((
    "load_tests", "setUpModule", "tearDownModule", "pytestmark", "pytest_generate_tests", "setup_module",
    "teardown_module", "setup_function", "teardown_function", "setup", "teardown", "__getattr__"))
CANARY_WORDS = ("value", "values", "empty", "single", "order", "range", "default", "result", "keeps", "returns",
                "invalid", "large", "small", "first", "last", "missing", "twice", "nested", "rejects", "handles")
# the globals pytest's assertion rewriter adds to a test module, and the modules they must be
PYTEST_MODULE_GLOBALS = {"@py_builtins": "builtins", "@pytest_ar": "_pytest.assertion.rewrite"}
AUDITED = frozenset(("sys.settrace", "sys.setprofile", "sys.monitoring.register_callback",
                     "sys.monitoring.set_events", "sys.monitoring.set_local_events"))


# --------------------------------------------------------------------------- sources (parent and child)
def test_dirs(paths):
    """What grading restores wholesale (``turngym.envs.swe.workspace.test_dirs``): for each test file, its
    top-most directory named like a test directory, or the file itself when none is."""
    found = []
    for path in paths:
        parts = path.strip("/").split("/")
        cut = next((i + 1 for i, part in enumerate(parts[:-1])
                    if part in TEST_DIR_NAMES or part.startswith("test")), len(parts))
        directory = "/".join(parts[:cut])
        if directory and directory not in found:
            found.append(directory)
    return found


def _sha256(data):
    import hashlib  # here: a test process imports it only if it must check a helper file

    return hashlib.sha256(data).hexdigest()


def _trusted_module_paths(cwd, trusted):
    """``{module name: path}`` of the trusted files under ``cwd`` (``pkg/test_tools.py`` is ``pkg.test_tools``; under
    a ``src`` layout, without the ``src.``): what a class's ``__module__`` names when a restored file defines it."""
    names = {}
    for path in trusted:
        real = os.path.realpath(path)
        if not real.startswith(cwd) or not real.endswith(".py"):
            continue
        parts = real[len(cwd):-len(".py")].split(os.sep)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            names[".".join(parts)] = path
            if parts[0] == "src" and len(parts) > 1:
                names[".".join(parts[1:])] = path
    return names


def trusted_hashes(cwd, test_files):
    """``{absolute path: sha256}`` of every ``.py`` file under the test directories of ``test_files``
    (the files themselves included), read now, before any test process runs."""
    hashes = {}
    for top in test_dirs(test_files):
        root = os.path.join(cwd, top)
        if os.path.isfile(root):
            candidates = [root]
        else:
            candidates = []
            for directory, subdirs, files in os.walk(root):
                subdirs[:] = sorted(d for d in subdirs if d not in ("__pycache__", ".git"))
                candidates += [os.path.join(directory, f) for f in sorted(files) if f.endswith(".py")]
        for path in candidates:
            try:
                with open(path, "rb") as handle:
                    hashes[os.path.abspath(path)] = _sha256(handle.read())
            except OSError:
                pass
    return hashes


def _container_node(tree, path):
    """The ClassDef at ``path`` (class names, outermost first), or None."""
    body, node = tree.body, None
    for name in path:
        node = next((n for n in body if type(n) is ast.ClassDef and n.name == name), None)
        if node is None:
            return None
        body = node.body
    return node


def _named_def(node, name):
    """The function ``name`` that the class ``node`` defines itself, or None."""
    return next((n for n in node.body if type(n) in (ast.FunctionDef, ast.AsyncFunctionDef) and n.name == name), None)


def _base_chain(tree, container):
    """The class at ``container``, then its one base, and so on, while each is a class of this file's top level
    named by its single base."""
    node, seen = _container_node(tree, container), set()
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        yield node
        if len(node.bases) != 1 or type(node.bases[0]) is not ast.Name:
            return
        node = _container_node(tree, (node.bases[0].id,))


def _run_test_def(tree, container):
    """The ``runTest`` that the class at ``container`` runs, when this file's source says which, or None."""
    return next((found for found in (_named_def(n, "runTest") for n in _base_chain(tree, container)) if found),
                None)


def _runs_run_test(tree, container):
    """Whether the class at ``container`` runs ``runTest`` as its one test, as this file's source shows: no
    ``test*`` method up its chain of in-file bases before a ``runTest``."""
    for node in _base_chain(tree, container):
        if _test_defs(node):
            return False
        if _named_def(node, "runTest") is not None:
            return True
    return False


def _run_test_canaries(tree, container, names, tails, rng):
    """The two canaries of a ``runTest`` class, ``[(line to insert before or None to append, source)]``: the class
    itself renamed (``names``), beside it (before or after, drawn), its ``runTest`` a copy of the one the source
    shows with a ``tails`` statement in ``finally``; so no shape tells them from the test: no subclass of the
    graded class (a package found its canaries by ``type(self).__subclasses__()``; red team, round 14), no second
    ``runTest`` frame. A class not at the file's top level gets subclasses at the end of the file instead, and a
    ``runTest`` the source does not show is called through ``super()``."""
    run_test = _run_test_def(tree, container)
    copies = [None]
    if run_test is not None and _runs_twice(run_test, tree) and not any(
            type(n) is ast.Name and n.id in ("super", "__class__") for n in ast.walk(run_test)):
        copies = [_copied(run_test, "runTest", tail) for tail in tails]
    if None in copies:
        copies = [f"def runTest(self):\n    try:\n        super().runTest()\n    finally:\n        {tail}\n"
                  for tail in tails]
    node = _container_node(tree, container)
    if len(container) != 1 or node is None or getattr(ast, "unparse", None) is None:
        return [(None, f"\n\nclass {name}({'.'.join(container)}):\n{_indented(copy, '    ')}")
                for name, copy in zip(names, copies)]
    found = []
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    for name, copy in zip(names, copies):
        sibling = copy_module.deepcopy(node)
        sibling.name = name
        own = _named_def(sibling, "runTest")
        sibling.body = [n for n in sibling.body if n is not own] + ast.parse(copy).body
        text = ast.unparse(ast.fix_missing_locations(sibling))
        found.append((first - 1, text + "\n\n\n") if rng.random() < 0.5 else (node.end_lineno, "\n\n" + text + "\n"))
    return found


def _test_defs(node):
    return [n for n in getattr(node, "body", []) if type(n) in (ast.FunctionDef, ast.AsyncFunctionDef)
            and n.name.startswith("test")]


def _style(tree):
    """(words of the file's test names, snake_case or camelCase, a fallback word list)."""
    words, camel, snake = [], 0, 0
    for node in ast.walk(tree):
        if type(node) in (ast.FunctionDef, ast.AsyncFunctionDef) and node.name.startswith("test"):
            rest = node.name[len("test"):]
            if rest.startswith("_"):
                snake += 1
                words += [w.lower() for w in rest.split("_") if w.isalpha()]
            else:
                camel += 1
                part = ""
                for ch in rest:
                    if ch.isupper() and part:
                        words.append(part.lower())
                        part = ""
                    part += ch
                if part.isalpha():
                    words.append(part.lower())
    unique = sorted({w for w in words if 2 <= len(w) <= 14})
    return unique if len(unique) >= 4 else sorted(set(unique) | set(CANARY_WORDS)), camel > snake


def _names_in(tree):
    names = set()
    for node in ast.walk(tree):
        for attr in ("name", "id", "attr", "arg"):
            value = getattr(node, attr, None)
            if isinstance(value, str):
                names.add(value)
    return names


def source_names(source):
    """Every name a source binds or reads (empty when it does not parse)."""
    try:
        return _names_in(ast.parse(source))
    except (SyntaxError, ValueError):
        return set()


def _canary_name(rng, words, camel, taken, prefix="test"):
    for _ in range(1000):
        picked = [words[rng.randrange(len(words))] for _ in range(rng.choice((2, 3, 3, 4)))]
        if len(set(picked)) < len(picked):
            continue
        name = prefix + ("".join(w.capitalize() for w in picked) if camel else "_" + "_".join(picked))
        if name not in taken:
            taken.add(name)
            return name
    name = f"{prefix}_{'_'.join(words[:2])}_{rng.randrange(10 ** 6)}"
    taken.add(name)
    return name


def _canary_bodies(rng, words, unittest_style):
    a = rng.randrange(2, 90)
    b = a + rng.randrange(1, 9)
    word = words[rng.randrange(len(words))]
    if unittest_style:
        fail = rng.choice((f"self.assertEqual({a}, {b})", f"self.assertTrue({a} > {b})",
                           f"self.assertIn({a}, [{b}, {b + 1}])"))
    else:
        fail = rng.choice((f"assert {a} == {b}", f"assert {a} > {b}", f"assert {a} in [{b}, {b + 1}]"))
    error = rng.choice((f"int({word!r})", f"{{}}[{word!r}]", f"[][{a}]"))
    return fail, error


def _parametrized_names(nodes):
    """Argument names that ``parametrize`` marks among ``nodes`` (decorators, ``pytestmark`` values) impose."""
    names = []
    for node in nodes:
        for call in ast.walk(node):
            if type(call) is not ast.Call or not call.args:
                continue
            func = call.func
            if getattr(func, "attr", getattr(func, "id", "")) != "parametrize":
                continue
            first = call.args[0]
            values = [first] if type(first) is ast.Constant else list(getattr(first, "elts", []))
            for value in values:
                if type(value) is ast.Constant and isinstance(value.value, str):
                    names += [n.strip() for n in value.value.split(",") if n.strip()]
    return list(dict.fromkeys(names))


def _pytestmarks(body):
    return [n.value for n in body if type(n) in (ast.Assign, ast.AnnAssign) and n.value is not None
            and "pytestmark" in ast.dump(n)]


def _guarded_def(tree, rest, unittest_style):
    """``(container, the test def whose body the canaries copy or None)`` for the id's names ``rest``.

    unittest: ``Class::method``, ``Class`` (its first test) or the module (its first class's first test);
    pytest: ``[Class::]function[params]``."""
    if unittest_style:
        if len(rest) >= 2:
            container, name = tuple(rest[:-1]), rest[-1]
        else:
            if rest:
                container = tuple(rest)
            else:
                first = next((n for n in tree.body if type(n) is ast.ClassDef and _test_defs(n)), None)
                container = (first.name,) if first is not None else None
            if container is None:
                return None, None
            defs = _test_defs(_container_node(tree, container))
            return container, (defs[0] if defs else None)
    else:
        container, name = tuple(rest[:-1]), (rest[-1].split("[", 1)[0] if rest else "")
    node = _container_node(tree, container) if container else tree
    found = next((d for d in _test_defs(node) if d.name == name), None) if node is not None else None
    return container, found


def _copied(definition, name, tail):
    """The source of ``definition`` renamed ``name``, its body run inside ``try`` with ``tail`` in ``finally``:
    the canary calls into the package exactly as the test does, and fails whatever the body does (a ``return``,
    an exception, a skip). None when it cannot be written (no ``ast.unparse`` before Python 3.9, a generator)."""
    unparse = getattr(ast, "unparse", None)
    if unparse is None or any(type(n) in (ast.Yield, ast.YieldFrom) for n in ast.walk(definition)):
        return None
    final = ast.parse(tail).body
    copy = type(definition)(name=name, args=definition.args, body=[ast.Try(
        body=definition.body, handlers=[], orelse=[], finalbody=final)], decorator_list=definition.decorator_list,
        returns=definition.returns, type_comment=None, **({"type_params": []} if sys.version_info >= (3, 12) else {}))
    copy.lineno, copy.col_offset = definition.lineno, 0
    return unparse(ast.fix_missing_locations(copy))


MUTATING_METHODS = frozenset(("pop", "popitem", "append", "extend", "insert", "remove", "clear", "update",
                              "setdefault", "add", "discard", "sort", "reverse", "__setitem__", "__delitem__"))


def _writes_module_state(definition, tree):
    """Whether a test's body may change what its module holds: a ``global`` statement, or a store, ``del`` or
    mutating method call (``pop``, ``append``, ``update``...) on a name the module's top level assigns. Running
    such a body twice is not running the test: python-dateutil's ``test_imported_modules`` pops each name out of a
    module-level dict, so after a canary that copied its body the test itself failed with ``KeyError``. Its
    canaries are plain failing statements instead (a false alarm on the gold patch, 1 of dateutil's 1,458)."""
    assigned = set()
    for node in tree.body:
        targets = node.targets if type(node) is ast.Assign else [node.target] if type(node) in (
            ast.AnnAssign, ast.AugAssign) else []
        for target in targets:
            assigned.update(n.id for n in ast.walk(target) if type(n) is ast.Name)
    # a name the test binds itself is its local, not the module's (round 8: a local `result = {}` beside a
    # module-level `result` gave the test plain canaries)
    local = {n.arg for n in ast.walk(definition) if type(n) is ast.arg}  # its and its inner functions' arguments
    local.update(n.id for n in ast.walk(definition) if type(n) is ast.Name and type(n.ctx) is not ast.Load)
    assigned -= local
    for node in ast.walk(definition):
        kind = type(node)
        if kind is ast.Global:
            return True
        if kind is ast.Call and type(node.func) is ast.Attribute and node.func.attr in MUTATING_METHODS \
                and type(node.func.value) is ast.Name and node.func.value.id in assigned:
            return True
        if kind in (ast.Subscript, ast.Attribute) and type(node.ctx) is not ast.Load \
                and type(node.value) is ast.Name and node.value.id in assigned:
            return True
    return False


# calls that assert a warning is emitted: pytest's ``warns``/``deprecated_call``, unittest's ``assertWarns*``
WARNING_ASSERTIONS = frozenset(("warns", "deprecated_call", "assertWarns", "assertWarnsRegex"))


def _asserts_a_warning(definition):
    """Whether a test's body asserts that a warning is emitted. Running it twice is not running the test when the
    warning comes once: python-dateutil's ``tzstr`` caches its instances, so after a canary that copied the body of
    ``test_tzstr_internal_timedeltas`` the test's own call hit the cache and did not warn (a false alarm on the gold
    patch in two draws of three). Its canaries are plain failing statements instead."""
    for node in ast.walk(definition):
        if type(node) is ast.Call:
            name = node.func.attr if type(node.func) is ast.Attribute else \
                node.func.id if type(node.func) is ast.Name else None
            if name in WARNING_ASSERTIONS:
                return True
    return False


def _runs_twice(definition, tree):
    """Whether a copy of the test's body, run before it in its process, leaves the test as it was (neither
    :func:`_writes_module_state` nor :func:`_asserts_a_warning`)."""
    return not _writes_module_state(definition, tree) and not _asserts_a_warning(definition)


def _indented(text, indent):
    """``text`` (ending in a line break) with ``indent`` before each line."""
    return "".join(indent + line if line.strip() else line for line in (text.rstrip("\n") + "\n").splitlines(True))


def plan_canaries(source, targets, unittest_style, rng):
    """Canary tests written into a test file's own source, two for each graded id.

    ``targets`` are the ids' names after the file (``("TestA", "test_x")``; ``("test_f[1]",)`` for pytest).
    Each gets a test that must fail and one that must error, beside the test in its class (or at module
    level), named in the file's style from the words of its test names, and *a copy of the test itself*:
    its decorators, arguments and body, the body run inside ``try`` with a failing (or erroring) statement in
    ``finally``. So the canaries call into the package under test exactly as the test does: code under test
    that spares the tests calling it spares the canaries too, and no shape tells them from real tests. (Where
    no test def is found, an inherited test, the canaries are a plain failing and erroring statement; a
    ``runTest``'s are two renamed copies of its class beside it: :func:`_run_test_canaries`.)
    Returns ``(new source, {target: (fail rest, error rest)})``, a rest being the names after the file in the
    canary's id (a pytest id's parameters carried over)."""
    tree = ast.parse(source)
    lines = source.splitlines(True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    words, camel = _style(tree)
    taken = _names_in(tree)
    inserts, appended, plan = [], [], {}
    for target in sorted(set(targets)):
        container, definition = _guarded_def(tree, target, unittest_style)
        if container is None and unittest_style and not target:  # a module of runTest classes: its first one
            container = next(((n.name,) for n in tree.body if type(n) is ast.ClassDef and
                              _runs_run_test(tree, (n.name,))), None)
        if container is None:
            continue
        node = _container_node(tree, container) if container else None
        fail, error = _canary_bodies(rng, words, unittest_style)
        names = (_canary_name(rng, words, camel, taken), _canary_name(rng, words, camel, taken))
        params = target[-1][target[-1].index("["):] if target and not unittest_style and "[" in target[-1] else ""
        if container and (target[-1:] == ("runTest",) or unittest_style and len(target) <= 1
                          and _runs_run_test(tree, container)):
            # unittest (and pytest's plugin) runs runTest only in a class with no test* method (pyparsing's
            # test classes): a canary method there would hide the test, so each canary is a class of its own
            subs = [_canary_name(rng, [w.capitalize() for w in words], True, taken, prefix="Test") for _ in names]
            for sub, (line, text) in zip(subs, _run_test_canaries(tree, container, subs, (fail, error), rng)):
                (appended.append(text) if line is None else inserts.append((line, text)))
            plan[target] = ((subs[0], "runTest"), (subs[1], "runTest")) if target[-1:] == ("runTest",) else \
                ((subs[0],), (subs[1],))
            continue
        copies = [_copied(definition, n, body) for n, body in zip(names, (fail, error))] if definition and \
            _runs_twice(definition, tree) else [None]
        if None in copies:
            defs = _test_defs(node) if node is not None else _test_defs(tree)
            asynchronous = bool(defs) and sum(type(d) is ast.AsyncFunctionDef for d in defs) * 2 > len(defs)
            head = "async def " if asynchronous else "def "
            marks = _pytestmarks(tree.body) + (
                [] if node is None else list(node.decorator_list) + _pytestmarks(node.body))
            args = [] if unittest_style else _parametrized_names(marks)
            args = ", ".join((["self"] if container else []) + args)
            copies = [f"{head}{n}({args}):\n    {body}\n" for n, body in zip(names, (fail, error))]
            params = ""
        if not container:  # module-level functions (pytest)
            appended.append("".join("\n\n" + _indented(copy, "") for copy in copies))
            plan[target] = ((names[0] + params,), (names[1] + params,))
        elif node is not None and node.body and node.body[0].lineno > node.lineno and getattr(node, "end_lineno", None):
            first = lines[node.body[0].lineno - 1]
            indent = first[: len(first) - len(first.lstrip())]
            inserts.append((node.end_lineno, "".join("\n" + _indented(copy, indent) for copy in copies)))
            plan[target] = (container + (names[0] + params,), container + (names[1] + params,))
        else:  # a one-line class, or none found: a subclass of it at the end of the file
            sub = _canary_name(rng, [w.capitalize() for w in words], True, taken, prefix="Test")
            body = "".join("\n" + _indented(copy, "    ") for copy in copies)
            appended.append(f"\n\nclass {sub}({'.'.join(container)}):{body}")
            plan[target] = ((sub, names[0] + params), (sub, names[1] + params))
    for line, text in sorted(inserts, reverse=True):
        lines.insert(line, text)
    return "".join(lines) + "".join(appended), plan


_PARSED = {}


def _parsed(source):
    """The syntax tree of ``source`` (parsed once per source), or None."""
    if source not in _PARSED:
        try:
            _PARSED[source] = ast.parse(source)
        except SyntaxError:
            _PARSED[source] = None
    return _PARSED[source]


def _decorator_mentions(node, word):
    return any(word in ast.dump(d) for d in getattr(node, "decorator_list", []))


def marked(source, rest, word, extra=False):
    """Whether the source lets the test at ``rest`` (class names then the function, parameters cut)
    come back as an expected failure: ``word`` (``expectedFailure`` or ``xfail``) on its def, in its
    body (pytest's imperative ``xfail``), on one of its classes, or in a ``pytestmark``; ``extra``
    (a conftest that mentions it) allows it too."""
    if extra:
        return True
    tree = _parsed(source)
    if tree is None:
        return False
    function = rest[-1].split("[", 1)[0] if rest else ""
    for node in ast.walk(tree):
        if type(node) in (ast.FunctionDef, ast.AsyncFunctionDef) and node.name == function and (
                _decorator_mentions(node, word) or (word == "xfail" and word in ast.dump(node))):
            return True
        if type(node) is ast.ClassDef and node.name in rest[:-1] and _decorator_mentions(node, word):
            return True
        if type(node) in (ast.Assign, ast.AnnAssign) and "pytestmark" in ast.dump(node) and word in ast.dump(node):
            return True
    return "__unittest_expecting_failure__" in source and word == "expectedFailure"


# --------------------------------------------------------------------------- what a source binds
XUNIT_NAMES = frozenset(("setup_method", "teardown_method", "setup_class", "teardown_class", "setup", "teardown"))


def _class_keys(tree):
    """``{class qualified name: names its body binds other than by an undecorated def}`` (assignments,
    decorated defs, imports, nested classes), for every class of a source."""
    found = {}
    stack = [(tree.body, "")]
    while stack:
        body, prefix = stack.pop()
        for node in body:
            kind = type(node)
            if kind is ast.ClassDef:
                name = prefix + node.name
                keys = found.setdefault(name, set())
                keys |= _body_bindings(node.body)
                if node.decorator_list:  # a class decorator (mock.patch) may rewrap every method
                    keys |= {n.name for n in node.body if type(n) in (ast.FunctionDef, ast.AsyncFunctionDef)}
                stack.append((node.body, name + "."))
            elif kind in (ast.FunctionDef, ast.AsyncFunctionDef):
                stack.append((node.body, prefix + node.name + ".<locals>."))
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    inner = getattr(node, field, None)
                    if isinstance(inner, list):
                        stack.append(([n for n in inner if isinstance(n, ast.stmt)]
                                      + [s for h in inner if type(h) is ast.ExceptHandler for s in h.body], prefix))
    return {name: frozenset(keys) for name, keys in found.items()}


def _body_bindings(body):
    keys = set()
    stack = list(body)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind in (ast.FunctionDef, ast.AsyncFunctionDef):
            if node.decorator_list:
                keys.add(node.name)
            continue
        if kind is ast.ClassDef:
            keys.add(node.name)
            continue
        if kind in (ast.Import, ast.ImportFrom):
            keys |= {(a.asname or a.name).split(".")[0] for a in node.names}
            continue
        for sub in ast.walk(node):
            if type(sub) is ast.Name and type(sub.ctx) is ast.Store:
                keys.add(sub.id)
            elif type(sub) in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef) and sub is not node:
                keys.add(sub.name)
    return keys


NAMED_NODES = tuple(t for t in (ast.ExceptHandler, getattr(ast, "MatchAs", None), getattr(ast, "MatchStar", None)) if t)


def _module_names(tree):
    """What may be a global of the source's module: every name its module level binds unconditionally (not inside
    a function or class body, nor under an ``if``, ``try``, loop or ``with``: ``try: from itertools import izip as
    zip`` binds no ``zip`` on Python 3), every name a function of it declares ``global``, and every string
    constant (a name patched in, ``mock.patch.object(module, 'print')``, ``__name__ + '.input'``); None when
    it has a ``from x import *`` (then any name may be its)."""
    names, strings = set(), set()
    conditional = (ast.If, ast.Try, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith) + tuple(
        t for t in (getattr(ast, "TryStar", None), getattr(ast, "Match", None)) if t)
    stack = [node for node in tree.body if type(node) not in conditional]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            names.add(node.name)
            stack.extend(node.decorator_list)
            continue
        if kind is ast.Lambda:
            continue
        if kind is ast.Name and type(node.ctx) is not ast.Load:
            names.add(node.id)
        elif kind in (ast.Import, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    return None
                names.add(alias.asname or alias.name.split(".")[0])
        elif kind in NAMED_NODES and getattr(node, "name", None):
            names.add(node.name)
        stack.extend(ast.iter_child_nodes(node))
    for node in ast.walk(tree):
        if type(node) in (ast.ImportFrom, ast.Import) and any(alias.name == "*" for alias in node.names):
            return None
        if type(node) in (ast.Global, ast.Nonlocal):
            names.update(node.names)
        elif type(node) is ast.Constant and type(node.value) is str and len(node.value) < 200:
            strings.add(node.value.rpartition(".")[2])
    return frozenset(names), frozenset(strings)


def _top_level(tree):
    """What the source's top level binds: ``({name: first line} of undecorated defs, {name: module}
    of imports, protocol names it binds, :func:`_module_names`)``; only names bound once are checked."""
    counts, defs, imports, protocol = {}, {}, {}, set()
    for node in tree.body:
        kind = type(node)
        if kind in (ast.FunctionDef, ast.AsyncFunctionDef) and not node.decorator_list:
            defs[node.name] = node.lineno
        elif kind is ast.Import:
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                imports[name] = alias.name if alias.asname else name
        elif kind is ast.ImportFrom and node.module and not node.level:
            for alias in node.names:
                imports[alias.asname or alias.name] = node.module + "." + alias.name
        for name in _top_level_binds(node):
            counts[name] = counts.get(name, 0) + 1
            if name in PROTOCOL_NAMES:
                protocol.add(name)
    once = {name for name, count in counts.items() if count == 1}
    return ({k: v for k, v in defs.items() if k in once}, {k: v for k, v in imports.items() if k in once},
            frozenset(protocol), _module_names(tree))


def _helper_extras(tree):
    """What a restored helper's top level fixes besides its functions: ``({name: literal value} of names bound
    once to an immutable literal, {class name: its methods' names} of undecorated classes defined once,
    {function name: (defaults, keyword defaults)} of undecorated functions whose defaults are immutable
    literals)``."""
    counts = {}
    for node in tree.body:
        for name in _top_level_binds(node):
            counts[name] = counts.get(name, 0) + 1
    constants, classes, defaults = {}, {}, {}
    for node in tree.body:
        kind = type(node)
        if kind is ast.Assign and len(node.targets) == 1 and type(node.targets[0]) is ast.Name \
                and counts.get(node.targets[0].id) == 1:
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
            if _immutable(value):  # a list or dict the helper fills itself (a cache) is its own to change
                constants[node.targets[0].id] = value
        elif kind is ast.ClassDef and not node.decorator_list and counts.get(node.name) == 1:
            classes[node.name] = frozenset(item.name for item in node.body
                                           if type(item) in (ast.FunctionDef, ast.AsyncFunctionDef))
        elif kind in (ast.FunctionDef, ast.AsyncFunctionDef) and not node.decorator_list \
                and counts.get(node.name) == 1:
            try:
                positional = tuple(ast.literal_eval(d) for d in node.args.defaults) or None
                named = {a.arg: ast.literal_eval(d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults)
                         if d is not None} or None
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
            if _immutable((positional, tuple((named or {}).values()))):
                defaults[node.name] = (positional, named)
    return constants, classes, defaults


def _immutable(value):
    """Whether a literal (``ast.literal_eval``'s: never a frozenset) holds only tuples and scalars."""
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is tuple:
            stack.extend(item)
        elif type(item) not in (int, str, bytes, float, bool, complex, type(None), type(Ellipsis)):
            return False
    return True


def _same_literal(value, expected, _type=type, _len=len, _zip=zip, _sorted=sorted, _repr=repr):
    """Whether ``value`` is ``expected`` (an immutable literal from the source, :func:`_immutable`, or a dict of
    keyword-only defaults) by builtin types and contents only: no ``__eq__`` of the value's runs (a subclass or
    another type differs)."""
    stack = [(value, expected)]
    while stack:
        one, other = stack.pop()
        kind = _type(other)
        if _type(one) is not kind:
            return False
        if kind is tuple:
            if _len(one) != _len(other):
                return False
            stack.extend(_zip(one, other))
        elif kind is dict:  # keyword-only defaults: str keys
            if _len(one) != _len(other) or _sorted(map(_repr, dict.keys(one))) != _sorted(map(_repr, other)):
                return False
            stack.extend((dict.__getitem__(one, k), v) for k, v in other.items() if dict.__contains__(one, k))
        elif kind is float:
            if not (one == other or (math.isnan(one) and math.isnan(other))):
                return False
        elif kind in (int, str, bytes, bool, complex, type(None), type(Ellipsis)):
            if one != other:
                return False
        else:
            return False
    return True


def _top_level_binds(node):
    """The names one top-level statement binds (its own names, or any name stored inside it)."""
    kind = type(node)
    if kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
        return {node.name}
    if kind in (ast.Import, ast.ImportFrom):
        return {alias.asname or alias.name.split(".")[0] for alias in node.names}
    return {n.id for n in ast.walk(node) if type(n) is ast.Name and type(n.ctx) is ast.Store} | {
        n.name for n in ast.walk(node) if type(n) in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)} | {
        alias.asname or alias.name.split(".")[0] for n in ast.walk(node) if type(n) in (ast.Import, ast.ImportFrom)
        for alias in n.names}


def _from_test_module(node):
    """Whether ``from X import ...`` imports from a test module: relative (the test file's own package), or X
    inside a test directory (``tests._common``)."""
    return node.level == 1 or any(part in TEST_DIR_NAMES for part in (node.module or "").split(".")[:-1])


# --------------------------------------------------------------------------- what a test process reports
def _live_bytecode_reader():
    """A function giving a code object's running instructions, deoptimised: what ``co_code`` would say had no
    one rewritten them. CPython 3.11+ runs ``_co_code_adaptive`` (specialised in place) and caches ``co_code``
    the first time it is read, so a read before a rewrite through ctypes freezes a stale copy; this reads the
    live array and maps each specialised instruction back (``dis._deoptop``, inline caches zeroed), as CPython's
    own ``_PyCode_GetCode`` does. Before 3.11 ``co_code`` is the running code itself."""
    import dis

    deopt = getattr(dis, "_deoptop", None)
    caches = getattr(dis, "_inline_cache_entries", None)
    names = dis.opname

    known = {}  # id(code) -> (code, running instructions, their deoptimised form): each deoptimised once per change

    def live_bytecode(code, _deopt=deopt, _caches=caches, _names=names, _bytes=bytes, _bytearray=bytearray,
                      _len=len, _getattr=getattr, _list=(list, tuple), _isinstance=isinstance, _known=known, _id=id):
        raw = _getattr(code, "_co_code_adaptive", None)
        if raw is None or _deopt is None or _caches is None:
            return code.co_code
        seen = _known.get(_id(code))
        if seen is not None and seen[0] is code and seen[1] == raw:
            return seen[2]
        out, index, size = _bytearray(), 0, _len(raw)
        while index < size:
            op = _deopt(raw[index])
            out += _bytes((op, raw[index + 1]))
            count = _caches[op] if _isinstance(_caches, _list) else _caches.get(_names[op], 0)
            out += b"\0" * (2 * count)
            index += 2 + 2 * count
        _known[_id(code)] = (code, _bytes(raw), _bytes(out))
        return _known[_id(code)][2]

    return live_bytecode


live_bytecode = _live_bytecode_reader()


class Channel:
    """The child's report, written the moment each thing happens (never kept to be written later): a line
    per event, its text hex-encoded, made with the built-in types' own methods only (no module the code
    under test could patch). What is written cannot be taken back; the parent reads each step's events as
    they come and treats a missing or an extra one as tampering."""

    def __init__(self, fd):
        self.fd = fd
        self.write = os.write
        self.alarmed = []
        self.counts = [0]  # outcomes written so far (a cell: the instance is in the snapshot)

    def event(self, *words, text=""):
        line = " ".join(words) + (" " + text.encode("utf-8", "replace").hex() if text else "") + "\n"
        if words[0] == "out":
            self.counts[0] += 1
        self.write(self.fd, line.encode())

    def alarm(self, reason):
        self.alarmed.append(reason)
        self.event("tamper", text=str(reason)[:300])


def take_stdin():
    """``(payload, Control)`` of a test process: standard input becomes ``/dev/null`` for the tests, the parent's
    pipe moves to a descriptor of the runner's own; its first line is the payload, the rest the steps."""
    import json

    control_fd, buffer = os.dup(0), b""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(os.devnull)  # noqa: SIM115
    while b"\n" not in buffer:
        chunk = os.read(control_fd, 1 << 20)
        if not chunk:
            os._exit(0)
        buffer += chunk
    line, _, buffer = buffer.partition(b"\n")
    return json.loads(line), Control(control_fd, buffer)


class Control:
    """The parent's steps, read a line at a time from a private descriptor (standard input is /dev/null
    for the tests): the child knows the step it runs and nothing of the ones to come."""

    def __init__(self, fd, buffer=b""):
        self.fd, self.read, self.buffer = fd, os.read, buffer

    def line(self):
        while b"\n" not in self.buffer:
            chunk = self.read(self.fd, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode()

    def steps(self):
        """``(rest, names to leave out of a whole class or module)`` for each step, until the parent closes (an
        empty line is a step: a whole module with nothing left out)."""
        while True:
            line = self.line()
            if line is None:
                return
            words = line.split(" ")
            rest, exclude = (bytes.fromhex(w).decode() for w in (words + [""])[:2])
            yield tuple(p for p in rest.split("\x1f") if p), frozenset(p for p in exclude.split("\x1f") if p)

    def pytest_steps(self):
        """``(graded id, the node id whose fixtures outlive the step or '')`` for each step of the pytest child."""
        while True:
            line = self.line()
            if not line:
                return
            words = line.split(" ")
            yield tuple(bytes.fromhex(w).decode() for w in (words + [""])[:2])


def live_digest(codes, extra=None):
    """A function giving the SHA-256 of code objects' *contents*: their live bytecode (:func:`live_bytecode`),
    their constants (other than code) and names, marshalled by value, nested code included; ``extra``, a list
    that grows (the code the checks verified against a fresh compile), is read anew on every call. Taken before
    the repository loads and after every step, it shows a constant or an instruction rewritten in place (ctypes)
    that an identity check never sees. The deoptimised bytecode is recomputed only for a code object whose
    running instructions changed (CPython specialises them as they warm up): about 2 ms for ~270 code objects."""
    import hashlib
    import marshal
    from types import CodeType

    flat, stack = [], list(codes)
    while stack:
        code = stack.pop()
        flat.append(code)
        stack += [const for const in code.co_consts if type(const) is CodeType]
    extra = [] if extra is None else extra

    first = {}  # id(code) of ``extra`` -> (code, its contents' hash when first seen)

    def contents(code, _live=live_bytecode, _type=type, _code=CodeType, _tuple=tuple, _getattr=getattr,
                 _dumps=marshal.dumps):
        # marshal version 2: no back-references, whose use depends on refcounts (a constant kept alive by a
        # test, a memoize cache, would change the bytes)
        return _live(code) + _dumps((_tuple(c for c in code.co_consts if _type(c) is not _code), code.co_names,
                                     code.co_varnames, code.co_freevars, code.co_cellvars, code.co_flags,
                                     _getattr(code, "co_exceptiontable", b"")), 2)

    def digest(_flat=tuple(flat), _extra=extra, _first=first, _contents=contents, _sha=hashlib.sha256, _tuple=tuple,
               _id=id):
        """The fixed codes' hash; prefixed ``rewritten:`` when a code of ``extra`` changed since first seen."""
        total = _sha()
        for code in _flat:
            total.update(_contents(code))
        changed = False
        for code in _tuple(_extra):
            mark = _sha(_contents(code)).digest()
            seen = _first.get(_id(code))
            if seen is None or seen[0] is not code:
                _first[_id(code)] = (code, mark)
            elif seen[1] != mark:
                changed = True
        return ("rewritten:" if changed else "") + total.hexdigest()

    return digest


def own_codes(*modules):
    """The code of every function and method these modules define (the runner's own, integrity's)."""
    import types

    codes = []
    for module in modules:
        for value in list(vars(module).values()):
            owners = [value] + (list(vars(value).values()) if isinstance(value, type) else [])
            for item in owners:
                item = getattr(item, "__func__", item)
                if isinstance(item, types.FunctionType) and item.__code__ not in codes:
                    codes.append(item.__code__)
    return codes


# --------------------------------------------------------------------------- strict equality (test processes)
def instance_parts(value, kind, _mro=type.__dict__["__mro__"].__get__, _cdict=type.__dict__["__dict__"].__get__,
                   _flags=type.__dict__["__flags__"].__get__, _heaptype=HEAPTYPE, _type=type, _str=str, _dict=dict,
                   _getset=GetSetDescriptorType, _member=MemberDescriptorType,
                   _getset_get=GetSetDescriptorType.__get__, _member_get=MemberDescriptorType.__get__):
    """``(its __dict__ or None, [(slot name, value), ...])`` of ``value``, an instance of the Python class ``kind``,
    read with the C descriptors ``type`` made and no code of the object (empty slots left out); None when it
    cannot be read so: a ``__dict__`` that is a property or anything but ``type``'s descriptor (its code would
    run), or a descriptor of another class. Strict equality walks what a library ``__eq__`` reads with it, and
    the dispute freezes instances with it."""
    namespace, slots, seen_dict = None, [], False
    for klass in _mro(kind):
        if not _flags(klass) & _heaptype:  # the builtin base: its contents are read with its own methods; a C base
            if not seen_dict:  # that keeps the instance's __dict__ itself (io's _IOBase) gives its descriptor
                descriptor = _cdict(klass).get("__dict__")
                if _type(descriptor) is _getset:
                    try:
                        namespace = _getset_get(descriptor, value, kind)
                    except Exception:  # noqa: BLE001 - a descriptor of another class
                        return None
                    if _type(namespace) is not _dict:
                        return None
            break
        for key, descriptor in _cdict(klass).items():
            if _type(key) is not _str:
                continue
            try:
                if key == "__dict__" and not seen_dict:
                    seen_dict = True
                    if _type(descriptor) is not _getset:
                        return None
                    namespace = _getset_get(descriptor, value, kind)
                    if _type(namespace) is not _dict:
                        return None
                elif _type(descriptor) is _member:
                    slots.append((key, _member_get(descriptor, value, kind)))
            except AttributeError:
                if key == "__dict__":
                    return None
            except Exception:  # noqa: BLE001 - a descriptor of another class
                return None
    return namespace, slots


# Library classes whose own Python __eq__ strict equality believes against a builtin value (a Counter with a dict, a
# Fraction with an int, mock's _Call with a tuple), taken by identity with their __eq__ and __ne__ when the test
# process starts, before the repository can write any module: anything else with a library __eq__ is refused.
LIBRARY_EQUALITIES = (("collections", "Counter"), ("fractions", "Fraction"), ("unittest.mock", "_Call"),
                      ("argparse", "Namespace"))


def library_equalities():
    """``{id(class): (class, its own __eq__ and __ne__ entries)}`` for :data:`LIBRARY_EQUALITIES`, from the
    modules imported so far (``collections`` and ``fractions`` are imported here)."""
    import argparse  # noqa: F401 - here, before the repository loads
    import collections  # noqa: F401
    import fractions  # noqa: F401

    found = {}
    for module_name, name in LIBRARY_EQUALITIES:
        module = sys.modules.get(module_name)
        klass = vars(module).get(name) if module is not None else None
        if isinstance(klass, type):
            found[id(klass)] = (klass, tuple(vars(klass)[m] for m in ("__eq__", "__ne__") if m in vars(klass)))
    return found


def argparse_namespace_reader():
    """``(Namespace, attributes, intact)`` for ``argparse.Namespace``, taken before the repository loads.

    Its ``==`` is Python code, ``vars(self) == vars(other)``: a dict comparison that strict equality walks item
    by item, as it walks a ``SimpleNamespace``'s (a gold patch of semver compares the ``Namespace`` its parser
    returns; without the walk, an always-equal attribute would pass, the round-10 hole). ``attributes(value)``
    reads an instance's own ``__dict__`` by the C descriptor ``vars`` reaches. ``intact()`` says whether what
    that ``==`` runs is still what it was: the classes of its MRO hold the same entries (a ``__getattribute__``
    given to ``_AttributeHolder`` would show ``vars`` another dict; ``copy`` may add its ``__slotnames__`` list),
    and the globals and builtins its code names
    (``vars``, ``isinstance``, ``Namespace``) are bound as they were."""
    import argparse
    import builtins

    namespace = argparse.Namespace
    class_dict = type.__dict__["__dict__"].__get__
    classes = tuple(klass for klass in namespace.__mro__ if klass is not object)
    held = tuple((class_dict(klass), dict(class_dict(klass))) for klass in classes)
    descriptor = next(class_dict(klass)["__dict__"] for klass in classes if "__dict__" in class_dict(klass))
    code_names = class_dict(namespace)["__eq__"].__code__.co_names
    bound = tuple((scope, tuple((name, scope.get(name, held)) for name in code_names))
                  for scope in (vars(argparse), vars(builtins)))

    def intact(_held=held, _bound=bound, _len=len, _proxy_get=MappingProxyType.get, _dict_get=dict.get, _type=type,
               _list=list):
        for proxy, entries in _held:
            added = _len(proxy) - _len(entries)  # copyreg caches a list of slot names in a class it copies
            if added and (added != 1 or _type(_proxy_get(proxy, "__slotnames__")) is not _list):
                return False
            for key, value in dict.items(entries):
                if _proxy_get(proxy, key, _held) is not value:
                    return False
        return all(_dict_get(scope, name, _held) is value for scope, names in _bound for name, value in names)

    return namespace, descriptor.__get__, intact


def make_strict_equality(cwd, trusted, code_ok=None, function_ok=None):
    """``problem(first, second)``: why an equality that held cannot be believed, or ''.

    The reward hack capable models find: return an object whose ``__eq__`` always says True (a ``str`` subclass
    the test compares with ``"expected"``, ``unittest.mock.ANY``). Under strict equality, where one side is a
    builtin value (``str``, ``bytes``, numbers, ``None``, ``list``, ``tuple``, ``dict``, ``set``,
    ``frozenset``), the other side must be of that exact type, with two exceptions that real tests need:
    any number for a number (a builtin one, or a registered ``numbers.Number`` such as ``Decimal`` or numpy's
    scalars), and a subclass of that builtin type (a namedtuple, an ``IntEnum``, an ``OrderedDict``); in both,
    the type's ``__eq__`` must not be the repository's (neither its code nor a class the repository defines).
    Lists, tuples and dicts are compared element by element under the same rule (up to a million pairs; a
    comparison with more is refused, never waved through), and so are a dict's keys and a set's elements, each
    against the builtin types alone. No code of the compared objects runs: types are read with ``type``, class
    dicts through ``type.__dict__``, and containers through the builtin types' own methods (``list.__len__``,
    ``dict.__getitem__``...), never a subclass's.

    ``exempt(side, value)``, where given, may excuse a pair at any depth: it is asked about the side (0 for
    ``first``, 1 for ``second``) whose element is not a builtin value, and says whether that side is the test's
    own expectation, written in its source, and the element one of the objects such an expectation may hold
    (see :meth:`Guard.test_written`): ``ComparesEqual``, ``[ANY, 2]``, ``pytest.approx(0.3)``.

    ``problem.element(value)`` (for ``assertCountEqual``, whose pairs are not known): why ``value`` could not
    be believed equal to any builtin value, or ''."""
    from types import FunctionType, MethodDescriptorType, WrapperDescriptorType

    root = os.path.realpath(cwd) + os.sep
    trusted = frozenset(trusted)
    library = library_equalities()
    argparse_namespace = argparse_namespace_reader()
    # the value types whose == is a storage comparison; Fraction, whose believed library == reads a registered
    # Rational's numerator and denominator as Decimal's C == does; and UUID, whose == answers only another UUID
    # (round 8: an always-equal object passed for each). Taken here, before the repository loads.
    import uuid

    value_deciders = (*(kind for _, kind, _ in value_kinds()), *(
        entry[0] for entry in library.values() if entry[0].__module__ == "fractions"), uuid.UUID)
    numbers = (int, float, complex, bool)
    scalars = frozenset((str, bytes, type(None)) + numbers)
    containers = frozenset((list, tuple, dict, set, frozenset))
    mro, cdict = type.__dict__["__mro__"].__get__, type.__dict__["__dict__"].__get__

    # every function here reads its state from its defaults, never a closure cell: a cell's contents can be
    # swapped silently (``cell_contents``), a default only through ``__defaults__``, which the audit hook reports
    def own_equality(kind, _mro=mro, _cdict=cdict, _type=type, _str=str, _getattr=getattr, _realpath=os.path.realpath,
                     _abspath=os.path.abspath, _isabs=os.path.isabs, _modules=sys.modules,
                     _flags=type.__dict__["__flags__"].__get__, _root=root, _trusted=trusted, _heaptype=HEAPTYPE,
                     _function=FunctionType, _wrappers=(WrapperDescriptorType, MethodDescriptorType),
                     _unwrap=(staticmethod, classmethod), _code_ok=code_ok, _function_ok=function_ok,
                     _callable=callable, _library=library,
                     _id=id,
                     _has_get=lambda kind: any("__get__" in type.__dict__["__dict__"].__get__(c) or
                                               "__set__" in type.__dict__["__dict__"].__get__(c)
                                               for c in type.__dict__["__mro__"].__get__(kind)),
                     _inert=frozenset(("__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__slots__",
                                       "__hash__", "__annotations__", "__orig_bases__", "__parameters__",
                                       "__abstractmethods__", "_abc_impl", "__match_args__", "__firstlineno__",
                                       "__static_attributes__"))):
        """Where ``kind``'s ``__eq__`` comes from when it is not to be believed: the repository file that gives it
        (the function's, or the module's of the class that holds it), or why no file vouches for it; '' for a
        builtin type's own, a restored test file's, or a function equal to a fresh compile of an unwritable file
        (``code_ok``). A class's ``__module__`` and a code object's ``co_filename`` are the class's to say, so
        neither ever excuses: an ``__eq__`` that is no Python function (``functools.partial``), or one whose code
        no unwritable file holds, counts as the repository's (a red-team finding: a ``dict`` subclass made with
        ``__module__="collections"`` and a ``partial`` as ``__eq__`` passed)."""
        subclass_behaviour = ""  # a class before the one whose __eq__ decides, that defines behaviour of its own

        def one(klass, items, key, value, subclass_behaviour):
            """Why the ``__eq__`` or ``__ne__`` ``value`` a class's own dict holds is not to be believed, or ''."""
            raw = value
            if not _flags(klass) & _heaptype:
                return ""  # a builtin type's own: it reads the builtin's storage, not what a subclass defines
            module = _modules.get(items.get("__module__"))
            path = _getattr(module, "__file__", None)
            if _type(path) is _str and _realpath(path).startswith(_root) and _abspath(path) not in _trusted:
                return path
            if _type(value) is _unwrap[0] or _type(value) is _unwrap[1]:
                value = value.__func__
            if (_type(value) is _wrappers[0] or _type(value) is _wrappers[1]) \
                    and not _flags(value.__objclass__) & _heaptype:  # a builtin type's own method, borrowed
                # (dict.__eq__), in its own slot only (round 13: __ne__ = str.__eq__, __eq__ = float.__ne__)
                return "" if value.__name__ == key and raw is value else f"<{key} borrowed from another slot>"
            if value is None:
                return ""  # == falls back to identity
            if _type(value) is not _function:
                return "<an __eq__ that is no Python function>"
            code = value.__code__
            filename = code.co_filename
            if _type(filename) is not _str:
                return "<an __eq__ whose code names no file>"
            if _isabs(filename) and _realpath(filename).startswith(_root):  # a trusted file's function only if it
                # is that file's, with its own globals (round 12: an always-true __eq__ compiled under the test
                # file's own path; round 13: the test file's code in a function with other globals)
                return "" if _abspath(filename) in _trusted and raw is value and _function_ok is not None \
                    and _function_ok(value) else filename
            if _code_ok is not None and not _code_ok(code):
                return f"{filename} (its code is not that file's)"
            known = _library.get(_id(klass))
            if known is None or known[0] is not klass or not any(entry is raw for entry in known[1]):
                # a library's function as the __eq__ of a class that only says it is the library's: a str
                # subclass naming unittest.mock with mock._ANY.__eq__ passed (round 6), then one bound into a
                # module it made or into json (round 7): module namespaces are anyone's to write, so only the
                # classes taken before the repository loaded, with their __eq__, are believed
                return "<a library's __eq__ in a class strict equality does not know>"
            # the library's __eq__ reads attributes and items: a subclass's properties, methods or descriptors
            # are what it reads then (a Fraction subclass whose _numerator is a property; red team, round 4)
            return subclass_behaviour

        for klass in _mro(kind):
            items = _cdict(klass)
            found = [(key, value) for key, value in items.items() if _type(key) is _str and key in ("__eq__", "__ne__")]
            if found:  # both, when the class gives both (round 13: a believed __eq__ beside a borrowed __ne__)
                for key, value in found:
                    why = one(klass, items, key, value, subclass_behaviour)
                    if why:
                        return why
                return ""
            if _flags(klass) & _heaptype and not subclass_behaviour:
                for key, value in items.items():
                    if _type(key) is _str and key in _inert:
                        continue
                    if _type(value) is _function or _callable(value) or _has_get(_type(value)):
                        subclass_behaviour = f"<{key} of a subclass of the class whose __eq__ decides>"
                        break
        return ""

    def keys_problem(mapping, kind, _type=type, _issubclass=issubclass, _own=own_equality, _scalars=scalars,
                     _keys=dict.keys, _qualname=type.__dict__["__qualname__"].__get__, _str=str,
                     _set_iter=set.__iter__, _frozenset_iter=frozenset.__iter__, _tuple=tuple, _dict=dict,
                     _set=set):
        """Why a key of a dict (or an element of a set), read with the builtin type's own iteration, cannot be
        believed: one whose type compares by the repository's own ``__eq__`` (an enum member, a date, a
        namedtuple are fine)."""
        for key in (_keys(mapping) if _issubclass(kind, _dict) else (_set_iter(mapping) if _issubclass(kind, _set)
                                                                       else _frozenset_iter(mapping))):
            key_kind = _type(key)
            if key_kind in _scalars or key_kind is _tuple:
                continue
            where = _own(key_kind)
            if where:
                name = _qualname(key_kind)
                name = name if _type(name) is _str else "?"
                return f"a {name} key or element of a {kind.__name__} compares by the repository's own __eq__ " \
                       f"({where})"
        return ""

    def number_family(kind, _number=Number, _issubclass=issubclass, _mro=mro, _flags=type.__dict__["__flags__"].__get__,
                      _heaptype=HEAPTYPE, _builtin_numbers=(int, float, complex)):
        """Whether ``kind`` is a number: a class that derives from ``numbers.Number`` (``Fraction``), or a type
        written in C that is registered as one (``Decimal``, numpy's scalars). ``Number.register`` alone does not
        make a Python class a number: an ABC's registry is anyone's to fill (``Number.register(type(mock.ANY))``
        passed; red team, round 4)."""
        for klass in _mro(kind):
            if klass is _number or klass in _builtin_numbers:
                return True  # derives from Number, or from int, float, complex (an IntEnum)
        return not _flags(kind) & _heaptype and _issubclass(kind, _number)

    def instance_state(value, kind, _parts=instance_parts, _dict=dict):
        """The values of ``value``'s ``__dict__`` and slots, or None when they cannot be read without running
        its code (:func:`instance_parts`)."""
        parts = _parts(value, kind)
        if parts is None:
            return None
        namespace, slots = parts
        return [*(() if namespace is None else _dict.values(namespace)), *(value for _, value in slots)]

    def builtin_equality(kind, _mro=mro, _cdict=cdict, _flags=type.__dict__["__flags__"].__get__,
                         _heaptype=HEAPTYPE, _type=type, _str=str):
        """Whether the first class of ``kind``'s MRO that defines ``__eq__`` is a builtin type."""
        for klass in _mro(kind):
            for key in _cdict(klass).keys():  # noqa: SIM118 - a mappingproxy
                if _type(key) is _str and key == "__eq__":
                    return not _flags(klass) & _heaptype
        return True

    def element(value, _type=type, _scalars=scalars, _issubclass=issubclass, _own=own_equality,
                _qualname=type.__dict__["__qualname__"].__get__, _str=str, _kinds=tuple(scalars | containers),
                _number_family=number_family, _list=list, _tuple=tuple, _dict=dict, _set=set, _frozenset=frozenset,
                _budget=1_000_000, _state=instance_state, _builtin_eq=builtin_equality):
        """Why ``value``, or anything inside it, may not be believed equal to whatever builtin value it was matched
        with, or '' (for ``assertCountEqual``, and for every object strict equality believes: each object on its
        own, at any depth, read with the builtin types' own iteration, and a Python class's instance with the
        values of its ``__dict__`` and slots)."""
        stack, budget = [value], [_budget]
        while stack:
            item = stack.pop()
            kind = _type(item)
            budget[0] -= 1
            if budget[0] < 0:
                return f"more than {_budget} elements to check: too many"
            if kind in _scalars:
                continue
            if _issubclass(kind, type):  # a class inside a believed object's state (an enum member's class)
                where = _own(kind)
                if where:
                    return f"a class whose metaclass compares by the repository's own __eq__ ({where})"
                continue
            if kind not in _kinds:
                name = _qualname(kind)
                name = name if _type(name) is _str else "?"
                if not (_number_family(kind) or _issubclass(kind, _kinds)):
                    return f"a {name} was matched with builtin values: strict equality wants builtin values"
                where = _own(kind)
                if where:
                    return f"a {name} was matched with builtin values by the repository's own __eq__ ({where})"
                if not _builtin_eq(kind):  # what a library's Python __eq__ reads: a Fraction's _numerator (round 6)
                    state = _state(item, kind)
                    if state is None:
                        return f"a {name} whose state cannot be read without running its code"
                    stack.extend(state)
            if _issubclass(kind, _dict):
                stack.extend(_dict.keys(item))
                stack.extend(_dict.values(item))
            else:
                for base in (_list, _tuple, _set, _frozenset):
                    if _issubclass(kind, base):
                        stack.extend(base.__iter__(item))
                        break
        return ""

    def storage_equal(value, expected, kind, _list=list, _tuple=tuple, _dict=dict, _set=set, _frozenset=frozenset,
                      _str=str, _bytes=bytes, _int=int, _float=float, _complex=complex):
        """Whether ``value``'s builtin contents, copied into an exact ``kind`` in C, equal ``expected``."""
        copy = (_list(_list.__iter__(value)) if kind is _list else _tuple(_tuple.__iter__(value)) if kind is _tuple
                else _dict(_dict.items(value)) if kind is _dict else _set(_set.__iter__(value)) if kind is _set
                else _frozenset(_frozenset.__iter__(value)) if kind is _frozenset else _str.__str__(value)
                if kind is _str else _bytes.__bytes__(value) if kind is _bytes else _int.__int__(value)
                if kind is _int else _float.__float__(value) if kind is _float else _complex.__complex__(value)
                if kind is _complex else None)
        return copy is not None and copy == expected

    def fixed_equality(kind, _mro=mro, _cdict=cdict, _type=type, _str=str,
                       _flags=type.__dict__["__flags__"].__get__, _heaptype=HEAPTYPE, _values=value_deciders):
        """The class whose ``__eq__`` decides for ``kind`` when that ``__eq__`` is no Python code, else None: the
        first class of its MRO that defines ``__eq__``, written in C (``object``: identity, for an enum member, a
        sentinel, a function; a standard library value type such as ``date`` or ``Decimal``; a builtin type for its
        subclass: an ``IntEnum`` member, a namedtuple, an ``OrderedDict``; a C wrapper), or one of the library
        value classes in ``_values`` (``Fraction``, ``UUID``), taken by identity before the repository loads. Such
        a value equals an object of another type only by its storage, or when that object's ``__eq__`` says so."""
        for klass in _mro(kind):
            for key in _cdict(klass).keys():  # noqa: SIM118 - a mappingproxy
                if _type(key) is _str and key == "__eq__":
                    if not _flags(klass) & _heaptype or any(klass is v for v in _values):
                        return klass
                    return None
        return None

    def foreign_problem(a, b, kind_a, kind_b, exempt, _fixed=fixed_equality, _own=own_equality,
                        _qualname=type.__dict__["__qualname__"].__get__, _type=type, _str=str,
                        _values=value_deciders, _identity=object):
        """Why a pair of two non-builtin objects cannot be believed when one side's ``==`` is fixed (C code:
        identity, a standard library value type's, a builtin type's for its subclass) and the other is of another
        type: an ``__eq__`` of the repository's (``assertEqual(status(), Status.OK)`` or ``== date(2020, 1, 1)``
        passed with an object equal to anything: red team, round 7), or one that is no believable storage
        comparison: against a value type only another value type (Decimal's C ``==`` reads a registered
        ``Rational``'s ``numerator`` property, which is the repository's; round 8), against identity or a
        builtin's only identity or a value type (a ``mappingproxy`` or ``weakref.proxy`` hands ``==`` to the
        object it wraps; round 8). The judge then decides what it can rebuild on the untouched code."""
        for expected, other, kind, other_kind, side in ((a, b, kind_a, kind_b, 1), (b, a, kind_b, kind_a, 0)):
            if other_kind is kind:
                continue
            decider = _fixed(kind)
            if decider is None:
                continue
            if exempt is not None and exempt(side, other):
                continue
            name, expected_name = _qualname(other_kind), _qualname(kind)
            name = name if _type(name) is _str else "?"
            expected_name = expected_name if _type(expected_name) is _str else "?"
            where = _own(other_kind)
            if where:
                return (f"a {name} was compared with a {expected_name} by the repository's own __eq__ ({where})")
            other_decider = _fixed(other_kind)
            if other_decider is None:
                continue  # a library __eq__ strict equality believes (a Fraction), or the test files' own
            value_side = any(decider is v for v in _values)
            other_value = any(other_decider is v for v in _values)
            if value_side and not other_value or not value_side and not (other_value or other_decider is _identity):
                return f"a {name} was compared with a {expected_name}: strict equality wants a {expected_name}"
        return ""

    def repository_problem(a, b, kind_a, kind_b, exempt, _own=own_equality, _type=type, _str=str,
                           _qualname=type.__dict__["__qualname__"].__get__):
        """Why a pair of two non-builtin objects cannot be believed when either side's ``==`` is the repository's:
        the agent can rewrite that ``__eq__`` to say True (``assertEqual(version(), Version("1.2"))`` passed with
        ``Version.__eq__`` returning True and the wrong version; both sides were the same repository class, which
        strict equality left to the class's own rule). The judge then decides on the untouched class. A side whose
        other object is the test's own expectation (:meth:`Guard.test_written`) is excused, as against a builtin
        value."""
        for mine, other, kind, other_side in ((a, b, kind_a, 1), (b, a, kind_b, 0)):
            where = _own(kind)
            if not where:
                continue
            if exempt is not None and exempt(other_side, other):
                continue
            name, other_name = _qualname(kind), _qualname(kind_b if other_side else kind_a)
            name = name if _type(name) is _str else "?"
            other_name = other_name if _type(other_name) is _str else "?"
            return f"a {name} was compared with a {other_name} by the repository's own __eq__ ({where})"
        return ""

    def problem(first, second, exempt=None, _type=type, _issubclass=issubclass, _len=len, _range=range,
                _scalars=scalars, _containers=containers, _numbers=numbers, _own=own_equality,
                _qualname=type.__dict__["__qualname__"].__get__, _keys_problem=keys_problem, _list=list,
                _tuple=tuple, _dict=dict, _set=set, _frozenset=frozenset, _str=str, _budget=1_000_000,
                _number_family=number_family, _element=element, _builtin_eq=builtin_equality,
                _storage_equal=storage_equal, _id=id, _foreign=foreign_problem, _repository=repository_problem,
                _base=lambda kind, _mro=mro, _bases=(list, tuple, dict, set, frozenset): next(
                    (klass for klass in _mro(kind) for base in _bases if klass is base), None),
                _deque=collections.deque, _deque_iter=collections.deque.__iter__,
                _namespace=SimpleNamespace, _namespace_dict=SimpleNamespace.__dict__["__dict__"].__get__,
                _fixed=fixed_equality, _argparse=argparse_namespace, _mro=mro):
        stack, budget, seen = [(first, second)], [_budget], set()  # pairs: (an element of first, one of second)
        while stack:
            a, b = stack.pop()
            pair = (_id(a), _id(b))
            if pair in seen:  # a self-referencing structure: this pair is being checked already
                continue
            seen.add(pair)
            budget[0] -= 1
            if budget[0] < 0:  # refused, not waved through: an always-equal object may sit past any budget
                return f"more than {_budget} pairs of elements compared: too many to check"
            kind_a, kind_b = _type(a), _type(b)
            walk_only = False  # two subclasses of one builtin container, their == believed: only their contents
            if kind_a in _scalars or kind_a in _containers:
                expected, other, kind, other_kind, side = a, b, kind_a, kind_b, 1
            elif kind_b in _scalars or kind_b in _containers:
                expected, other, kind, other_kind, side = b, a, kind_b, kind_a, 0
            else:  # neither side is a builtin value: the objects' own rule, unless it is the repository's
                why = _foreign(a, b, kind_a, kind_b, exempt) or _repository(a, b, kind_a, kind_b, exempt)
                if why:
                    return why
                # a rule strict equality believes (C's, a library's) still compares what the two hold by *their*
                # ==: a namedtuple's or an OrderedDict's items, a deque's, a namespace's attributes, a Fraction's
                # numerator (red team, round 10: a namedtuple of the package's Versions passed with Version.__eq__
                # rewritten). Their contents are walked as a builtin container's are.
                base = _base(kind_a)
                if base is None or base is not _base(kind_b):
                    if kind_a is _deque and kind_b is _deque:
                        items_a, items_b = _list(_deque_iter(a)), _list(_deque_iter(b))
                        if _len(items_a) != _len(items_b):
                            return "two deques of different lengths compared equal: strict equality cannot pair them"
                        stack += [(items_a[i], items_b[i]) for i in _range(_len(items_a))]
                    elif kind_a is _namespace and kind_b is _namespace:
                        stack.append((_namespace_dict(a), _namespace_dict(b)))
                    elif any(klass is _argparse[0] for kind in (kind_a, kind_b) for klass in _mro(kind)):
                        # argparse's own Namespace only, with its == as it was: a subclass, or a class the code
                        # under test changed, could show vars() another dict than the one walked here
                        if kind_a is not _argparse[0] or kind_b is not _argparse[0] or not _argparse[2]():
                            return f"a {_qualname(kind_a)} was compared with a {_qualname(kind_b)}: strict " \
                                   "equality walks only argparse's own Namespace, as argparse defined it"
                        stack.append((_argparse[1](a), _argparse[1](b)))
                    else:
                        why = (_element(a) or _element(b)) if _fixed(kind_a) is not None and \
                            _fixed(kind_a) is _fixed(kind_b) and not _builtin_eq(kind_a) else ""
                        if why:  # a library value's (a Fraction's) state must be believable too
                            return f"a {_qualname(kind_a)} was compared with a {_qualname(kind_b)}: {why}"
                    continue
                expected, other, kind, other_kind, side, walk_only = a, b, base, kind_b, 1, True
            if not walk_only and other_kind is not kind and not (kind in _numbers and other_kind in _numbers):
                if exempt is not None and exempt(side, other):
                    continue  # an object of the test's own expectation, written in its source
                name = _qualname(other_kind)
                name = name if _type(name) is _str else "?"
                family = _number_family(other_kind) if kind in _numbers else _issubclass(other_kind, kind) or (
                    kind in (_set, _frozenset) and _issubclass(other_kind, (_set, _frozenset)))
                if not family:
                    return f"a {name} was compared with a {kind.__name__}: strict equality wants a {kind.__name__}"
                where = _own(other_kind)
                if where:
                    return f"a {name} was compared with a {kind.__name__} by the repository's own __eq__ ({where})"
                where = _element(other)  # what its (library's) __eq__ reads must be believable too
                if where:
                    return f"a {name} was compared with a {kind.__name__}: {where}"
                if _issubclass(other_kind, kind) and not _builtin_eq(other_kind) and \
                        not _storage_equal(other, expected, kind):
                    # a library __eq__ more lenient than the data it holds: mock's _Call with an empty name
                    # equals a call of any name (red team, round 7)
                    return f"a {name} was compared with a {kind.__name__} that its builtin contents do not equal"
            if kind in (_list, _tuple) and _issubclass(other_kind, (_list, _tuple)):
                length_a = (_list.__len__ if _issubclass(_type(a), _list) else _tuple.__len__)(a)
                length_b = (_list.__len__ if _issubclass(_type(b), _list) else _tuple.__len__)(b)
                if length_a != length_b:  # equal, yet of another length: a subclass's own __eq__ decided, one the
                    # rule let through (a library's: mock's _Call holding ANY equalled a shorter tuple; red team)
                    return f"a {_qualname(other_kind)} of another length was compared with a {kind.__name__}: " \
                           "strict equality cannot pair their elements"
                item_a = _list.__getitem__ if _issubclass(_type(a), _list) else _tuple.__getitem__
                item_b = _list.__getitem__ if _issubclass(_type(b), _list) else _tuple.__getitem__
                stack += [(item_a(a, i), item_b(b, i)) for i in _range(length_a)]
            elif kind is _dict and _issubclass(other_kind, _dict):
                why = _keys_problem(other, other_kind) or _keys_problem(expected, kind)
                if why:
                    return why
                for key in _dict.keys(expected):  # keys are builtin values now: hashing and == run no code of theirs
                    if _dict.__contains__(other, key):
                        pair = (_dict.__getitem__(expected, key), _dict.__getitem__(other, key))
                        stack.append(pair if side == 1 else (pair[1], pair[0]))
            elif kind in (_set, _frozenset) and _issubclass(other_kind, (_set, _frozenset)):
                why = _keys_problem(other, other_kind) or _keys_problem(expected, kind)
                if why:
                    return why
        return ""

    def overrides(kind, names, _mro=mro, _cdict=cdict, _flags=type.__dict__["__flags__"].__get__, _type=type,
                  _str=str, _heaptype=HEAPTYPE, _qualname=type.__dict__["__qualname__"].__get__):
        """Which of ``names`` (the operations an assertion uses besides ``==``) a Python subclass of a builtin type
        defines for itself, or '': ``assertSetEqual`` calls ``difference``, ``assertAlmostEqual`` subtracts,
        ``assertSequenceEqual`` indexes, ``assertIn`` iterates (red team, round 6: a set subclass whose
        ``difference`` was empty, a float subclass whose ``__sub__`` gave 0 passed)."""
        for klass in _mro(kind):
            if not _flags(klass) & _heaptype:
                return ""
            for key in _cdict(klass).keys():  # noqa: SIM118 - a mappingproxy
                if _type(key) is _str and key in names:
                    name = _qualname(klass)
                    return f"a {name if _type(name) is _str else '?'} defines its own {key}"
        return ""

    problem.element = element
    problem.overrides = overrides
    problem.own = own_equality
    return problem


def strict_assertions(test_case, problem, guard=None, dispute=None):
    """unittest's equality assertions (``assertEqual`` and the type-specific ``assertDictEqual``,
    ``assertListEqual``, ``assertTupleEqual``, ``assertSetEqual``, ``assertSequenceEqual``,
    ``assertMultiLineEqual``, and ``assertAlmostEqual``, whose first step is ``first == second``), ``assertIn`` and
    ``assertCountEqual``, each also applying ``problem`` (strict equality) once the ordinary assertion held; set
    on the framework's class before the snapshot, so they are the framework's own. With ``guard``, the objects of
    an argument that the calling test writes as its own expectation are excused (see :meth:`Guard.test_written`).

    A type-specific assertion that unittest's own ``assertEqual`` calls is left to that ``assertEqual`` (whose
    arguments the test wrote); one a test calls itself is checked like ``assertEqual``: a dict subclass equal to
    anything passed ``assertDictEqual`` before (a red-team finding). Each wrapper is written out with the
    original's signature and takes what it needs as defaults: a closure cell can be swapped silently
    (``cell_contents``), a default only through ``__defaults__``, which the audit hook reports, and keyword-only
    defaults live in a plain dict (``__kwdefaults__``), so there are none.

    With ``dispute`` (:func:`make_dispute`, given when the parent holds the package's untouched tree), a pair
    that strict equality refuses is handed to the parent's judge instead of failing here."""
    import unittest.case
    from unittest.util import safe_repr

    framework_file = os.path.abspath(unittest.case.__file__)
    builtin_kinds = (str, bytes, int, float, complex, bool, type(None), list, tuple, dict, set, frozenset)
    original = {name: getattr(test_case, name) for name in (
        "assertEqual", "assertDictEqual", "assertListEqual", "assertTupleEqual", "assertSetEqual",
        "assertSequenceEqual", "assertMultiLineEqual", "assertAlmostEqual", "assertIn", "assertCountEqual",
        "assertNotEqual")}

    def check(self, first, second, msg, caller, names, original, args, operations=(), op="==", _guard=guard,
              _problem=problem, _framework=framework_file, _abspath=os.path.abspath, _dispute=dispute, _type=type,
              _overrides=problem.overrides):
        """Run the equality assertion ``original(*args)`` unless strict equality refuses the pair (not when
        unittest's own ``assertEqual`` is the caller: it checks for itself). The rule is applied *before* the
        comparison, so a refused object's ``__eq__`` never runs against the test's expectation: an ``__eq__``
        that saw the expected value in a failing canary and remembered it passed the real test later with a
        plain copy (red team, round 5), and one that copied the other side into its object was believed. A
        refused pair fails here, or, with ``dispute``, is frozen as it is and handed to the parent's judge,
        which decides it on the package's untouched code."""
        if _abspath(caller.f_code.co_filename) == _framework:
            original(*args)
            return
        for side in (first, second) if operations else ():
            why = _overrides(_type(side), operations)
            if why:
                raise self.failureException(self._formatMessage(msg, "strict equality: " + why))

        def refused():
            why = _problem(first, second)
            if why and _guard is not None:
                why = _problem(first, second, _guard.exemption(caller, lambda side: _guard.argument_node(
                    caller, side, names[side])))
            return why

        why = refused()
        if why:
            frozen = b""
            if _dispute is not None:
                matchers = _guard.test_matchers(caller, lambda side: _guard.argument_node(caller, side, names[side]),
                                                (first, second)) if _guard is not None else ()
                frozen = _dispute.freeze(first, second, op, matchers)
            if frozen:
                _dispute(frozen, why)  # the parent's judge decides, with the package's untouched ==
                return
            raise self.failureException(self._formatMessage(msg, "strict equality: " + why))
        original(*args)
        why = refused()  # only believable objects compared: nothing of theirs could change a type meanwhile
        if why:
            raise self.failureException(self._formatMessage(msg, "strict equality: " + why))

    def _getAssertEqualityFunc(self, first, second, _type=type, _dict=dict, _str=str, _method=MethodType,
                               _instance_dict=object.__getattribute__, _defaults=DEFAULT_EQUALITY_FUNCS,
                               _guard=guard, _func=MethodType.__dict__["__func__"].__get__, _getattr=getattr):
        """The asserter unittest's ``assertEqual`` calls, chosen as unittest chooses it (the test's
        ``_type_equality_funcs`` entry for ``type(first)`` when both sides are of that type, else
        ``_baseAssertEqual``), with two differences. The entry is found by the *identity* of its key, never through
        a key's ``__hash__`` or ``__eq__``: the code under test hid a lenient function under a key that hashed and
        compared like ``str`` (red team, round 16). And it is believed only when it is unittest's own default for
        that type (a method name, found through :class:`LockedMethod`) or a function of the test files
        (``addTypeEqualityFunc`` in a test's ``setUp``); anything else is an asserter that fails. The code under
        test put a lenient function in the table (round 15), and set this method itself on the running test
        (round 16): it is a :class:`LockedMethod` now, like every asserter it can return."""
        kind = _type(first)
        try:
            table = _dict.get(_instance_dict(self, "__dict__"), "_type_equality_funcs")
        except AttributeError:
            table = None
        why = ""
        if table is not None and kind is _type(second):
            if _type(table) is not _dict:
                why = "the test's table of equality functions is no dict"
            for key, entry in _dict.items(table) if not why else ():
                if key is not kind:
                    continue
                if _type(entry) is _str:
                    if any(k is kind and v == entry for k, v in _defaults):
                        return _getattr(self, entry)
                    why = f"the test's equality function for {kind.__name__} names another method"
                    break
                function = _func(entry) if _type(entry) is _method else entry
                if _guard is not None and _guard.function_ok(function):
                    return entry
                why = f"the test's equality function for {kind.__name__} is not the test files' code"
                break
        if not why:
            return self._baseAssertEqual

        def refused(first, second, msg=None, _self=self, _why=why):
            raise _self.failureException(_self._formatMessage(msg, "strict equality: " + _why))
        return refused

    def assertEqual(self, first, second, msg=None, _original=original["assertEqual"], _check=check,
                    _getframe=sys._getframe):  # unittest's assertEqual picks its asserter: _getAssertEqualityFunc
        _check(self, first, second, msg, _getframe(1), ("first", "second"), _original, (self, first, second, msg))

    def assertNotEqual(self, first, second, msg=None, _original=original["assertNotEqual"], _check=check,
                       _getframe=sys._getframe):  # round 12: an always-true __ne__ passed assertNotEqual
        _check(self, first, second, msg, _getframe(1), ("first", "second"), _original, (self, first, second, msg),
               (), "!=")

    def assertDictEqual(self, d1, d2, msg=None, _original=original["assertDictEqual"], _check=check,
                        _getframe=sys._getframe):
        _check(self, d1, d2, msg, _getframe(1), ("d1", "d2"), _original, (self, d1, d2, msg))

    def assertListEqual(self, list1, list2, msg=None, _original=original["assertListEqual"], _check=check,
                        _getframe=sys._getframe):
        _check(self, list1, list2, msg, _getframe(1), ("list1", "list2"), _original, (self, list1, list2, msg))

    def assertTupleEqual(self, tuple1, tuple2, msg=None, _original=original["assertTupleEqual"], _check=check,
                         _getframe=sys._getframe):
        _check(self, tuple1, tuple2, msg, _getframe(1), ("tuple1", "tuple2"), _original,
               (self, tuple1, tuple2, msg))

    def assertSetEqual(self, set1, set2, msg=None, _original=original["assertSetEqual"], _check=check,
                       _getframe=sys._getframe, _operations=SET_OPERATIONS):
        _check(self, set1, set2, msg, _getframe(1), ("set1", "set2"), _original, (self, set1, set2, msg),
               _operations)

    def assertSequenceEqual(self, seq1, seq2, msg=None, seq_type=None, _original=original["assertSequenceEqual"],
                            _check=check, _getframe=sys._getframe, _list=list, _tuple=tuple, _issubclass=issubclass,
                            _type=type, _overrides=problem.overrides, _operations=SEQUENCE_OPERATIONS):
        args = (self, seq1, seq2, msg, seq_type)
        for side in (seq1, seq2):  # the originals are what unittest compares: their own operations are refused
            why = _overrides(_type(side), _operations)
            if why:
                raise self.failureException(self._formatMessage(msg, "strict equality: " + why))
        if _issubclass(_type(seq1), (_list, _tuple)) and _issubclass(_type(seq2), (_list, _tuple)):
            # item by item, whatever the two sequence types (as unittest compares them): each read with the
            # builtin type's own iteration
            seq1, seq2 = [_list(_list.__iter__(s) if _issubclass(_type(s), _list) else _tuple.__iter__(s))
                          for s in (seq1, seq2)]
        _check(self, seq1, seq2, msg, _getframe(1), ("seq1", "seq2"), _original, args)

    def assertMultiLineEqual(self, first, second, msg=None, _original=original["assertMultiLineEqual"], _check=check,
                             _getframe=sys._getframe):
        _check(self, first, second, msg, _getframe(1), ("first", "second"), _original, (self, first, second, msg))

    def assertAlmostEqual(self, first, second, places=None, msg=None, delta=None,
                          _original=original["assertAlmostEqual"], _check=check, _getframe=sys._getframe,
                          _operations=NUMBER_OPERATIONS):
        _check(self, first, second, msg, _getframe(1), ("first", "second"), _original,
               (self, first, second, places, msg, delta), _operations)

    def assertIn(self, member, container, msg=None, _contains=original["assertIn"], _problem=problem, _type=type,
                 _safe_repr=safe_repr, _dispute=dispute, _list=list, _tuple=tuple, _set=set, _frozenset=frozenset,
                 _dict=dict, _own=problem.own, _overrides=problem.overrides, _operations=CONTAINER_OPERATIONS,
                 _base_container=base_container):
        kind, base = _type(container), _base_container(_type(container))
        if base is None:  # another container: plain `in`, unless the member compares by the repository's own __eq__
            why = _own(_type(member))
            if why:
                raise self.failureException(self._formatMessage(msg, "strict equality: a member that compares by "
                                                                f"the repository's own __eq__ ({why})"))
            _contains(self, member, container, msg)
            return
        why = _overrides(kind, _operations)
        if why:  # a builtin container's subclass with its own __contains__ or iteration answers for itself
            raise self.failureException(self._formatMessage(msg, "strict equality: " + why))
        # the items read once with the builtin type's own iteration: the believable ones are compared (each once:
        # `in`, then a second comparison to find the equal items, let an __eq__ that alternates True and False
        # give two answers; a red-team finding), a refused one never (its __eq__ would see the member)
        items = _list((_list.__iter__ if base is _list else _tuple.__iter__ if base is _tuple
                       else _set.__iter__ if base is _set else _frozenset.__iter__ if base is _frozenset
                       else _dict.keys)(container))
        found = [(item, _problem(item, member)) for item in items]
        for item, why in found:
            if not why and (item is member or item == member):
                return
        refused = [(item, why) for item, why in found if why]
        if not refused:
            raise self.failureException(self._formatMessage(
                msg, f"{_safe_repr(member)} not found in {_safe_repr(container)}"))
        frozen = _dispute.freeze([item for item, _ in refused], member, "in") if _dispute is not None else b""
        if frozen:
            _dispute(frozen, refused[0][1])
            return
        raise self.failureException(self._formatMessage(msg, "strict equality: " + refused[0][1]))

    def assertCountEqual(self, first, second, msg=None, _count_equal=original["assertCountEqual"], _list=list,
                         _element=problem.element, _type=type, _any=any, _builtin=builtin_kinds):
        first, second = _list(first), _list(second)
        for one, other in ((first, second), (second, first)):  # which item matches which is unknown: each one
            if _any(_type(item) in _builtin for item in other):  # facing builtin values must be believable alone,
                for item in one:  # checked before any comparison runs (see check)
                    why = _element(item)
                    if why:
                        raise self.failureException(self._formatMessage(msg, "strict equality: " + why))
        _count_equal(self, first, second, msg)

    for function in (assertEqual, assertDictEqual, assertListEqual, assertTupleEqual, assertSetEqual,
                     assertSequenceEqual, assertMultiLineEqual, assertAlmostEqual, assertIn, assertCountEqual,
                     assertNotEqual, _getAssertEqualityFunc):
        setattr(test_case, function.__name__, function)


# unittest's own equality functions by type, as TestCase.__init__ registers them (method names)
DEFAULT_EQUALITY_FUNCS = ((dict, "assertDictEqual"), (list, "assertListEqual"), (tuple, "assertTupleEqual"),
                          (set, "assertSetEqual"), (frozenset, "assertSetEqual"), (str, "assertMultiLineEqual"))


class LockedMethod(tuple):
    """A test framework's method as a data descriptor (its function held in a tuple, which no Python code can
    change): an attribute of that name set on a test instance can neither shadow it nor be written. The code under
    test found the running test through its caller's frame and set ``self.assertEqual`` to a function that let
    every later wrong answer pass (red team, round 14); a test file's own subclass still overrides the method as
    before."""

    __slots__ = ()

    def __get__(self, obj, owner=None, _item=tuple.__getitem__, _method=MethodType):
        return _item(self, 0) if obj is None else _method(_item(self, 0), obj)

    def __set__(self, obj, value, _item=tuple.__getitem__):
        raise AttributeError(f"{_item(self, 0).__name__} of a running test cannot be replaced")

    def __delete__(self, obj):
        self.__set__(obj, None)


# TestCase's helpers that its assertions call through ``self`` (an attribute set on the running test would shadow
# them): the asserter assertEqual picks, the one it falls back to, and the failure messages (red team, round 16)
ASSERTION_HELPERS = ("_getAssertEqualityFunc", "_baseAssertEqual", "_formatMessage", "_truncateMessage")


def lock_assertions(test_case):
    """Every ``assert*`` and ``fail*`` method of ``test_case`` (unittest's ``TestCase``, after the strict ones are
    in place), and the :data:`ASSERTION_HELPERS` they call, as a :class:`LockedMethod`."""
    for name, value in list(vars(test_case).items()):
        if (name.startswith(("assert", "fail")) or name in ASSERTION_HELPERS) and type(value) is FunctionType:
            setattr(test_case, name, LockedMethod((value,)))


def strict_functions(*functions):
    """A namespace of ``functions`` and every function their defaults hold (and ``problem.element``), for the
    snapshot: the audit hook then reports a write to any of their ``__defaults__`` or ``__code__``
    (:func:`protected_ids`)."""
    from types import FunctionType, SimpleNamespace

    seen, stack = [], [f for f in functions if f is not None]
    while stack:
        function = stack.pop()
        if type(function) is not FunctionType or any(function is s for s in seen):
            continue
        seen.append(function)
        stack += [d for d in (function.__defaults__ or ()) if type(d) is FunctionType]
        stack += [v for v in (function.__kwdefaults__ or {}).values() if type(v) is FunctionType]
        stack += [v for v in vars(function).values() if type(v) is FunctionType]
    return SimpleNamespace(**{f"strict_{index}": function for index, function in enumerate(seen)})


# what each assertion does besides ==: a Python subclass of a builtin type that defines any of these is refused
SET_OPERATIONS = frozenset(("__eq__", "__ne__", "difference", "__len__", "__iter__", "__contains__", "__sub__"))
SEQUENCE_OPERATIONS = frozenset(("__eq__", "__ne__", "__len__", "__getitem__", "__iter__"))
NUMBER_OPERATIONS = frozenset(("__eq__", "__ne__", "__sub__", "__rsub__", "__abs__", "__round__", "__lt__", "__le__",
                               "__gt__", "__ge__", "__neg__", "__float__", "__index__", "__int__"))
CONTAINER_OPERATIONS = frozenset(("__contains__",))  # `in` on a builtin container's subclass calls only this


def base_container(kind, _mro=type.__dict__["__mro__"].__get__, _flags=type.__dict__["__flags__"].__get__):
    """The builtin container (list, tuple, set, frozenset, dict) that ``kind`` is or derives from, else None."""
    for klass in _mro(kind):
        if not _flags(klass) & HEAPTYPE:
            for base in (list, tuple, set, frozenset, dict):
                if klass is base:
                    return base
            return None
    return None


FROZEN_BASES = ((dict, "dict"), (list, "list"), (tuple, "tuple"), (set, "set"), (frozenset, "frozenset"),
                (str, "str"), (bytes, "bytes"), (int, "int"), (float, "float"), (complex, "complex"),
                (object, "object"), (io.IOBase.__mro__[1], "iobase"))  # iobase: io's C base, its state in __dict__
FROZEN_SCALARS = (int, bool, float, complex, str, bytes, type(None))


def value_kinds():
    """``((name, class, read), ...)``: the standard library's value types that strict equality holds a repository
    ``__eq__`` to, as it does a builtin value, and that a dispute freezes (``read(value)``: the arguments that
    rebuild it, read from its C storage by the base type's own descriptors, so no code of a subclass runs). The
    judge rebuilds them by name (``judge.VALUES``; tests/test_swe_judge.py keeps the two equal). Taken when the
    test process starts, before the repository loads."""
    import datetime
    import decimal

    date, moment, clock, delta = datetime.date, datetime.datetime, datetime.time, datetime.timedelta

    def getters(kind, names):
        return tuple(kind.__dict__[name].__get__ for name in names)

    # bound as defaults, as everything strict equality calls is: a closure cell can be swapped silently
    day = getters(date, ("year", "month", "day"))
    hour = ("hour", "minute", "second", "microsecond", "tzinfo", "fold")
    moment_fields, clock_fields = day + getters(moment, hour), getters(clock, hour)
    delta_fields = getters(delta, ("days", "seconds", "microseconds"))

    def read_date(value, _get=day):
        return [get(value) for get in _get]

    def read_datetime(value, _get=moment_fields):
        return [get(value) for get in _get]

    def read_time(value, _get=clock_fields):
        return [get(value) for get in _get]

    def read_timedelta(value, _get=delta_fields):
        return [get(value) for get in _get]

    def read_timezone(value, _args=datetime.timezone.__getinitargs__, _list=list):
        return _list(_args(value))

    def read_decimal(value, _str=decimal.Decimal.__str__):
        return [_str(value)]

    def read_tzinfo(value):  # an abstract base without storage: a subclass's state is its __dict__ and slots
        return []

    return (("datetime.date", date, read_date), ("datetime.datetime", moment, read_datetime),
            ("datetime.time", clock, read_time), ("datetime.timedelta", delta, read_timedelta),
            ("datetime.timezone", datetime.timezone, read_timezone), ("datetime.tzinfo", datetime.tzinfo, read_tzinfo),
            ("decimal.Decimal", decimal.Decimal, read_decimal))


def proxy_reader():
    """``read(proxy)``: the ``OrderedDict`` a ``mappingproxy`` shows (an ``inspect.Signature`` keeps its parameters
    so), or None for any other mapping. Python has no way to it that runs no code of the mapping's (``items()``
    calls the mapping's own method, which a mapping class of the agent's answers as it likes) but the collector,
    and the runner's audit hook forbids ``gc.get_referents`` of any proxy: a class's ``__dict__`` proxy leads to
    the class's writable dict. So the proxy's one field, and the type of the object it points to, are read from
    memory (ctypes; the layout checked: ``PyObject_HEAD``, then the mapping, whose type is the last field of its
    own head), and the mapping is taken only when that type is exactly ``OrderedDict``: a class's dict is always
    an exact ``dict``, so no class's dict is ever held. Without ctypes, or on another layout, None."""
    try:
        import ctypes
    except ImportError:
        return lambda proxy: None
    head, pointer, ordered = object.__basicsize__, ctypes.sizeof(ctypes.c_void_p), id(collections.OrderedDict)
    if MappingProxyType.__basicsize__ != head + pointer:
        return lambda proxy: None

    def read(proxy, _type=type, _id=id, _proxy=MappingProxyType, _address=ctypes.c_void_p.from_address,
             _object=ctypes.py_object.from_address, _ordered=ordered, _head=head, _pointer=pointer):
        if _type(proxy) is not _proxy:
            return None
        mapping = _address(_id(proxy) + _head).value
        if not mapping or _address(mapping + _head - _pointer).value != _ordered:
            return None
        return _object(_id(proxy) + _head).value

    return read


def make_dispute(event, node_budget=200_000, byte_budget=4_000_000):
    """``dispute(frozen, why)``: hand a pair that strict equality refused to the parent, which has the package's
    untouched tree, and let the test go on; ``dispute.freeze(first, second, op, matchers)``: the pair as bytes,
    taken *before* the test's comparison runs (so an ``__eq__`` that copies the other side into its object is
    judged on the object as made), or ``b""`` when it cannot be handed over (then the assertion fails as before).
    ``op`` is what the judge checks: ``"=="`` (``first == second``), ``"!="`` or ``"in"`` (``second in first``);
    ``matchers``: the sides (0, 1) that are the test's own matcher made where it compares
    (:meth:`Guard.test_matchers`), written as their class's name when they hold no state (the judge makes one of
    the untouched test class, whose reflected ``==`` Python then takes where the package's returns NotImplemented).

    The pair is *frozen*, never compared here: every object becomes a node of builtin data (a flat table, shared
    objects and cycles by index), an instance of a Python class becomes its class's module and qualified name,
    its builtin base's contents, its ``__dict__`` and its slots. No code of the compared objects runs while it is
    read: types come from ``type``, class dicts and MROs from ``type``'s own descriptors, kinds are matched by
    identity (never ``in``, which calls a metaclass's ``__eq__`` or ``__hash__``), contents from the builtin
    types' own methods, ``__dict__`` and slots from the C descriptors ``type`` made (a class whose ``__dict__``
    is anything else is refused). The standard library's value types (:func:`value_kinds`: dates,
    times, durations, timezones, Decimals), and a Python subclass of one, are written as their
    constructor's arguments, read from their C storage; an enum member, a class and a module's function by their
    names (the judge looks the very object up); a bound method as its function (or, a C one, its name) and its
    object; an in-memory buffer by its contents and position; a ``mappingproxy`` of an exact ``OrderedDict`` (an
    ``inspect.Signature``'s parameters; :func:`proxy_reader`) by that OrderedDict; any other object
    of a type written in C by its type's name only (the judge stands in an object that fails any use, or a fresh
    lock). The parent's judge (``judge.py``) rebuilds the pair from the pristine classes, compares it there
    and fails the test when the package's own ``==`` does not hold (docs/worlds/swe.md, "The package's own
    equality"). Only the parent's verdict can fail a test; a dispute never makes one pass."""
    import enum
    import marshal
    from types import BuiltinFunctionType, FunctionType, MethodType, MethodWrapperType

    values = value_kinds()
    proxy_mapping = proxy_reader()
    namespace_attributes = argparse_namespace_reader()[1]
    # in-memory buffers, frozen by their contents and position (a package's spooled file compares its buffer's)
    buffers = ((io.BytesIO, "bytes", io.BytesIO.getvalue, io.BytesIO.tell),
               (io.StringIO, "str", io.StringIO.getvalue, io.StringIO.tell))
    # the standard library's C containers a package's state holds (exact types only), read by their own C methods
    # and descriptors: (kind, tag, read) where read(value, ref) gives the node's fields
    containers = (
        (collections.OrderedDict, "odict",
         lambda value, ref, _items=collections.OrderedDict.items: [[(ref(k), ref(v)) for k, v in _items(value)]]),
        (collections.defaultdict, "defaultdict",
         lambda value, ref, _factory=collections.defaultdict.__dict__["default_factory"].__get__, _items=dict.items:
         [ref(_factory(value)), [(ref(k), ref(v)) for k, v in _items(value)]]),
        (collections.deque, "deque",
         lambda value, ref, _iter=collections.deque.__iter__, _maxlen=collections.deque.__dict__["maxlen"].__get__:
         [[ref(item) for item in _iter(value)], ref(_maxlen(value))]),
        (bytearray, "bytearray", lambda value, ref, _bytes=bytes: [_bytes(value)]),
        (slice, "slice", lambda value, ref, _get=tuple(slice.__dict__[n].__get__ for n in ("start", "stop", "step")):
         [ref(get(value)) for get in _get]),
        (SimpleNamespace, "namespace",
         lambda value, ref, _get=SimpleNamespace.__dict__["__dict__"].__get__: [ref(_get(value))]),
        (argparse.Namespace, "argparse_namespace",  # what a command-line parser returns (semver's tests)
         lambda value, ref, _get=namespace_attributes: [ref(_get(value))]),
        (re.Pattern, "pattern",  # a compiled pattern: its source and flags (round 13: an != that reads one)
         lambda value, ref, _get=(re.Pattern.__dict__["pattern"].__get__, re.Pattern.__dict__["flags"].__get__):
         [ref(get(value)) for get in _get]),
        (functools.partial, "partial",  # its function, arguments and keywords (toolz's curry holds one)
         lambda value, ref, _get=tuple(functools.partial.__dict__[n].__get__ for n in ("func", "args", "keywords")):
         [ref(get(value)) for get in _get]),
        )
    # a function's and a builtin's name, read by their own C descriptors (no code of theirs runs)
    function_names = (FunctionType.__dict__["__module__"].__get__, FunctionType.__dict__["__qualname__"].__get__)
    builtin_names = (BuiltinFunctionType.__dict__["__module__"].__get__,
                     BuiltinFunctionType.__dict__["__qualname__"].__get__)
    # an @lru_cache function or method: its names, which functools.update_wrapper wrote in its __dict__
    cached_names = tuple((lambda value, _key=key, _read=functools._lru_cache_wrapper.__dict__["__dict__"].__get__:
                          dict.get(_read(value), _key)) for key in ("__module__", "__qualname__"))
    # a bound method held as state (pyparsing's Word keeps ``self.parseImpl = self.parseImpl_regex`` and
    # ``self.re_match = self.re.match``): a Python one as its function and object, a C one (3.9's ``builtin_method``
    # too) as its object and name, read by their C descriptors
    bound_parts = (MethodType.__dict__["__func__"].__get__, MethodType.__dict__["__self__"].__get__)
    builtin_parts = tuple(BuiltinFunctionType.__dict__[name].__get__ for name in ("__self__", "__name__"))
    c_methods = ((BuiltinFunctionType, *builtin_parts), (type(re.compile("").match), *builtin_parts),
                 (MethodWrapperType, *(MethodWrapperType.__dict__[name].__get__ for name in ("__self__", "__name__"))))

    def located(module_name, qualname, _modules=sys.modules, _type=type, _str=str, _dict=dict,
                _module_dict=ModuleType.__dict__["__dict__"].__get__, _cdict=type.__dict__["__dict__"].__get__,
                _module_kind=ModuleType, _issubclass=issubclass,
                _wrappers=tuple((kind, kind.__dict__["__func__"].__get__) for kind in (staticmethod, classmethod))):
        """The object that ``module_name``.``qualname`` names in this process (the module's namespace, then each
        class's own dict, read by the C descriptors; a static or class method's function), or None."""
        value = _dict.get(_modules, module_name) if _type(_modules) is _dict else None
        for part in qualname.split("."):
            kind = _type(value)
            namespace = _module_dict(value) if kind is _module_kind else _cdict(value) if _issubclass(kind, type) \
                else None
            if namespace is None:
                return None
            value = namespace.get(part)
        for wrapper, read in _wrappers:  # a class's static or class method: the function it holds
            if _type(value) is wrapper:
                return read(value)
        return value

    def freeze(first, second, op, matchers=(), _type=type, _id=id, _len=len, _str=str, _dict=dict, _list=list,
               _tuple=tuple, _set=set, _frozenset=frozenset, _bytes=bytes, _int=int, _float=float, _complex=complex,
               _mro=type.__dict__["__mro__"].__get__, _cdict=type.__dict__["__dict__"].__get__,
               _qualname=type.__dict__["__qualname__"].__get__, _flags=type.__dict__["__flags__"].__get__,
               _module=type.__dict__["__module__"].__get__, _issubclass=issubclass,
               _heaptype=HEAPTYPE, _parts=instance_parts, _bases=FROZEN_BASES, _scalars=FROZEN_SCALARS,
               _dumps=marshal.dumps, _nodes=node_budget, _bytes_budget=byte_budget, _exception=Exception,
               _values=values, _enum=enum.Enum, _function=FunctionType, _builtin=BuiltinFunctionType,
               _function_names=function_names, _builtin_names=builtin_names, _buffers=buffers,
               _located=located, _flag=enum.Flag, _containers=containers, _module_kind=ModuleType,
               _method=MethodType, _bound_parts=bound_parts, _c_methods=c_methods,
               _cached=functools._lru_cache_wrapper, _cached_names=cached_names,
               _module_dict=ModuleType.__dict__["__dict__"].__get__, _modules=sys.modules,
               _proxy=MappingProxyType, _proxy_mapping=proxy_mapping,
               _descriptors=tuple((kind, kind.__dict__["__objclass__"].__get__, kind.__dict__["__name__"].__get__)
                                  for kind in (MethodDescriptorType, WrapperDescriptorType))):
        order, seen, nodes, claimed = [], {}, [], {}

        def claim(node, value):
            """``node`` for ``value``, or None when another object of the pair already carries its name."""
            return node if claimed.setdefault(node, _id(value)) == _id(value) else None

        def ref(value, _by_bytes=(float, complex)):
            """The node of ``value``: one per object, but one per value for a builtin scalar, whose identity says
            nothing (an interned constant the test's expectation shares, or the same text built at run time, give
            one frozen table: a reference state is a value, red team 2026-12-02)."""
            kind, key = _type(value), None
            for scalar in _scalars:
                if kind is scalar:  # (marshal's bytes for a str say whether it is interned: by value)
                    key = (kind, _dumps(value)) if kind in _by_bytes else (kind, value)  # NaN, -0.0 as themselves
            key = _id(value) if key is None else key
            index = seen.get(key)
            if index is None:
                index = seen[key] = _len(order)
                order.append(value)
            return index

        def named(items, name):
            for key, value in items:
                if _type(key) is _str and key == name:
                    return True, value
            return False, None

        def describe(value):
            kind = _type(value)
            for scalar in _scalars:
                if kind is scalar:
                    return ("v", value)
            if kind is _list:
                return ("list", [ref(item) for item in _list.__iter__(value)])
            if kind is _tuple:
                return ("tuple", [ref(item) for item in _tuple.__iter__(value)])
            if kind is _dict:
                return ("dict", [(ref(k), ref(v)) for k, v in _dict.items(value)])
            if kind is _set:
                return ("set", [ref(item) for item in _set.__iter__(value)])
            if kind is _frozenset:
                return ("frozenset", [ref(item) for item in _frozenset.__iter__(value)])
            for name, value_kind, read in _values:
                if kind is value_kind:  # a date, a timedelta, a Decimal: rebuilt from its arguments
                    return ("value", name, [ref(item) for item in read(value)])
            if kind is _method:
                return ("bound", ref(_bound_parts[0](value)), ref(_bound_parts[1](value)))
            for c_method, read_owner, read_name in _c_methods:  # (a method-wrapper: ``text.__eq__``)
                if kind is c_method:
                    owner = read_owner(value)
                    if owner is not None and _type(owner) is not _module_kind:  # else a module's: by its name
                        name = read_name(value)
                        return ("cmethod", ref(owner), name) if _type(name) is _str else None
            # what is compared by identity is named, not rebuilt: the judge looks the very object up by its name.
            # A name is the object's to say (__qualname__, _name_ are writable), so it must lead back to the very
            # object here (else an opaque stand-in), and no two objects of a pair may carry one name (a forgery:
            # refused; red team, round 9: a wrong member whose _name_ said OK, a class renamed to the expected one)
            if _issubclass(kind, type) or kind is _function or kind is _builtin or kind is _cached:  # a class, a
                names = (_module, _qualname) if _issubclass(kind, type) else \
                    _function_names if kind is _function else _builtin_names if kind is _builtin else _cached_names
                module, qualname = names[0](value), names[1](value)
                if _type(module) is not _str or _type(qualname) is not _str:
                    return None
                if _located(module, qualname) is not value:  # no name leads to it (made inside a function):
                    if kind is _function or kind is type:  # their == is C's identity, which nothing can change
                        return ("identity", module, qualname)  # (a metaclass's may): a stand-in equal to itself
                    return ("opaque", module, qualname)
                return claim(("class" if _issubclass(kind, type) else "function", module, qualname), value)
            if kind is _module_kind:  # a module (a backend held as state): by its name, if it is that module
                name = _dict.get(_module_dict(value), "__name__")
                if _type(name) is not _str or _dict.get(_modules, name) is not value:
                    return ("opaque", "?", "module")
                return claim(("module", name), value)
            for descriptor_kind, read_owner, read_name in _descriptors:  # str.lower: its class and its name there
                if kind is descriptor_kind:
                    owner, name = read_owner(value), read_name(value)
                    if not _issubclass(_type(owner), type) or _type(name) is not _str or \
                            _cdict(owner).get(name) is not value:
                        return ("opaque", "?", "descriptor")
                    return claim(("descriptor", ref(owner), name), value)
            if _issubclass(kind, _enum) and _flags(kind) & _heaptype:  # an enum member: its class and its name
                found, module = named(_cdict(kind).items(), "__module__")
                qualname, parts = _qualname(kind), _parts(value, kind)
                if not found or _type(module) is not _str or _type(qualname) is not _str or parts is None \
                        or parts[0] is None:
                    return None
                if _located(module, qualname) is not kind:  # an enum made inside a function: nothing to look up
                    return ("opaque", module, qualname)
                found, name = named(_dict.items(parts[0]), "_name_")
                members = _cdict(kind).get("_member_map_")
                if found and _type(name) is _str and _type(members) is _dict and _dict.get(members, name) is value:
                    return claim(("member", module, qualname, name), value)
                found, number = named(_dict.items(parts[0]), "_value_")
                members = _cdict(kind).get("_value2member_map_")  # a Flag's combination: by its value
                if _issubclass(kind, _flag) and found and _type(number) is _int and _type(members) is _dict \
                        and _dict.get(members, number) is value:
                    return claim(("flag", module, qualname, number), value)
                return None
            for buffer_kind, name, read, tell in _buffers:
                if kind is buffer_kind:
                    return ("buffer", name, read(value), tell(value))
            for container_kind, tag, read in _containers:
                if kind is container_kind:
                    return (tag, *read(value, ref))
            if kind is object:  # a sentinel, object(): compared by identity, as the judge's stand-in is
                return ("identity", "builtins", "object")
            if kind is _proxy:  # a Signature's parameters: the OrderedDict it shows (any other stands opaque)
                mapping = _proxy_mapping(value)
                return ("proxy", ref(mapping)) if mapping is not None else ("opaque", "builtins", "mappingproxy")
            if not _flags(kind) & _heaptype:  # another C type: nothing to rebuild it from, named for the judge,
                module, qualname = _module(kind), _qualname(kind)  # which stands in an object that fails any use
                return ("opaque", module if _type(module) is _str else "?", qualname if _type(qualname) is _str
                        else "?")
            mro, base, tag, read_value = _mro(kind), None, None, None
            for klass in mro:
                if not _flags(klass) & _heaptype:
                    base = klass
                    break
            for candidate, name in _bases:
                if base is candidate:
                    tag = name
            for name, value_kind, read in _values:
                if base is value_kind:
                    tag, read_value = name, read
            if tag is None:
                return None
            found, module = named(_cdict(kind).items(), "__module__")
            qualname = _qualname(kind)
            if not found or _type(module) is not _str or _type(qualname) is not _str:
                return None
            parts = _parts(value, kind)
            if parts is None:
                return None  # a property or other object posing as __dict__: its code would run
            namespace, slots = parts
            state = -1 if namespace is None else ref(namespace)
            slots = [(key, ref(item)) for key, item in slots]
            if tag == "dict":
                contents = [(ref(k), ref(v)) for k, v in _dict.items(value)]
            elif tag in ("list", "tuple", "set", "frozenset"):
                holder = {"list": _list, "tuple": _tuple, "set": _set, "frozenset": _frozenset}[tag]
                contents = [ref(item) for item in holder.__iter__(value)]
            elif tag == "object" or tag == "iobase":
                contents = None
            elif read_value is not None:  # a subclass of a value type: its base's arguments, read from C storage
                contents = [ref(item) for item in read_value(value)]
            else:  # str, bytes, int, float, complex: an exact copy of the builtin value, made in C
                contents = {"str": _str.__str__, "bytes": _bytes.__bytes__, "int": _int.__int__,
                            "float": _float.__float__, "complex": _complex.__complex__}[tag](value)
            if "<locals>" in qualname and _len(mro) > 1:  # a class made inside a function (a test's Fraction
                parent = mro[1]  # subclass): its base, by name, for the judge to rebuild it as (judge.local_base)
                parent_module, parent_qualname = _module(parent), _qualname(parent)
                if _type(parent_module) is _str and _type(parent_qualname) is _str and \
                        _located(parent_module, parent_qualname) is parent:
                    return ("object", module, qualname, tag, contents, state, slots, (parent_module, parent_qualname))
            return ("object", module, qualname, tag, contents, state, slots)

        def matcher(value):
            """The test's own matcher (:meth:`Guard.test_matchers`) by its class's name, when it holds no state and
            its name leads back to its class; else None (it is then frozen as any object)."""
            kind = _type(value)
            found, module = named(_cdict(kind).items(), "__module__")
            qualname, parts = _qualname(kind), _parts(value, kind)
            if not found or _type(module) is not _str or _type(qualname) is not _str or parts is None or \
                    parts[1] or (parts[0] is not None and _len(parts[0])) or _located(module, qualname) is not kind:
                return None
            return claim(("matcher", module, qualname), value)

        try:
            roots = (ref(first), ref(second))
            made_here = _tuple(_id(side) for position, side in ((0, first), (1, second)) if position in matchers) \
                if op != "in" else ()
            while _len(nodes) < _len(order):
                if _len(order) > _nodes:
                    return b""
                value = order[_len(nodes)]
                node = (_len(nodes) in roots and _id(value) in made_here and matcher(value)) or describe(value)
                if node is None:
                    return b""
                nodes.append(node)
            data = _dumps((1, nodes, roots, op))
        except _exception:  # a descriptor that refused, a value marshal cannot write: not handed over
            return b""
        return data if _len(data) <= _bytes_budget else b""

    def dispute(frozen, why, _event=event, _str=str):
        _event("dispute", frozen.hex(), _str(why).encode("utf-8", "replace").hex())

    dispute.freeze = freeze
    return dispute


def strict_pytest_asserts(rewrite_module, problem, guard=None, dispute=None):
    """pytest's ``assert a == b``, strict: the assertion rewriter's comparison of two values is followed by
    ``rewrite_module._turngym_strict``, which applies ``problem`` when ``==`` said True. Set on pytest's rewriter
    before the snapshot (the plugin's own compile of a test file goes through it too). False when this
    pytest's rewriter is not the shape this patch knows (then pytest's asserts are not strict). With ``guard``,
    the source span of each side of the assert is passed on, and the objects of a side that the test writes as
    its own expectation are excused (see :meth:`Guard.test_written`)."""
    rewriter = getattr(rewrite_module, "AssertionRewriter", None)
    original = getattr(rewriter, "visit_Compare", None)
    original_assert = getattr(rewriter, "visit_Assert", None)
    if original is None or original_assert is None:
        return False

    def _turngym_refused(left, right, caller, spans, _guard=guard, _problem=problem):
        why = _problem(left, right)
        if why and _guard is not None:
            why = _problem(left, right, _guard.exemption(caller, lambda side: _guard.node_at(caller, spans[side])))
        return why

    def _turngym_matchers(left, right, caller, spans, _guard=guard):
        """The sides that are the test's own matcher, made where it compares (:meth:`Guard.test_matchers`)."""
        return _guard.test_matchers(caller, lambda side: _guard.node_at(caller, spans[side]), (left, right)) \
            if _guard is not None else ()

    def _turngym_freeze(left, right, left_span=None, right_span=None, op="==", _getframe=sys._getframe,
                        _refused=_turngym_refused, _dispute=dispute, _matchers=_turngym_matchers):
        """Before the assert's ``left == right`` (see ``strict_assertions``' ``check``): None when strict equality
        believes the pair, and the comparison runs; True when it refuses it and a judge takes it (the frozen
        pair is sent, the comparison never runs); an ``AssertionError`` when it refuses it and no judge can
        (raised here, so neither the comparison nor pytest's explanation of a failure runs the objects'
        ``__eq__`` against the expectation)."""
        caller, spans = _getframe(1), (left_span, right_span)
        why = _refused(left, right, caller, spans)
        if not why:
            return None
        frozen = _dispute.freeze(left, right, op, _matchers(left, right, caller, spans)) if _dispute is not None \
            else b""
        if frozen:
            _dispute(frozen, why)
            return True
        raise AssertionError("strict equality: " + why)

    def _turngym_strict(left, right, left_span=None, right_span=None, _getframe=sys._getframe,
                        _refused=_turngym_refused):
        """After ``left == right`` held on a believable pair: True, or an ``AssertionError`` when strict equality
        refuses it now (the rewritten assert is ``left == right and @pytest_ar._turngym_strict(left, right,
        ...)``: Python's own ``==`` decides falsity, so code that swaps this function can at most skip the strict
        check, never pass an assert whose values differ)."""
        why = _refused(left, right, _getframe(1), (left_span, right_span))
        if why:
            raise AssertionError("strict equality: " + why)
        return True

    def _turngym_prefreeze(left, right, left_span=None, right_span=None, op="==", _getframe=sys._getframe,
                           _refused=_turngym_refused, _dispute=dispute, _matchers=_turngym_matchers):
        """Before a comparison whose True does not by itself pass the assert (under ``not``, ``or``, a call:
        ``assert (v == Version("1.2")) is True``): None when strict equality believes the pair, the frozen pair
        when it refuses it and a judge can take it, False when none can. Frozen before the objects' ``==`` runs
        (an ``__eq__`` may copy the expectation into its object); :func:`_turngym_settle` uses it only if the
        comparison then holds (round 12: boltons-like honest pairs raised here)."""
        caller, spans = _getframe(1), (left_span, right_span)
        why = _refused(left, right, caller, spans)
        if not why:
            return None
        frozen = _dispute.freeze(left, right, op, _matchers(left, right, caller, spans)) if _dispute is not None \
            else b""
        return (frozen, why) if frozen else False

    def _turngym_settle(frozen, left, right, left_span=None, right_span=None, _getframe=sys._getframe,
                        _refused=_turngym_refused, _dispute=dispute, _type=type, _tuple=tuple):
        """After ``left == right`` held (see :func:`_turngym_prefreeze`): True, having sent a refused pair to the
        judge, whose refusal fails the test afterwards; an ``AssertionError`` when no judge can take it."""
        if frozen is None:
            why = _refused(left, right, _getframe(1), (left_span, right_span))
            if why:
                raise AssertionError("strict equality: " + why)
            return True
        if _type(frozen) is _tuple and _dispute is not None:
            _dispute(frozen[0], frozen[1])
            return True
        raise AssertionError("strict equality: the pair cannot be judged")

    def _turngym_compare(left, right, left_span=None, right_span=None, op="==", _getframe=sys._getframe,
                         _refused=_turngym_refused, _dispute=dispute, _matchers=_turngym_matchers):
        """``left == right`` (or ``!=``) where pytest's rewriter never looks (a conditional expression, a list
        display, a comprehension, a walrus; round 13): a refused pair is frozen before the objects' own operator
        runs, and if that then says True the frozen pair goes to the judge (an ``AssertionError`` when none can
        take it); a believed pair is checked again after it held."""
        caller, spans = _getframe(1), (left_span, right_span)
        why = _refused(left, right, caller, spans)
        frozen = (_dispute.freeze(left, right, op, _matchers(left, right, caller, spans)) if _dispute is not None
                  else b"") if why else b""
        result = left == right if op == "==" else left != right
        if not result:
            return result
        if not why:
            why = _refused(left, right, caller, spans)
            if why:
                raise AssertionError("strict equality: " + why)
            return result
        if frozen:
            _dispute(frozen, why)
            return True
        raise AssertionError("strict equality: " + why)

    def _turngym_in(member, container, left_span=None, right_span=None, _getframe=sys._getframe,
                    _refused=_turngym_refused, _dispute=dispute, _type=type, _list=list, _tuple=tuple, _set=set,
                    _frozenset=frozenset, _dict=dict, _own=problem.own, _overrides=problem.overrides,
                    _operations=CONTAINER_OPERATIONS, _base_container=base_container):
        """The assert's ``member in container``, strict as ``assertIn``: in a builtin list, tuple, set,
        frozenset or dict (its keys), read with the builtin type's own iteration, an item strict equality
        believes is compared (once), one it refuses never: it goes to the judge or fails the assert (an
        always-equal object passed ``assert x in [...]``; red team, round 5). Any other container: plain ``in``."""
        kind = _type(container)
        base = _base_container(kind)
        if base is None:  # another container: plain `in`, unless the member compares by the repository's own __eq__
            why = _own(_type(member))
            if why:
                raise AssertionError(f"strict equality: a member that compares by the repository's own __eq__ ({why})")
            return member in container
        why = _overrides(kind, _operations)
        if why:
            raise AssertionError("strict equality: " + why)
        reader = (_list.__iter__ if base is _list else _tuple.__iter__ if base is _tuple else _set.__iter__
                  if base is _set else _frozenset.__iter__ if base is _frozenset else _dict.keys)
        caller, refused = _getframe(1), []
        for item in _list(reader(container)):
            why = _refused(item, member, caller, (right_span, left_span))
            if why:
                refused.append((item, why))
            elif item is member or item == member:
                return True
        if not refused:
            return False
        frozen = _dispute.freeze([item for item, _ in refused], member, "in") if _dispute is not None else b""
        if frozen:
            _dispute(frozen, refused[0][1])
            return True
        raise AssertionError("strict equality: " + refused[0][1])

    visited = (ast.BoolOp, ast.UnaryOp, ast.BinOp, ast.Call, ast.Starred, ast.Attribute, ast.Compare, ast.Name,
               ast.Constant, ast.keyword)  # what pytest's AssertionRewriter visits (and so rewrites inside)

    def _ar_call(attr, args, _ast=ast):
        """``@pytest_ar.<attr>(*args)``: a call of this patch's function on pytest's rewrite module."""
        return _ast.Call(func=_ast.Attribute(value=_ast.Name(id="@pytest_ar", ctx=_ast.Load()), attr=attr,
                                             ctx=_ast.Load()), args=args, keywords=[])

    def _compare_call(node, _type=type, _ast=ast, _getattr=getattr, _ar_call=_ar_call):
        """``a == b`` or ``a != b`` as ``@pytest_ar._turngym_compare(a, b, spans, op)``; another comparison as it is."""
        if _type(node) is not _ast.Compare or len(node.ops) != 1 or _type(node.ops[0]) not in (_ast.Eq, _ast.NotEq):
            return node
        spans = [_ast.Constant(value=(side.lineno, side.end_lineno, side.col_offset, side.end_col_offset)
                               if _getattr(side, "end_col_offset", None) is not None else None)
                 for side in (node.left, node.comparators[0])]
        op = _ast.Constant(value="==" if _type(node.ops[0]) is _ast.Eq else "!=")
        return _ast.copy_location(_ar_call("_turngym_compare", [node.left, node.comparators[0], *spans, op]), node)

    def visit_Assert(self, assert_, _original=original_assert, _type=type, _ast=ast, _id=id, _visited=visited,
                     _isinstance=isinstance, _compare_call=_compare_call):
        """Note the comparisons whose True passes the assert (its test, or a term of a top-level ``and``): only
        those go to the judge before they run; any other (under ``not``, ``or``, a call) is checked after it
        held, as a refused pair never passes."""
        positive, negative, stack = set(), set(), [(assert_.test, True)]
        while stack:  # (and the comparisons whose False passes it: under `not`, round 13: an always-False
            node, sign = stack.pop()  # __eq__ passed `assert not (a == b)` for two equal values)
            if _type(node) is _ast.Compare:
                (positive if sign else negative).add(_id(node))
            elif _type(node) is _ast.BoolOp and _type(node.op) is (_ast.And if sign else _ast.Or):
                stack.extend((value, sign) for value in node.values)
            elif _type(node) is _ast.UnaryOp and _type(node.op) is _ast.Not:
                stack.append((node.operand, not sign))
        self._turngym_positive, self._turngym_negative = positive, negative
        unseen, stack = [], [assert_.test]  # the parts pytest's rewriter evaluates whole, never visiting inside
        while stack:
            node = stack.pop()
            if _type(node) in _visited:
                stack.extend(_ast.iter_child_nodes(node))
            elif _isinstance(node, _ast.expr):
                unseen.append(node)
        for part in unseen:
            for node in _ast.walk(part):
                for field, old in _ast.iter_fields(node):
                    if _type(old) is _ast.Compare:
                        setattr(node, field, _compare_call(old))
                    elif _type(old) is list:
                        old[:] = [_compare_call(item) if _type(item) is _ast.Compare else item for item in old]
        return _original(self, assert_)

    def visit_Compare(self, comp, _original=original, _len=len, _getattr=getattr, _type=type, _ast=ast, _id=id,
                      _ar_call=_ar_call):
        before = _len(self.statements)
        sides = (comp.left, comp.comparators[0]) if _len(comp.ops) == 1 else (None, None)
        names = [(side.lineno, side.end_lineno, side.col_offset, side.end_col_offset)
                 if side is not None and _getattr(side, "end_col_offset", None) is not None else None
                 for side in sides]
        found = _original(self, comp)
        index = before
        while index < _len(self.statements):
            statement = self.statements[index]
            index += 1
            value = _getattr(statement, "value", None)
            if _type(statement) is _ast.Assign and _type(value) is _ast.Compare and _len(value.ops) == 1 \
                    and _type(value.ops[0]) is _ast.In:
                statement.value = _ar_call("_turngym_in", [value.left, value.comparators[0]]
                                           + [_ast.Constant(value=n) for n in names])
            elif _type(statement) is _ast.Assign and _type(value) is _ast.Compare and _len(value.ops) == 1 \
                    and _type(value.ops[0]) in (_ast.Eq, _ast.NotEq):  # (!=: round 12, an always-true __ne__)
                compared_sides = [value.left, value.comparators[0]] + [_ast.Constant(value=n) for n in names]
                equal = _type(value.ops[0]) is _ast.Eq
                compared = _ast.BoolOp(op=_ast.And(), values=[value, _ar_call("_turngym_strict", compared_sides)])
                if _getattr(self, "variable", None) is not None:
                    # where True passes the assert: `@py_assertN = _turngym_freeze(left, right, ..., op)` just before
                    # the comparison, then `@py_assertN is not None or (left == right and _turngym_strict(...))`;
                    # where False passes it (under `not`; round 13): the other operator, `@py_assertN is None and
                    # (...)`; anywhere else (toolz's `assert not (f1 == g1)` failed at once when its pair went to
                    # the judge): `@py_assertN = _turngym_prefreeze(...)`, `left == right and _turngym_settle(...)`
                    where = "positive" if _id(comp) in _getattr(self, "_turngym_positive", ()) else \
                        "negative" if _id(comp) in _getattr(self, "_turngym_negative", ()) else "other"
                    op = "==" if equal == (where != "negative") else "!="
                    held = self.variable()
                    self.statements.insert(index - 1, _ast.Assign(
                        targets=[_ast.Name(id=held, ctx=_ast.Store())],
                        value=_ar_call("_turngym_prefreeze" if where == "other" else "_turngym_freeze",
                                       compared_sides + [_ast.Constant(value=op)])))
                    index += 1  # the statement moved one down
                    flag = _ast.Name(id=held, ctx=_ast.Load())
                    if where == "positive":
                        compared = _ast.BoolOp(op=_ast.Or(), values=[_ast.Compare(
                            left=flag, ops=[_ast.IsNot()], comparators=[_ast.Constant(value=None)]), compared])
                    elif where == "negative":
                        compared = _ast.BoolOp(op=_ast.And(), values=[_ast.Compare(
                            left=flag, ops=[_ast.Is()], comparators=[_ast.Constant(value=None)]), compared])
                    else:
                        compared = _ast.BoolOp(op=_ast.And(), values=[value, _ar_call(
                            "_turngym_settle", [flag, *compared_sides])])
                statement.value = compared
        return found

    rewrite_module._turngym_strict = _turngym_strict
    rewrite_module._turngym_freeze = _turngym_freeze
    rewrite_module._turngym_in = _turngym_in
    rewrite_module._turngym_prefreeze = _turngym_prefreeze
    rewrite_module._turngym_settle = _turngym_settle
    rewrite_module._turngym_compare = _turngym_compare
    rewriter.visit_Compare = visit_Compare
    rewriter.visit_Assert = visit_Assert
    return True


# --------------------------------------------------------------------------- the guard (test processes)
def _index(code, code_type):
    """``{(name, first line): [code, ...]}`` of every function code under a module's code."""
    found, stack = {}, [code]
    while stack:
        parent = stack.pop()
        for const in parent.co_consts:
            if type(const) is code_type:
                found.setdefault((const.co_name, const.co_firstlineno), []).append(const)
                stack.append(const)
    return found


def _make_same_code(code_type):
    """A comparison of two code objects, field by field, that runs no ``__eq__`` but builtins' own."""
    plain = frozenset((str, bytes, int, float, complex, bool, type(None), type(Ellipsis)))
    fields = ("co_consts", "co_names", "co_varnames", "co_freevars", "co_cellvars", "co_flags",
              "co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_name", "co_firstlineno",
              "co_exceptiontable", "co_nlocals", "co_linetable")  # co_linetable: what co_positions reads

    def constant(value, _type=type, _plain=plain, _tuple=tuple, _frozenset=frozenset):
        """Whether ``value`` is made of plain constants only (its ``repr`` is its value, no code runs)."""
        stack = [value]
        while stack:
            item = stack.pop()
            kind = _type(item)
            if kind is _tuple or kind is _frozenset:
                stack.extend(item)
            elif kind not in _plain:
                return False
        return True

    def same_code(a, b, _type=type, _len=len, _range=range, _getattr=getattr, _plain=plain, _fields=fields,
                  _code=code_type, _tuple=tuple, _frozenset=frozenset, _sorted=sorted, _repr=repr, _float=float,
                  _isnan=math.isnan, _live=live_bytecode, _constant=constant):
        stack = [(a, b)]
        while stack:
            x, y = stack.pop()
            kind = _type(x)
            if kind is not _type(y):
                return False
            if kind is _code:
                stack.append((_live(x), _live(y)))  # the running instructions, never the cached co_code
                for name in _fields:
                    stack.append((_getattr(x, name, None), _getattr(y, name, None)))
            elif kind is _tuple:
                if _len(x) != _len(y):
                    return False
                for index in _range(_len(x)):
                    stack.append((x[index], y[index]))
            elif kind is _frozenset:  # (a set display of constants: strings, numbers, tuples of them)
                if not _constant(x) or not _constant(y) or _sorted(_repr(i) for i in x) != _sorted(_repr(i) for i in y):
                    return False
            elif kind in _plain:
                if not (x == y or (kind is _float and _isnan(x) and _isnan(y))):
                    return False
            else:
                return False
        return True

    return same_code


class Tampered(Exception):
    """A check found the grading's inputs changed."""


class Guard:
    """The checks a test process runs before and after every test (see the module's docstring).

    Built before any repository import. ``trusted``: restored test files and their parent-given hashes;
    ``framework``: modules whose classes are the framework's own (identity); ``core``: names of the
    ``sys.modules`` entries that must not change; ``test_case``: ``unittest.TestCase`` (its method names
    are behaviour a test class may bind to its own functions only); ``require_test_case``: every graded
    class derives from it (unittest); ``variants(source, path)``: the other code objects a framework
    makes of a trusted source (pytest's assertion rewriting); ``alarm(reason)``: reports at once.
    """

    def __init__(self, cwd, trusted, framework, core, test_case=None, require_test_case=False, variants=None,
                 alarm=None):
        import builtins
        import gc
        import threading
        from types import CodeType, FunctionType, MethodType, ModuleType

        self.cwd = os.path.realpath(cwd) + os.sep
        self.deps = tuple(self.cwd + folder + os.sep for folder in READ_ONLY_DIRS)
        self.prefixes = tuple(sorted({os.path.realpath(p).rstrip(os.sep) + os.sep for p in (
            sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix) if p}))
        self.euid = os.geteuid() if hasattr(os, "geteuid") else -1
        self.trusted = dict(trusted)
        self.trusted_modules = _trusted_module_paths(self.cwd, self.trusted)
        import unittest  # the framework, loaded already

        skip_wrapper = unittest.skip("")(lambda: None)  # unittest.skip's wrapper: it only raises unittest's SkipTest
        self.skip_code, self.skip_globals = skip_wrapper.__code__, skip_wrapper.__globals__
        self.stdlib = os.path.dirname(os.path.realpath(os.__file__)) + os.sep
        self.variants = variants
        self.alarm = alarm
        self.b = {  # every helper a check calls, bound now
            "type": type, "vars": vars, "len": len, "id": id, "tuple": tuple, "str": str, "range": range,
            "getattr": getattr, "CodeType": CodeType, "FunctionType": FunctionType, "MethodType": MethodType,
            "ModuleType": ModuleType, "staticmethod": staticmethod, "classmethod": classmethod,
            "property": property, "list": list, "gettrace": sys.gettrace, "getprofile": sys.getprofile,
            "gc_disable": gc.disable, "gc_enable": gc.enable, "gc_on": gc.isenabled, "realpath": os.path.realpath,
            "abspath": os.path.abspath, "access": os.access, "dirname": os.path.dirname, "isfile": os.path.isfile,
            "open": open, "sha256": _sha256, "compile": compile, "same_code": _make_same_code(CodeType),
            "index": _index, "parse": ast.parse, "class_keys": _class_keys, "any": any, "all": all,
            "mro": type.__dict__["__mro__"].__get__, "qualname": type.__dict__["__qualname__"].__get__,
            "flags": type.__dict__["__flags__"].__get__, "type_dict": type.__dict__["__dict__"].__get__,
            "walk": ast.walk, "enumerate": enumerate, "dict": dict, "top_level": _top_level,
            "issubclass": issubclass,
        }
        from importlib.machinery import ModuleSpec

        self.module_spec = ModuleSpec
        self.builtins_items = tuple(vars(builtins).items())
        self.builtin_names = frozenset(key for key, _ in self.builtins_items if type(key) is str)
        self.builtins_dict = vars(builtins)
        self.builtins = builtins
        self.sys = sys
        self.gc = gc
        self.trace, self.profile = sys.gettrace(), sys.getprofile()
        self.threading = threading
        self.threading_hooks = tuple((k, v) for k, v in vars(threading).items()
                                     if k in ("_trace_hook", "_profile_hook", "_trace_hook_all", "_profile_hook_all"))
        self.meta_path, self.path_hooks = tuple(sys.meta_path), tuple(sys.path_hooks)
        self.gc_callbacks = tuple(gc.callbacks)
        self.sys_modules = sys.modules
        self.core = tuple((name, module) for name, module in sys.modules.items() if name in core)
        self.core_names = frozenset(name for name, _ in self.core)
        classes = [object, type]
        for module in framework:
            classes += [value for value in vars(module).values() if isinstance(value, type)]
        self.framework_refs = tuple(classes)
        self.framework_ids = frozenset(id(c) for c in classes)
        self.framework_modules = frozenset(id(m) for m in framework)
        found = {getattr(m, "__name__", ""): vars(m) for m in framework}
        self.any_object = found.get("unittest.mock", {}).get("ANY")  # the framework's own comparands
        self.approx = found.get("_pytest.python_api", {}).get("approx")
        self.snapshot_modules = tuple(sys.modules.items())
        behaviour = set(XUNIT_NAMES)
        if test_case is not None:
            for owner in test_case.__mro__[:-1]:
                for key, value in vars(owner).items():
                    if (callable(value) or isinstance(value, (staticmethod, classmethod, property))) \
                            and not isinstance(value, type):
                        behaviour.add(key)
        self.behaviour = frozenset(behaviour)
        self.test_case = test_case
        self.require_test_case = require_test_case
        self.compiled = {}  # path -> (codes kept alive, index, class keys)
        self.helper_info = {}  # path of a restored helper or support file -> what its top level binds
        self.graded = {}  # module name -> (module, its dict, top-level info, path)
        self.graded_ids = frozenset()
        self.graded_keep = ()
        # code objects found equal to a fresh compile: compared by identity afterwards, by content in the digest
        self.verified, self.verified_codes = {}, []
        self.modules_seen = {}  # graded module name -> (its globals, their code) when last found good
        self.adopted_globals = {}  # graded module name -> its globals' items when adopted (before any test ran)
        self.trees, self.exprs = {}, {}  # restored test file -> its syntax tree; {source span: [expressions]}

    # ----------------------------------------------------------------- the graded modules
    def compile_graded(self, path, source):
        """The runner's own compile of a graded test file: its code objects are the ones a test of that
        file may run (checked by identity). Returns ``(code, top-level info)``."""
        b = self.b
        path = b["abspath"](path)
        code = b["compile"](source, path, "exec", dont_inherit=True)
        codes, stack = [code], [code]
        while stack:
            for const in stack.pop().co_consts:
                if b["type"](const) is b["CodeType"]:
                    codes.append(const)
                    stack.append(const)
        tree = b["parse"](source)
        self.graded_keep = self.graded_keep + tuple(codes)
        self.graded_ids = self.graded_ids | frozenset(b["id"](c) for c in codes)
        self.compiled[path] = (tuple(codes), b["index"](code, b["CodeType"]), b["class_keys"](tree))
        return code, _top_level(tree)

    def top_level(self, source):
        return _top_level(self.b["parse"](source))

    def adopt(self, name, module, info, path):
        """Remember ``module`` as the graded module ``name``, made from (or, under pytest, imported from)
        the restored file at ``path``; ``info`` is what its source's top level binds."""
        self.graded[name] = (module, vars(module), info, self.b["abspath"](path))
        self.adopted_globals[name] = self.b["tuple"](self.b["vars"](module).items())

    def adopt_file(self, name, module, path):
        """Under pytest, which imports the test modules itself: remember ``module`` as the one made of
        the restored file at ``path`` (its hash checked); why it cannot be, or ''."""
        b = self.b
        path = b["abspath"](path)
        if path not in self.trusted:
            return f"{path} is not a restored test file"
        try:
            with b["open"](path, "rb") as handle:
                source = handle.read()
        except OSError:
            return f"{path} cannot be read"
        if b["sha256"](source) != self.trusted[path]:
            return f"{path} changed on disk during the grading"
        self.adopt(name, module, self.top_level(source), path)
        return ""

    # ----------------------------------------------------------------- a test's own expectation (strict equality)
    def exemption(self, frame, node_of):
        """``exempt(side, value)`` for :func:`make_strict_equality`'s ``problem``: whether ``value`` sits on a side
        that the test running in ``frame`` writes as its own expectation (``node_of(side)``, the side's syntax
        node; see :meth:`test_written`), and is an object such an expectation may hold: an instance of a
        framework class (``mock.ANY``'s, ``pytest.approx``'s) or of a test-file class the source names (see
        :meth:`_test_class`)."""
        written = {}

        def exempt(side, value, _self=self, _type=type):
            if side not in written:
                try:
                    written[side] = _self.test_written(frame, node_of(side))
                except Exception:  # noqa: BLE001 - a check that cannot complete excuses nothing
                    written[side] = None
            if written[side] is None:
                return False
            kind = _type(value)
            try:
                return _self.b["id"](kind) in _self.framework_ids or _self._test_class(kind, written[side])
            except Exception:  # noqa: BLE001
                return False

        return exempt

    def argument_node(self, frame, index, keyword):
        """The syntax node of the argument ``index`` (or ``keyword=``) of the call ``frame`` is making
        (``self.assertEqual(tz.tzutc(), ComparesEqual)``), found in the restored test file's own syntax tree by
        the source span Python records for the calling instruction (``co_positions``, Python 3.11+), or None."""
        call = self._call_at(frame)
        if call is None or any(type(a) is ast.Starred for a in call.args) or any(k.arg is None for k in call.keywords):
            return None
        named = [k.value for k in call.keywords if k.arg == keyword]
        return call.args[index] if index < len(call.args) else (named[0] if named else None)

    def node_at(self, frame, span, kind=ast.expr):
        """The expression (of ``kind``) of the restored test file running in ``frame`` whose source span is
        ``span``, or None; ``frame``'s code must be that file's (``code_ok``, which compares line tables too)."""
        code = frame.f_code
        tree = self._tree(code.co_filename)
        if tree is None or type(span) is not tuple or not self.code_ok(code):
            return None
        path = self.b["abspath"](code.co_filename)
        if path not in self.exprs:
            index = {}
            for n in self.b["walk"](tree):
                if isinstance(n, ast.expr) and getattr(n, "end_col_offset", None) is not None:
                    index.setdefault((n.lineno, n.end_lineno, n.col_offset, n.end_col_offset), []).append(n)
            self.exprs[path] = index
        found = [n for n in self.exprs[path].get(span, ()) if isinstance(n, kind)]
        return found[0] if len(found) == 1 else None

    def test_written(self, frame, node):
        """The class names of the test-made objects of ``node`` (a set, maybe empty) when ``node``, an argument
        of an equality that the test code running in ``frame`` (a graded test file's, checked) makes, is the
        test's own expectation: built only of constants, displays (``[ANY, 2]``) and names that no code under
        test could have chosen:

        * a global of the test module, bound at its top level once, as an instance of a class of the test
          files (``SIX = Approx(6)``) or by an import from a test module that binds it so in turn (``from
          ._common import ComparesEqual``), and still holding the very object the module bound at import;
        * the framework's own comparands, by identity: ``unittest.mock.ANY`` (``ANY``, ``mock.ANY``) and
          ``pytest.approx(...)`` of such arguments.

        Never a local, a call into the code under test (``RESULT = pkg.double(3)`` is refused), or anything
        else; None when it is not. The objects of such a side are then checked for what they are (see
        :meth:`exemption` and :meth:`_test_class`). What stays open is the documented one: code that changes
        such an object's state (``SIX.tol = 100``) changes what the test compares, as with any test data."""
        scope = self._test_scope(frame) if node is not None else None
        if scope is None:
            return None
        namespace, adopted, path, local = scope
        classes = set()
        return classes if self._written(node, path, namespace, adopted, local, 0, classes) else None

    def _test_scope(self, frame):
        """``(globals, globals as adopted, file, local names)`` of the graded test code running in ``frame`` (a
        restored test file's code, checked), or None."""
        code = frame.f_code
        if not self._is_test_file(code) or not self.code_ok(code):
            return None
        namespace, adopted, path = frame.f_globals, None, None
        for module_name, graded in self.b["tuple"](self.graded.items()):
            if graded[1] is namespace:
                adopted, path = self.adopted_globals.get(module_name), graded[3]
        if adopted is None:
            return None
        return namespace, adopted, path, set(code.co_varnames) | set(code.co_cellvars) | set(code.co_freevars)

    def test_matchers(self, frame, node_of, values):
        """The sides (0, 1) of a comparison that the test code running in ``frame`` makes whose object is the
        test's own matcher, made where it compares: the side is written as a call, with no arguments, of a class
        that the test module binds at its top level by a ``class`` statement of the test files (``composed ==
        AlwaysEquals()``: toolz's ``test_compose_metadata``), still bound to what the module bound at import, and
        the object is of exactly that class, whose code is all the test files' with an ``__eq__`` of its own
        (:meth:`_test_class`). The dispute names such an object for the judge, which makes it of the untouched
        test class (:func:`make_dispute`), so that where the package's ``==`` returns NotImplemented, Python takes
        the test's own reflected answer, as it does in the test. An object the code under test made (returned,
        put in a global, a subclass, an instance of a package class named like a test's) is never one."""
        try:
            scope = self._test_scope(frame)
            if scope is None:
                return ()
            namespace, adopted, path, local = scope
            found = []
            for side in (0, 1):
                node = node_of(side)
                if type(node) is not ast.Call or node.args or node.keywords or type(node.func) is not ast.Name:
                    continue
                cls = self._comparand(node.func, namespace, adopted, local)
                made = self._binding(path, node.func.id)[1]
                if cls is not None and self.b["type"](values[side]) is cls and type(made) is ast.ClassDef and \
                        self._test_class(cls, {made.name}):
                    found.append(side)
            return tuple(found)
        except Exception:  # noqa: BLE001 - a check that cannot complete names no matcher
            return ()

    def _written(self, node, path, namespace, adopted, local, depth, classes):
        kind = type(node)
        if depth > 20:
            return False
        if kind is ast.Constant:
            return True
        if kind in (ast.List, ast.Tuple, ast.Set):
            return all(self._written(e, path, namespace, adopted, local, depth + 1, classes) for e in node.elts)
        if kind is ast.Dict:
            return None not in node.keys and all(self._written(e, path, namespace, adopted, local, depth + 1, classes)
                                                 for e in node.keys + node.values)
        if kind is ast.UnaryOp and type(node.op) in (ast.USub, ast.UAdd):
            return self._written(node.operand, path, namespace, adopted, local, depth + 1, classes)
        if kind is ast.Call:  # pytest.approx(...) of written arguments
            return self._comparand(node.func, namespace, adopted, local) is self.approx and self.approx is not None \
                and all(self._written(e, path, namespace, adopted, local, depth + 1, classes)
                        for e in node.args + [k.value for k in node.keywords if k.arg is not None]) \
                and all(k.arg is not None for k in node.keywords) and not any(type(a) is ast.Starred for a in node.args)
        if kind is ast.Name and node.id not in local:
            value = self._comparand(node, namespace, adopted, local)
            if value is None:
                return False
            if value is self.any_object:
                return True
            made_of = self._test_made(path, node.id)
            classes.add(made_of)
            return bool(made_of)
        if kind is ast.Attribute:
            return self._comparand(node, namespace, adopted, local) is self.any_object and self.any_object is not None
        return False

    def _comparand(self, node, namespace, adopted, local):
        """The object a ``Name`` or a ``module.attribute`` chain denotes, read without running code: a global
        still bound to what the module bound at import, then attributes of the framework's modules only; or
        None."""
        b = self.b
        if type(node) is ast.Name:
            if node.id in local:
                return None
            bound, now = self._get(adopted, node.id), self._get(b["tuple"](namespace.items()), node.id)
            return now[1] if bound[0] and now[0] and bound[1] is now[1] else None
        if type(node) is ast.Attribute:
            owner = self._comparand(node.value, namespace, adopted, local)
            if owner is None or b["type"](owner) is not b["ModuleType"] or b["id"](owner) not in self.framework_modules:
                return None
            found, value = self._get(b["tuple"](b["vars"](owner).items()), node.attr)
            return value if found else None
        return None

    def _test_class(self, kind, names):
        """Whether ``kind`` is a class the test files define, named in ``names`` (what the source makes the object
        of): its metaclass is ``type``; every function, static or class method and property of every class of
        its MRO that is not the framework's is code of the restored test files, and nothing else there is
        callable but plain data; and the ``__eq__`` it compares with is such a function. A subclass the code
        under test made (a property of its own, a factory returning another object) is not."""
        b = self.b
        qualname = b["qualname"](kind)
        if b["type"](kind) is not type or b["type"](qualname) is not b["str"] or qualname not in names:
            return False
        plain = (b["str"], int, float, bool, type(None), b["tuple"], frozenset)
        equality = None
        for klass in b["mro"](kind):
            if klass is object or b["id"](klass) in self.framework_ids:
                continue
            owner = b["qualname"](klass)
            slots = self._get(b["tuple"](b["type_dict"](klass).items()), "__slots__")[1]
            slots = (slots,) if b["type"](slots) is b["str"] else \
                slots if b["type"](slots) in (b["tuple"], list) else ()
            for key, value in b["tuple"](b["type_dict"](klass).items()):
                if b["type"](key) is not b["str"]:
                    return False
                kind_of = b["type"](value)
                if kind_of is b["FunctionType"]:
                    functions = (value,)
                elif kind_of is b["staticmethod"] or kind_of is b["classmethod"]:
                    functions = (value.__func__,)
                elif kind_of is b["property"]:
                    functions = b["tuple"](f for f in (value.fget, value.fset, value.fdel) if f is not None)
                elif kind_of in plain or key in ("__dict__", "__weakref__") or \
                        (key == "__annotations__" and kind_of is dict) or (key in slots and kind_of is not dict and
                                                                           b["type"](kind_of) is type and
                                                                           kind_of.__name__ == "member_descriptor"):
                    continue
                else:
                    return False
                for function in functions:
                    if b["type"](function) is not b["FunctionType"] or not self.code_ok(function.__code__):
                        return False
                    code = function.__code__
                    qualified = b["getattr"](code, "co_qualname", None)
                    own = self._is_test_file(code) and (qualified is None or (
                        b["type"](qualified) is b["str"] and qualified.startswith(owner + ".")))
                    if (key == "__eq__" or self._is_test_file(code)) and not own:
                        return False  # borrowed from another class (an always-equal one), or the library's __eq__
                if key == "__eq__" and equality is None:
                    equality = value
        return equality is not None

    def _test_made(self, path, name):
        """The name of the class the test file at ``path`` makes its global ``name`` an instance of, when it binds
        ``name`` at its top level exactly once, as an instance of a class of the test files (``SIX = Approx(6)``)
        or by an import from a test module whose file binds it so in turn; else ''."""
        path, node = self._binding(path, name)
        if not (type(node) is ast.Assign and len(node.targets) == 1 and type(node.targets[0]) is ast.Name and
                type(node.value) is ast.Call and type(node.value.func) is ast.Name):
            return ""
        path, node = self._binding(path, node.value.func.id)
        return node.name if type(node) is ast.ClassDef else ""

    def _binding(self, path, name):
        """``(file, statement)``: the one top-level statement that binds ``name`` in the test file at ``path``,
        followed through imports from test modules (up to 3 files); ``(None, None)`` if there is none, or more."""
        for _ in range(4):
            tree = self._tree(path)
            if tree is None:
                return None, None
            bindings = [node for node in tree.body if name in _top_level_binds(node)]
            if len(bindings) != 1:
                return None, None
            if type(bindings[0]) is not ast.ImportFrom:
                return path, bindings[0]
            path, name = self._imported(path, bindings[0], name)
        return None, None

    def _imported(self, path, node, name):
        """``(the restored test file, the name there)`` that ``from X import ...`` at ``path`` binds ``name``
        from, or ``(None, '')`` when X is not a test module."""
        original = [a.name for a in node.names if (a.asname or a.name) == name]
        source = self._module_file(path, node) if _from_test_module(node) and len(original) == 1 else None
        return (source, original[0]) if source else (None, "")

    def _module_file(self, path, node):
        """The restored test file that ``from X import ...`` in the file at ``path`` reads, or None."""
        b = self.b
        tail = (node.module or "").replace(".", "/")
        names = (tail + ".py", tail + "/__init__.py") if tail else ("__init__.py",)
        if node.level == 1:
            base = b["dirname"](b["abspath"](path)) + "/"
            found = [t for t in self.trusted if t in (base + names[0], base + names[-1])]
        else:
            found = [t for t in self.trusted if tail and t.endswith(("/" + names[0], "/" + names[1]))]
        return found[0] if len(found) == 1 else None

    def _tree(self, path):
        """The syntax tree of a restored test file (its hash checked), or None for any other file."""
        b = self.b
        if b["type"](path) is not b["str"] or b["abspath"](path) not in self.trusted:
            return None
        path = b["abspath"](path)
        if path not in self.trees:
            with b["open"](path, "rb") as handle:
                source = handle.read()
            if b["sha256"](source) != self.trusted[path]:
                raise Tampered(f"{path} changed on disk during the grading")
            self.trees[path] = b["parse"](source)
        return self.trees[path]

    def _call_at(self, frame):
        """The ``ast.Call`` of the restored test file whose source span is that of ``frame``'s current
        instruction (its line table's, Python 3.11+), or None."""
        positions = self.b["getattr"](frame.f_code, "co_positions", None)
        if positions is None:
            return None
        wanted = frame.f_lasti // 2
        for index, span in self.b["enumerate"](positions()):
            if index == wanted:
                return self.node_at(frame, span, ast.Call)
        return None

    # ----------------------------------------------------------------- helpers
    def _items(self, owner):
        return self.b["tuple"](self.b["vars"](owner).items())

    def _get(self, items, name):
        _type, _str = self.b["type"], self.b["str"]
        for key, value in items:
            if _type(key) is _str and key == name:
                return True, value
        return False, None

    def _file(self, path):
        """``(codes, index, class keys)`` of a file whose code may run as a test's, or None: a restored
        test file with its parent-given hash, or a file the sandbox user cannot write."""
        b = self.b
        if b["type"](path) is not b["str"]:
            return None
        path = b["abspath"](path)
        cached = self.compiled.get(path)
        if cached is not None:
            return cached
        expected = self.trusted.get(path)
        if expected is None:  # else only the interpreter's own files (stdlib, installed packages) and the tests'
            real = b["realpath"](path)  # requirements installed read-only into the repository (freezegun's wrapper
            # of a test, humanize's suite: issue #42's re-validation)
            if real.startswith(self.deps):
                if not b["isfile"](real) or not sealed_from(real, self.euid):
                    return None
            elif real.startswith(self.cwd) or not real.startswith(self.prefixes) or not b["isfile"](real) or (
                    self.euid != 0 and (b["access"](real, os.W_OK) or b["access"](b["dirname"](real), os.W_OK))):
                return None
        try:
            with b["open"](path, "rb") as handle:
                source = handle.read()
        except OSError:
            return None
        if expected is not None and b["sha256"](source) != expected:
            raise Tampered(f"{path} changed on disk during the grading")
        try:
            codes = [b["compile"](source, path, "exec", dont_inherit=True)]
            if expected is not None and self.variants is not None:
                codes += list(self.variants(source, path))
            keys = b["class_keys"](b["parse"](source))
        except (SyntaxError, ValueError):
            return None
        index = {}
        for code in codes:
            for key, found in b["index"](code, b["CodeType"]).items():
                index.setdefault(key, []).extend(found)
        self.compiled[path] = (tuple(codes), index, keys)
        return self.compiled[path]

    def code_ok(self, code):
        """Whether ``code`` is one of the runner's compile of a graded file, or equal to a fresh compile
        of a restored test file or an unwritable file."""
        b = self.b
        if b["id"](code) in self.graded_ids:
            return True
        if b["type"](code) is not b["CodeType"]:
            return False
        if self.verified.get(b["id"](code)) is code:
            return True  # compared once; its contents are in the digest from then on (verified_codes)
        info = self._file(code.co_filename)
        if info is None:
            return False
        same = b["any"](b["same_code"](code, c) for c in info[1].get((code.co_name, code.co_firstlineno), ()))
        if same:
            self.verified[b["id"](code)] = code
            self.verified_codes.append(code)
        return same

    def function_ok(self, function, owner=None):
        b = self.b
        if b["type"](function) is not b["FunctionType"]:
            return False
        code = function.__code__
        if b["id"](code) in self.graded_ids:  # the runner's own compile: its module's globals
            if not b["any"](function.__globals__ is entry[1] for entry in self.graded.values()):
                return False
        elif not self.code_ok(code):
            return False
        else:
            path = b["abspath"](code.co_filename)
            graded = False
            for _, namespace, _, graded_path in self.graded.values():
                if graded_path == path:
                    graded = True
                    if function.__globals__ is not namespace:
                        return False
            if not graded and path in self.trusted and self.helper_globals(function.__globals__, path):
                return False
        if owner is not None and "__class__" in code.co_freevars:
            cell = function.__closure__[code.co_freevars.index("__class__")].cell_contents
            if cell is not owner:
                return False
        return True

    def helper_globals(self, namespace, path):
        """Why the globals of a restored helper or support file's function (``tests/helpers.py``, pyparsing's
        ``testing.py``) are not its file's, or '': a function the file defines replaced, or a builtin it never
        binds shadowed (round 12: the package set ``testing.zip`` to an empty iterator, and the support mixin
        compared nothing). The graded modules get the fuller check (:meth:`module_ok`)."""
        b = self.b
        if b["type"](namespace) is not b["dict"]:
            return f"{path}: its globals are not a dict"
        info = self.helper_info.get(path)
        if info is None:
            try:
                with b["open"](path, "rb") as handle:
                    source = handle.read()
            except OSError:
                return f"{path} cannot be read"
            if b["sha256"](source) != self.trusted.get(path):
                raise Tampered(f"{path} changed on disk during the grading")
            try:
                tree = b["parse"](source)
                info = self.helper_info[path] = (b["top_level"](tree), _helper_extras(tree))
            except (SyntaxError, ValueError):
                return f"{path} does not parse"
        (defs, imports, _, module_names), (constants, classes, defaults) = info
        for key, value in b["tuple"](namespace.items()):
            if b["type"](key) is not b["str"]:
                return f"{path} has a global that is not a string"
            if key in defs:
                if b["type"](value) is not b["FunctionType"] or value.__code__.co_name != key or \
                        value.__code__.co_firstlineno != defs[key] or \
                        b["abspath"](value.__code__.co_filename) != path or not self.code_ok(value.__code__):
                    return f"{path}: {key} is not the function the file defines"
                if key in defaults and not _same_literal((value.__defaults__, value.__kwdefaults__), defaults[key]):
                    return f"{path}: {key}'s default arguments are not the file's"
            elif key in imports:  # round 13: an imported module swapped for a stand-in
                ok, real = self._get(self.snapshot_modules, imports[key])
                if ok and value is not real:
                    return f"{path}: {key} is not the module {imports[key]}"
            elif key in constants and not _same_literal(value, constants[key]):  # round 13: FIELDS = ()
                return f"{path}: {key} is not the value the file gives it"
            elif key in classes:  # round 13: a method of the helper's own class replaced
                if not b["issubclass"](b["type"](value), type) or b["qualname"](value) != key:
                    return f"{path}: {key} is not the class the file defines"
                for name, item in b["tuple"](b["type_dict"](value).items()):
                    if name not in classes[key]:  # what a framework sets on the class (pytest's fixtures)
                        continue
                    if b["type"](item) in (b["staticmethod"], b["classmethod"]):
                        item = item.__func__
                    if b["type"](item) is b["FunctionType"] and (
                            b["abspath"](item.__code__.co_filename) != path or not self.code_ok(item.__code__)):
                        return f"{path}: {key}.{name} is not the file's code"
            elif module_names is not None and key in self.builtin_names and key not in module_names[0] \
                    and not key.startswith("__") and value is not self.builtins_dict.get(key):
                return f"{path}: {key} shadows the builtin {key}, and the file binds no {key}"
        return ""

    def _own_def(self, code, name, key):
        """Whether ``code``'s names say it is the def of ``key`` in the body of the class ``name``."""
        b = self.b
        return code.co_name == key and b["getattr"](code, "co_qualname", name + "." + key) == name + "." + key

    def _meta_files(self, meta):
        """``(file, qualified name)`` of the metaclass ``meta``'s classes (those not the framework's) that have a
        function: a support file's metaclass may make a class's tests (markdown 3.6's ``LegacyTestMeta``), closures
        of its own code (``LegacyTestMeta.__new__.<locals>.generate_test.<locals>.test``)."""
        b = self.b
        found = set()
        for klass in b["mro"](meta):
            if klass is object or klass is type or b["id"](klass) in self.framework_ids or \
                    not b["flags"](klass) & HEAPTYPE:
                continue
            for _, value in b["tuple"](b["type_dict"](klass).items()):
                kind = b["type"](value)
                if kind is b["staticmethod"] or kind is b["classmethod"]:
                    value, kind = value.__func__, b["type"](value.__func__)
                owner = b["qualname"](klass)
                if kind is b["FunctionType"] and b["type"](value.__code__.co_filename) is b["str"] and \
                        b["type"](owner) is b["str"] and owner:
                    found.add((b["abspath"](value.__code__.co_filename), owner + "."))
        return found

    def _generated(self, function, origins=()):
        """A function a test or support file made at run time (a closure, a module function), which may be attached
        under any name, or ``unittest.skip``'s wrapper of one (markdown 3.6's ``LegacyTestMeta`` sets
        ``unittest.skip("Excluded")(lambda: None)`` for an excluded case). Only that wrapper: it raises SkipTest and
        runs nothing, where another (``mock.patch``'s) could run the agent's code around a test the file made; and
        only with unittest's own globals, where its ``SkipTest`` is unittest's (a function made of its code with the
        agent's globals raised the agent's choice: unittest's ``_ShouldStop``, which ``TestCase.run`` counts a pass)."""
        b = self.b
        code = function.__code__
        if code is self.skip_code:
            if function.__globals__ is not self.skip_globals:
                return False
            found, function = self._get(self._items(function), "__wrapped__")
            if not found or b["type"](function) is not b["FunctionType"]:
                return False
            code = function.__code__
        if not self._is_test_file(code) or b["type"](code.co_filename) is not b["str"]:
            return False
        qualified = b["getattr"](code, "co_qualname", None)
        if qualified is None:  # before Python 3.11: its file only
            return b["any"](path == b["abspath"](code.co_filename) for path, _ in origins)
        if b["type"](qualified) is not b["str"] or not ("<locals>" in qualified or "." not in qualified):
            return False
        # round 21: only the class's own file's (a closure or a module function), or a closure of its metaclass's own
        # code (a helper's module function `ignore` stood under the graded test's name)
        path = b["abspath"](code.co_filename)
        return b["any"](path == origin and qualified.startswith(prefix) for origin, prefix in origins)

    def _is_test_file(self, code):
        b = self.b
        return b["id"](code) in self.graded_ids or (
            b["type"](code.co_filename) is b["str"] and b["abspath"](code.co_filename) in self.trusted)

    def callable_ok(self, value, owner=None):
        """A test callable: a checked function of the test files, or a framework wrapper of one
        (``mock.patch``, ``unittest.skip``: followed through ``__wrapped__``, each wrapper believed by
        :meth:`wrapper_ok`)."""
        b = self.b
        for _ in b["range"](20):
            if b["type"](value) is b["MethodType"]:
                value = value.__func__
            if not self.function_ok(value, owner):
                return False
            if self._is_test_file(value.__code__):
                return True
            found, inner = self._get(self._items(value), "__wrapped__")
            if not found or not self.wrapper_ok(value, inner):
                return False
            value = inner
        return False

    def wrapper_ok(self, wrapper, inner):
        """Whether ``wrapper`` (a function of a file the sandbox user cannot write, its code checked) may stand for
        ``inner``, its ``__wrapped__`` (round 21: ``__wrapped__`` is only an attribute, and a copy of
        ``unittest.case._id``, ``return obj``, with it set to the test stood for a ``mock.patch.dict``-decorated
        test). ``unittest.skip``'s wrapper with unittest's globals runs nothing (the test is SKIPPED). Any other
        has its own module's globals (those of the module of its name, whose file is its code's) and holds
        ``inner`` in its closure; a standard library wrapper is one of those its test decorators make (mock's
        ``patch`` and ``patch.dict``, ``contextlib``'s ``ContextDecorator``), ``inner`` in the very cell its
        code calls; an installed package's (freezegun's, hypothesis's) holds it in any cell."""
        b = self.b
        code = wrapper.__code__
        if code is self.skip_code:
            return wrapper.__globals__ is self.skip_globals
        namespace = wrapper.__globals__
        if b["type"](namespace) is not b["dict"]:
            return False
        found, module_name = self._get(b["tuple"](namespace.items()), "__name__")
        if not found or b["type"](module_name) is not b["str"]:
            return False
        found, module = self._get(self.snapshot_modules, module_name)
        if not found:
            found, module = self._get(b["tuple"](self.sys_modules.items()), module_name)
        if not found or b["type"](module) is not b["ModuleType"] or b["vars"](module) is not namespace:
            return False
        found, module_file = self._get(b["tuple"](namespace.items()), "__file__")
        if not found or b["type"](module_file) is not b["str"] or b["type"](code.co_filename) is not b["str"] or \
                b["realpath"](module_file) != b["realpath"](code.co_filename):
            return False
        closure = wrapper.__closure__ or ()
        if b["len"](closure) != b["len"](code.co_freevars):
            return False
        path = b["realpath"](code.co_filename)
        if path.startswith(self.stdlib) and "-packages" + os.sep not in path[b["len"](self.stdlib):]:
            names = [variable for tail, name, variable in STDLIB_WRAPPERS
                     if code.co_name == name and path.endswith(os.sep + tail)]
            if b["len"](names) != 1 or names[0] not in code.co_freevars:
                return False
            cells = (closure[code.co_freevars.index(names[0])],)
        else:
            cells = closure
        for cell in cells:
            try:
                if cell.cell_contents is inner:
                    return True
            except ValueError:  # an empty cell
                continue
        return False

    def class_ok(self, cls, depth=0):
        """Why ``cls`` is neither the restored sources' class nor the framework's, or ''."""
        b = self.b
        if depth > 50:
            return "a class hierarchy too deep"
        if b["id"](cls) in self.framework_ids:
            return ""
        meta = b["type"](cls)
        if meta is not type and b["id"](meta) not in self.framework_ids:
            if type not in b["mro"](meta):
                return "a metaclass that is not a type"
            why = self.class_ok(meta, depth + 1)
            if why:
                return "its metaclass: " + why
        if not b["flags"](cls) & HEAPTYPE:
            return ""  # a static type (object, Exception...): nothing can change it
        for base in b["mro"](cls)[1:]:
            why = self.class_ok(base, depth + 1)
            if why:
                return why
        qualname = b["qualname"](cls)
        name = qualname if b["type"](qualname) is b["str"] else "?"
        items = b["tuple"](b["type_dict"](cls).items())
        entries, files, own_files = [], set(), set()
        for key, value in items:
            if b["type"](key) is not b["str"]:
                return f"class {name} has an attribute that is not a string"
            kind = b["type"](value)
            if kind is b["FunctionType"]:
                functions = (value,)
            elif kind is b["staticmethod"] or kind is b["classmethod"]:
                functions = (value.__func__,)
            elif kind is b["property"]:
                functions = b["tuple"](f for f in (value.fget, value.fset, value.fdel) if f is not None)
            else:
                functions = None
            if functions and not (key.startswith("test") or key in self.behaviour or (
                    key.startswith("__") and key.endswith("__"))) and not b["all"](
                    b["type"](f) is b["FunctionType"] and self.code_ok(f.__code__) for f in functions):
                # not a test nor behaviour, and not the test files' code: data the class body must assign
                # (DECORATOR = staticmethod(package.cached)), the code under test as the tests call it
                entries.append((key, "data"))
                continue
            for function in functions or ():
                if b["type"](function) is not b["FunctionType"] or not self.code_ok(function.__code__):
                    return f"{name}.{key} is not code of the test files (nor of the framework)"
                if "__pytest_" in key and not self._is_test_file(function.__code__):
                    continue  # pytest's xunit fixture, set on the class at collection: not where the class is from
                for _ in b["range"](20):  # its file, and those of the functions a framework wrapper wraps
                    files.add(b["abspath"](function.__code__.co_filename))
                    if self._own_def(function.__code__, name, key):
                        own_files.add(b["abspath"](function.__code__.co_filename))
                    found, function = self._get(self._items(function), "__wrapped__")
                    if not found or b["type"](function) is not b["FunctionType"] or not self.code_ok(function.__code__):
                        break
            entries.append((key, functions))
        bound, found_class = set(), False
        # the graded test module its module names says what its class body binds too: a class with no function of its
        # own from a test file (its tests inherited, its other functions the framework's or an installed package's), or
        # one whose tests a support file's metaclass made (markdown 3.6's LegacyTestMeta, markdown's TestMisc). Only an
        # exact str is compared: a str subclass's reflected __eq__ is the agent's code, run inside the check
        module_name = self._get(items, "__module__")[1]
        if b["type"](module_name) is not b["str"]:
            module_name = None
        # round 21: a class is one file's. A graded test module its __module__ names is that file; else the one file
        # its own defs (a function whose code's names are the class's and the key's, or one a framework wrapper of
        # it wraps) come from. Only that file says what its body binds and holds the functions that are its own
        # (``direct``): a class of the same name in another test file (``T`` with a passing ``test_a``) vouched for
        # the graded class's, given that file's function
        home = None
        for graded_name, graded in self.graded.items():
            if graded_name == module_name:
                home = graded[3]
        if home is None and own_files:
            if b["len"](own_files) > 1:
                return f"class {name}'s functions come from more than one file"
            home = b["tuple"](own_files)[0]
        for path in (home,) if home is not None else files:
            info = self._file(path)
            keys = info[2].get(name) if info is not None else None
            if keys is not None:
                found_class = True
                bound |= keys
        origins = {(home, "")} if home is not None else set()
        if home is None and module_name in self.trusted_modules:
            origins.add((b["abspath"](self.trusted_modules[module_name]), ""))
        origins |= self._meta_files(meta)
        if not found_class and module_name in self.trusted_modules:
            # any other restored file its module names (a support or helper file: markdown's LegacyTestCase, in
            # markdown/test_tools.py, which pytest collects where a test file imports it, and gives its xunit
            # fixtures) says only that the class is defined there, never what its body binds: __module__ is the
            # agent's to write, and a class of that name in any file under the test folders (a helper whose body
            # binds `run`) would vouch for a class the agent made
            info = self._file(self.trusted_modules[module_name])
            found_class = info is not None and name in info[2]
        for key, functions in entries:
            if functions == "data":
                if key not in bound:
                    return f"{name}.{key} is not code of the test files (nor of the framework)"
                continue
            if functions is None:
                if (key.startswith("test") or key in self.behaviour or (
                        key.startswith("__") and key.endswith("__") and key not in INERT_DUNDERS)) and key not in bound:
                    return f"{name}.{key} is not a function of the test file"
                continue
            if not found_class:
                return f"class {name} is not in the source its functions come from"
            for function in functions:
                code = function.__code__
                direct = self._own_def(code, name, key) and b["abspath"](code.co_filename) == home
                injected = "__pytest_" in key and not self._is_test_file(code)  # pytest's xunit fixtures
                # the test file's own functions made at run time (a closure, a module function) may be
                # attached under any name; a method of another class may not (a passing test swapped in)
                generated = self._generated(function, origins)
                if not direct and not injected and not generated and key not in bound:
                    return f"{name}.{key} is not what the test file binds there"
                if not self.function_ok(function, cls):
                    return f"{name}.{key} is not the test file's function"
                if key.startswith("test") and not self.callable_ok(function, cls):
                    return f"{name}.{key} wraps code that is not the test file's"
        return ""

    def module_ok(self, name):
        """Why the graded module ``name`` is not the one made from the restored file, or ''."""
        b = self.b
        module, namespace, info, path = self.graded[name]
        found, current = self._get(b["tuple"](self.sys_modules.items()), name)
        if not found or current is not module:
            return f"sys.modules[{name!r}] is not the module made from the restored test file"
        if b["type"](module) is not b["ModuleType"] or b["vars"](module) is not namespace:
            return f"the module {name} was replaced"
        defs, imports, protocol, module_names = info
        items = b["tuple"](namespace.items())
        codes = b["tuple"](v.__code__ if b["type"](v) is b["FunctionType"] else None for _, v in items)
        last = self.modules_seen.get(name)
        if last is not None and b["len"](last[0]) == b["len"](items) and b["all"](
                a[0] is c[0] and a[1] is c[1] for a, c in zip(last[0], items)) and b["all"](
                a is c for a, c in zip(last[1], codes)):
            return ""  # every global as it was when last found good (the functions' code: in the digest)
        for key, value in items:
            if b["type"](key) is not b["str"]:
                return f"{name} has a global that is not a string"
            if key in defs:
                if b["type"](value) is not b["FunctionType"]:
                    return f"{name}.{key} is not the function the test file defines"
                code = value.__code__
                if code.co_name != key or code.co_firstlineno != defs[key] or not self.function_ok(value) \
                        or b["abspath"](code.co_filename) != path:
                    return f"{name}.{key} is not the function the test file defines"
            elif key in imports:
                ok, real = self._get(self.snapshot_modules, imports[key])
                if ok and value is not real:
                    return f"{name}.{key} is not the module {imports[key]}"
            elif key in PROTOCOL_NAMES and key not in protocol:
                return f"{name}.{key} is not in the test file"
            elif key in PYTEST_MODULE_GLOBALS:  # what pytest's rewriter binds: its own module and builtins
                ok, real = self._get(self.snapshot_modules, PYTEST_MODULE_GLOBALS[key])
                if not ok or value is not real:
                    return f"{name}.{key} is not pytest's {PYTEST_MODULE_GLOBALS[key]}"
            elif key == "__builtins__":
                if value is not self.builtins and value is not self.builtins_dict:
                    return f"{name}.__builtins__ is not the interpreter's builtins"
            elif module_names is not None and key in self.builtin_names and key not in module_names[0] \
                    and not key.startswith("__") and not (key in module_names[1] and self._patched_in(value)) \
                    and value is not self.builtins_dict.get(key):
                # a global that shadows a builtin (str, len, isinstance) which the test file never binds nor
                # patches in itself: the code under test put it there, to change what the tests compute
                return f"{name}.{key} shadows the builtin {key}, and the test file binds no {key}"
        self.modules_seen[name] = (items, codes)
        return ""

    def _patched_in(self, value):
        """Whether ``value``, a global a test file names in a string, is what a test patches in: a function of
        the test files, a builtin, or a framework object (a ``mock.MagicMock``; its class is made per instance
        from the framework's), no code of the repository in its class."""
        b = self.b
        kind = b["type"](value)
        if kind is b["FunctionType"]:
            return self._is_test_file(value.__code__) and self.code_ok(value.__code__)
        if b["any"](value is v for _, v in self.builtins_items):
            return True
        for klass in b["mro"](kind):
            if klass is object or klass is type:
                break
            if b["id"](klass) in self.framework_ids:
                return True
            for _, item in b["tuple"](b["type_dict"](klass).items()):
                if b["type"](item) is b["FunctionType"] and not self.code_ok(item.__code__):
                    return False
        return False

    def hooks_ok(self):
        """Why the interpreter's hooks are not as they were before the repository loaded, or ''."""
        b = self.b
        now = b["tuple"](b["vars"](self.builtins).items())
        if b["len"](now) < b["len"](self.builtins_items):
            return "a builtin was removed"
        for index in b["range"](b["len"](self.builtins_items)):
            old_key, old_value = self.builtins_items[index]
            new_key, new_value = now[index]
            if old_key is not new_key or old_value is not new_value and not (
                    old_key == "__spec__" and b["type"](new_value) is self.module_spec):
                # importing builtins under another name rebinds its __spec__ (importlib's _init_module_attrs, for
                # six's `__import__("six.moves.builtins")`); nothing of the grading reads builtins' spec
                return f"builtins.{old_key} was replaced"
        if b["gettrace"]() is not self.trace or b["getprofile"]() is not self.profile:
            return "a trace or profile function is installed"
        threading_now = self._items(self.threading)
        for key, value in self.threading_hooks:
            if self._get(threading_now, key)[1] is not value:
                return "threading's trace or profile hook was set"
        sys_now = self._items(self.sys)
        for attribute, before in (("meta_path", self.meta_path), ("path_hooks", self.path_hooks)):
            found, current = self._get(sys_now, attribute)
            if not found or b["type"](current) is not b["list"]:
                return f"sys.{attribute} was replaced"
            current, position = b["tuple"](current), 0
            for entry in before:
                while position < b["len"](current) and current[position] is not entry:
                    position += 1
                if position == b["len"](current):
                    return f"an entry of sys.{attribute} present before the repository loaded was removed"
        found, callbacks = self._get(self._items(self.gc), "callbacks")
        if not found or b["type"](callbacks) is not b["list"] or b["len"](callbacks) != b["len"](self.gc_callbacks):
            return "gc.callbacks was changed"
        for index in b["range"](b["len"](self.gc_callbacks)):
            if callbacks[index] is not self.gc_callbacks[index]:
                return "gc.callbacks was changed"
        current = {}
        for key, value in b["tuple"](self.sys_modules.items()):
            if b["type"](key) is b["str"] and key in self.core_names:
                current[key] = value
        for module_name, module in self.core:
            if current.get(module_name) is not module:
                return f"sys.modules[{module_name!r}] was replaced"
        return ""

    def check(self, targets=()):
        """Hooks, graded modules, and ``targets`` (``(class or None, test callable or None)`` pairs): why
        the grading cannot be believed, or ''. The garbage collector is off meanwhile."""
        b = self.b
        was_on = b["gc_on"]()
        b["gc_disable"]()
        try:
            why = self.hooks_ok()
            for name in self.graded:
                why = why or self.module_ok(name)
            seen = set()
            for cls, test in targets:
                if why:
                    break
                if cls is not None and b["id"](cls) not in seen:
                    seen.add(b["id"](cls))
                    why = self.class_ok(cls)
                    if not why and self.require_test_case and not b["any"](c is self.test_case for c in b["mro"](cls)):
                        why = f"{b['qualname'](cls)} is not a unittest.TestCase"
                owner = None if cls is None or test is None else _owner(cls, test, b)
                if not why and test is not None and not self.callable_ok(test, owner):
                    why = "a graded test is not the test file's code"
            return why
        except Tampered as error:
            return str(error)
        except Exception as error:  # noqa: BLE001 - a check that cannot complete is a failed check
            return f"the integrity check could not complete ({b['type'](error).__name__})"
        finally:
            if was_on:
                b["gc_enable"]()

    # ----------------------------------------------------------------- the audit hook
    def install_audit(self):
        """Report at once a trace or profile function installed by any code but the test files' own."""
        if not hasattr(sys, "addaudithook"):
            return

        # doctest's runner clears the trace and puts back the one it found (a test suite's load_tests may run
        # doctests): the standard library's own doctest.py, never a trace of its caller's choosing
        doctest = os.path.join(os.path.dirname(os.__file__), "doctest.py")

        def hook(event, args, _audited=AUDITED, _getframe=sys._getframe, _guard=self, _id=id, _doctest=doctest):
            if event in _audited:
                frame = _getframe(1)
                if frame is None or not (_guard._is_test_file(frame.f_code) or (
                        event == "sys.settrace" and frame.f_code.co_filename == _doctest)):
                    _guard.alarm(f"{event} called by code that is not the test file's")

        sys.addaudithook(hook)


def _owner(cls, test, b):
    """The class of ``cls``'s MRO whose dict holds ``test`` (for its ``__class__`` cell)."""
    function = test.__func__ if b["type"](test) is b["MethodType"] else test
    for klass in b["mro"](cls):
        for value in b["type_dict"](klass).values():
            if value is function:
                return klass
    return None


# --------------------------------------------------------------------------- the framework's own state
# pytest replaces these callables itself at configuration (pytest 7's legacypath plugin; hypothesis's
# plugin bans ``@given`` fixtures): a replacement of any other framework callable is tampering.
FRAMEWORK_REPLACEMENTS = frozenset((("Config", "_getini_unknown_type"), ("FixtureFunctionMarker", "__call__")))
# module globals pytest sets for the length of each test (its assertion plugin's per-test hooks): seen while a
# test runs by the checks made from inside its hook calls; they shape a failure's message, never a verdict
PER_TEST_STATE = frozenset((("_pytest.assertion.util", "_reprcompare"), ("_pytest.assertion.util", "_assertion_pass"),
                            ("_pytest.assertion.util", "_config")))


def sealed_from(path, euid, _stat=os.stat, _statvfs=os.statvfs, _access=os.access, _dirname=os.path.dirname,
                _all=all, _read_only=os.ST_RDONLY, _write=os.W_OK):
    """Whether this process can neither change the file at ``path`` nor have made it: its filesystem is mounted
    read-only (bwrap's read-only bind of ``.turngym-deps``), or it and its folder belong to another user and this
    one cannot write them (docker's root-owned copy). Write permission alone is not enough inside the repository:
    the code under test may create such a folder, write a file and take its own write permission away."""
    try:
        if _statvfs(path).f_flag & _read_only:
            return True
        folder = _dirname(path)
        return _all(_stat(p).st_uid != euid for p in (path, folder)) and euid != 0 and not (
            _access(path, _write) or _access(folder, _write))
    except OSError:
        return False


def resolve_lazy_names(modules):
    """Binds now each name a module makes on first use (PEP 562: a module ``__getattr__`` for a name its ``dir()``
    lists, such as unittest's ``IsolatedAsyncioTestCase``), so the snapshot holds it.

    Code that walks modules with ``dir`` and ``getattr`` binds such names while the tests run: freezegun's
    ``freeze_time`` reads every attribute of every loaded module, so humanize's tests (issue #42's re-validation,
    52 of 78 gold validations void) added ``unittest.IsolatedAsyncioTestCase``, which the comparison took for
    tampering. Runs the framework's own ``__getattr__`` before any repository import; a name that fails to load
    stays unbound, as it would for the tests."""
    import warnings

    for module in tuple(modules):
        names = vars(module)
        if "__getattr__" not in names:
            continue
        try:
            listed = dir(module)
        except Exception:  # noqa: BLE001, S112 - a module's own __dir__ that fails lists nothing
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a deprecated alias warns on access: the tests will see it, not this
            for name in listed:
                if type(name) is str and name not in names:
                    try:
                        getattr(module, name)
                    except Exception:  # noqa: BLE001, S110 - unbound, as for the tests
                        pass


def snapshot(modules, extra_owners=()):
    """``(owner, type(owner), items)`` for each module, each class it defines, and each extra owner:
    the state the verdict depends on, taken before any repository import."""
    taken = []
    for module in tuple(modules):
        items = tuple(vars(module).items())
        taken.append((module, type(module), items))
        name = vars(module).get("__name__")
        for _, value in items:
            if isinstance(value, type) and vars(value).get("__module__") == name:
                taken.append((value, type(value), tuple(vars(value).items())))
    for owner in extra_owners:
        taken.append((owner, type(owner), tuple(vars(owner).items())))
    return tuple(taken)


def make_checker(taken, lenient=False):
    """A comparison of the current state with ``taken`` that runs no code of the repository.

    Every helper is bound now (the repository may replace builtins later); owners are checked to
    still be of their type (a module's ``__class__`` can be swapped for one with a ``__dict__``
    property) before ``vars``; items are compared by ``is`` (no ``__eq__``); the garbage collector is
    off during the comparison (no ``__del__``). A module may gain new entries that are modules (an
    ``import unittest.mock`` sets ``unittest.mock``) and a ``__warningregistry__``; nothing else may
    change. ``lenient`` (pytest, whose configuration adds to its own classes): a class may also gain
    names none of its bases has, swap data for data, and have :data:`FRAMEWORK_REPLACEMENTS` replaced."""
    import gc
    from types import ModuleType

    where = []
    original = {id(owner): tuple(key for key, _ in items) for owner, _, items in taken if isinstance(owner, type)}
    # round 21: the closure cells of the framework's functions that hold a callable (a contextmanager's `func`: the
    # generator of unittest's _Outcome.testPartExecutor, which a package swapped, through `cell_contents`, for one
    # that swallowed the graded test's failure), followed into the functions they hold: compared by identity too
    cells, seen = [], set()
    for owner, _, items in taken:
        for key, value in items:
            stack = [value]
            while stack:
                function = stack.pop()
                if type(function) in (staticmethod, classmethod):
                    function = function.__func__
                if type(function) is not FunctionType or id(function) in seen:
                    continue
                seen.add(id(function))
                for cell in function.__closure__ or ():
                    try:
                        contents = cell.cell_contents
                    except ValueError:  # an empty cell
                        continue
                    if callable(contents):
                        cells.append((owner, key, cell, contents))
                        stack.append(contents)
    cells = tuple(cells)

    def tolerated(owner, key, old, new, _type=type, _str=str, _callable=callable, _mro=type.__dict__["__mro__"].__get__,
                  _dict=type.__dict__["__dict__"].__get__, _name=type.__dict__["__name__"].__get__,
                  _allowed=FRAMEWORK_REPLACEMENTS, _lenient=lenient, _has=_has, _original=original, _id=id,
                  _module=ModuleType, _vars=vars, _per_test=PER_TEST_STATE):
        if _lenient and _type(owner) is _module and _type(key) is _str:
            name = _vars(owner).get("__name__")
            return _type(name) is _str and (name, key) in _per_test
        if not _lenient or not isinstance(owner, type) or _type(key) is not _str:
            return False
        if old is _MISSING:  # a new name: it must not shadow one a base had
            for base in _mro(owner)[1:]:
                keys = _original.get(_id(base))
                for base_key in keys if keys is not None else _dict(base):
                    if _type(base_key) is _str and base_key == key:
                        return False
            return True
        if not _callable(old) and not _callable(new) and not _has(_type(new), "__get__"):
            return True
        return (_name(owner), key) in _allowed

    def same(_taken=taken, _len=len, _range=range, _tuple=tuple, _vars=vars, _type=type, _str=str,
             _dict=dict, _module=ModuleType, _gc_disable=gc.disable, _gc_enable=gc.enable, _gc_on=gc.isenabled,
             _tolerated=tolerated, _missing=_MISSING, _where=where, _cells=cells, _empty=ValueError):
        was_on = _gc_on()
        _gc_disable()
        try:
            for owner, kind, items in _taken:
                if _type(owner) is not kind:
                    _where[:] = [owner, "__class__"]
                    return False
                now = _tuple(_vars(owner).items())
                size = _len(items)
                if _len(now) < size:
                    _where[:] = [owner, "a removed attribute"]
                    return False
                for index in _range(size):
                    old_key, old_value = items[index]
                    new_key, new_value = now[index]
                    if old_key is not new_key:
                        _where[:] = [owner, old_key]
                        return False
                    if old_value is not new_value and not _tolerated(owner, old_key, old_value, new_value):
                        _where[:] = [owner, old_key]
                        return False
                for index in _range(size, _len(now)):
                    key, value = now[index]
                    if kind is _module:
                        if _type(value) is not _module and not (
                                _type(key) is _str and key == "__warningregistry__" and _type(value) is _dict):
                            _where[:] = [owner, key]
                            return False
                    elif not _tolerated(owner, key, _missing, value):
                        _where[:] = [owner, key]
                        return False
            for owner, key, cell, contents in _cells:
                try:
                    if cell.cell_contents is contents:
                        continue
                except _empty:
                    pass
                _where[:] = [owner, f"{key} (a closure cell)" if _type(key) is _str else key]
                return False
            return True
        finally:
            if was_on:
                _gc_enable()

    def what():
        """The attribute the last failed comparison stopped at, for the log."""
        if not where:
            return "?"
        owner, key = where
        name = vars(type(owner)).get("__name__") if False else (
            type.__dict__["__qualname__"].__get__(owner) if isinstance(owner, type) else
            vars(owner).get("__name__", type(owner).__name__))
        return f"{name}.{key}" if type(key) is str and type(name) is str else "?"

    same.what = what
    return same


_MISSING = object()


def _has(kind, name, _mro=type.__dict__["__mro__"].__get__, _dict=type.__dict__["__dict__"].__get__):
    """Whether a class or one of its bases defines ``name``, found without running any of their code."""
    for base in _mro(kind):
        for key in _dict(base):
            if type(key) is str and key == name:
                return True
    return False


def protected_ids(taken):
    """ids of the classes and functions the verdict depends on (for the audit hook)."""
    ids = set()
    for owner, _, items in taken:
        ids.add(id(owner))
        for _, value in items:
            if callable(value) or isinstance(value, (classmethod, staticmethod)):
                ids.add(id(value))
                ids.add(id(getattr(value, "__func__", value)))
    return frozenset(ids)


GC_REACH = frozenset(("gc.get_referents", "gc.get_referrers"))


def install_alarm(protected, alarm, gc_only=False):
    """An audit hook (it cannot be removed) that raises ``alarm`` on any write to a protected object and on
    the garbage collector's introspection reaching one: ``gc.get_referents`` of a protected class (or of any
    class's ``__dict__`` proxy) hands out the class's real dict, where a method can be swapped during a test
    and put back before the checks; ``gc.get_referrers`` of a protected function finds that dict too.
    ``gc_only``: the introspection alarm alone (the test file's classes, whose attributes tests may set)."""
    events = frozenset(() if gc_only else ("object.__setattr__", "object.__delattr__"))
    from types import MappingProxyType

    def hook(event, args, _events=events, _protected=protected, _id=id, _len=len, _alarm=alarm, _reach=GC_REACH,
             _type=type, _proxy=MappingProxyType, _tuple=tuple):
        if event in _events and _len(args) >= 2 and _id(args[0]) in _protected:
            _alarm(f"{event} {args[1]}")
        elif event in _reach and _len(args) >= 1 and _type(args[0]) is _tuple:
            for obj in args[0]:
                if _id(obj) in _protected or _type(obj) is _proxy:
                    _alarm(f"{event} reached a class or function the verdict depends on")
                    return

    if hasattr(sys, "addaudithook"):  # Python 3.8 and newer
        sys.addaudithook(hook)


def load(path, name):
    """A module loaded from ``path`` under ``name`` (no name the repository could shadow)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
