"""Run every reproducer of the source red team, one after another, and print a Markdown table of the outcomes.

    nice -n 10 .venv/bin/python tests/swe_source_redteam/run_all.py [SUBSTRING ...]

Each case runs in its own process group under a timeout a bit above the code's own deadlines (SIGTERM, then
SIGKILL) and an address-space limit of 6 GiB (a safety net for the machine; the code's child processes set their
own, lower one). Wall seconds and the peak RSS of the case's process tree (``os.wait4``'s rusage: the case and the
children it waited for) go into the table. Exit status 1 when any case is a violation or gave no verdict.
With SUBSTRING arguments only the cases whose name contains one of them run.
"""

from __future__ import annotations

import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MEMORY = 6 * 1024 ** 3
PREPARE = 180 + 60  # prepare_repo: the 120 s unpacking deadline and the case's slack, then run_all's own

# (name, script and arguments, what it attacks, timeout in seconds)
CASES = [
    ("A.url_requirement.file", "a_url_requirement.py file", "`Requires-Dist: evildep @ file:///...` (an sdist)",
     PREPARE),
    ("A.url_requirement.http", "a_url_requirement.py http", "`evildep @ http://127.0.0.1/...` (an sdist)", PREPARE),
    ("A.url_requirement.self", "a_url_requirement.py self", "`victim @ file://` its own copy in the cache", PREPARE),
    ("A3.wheel_dep_url", "a3_wheel_dep_url.py", "a wheel's METADATA requires `evildep @ file://`", PREPARE),
    ("A4.archive_named_requirement", "a4_archive_named_requirement.py",
     "`Requires-Dist: evilcwd.tar.gz`, a file of that name in the working directory", PREPARE),
    ("B.tar_filter_bypass", "b_tar_filter_bypass.py", "tar symlinks past PATH_MAX (CVE-2025-4517 class)", PREPARE),
    *[(f"C1.{kind}", f"c_crashes_archive.py {kind}", what, PREPARE) for kind, what in [
        ("conftest_latin1", "root conftest.py not UTF-8"),
        ("conftest_dir", "root conftest.py a folder"),
        ("marker_undefined", '`python_version ~= "x"` marker'),
        ("marker_invalid_version", "markers with unparsable versions"),
        ("gz_corrupt", "flipped bytes in the deflate stream"),
        ("gz_truncated", ".tar.gz cut to 2/3"),
        ("gz_invalid_block", "deflate block of type 3"),
        ("tar_xz_corrupt", "corrupt xz named .tar.gz"),
        ("zip_encrypted", "zip members flagged encrypted"),
        ("zip_method", "zip compression method 99"),
        ("requires_txt_dir", "egg-info/requires.txt a folder"),
        ("empty_tar", "a .tar.gz with no members"),
        ("empty_zip", "a zip with no members"),
        ("deep_tree", "a tree deeper than PATH_MAX through symlinks"),
    ]],
    *[(f"C2.{kind}", f"c_crashes_index.py {kind}", what, 110) for kind, what in [
        ("bad_port", "link to port 99999"),
        ("url_ctrl_char", "link with a control character"),
        ("url_too_long", "a 70 kB link"),
        ("bad_host", "link host `exa\\tmple..invalid`"),
        ("nul_path", "file:// link with %00"),
        ("json_files_int", 'PEP 691 `{"files": [1]}`'),
        ("json_root_list", "PEP 691 page a list"),
        ("json_hashes_list", "PEP 691 hashes a list"),
        ("json_upload_time_int", "PEP 691 upload-time an int"),
        ("json_requires_python_int", "PEP 691 requires-python an int"),
        ("json_url_int", "PEP 691 url an int"),
        ("charset_rot13", "`charset=rot13`"),
        ("charset_base64", "`charset=base64`"),
        ("json_hash_upper", 'wrong hash under key `"SHA256"`'),
        ("frag_hash_unknown", "`#whirlpool=` hash"),
        ("json_hash_unknown", 'PEP 691 `"hashes": {"whirlpool": ...}` (added here)'),
    ]],
    *[(f"D1.{kind}", f"d_hangs.py {kind}", what, 95) for kind, what in [
        ("drip_sdist", "sdist sent 1 byte/s, `timeout=3`"),
        ("drip_index", "index page sent 1 byte/s forever"),
        ("fifo_link", "find-links FIFO named like the sdist"),
        ("fifo_via_index", "http page linking a file:// FIFO"),
        ("file_via_index", "control: http page linking a local file://"),
    ]],
    ("D2.pax_redos", "d_pax_redos.py", "pax header of 300,000 digits (CVE-2024-6232)", 210),
    ("D3.negative_offset_loop.big", "d_negative_offset_loop.py big",
     "pax `size=-1536` loop after 20 MB of zeros", 210),
    ("D3.negative_offset_loop.small", "d_negative_offset_loop.py small",
     "the same loop up to the 200,000-member cap", 210),
    ("E1.tar_longname_memory", "e_tar_longname_memory.py", "GNU long name declared 100 GB", 210),
    ("E2.hardlink_amplification", "e_hardlink_amplification.py", "1 MB file + 300 hard links (3.6 kB)", PREPARE),
    ("E3.index_gzip_bomb", "e_index_gzip_bomb.py", "index page 1.5 MB gzip -> 1.5 GB", 150),
    ("E4.negative_size", "e_negative_size.py", "pax size -10^15, then 2.1 GB of zeros", PREPARE),
    *[(f"F.{kind}", f"f_held.py {kind}", what, PREPARE) for kind, what in [
        ("tar_traversal", "tar member `../../<outside>/PWNED`"),
        ("tar_absolute", "tar member `/<outside>/PWNED`"),
        ("tar_symlink_abs", "`esc -> /<outside>`, then `esc/PWNED`"),
        ("tar_symlink_rel", "`esc -> ../../<outside>`, then `esc/PWNED`"),
        ("tar_hardlink_out", "hard link to an outside file, then a member over it"),
        ("tar_device", "character device member"),
        ("tar_fifo", "FIFO member"),
        ("tar_setuid", "mode 04777 member"),
        ("tar_pkginfo_symlink", "`PKG-INFO -> /etc/passwd`"),
        ("zip_traversal", "zip name `../../<outside>/PWNED`"),
        ("zip_absolute", "zip name `/<outside>/PWNED`"),
        ("zip_lie_size", "central directory 10 B, data 50 MB"),
        ("sdist_only_requirement", "a requirement that is only a hostile sdist"),
        ("option_strings", "pip options as requirement lines"),
    ]],
    *[(f"F.{kind}", f"f_held_index.py {kind}", what, 150) for kind, what in [
        ("vcs_link", "git+https / git+file links"),
        ("dotdot_name", "link `/f/..%2F..%2F...idx-1.0.tar.gz`"),
        ("slash_name", "link `/f/a%2Fb%2Fidx-1.0.tar.gz`"),
        ("wrong_hash_md5", "wrong md5 fragment"),
        ("no_hash", "link with no hash"),
        ("many_links", "10 MB page, 200,000 links"),
        ("infinite_sdist", "endless sdist body"),
        ("wheel_only", "only a wheel listed"),
        ("odd_specs", "14 specs: `../x==1`, `x==1;rm -rf /`, 5000 digits, NUL..."),
    ]],
    ("F.wheel_paths", "f_wheel_paths.py", "requirement wheels with `../`, absolute, `.data/../..` paths", 660),
    ("G.local_dir_contains_cache", "g_local_dir_contains_cache.py", "local folder spec holding the cache root", 180),
    ("H.registry_sources", "h_registry_sources.py", "malformed PIP_CONFIG_FILE, odd PIP_* values", 360),
]


