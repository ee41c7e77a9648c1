"""F (index and spec side): inputs the code already handled before the fixes. Usage: f_held_index.py CASE

  vcs_link        git+https:// and git+file:// links named like the sdist
  dotdot_name     a link /f/..%2F..%2F..%2F..%2Fidx-1.0.tar.gz (saved under its base name, inside the cache)
  slash_name      a link /f/a%2Fb%2Fidx-1.0.tar.gz
  wrong_hash_md5  an md5 fragment that does not match
  no_hash         a link with no hash (accepted unchecked: the same index supplies the hash and the file)
  many_links      a 10 MB page of 200,000 links (23 s before the fixes)
  infinite_sdist  an endless sdist body (the 256 MB cap)
  wheel_only      only a wheel listed
  odd_specs       specs that are not NAME==VERSION (../x==1, x==1;rm -rf /, 5000 digits, NUL, ...): before the
                  fixes the 5000-digit version was an OSError and two were SourceErrors of three lines
"""

from __future__ import annotations

import sys

import common

kind = sys.argv[1]
case = common.Case(f"F.{kind}")
archive = case.sdist("idx", folder=case.dir / "files")
digest = common.sha256(archive)
pages = {
    "vcs_link": '<a href="git+https://127.0.0.1:1/repo.git#egg=idx-1.0">idx-1.0.tar.gz</a>'
                '<a href="git+file:///tmp/idx-1.0.tar.gz">idx-1.0.tar.gz</a>',
    "dotdot_name": '<a href="/f/..%2F..%2F..%2F..%2Fidx-1.0.tar.gz">x</a>',
    "slash_name": '<a href="/f/a%2Fb%2Fidx-1.0.tar.gz">x</a>',
    "wrong_hash_md5": f'<a href="/f/idx-1.0.tar.gz#md5={"0" * 32}">idx-1.0.tar.gz</a>',
    "no_hash": '<a href="/f/idx-1.0.tar.gz">idx-1.0.tar.gz</a>',
    "many_links": "".join(f'<a href="/f/idx-0.{i}.tar.gz">idx-0.{i}.tar.gz</a>\n' for i in range(200_000))
                  + '<a href="/f/idx-1.0.tar.gz">idx-1.0.tar.gz</a>',
    "infinite_sdist": '<a href="/f/idx-1.0.tar.gz">idx-1.0.tar.gz</a>',
    "wheel_only": '<a href="/f/idx-1.0-py3-none-any.whl">idx-1.0-py3-none-any.whl</a>',
    "odd_specs": "",
}
if kind not in pages:
    sys.exit(f"unknown case {kind}")
body = pages[kind].encode()


class Handler(common.QuietHandler):
    def do_GET(self):
        if not self.path.startswith("/f/"):
            self.reply(body)
        elif kind == "infinite_sdist":  # endless: the 256 MB cap must stop it
            self.send_response(200)
            self.send_header("Content-Type", "application/gzip")
            self.end_headers()
            try:
                while True:
                    self.wfile.write(bytes(1 << 20))
            except OSError:
                return
        else:
            self.reply(archive.read_bytes(), "application/gzip")


SPECS = ["x==..", "x==1/../..", "../x==1", "x==1;rm -rf /", "x==1 --pre", "x==" + "9" * 5000, "x==\uff11", "-e==1",
         "x==1\n", "x==1!2+3", "x===1", "x==1.*", "x.y-z==1.0+..", "\x00==1"]


def odd_specs() -> str:
    refused, found = 0, []
    for spec in SPECS:
        try:
            common.source.prepare_repo(spec, root=case.cache)
            found.append(f"{spec[:20]!r} accepted")
        except common.SourceError as error:
            refused += 1
            if "\n" in str(error):
                found.append(f"{spec[:20]!r}: a SourceError of several lines")
        except Exception as error:  # noqa: BLE001 - the finding
            found.append(f"{spec[:20]!r}: {type(error).__name__}")
    if any("accepted" not in item for item in found):
        case.violation("; ".join(found))
    return f"refused: {refused} of {len(SPECS)} specs a one-line SourceError" + (f"; {found}" if found else "")


TIMEOUT = 60


def judge(got) -> str:
    if kind == "odd_specs":
        return got
    inside = got.resolve().is_relative_to(case.cache.resolve())
    if not inside:
        case.violation(f"saved outside the cache root: {got}")
    what = "no hash listed, unchecked" if kind == "no_hash" else f"same bytes as served: {common.sha256(got) == digest}"
    return f"accepted: saved as {got.relative_to(case.cache)} ({what})"


if kind == "odd_specs":
    case.run(odd_specs, deadline=120, judge=judge)
else:
    base = common.serve(Handler)
    case.run(lambda: common.source.fetch_sdist("idx", "1.0", case.cache, timeout=TIMEOUT,
                                               sources=([f"{base}/simple/"], [])), deadline=TIMEOUT + 30, judge=judge)
