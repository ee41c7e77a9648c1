"""E1: a 200-byte .tar.gz whose first header is a GNU long-name ('L') record declaring a 100 GB name. Before the
fixes the header-only size check asked gzip for 100 GB in one read: MemoryError out of ``prepare_repo`` (and with a
declared size near free memory and real zeros behind it, the OOM killer)."""

from __future__ import annotations

import gzip
import tarfile

import common

case = common.Case("E1.tar_longname_memory")
header = tarfile.TarInfo("././@LongLink")
header.type, header.size = tarfile.GNUTYPE_LONGNAME, 100 * 2 ** 30
archive = case.links / "bigname-1.0.tar.gz"
archive.write_bytes(gzip.compress(header.tobuf(tarfile.GNU_FORMAT) + b"x" * 512 + b"\0" * 1024))
print("archive bytes:", archive.stat().st_size, flush=True)
case.run(common.prepare("bigname==1.0", case), deadline=common.UNPACK_SECONDS + 30)
