"""Fingerprint or copy a repository tree without git, without following anything the agent planted.

Runs inside the sandbox as the sandbox user with the sandbox's own Python (standard library only):

    python3 -I -B tree.py digest ROOT [--protect PATH ...] [--protect-name NAME ...]
    python3 -I -B tree.py copy SRC DST [--protect PATH ...] [--protect-name NAME ...]
    python3 -I -B tree.py sources SRC DST

``sources`` copies SRC's regular ``.py`` files (no symlink, nothing under a skipped directory) into the new
directory DST: the grading script's copy of the untouched base tree, made before the agent's files are laid
over it, for the judge of strict equality's disputes (``judge.py``).

Skipped everywhere: ``.git`` (the agent's git directory, config and hooks), ``__pycache__``,
``*.pyc`` / ``*.pyo`` (bytecode), and anything that is not a regular file, a directory or a symlink
(FIFOs, sockets, devices: reading a FIFO would stall). *Protected* paths (the test directories,
``--protect``) and file names (``--protect-name``, e.g. ``conftest.py``) are never copied from SRC
and never removed from DST: DST keeps its pristine version of them, extra files included.

A protected path also protects the names that would shadow it on import, next to it: for
``tests`` (or ``test_x.py``), the siblings ``tests.py``, ``tests.pyc``, ``tests.*.so`` and a directory
``tests`` (``test_x/``). A ``tests.py`` beside a ``tests/`` without ``__init__.py`` would replace the
test package, and a ``test_x/`` package beside ``test_x.py`` the test module.

``copy`` makes DST equal to SRC outside the protected and skipped paths (DST's other files are
removed first, so the agent's deletions carry over). The walk is iterative: a tree thousands of
directories deep neither recurses nor raises; entries that cannot be read are reported and skipped.

``copy`` keeps a symlink only when its target stays in the repository and outside every skipped or
protected path, judged twice: lexically from the link's directory (an absolute target is dropped
outright: in a grading sandbox ``/opt/turngym-agent/testbed/...`` would reach the agent's tree,
``.git`` and bytecode included, which the patch never shows), then, once every entry is copied, by
``os.path.realpath`` inside DST, so a chain of links is followed as the tests will follow it
(``L -> .`` and ``M -> L/..`` are inside lexically, but ``M`` is DST's parent). A link that climbs
out of the root or reaches ``.git``, ``__pycache__``, bytecode or a test directory is removed and
reported, until no kept link does (removing one can change where another resolves): the graded
tree, and so the patch git measures on it, does not have it. Hard links need nothing: the copy
writes each file's content, which is what git then shows.
"""

import hashlib
import os
import stat
import sys

JUNK_DIRS = frozenset({".git", "__pycache__"})
JUNK_SUFFIXES = (".pyc", ".pyo")
MODULE_SUFFIXES = (".py", ".pyc", ".pyo", ".pyw", ".so", ".pyd")


def parse(argv):
    positional, protect, names = [], [], []
    index = 0
    while index < len(argv):
        if argv[index] in ("--protect", "--protect-name"):
            (protect if argv[index] == "--protect" else names).append(argv[index + 1].strip("/"))
            index += 2
        else:
            positional.append(argv[index])
            index += 1
    return positional, tuple(p for p in protect if p), frozenset(names)


def shadows(protect):
    """(parent, importable name) of each protected path: siblings importable under that name are protected."""
    found = set()
    for path in protect:
        parent, _, base = path.rpartition("/")
        found.add((parent, base.removesuffix(".py")))
    return frozenset(found)


def skipped(rel, name, protect, names, is_dir, shadowed=frozenset()):
    if name in JUNK_DIRS or (not is_dir and name.endswith(JUNK_SUFFIXES)):
        return True
    if not is_dir and name in names:
        return True
    if shadowed and (is_dir or name.endswith(MODULE_SUFFIXES)):
        stem = name if is_dir else name.split(".", 1)[0]
        if (rel.rpartition("/")[0], stem) in shadowed:
            return True
    return any(rel == p or rel.startswith(p + "/") for p in protect)


def walk(root, protect, names):
    """Yield (relative path, lstat) of every kept entry under root, parents before children."""
    shadowed = shadows(protect)
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            entries = sorted(os.scandir(os.path.join(root, rel_dir) if rel_dir else root), key=lambda e: e.name)
        except OSError as error:
            sys.stderr.write(f"tree: skipped {rel_dir}: {error.strerror}\n")
            continue
        subdirs = []
        for entry in entries:
            rel = rel_dir + "/" + entry.name if rel_dir else entry.name
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            kind = stat.S_IFMT(info.st_mode)
            if kind not in (stat.S_IFREG, stat.S_IFDIR, stat.S_IFLNK):
                continue
            if skipped(rel, entry.name, protect, names, kind == stat.S_IFDIR, shadowed):
                continue
            yield rel, info
            if kind == stat.S_IFDIR:
                subdirs.append(rel)
        stack.extend(reversed(subdirs))


def read_file(path):
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        with os.fdopen(fd, "rb", closefd=False) as handle:
            while True:
                chunk = handle.read(1 << 20)
                if not chunk:
                    return
                yield chunk
    finally:
        os.close(fd)


def digest(root, protect, names):
    hasher = hashlib.sha256()
    for rel, info in walk(root, protect, names):
        path = os.path.join(root, rel)
        kind = stat.S_IFMT(info.st_mode)
        hasher.update(b"%d %o %s\0" % (kind, info.st_mode & 0o111, rel.encode("utf-8", "surrogateescape")))
        try:
            if kind == stat.S_IFLNK:
                hasher.update(os.fsencode(os.readlink(path)))
            elif kind == stat.S_IFREG:
                for chunk in read_file(path):
                    hasher.update(chunk)
        except OSError as error:
            hasher.update(b"error %d" % error.errno)
        hasher.update(b"\0")
    print(hasher.hexdigest())


