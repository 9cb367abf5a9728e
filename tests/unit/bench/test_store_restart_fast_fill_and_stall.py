"""`python3 -m brokergroup.bench.store_restart` with `--fill segments` and with `--stall` (docs/benchmarks.md,
issue 18): the segment fill builds a store that opens and serves every queue, and the stall mode reports an
index checkpoint's event-loop gap inline and in the flusher's thread."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

FILL = "python3 -m brokergroup.bench.store_restart --messages 200000 --divergent 1000 --fill segments"
STALL = "python3 -m brokergroup.bench.store_restart --stall --producers 32"


def run(command: str) -> dict[str, Any]:
    assert command in Path("docs/benchmarks.md").read_text()
    args = command.split()
    done = subprocess.run([sys.executable, *args[1:]], capture_output=True, text=True, timeout=600, check=True)
    result = json.loads(done.stdout)
    assert isinstance(result, dict)
    return result


def test_the_segment_fill_builds_a_store_that_opens_from_its_checkpoint() -> None:
    result = run(FILL)
    assert result["fill"] == "segments" and result["messages"] == 200000
    assert result["log_bytes"] == 200000 * 162
    for key in ("open_s", "open_cpu_s", "open_log_full_s", "truncate_s", "open_after_retention_s"):
        assert isinstance(result[key], float) and result[key] > 0, key
    assert isinstance(result["open_log_s"], float)


def test_the_stall_mode_measures_both_ways_of_writing_a_checkpoint() -> None:
    result = run(STALL)
    assert result["producers"] == 32 and result["window"] == 1024
    for mode in ("inline", "thread", "idle"):
        samples = result[mode]
        assert isinstance(samples, list) and len(samples) == 2
        for sample in samples:
            assert sample["wall_s"] > 0 and sample["max_loop_gap_ms"] > 0


def test_bad_producer_counts_are_named() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "brokergroup.bench.store_restart", "--stall", "--producers", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--producers (0) must be between 1 and 1024" in done.stderr, done.stderr
