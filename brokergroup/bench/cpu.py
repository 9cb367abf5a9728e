"""CPU time another process has spent, to the nanosecond.

`/proc/<pid>/stat` counts utime and stime in clock ticks (10 ms here), so a phase shorter than a tick reads as 0.
The process's CPU-time clock (`clock_getcpuclockid`, Linux's `MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)`) is the
scheduler's own sum of every thread's runtime in nanoseconds, threads that have already exited included.
"""

from __future__ import annotations

import time

_CPUCLOCK_SCHED = 2


def process_clock(pid: int) -> int:
    """The clock id of a process's CPU time (glibc's `clock_getcpuclockid`, which Python does not expose)."""
    return ((~pid) << 3) | _CPUCLOCK_SCHED


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a running process so far, or None once it is gone."""
    try:
        return time.clock_gettime(process_clock(pid))
    except OSError:  # EINVAL: no such process (reaped)
        return None
