"""A3: the direct URL one step away. The package requires only ``innocent``, a pure wheel in the find-links folder;
that wheel's METADATA says ``Requires-Dist: evildep @ file:///...sdist``. Before the fixes pip built evildep on
the host despite ``--only-binary :all:`` (filtering the sdist's own requirements is not enough)."""

from __future__ import annotations

import base64
import hashlib
import zipfile

import common

case = common.Case("A3.wheel_dep_url")
dep = case.sdist("evildep", folder=case.dir / "elsewhere")
files = {
    "innocent/__init__.py": b"",
    "innocent-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: innocent\nVersion: 1.0\n"
                                       f"Requires-Dist: evildep @ {dep.as_uri()}\n".encode(),
    "innocent-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = "".join(f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}\n"
                 for n, d in files.items())
files["innocent-1.0.dist-info/RECORD"] = (record + "innocent-1.0.dist-info/RECORD,,\n").encode()
with zipfile.ZipFile(case.links / "innocent-1.0-py3-none-any.whl", "w") as wheel:
    for name, data in files.items():
        wheel.writestr(name, data)
case.sdist("victimthree", requires=["innocent"])
case.run(common.prepare("victimthree==1.0", case), deadline=common.UNPACK_SECONDS + 60)
