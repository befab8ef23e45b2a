#!/usr/bin/env python3
"""Drops a running closer's program pages from its resident set, then resets
its peak RSS, so that the peak the load leaves shows the code the load itself
touches rather than what start-up touched once (docs/benchmarks.md, run 5).

    bench/code_pages.py PID

A measuring tool, not a tuning: the pages stay in the page cache and fault
back in, with the kernel's fault-around, as the process runs them. Uses
process_madvise(MADV_PAGEOUT) (Linux >= 5.10; root, or ptrace rights over
PID together with CAP_SYS_NICE) and /proc/PID/clear_refs.
"""
import ctypes
import os
import sys

SYS_PIDFD_OPEN = 434
SYS_PROCESS_MADVISE = 440
MADV_PAGEOUT = 21


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def main(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    pidfd = libc.syscall(SYS_PIDFD_OPEN, pid, 0)
    if pidfd < 0:
        sys.exit(f"pidfd_open({pid}): errno {ctypes.get_errno()}")
    exe = os.readlink(f"/proc/{pid}/exe")
    for line in open(f"/proc/{pid}/maps"):
        fields = line.split()
        if len(fields) < 6 or not fields[1].startswith("r") or "w" in fields[1]:
            continue
        if fields[5] != exe:
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        iov = IoVec(start, end - start)
        if libc.syscall(SYS_PROCESS_MADVISE, pidfd, ctypes.byref(iov), 1, MADV_PAGEOUT, 0) < 0:
            sys.exit(f"process_madvise: errno {ctypes.get_errno()}")
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


if __name__ == "__main__":
    main(int(sys.argv[1]))
