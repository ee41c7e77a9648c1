"""C2: a hostile simple index (served from 127.0.0.1) whose page made ``fetch_sdist`` raise something other than
``SourceError`` before the fixes; and two hash gaps, where a wrong hash was accepted. Usage: c_crashes_index.py CASE

  bad_port, url_ctrl_char, url_too_long, bad_host, nul_path   a link URL httpx cannot use (InvalidURL,
                          UnicodeError, ValueError: none an httpx.HTTPError)
  json_files_int, json_root_list, json_hashes_list, json_upload_time_int, json_requires_python_int, json_url_int
                          a PEP 691 JSON page with entries of the wrong type (AttributeError, TypeError)
  charset_rot13, charset_base64   a charset naming a codec that is no text encoding (LookupError)
  json_hash_upper         {"SHA256": "000..."}: before the fixes the key was not recognized, the wrong hash unchecked
  frag_hash_unknown       #whirlpool=00: an algorithm hashlib does not guarantee, before the fixes unchecked
  json_hash_unknown       the same as a PEP 691 "hashes" key (not in the red team's run: the JSON twin of the last)
"""

from __future__ import annotations

import json
import sys

import common

kind = sys.argv[1]
case = common.Case(f"C2.{kind}")
archive = case.sdist("idx", folder=case.dir / "files")
digest = common.sha256(archive)
JSON = "application/vnd.pypi.simple.v1+json"
FILE = "/f/idx-1.0.tar.gz"
pages = {
    "bad_port": ("text/html", '<a href="http://127.0.0.1:99999/idx-1.0.tar.gz">idx-1.0.tar.gz</a>'),
    "url_ctrl_char": ("text/html", '<a href="http://127.0.0.1:1/a\x01b/idx-1.0.tar.gz">idx-1.0.tar.gz</a>'),
    "url_too_long": ("text/html", '<a href="http://127.0.0.1:1/' + "a" * 70000 + '/idx-1.0.tar.gz">idx-1.0.tar.gz</a>'),
    # the red team's host was exa\tmple..com; .invalid never resolves, should a parser ever let it through
    "bad_host": ("text/html", '<a href="http://exa\tmple..invalid:80/idx-1.0.tar.gz">idx-1.0.tar.gz</a>'),
    "nul_path": ("text/html", ('<a href="file:///tmp/idx-1.0.tar.gz%00">x</a>'
                               '<a href="file:///tmp/x%00/idx-1.0.tar.gz">idx-1.0.tar.gz</a>')),
    "json_files_int": (JSON, json.dumps({"files": [1]})),
    "json_root_list": (JSON, json.dumps([1, 2])),
    "json_hashes_list": (JSON, json.dumps({"files": [{"url": FILE, "hashes": ["abc"]}]})),
    "json_upload_time_int": (JSON, json.dumps({"files": [{"url": FILE, "upload-time": 5}]})),
    "json_requires_python_int": (JSON, json.dumps({"files": [{"url": FILE, "requires-python": 3}]})),
    "json_url_int": (JSON, json.dumps({"files": [{"url": 7}]})),
    "charset_rot13": ("text/html; charset=rot13", f'<a href="{FILE}">idx-1.0.tar.gz</a>'),
    "charset_base64": ("text/html; charset=base64", f'<a href="{FILE}">idx-1.0.tar.gz</a>'),
    "json_hash_upper": (JSON, json.dumps({"files": [{"url": FILE, "hashes": {"SHA256": "0" * 64}}]})),
    "frag_hash_unknown": ("text/html", f'<a href="{FILE}#whirlpool=00">idx-1.0.tar.gz</a>'),
    "json_hash_unknown": (JSON, json.dumps({"files": [{"url": FILE, "hashes": {"whirlpool": "00"}}]})),
}
if kind not in pages:
    sys.exit(f"unknown case {kind}")
content_type, body = pages[kind]


class Handler(common.QuietHandler):
    def do_GET(self):
        if self.path.startswith("/f/"):
            self.reply(archive.read_bytes(), "application/gzip")
        else:
            self.reply(body.encode("latin-1"), content_type)


base = common.serve(Handler)
TIMEOUT = 20


def judge(got) -> str:
    same = common.sha256(got) == digest
    if kind in ("json_hash_upper", "frag_hash_unknown", "json_hash_unknown"):
        return f"accepted: fetched though the index lists a hash it does not match or cannot check (same bytes: {same})"
    return f"accepted: {got.name} fetched (same bytes as served: {same})"


case.run(lambda: common.source.fetch_sdist("idx", "1.0", case.cache, timeout=TIMEOUT,
                                           sources=([f"{base}/simple/"], [])), deadline=TIMEOUT + 30, judge=judge)
