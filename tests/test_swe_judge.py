"""Issue #42, point 4: the package's own equality, judged on its untouched code (``tools/judge.py``).

Strict equality refuses a repository class's own ``==`` with a builtin value, so real tests such as boltons'
``OrderedMultiDict(...) == {...}`` failed on the untouched package (a false alarm). With the base tree named
in ``TURNGYM_PRISTINE``, such a pair is frozen in the test process and judged in a fresh process on the
untouched classes. These tests run the real runner (the sandbox's ``/usr/bin/python3``) on a small package:
its honest tests pass only with the untouched tree, and every attack still fails with it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.helpers_marks import first_of_each
from turngym.envs.swe.sandbox.bwrap import TOOLS_DIR

PACKAGE = '''
class Multi(dict):
    """A dict that keeps every pair; equal to a dict with its last values."""

    def __init__(self, pairs=()):
        super().__init__()
        self._all = []
        for key, value in pairs:
            self._all.append((key, value))
            dict.__setitem__(self, key, value)

    def __eq__(self, other):
        if isinstance(other, Multi):
            return self._all == other._all
        return dict(self.items()) == dict(other)

    def __ne__(self, other):
        return not self == other

    __hash__ = None


class Version:
    __slots__ = ("major", "minor")

    def __init__(self, text):
        self.major, self.minor = (int(p) for p in text.split("."))

    def __eq__(self, other):
        if isinstance(other, str):
            other = Version(other)
        return (self.major, self.minor) == (other.major, other.minor)


class Anything:
    """The package's own wildcard: equal to everything."""

    def __eq__(self, other):
        return True


class Interval:
    """The package's own generous equality: a number equals an interval that holds it."""

    def __init__(self, low, high):
        self.low, self.high = low, high

    def __eq__(self, other):
        return self.low <= other <= self.high


class Pattern:
    def __init__(self, pattern):
        self.pattern = pattern

    def __eq__(self, other):
        import re

        return isinstance(other, str) and re.fullmatch(self.pattern, other) is not None


def pairs():
    return Multi([("a", 1), ("b", 2)])


def counts():
    return {"a": 3}


def label():
    return "abc"


def names():
    return "b"


def version():
    return Version("1.2")


def nested():
    return [Multi([("a", 1)])]
'''

TESTS = '''
import unittest
from pkg import counts, label, names, nested, pairs, version


class TestPkg(unittest.TestCase):
    def test_pairs(self):
        self.assertEqual(pairs(), {"a": 1, "b": 2})

    def test_version(self):
        self.assertEqual(version(), "1.2")

    def test_nested(self):
        self.assertEqual(nested(), [{"a": 1}])

    def test_in(self):
        self.assertIn(version(), ["0.9", "1.2"])

    def test_counts(self):
        self.assertEqual(counts(), {"a": 3})

    def test_label(self):
        self.assertEqual(label(), "abc")

    def test_names(self):
        self.assertIn(names(), ["a", "b"])


def test_plain_assert():
    assert pairs() == {"a": 1, "b": 2}


def test_plain_in():
    assert names() in ["a", "b"]
