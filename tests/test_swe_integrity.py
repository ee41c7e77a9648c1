"""Issue #24: what is reported is what was graded, and concurrent sandboxes share no channel.

Every test is an attack played by the agent's own commands in a real episode of a shipped task in
the bwrap sandbox, asserted on the outcome:

* ``info["patch"]`` is exactly the change the tests ran against: replayed on the base in a fresh
  episode it earns the same reward, whatever ``.gitignore`` or empty directory the agent made;
* a file name cannot put a forged patch into ``info["patch"]``;
* a symlink out of the repository (into the agent's tree, mounted read-only in the grading sandbox)
  or into ``.git``, bytecode or the tests is not graded, and a patch over the size limit is not graded;
* terminal escapes printed during a failed grading set-up never reach a log record raw;
* io_uring is refused, and file locks and access notifications on the host inodes every sandbox
  sees read-only (``/usr/bin/python3``) carry nothing from one sandbox to another.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

from tests.helpers_marks import first_fast
from turngym.envs.swe import SWEEnv
from turngym.envs.swe.sandbox import backend_available

BWRAP_PROBLEM = backend_available("bwrap")
pytestmark = pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=f"bwrap sandbox unavailable: {BWRAP_PROBLEM}")

TASK = "turngym__intervals-2"
FIXED_LINE = "+        return self.start < other.end and other.start < self.end"


@pytest.fixture
def make_env(make_swe_env):
    return make_swe_env  # tests/conftest.py


def bash(command: str) -> str:
    return f"```bash\n{command}\n```"


def play(env: SWEEnv, actions: list[str]) -> dict:
    """Reset to TASK, play the actions, submit; the last step's info."""
    env.reset(options={"task": TASK})
    for action in [*actions, bash("submit")]:
        *_, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return info
    raise AssertionError("the episode did not end on submit")


def gold_fix(env: SWEEnv) -> str:
    _, info = env.reset(options={"task": TASK})
    return info["walkthrough"][0]


def replay(env: SWEEnv, patch: str) -> float:
    """The reward of a fresh episode whose only change is ``patch`` applied to the base."""
    assert "TURNGYM_REPLAY" not in patch
    body = patch if patch.endswith("\n") else patch + "\n"
    info = play(env, [bash(f"git apply --whitespace=nowarn <<'TURNGYM_REPLAY'\n{body}TURNGYM_REPLAY")])
    return info["episode_reward"]


# --------------------------------------------------------------------------- the patch is what was graded
SWITCH = (  # the fix only while an empty directory `turngym_switch/` (a namespace package) exists
    "cat >> intervals/core.py <<'EOF'\n"
    "import importlib.util as _util\n"
    "if _util.find_spec('turngym_switch') is None:\n"
    "    Interval.overlaps = lambda self, other: self.start <= other.end and other.start <= self.end\n"
    "EOF\n"
    "mkdir turngym_switch"
)
HIDERS = {
    "gitignore_star": "printf '*\\n' > .gitignore",
    "gitignore_lists_itself_and_the_fix": "printf '.gitignore\\nintervals/core.py\\n' > .gitignore",
    "info_exclude_and_nested_gitignore": ("printf '*.py\\n' > intervals/.gitignore && "
                                          "printf '*\\n' >> .git/info/exclude"),
}


@pytest.mark.parametrize("hider", first_fast(HIDERS, 1, sort=False))  # the rest under slow
def test_a_gitignore_cannot_hide_the_graded_change(make_env, hider):
    env = make_env()
    fix = gold_fix(env)
    info = play(env, [bash(HIDERS[hider]), fix])
    assert info["episode_reward"] == 1.0 and info["resolved"]
    assert "intervals/core.py" in info["patch"] and FIXED_LINE in info["patch"], info["patch"]
    assert replay(make_env(), info["patch"]) == 1.0  # the reported change alone earns the reward


