"""D2: CPython tarfile's ReDoS on a pax header (CVE-2024-6232, fixed in 3.11.10; this Python is 3.11.7). A .tar.gz
of about 1 kB whose first pax header holds 300,000 digits makes ``re.search(br"\\d+ hdrcharset=...")`` quadratic:
minutes of CPU for this archive, days for 8 MB of digits. Before the fixes ``prepare_repo`` was still in
``tarfile.open`` after 60 s. Expect this case to take up to the code's unpacking deadline (120 s)."""

from __future__ import annotations

import gzip
import io
import tarfile

import common

N = 300_000
case = common.Case("D2.pax_redos")
tree = case.tree("paxredos")
buffer = io.BytesIO()
pax = tarfile.TarInfo("././@PaxHeader")
pax.type, pax.size = tarfile.XHDTYPE, N
buffer.write(pax.tobuf(tarfile.USTAR_FORMAT) + b"1" * N + b"\0" * (-N % 512))
with tarfile.open(fileobj=buffer, mode="w") as tar:  # the rest: an ordinary sdist
    tar.add(tree, arcname=tree.name)
archive = case.links / "paxredos-1.0.tar.gz"
archive.write_bytes(gzip.compress(buffer.getvalue()))
print("archive bytes:", archive.stat().st_size, flush=True)
case.run(common.prepare("paxredos==1.0", case), deadline=common.UNPACK_SECONDS + 30)