'''

UNITTEST_IDS = [f"tests.test_pkg.TestPkg.test_{name}" for name in ("pairs", "version", "nested", "in")]
PLAIN_IDS = [f"tests.test_pkg.TestPkg.test_{name}" for name in ("counts", "label", "names")]  # builtin values
PYTEST_IDS = ["tests/test_pkg.py::test_plain_assert", "tests/test_pkg.py::TestPkg::test_nested"]


def _sandbox_python_has_pytest() -> bool:
    done = subprocess.run(["/usr/bin/python3", "-c", "import pytest"], capture_output=True, check=False)
    return done.returncode == 0


def _package(root: Path, package: str = PACKAGE) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "__init__.py").write_text(textwrap.dedent(package))
    (root / "tests" / "__init__.py").write_text("")
    (root / "tests" / "test_pkg.py").write_text(textwrap.dedent(TESTS))
    return root


def _grade(repo: Path, ids: list[str], pristine: Path | None, pytest_mode: bool = False,
           support: tuple[str, ...] = (), discard: bool = False) -> dict[str, str]:
    return _grade_with_log(repo, ids, pristine, pytest_mode, support, discard)[0]


def _grade_with_log(repo: Path, ids: list[str], pristine: Path | None, pytest_mode: bool = False,
                    support: tuple[str, ...] = (), discard: bool = False,
                    states: tuple[str, ...] = ()) -> tuple[dict[str, str], str]:
    """The runner's verdicts on ``ids`` in ``repo`` and its output (``states``: the task's reference states, sent
    after the nonce as the grading sends them)."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"}
    if pristine is not None:
        env["TURNGYM_PRISTINE"] = str(pristine)
    if discard:
        env["TURNGYM_PRISTINE_DISCARD"] = "1"
    command = ["/usr/bin/python3", "-I", "-B", str(TOOLS_DIR / "unittest_runner.py"),
               *(flag for path in support for flag in ("--support", path))]
    done = subprocess.run(command + (["--pytest"] if pytest_mode else []) + ids,
                          input=" ".join(("n0nce", *states)) + "\n", cwd=repo, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    found = {}
    for line in done.stdout.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == "n0nce":
            found[words[2]] = words[1]
    assert set(found) == set(ids), done.stdout[-3000:] + done.stderr[-2000:]
    return found, done.stdout


@pytest.fixture
def trees(tmp_path):
    """``(repo, pristine)``: the package twice; the first is the agent's to change."""
    pristine = _package(tmp_path / "pristine")
    repo = tmp_path / "repo"
    shutil.copytree(pristine, repo)
    return repo, pristine


def test_the_packages_own_equality_passes_with_the_untouched_tree_and_only_with_it(trees):
    repo, pristine = trees
    assert set(_grade(repo, UNITTEST_IDS, None).values()) == {"FAILED"}  # strict equality alone: false alarms
    assert set(_grade(repo, UNITTEST_IDS, pristine).values()) == {"PASSED"}
    assert set(_grade(repo, PLAIN_IDS, None).values()) == {"PASSED"}


@pytest.mark.skipif(not _sandbox_python_has_pytest(), reason="the sandbox's python3 has no pytest")
def test_a_plain_pytest_assert_is_judged_too(trees):
    repo, pristine = trees
    assert set(_grade(repo, PYTEST_IDS, None, pytest_mode=True).values()) == {"FAILED"}
    assert set(_grade(repo, PYTEST_IDS, pristine, pytest_mode=True).values()) == {"PASSED"}


# Each attack rewrites pkg/__init__.py in the agent's tree: the code under test now returns a wrong value
# whose own == says True, or an object the judge must not rebuild.
ATTACKS = {
    # the package's own class, its __eq__ rewritten to always agree, holding the wrong data
    "rewritten_eq": ("return dict(self.items()) == dict(other)", "return True",
                     "return Multi([(\"a\", 1), (\"b\", 2)])", "return Multi([(\"a\", 1)])"),
    # a class the untouched package does not have
    "new_class": ("def pairs():", ("class Yes(dict):\n    def __eq__(self, other):\n        return True\n\n\n"
                  "def pairs():"), "return Multi([(\"a\", 1), (\"b\", 2)])", "return Yes()"),
    # the package's own wildcard, returned where a dict is expected
    "packages_wildcard": ("return Multi([(\"a\", 1), (\"b\", 2)])", "return Anything()"),
    # a __dict__ that is a property, which would put the right data in place while the pair is read
    "dict_property": ("return dict(self.items()) == dict(other)", "return True",
                      "    __hash__ = None\n", ("    __hash__ = None\n    __dict__ = property(lambda self: "
                      "dict.update(self, a=1, b=2) or {})\n"), "return Multi([(\"a\", 1), (\"b\", 2)])",
                      "return Multi([(\"a\", 0)])"),
    # mock.ANY in the state the untouched == reads
    "library_object": ("def pairs():", "from unittest import mock\n\n\ndef pairs():",
                       "return Multi([(\"a\", 1), (\"b\", 2)])",
                       "m = Multi([(\"a\", 1), (\"b\", 2)])\n    dict.__setitem__(m, 'b', mock.ANY)\n    return m"),
    # a slot rewritten to hold a value equal to anything (an instance of a class made at run time)
    "runtime_class_in_slot": ("return Version(\"1.2\")",
                              ("v = Version(\"1.2\")\n    v.minor = type('Y', (int,), {'__eq__': lambda s, o: True})(5)"
                              "\n    return v")),
    # an __eq__ that copies the other side into its object, then says True: judged on the object as made
    "copy_in": ("return dict(self.items()) == dict(other)", ("dict.clear(self)\n        dict.update(self, other)\n"
                "        self._all = list(other.items())\n        return True"),
                "return Multi([(\"a\", 1), (\"b\", 2)])", "return Multi([(\"a\", 0)])"),
    # the same in a member test (assertIn): the version rewrites itself to the first item it meets
    "copy_in_member": ("            other = Version(other)\n",
                       ("            self.major, self.minor = (int(p) for p in other.split('.'))\n"
                       "            return True\n"), "return Version(\"1.2\")", "return Version(\"0.1\")"),
    # the package's own generous classes, returned where a plain value is expected: probes that only change the
    # top level, or only add a NUL, let them through (red team, round 5)
    "nested_interval": ("    return {\"a\": 3}", "    return {\"a\": Interval(-10**9, 10**9)}"),
    "probe_aware_pattern": ("    return \"abc\"", "    return Pattern(\"[^\\x00]*\")"),
    # an item's __eq__ appends a plain copy of the member to the list it sits in (red team, round 5)
    "grow_the_container": ("def names():\n    return \"b\"", ("class Grow(str):\n    def __eq__(self, other):\n"
                           "        import sys\n        frame = sys._getframe(1)\n        while frame is not None:\n"
                           "            for v in list(frame.f_locals.values()):\n"
                           "                if type(v) is list and other in v:\n                    v.append(other)\n"
                           "            frame = frame.f_back\n        return False\n    __hash__ = str.__hash__\n\n\n"
                           "def names():\n    return Grow(\"z\")")),
}
TARGETS = {"runtime_class_in_slot": "tests.test_pkg.TestPkg.test_version",
           "copy_in_member": "tests.test_pkg.TestPkg.test_in", "nested_interval": "tests.test_pkg.TestPkg.test_counts",
           "probe_aware_pattern": "tests.test_pkg.TestPkg.test_label",
           "grow_the_container": "tests.test_pkg.TestPkg.test_names"}


def _attack(repo: Path, edits: tuple[str, ...]) -> None:
    path = repo / "pkg" / "__init__.py"
    text = path.read_text()
    for old, new in zip(edits[::2], edits[1::2]):
        assert old in text, old
        text = text.replace(old, new, 1)
    path.write_text(text)


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_an_attack_on_the_packages_equality_still_fails(trees, attack):
    repo, pristine = trees
    _attack(repo, ATTACKS[attack])
    target = TARGETS.get(attack, "tests.test_pkg.TestPkg.test_pairs")
    assert _grade(repo, [target], pristine) == {target: "FAILED"}


@pytest.mark.skipif(not _sandbox_python_has_pytest(), reason="the sandbox's python3 has no pytest")
@pytest.mark.parametrize("attack", ["rewritten_eq", "new_class", "copy_in", "always_equal_member"])
def test_an_attack_on_a_plain_pytest_assert_still_fails(trees, attack):
    """Including ``assert x in [...]`` with an always-equal ``x``, which strict equality did not cover."""
    repo, pristine = trees
    always = ("def names():\n    return \"b\"", ("class Yes(str):\n    def __eq__(self, other):\n        return True\n"
              "    __hash__ = str.__hash__\n\n\ndef names():\n    return Yes(\"z\")"))
    _attack(repo, always if attack == "always_equal_member" else ATTACKS[attack])
    target = "tests/test_pkg.py::test_plain_in" if attack == "always_equal_member" else \
        "tests/test_pkg.py::test_plain_assert"
    for pristine_tree in (pristine, None):
        assert _grade(repo, [target], pristine_tree, pytest_mode=True) == {target: "FAILED"}


def test_a_refused_objects_eq_never_runs_against_the_expectation(trees):
    """An ``__eq__`` that sees the expected value in a failing canary can remember it and have the code under test
    return a plain copy in the real test later (red team, round 5: it passed in 8 of 12 runs, as the canaries'
    order fell). Strict equality now refuses a pair before comparing it: the refused object's ``__eq__`` never
    runs, with or without the judge (here it leaves a file behind if it does)."""
    repo, pristine = trees
    marker = repo.parent / "eq-ran"
    _attack(repo, ("return dict(self.items()) == dict(other)",
                   f"open({str(marker)!r}, 'w').close()\n        return True",
                   "return Multi([(\"a\", 1), (\"b\", 2)])", "return Multi([(\"a\", 0)])"))
    for pristine_tree in (pristine, None):
        target = "tests.test_pkg.TestPkg.test_pairs"
        assert _grade(repo, [target], pristine_tree) == {target: "FAILED"}
        assert not marker.exists()


def _judge_one(pristine, sources, nodes, agent_tree):
    import json
    import marshal

    frozen = marshal.dumps((1, nodes, (0, 1), "=="))
    request = json.dumps({"root": str(pristine), "sources": sources, "disputes": [frozen.hex()]})
    done = subprocess.run(["/usr/bin/python3", "-B", "-s", str(TOOLS_DIR / "judge.py"), str(agent_tree)],
                          input=request, capture_output=True, text=True, timeout=60, check=False)
    (held, why, in_full), = json.loads(done.stdout.splitlines()[-1])
    assert type(in_full) is bool
    return held, why


@pytest.mark.parametrize(("module", "qualname"), [
    ("tests.test_pkg", "unittest.mock._Call"), ("pkg", "Multi.__init__"), ("pkg", "re.Pattern")])
def test_the_judge_rebuilds_only_classes_the_package_defines_under_that_name(module, qualname, tmp_path):
    """A name that walks into another module reaches library classes that compare generously (``mock._Call``,
    red team, round 5): the class must carry the name it was looked up by. Anything else stands as an object
    that fails any use."""
    pristine = _package(tmp_path / "pristine")
    sources = {str(p.relative_to(pristine)): p.read_text() for p in pristine.rglob("*.py")}
    held, why = _judge_one(pristine, sources, [("object", module, qualname, "object", None, -1, []), ("v", 1)],
                           tmp_path / "repo")
    assert held is False and "says they differ" in why, why


def test_a_test_module_the_judge_imports_cannot_reach_the_agents_tree(tmp_path):
    """The judge imports a test module from the untouched sources to rebuild a class it defines (cachetools' test
    subclasses), and the module's own code runs: a folder it puts on sys.path that leads into the agent's tree
    (red team, round 5) yields no module, so no code of the agent's runs in the judge."""
    pristine = _package(tmp_path / "pristine")
    repo = tmp_path / "repo"
    repo.mkdir()
    marker = tmp_path / "planted-ran"
    (repo / "planted.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    sources = {str(p.relative_to(pristine)): p.read_text() for p in pristine.rglob("*.py")}
    sources["tests/test_pkg.py"] = (f"import sys\nsys.path.insert(0, {str(repo)!r})\ntry:\n    import planted\n"
                                    "except ImportError:\n    pass\n\n\nclass Helper:\n    pass\n\n\n"
                                    + sources["tests/test_pkg.py"])
    held, why = _judge_one(pristine, sources, [("object", "tests.test_pkg", "Helper", "object", None, -1, []),
                                               ("object", "tests.test_pkg", "Helper", "object", None, -1, [])], repo)
    assert not marker.exists()
    assert held is False and "says they differ" in why, why  # two Helpers: object's == is identity


def test_the_untouched_sources_are_read_before_any_test_runs(trees):
    """A test that rewrites the untouched tree on disk changes nothing: the runner read it at start."""
    repo, pristine = trees
    _attack(repo, ATTACKS["rewritten_eq"])
    (repo / "tests" / "test_pkg.py").write_text((repo / "tests" / "test_pkg.py").read_text().replace(
        "    def test_pairs(self):\n",
        "    def test_pairs(self):\n        import pathlib\n"
        f"        p = pathlib.Path({str(pristine / 'pkg' / '__init__.py')!r})\n"
        "        p.write_text(p.read_text().replace('return dict(self.items()) == dict(other)', 'return True'))\n"))
    shutil.copy(repo / "tests" / "test_pkg.py", pristine / "tests" / "test_pkg.py")  # the trusted test file
    target = "tests.test_pkg.TestPkg.test_pairs"
    assert _grade(repo, [target], pristine) == {target: "FAILED"}


@pytest.fixture
def own_equality_task(tmp_path):
    """A task graded in the bwrap sandbox whose tests compare the package's own class with builtin values:
    ``pairs()`` keeps the wrong value for "b"."""
    from tests.test_swe_forgery import _git_diff
    from turngym.envs.swe import SWEInstance, swe_taskset

    bug = PACKAGE.replace('return Multi([("a", 1), ("b", 2)])', 'return Multi([("a", 1), ("b", 3)])')
    assert bug != PACKAGE
    repo = _package(tmp_path / "own-repo", bug)
    (repo / "pyproject.toml").write_text('[project]\nname = "pkg"\n\n[tool.pytest.ini_options]\npythonpath = ["."]\n')
    init = repo / "pkg" / "__init__.py"
    gold = _git_diff(repo, lambda r: init.write_text(init.read_text().replace('("b", 3)', '("b", 2)')))
    ids = [f"tests/test_pkg.py::TestPkg::test_{name}" for name in ("pairs", "version", "nested", "in")]
    instance = SWEInstance(instance_id="local__own-1", repo="local/own", base_commit="",
                           problem_statement="pairs() gives b=3", patch=gold, test_patch="",
                           fail_to_pass=(ids[0], "tests/test_pkg.py::test_plain_assert"),
                           pass_to_pass=tuple(ids[1:]), repo_path=str(repo))
    return swe_taskset([instance], name="own")


@pytest.mark.skipif(not _sandbox_python_has_pytest(), reason="the sandbox's python3 has no pytest")
def test_the_grading_script_gives_the_runner_the_base_tree(make_swe_env, own_equality_task):
    """Through the world in bwrap: the gold patch resolves (the package's own == judged on the base tree the
    grading script copied), and an always-equal __eq__ planted instead earns nothing."""
    from tests.test_swe import BWRAP_PROBLEM, _append, play

    if BWRAP_PROBLEM is not None:
        pytest.skip(f"bwrap sandbox unavailable: {BWRAP_PROBLEM}")
    env = make_swe_env(tasks=own_equality_task)
    _, info = env.reset(options={"task": "local__own-1"})
    *_, (_, reward, _, _, info) = play(env, info["walkthrough"])
    assert reward == 1.0 and info["resolved"], info["tests"]
    _, info = env.reset(options={"task": "local__own-1"})
    always = _append("pkg/__init__.py", "Multi.__eq__ = lambda self, other: True")
    *_, (_, reward, _, _, info) = play(env, [always, "submit"])
    assert reward == 0.0 and info["grading_tampered"] is False, info["tests"]
    assert info["tests"]["tests/test_pkg.py::TestPkg::test_pairs"] == "FAILED", info["tests"]
    assert info["tests"]["tests/test_pkg.py::test_plain_assert"] == "FAILED", info["tests"]


# A bug in code the package's own == calls: `Version("1.2")` parses as 2.1. Judged on the base tree, the bugged ==
# read "1.2" as 2.1 too and refused the gold patch's honest `version() == "1.2"` (semver: 33 tests of the scale set).
EQ_BUG = ("self.major, self.minor = (int(p) for p in text.split(\".\"))",
          "self.minor, self.major = (int(p) for p in text.split(\".\"))")


def reads_the_answer(roots: str) -> str:
    """Code the agent appends to its package: at import, it looks through ``roots`` (a Python expression) for the
    gold parsing and, where it finds it, puts it in. It earns the reward exactly when the answer is readable."""
    return textwrap.dedent(f'''
        import os as _os


        def _answer_on_disk(roots):
            for root in roots:
                for folder, _, files in _os.walk(root):
                    for name in files:
                        try:
                            with open(_os.path.join(folder, name), encoding="latin-1") as handle:
                                if "self.major, self.minor = " + "(int(p)" in handle.read(1 << 20):
                                    return True
                        except OSError:
                            pass
            return False


        if _answer_on_disk({roots}):
            def _gold_init(self, text):  # not the gold line, which the agent's own patch would then hold
                self.major, self.minor = [int(p) for p in text.split(".")]

            Version.__init__ = _gold_init
        ''')


def test_a_reference_tree_that_holds_the_answer_is_gone_before_any_test_runs(trees):
    """The grading script puts the gold patch in the reference tree and asks the runner to discard it: the runner
    deletes it (having read it first, where its memory is hidden: not as root, as here) and only then runs code
    under test, which finds nothing. Kept on disk (the control), the same code finds the answer and passes."""
    repo, pristine = trees  # the reference is the untouched package: the gold tree of a task whose bug is EQ_BUG
    _attack(repo, EQ_BUG)
    with (repo / "pkg" / "__init__.py").open("a") as handle:
        handle.write(reads_the_answer(repr([str(pristine)])))
    target = "tests.test_pkg.TestPkg.test_version"
    assert _grade(repo, [target], pristine) == {target: "PASSED"}  # the control: the answer was readable
    assert _grade(repo, [target], pristine, discard=True) == {target: "FAILED"}
    assert not pristine.exists()


# A package whose own == against a mapping reads the keys only (boltons' OrderedMultiDict, an upstream bug): honest,
# yet it also equals the judge's probes, as a planted wildcard does (cause D of the scale set's gold analysis).
COARSE = """import array


class Multi:
    def __init__(self, items, extra=None):
        self.items = list(items)
        self.extra = extra

    def __eq__(self, other):
        if isinstance(other, dict):
            return [k for k, _ in self.items] == list(other)
        return isinstance(other, Multi) and self.items == other.items

    __hash__ = None


def build(b=2):
    return Multi([("a", 1), ("b", b)])


def build_with_array(b=2):
    return Multi([("a", 1), ("b", b)], array.array("i", [b]))
"""
COARSE_TESTS = """import unittest

from pkg import build, build_with_array


class T(unittest.TestCase):
    def test_a(self):
        self.assertEqual(build(), {"a": 1, "b": 2})

    def test_array(self):
        self.assertEqual(build_with_array(), {"a": 1, "b": 2})
"""


def _reference_states(log: str) -> tuple[str, ...]:
    from turngym.envs.swe.synth.pipeline import reference_states_in

    return reference_states_in(log)


def _refused_by_the_probes(log: str) -> tuple[str, ...]:
    from turngym.envs.swe.synth.pipeline import PROBES_REFUSED_LINE, reference_states_in

    return reference_states_in(log, PROBES_REFUSED_LINE)


def test_the_gold_grading_records_a_pair_the_probes_let_through(tmp_path):
    """The judge's probes are drawn anew in each grading, so a coarse pair they let through in the gold patch's
    grading can meet a refusing probe in a later one (packaging 24.0's ``<=1!3.0.0.rc2``). The gold grading
    therefore prints the state of every pair whose untouched comparison held in full, refused or not: here an
    exact ``==`` that no probe refuses. The pair with a stand-in (a C array) holds but has no state."""
    exact = COARSE.replace("return [k for k, _ in self.items] == list(other)", "return dict(self.items) == other")
    gold = _scenario_tree(tmp_path / "gold", exact, COARSE_TESTS)
    ids = ["tests.test_pkg.T.test_a", "tests.test_pkg.T.test_array"]
    found, log = _grade_with_log(gold, ids, gold)
    assert found == dict.fromkeys(ids, "PASSED")  # (the arrayed pair's == never reads its stand-in)
    assert len(_reference_states(log)) == 1 and _refused_by_the_probes(log) == ()
    wrong = _scenario_tree(tmp_path / "wrong", exact.replace("def build(b=2)", "def build(b=3)"), COARSE_TESTS)
    found, log = _grade_with_log(wrong, ids[:1], gold)
    assert found == {ids[0]: "FAILED"} and _reference_states(log) == ()  # the untouched == said no: no state


def test_a_pair_is_accepted_by_its_state_only_where_the_probes_alone_refused_it(monkeypatch):
    """The runner's rule, verdict by verdict (the judge answers ``(held, why, in_full)``): a pair held in full is
    recorded and holds; one the probes alone refused holds when its digest is a reference state, else is recorded
    as refused; one not rebuilt in full, or whose untouched comparison said no, is never recorded nor rescued."""
    import hashlib
    import importlib.util

    spec = importlib.util.spec_from_file_location("runner_under_test", TOOLS_DIR / "unittest_runner.py")
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    known, other = "00ff", "11ee"
    runner.REFERENCE_STATES[0] = frozenset({hashlib.sha256(known.encode()).hexdigest()})
    assert runner.reference_verdict(other, True, "", True) == (True, "")
    assert runner.reference_verdict(known, False, "also equals 'x'", True) == (True, "")
    assert runner.reference_verdict(other, False, "also equals 'x'", True) == (False, "also equals 'x'")
    digest = hashlib.sha256(other.encode()).hexdigest()
    assert runner.STATES_SEEN == {digest, *runner.REFERENCE_STATES[0]} and runner.PROBES_REFUSED == {digest}
    assert runner.reference_verdict("22dd", False, "a stand-in", False) == (False, "a stand-in")
    assert runner.reference_verdict(known, False, "its own == says they differ", False)[0] is False
    assert runner.reference_verdict("33cc", True, "", False) == (True, "")
    assert len(runner.STATES_SEEN) == 2 and len(runner.PROBES_REFUSED) == 1


def test_a_coarse_eq_holds_where_its_state_is_the_gold_patchs(tmp_path):
    """The gold patch's grading refuses the package's honest, coarse == by the judge's probes and prints the pair's
    digest; given that digest back (the task's reference states), the gold patch passes. A wrong value, one behind
    an always-equal ``__eq__``, and a state the judge cannot rebuild in full (a C array inside) still fail. (The
    right value behind an always-equal ``__eq__`` passes, as it does without reference states: the judge compares
    the state on the untouched class; so does the right value built another way.)"""
    gold = _scenario_tree(tmp_path / "gold", COARSE, COARSE_TESTS)
    ids = ["tests.test_pkg.T.test_a", "tests.test_pkg.T.test_array"]
    found, log = _grade_with_log(gold, ids, gold)
    assert found == dict.fromkeys(ids, "FAILED") and "also equals" in log  # the false alarm, by the probes
    states = _reference_states(log)
    assert len(states) == 1  # test_a's pair: the arrayed one has a stand-in, and no state of its own
    assert _refused_by_the_probes(log) == states
    assert _grade_with_log(gold, ids, gold, states=states)[0] == {ids[0]: "PASSED", ids[1]: "FAILED"}
    wrong = COARSE.replace("def build(b=2)", "def build(b=3)")
    always = wrong.replace("    def __eq__(self, other):\n", "    def __eq__(self, other):\n        return True\n")
    for name, package in (("wrong", wrong), ("always", always)):
        agent = _scenario_tree(tmp_path / name, package, COARSE_TESTS)
        assert _grade_with_log(agent, ids[:1], gold, states=states)[0] == {ids[0]: "FAILED"}, name
    assert _grade_with_log(gold, ids[:1], None, states=states)[0] == {ids[0]: "FAILED"}  # no reference, no judge
    # the same value built at run time, not the test's interned constant: one frozen table (red team, 2026-12-02:
    # the freezer's nodes were objects by identity, so an honest answer built another way missed the gold's digest)
    built = _scenario_tree(tmp_path / "built", COARSE.replace(
        'return Multi([("a", 1), ("b", b)])\n', 'return Multi([("".join(["", "a"]), 1), (chr(98), b)])\n', 1),
        COARSE_TESTS)
    assert _grade_with_log(built, ids[:1], gold, states=states)[0] == {ids[0]: "PASSED"}


@pytest.mark.skipif(not _sandbox_python_has_pytest(), reason="the sandbox's python3 has no pytest")
def test_the_validation_gives_a_coarse_eq_task_the_gold_patchs_reference_states(tmp_path):
    """Through the world's grading in bwrap (the states go to the runner after the nonce, beside the gold reference
    tree): the gold patch's first grading fails the coarse ``==`` test and prints its state; the validation gives
    the task that state and grades again, and the gold patch resolves it while the bug still fails."""
    from tests.test_swe import BWRAP_PROBLEM
    from tests.test_swe_forgery import _git_diff
    from turngym.envs.swe import SWEInstance
    from turngym.envs.swe.synth.pipeline import validate_with_reference_states

    if BWRAP_PROBLEM is not None:
        pytest.skip(f"bwrap sandbox unavailable: {BWRAP_PROBLEM}")
    tests = COARSE_TESTS + (
        '\n    def test_items(self):\n        self.assertEqual(build().items, [("a", 1), ("b", 2)])\n')
    repo = _scenario_tree(tmp_path / "repo", COARSE.replace("def build(b=2)", "def build(b=5)"), tests)
    (repo / "pyproject.toml").write_text('[project]\nname = "pkg"\n\n[tool.pytest.ini_options]\npythonpath = ["."]\n')
    init = repo / "pkg" / "__init__.py"
    gold = _git_diff(repo, lambda r: init.write_text(COARSE))
    ids = ("tests/test_pkg.py::T::test_items", "tests/test_pkg.py::T::test_a")
    instance = SWEInstance(instance_id="local__coarse-1", repo="local/coarse", base_commit="",
                           problem_statement="build() holds 5 for b", patch=gold, test_patch="",
                           fail_to_pass=ids, pass_to_pass=(), repo_path=str(repo))
    result, validated = validate_with_reference_states(instance, "bwrap")
    assert len(validated.reference_states) == 1 and validated.to_record()["reference_states"]
    assert result.after.statuses == dict.fromkeys(ids, "PASSED"), result.after.log[-2000:]
    assert result.before.statuses == dict.fromkeys(ids, "FAILED"), result.before.log[-2000:]
    assert SWEInstance.from_record(validated.to_record()).reference_states == validated.reference_states


@pytest.mark.parametrize("pytest_mode", [False, True])
def test_a_repository_member_in_a_package_container_is_refused(pytest_mode, tmp_path):
    """A member whose ``==`` is the repository's, in a container that is not a builtin one, is refused outright,
    never judged: the judge cannot probe a package container's items (red team, 2026-12-02: with the pair handed
    to the judge, a Version of generous Intervals was "in" the package's Shelf)."""
    tests = ("from pkg import *\n\ndef test_a():\n    assert latest(['1.0', '2.1']) in released()\n" if pytest_mode
             else "import unittest\nfrom pkg import *\n\nclass T(unittest.TestCase):\n    def test_a(self):\n"
                  "        self.assertIn(latest(['1.0', '2.1']), released())\n")
    target = "tests/test_pkg.py::test_a" if pytest_mode else "tests.test_pkg.T.test_a"
    import runpy

    if pytest_mode and not _sandbox_python_has_pytest():
        pytest.skip("the sandbox's python3 has no pytest")
    scenario = runpy.run_path(str(ROUNDS / "swe_judge_round19" / "refused_generous_member_in_package_container.py"))
    gold = _scenario_tree(tmp_path / "gold", scenario["PKG"], tests)
    agent = _scenario_tree(tmp_path / "agent", scenario["AGENT"], tests)
    assert _grade(agent, [target], gold, pytest_mode) == {target: "FAILED"}


def _eq_bug_taskset(root: Path, name: str, test_cmd: str | None = None):
    """A one-task set graded in the bwrap sandbox whose bug is in code the package's own ``==`` calls
    (:data:`EQ_BUG`), with the task's own ``test_cmd`` if given (its repository then has a ``setup.py`` to run)."""
    from tests.test_swe_forgery import _git_diff
    from turngym.envs.swe import SWEInstance, swe_taskset

    repo = _package(root / f"{name}-repo", PACKAGE.replace(*EQ_BUG))
    (repo / "pyproject.toml").write_text('[project]\nname = "pkg"\n\n[tool.pytest.ini_options]\npythonpath = ["."]\n')
    if test_cmd is not None:
        (repo / "setup.py").write_text("print('build')\n")
    init = repo / "pkg" / "__init__.py"
    gold = _git_diff(repo, lambda r: init.write_text(init.read_text().replace(EQ_BUG[1], EQ_BUG[0])))
    ids = [f"tests/test_pkg.py::TestPkg::test_{test}" for test in ("version", "in", "pairs", "nested")]
    instance = SWEInstance(instance_id=f"local__{name}-1", repo=f"local/{name}", base_commit="",
                           problem_statement="Version('1.2') reads as 2.1", patch=gold, test_patch="",
                           fail_to_pass=tuple(ids[:2]), pass_to_pass=tuple(ids[2:]), repo_path=str(repo),
                           test_cmd=test_cmd)
    return swe_taskset([instance], name=name)


@pytest.fixture
def eq_bug_task(tmp_path):
    return _eq_bug_taskset(tmp_path, "eq")


@pytest.mark.skipif(not _sandbox_python_has_pytest(), reason="the sandbox's python3 has no pytest")
def test_a_bug_under_the_packages_own_eq_is_judged_on_the_gold_tree(make_swe_env, eq_bug_task):
    """Through the world in bwrap: the gold patch resolves a bug in code the package's own ``==`` calls (judged on
    the base tree, the bugged ``==`` refused its honest pairs), the bug itself earns nothing, and code under test
    that looks for the answer in the grading sandbox's reference tree, /scratch and /tmp finds none."""
    from tests.test_swe import BWRAP_PROBLEM, _append, play

    if BWRAP_PROBLEM is not None:
        pytest.skip(f"bwrap sandbox unavailable: {BWRAP_PROBLEM}")
    env = make_swe_env(tasks=eq_bug_task)
    _, info = env.reset(options={"task": "local__eq-1"})
    *_, (_, reward, _, _, info) = play(env, info["walkthrough"])
    assert reward == 1.0 and info["resolved"], info["tests"]
    _, info = env.reset(options={"task": "local__eq-1"})
    *_, (_, reward, _, _, info) = play(env, ["submit"])
    assert reward == 0.0 and info["tests"]["tests/test_pkg.py::TestPkg::test_version"] == "FAILED", info["tests"]
    _, info = env.reset(options={"task": "local__eq-1"})
    looks = _append("pkg/__init__.py", reads_the_answer(
        '[_os.environ.get("TURNGYM_PRISTINE", "/nonexistent"), "/scratch", "/tmp"]'))
    *_, (_, reward, _, _, info) = play(env, [looks, "submit"])
    assert reward == 0.0 and info["tests"]["tests/test_pkg.py::TestPkg::test_version"] == "FAILED", info["tests"]


def test_only_one_bare_runner_call_gets_the_gold_reference():
    """Anything before the runner in the command (a build step the task names) runs the agent's code while the
    reference holding the answer is on disk: such a command keeps the base as its reference (red team,
    2026-12-02: `python3 setup.py -q && python3 /opt/turngym/unittest_runner.py ...` copied the answer in)."""
    from turngym.envs.swe.test_command import DEFAULT_TEST_CMD, RUNNER_PATH, runs_only_the_runner

    runner = f"python3 {RUNNER_PATH} --pytest 'tests/test_a.py::test_b[x|y]'"
    assert runs_only_the_runner(DEFAULT_TEST_CMD.format(tests="tests/test_a.py::test_b"))
    assert runs_only_the_runner(runner) and runs_only_the_runner(f"PYTHONHASHSEED=0 python3 -I -B {runner[8:]}")
    for command in (f"python3 setup.py -q && {runner}", f"pytest tests # {RUNNER_PATH}", f"{runner}; cat x",
                    f"source activate env && {runner}", f"python3 -c 'import x' {RUNNER_PATH}",
                    f"bash -c '{runner}'", f"python3 -m {RUNNER_PATH}", f"{runner} > log", "", f"'{RUNNER_PATH}"):
        assert not runs_only_the_runner(command), command


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the runner must not count its memory hidden then")
def test_the_runner_does_not_count_its_memory_hidden_as_root():
    """A test process of a root runner may hold CAP_SYS_PTRACE, which reads a non-dumpable process's memory (the
    red team read the gold sources so): as root, the runner does not read a reference that holds the answer."""
    code = "import sys; sys.path.insert(0, sys.argv[1]); import unittest_runner; print(unittest_runner._no_dump())"
    done = subprocess.run(["/usr/bin/python3", "-I", "-c", code, str(TOOLS_DIR)],
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["False"], done.stdout + done.stderr


@pytest.fixture
def prefixed_task(tmp_path):
    """:func:`eq_bug_task` with a build step before the runner in its test command."""
    return _eq_bug_taskset(tmp_path, "prefixed",
                           "python3 setup.py -q && python3 /opt/turngym/unittest_runner.py {tests}")


@pytest.mark.skipif(not _sandbox_python_has_pytest(), reason="the sandbox's python3 has no pytest")
def test_a_build_step_before_the_runner_finds_no_answer_to_copy(make_swe_env, prefixed_task):
    """The red team's reproducer: the agent's setup.py, run by the task's command before the runner, copies the
    reference's package over its own when it holds the answer, and stops the command (no tests run) when it does
    not. It earned 1.0 with the gold reference on disk; now the reference is the base and it earns 0."""
    from tests.test_swe import BWRAP_PROBLEM, _append, play

    if BWRAP_PROBLEM is not None:
        pytest.skip(f"bwrap sandbox unavailable: {BWRAP_PROBLEM}")
    copies = ("import os, shutil, sys\nsource = '/scratch/.turngym-pristine/pkg/__init__.py'\n"
              "if not os.path.exists(source) or 'self.major, self.minor = ' + '(int' not in open(source).read():\n"
              "    sys.exit(1)\nshutil.copy(source, 'pkg/__init__.py')\n")
    env = make_swe_env(tasks=prefixed_task)
    env.reset(options={"task": "local__prefixed-1"})
    *_, (_, reward, _, _, info) = play(env, [_append("setup.py", copies), "submit"])
    assert reward == 0.0 and info["tests"]["tests/test_pkg.py::TestPkg::test_version"] != "PASSED", info["tests"]


# Red team, round 6 (each passed under 48b273a): (package, the agent's version of it, tests, the graded ids)
ROUND_6 = {
    # a library's always-true __eq__ in a str subclass that names the library as its module
    "borrowed_library_eq": (
        "def name():\n    return 'alice'\n",
        ("from unittest import mock\n\n\nclass S(str):\n    __module__ = 'unittest.mock'\n"
         "    __eq__ = mock._ANY.__eq__\n    __hash__ = str.__hash__\n\n\ndef name():\n    return S('WRONG')\n"),
        ("import unittest\nfrom pkg import name\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n"
        "        self.assertEqual(name(), 'alice')\n")),
    # an exact Fraction whose slots hold an always-equal object: its library __eq__ reads them
    "fraction_state": (
        "def total(xs):\n    return sum(xs)\n",
        ("from fractions import Fraction\n\n\nclass Any:\n    def __eq__(self, other):\n        return True\n"
        "    __hash__ = object.__hash__\n\n\ndef total(xs):\n    f = Fraction(0)\n    f._numerator = Any()\n"
        "    f._denominator = Any()\n    return f\n"),
        ("import unittest\nfrom pkg import total\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n"
        "        self.assertEqual(total([1, 2]), 3)\n")),
    # operations other than == that the type-specific assertions use
    "sequence_subclass": (
        "def squares(n):\n    return [i * i for i in range(n)]\n",
        ("class L(list):\n    def __eq__(self, other):\n        return True\n    __hash__ = None\n\n\n"
        "def squares(n):\n    return L([0] * n)\n"),
        ("import unittest\nfrom pkg import squares\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n"
        "        self.assertSequenceEqual(squares(3), [0, 1, 4])\n")),
    "float_subtraction": (
        "def mean(xs):\n    return sum(xs) / len(xs)\n",
        ("class F(float):\n    def __sub__(self, other):\n        return 0.0\n\n    def __rsub__(self, other):\n"
        "        return 0.0\n\n\ndef mean(xs):\n    return F(42.0)\n"),
        ("import unittest\nfrom pkg import mean\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n"
        "        self.assertAlmostEqual(mean([1.0, 2.0]), 1.5)\n")),
    "set_difference": (
        "def primes():\n    return {2, 3, 5, 7}\n",
        ("class S(set):\n    def difference(self, *others):\n        return set()\n\n\ndef primes():\n"
        "    return S(range(10))\n"),
        ("import unittest\nfrom pkg import primes\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n"
        "        self.assertSetEqual({2, 3, 5, 7}, primes())\n")),
    # containers: a list subclass's own __contains__; a range, which plain `in` reads
    "container_subclass": (
        "def warnings():\n    return ['deprecated']\n",
        "class L(list):\n    def __contains__(self, item):\n        return True\n\n\ndef warnings():\n    return L()\n",
        ("import unittest\nfrom pkg import warnings\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n"
        "        self.assertIn('deprecated', warnings())\n")),
    "member_of_a_range": (
        "def status():\n    return 200\n",
        ("class I(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n\n\n"
        "def status():\n    return I(999)\n"),
        ("import unittest\nfrom pkg import status\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n"
        "        self.assertIn(status(), range(200, 300))\n")),
    # the package's own pattern class, returned for a date: every probe had changed a digit into a letter
    "pattern_for_a_date": (
        ("class Pattern:\n    def __init__(self, pattern):\n        self.pattern = pattern\n\n"
        "    def __eq__(self, other):\n        import re\n\n"
        "        return isinstance(other, str) and re.fullmatch(self.pattern, other) is not None\n\n\n"
        "def iso():\n    return '2021-03-04'\n"),
        ("class Pattern:\n    def __init__(self, pattern):\n        self.pattern = pattern\n\n"
        "    def __eq__(self, other):\n        import re\n\n"
        "        return isinstance(other, str) and re.fullmatch(self.pattern, other) is not None\n\n\n"
        "def iso():\n    return Pattern(r'\\d{4}-\\d{2}-\\d{2}')\n"),
        ("import unittest\nfrom pkg import iso\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n"
        "        self.assertEqual(iso(), '2021-03-04')\n")),
}


def _scenario_tree(root, package, tests, tests_package=True, files=None):
    """A scenario's tree: ``pkg/__init__.py`` and ``tests/test_pkg.py`` under ``root`` (and ``tests/__init__.py``
    unless ``tests_package`` is false; ``files``: more files, by path)."""
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "__init__.py").write_text(package)
    if tests_package:
        (root / "tests" / "__init__.py").write_text("")
    for relative, text in (files or {}).items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    (root / "tests" / "test_pkg.py").write_text(tests)
    return root


def _scenario_fails_and_its_package_passes(scenario, tmp_path):
    """A (package, the agent's version of it, tests) scenario: its test fails with and without the untouched tree,
    and passes on the untouched package."""
    package, agent, tests = scenario
    pristine = _scenario_tree(tmp_path / "pristine", package, tests)
    _scenario_tree(tmp_path / "repo", agent, tests)
    target = "tests.test_pkg.T.test_a"
    for pristine_tree in (pristine, None):
        assert _grade(tmp_path / "repo", [target], pristine_tree) == {target: "FAILED"}
    assert _grade(pristine, [target], pristine) == {target: "PASSED"}  # the untouched package passes


@pytest.mark.parametrize("attack", list(ROUND_6))
def test_the_sixth_rounds_attacks_fail(attack, tmp_path):
    _scenario_fails_and_its_package_passes(ROUND_6[attack], tmp_path)


def test_an_interval_inside_the_packages_object_is_probed(trees):
    """The package's own generous Interval placed inside a Multi's contents: probes that changed only the top
    level never met it (red team, round 6); the dict with one value changed does."""
    repo, pristine = trees
    _attack(repo, ('return Multi([("a", 1), ("b", 2)])', 'return Multi([("a", Interval(-10**9, 10**9)), ("b", 2)])'))
    target = "tests.test_pkg.TestPkg.test_pairs"
    assert _grade(repo, [target], pristine) == {target: "FAILED"}


# Red team, round 7 (each passed under 1ad570f)
ROUND_7 = {
    # a library's always-true __eq__ in a class bound into a module the code under test made (or into json)
    "library_eq_bound_into_a_module": (
        "def name():\n    return 'alice'\n",
        ("import sys\nimport types\nfrom unittest import mock\n\nmodule = sys.modules.setdefault('email._helpers', "
        "types.ModuleType('email._helpers'))\n\n\nclass S(str):\n    __module__ = 'email._helpers'\n"
        "    __eq__ = mock._ANY.__eq__\n    __hash__ = str.__hash__\n\n\nmodule.S = S\n\n\ndef name():\n"
        "    return S('WRONG')\n"),
        ("import unittest\nfrom pkg import name\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n"
        "        self.assertEqual(name(), 'alice')\n")),
    # mock's _Call with an empty name equals a call of any name: its tuple contents do not
    "lenient_library_eq": (
        "def parse():\n    return ('add', (1, 2), {})\n",
        "from unittest.mock import _Call\n\n\ndef parse():\n    return _Call(('', (1, 2), {}))\n",
        ("import unittest\nfrom unittest import mock  # noqa: F401\nfrom pkg import parse\n\n\n"
        "class T(unittest.TestCase):\n    def test_a(self):\n"
        "        self.assertEqual(parse(), ('add', (1, 2), {}))\n")),
    # the package's own Interval as one value of a 30-key dict subclass: the probes changed at most 8 keys
    "wrong_leaf_past_the_sample": (
        PACKAGE + "\n\ndef config():\n    return {f'k{i}': i for i in range(30)}\n",
        PACKAGE + "\n\ndef config():\n    return Multi([(f'k{i}', Interval(-10**9, 10**9) if i == 17 else i)"
        " for i in range(30)])\n",
        ("import unittest\nfrom pkg import config\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n"
        "        self.assertEqual(config(), {f'k{i}': i for i in range(30)})\n")),
}


@pytest.mark.parametrize("attack", list(ROUND_7))
def test_the_seventh_rounds_attacks_fail(attack, tmp_path):
    _scenario_fails_and_its_package_passes(ROUND_7[attack], tmp_path)


def test_the_judge_reads_what_the_test_process_writes():
    """judge.py runs standalone in a fresh process, so it keeps its own copy of the frozen kinds: they must match
    integrity.make_dispute's."""
    import importlib.util

    loaded = {}
    for name in ("integrity", "judge"):
        spec = importlib.util.spec_from_file_location(f"{name}_under_test", TOOLS_DIR / f"{name}.py")
        loaded[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded[name])
    assert loaded["judge"].SCALARS == loaded["integrity"].FROZEN_SCALARS
    assert loaded["judge"].BASES == {tag: kind for kind, tag in loaded["integrity"].FROZEN_BASES}
    assert loaded["judge"].VALUES == {name: kind for name, kind, _ in loaded["integrity"].value_kinds()}


# Red team, round 7's open finding: an expected value that is not builtin data (an enum member, a date, a Decimal)
# was outside strict equality, so an object whose own __eq__ said True passed against it. Now the repository's
# __eq__ against a fixed equality (identity, a standard library value type) is judged on the untouched code, and
# the value types are frozen by their arguments so the package's honest equality with them still passes.
_ALWAYS = "class Any:\n    def __eq__(self, other):\n        return True\n\n    __hash__ = object.__hash__\n\n\n"
_MONEY = ("from decimal import Decimal\n\n\nclass Money:\n    def __init__(self, amount):\n"
          "        self.amount = amount\n\n    def __eq__(self, other):\n        if isinstance(other, Decimal):\n"
          "            return self.amount == other\n"
          "        return isinstance(other, Money) and self.amount == other.amount\n\n    __hash__ = None\n\n\n")
_STAMP = ("from datetime import datetime, timezone\n\n\nclass Stamp(datetime):\n    def __eq__(self, other):\n"
          "        if isinstance(other, datetime):\n            return datetime.__eq__(self.replace(tzinfo=None), "
          "other.replace(tzinfo=None))\n        return NotImplemented\n\n    __hash__ = datetime.__hash__\n\n\n")
_OFFSET = ("from datetime import timedelta, timezone, tzinfo\n\n\nclass Offset(tzinfo):\n"
           "    def __init__(self, hours):\n        self.hours = hours\n\n"
           "    def utcoffset(self, dt):\n        return timedelta(hours=self.hours)\n\n"
           "    def __eq__(self, other):\n        if isinstance(other, timezone):\n"
           "            return other.utcoffset(None) == self.utcoffset(None)\n"
           "        return isinstance(other, Offset) and other.hours == self.hours\n\n"
           "    __hash__ = object.__hash__\n\n\n")
FIXED_EQUALITIES = {
    "always_equal_for_an_enum_member": (
        "import enum\n\n\nclass Status(enum.Enum):\n    OK = 1\n    BAD = 2\n\n\ndef status():\n    return Status.OK\n",
        ("import enum\n\n\nclass Status(enum.Enum):\n    OK = 1\n    BAD = 2\n\n\n" + _ALWAYS +
         "def status():\n    return Any()\n"),
        ("import unittest\nfrom pkg import Status, status\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n"
         "        self.assertEqual(status(), Status.OK)\n")),
    "always_equal_for_a_date": (
        "from datetime import date\n\n\ndef parse(text):\n    return date(*map(int, text.split('-')))\n",
        "from datetime import date\n\n\n" + _ALWAYS + "def parse(text):\n    return Any()\n",
        ("import unittest\nfrom datetime import date\nfrom pkg import parse\n\n\nclass T(unittest.TestCase):\n"
         "    def test_a(self):\n        self.assertEqual(parse('2020-01-02'), date(2020, 1, 2))\n")),
    # the package's own Money, equal to a Decimal: its __eq__ rewritten to agree, holding the wrong amount
    "rewritten_eq_against_a_decimal": (
        _MONEY + "def total():\n    return Money(Decimal('3.50'))\n",
        _MONEY.replace("return self.amount == other\n", "return True\n") + "def total():\n"
        "    return Money(Decimal('9.99'))\n",
        ("import unittest\nfrom decimal import Decimal\nfrom pkg import total\n\n\nclass T(unittest.TestCase):\n"
         "    def test_a(self):\n        self.assertEqual(total(), Decimal('3.50'))\n")),
    # the package's own datetime subclass (naive equality), rewritten to agree, holding another day
    "rewritten_eq_of_a_datetime_subclass": (
        _STAMP + "def stamp():\n    return Stamp(2021, 3, 4, 5, 6, 7, tzinfo=timezone.utc)\n",
        _STAMP.replace("        if isinstance(other, datetime):\n", "        return True\n        if True:\n") +
        "def stamp():\n    return Stamp(1999, 1, 1)\n",
        ("import unittest\nfrom datetime import datetime\nfrom pkg import stamp\n\n\nclass T(unittest.TestCase):\n"
         "    def test_a(self):\n        self.assertEqual(stamp(), datetime(2021, 3, 4, 5, 6, 7))\n")),
    # the package's own tzinfo, equal to a timezone with its offset (dateutil's tzutc is): rewritten to agree
    "rewritten_eq_of_a_tzinfo": (
        _OFFSET + "def utc():\n    return Offset(0)\n",
        _OFFSET.replace("        if isinstance(other, timezone):\n", "        return True\n        if True:\n") +
        "def utc():\n    return Offset(5)\n",
        ("import unittest\nfrom datetime import timezone\nfrom pkg import utc\n\n\nclass T(unittest.TestCase):\n"
         "    def test_a(self):\n        self.assertEqual(utc(), timezone.utc)\n")),
}


@pytest.mark.parametrize("attack", list(FIXED_EQUALITIES))
def test_an_object_equal_to_anything_fails_against_an_enum_member_a_date_or_a_decimal(attack, tmp_path):
    _scenario_fails_and_its_package_passes(FIXED_EQUALITIES[attack], tmp_path)


# Red team, round 8 (each passed under 61f9ba9): a C wrapper that hands == to the object inside, a registered
# Rational whose numerator Decimal's and Fraction's == read, and expected values that are a builtin type's subclass
# (an IntEnum member, a namedtuple, an OrderedDict) or another C type (bytearray, range), each against an object
# equal to anything.
ROUND_8 = {
    'uuid_any': (
        ("import uuid\ndef get():\n    return uuid.UUID('12345678-1234-5678-1234-567812345678')\n"),
        ('class Any:\n    def __eq__(self, other):\n        return True\n    __hash__ = object.__hash__\n\n'
         'def get():\n    return Any()\n'),
        ('import unittest\nimport uuid\nfrom pkg import get\n\n\nclass T(unittest.TestCase):\n'
         '    def test_a(self):\n'
         "        self.assertEqual(get(), uuid.UUID('12345678-1234-5678-1234-567812345678'))\n")),
    'enum_proxy': (
        ('import enum\n\nclass Status(enum.Enum):\n    OK = 1\n    BAD = 2\n\ndef status():\n'
         '    return Status.OK\n'),
        ('import enum, types\n\nclass Status(enum.Enum):\n    OK = 1\n    BAD = 2\n\nclass Any(dict):\n'
         '    def __eq__(self, other):\n        return True\n    __hash__ = object.__hash__\n\ndef status():\n'
         '    return types.MappingProxyType(Any())\n'),
        ('import unittest\nfrom pkg import Status, status\n\n\nclass T(unittest.TestCase):\n'
         '    def test_a(self):\n        self.assertEqual(status(), Status.OK)\n')),
    'date_weakproxy': (
        ("from datetime import date\n\ndef parse(text):\n    return date(*map(int, text.split('-')))\n"),
        ('import weakref\nfrom datetime import date\n\nclass Any:\n    def __eq__(self, other):\n'
         '        return True\n    __hash__ = object.__hash__\n\n_KEEP = Any()\n\ndef parse(text):\n'
         '    return weakref.proxy(_KEEP)\n'),
        ('import unittest\nfrom datetime import date\nfrom pkg import parse\n\n\nclass T(unittest.TestCase):\n'
         "    def test_a(self):\n        self.assertEqual(parse('2020-01-02'), date(2020, 1, 2))\n")),
    'decimal_rational': (
        ("from decimal import Decimal\n\ndef total():\n    return Decimal('3.50')\n"),
        ('import numbers, sys\nfrom decimal import Decimal\n\nclass Chameleon:\n'
         '    """no __eq__: Decimal\'s own C comparison reads numerator/denominator of a registered Rati'
         'onal"""\n    def _target(self):\n        f = sys._getframe(2)\n        while f is not None:\n'
         '            for v in f.f_locals.values():\n                if type(v) is Decimal:\n'
         '                    return v.as_integer_ratio()\n            f = f.f_back\n        return (0, 1)\n'
         '    @property\n    def numerator(self):\n        return self._target()[0]\n    @property\n'
         '    def denominator(self):\n        return self._target()[1]\n\n'
         'numbers.Rational.register(Chameleon)\n\ndef total():\n    return Chameleon()\n'),
        ('import unittest\nfrom decimal import Decimal\nfrom pkg import total\n\n\n'
         'class T(unittest.TestCase):\n    def test_a(self):\n'
         "        self.assertEqual(total(), Decimal('3.50'))\n")),
    'fraction_rational': (
        ('from fractions import Fraction\n\ndef ratio():\n    return Fraction(7, 2)\n'),
        ('import numbers, sys\nfrom fractions import Fraction\n\nclass Chameleon:\n    def _target(self):\n'
         '        f = sys._getframe(2)\n        while f is not None:\n'
         '            for v in f.f_locals.values():\n                if type(v) is Fraction:\n'
         '                    return v.as_integer_ratio()\n            f = f.f_back\n        return (0, 1)\n'
         '    @property\n    def numerator(self):\n        return self._target()[0]\n    @property\n'
         '    def denominator(self):\n        return self._target()[1]\n\n'
         'numbers.Rational.register(Chameleon)\n\ndef ratio():\n    return Chameleon()\n'),
        ('import unittest\nfrom fractions import Fraction\nfrom pkg import ratio\n\n\n'
         'class T(unittest.TestCase):\n    def test_a(self):\n'
         '        self.assertEqual(ratio(), Fraction(7, 2))\n')),
    'intenum_any': (
        ('import enum\n\n\nclass Level(enum.IntEnum):\n    LOW = 1\n    HIGH = 2\n\n\ndef level():\n'
         '    return Level.HIGH\n'),
        ('import enum\n\n\nclass Level(enum.IntEnum):\n    LOW = 1\n    HIGH = 2\n\n\nclass Any:\n'
         '    def __eq__(self, other):\n        return True\n    __hash__ = object.__hash__\n\ndef level():\n'
         '    return Any()\n'),
        ('import unittest\nfrom pkg import Level, level\n\n\nclass T(unittest.TestCase):\n'
         '    def test_a(self):\n        self.assertEqual(level(), Level.HIGH)\n')),
    'namedtuple_any': (
        ("import collections\n\nPoint = collections.namedtuple('Point', 'x y')\n\n\ndef origin():\n"
         '    return Point(0, 0)\n'),
        ("import collections\n\nPoint = collections.namedtuple('Point', 'x y')\n\n\nclass Any:\n"
         '    def __eq__(self, other):\n        return True\n    __hash__ = object.__hash__\n\ndef origin():\n'
         '    return Any()\n'),
        ('import unittest\nfrom pkg import Point, origin\n\n\nclass T(unittest.TestCase):\n'
         '    def test_a(self):\n        self.assertEqual(origin(), Point(0, 0))\n')),
    'ordereddict_any': (
        ("import collections\n\n\ndef table():\n    return collections.OrderedDict([('a', 1)])\n"),
        ('class Any:\n    def __eq__(self, other):\n        return True\n    __hash__ = object.__hash__\n\n'
         'def table():\n    return Any()\n'),
        ('import unittest\nimport collections\nfrom pkg import table\n\n\nclass T(unittest.TestCase):\n'
         "    def test_a(self):\n        self.assertEqual(table(), collections.OrderedDict([('a', 1)]))\n")),
    'bytearray_any': (
        ("def get():\n    return bytearray(b'ab')\n"),
        ('class Any:\n    def __eq__(self, other):\n        return True\n    __hash__ = object.__hash__\n\n'
         'def get():\n    return Any()\n'),
        ('import unittest\nfrom pkg import get\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n'
         "        self.assertEqual(get(), bytearray(b'ab'))\n")),
    'range_any': (
        ('def get():\n    return range(3)\n'),
        ('class Any:\n    def __eq__(self, other):\n        return True\n    __hash__ = object.__hash__\n\n'
         'def get():\n    return Any()\n'),
        ('import unittest\nfrom pkg import get\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n'
         '        self.assertEqual(get(), range(3))\n')),
}
# ... and the package's honest equality with a coarser value (whole seconds, a float price) passes: the judge's
# probes were a microsecond and Decimal.next_plus() away, finer than the value as written.
ROUND_8_HONEST = {
    'fa_seconds': (
        ('from datetime import datetime, timezone\n\nclass Timestamp:\n'
         '    """whole seconds since the epoch; equal to the aware datetime of that second"""\n'
         '    def __init__(self, seconds):\n        self.seconds = seconds\n    def __eq__(self, other):\n'
         '        if isinstance(other, datetime):\n            return int(other.timestamp()) == self.seconds\n'
         '        if isinstance(other, Timestamp):\n            return other.seconds == self.seconds\n'
         '        return NotImplemented\n    __hash__ = None\n\ndef parse(text):\n'
         '    return Timestamp(int(text))\n'),
        ('import unittest\nfrom datetime import datetime, timezone\nfrom pkg import parse\n\n\n'
         'class T(unittest.TestCase):\n    def test_a(self):\n'
         "        self.assertEqual(parse('1600000000'), datetime(2020, 9, 13, 12, 26, 40, tzinfo=timezo"
         'ne.utc))\n')),
    'fa_price': (
        ('from decimal import Decimal\n\nclass Price:\n'
         '    """a price in float dollars, comparable with a Decimal amount"""\n'
         '    def __init__(self, amount):\n        self.amount = float(amount)\n    def __eq__(self, other):\n'
         '        if isinstance(other, (Decimal, int, float)):\n'
         '            return self.amount == float(other)\n        if isinstance(other, Price):\n'
         '            return self.amount == other.amount\n        return NotImplemented\n    __hash__ = None\n'
         '\ndef price(text):\n    return Price(text)\n'),
        ('import unittest\nfrom decimal import Decimal\nfrom pkg import price\n\n\n'
         'class T(unittest.TestCase):\n    def test_a(self):\n'
         "        self.assertEqual(price('3.5'), Decimal('3.50'))\n")),
}


@pytest.mark.parametrize("attack", list(ROUND_8))
def test_the_eighth_rounds_attacks_fail(attack, tmp_path):
    _scenario_fails_and_its_package_passes(ROUND_8[attack], tmp_path)


@pytest.mark.parametrize("case", list(ROUND_8_HONEST))
def test_a_packages_coarser_honest_equality_with_a_value_type_passes(case, tmp_path):
    pristine = _scenario_tree(tmp_path / "pristine", *ROUND_8_HONEST[case])
    target = "tests.test_pkg.T.test_a"
    assert _grade(pristine, [target], pristine) == {target: "PASSED"}


# Two repository objects (own review, 2026-11-30): strict equality left a pair of the package's own objects to
# their own ==, so rewriting a class's __eq__ to say True passed any test that compares two of them. Now either
# side's repository __eq__ sends the pair to the judge, which compares it with the untouched class. Each passed
# under 6ec01f9.
_UNITTEST_HEAD = "import unittest\nfrom pkg import *\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n"
_VERSION = ("class Version:\n    def __init__(self, text):\n"
            "        self.parts = tuple(int(p) for p in text.split('.'))\n"
            "    def __eq__(self, other):\n        return isinstance(other, Version) and self.parts == other.parts\n"
            "    __hash__ = None\n\n\n")
_STATUS = "import enum\n\n\nclass Status(enum.Enum):\n    OK = 1\n    BAD = 2\n\n\n"
_SPOOLED = ("import io\n\n\nclass Spooled(io.IOBase):\n    def __init__(self, data):\n"
            "        self._buffer = io.BytesIO()\n        self._buffer.write(data)\n\n"
            "    def __eq__(self, other):\n"
            "        return isinstance(other, Spooled) and self._buffer.getvalue() == other._buffer.getvalue()\n\n"
            "    __hash__ = None\n\n\n")
REPOSITORY_PAIRS = {
    # the same class, its __eq__ rewritten to say True
    "same_class_always_equal": (
        _VERSION + "def version():\n    return Version('1.2')\n",
        _VERSION.replace("return isinstance(other, Version) and self.parts == other.parts", "return True")
        + "def version():\n    return Version('0.1')\n",
        _UNITTEST_HEAD + "        self.assertEqual(version(), Version('1.2'))\n"),
    # the package's own enum given an always-true __eq__ (round 8's open row)
    "package_enum_always_equal": (
        _STATUS + "def status():\n    return Status.OK\n",
        _STATUS.replace("    BAD = 2\n", "    BAD = 2\n\n    def __eq__(self, other):\n        return True\n\n"
                        "    __hash__ = enum.Enum.__hash__\n") + "def status():\n    return Status.BAD\n",
        _UNITTEST_HEAD + "        self.assertEqual(status(), Status.OK)\n"),
    # two classes of the package, one __eq__ rewritten
    "other_class_always_equal": (
        _VERSION + "class Tag:\n    def __init__(self, text):\n        self.text = text\n"
        "    def __eq__(self, other):\n        return isinstance(other, Version) and self.text == "
        "'.'.join(map(str, other.parts))\n    __hash__ = None\n\n\ndef tag():\n    return Tag('1.2')\n",
        _VERSION + "class Tag:\n    def __init__(self, text):\n        self.text = text\n"
        "    def __eq__(self, other):\n        return True\n    __hash__ = None\n\n\n"
        "def tag():\n    return Tag('0.1')\n",
        _UNITTEST_HEAD + "        self.assertEqual(tag(), Version('1.2'))\n"),
    # a library's always-true function borrowed as the class's __eq__
    "borrowed_library_eq": (
        _VERSION + "def version():\n    return Version('1.2')\n",
        "from unittest import mock\n\n\n" + _VERSION.replace(
            "    def __eq__(self, other):\n        return isinstance(other, Version) and self.parts == other.parts\n",
            "    __eq__ = type(mock.ANY).__eq__\n") + "def version():\n    return Version('0.1')\n",
        _UNITTEST_HEAD + "        self.assertEqual(version(), Version('1.2'))\n"),
    # the same in a list, compared item by item
    "same_class_in_a_list": (
        _VERSION + "def versions():\n    return [Version('1.2'), Version('2.0')]\n",
        _VERSION.replace("return isinstance(other, Version) and self.parts == other.parts", "return True")
        + "def versions():\n    return [Version('1.2'), Version('9.9')]\n",
        _UNITTEST_HEAD + "        self.assertEqual(versions(), [Version('1.2'), Version('2.0')])\n"),
    # a member test against the package's objects
    "same_class_in_assertIn": (
        _VERSION + "def version():\n    return Version('1.2')\n",
        _VERSION.replace("return isinstance(other, Version) and self.parts == other.parts", "return True")
        + "def version():\n    return Version('0.1')\n",
        _UNITTEST_HEAD + "        self.assertIn(version(), [Version('1.2'), Version('2.0')])\n"),
    # an io class's state lives in its C base's __dict__: frozen, so a wrong buffer is seen
    "spooled_buffer_differs": (
        _SPOOLED + "def spooled():\n    return Spooled(b'right')\n",
        _SPOOLED.replace("return isinstance(other, Spooled) and self._buffer.getvalue() == other._buffer.getvalue()",
                         "return True") + "def spooled():\n    return Spooled(b'wrong')\n",
        _UNITTEST_HEAD + "        self.assertEqual(spooled(), Spooled(b'right'))\n"),
    # what the judge cannot rebuild (an instance of a class made at run time) stands in as an object that fails
    # any use: the untouched == reads it and says no
    "unrebuildable_part_read": (
        _VERSION + "def version():\n    return Version('1.2')\n",
        _VERSION.replace("return isinstance(other, Version) and self.parts == other.parts", "return True")
        + "def version():\n    v = Version('1.2')\n    v.parts = type('Any', (), {'__eq__': lambda s, o: True})()\n"
        "    return v\n",
        _UNITTEST_HEAD + "        self.assertEqual(version(), Version('1.2'))\n"),
}


@pytest.mark.parametrize("attack", list(REPOSITORY_PAIRS))
def test_two_repository_objects_are_compared_by_the_untouched_class(attack, tmp_path):
    _scenario_fails_and_its_package_passes(REPOSITORY_PAIRS[attack], tmp_path)


@pytest.mark.skipif(not _sandbox_python_has_pytest(), reason="the sandbox's python3 has no pytest")
def test_two_repository_objects_in_a_plain_assert_are_judged_too(tmp_path):
    package, agent, _ = REPOSITORY_PAIRS["same_class_always_equal"]
    tests = "from pkg import *\n\n\ndef test_a():\n    assert version() == Version('1.2')\n"
    pristine = _scenario_tree(tmp_path / "pristine", package, tests)
    _scenario_tree(tmp_path / "repo", agent, tests)
    target = "tests/test_pkg.py::test_a"
    assert _grade(pristine, [target], pristine, pytest_mode=True) == {target: "PASSED"}
    assert _grade(tmp_path / "repo", [target], pristine, pytest_mode=True) == {target: "FAILED"}


# What the judge could not rebuild and now names instead (round 8's open false alarms): an enum member, a function
# and a class are looked up by name in the untouched package or the standard library; a standard library value
# class's instance (a UUID, a path) is rebuilt. The first, second and fourth failed on the untouched package under
# 6ec01f9; the other two were believed unjudged then, and must pass through the judge now.
NAMED_HONEST = {
    "equal_to_an_enum_member": (
        _STATUS + "class Code:\n    def __init__(self, status):\n        self.status = status\n"
        "    def __eq__(self, other):\n        return other is self.status\n    __hash__ = None\n\n\n"
        "def code():\n    return Code(Status.OK)\n",
        _UNITTEST_HEAD + "        self.assertEqual(code(), Status.OK)\n"),
    "equal_to_a_function": (
        ("def callback():\n    return 1\n\n\nclass Handler:\n    def __init__(self, func):\n        self.func = func\n"
         "    def __eq__(self, other):\n        return other is self.func\n    __hash__ = None\n\n\n"
         "def handler():\n    return Handler(callback)\n"),
        _UNITTEST_HEAD + "        self.assertEqual(handler(), callback)\n"),
    "holding_a_class_a_member_and_a_builtin": (
        _STATUS + "class Field:\n    def __init__(self, kind, status, check):\n"
        "        self.kind, self.status, self.check = kind, status, check\n"
        "    def __eq__(self, other):\n        return isinstance(other, Field) and vars(self) == vars(other)\n"
        "    __hash__ = None\n\n\ndef field():\n    return Field(int, Status.BAD, len)\n",
        _UNITTEST_HEAD + "        self.assertEqual(field(), Field(int, Status.BAD, len))\n"),
    "a_standard_library_enum_member": (
        ("import http\n\n\nclass Reply:\n    def __init__(self, code):\n        self.code = code\n"
         "    def __eq__(self, other):\n        return other is self.code\n    __hash__ = None\n\n\n"
         "def reply():\n    return Reply(http.HTTPStatus.OK)\n"),
        "import http\n" + _UNITTEST_HEAD + "        self.assertEqual(reply(), http.HTTPStatus.OK)\n"),
    "two_uuids_and_two_paths": (
        ("import pathlib\nimport uuid\n\n\ndef ident():\n    return uuid.UUID(int=7)\n\n\n"
         "def where():\n    return pathlib.Path('a') / 'b'\n"),
        "import pathlib\nimport uuid\n" + _UNITTEST_HEAD + "        self.assertEqual(ident(), uuid.UUID(int=7))\n"
        "        self.assertEqual(where(), pathlib.PurePosixPath('a/b'))\n"),
    # boltons' LRU: a lock (made afresh) and a sentinel of a class made inside a function (a stand-in its == never
    # reads)
    "holding_a_lock_and_a_local_sentinel": (
        ("import threading\n\n\ndef make_sentinel():\n    class Sentinel:\n        pass\n    return Sentinel()\n\n\n"
         "MISSING = make_sentinel()\n\n\nclass Cache(dict):\n    def __init__(self, *args):\n"
         "        super().__init__(*args)\n        self._lock = threading.RLock()\n        self._missing = MISSING\n\n"
         "    def __eq__(self, other):\n        with self._lock:\n"
         "            return isinstance(other, Cache) and dict.__eq__(self, other)\n\n    __hash__ = None\n\n\n"
         "def cache():\n    return Cache({'a': 1})\n"),
        _UNITTEST_HEAD + "        self.assertEqual(cache(), Cache({'a': 1}))\n"),
    # boltons' spooled files: an io class, its buffer and a codec's stream reader around it
    "a_spooled_buffer_and_a_codec_stream": (
        _SPOOLED.replace("        self._buffer.write(data)\n", "        self._buffer.write(data)\n"
                         "        import codecs\n        self._text = codecs.getreader('utf-8')(self._buffer)\n")
        + "def spooled():\n    return Spooled(b'right')\n",
        _UNITTEST_HEAD + "        self.assertEqual(spooled(), Spooled(b'right'))\n"),
}


@pytest.mark.parametrize("case", list(NAMED_HONEST))
def test_an_object_compared_with_a_member_a_function_or_a_class_passes_on_the_untouched_package(case, tmp_path):
    pristine = _scenario_tree(tmp_path / "pristine", *NAMED_HONEST[case])
    target = "tests.test_pkg.T.test_a"
    assert _grade(pristine, [target], pristine) == {target: "PASSED"}


def test_an_enum_members_siblings_are_its_probes(tmp_path):
    """A package object the untouched code makes equal to every member of an enum vouches for none of them."""
    package = (_STATUS + "class Code:\n    def __eq__(self, other):\n        return isinstance(other, Status)\n"
               "    __hash__ = None\n\n\ndef code():\n    return Code()\n")
    pristine = _scenario_tree(tmp_path / "pristine", package, _UNITTEST_HEAD + "        self.assertEqual(code(), "
                              "Status.OK)\n")
    target = "tests.test_pkg.T.test_a"
    assert _grade(pristine, [target], pristine) == {target: "FAILED"}


# Red team, round 9 (helper-35, against 3c7d7f7), one scenario file each in tests/swe_judge_round9/: names the
# agent forged (an enum member's _name_, a class's or a function's __qualname__, a standard library enum's
# module) that led the judge to the expected object; a path whose cache slot held another path's parts; the
# package's own wildcard facing an expected instance; and honest state the judge could not rebuild then
# (defaultdict, Counter, deque, OrderedDict, SimpleNamespace, slice, bytearray, a Flag combination, a
# functools.partial, an itemgetter, a Random, urlsplit's result, str.lower, a module). The wins passed and the
# honest cases failed under 3c7d7f7, but for six controls that held already (enum_own_eq, the two try_ attacks;
# logger, weakref_parent, ok_mixed_state).
# Round 10 (helper-36, against a6333d7), in tests/swe_judge_round10/: a namedtuple's, a deque's, an OrderedDict's, a
# namespace's or a plain dict subclass's items compared by the agent's __eq__ (strict equality believed the
# container's C == and never looked inside), a Fraction holding always-equal ints, the package's wildcard one level
# down or facing an infinite bound; and honest state the wildcard check refused (an enum-only state, a dict's
# keys, a function compared by identity).
# Round 11 (gold runs on cachetools, after round 10), in tests/swe_judge_round11/: a test module's own subclass of a
# package class and its helper class (the judge rebuilt no test module's class), in a test package and in a folder
# pytest imports without one; and two attacks on that: the test class rewritten at run time, a test module's
# always-equal helper returned as the answer.
# Round 12 (helper-38, against 0b5b50d), in tests/swe_judge_round12/: an always-true __eq__ compiled under a restored
# test file's own path (its co_filename was believed); a helper's or support file's globals rewritten at run time
# (a shadowed builtin); a `testsuite/` folder's matcher (the runner's test code, the judge's package); an always-true
# __ne__ under assertNotEqual and `assert a != b`; and an honest pair in a non-positive position.
ROUNDS = Path(__file__).parent


def _later_rounds(kind: str) -> list:
    """The scenario files of one kind. `make test` runs the first of each round (its class of attack, or of false
    alarm); the rest, and any that says ``SLOW = True`` (a judge of 10,000 items), run with ``slow``: the whole
    corpus grades 400 times, a quarter of the fast suite's time. A change to the grader runs `make test-slow`."""
    paths = sorted(ROUNDS.glob(f"swe_judge_round*/{kind}_*.py"))
    names = {f"{path.parent.name}/{path.stem}": path for path in paths}
    return first_of_each(names, group=lambda name: names[name].parent.name,
                         slow_anyway=lambda name: "\nSLOW = True" in names[name].read_text())


def _later_round_scenario(name: str, tmp_path: Path) -> tuple[dict, str, bool]:
    import runpy

    scenario = runpy.run_path(str(ROUNDS / f"{name}.py"))
    pytest_mode = bool(scenario.get("PYTEST", False))
    if pytest_mode and not _sandbox_python_has_pytest():
        pytest.skip("the sandbox's python3 has no pytest")
    _scenario_tree(tmp_path / "pristine", scenario["PKG"], scenario["TESTS"], not scenario.get("NO_INIT"),
                   scenario.get("FILES"))
    default = "tests/test_pkg.py::test_a" if pytest_mode else "tests.test_pkg.T.test_a"
    return scenario, scenario.get("ID", default), pytest_mode


@pytest.mark.parametrize("name", _later_rounds("attack"))
def test_the_later_rounds_attacks_fail(name, tmp_path):
    scenario, target, pytest_mode = _later_round_scenario(name, tmp_path)
    pristine = tmp_path / "pristine"
    _scenario_tree(tmp_path / "repo", scenario["AGENT"], scenario["TESTS"], not scenario.get("NO_INIT"),
                   {**scenario.get("FILES", {}), **scenario.get("AGENT_FILES", {})})
    support = tuple(scenario.get("SUPPORT", ()))
    for pristine_tree in (pristine, None):  # failed, errored or the grading void (reward 0 each way)
        assert _grade(tmp_path / "repo", [target], pristine_tree, pytest_mode, support)[target] in (
            "FAILED", "ERROR", "TAMPERED")
    assert _grade(pristine, [target], pristine, pytest_mode, support) == {target: "PASSED"}


@pytest.mark.parametrize("name", _later_rounds("honest"))
def test_the_later_rounds_honest_state_passes_on_the_untouched_package(name, tmp_path):
    scenario, target, pytest_mode = _later_round_scenario(name, tmp_path)
    pristine = tmp_path / "pristine"
    assert _grade(pristine, [target], pristine, pytest_mode, tuple(scenario.get("SUPPORT", ()))) == {
        target: "PASSED"}


def _judge_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("judge_under_test", TOOLS_DIR / "judge.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LOCAL_CLASSES = '''
import fractions