def test_an_empty_directory_the_patch_cannot_show_is_not_graded(make_env):
    """git has no empty directories; grading must not see one either, or the reported patch would
    earn less than the graded tree."""
    env = make_env()
    info = play(env, [gold_fix(env), bash(SWITCH)])
    assert "find_spec('turngym_switch')" in info["patch"] and "b/turngym_switch" not in info["patch"]
    assert info["episode_reward"] == replay(make_env(), info["patch"]) == 0.0


FORGED = "Rk9SR0VEIFBBVENICg=="  # base64 of "FORGED PATCH\n"


def test_a_file_name_cannot_forge_the_reported_patch(make_env):
    """An unreadable file whose name holds a line `TURNGYM_PATCH <base64>`: the copy error that quotes
    the name comes before the real patch in the grading set-up's output."""
    env = make_env()
    fix = gold_fix(env)
    trap = bash(f"name=$(printf 'x\\nTURNGYM_PATCH {FORGED}\\ny') && touch \"$name\" && chmod 000 \"$name\"")
    info = play(env, [trap, fix])
    assert "FORGED PATCH" not in info["patch"]
    assert info["resolved"] and FIXED_LINE in info["patch"]


def test_terminal_escapes_in_a_failed_grading_never_reach_the_log_raw(make_env, caplog):
    """An unreadable file named with terminal escapes (its copy error is printed), and a path git
    refuses (`.git /y`) so the grading set-up fails and its output is logged."""
    caplog.set_level(logging.WARNING)
    env = make_env()
    attack = bash("name=$(printf 'e\\033]0;pwned\\007\\033[2J\\033c') && touch \"$name\" && chmod 000 \"$name\" && "
                  "mkdir '.git ' && echo x > '.git /y'")
    info = play(env, [attack])
    assert info["grading_error"] == "grading set-up failed" and info["episode_reward"] == 0.0
    messages = [record.getMessage() for record in caplog.records]
    assert any("\\x1b]0;pwned\\x07" in message for message in messages), messages  # it was logged, escaped
    assert not any(ch in message for message in messages for ch in "\x1b\x07\x9b"), messages


# Symlinks: the agent's tree is mounted read-only in the grading sandbox, at an absolute path. A link
# to it (or out of the repository, or into .git, bytecode or the tests) made the graded file one the
# patch never shows (the red team: graded 1.0, a replay of the patch 0). Such links are not graded.
STASH = ("mkdir -p .git/stash && cp intervals/core.py .git/stash/core.py && "
         "sed -i 's/return self.start <= other.end and other.start <= self.end/"
         "return self.start < other.end and other.start < self.end/; "
         "s/if merged and merged\\[-1\\].overlaps(interval):/if merged and interval.start <= merged[-1].end:/' "
         ".git/stash/core.py")
AGENT = "/opt/turngym-agent/testbed"  # where the grading sandbox shows the agent's tree, read-only
LINKS = {  # the absolute ones earned 1.0 before, with a patch whose replay earns 0; the relative ones dangle
    "absolute_into_the_agents_tree": f"ln -s {AGENT}/.git/stash/core.py intervals/core.py",
    "absolute_into_the_agents_tests": f"cp .git/stash/core.py tests/stash_core.py && "
                                      f"ln -s {AGENT}/tests/stash_core.py intervals/core.py",
    "absolute_into_the_agents_bytecode": f"mkdir -p intervals/__pycache__ && cp .git/stash/core.py "
                                         f"intervals/__pycache__/core.py && "
                                         f"ln -s {AGENT}/intervals/__pycache__/core.py intervals/core.py",
    "relative_into_git": "ln -s ../.git/stash/core.py intervals/core.py",
    "relative_out_of_the_repository": "cp .git/stash/core.py /scratch/core.py && ln -s ../../scratch/core.py "
                                      "intervals/core.py",
    "relative_into_the_tests": "cp .git/stash/core.py tests/stash_core.py && ln -s ../tests/stash_core.py "
                               "intervals/core.py",
    "relative_into_bytecode_directories": "mkdir -p intervals/__pycache__ && cp .git/stash/core.py "
                                          "intervals/__pycache__/core.py && "
                                          "ln -s __pycache__/core.py intervals/core.py",
    # issue 40: each target is inside lexically (L/.. is "."), but L -> . makes M the copy's parent, "/": the
    # link reached the agent's tests through the grading sandbox's root (graded 1.0, the replay 0)
    "chained_out_of_the_copy": f"cp .git/stash/core.py tests/stash_core.py && ln -s . L && ln -s L/.. M && "
                               f"ln -s ../M{AGENT}/tests/stash_core.py intervals/core.py",
    "chained_into_the_tests": "cp .git/stash/core.py tests/stash_core.py && ln -s . L && "
                              "ln -s ../L/tests/stash_core.py intervals/core.py",
}