def unsafe_link(rel, target, protect, names, shadowed):
    """Why the symlink at ``rel`` pointing at ``target`` must not be copied ('' if it may)."""
    if not target or os.path.isabs(target):
        return "its target is absolute"
    resolved = os.path.normpath(os.path.join(os.path.dirname(rel), target))
    if resolved == ".." or resolved.startswith(("../", "/")):
        return "its target is outside the repository"
    parts = resolved.split("/")
    for index, part in enumerate(parts):
        if skipped("/".join(parts[: index + 1]), part, protect, names, index < len(parts) - 1, shadowed):
            return "its target is a skipped or protected path"
    return ""


def unsafe_resolution(root, rel, protect, names, shadowed):
    """Why the link at ``rel`` in the tree at ``root`` resolves where it must not ('' if it may): its
    ``realpath``, following every link on the way, outside ``root`` or on a skipped or protected path."""
    real_root = os.path.realpath(root)
    resolved = os.path.realpath(os.path.join(root, rel))
    if resolved == real_root:
        return ""
    if not resolved.startswith(real_root.rstrip("/") + "/"):
        return "it resolves outside the repository"
    parts = resolved[len(real_root.rstrip("/")) + 1:].split("/")
    for index, part in enumerate(parts):
        if skipped("/".join(parts[: index + 1]), part, protect, names, index < len(parts) - 1, shadowed):
            return "it resolves to a skipped or protected path"
    return ""


def drop_escaping_links(dst, links, protect, names, shadowed):
    """Remove the links of ``links`` (relative paths in DST) whose realpath is outside the repository or
    protected, until none is. Each round judges every link before removing any (a link through one about
    to go would otherwise be judged on the lexical rest of its path), and removing one can change where
    another resolves, so the rounds repeat. Returns how many could not be removed."""
    kept, errors = list(links), 0
    while True:
        bad = []
        for rel in kept:
            why = unsafe_resolution(dst, rel, protect, names, shadowed)
            if why:
                bad.append((rel, why))
        if not bad:
            return errors
        for rel, why in bad:
            path = os.path.join(dst, rel)
            try:
                link = os.readlink(path)
                os.unlink(path)
            except OSError as error:
                errors += 1
                sys.stderr.write(f"tree: could not remove the symlink {rel!r}: {error.strerror}\n")
                continue
            sys.stderr.write(f"tree: dropped the symlink {rel!r} -> {link!r}: {why}\n")
        gone = {rel for rel, _ in bad}
        kept = [rel for rel in kept if rel not in gone]


def copy(src, dst, protect, names):
    # 1. remove DST's unprotected files (deepest directories last), keeping .git and protected paths
    directories = []
    for rel, info in walk(dst, protect, names):
        path = os.path.join(dst, rel)
        if stat.S_ISDIR(info.st_mode):
            directories.append(path)
        else:
            os.unlink(path)
    for path in reversed(directories):
        try:
            os.rmdir(path)
        except OSError:
            pass  # holds protected files
    # 2. copy SRC's unprotected entries
    errors = 0
    shadowed = shadows(protect)
    links = []
    for rel, info in walk(src, protect, names):
        source, target = os.path.join(src, rel), os.path.join(dst, rel)
        try:
            if stat.S_ISDIR(info.st_mode):
                os.makedirs(target, mode=0o755, exist_ok=True)
            elif stat.S_ISLNK(info.st_mode):
                link = os.readlink(source)
                why = unsafe_link(rel, link, protect, names, shadowed)
                if why:
                    sys.stderr.write(f"tree: dropped the symlink {rel!r} -> {link!r}: {why}\n")
                    continue
                os.symlink(link, target)
                links.append(rel)
            else:
                mode = 0o755 if info.st_mode & 0o100 else 0o644
                out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
                with os.fdopen(out, "wb") as handle:
                    for chunk in read_file(source):
                        handle.write(chunk)
        except OSError as error:
            errors += 1
            sys.stderr.write(f"tree: could not copy {rel}: {error.strerror}\n")
    # 3. links judged where they really lead, once every link they may pass through exists
    errors += drop_escaping_links(dst, links, protect, names, shadowed)
    return 0 if errors == 0 else 1


def sources(src, dst):
    """Copy ``src``'s regular ``.py`` files to ``dst`` (which must not exist), walking without following links."""
    os.makedirs(dst)
    pending = [""]
    while pending:
        relative = pending.pop()
        try:
            entries = sorted(os.scandir(os.path.join(src, relative)), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            path = os.path.join(relative, entry.name)
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in JUNK_DIRS:
                    pending.append(path)
            elif entry.name.endswith(".py") and entry.is_file(follow_symlinks=False):
                os.makedirs(os.path.join(dst, relative), exist_ok=True)
                with open(entry.path, "rb") as source, open(os.path.join(dst, path), "wb") as target:
                    target.write(source.read())
    return 0


def main(argv):
    positional, protect, names = parse(argv)
    if positional[:1] == ["sources"] and len(positional) == 3:
        return sources(positional[1], positional[2])
    if positional[:1] == ["digest"] and len(positional) == 2:
        digest(positional[1], protect, names)
        return 0
    if positional[:1] == ["copy"] and len(positional) == 3:
        return copy(positional[1], positional[2], protect, names)
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