class T:
    def test_a(self):
        if True:
            class Int(fractions.Fraction):
                def __add__(self, other):
                    return Int(fractions.Fraction.__add__(self, other))
        return Int

    def test_b(self):
        class Twice:
            pass

        class Twice:
            pass

    def helper(self):
        def inner():
            class Deep:
                pass
'''


@pytest.mark.parametrize(("qualname", "found"), [
    ("T.test_a.<locals>.Int", "Int"),  # through an if block
    ("T.helper.<locals>.inner.<locals>.Deep", "Deep"),
    ("T.test_b.<locals>.Twice", None),  # defined twice: which one is not known
    ("T.test_a.Int", None),  # a function's attribute is no definition
    ("T.<locals>.Int", None),  # a class has no locals
    ("T.test_a", None),  # a function, not a class
    ("T.test_c.<locals>.Int", None),
])
def test_a_local_class_is_found_by_its_qualified_name(qualname, found):
    definition = _judge_module().local_class_definition(LOCAL_CLASSES, qualname)
    assert (definition.name if definition is not None else None) == found


def test_pytest_names_a_test_module_from_the_first_folder_without_init():
    judge = _judge_module()
    sources = {"tests/unit/__init__.py": "", "tests/unit/test_x.py": "", "tests/test_y.py": "", "pkg/__init__.py": "",
               "test_top.py": ""}
    assert judge.pytest_module_name("tests/unit/test_x.py", sources) == "unit.test_x"
    assert judge.pytest_module_name("tests/test_y.py", sources) == "test_y"
    assert judge.pytest_module_name("test_top.py", sources) == "test_top"
    finder = judge.PristineFinder(sources)
    assert {"unit.test_x", "test_y", "tests.test_y", "tests.unit.test_x", "test_top"} <= finder.tests
    assert "pkg" in finder.package and "pkg" not in finder.tests
    assert finder.files["unit"] == ("tests/unit/__init__.py", True)  # the package pytest imports unit.test_x from


def test_a_test_folders_alias_never_shadows_the_standard_library():
    judge = _judge_module()
    finder = judge.PristineFinder({"testing/unittest.py": "", "testing/test_ok.py": ""})
    assert "unittest" not in finder.files and "test_ok" in finder.files


def test_a_submodule_of_a_package_the_judge_serves_comes_from_memory_or_nowhere():
    """Red team, round 11: an editable install's finder (appended to sys.meta_path by a .pth) handed the judge the
    agent's ``pkg/_speedups.py``, an optional module the untouched tree lacks."""
    judge = _judge_module()
    finder = judge.PristineFinder({"pkg/__init__.py": "", "pkg/core.py": ""})
    assert finder.find_spec("pkg.core") is not None
    with pytest.raises(ModuleNotFoundError):
        finder.find_spec("pkg._speedups")
    assert finder.find_spec("json") is None  # anything else is another finder's


def test_the_judge_keeps_only_the_interpreters_own_finders(tmp_path):
    script = textwrap.dedent(f"""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("judge", {str(TOOLS_DIR / "judge.py")!r})
        judge = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(judge)

        class Planted:
            def find_spec(self, name, path=None, target=None):
                return None

        sys.meta_path.append(Planted())
        sys.path_hooks.append(lambda entry: None)
        judge.isolate([{str(tmp_path)!r}], judge.PristineFinder({{}}))
        print(sorted(type(f).__name__ if not isinstance(f, type) else f.__name__ for f in sys.meta_path))
        print(len(sys.path_hooks))
    """)
    done = subprocess.run(["/usr/bin/python3", "-B", "-s", "-c", script], capture_output=True, text=True,
                          timeout=60, check=True)
    finders, hooks = done.stdout.split("\n")[:2]
    assert finders == str(sorted(["BuiltinImporter", "FrozenImporter", "PathFinder", "PristineFinder", "TreeGuard"]))
    assert int(hooks) <= 2  # zipimport's and FileFinder's


def test_site_start_up_modules_the_agent_plants_never_reach_the_graded_tree(tmp_path):
    """Red team, round 12: where an editable install's .pth puts the repository on sys.path, Python's site imports
    a ``sitecustomize.py`` found there at start-up, inside the runner itself; the grading copy keeps the base
    version of such files, as of conftest.py (``PROTECTED_NAMES``)."""
    from turngym.envs.swe.workspace import PROTECTED_NAMES

    agent, graded = tmp_path / "agent", tmp_path / "graded"
    for root in (agent, graded):
        (root / "pkg").mkdir(parents=True)
        (root / "pkg" / "__init__.py").write_text("")
    for name in ("sitecustomize.py", "usercustomize.py"):
        (agent / name).write_text("import os\n")
        (agent / "pkg" / name).write_text("import os\n")
    args = [arg for name in PROTECTED_NAMES for arg in ("--protect-name", name)]
    subprocess.run(["/usr/bin/python3", "-I", "-B", str(TOOLS_DIR / "tree.py"), "copy", str(agent), str(graded),
                    *args], check=True, capture_output=True, timeout=60)
    assert sorted(p.name for p in graded.rglob("*.py")) == ["__init__.py"]


PARAMETRIZED_PACKAGE = '''
import sys