@pytest.mark.parametrize("link", first_fast(LINKS, 3, sort=False))  # the rest under slow
def test_a_symlink_out_of_the_graded_tree_is_not_graded(make_env, link):
    info = play(make_env(), [bash(f"{STASH} && rm intervals/core.py && {LINKS[link]}")])
    assert info["episode_reward"] == 0.0 and not info["resolved"]
    assert "deleted file mode 100644" in info["patch"] and "intervals/core.py" in info["patch"], info["patch"]
    assert "+++ b/intervals/core.py" not in info["patch"], info["patch"]  # the link itself is not graded either
    assert replay(make_env(), info["patch"]) == info["episode_reward"]  # what is reported is what was graded


def test_links_inside_the_repository_are_graded_as_git_shows_them(make_env):
    """A relative symlink to a file of the repository, and a hard link, stay what they are: graded, shown
    and replayed alike."""
    env = make_env()
    fix = gold_fix(env)
    moved = bash("mv intervals/core.py intervals/impl.py && ln -s impl.py intervals/core.py && "
                 "mkdir -p .git/stash && ln intervals/impl.py .git/stash/hard.py")
    info = play(env, [fix, moved])
    assert info["episode_reward"] == 1.0 and "new file mode 120000" in info["patch"], info["patch"]
    assert replay(make_env(), info["patch"]) == 1.0


# A patch over the cap used to be cut silently (a big file whose diff sorts first pushed the real change
# out of info["patch"], and the env's marker miscounted the cut). It is not graded now.
def test_a_patch_over_the_limit_is_not_graded_and_says_so(make_env):
    from turngym.envs.swe.workspace import MAX_PATCH_BYTES

    env = make_env()
    fix = gold_fix(env)
    notes = bash("python3 -c \"open('AAA_NOTES.txt','w').write(''.join('note %d %s\\n' % (i, 'x' * 60) "
                 "for i in range(4000)))\" && wc -c AAA_NOTES.txt")
    info = play(env, [notes, fix])
    assert info["episode_reward"] == 0.0 and not info["resolved"]
    assert info["patch_truncated"] is True and "limit" in info["grading_error"], info["grading_error"]
    size = int(info["grading_error"].split("the patch is ", 1)[1].split(" bytes", 1)[0])
    assert size > MAX_PATCH_BYTES and f"the patch is {size} bytes" in info["patch"]
    assert "it was not graded" in info["patch"]
    small = play(make_env(), [fix])  # within the limit: graded, and reported whole
    assert small["episode_reward"] == 1.0 and small["patch_truncated"] is False and FIXED_LINE in small["patch"]


# --------------------------------------------------------------------------- channels between sandboxes
IO_URING = """python3 - <<'EOF'
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
for name, number, args in (("setup", 425, (4, params)), ("enter", 426, (0, 1, 0, 0, None, 0)),
                           ("register", 427, (0, 0, None, 0))):
    result = libc.syscall(number, *args)
    print("io_uring_%s" % name, result, ctypes.get_errno())
EOF"""


def test_io_uring_is_refused(make_env):
    env = make_env()
    env.reset(options={"task": TASK})
    obs, *_ = env.step(bash(IO_URING))
    for name in ("setup", "enter", "register"):
        assert f"io_uring_{name} -1 1\n" in obs, obs  # EPERM, as under Docker's default profile


