"""A seccomp filter for the bwrap sandbox, as a classic BPF program built by hand.

It closes the kernel's channels between episodes that namespaces leave open (issue #15):

* the **key management calls** ``add_key``, ``request_key`` and ``keyctl`` fail with ``EPERM``.
  Without them, uid 65534's user keyring, which is the same object in every sandbox on the host
  and lives until reboot, could carry data from one episode to the next, and a command could
  read the keys of its session keyring;
* **new user namespaces** are refused: ``unshare`` and ``clone`` with ``CLONE_NEWUSER`` fail with
  ``EPERM``. ``clone3`` fails with ``ENOSYS``, because a filter cannot read the flags inside its
  struct, and libc then falls back to ``clone`` for threads and processes. Docker's default
  profile does the same. A nested user namespace would give the command capabilities over
  namespaces of its own, and so the kernel's whole namespaced attack surface;
* system calls of another ABI (x32, or i386 through ``int 0x80`` on x86_64) fail with ``EPERM``:
  their numbers differ, so the checks above would not see them.

And the channels *between concurrent sandboxes* through the host inodes they all see (``/usr``,
``/dev/null``, the tools) read-only (issue #24):

* **file locks** do nothing: ``flock`` and ``fcntl``'s ``F_SETLK``, ``F_SETLKW``, ``F_OFD_SETLK`` and
  ``F_OFD_SETLKW`` return 0 without taking a lock (``SECCOMP_RET_ERRNO`` with errno 0). A lock on
  ``/usr/bin/python3`` held in one sandbox was visible in every other (``LOCK_NB`` failing, or
  ``F_GETLK`` reporting it). No sandboxed process ever holds a lock, so ``F_GETLK`` is allowed and
  reports none. Code that takes a lock still runs (sqlite, ``filelock``); two processes of *one*
  command no longer exclude each other;
* **access notifications** are absent, as in a kernel built without them: ``inotify_init``,
  ``inotify_init1`` and ``fanotify_init`` fail with ``ENOSYS``, ``fcntl(F_NOTIFY)`` with ``EINVAL``.
  A watch on a shared file saw every other sandbox open and read it;
* **io_uring** (``io_uring_setup``, ``io_uring_enter``, ``io_uring_register``) fails with ``EPERM``, as
  under Docker's default profile: its requests run in kernel workers that the filter never sees.

Timing channels (CPU load, the shared page cache) are not closed by any of this; see the SWE
world's documentation (``docs/worlds/swe.md``, "Known limits").

Everything else is allowed: this is a deny list over the sandbox's other defences, not a
whitelist.

Why no library: libseccomp's Python binding is only a Debian package for the system Python
(``python3-seccomp``), and ``pyseccomp`` on PyPI loads ``libseccomp.so`` through ctypes, which is one
more dependency to install for about 40 instructions. The program is written with :mod:`struct`, in the
layout of ``struct sock_filter`` (``linux/filter.h``), and bwrap installs it (``--seccomp FD``).
"""

from __future__ import annotations

import functools
import platform
import struct

# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]
NR_OFFSET, ARCH_OFFSET = 0, 4
# args[0] and args[1]'s low 32 bits (little-endian): clone's flags, fcntl's command (an unsigned int
# in the kernel, which ignores the high bits too)
ARG0_OFFSET, ARG1_OFFSET = 16, 24
CLONE_NEWUSER = 0x10000000
EPERM, EINVAL, ENOSYS = 1, 22, 38
# fcntl commands (asm-generic/fcntl.h, the same on x86_64 and aarch64)
F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW, F_NOTIFY = 6, 7, 37, 38, 1026

# classic BPF opcodes (linux/bpf_common.h)
LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
JEQ_K, JGE_K, JSET_K = 0x15, 0x35, 0x45  # BPF_JMP | BPF_JEQ/JGE/JSET | BPF_K
RET_K = 0x06  # BPF_RET | BPF_K
RET_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
RET_ERRNO = 0x00050000  # SECCOMP_RET_ERRNO | errno; errno 0 skips the call and returns 0

