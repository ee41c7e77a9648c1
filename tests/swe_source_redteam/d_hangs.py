"""D1: hangs of the fetch. Each calls ``fetch_sdist(timeout=3)``; before the fixes every one but the control was
still running after 60 s (httpx's timeout is per read, not a deadline, and a FIFO's open() blocks). Usage:
d_hangs.py CASE

  drip_sdist      the index links an sdist served one byte per second
  drip_index      the index page itself is sent one byte per second, forever
  fifo_link       a find-links folder holding a FIFO named drip-1.0.tar.gz
  fifo_via_index  a remote (http) index page whose link is file:///.../drip-1.0.tar.gz, a FIFO on this machine
  file_via_index  the control of the last: a regular file at that path (before the fixes: fetched, an http page
                  made the host read a local file it named)
"""

from __future__ import annotations

import os
import sys
import time

import common

kind = sys.argv[1]
if kind not in ("drip_sdist", "drip_index", "fifo_link", "fifo_via_index", "file_via_index"):
    sys.exit(f"unknown case {kind}")
case = common.Case(f"D1.{kind}")
archive = case.sdist("drip", folder=case.dir / "files")
local = case.dir / "local" / "drip-1.0.tar.gz"  # what a file:// link of the http page names


class Handler(common.QuietHandler):
    def do_GET(self):
        if self.path.startswith("/f/"):
            data = archive.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "application/gzip")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            for at in range(len(data)):
                self.wfile.write(data[at:at + 1])
                self.wfile.flush()
                time.sleep(1)
        elif kind == "drip_index":
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            while True:
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(1)
        elif kind in ("fifo_via_index", "file_via_index"):
            self.reply(f'<a href="{local.as_uri()}">drip-1.0.tar.gz</a>'.encode())
        else:
            self.reply(b'<a href="/f/drip-1.0.tar.gz">drip-1.0.tar.gz</a>')


if kind == "fifo_link":
    os.mkfifo(case.links / "drip-1.0.tar.gz")
    sources = ([], [str(case.links)])
else:
    local.parent.mkdir()
    if kind == "fifo_via_index":
        os.mkfifo(local)
    elif kind == "file_via_index":
        local.write_bytes(archive.read_bytes())
    sources = ([f"{common.serve(Handler)}/simple/"], [])
TIMEOUT = 3


def judge(got) -> str:
    if kind == "file_via_index":
        return (f"accepted: an http index's file:// link was read from this machine's disk into the cache "
                f"(same bytes: {common.sha256(got) == common.sha256(local)})")
    return f"accepted: {got.name}"


case.run(lambda: common.source.fetch_sdist("drip", "1.0", case.cache, timeout=TIMEOUT, sources=sources),
         deadline=TIMEOUT + 30, judge=judge)
