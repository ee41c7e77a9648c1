"""F: hostile archive contents and requirement lines the code already handled before the fixes (nothing outside
the cache root, no code run). Usage: f_held.py CASE

  tar_traversal        member NAME/../../../<outside>/PWNED
  tar_absolute         member /<outside>/PWNED
  tar_symlink_abs      esc -> /<outside>, then esc/PWNED
  tar_symlink_rel      esc -> ../../<outside>, then esc/PWNED
  tar_hardlink_out     a hard link to a file outside, then a regular member of the same name
  tar_device           a character device member
  tar_fifo             a FIFO member
  tar_setuid           a member of mode 04777
  tar_pkginfo_symlink  PKG-INFO -> /etc/passwd
  zip_traversal        zip name NAME/../../<outside>/PWNED
  zip_absolute         zip name /<outside>/PWNED
  zip_lie_size         the central directory says 10 bytes, the data inflates to 50 MB
  sdist_only_requirement  a requirement that exists only as a hostile sdist
  option_strings       pip options in requirement lines (--index-url, -e ., -r /etc/passwd, ...), in PKG-INFO and
                       requires.txt, with evil.tar.gz in the working directory
"""

from __future__ import annotations

import io
import os
import struct
import sys
import tarfile
import zipfile

import common

kind = sys.argv[1]
case = common.Case(f"F.{kind}")
name = "held" + kind.replace("_", "")
tree = case.tree(name)
T = tree.name
victim = case.outside / "victim"
victim.write_text("original\n")


def tar_with(*members):
    with tarfile.open(case.links / f"{T}.tar.gz", "w:gz") as tar:
        tar.add(tree, arcname=T)
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)


def member(path, type=tarfile.REGTYPE, linkname="", data=None, mode=0o644):
    info = tarfile.TarInfo(path)
    info.type, info.linkname, info.mode = type, linkname, mode
    if data is not None:
        info.size = len(data)
    return info, data


def zip_with(extra_name, data, compress=zipfile.ZIP_STORED):
    path = case.links / f"{T}.zip"
    with zipfile.ZipFile(path, "w", compress) as handle:
        for file in sorted(tree.rglob("*")):
            if file.is_file():
                handle.write(file, f"{T}/{file.relative_to(tree)}")
        handle.writestr(extra_name, data)
    return path


if kind == "tar_traversal":
    tar_with(member(f"{T}/../../../../../../../../..{case.outside}/PWNED", data=b"x"))
elif kind == "tar_absolute":
    tar_with(member(f"{case.outside}/PWNED", data=b"x"))
elif kind == "tar_symlink_abs":
    tar_with(member(f"{T}/esc", tarfile.SYMTYPE, str(case.outside)), member(f"{T}/esc/PWNED", data=b"x"))
elif kind == "tar_symlink_rel":
    tar_with(member(f"{T}/esc", tarfile.SYMTYPE, "../" * 16 + str(case.outside)[1:]),
             member(f"{T}/esc/PWNED", data=b"x"))
elif kind == "tar_hardlink_out":
    tar_with(member(f"{T}/hl", tarfile.LNKTYPE, str(victim)), member(f"{T}/hl", data=b"overwritten\n"))
elif kind == "tar_device":
    tar_with(member(f"{T}/dev", tarfile.CHRTYPE))
elif kind == "tar_fifo":
    tar_with(member(f"{T}/PKG-INFO2", tarfile.FIFOTYPE))
elif kind == "tar_setuid":
    tar_with(member(f"{T}/suid.sh", data=b"#!/bin/sh\n", mode=0o4777))
elif kind == "tar_pkginfo_symlink":
    (tree / "PKG-INFO").unlink()
    tar_with(member(f"{T}/PKG-INFO", tarfile.SYMTYPE, "/etc/passwd"))
elif kind == "zip_traversal":
    zip_with(f"{T}/../../../../../../../../..{case.outside}/PWNED", b"x")
elif kind == "zip_absolute":
    zip_with(f"{case.outside}/PWNED", b"x")
elif kind == "zip_lie_size":
    path = zip_with(f"{T}/lie.bin", bytes(50 << 20), zipfile.ZIP_DEFLATED)
    data = bytearray(path.read_bytes())
    at = data.find(b"PK\x01\x02")
    while at != -1:  # the central directory's uncompressed size of lie.bin: 10
        length = int.from_bytes(data[at + 28:at + 30], "little")
        if data[at + 46:at + 46 + length].endswith(b"lie.bin"):
            data[at + 24:at + 28] = struct.pack("<I", 10)
        at = data.find(b"PK\x01\x02", at + 4)
    path.write_bytes(bytes(data))
elif kind == "sdist_only_requirement":
    (tree / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\nRequires-Dist: sdistdep\n")
    case.sdist("sdistdep")
    tar_with()
elif kind == "option_strings":
    lines = ["--index-url http://127.0.0.1:1/", "-e .", "-r /etc/passwd", "foo --global-option=x",
             "--extra-index-url=http://127.0.0.1:1/", "foo; --pre", "-i http://127.0.0.1:1/", "./local", "../x.tar.gz",
             "evil.tar.gz", "/abs/path.tar.gz", "foo[--x]"]
    (tree / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
                                   + "".join(f"Requires-Dist: {line}\n" for line in lines))
    (tree / f"{name}.egg-info").mkdir()
    (tree / f"{name}.egg-info" / "requires.txt").write_text("\n".join(lines) + "\n[test]\n" + "\n".join(lines) + "\n")
    os.replace(case.sdist("evil", folder=case.dir / "built"), case.dir / "cwd" / "evil.tar.gz")
    print("passed on to pip:", common.source.requirements(tree), flush=True)
    tar_with()
else:
    sys.exit(f"unknown case {kind}")


def judge(result) -> str:
    if victim.read_text() != "original\n":
        case.violation("a file outside the cache root was overwritten")
    return f"contained: accepted; repository: {common.repo_entries(result[1])}"


case.run(common.prepare(f"{name}==1.0", case), deadline=common.UNPACK_SECONDS + 60, judge=judge)
