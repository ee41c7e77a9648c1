"""E4: a negative header size. A tar member may declare a negative size (a pax ``size=-N``, which ``int()``
accepts): a folder member of size -10**15 first made the sum of header sizes hugely negative, and any amount of
real data after it passed the 2 GB cap (the red team showed it scaled down, 101 MB past a 50 MB cap). Here at full
scale: 2.1 GB of zeros (a 2 MB .tar.gz) after such a member; the case needs about 2 GB of temporary disk.
Violation: a repository over the 2 GB cap."""

from __future__ import annotations

import tarfile
import zlib

import common

SIZE = common.MAX_UNPACKED_BYTES + (100 << 20)
case = common.Case("E4.negative_size")
tree = case.tree("negsize")
raw = bytearray()
negative = tarfile.TarInfo(f"{tree.name}/neg")
negative.type, negative.mode, negative.pax_headers = tarfile.DIRTYPE, 0o755, {"size": str(-10 ** 15)}
raw += negative.tobuf(tarfile.PAX_FORMAT)
for path in sorted(tree.rglob("*")):
    data = path.read_bytes() if path.is_file() else b""
    info = tarfile.TarInfo(f"{tree.name}/{path.relative_to(tree)}")
    info.type, info.size, info.mode = (tarfile.REGTYPE, len(data), 0o644) if path.is_file() else \
        (tarfile.DIRTYPE, 0, 0o755)
    raw += info.tobuf(tarfile.PAX_FORMAT) + data + b"\0" * (-len(data) % 512)
big = tarfile.TarInfo(f"{tree.name}/zeros.bin")
big.size = SIZE
raw += big.tobuf(tarfile.PAX_FORMAT)
archive = case.links / "negsize-1.0.tar.gz"
compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
block = bytes(1 << 20)
with open(archive, "wb") as out:  # streamed: the 2.1 GB never sit in memory
    out.write(compressor.compress(bytes(raw)))
    out.writelines(compressor.compress(block) for _ in range(SIZE >> 20))
    out.write(compressor.compress(b"\0" * 1024) + compressor.flush())
declared = -10 ** 15 + sum(p.stat().st_size for p in tree.rglob("*") if p.is_file()) + SIZE
print("archive bytes:", archive.stat().st_size, "| header sizes sum to", declared, flush=True)


def judge(result) -> str:
    used = common.tree_bytes(result[1])
    if used > common.MAX_UNPACKED_BYTES:
        case.violation(f"accepted: a {used >> 20} MB repository past the 2 GB cap")
    return f"accepted: repository {used >> 20} MB"


case.run(common.prepare("negsize==1.0", case), deadline=common.UNPACK_SECONDS + 60, judge=judge)
