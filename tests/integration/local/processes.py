"""Helpers of the local-cluster CLI tests: run `brokergroup` as a user would, and check pids independently."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def brokergroup(*args: str | Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "brokergroup.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def exists(pid: int) -> bool:
    """True while the pid is a live process (a zombie waiting to be reaped is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def wait_gone(pids: list[int], timeout: float = 20.0) -> list[int]:
    """The pids still alive after `timeout` seconds of polling."""
    deadline = time.monotonic() + timeout
    left = [p for p in pids if exists(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if exists(p)]
    return left