# per architecture (platform.machine()): the audit arch, the first number of a foreign ABI sharing
# the table (x32) or None, and the system call numbers (asm/unistd_64.h; aarch64 uses the generic
# table, which has no inotify_init)
ARCHES = {
    "x86_64": {"audit": 0xC000003E, "foreign_from": 0x40000000,
               "add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272, "clone": 56, "clone3": 435,
               "fcntl": 72, "flock": 73, "inotify_init": 253, "inotify_init1": 294, "fanotify_init": 300,
               "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427},
    "aarch64": {"audit": 0xC00000B7, "foreign_from": None,
                "add_key": 217, "request_key": 218, "keyctl": 219, "unshare": 97, "clone": 220, "clone3": 435,
                "fcntl": 25, "flock": 32, "inotify_init1": 26, "fanotify_init": 262,
                "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427},
}
DENIED = ("add_key", "request_key", "keyctl", "io_uring_setup", "io_uring_enter", "io_uring_register")  # EPERM
ABSENT = ("clone3", "inotify_init", "inotify_init1", "fanotify_init")  # ENOSYS, as if not built in
NO_OPS = ("flock",)  # return 0, do nothing
LOCK_COMMANDS = (F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW)  # fcntl: return 0, do nothing


def _assemble(program: list[tuple]) -> bytes:
    """``(opcode, jump_if_true, jump_if_false, k)`` rows, jumps given as labels (``"name"``) or None
    (the next instruction); a row ``("label", name)`` marks a target. Jumps go forward only."""
    labels, rows = {}, []
    for row in program:
        if row[0] == "label":
            labels[row[1]] = len(rows)
        else:
            rows.append(row)
    out = bytearray()
    for index, (code, if_true, if_false, k) in enumerate(rows):
        def offset(label, index=index):
            jump = 0 if label is None else labels[label] - index - 1
            if not 0 <= jump <= 255:  # classic BPF jumps are forward, 8 bits
                raise ValueError(f"seccomp filter: jump to {label!r} from row {index} is {jump}")
            return jump
        out += struct.pack("=HBBI", code, offset(if_true), offset(if_false), k)
    return bytes(out)


@functools.lru_cache(maxsize=4)
def build_filter(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (default: this one), or ``None`` where no table is known."""
    numbers = ARCHES.get(machine or platform.machine())
    if numbers is None:
        return None
    program: list[tuple] = [
        (LD_W_ABS, None, None, ARCH_OFFSET),
        (JEQ_K, None, "deny", numbers["audit"]),
        (LD_W_ABS, None, None, NR_OFFSET),
    ]
    if numbers["foreign_from"] is not None:
        program.append((JGE_K, "deny", None, numbers["foreign_from"]))
    program += [(JEQ_K, "deny", None, numbers[name]) for name in DENIED]
    program += [(JEQ_K, "enosys", None, numbers[name]) for name in ABSENT if name in numbers]
    program += [(JEQ_K, "noop", None, numbers[name]) for name in NO_OPS]
    program += [
        (JEQ_K, "fcntl", None, numbers["fcntl"]),
        (JEQ_K, "flags", None, numbers["unshare"]),
        (JEQ_K, "flags", None, numbers["clone"]),
        (RET_K, None, None, RET_ALLOW),
        ("label", "fcntl"),  # fcntl: the locking commands do nothing, F_NOTIFY is absent
        (LD_W_ABS, None, None, ARG1_OFFSET),
        *[(JEQ_K, "noop", None, command) for command in LOCK_COMMANDS],
        (JEQ_K, "einval", None, F_NOTIFY),
        (RET_K, None, None, RET_ALLOW),
        ("label", "flags"),  # unshare / clone: no CLONE_NEWUSER
        (LD_W_ABS, None, None, ARG0_OFFSET),
        (JSET_K, "deny", None, CLONE_NEWUSER),
        (RET_K, None, None, RET_ALLOW),
        ("label", "deny"),
        (RET_K, None, None, RET_ERRNO | EPERM),
        ("label", "enosys"),
        (RET_K, None, None, RET_ERRNO | ENOSYS),
        ("label", "einval"),
        (RET_K, None, None, RET_ERRNO | EINVAL),
        ("label", "noop"),
        (RET_K, None, None, RET_ERRNO | 0),
    ]
    return _assemble(program)
