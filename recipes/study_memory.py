"""A study's process memory: its peak so far (recorded by every stage) and freed memory handed back to the system
after each stage (one process runs stage after stage)."""

from __future__ import annotations

import ctypes
import gc
import sys


def peak_rss_gb() -> float | None:
    """This process's peak resident memory so far, in GB (Linux: VmHWM; elsewhere ru_maxrss; None if neither).

    Every stage records it when it ends, so a study run over several sessions keeps each leg's peak even when the
    leg is killed (``/usr/bin/time -v`` reports only on a normal exit). A stage's own peak is at most its value."""
    try:  # VmHWM rather than ru_maxrss: after fork and exec, ru_maxrss still counts the parent's peak
        with open("/proc/self/status") as status:
            kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
        return round(kib * 1024 / 1e9, 2)
    except (OSError, StopIteration):
        try:
            import resource  # not on Windows
        except ImportError:
            return None
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # bytes on macOS, KiB elsewhere
        return round((peak if sys.platform == "darwin" else peak * 1024) / 1e9, 2)


def release_freed_memory() -> bool:
    """Collects garbage, then hands the pages that a finished stage freed back to the OS (glibc's
    ``malloc_trim(0)``); False where the C library has no such call (macOS, musl), after collecting.

    One process runs stage after stage. glibc keeps freed chunks of its heap resident, so a study's resident
    memory only rose (VmHWM 8.4 to 14.6 GB over one leg of the confirmatory study; its ``[heap]`` held 9.1 GB
    during an evaluation that needs about 1.6 GB in a fresh process). Python's gc cannot return those pages;
    malloc_trim releases free pages anywhere in the heap, not only at its top."""
    gc.collect()
    try:  # the process's own symbols: glibc's where it is the C library
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):
        return False
    trim(0)
    return True