def cases():
    """The cases the test file parametrizes with: the package's code, run while pytest collects."""
    if TAMPER:
        import _pytest.python
        _pytest.python.Function.runtest = lambda self: None  # every test "passes"
    return list(range(300))


def double(n):
    return n + n if n % 7 else n  # the bug: multiples of 7 are not doubled (0 aside)


TAMPER = False
'''

PARAMETRIZED_TESTS = '''
import pytest
from pkg import cases, double


@pytest.mark.parametrize("n", cases())
def test_double(n):
    assert double(n) == 2 * n


@pytest.mark.parametrize("n", cases())
def test_double_is_even(n):
    assert double(n) % 2 == 0
'''


@pytest.mark.skipif(not _sandbox_python_has_pytest(), reason="the sandbox's python3 has no pytest")
@pytest.mark.parametrize("tamper", [False, True])
def test_a_parametrized_file_is_checked_once_a_function_and_still_caught_tampering(tmp_path, tamper):
    """Collection checks each test function once, not once a parameter (docs/benchmarks.md, "Collection checks once
    a test function"): the graded parameters still get their own verdicts, and package code that rewrites pytest's
    runner while the file is collected still voids the grading."""
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "pkg" / "__init__.py").write_text(PARAMETRIZED_PACKAGE.replace("TAMPER = False", f"TAMPER = {tamper}"))
    (repo / "tests" / "__init__.py").write_text("")
    (repo / "tests" / "test_params.py").write_text(PARAMETRIZED_TESTS)
    ids = [f"tests/test_params.py::test_double[{n}]" for n in (3, 14, 299)] + [
        "tests/test_params.py::test_double_is_even[7]"]
    verdicts = _grade(repo, ids, None, pytest_mode=True)
    if tamper:
        assert set(verdicts.values()) == {"TAMPERED"}
    else:
        assert verdicts == dict(zip(ids, ["PASSED", "FAILED", "PASSED", "FAILED"]))


def test_a_steps_items_found_by_bisection_are_exactly_the_ones_it_selects():
    """The runner's ``_Selection`` (sorted ids, bisection) against the plain scan of every item, on ids built to trip
    it: parameters holding brackets, a class and a function sharing a prefix, duplicates, and steps that are only
    prefixes."""
    import importlib.util
    import random
    import types

    spec = importlib.util.spec_from_file_location("turngym_plugin_under_test", TOOLS_DIR / "pytest_plugin.py")
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    rng = random.Random(0)
    stems = ["t.py::f", "t.py::f[", "t.py::C::g", "t.py::C", "t.py::f[a[b]", "t.py::fx", "t.py::f[1]", "u.py::f"]
    ids = [rng.choice(stems) + rng.choice(["", "1]", "x", "::h", "[2]"]) for _ in range(400)]
    items = [types.SimpleNamespace(nodeid=node_id) for node_id in ids]
    select = plugin._Selection(items)
    for step in set(ids) | set(stems) | {"t.py", "t.py::", "", "t.py::f[1"}:
        assert select(step) == [item for item in items if plugin._selects(step, item.nodeid)], step
