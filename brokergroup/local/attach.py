"""Re-attaching to a cluster's processes by pid, from a process that did not start them.

`brokergroup local up` exits and leaves its processes running; `status` and `down` find them
again through the pids in cluster.json. A pid alone is not proof: the process may have died and
the pid been reused, or it may be a zombie nobody reaped. On Linux a pid counts as ours only
if /proc shows a live process whose command line holds the data folder it was started with;
elsewhere `kill(pid, 0)` is all there is.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from brokergroup.local.state import ClusterState, ProcessRecord

PROC = Path("/proc")


def alive(record: ProcessRecord) -> bool:
    """True when the record's pid is a live process that is the one we started."""
    if record.pid is None:
        return False
    if (PROC / "self").exists():
        return _alive_linux(record.pid, record.data_dir)
    try:
        os.kill(record.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # someone else's process under a reused pid
    return True


def running(state: ClusterState) -> list[str]:
    """Names of the cluster's processes that are alive."""
    return [p.name for p in state.processes() if alive(p)]


def _alive_linux(pid: int, data_dir: str) -> bool:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
        cmdline = (PROC / str(pid) / "cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    state = stat.rsplit(")", 1)[-1].split()[0]
    if state in ("Z", "X"):
        _reap(pid)
        return False
    return data_dir.encode() in cmdline.split(b"\0")


def _reap(pid: int) -> None:
    """Collect the exit status when the process is our own child (started in this process)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _send(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


@dataclasses.dataclass(frozen=True)
class StopResult:
    terminated: tuple[str, ...]
    """Names of processes that exited after SIGTERM."""
    killed: tuple[str, ...]
    """Names of processes that needed SIGKILL."""
    remaining: tuple[str, ...]
    """Names still alive at the end (should be empty)."""


def stop(
    records: list[ProcessRecord],
    *,
    timeout: float = 15.0,
    on_progress: Callable[[int, int], None] | None = None,
) -> StopResult:
    """SIGTERM every live process (SIGCONT first, in case it is stopped), wait up to `timeout`
    seconds, then SIGKILL what is left and wait for it to go."""
    live = [r for r in records if alive(r)]
    for record in live:
        assert record.pid is not None
        _send(record.pid, signal.SIGCONT)
        _send(record.pid, signal.SIGTERM)
    remaining = _wait_gone(live, time.monotonic() + timeout, on_progress)
    for record in remaining:
        assert record.pid is not None
        _send(record.pid, signal.SIGKILL)
    left = _wait_gone(remaining, time.monotonic() + 10.0, on_progress, total=len(live))
    return StopResult(
        terminated=tuple(r.name for r in live if r not in remaining),
        killed=tuple(r.name for r in remaining if r not in left),
        remaining=tuple(r.name for r in left),
    )


def _wait_gone(
    records: list[ProcessRecord],
    deadline: float,
    on_progress: Callable[[int, int], None] | None,
    total: int | None = None,
) -> list[ProcessRecord]:
    total = len(records) if total is None else total
    left = list(records)
    while True:
        left = [r for r in left if alive(r)]
        if on_progress is not None:
            on_progress(total - len(left), total)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)
