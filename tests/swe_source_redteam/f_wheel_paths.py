"""F: requirement wheels whose member paths leave pip's ``--target`` (``../``, absolute, and through
``.data/purelib/../..``). pip refused all three before the fixes; nothing was written outside."""

from __future__ import annotations

import base64
import hashlib
import os
import zipfile

import common

case = common.Case("F.wheel_paths")
escape = os.path.relpath(case.outside, "/")
members = [f"{'../' * 12}{escape}/PWNED", f"/{escape}/PWNED2", f"wpath2-1.0.data/purelib/{'../' * 14}{escape}/PWNED3"]
for number, escaping in enumerate(members):
    name = f"wpath{number}"
    files = {escaping: b"x", f"{name}/__init__.py": b"",
             f"{name}-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
             f"{name}-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
                                            b"Tag: py3-none-any\n"}
    record = "".join(f"{k},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},"
                     f"{len(d)}\n" for k, d in files.items())
    files[f"{name}-1.0.dist-info/RECORD"] = (record + f"{name}-1.0.dist-info/RECORD,,\n").encode()
    with zipfile.ZipFile(case.links / f"{name}-1.0-py3-none-any.whl", "w") as wheel:
        for member, data in files.items():
            wheel.writestr(member, data)


def install_each() -> str:
    results = []
    for number in range(len(members)):
        repo = case.cache / f"repo{number}"
        repo.mkdir(parents=True)
        try:
            common.source.install_requirements(repo, [f"wpath{number}"])
            results.append("installed")
        except common.SourceError as error:
            said = str(error).replace(str(case.dir), "{case}").split(": ", 2)[-1]
            results.append(f"wpath{number}: refused ({common.one_line(said, 70)})")
    return "contained: " + "; ".join(results)


case.run(install_each, deadline=600, judge=lambda text: text)
