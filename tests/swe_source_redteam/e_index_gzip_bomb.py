"""E3: an index page read whole: 1.5 MB sent with ``Content-Encoding: gzip`` inflate to 1.5 GB. Before the fixes
the page was read in the synthesis process itself, uncapped (MemoryError under the red team's ``ulimit -v``,
else 1000 times the bytes sent). Here with ``fetch_sdist(timeout=60)``; the pipeline's default is 600 s."""

from __future__ import annotations

import zlib

import common

case = common.Case("E3.index_gzip_bomb")
compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
chunk = b" " * (1 << 20)
bomb = b"".join(compressor.compress(chunk) for _ in range(1536)) + compressor.flush()
print("bytes on the wire:", len(bomb), flush=True)


class Handler(common.QuietHandler):
    def do_GET(self):
        self.reply(bomb, "text/html", Content_Encoding="gzip")


base = common.serve(Handler)
TIMEOUT = 60
case.run(lambda: common.source.fetch_sdist("bomb", "1.0", case.cache, timeout=TIMEOUT,
                                           sources=([f"{base}/simple/"], [])), deadline=TIMEOUT + 30)
