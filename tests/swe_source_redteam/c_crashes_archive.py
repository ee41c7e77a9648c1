"""C1: hostile sdist contents that made ``prepare_repo`` raise something other than ``SourceError`` before the fixes
(a crash of the whole run instead of one dropped package). Usage: c_crashes_archive.py CASE

  conftest_latin1    a root conftest.py that is not UTF-8 (UnicodeDecodeError)
  conftest_dir       a root conftest.py that is a folder (IsADirectoryError)
  marker_undefined   Requires-Dist: foo; python_version ~= "x" (packaging's UndefinedComparison)
  marker_invalid_version  markers comparing versions that do not parse
  gz_corrupt         bytes flipped inside the deflate stream
  gz_truncated       the .tar.gz cut to two thirds (EOFError)
  gz_invalid_block   valid deflate, then a block of type 3
  tar_xz_corrupt     named .tar.gz, really xz (tarfile sniffs), corrupted
  zip_encrypted      zip members flagged encrypted (RuntimeError)
  zip_method         zip members with compression method 99 (NotImplementedError)
  requires_txt_dir   x.egg-info/requires.txt is a folder (IsADirectoryError)
  empty_tar          a .tar.gz with no members (FileNotFoundError)
  empty_zip          a zip with no members (FileNotFoundError)
  deep_tree          a real tree deeper than PATH_MAX, built through in-archive symlinks (shutil.Error)
"""

from __future__ import annotations

import io
import os
import struct
import sys
import tarfile
import zipfile
import zlib

import common

kind = sys.argv[1]
case = common.Case(f"C1.{kind}")
name = "crash" + kind.replace("_", "")
archive = case.links / f"{name}-1.0.tar.gz"


def plain(extra=None, requires=()):
    return case.sdist(name, extra_files=extra, requires=requires)


def zipped(tree):
    path = case.links / f"{name}-1.0.zip"
    with zipfile.ZipFile(path, "w") as handle:
        for file in sorted(tree.rglob("*")):
            if file.is_file():
                handle.write(file, f"{tree.name}/{file.relative_to(tree)}")
    return path


if kind == "conftest_latin1":
    plain({"conftest.py": b"# caf\xe9\nimport os\n"})
elif kind == "conftest_dir":
    plain({"conftest.py/x.txt": "x"})
elif kind == "marker_undefined":
    plain(requires=['foo; python_version ~= "x"'])
elif kind == "marker_invalid_version":
    plain(requires=['foo; python_version > "1.0-x-y"', 'bar; platform_release ~= "1.0"'])
elif kind in ("gz_corrupt", "gz_truncated", "gz_invalid_block"):
    raw = zlib.decompress(plain().read_bytes(), 31)  # the tar
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    if kind == "gz_invalid_block":
        data = compressor.compress(raw[:10240]) + compressor.flush(zlib.Z_FULL_FLUSH) + b"\x07" + b"\x00" * 64
    else:
        data = compressor.compress(raw) + compressor.flush()
        if kind == "gz_corrupt":
            data = data[:40] + bytes(b ^ 0xFF for b in data[40:72]) + data[72:]
        else:
            data = data[: len(data) * 2 // 3]
    archive.write_bytes(data)
elif kind == "tar_xz_corrupt":
    tree = case.tree(name)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        tar.add(tree, arcname=tree.name)
    data = buffer.getvalue()
    middle = len(data) * 3 // 4
    archive.write_bytes(data[:middle] + bytes(b ^ 0xFF for b in data[middle:middle + 32]) + data[middle + 32:])
elif kind in ("zip_encrypted", "zip_method"):
    path = zipped(case.tree(name))
    data = bytearray(path.read_bytes())
    for signature, flag_at, method_at in ((b"PK\x03\x04", 6, 8), (b"PK\x01\x02", 8, 10)):  # every local/central entry
        at = data.find(signature)
        while at != -1:
            if kind == "zip_encrypted":
                data[at + flag_at] |= 0x01  # the "encrypted" bit
            else:
                data[at + method_at:at + method_at + 2] = struct.pack("<H", 99)  # AES, not supported
            at = data.find(signature, at + 4)
    path.write_bytes(bytes(data))
elif kind == "requires_txt_dir":
    plain({"x.egg-info/requires.txt/y": "z"})
elif kind == "empty_tar":
    with tarfile.open(archive, "w:gz"):
        pass
elif kind == "empty_zip":
    with zipfile.ZipFile(case.links / f"{name}-1.0.zip", "w"):
        pass
elif kind == "deep_tree":
    tree = case.tree(name)
    component = "d" * 240
    with tarfile.open(archive, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        tar.add(tree, arcname=tree.name)
        common.add_symlink_ladder(tar, tree.name, "abcdefghijklmnop", component)
        deep = tarfile.TarInfo(os.path.join(tree.name, *"abcdefghijklmnop", "f" * 250))  # real path over PATH_MAX
        deep.size = 1
        tar.addfile(deep, io.BytesIO(b"x"))
else:
    sys.exit(f"unknown case {kind}")


def judge(result) -> str:
    return f"contained: accepted; repository: {common.repo_entries(result[1])}"


case.run(common.prepare(f"{name}==1.0", case), deadline=common.UNPACK_SECONDS + 60, judge=judge)
