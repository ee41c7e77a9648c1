"""A4: ``Requires-Dist: evilcwd.tar.gz`` is a valid PEP 508 name, and pip reads an argument shaped like an archive
file name as a path relative to its working directory. Before the fixes pip ran in the pipeline's working
directory and built such a file when one was there; here the working directory holds one."""

from __future__ import annotations

import os

import common

case = common.Case("A4.archive_named_requirement")
dep = case.sdist("evilcwd", folder=case.dir / "built")
os.replace(dep, case.dir / "cwd" / "evilcwd.tar.gz")  # the working directory the code runs in
print("requirements passed on:", common.source.requirements(case.tree("victimfour", requires=["evilcwd.tar.gz"])))
common.tar_tree(case.dir / "src" / "victimfour-1.0", case.links)
case.run(common.prepare("victimfour==1.0", case), deadline=common.UNPACK_SECONDS + 60)