# The sender holds a lock on, or reads, a file every sandbox sees (the host's /usr, read-only);
# it signals the test through its own /testbed and waits for the test's go-ahead there.
SENDER = """python3 - <<'EOF'
import fcntl, os, time
held = open("/usr/bin/python3", "rb")
fcntl.flock(held, fcntl.LOCK_EX)
fcntl.lockf(held, fcntl.LOCK_SH)
open("/testbed/.sent", "w").close()
deadline = time.time() + 60
while not os.path.exists("/testbed/.go") and time.time() < deadline:
    for _ in range(5):
        open("/usr/bin/env", "rb").read(64)  # an access an inotify watch would see
    time.sleep(0.05)
print("sender done")
EOF"""
RECEIVER = """python3 - <<'EOF'
import ctypes, fcntl, os, sqlite3, struct, time
probe = open("/usr/bin/python3", "rb")
try:
    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("flock: free")
except OSError as error:
    print("flock: held elsewhere", error.errno)
query = struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0)
kind = struct.unpack("hhqqi", fcntl.fcntl(probe, fcntl.F_GETLK, query))[0]
print("F_GETLK:", "free" if kind == fcntl.F_UNLCK else "held elsewhere")
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_NONBLOCK)
if fd < 0:
    print("inotify: errno", ctypes.get_errno())
else:
    libc.inotify_add_watch(fd, b"/usr/bin/env", 0x1 | 0x20)  # IN_ACCESS | IN_OPEN
    time.sleep(1.0)
    try:
        print("inotify: saw", len(os.read(fd, 4096)), "bytes of events")
    except BlockingIOError:
        print("inotify: saw nothing")
print("fanotify:", libc.fanotify_init(0x200, 0), ctypes.get_errno())  # FAN_REPORT_FID: unprivileged
directory = os.open("/usr/bin", os.O_RDONLY)
try:
    fcntl.fcntl(directory, fcntl.F_NOTIFY, fcntl.DN_ACCESS | fcntl.DN_MULTISHOT)
    print("dnotify: on")
except OSError as error:
    print("dnotify: errno", error.errno)
db = sqlite3.connect("/tmp/t.sqlite")  # code that takes locks still works
db.execute("create table t (x)"); db.executemany("insert into t values (?)", [(i,) for i in range(10)]); db.commit()
mine = open("/tmp/lock", "w")
fcntl.flock(mine, fcntl.LOCK_EX); fcntl.lockf(mine, fcntl.LOCK_EX)
print("sqlite:", db.execute("select sum(x) from t").fetchone()[0], "own locks: ok")
EOF"""


def test_locks_and_access_notifications_carry_nothing_between_sandboxes(make_env):
    sender, receiver = make_env(), make_env()
    sender.reset(options={"task": TASK})
    receiver.reset(options={"task": TASK})
    repo = Path(sender._sandbox.workspace) / "repo"
    sent: dict = {}
    thread = threading.Thread(target=lambda: sent.setdefault("step", sender.step(bash(SENDER))))
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not (repo / ".sent").exists():
            assert time.monotonic() < deadline and thread.is_alive(), sent
            time.sleep(0.05)
        obs, *_ = receiver.step(bash(RECEIVER))
    finally:
        (repo / ".go").touch()
        thread.join(timeout=120)
    assert "sender done" in sent["step"][0], sent["step"][0]
    assert "flock: free" in obs and "F_GETLK: free" in obs, obs
    assert "inotify: errno 38" in obs, obs  # ENOSYS: no watch can see another sandbox's reads
    assert "fanotify: -1 38" in obs and "dnotify: errno 22" in obs, obs  # ENOSYS, EINVAL
    assert "sqlite: 45 own locks: ok" in obs, obs


