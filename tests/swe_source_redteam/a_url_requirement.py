"""A: a requirement given as a direct URL (``Requires-Dist: evildep @ <url>`` in the sdist's PKG-INFO).

pip's ``--only-binary :all:`` covers only candidates from an index or find-links: a direct URL to an sdist is
still built, so its backend runs on the host. Variants: ``file`` (a file:// URL), ``http`` (a 127.0.0.1 server
standing in for an attacker's host), ``self`` (no second file: the sdist names its own copy in the cache,
``<root>/sdists/NAME-VERSION/NAME-VERSION.tar.gz``, a predictable path). Before the fixes: the marker was written
(the dependency's, or in ``self`` the victim's own). Usage: a_url_requirement.py file|http|self
"""

from __future__ import annotations

import functools
import sys
from http.server import SimpleHTTPRequestHandler

import common

variant = sys.argv[1] if len(sys.argv) > 1 else "file"
case = common.Case(f"A.url_requirement.{variant}")
served = case.dir / "served"
dep = case.sdist("evildep", folder=served)
if variant == "http":
    base = common.serve(functools.partial(SimpleHTTPRequestHandler, directory=str(served)))
    url = f"{base}/{dep.name}"
elif variant == "self":
    url = (case.cache / "sdists" / "victimpkg-1.0" / "victimpkg-1.0.tar.gz").as_uri()
else:
    url = dep.as_uri()
case.sdist("victimpkg", requires=[f"evildep @ {url}"])
case.run(common.prepare("victimpkg==1.0", case), deadline=common.UNPACK_SECONDS + 60)
