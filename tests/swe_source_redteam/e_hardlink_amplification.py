"""E2: hard links. A hard-link member has header size 0, and the ``data`` filter lets links inside the archive
through; the copy into the repository then wrote each as a full file. One 1 MB file and 300 links (a 3.6 kB
.tar.gz) became a 302 MB repository before the fixes; at the limits, one 2 GB file and 199,999 links ask for
about 400 TB. Violation here: a repository over 16 MB."""

from __future__ import annotations

import io
import tarfile

import common

LINKS, SIZE, BOUND = 300, 1 << 20, 16 << 20
case = common.Case("E2.hardlink_amplification")
tree = case.tree("hardlinks")
archive = case.links / "hardlinks-1.0.tar.gz"
with tarfile.open(archive, "w:gz") as tar:
    tar.add(tree, arcname=tree.name)
    blob = tarfile.TarInfo(f"{tree.name}/blob.bin")
    blob.size = SIZE
    tar.addfile(blob, io.BytesIO(bytes(SIZE)))
    for number in range(LINKS):
        link = tarfile.TarInfo(f"{tree.name}/copies/c{number}.bin")
        link.type, link.linkname = tarfile.LNKTYPE, f"{tree.name}/blob.bin"
        tar.addfile(link)
print("archive bytes:", archive.stat().st_size, flush=True)


def judge(result) -> str:
    used = common.tree_bytes(result[1])
    if used > BOUND:
        case.violation(f"a {archive.stat().st_size}-byte archive became a {used >> 20} MB repository")
    return f"contained: accepted, links left out; repository: {common.repo_entries(result[1])}"


case.run(common.prepare("hardlinks==1.0", case), deadline=common.UNPACK_SECONDS + 60, judge=judge)