def _sandbox_integrity():
    """tools/integrity.py as the sandbox loads it (standard library only, no package around it)."""
    import importlib.util
    from pathlib import Path

    from turngym.envs.swe import workspace

    path = Path(workspace.__file__).parent / "tools" / "integrity.py"
    spec = importlib.util.spec_from_file_location("sandbox_integrity", path)
    integrity = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(integrity)
    return integrity


def test_the_sandbox_and_the_host_restore_the_same_test_directories():
    """tools/integrity.py (in the sandbox, standard library only) keeps its own copy of workspace.test_dirs."""
    from turngym.envs.swe import workspace

    integrity = _sandbox_integrity()
    assert integrity.TEST_DIR_NAMES == workspace.TEST_DIR_NAMES
    for paths in (["tests/test_a.py"], ["pkg/tests/unit/test_b.py", "pkg/tests/test_c.py"], ["test_top.py"],
                  ["src/testing/x.py", "test/test_d.py"], ["lib/test_e/f.py"], ["a/b/test_g.py"]):
        assert integrity.test_dirs(paths) == workspace.test_dirs(paths), paths


def test_the_grader_knows_the_sandboxs_read_only_folders():
    from turngym.envs.swe.sandbox.base import READ_ONLY_DIRS

    assert _sandbox_integrity().READ_ONLY_DIRS == READ_ONLY_DIRS


@pytest.mark.parametrize(("read_only_mount", "owner", "euid", "writable", "sealed"), [
    (True, 65534, 65534, False, True),    # bwrap's read-only bind: the owner shows as the sandbox user
    (False, 0, 65534, False, True),       # docker's root-owned copy
    (False, 65534, 65534, False, False),  # made by the code under test, its write permission taken away
    (False, 0, 65534, True, False),       # another's, but writable
    (False, 1000, 0, False, False),       # root can write anything not on a read-only mount
])
def test_a_requirements_file_is_library_code_only_where_the_tests_cannot_have_made_it(
        read_only_mount, owner, euid, writable, sealed):
    import os
    from types import SimpleNamespace

    integrity = _sandbox_integrity()
    answer = integrity.sealed_from(
        "/testbed/.turngym-deps/freezegun/api.py", euid,
        _stat=lambda path: SimpleNamespace(st_uid=owner),
        _statvfs=lambda path: SimpleNamespace(f_flag=os.ST_RDONLY if read_only_mount else 0),
        _access=lambda path, mode: writable)
    assert answer is sealed

    def missing(path):
        raise FileNotFoundError(path)

    assert integrity.sealed_from("/testbed/.turngym-deps/gone.py", 65534, _statvfs=missing) is False


def test_a_modules_lazy_names_are_bound_before_the_snapshot():
    """unittest's IsolatedAsyncioTestCase (a PEP 562 module __getattr__) is bound by the first getattr; a
    freezegun-style walk of every module did it while humanize's tests ran, which read as tampering."""
    import types

    integrity = _sandbox_integrity()
    module = types.ModuleType("lazy")
    made = []

    def __getattr__(name):
        if name == "Later":
            made.append(name)
            vars(module)["Later"] = type("Later", (), {})
            return vars(module)["Later"]
        if name == "Broken":
            raise ImportError("needs something absent")
        raise AttributeError(name)

    module.__getattr__ = __getattr__
    module.__dir__ = lambda: ["Later", "Broken", "__getattr__"]
    plain = types.ModuleType("plain")
    integrity.resolve_lazy_names([module, plain])
    assert made == ["Later"] and "Later" in vars(module) and "Broken" not in vars(module)
    taken = integrity.snapshot([module])
    assert module.Later is vars(module)["Later"]  # what the walk does later: the name is already there
    assert integrity.make_checker(taken)()