def run_case(command: str, timeout: float, folder: Path) -> tuple[str, int, float, float]:
    """``(last CASE line or a verdict of its own, exit status, wall seconds, peak RSS in MiB)``."""
    log = folder / "output.txt"
    env = {**os.environ, "TMPDIR": str(folder)}
    start = time.monotonic()
    with open(log, "w") as out:
        process = subprocess.Popen([sys.executable, str(HERE / command.split()[0]), *command.split()[1:]], cwd=ROOT,
                                   stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                   start_new_session=True)
    resource.prlimit(process.pid, resource.RLIMIT_AS, (MEMORY, MEMORY))  # at once, before it starts anything
    timed_out, status, usage = False, None, None
    while status is None:
        pid, status_, usage_ = os.wait4(process.pid, os.WNOHANG)
        if pid:
            status, usage = status_, usage_
            break
        if not timed_out and time.monotonic() - start > timeout:
            timed_out = True
            _signal_group(process.pid, signal.SIGTERM)
            for _ in range(50):
                pid, status_, usage_ = os.wait4(process.pid, os.WNOHANG)
                if pid:
                    status, usage = status_, usage_
                    break
                time.sleep(0.2)
            else:
                _signal_group(process.pid, signal.SIGKILL)
                _, status, usage = os.wait4(process.pid, 0)
            break
        time.sleep(0.2)
    seconds = time.monotonic() - start
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here; Popen must not wait for it again
    _signal_group(process.pid, signal.SIGKILL)  # whatever of the case is left (none, normally)
    output = log.read_text(errors="replace")
    lines = [line for line in output.splitlines() if line.startswith("CASE ")]
    if timed_out:
        verdict = f"VIOLATION: still running after {timeout:.0f} s (run_all's timeout), stopped"
    elif lines:
        verdict = lines[-1].split(": ", 1)[1] if ": " in lines[-1] else lines[-1]
    else:
        tail = (output.strip().splitlines() or ["no output"])[-1]
        verdict = f"ERROR: no verdict (exit status {process.returncode}): {tail[:200]}"
    return verdict, process.returncode, seconds, usage.ru_maxrss / 1024