@pytest.mark.parametrize(("body", "writes"), [
    ("    assert SEEN.pop('a')\n", True),                      # python-dateutil's test_imported_modules
    ("    SEEN['b'] = 2\n", True),
    ("    del SEEN['a']\n", True),
    ("    global COUNT\n    COUNT = 1\n", True),
    ("    SEEN = {}\n    SEEN['b'] = 2\n", False),             # a local of the same name (red team, round 8)
    ("    result = {}\n    result['value'] = 3\n", False),
    ("    assert SEEN.get('a') == 1\n", False),
    ("    def inner(SEEN):\n        SEEN.pop('a')\n    inner({})\n", False),
])
def test_only_a_test_that_writes_its_modules_state_gets_plain_canaries(body, writes):
    """A canary is a copy of the test's body, unless running that body twice would change what the test sees."""
    import ast

    integrity = _sandbox_integrity()
    source = f"SEEN = {{'a': 1}}\nCOUNT = 0\nresult = None\n\n\ndef test_x():\n{body}"
    tree = ast.parse(source)
    definition = next(node for node in tree.body if isinstance(node, ast.FunctionDef))
    assert integrity._writes_module_state(definition, tree) is writes
    planned, _ = integrity.plan_canaries(source, [("test_x",)], False, __import__("random").Random(0))
    assert (planned.count(body.strip().splitlines()[-1].strip()) == 1) is writes  # copies repeat the body's last line


@pytest.mark.parametrize(("body", "warns"), [
    ("    with pytest.warns(DeprecationWarning):\n        make('EST5EDT')\n", True),  # dateutil's tzstr cache
    ("    with self.assertWarnsRegex(UserWarning, 'x'):\n        make('x')\n", True),
    ("    with warns(UserWarning):\n        make('x')\n", True),
    ("    pytest.deprecated_call(make, 'x')\n", True),
    ("    with pytest.raises(ValueError):\n        make('x')\n", False),
    ("    assert make('x') == 1\n", False),
])
def test_a_test_that_asserts_a_warning_gets_plain_canaries(body, warns):
    """A warning the package emits once (then caches) does not come again in the test after a canary that copied
    its body (the scale set's gold analysis, cause G)."""
    import ast

    integrity = _sandbox_integrity()
    source = f"import pytest\n\n\ndef test_x():\n{body}"
    definition = next(node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef))
    assert integrity._asserts_a_warning(definition) is warns
    planned, _ = integrity.plan_canaries(source, [("test_x",)], False, __import__("random").Random(0))
    assert (planned.count(body.strip().splitlines()[-1].strip()) == 1) is warns  # copies repeat the body's last line


@pytest.mark.parametrize(("source", "copied"), [
    # the base's runTest is in the file: each canary class holds a copy of it
    (("import unittest\n\n\nclass Cases(unittest.TestCase):\n    def runTest(self):\n        assert CHECK\n\n\n"
      "class TestMore(Cases):\n    cases = [1]\n"), True),
    # the base comes from elsewhere: the canary calls it through super()
    ("import unittest\nfrom helpers import Cases\n\n\nclass TestMore(Cases):\n    cases = [1]\n", False),
])
def test_a_run_test_class_keeps_its_run_test_beside_its_canaries(source, copied):
    """unittest runs runTest only in a class without test* methods: the canaries are classes of their own, never
    methods; each is the class itself renamed, beside it, and no subclass of it (a package could count those)."""
    import ast
    import random

    integrity = _sandbox_integrity()
    planned, plan = integrity.plan_canaries(source, [("TestMore", "runTest")], False, random.Random(0))
    tree = ast.parse(planned)
    more = next(n for n in tree.body if getattr(n, "name", "") == "TestMore")
    assert not [n for n in more.body if isinstance(n, ast.FunctionDef)]  # no test* method added to the class
    fail, error = plan[("TestMore", "runTest")]
    order = [getattr(n, "name", "") for n in tree.body]
    for name in (fail[0], error[0]):
        canary = next(n for n in tree.body if getattr(n, "name", "") == name)
        assert [ast.unparse(b) for b in canary.bases] == ["Cases"] and fail[1] == error[1] == "runTest"
        assert abs(order.index(name) - order.index("TestMore")) <= 2  # beside it, before or after
        body = ast.unparse(canary)
        assert "cases = [1]" in body and ("CHECK" in body) is copied and ("super().runTest()" in body) is not copied