def _signal_group(pid: int, number: int) -> None:
    try:
        os.killpg(pid, number)
    except (ProcessLookupError, PermissionError):
        pass


def _cell(text: str, limit: int = 230) -> str:
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return text.replace("|", "\\|")


def main() -> int:
    wanted = sys.argv[1:]
    cases = [c for c in CASES if not wanted or any(w in c[0] for w in wanted)]
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=False).stdout.strip() or "unknown"
    except OSError:
        commit = "unknown"
    print(f"checkout {ROOT} (commit {commit}), Python {platform.python_version()}, {date.today().isoformat()}, "
          f"{len(cases)} cases", file=sys.stderr, flush=True)
    rows, failed, started = [], 0, time.monotonic()
    folder = Path(tempfile.mkdtemp(prefix="rt-run-"))
    try:
        for number, (name, command, attacks, timeout) in enumerate(cases):
            case_folder = folder / f"{number:02d}"
            case_folder.mkdir()
            verdict, code, seconds, rss = run_case(command, timeout, case_folder)
            shutil.rmtree(case_folder, ignore_errors=True)
            bad = verdict.startswith(("VIOLATION", "ERROR")) or code != 0
            failed += bad
            print(f"CASE {name}: {verdict}  [{seconds:.1f} s, {rss:.0f} MiB]", file=sys.stderr, flush=True)
            rows.append(f"| {name} | {_cell(attacks)} | {_cell(verdict)} | {seconds:.1f} | {rss:.0f} |")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print("| case | what it attacks | outcome | wall s | peak RSS MiB |")
    print("|---|---|---|---:|---:|")
    print("\n".join(rows))
    print(f"\n{len(rows)} cases, {failed} violations or errors, {time.monotonic() - started:.0f} s in all")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
