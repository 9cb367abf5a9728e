"""`python3 -m brokergroup.bench.replication_path` (docs/benchmarks.md, issue 21) runs the sync put path of
three replicas and reports CPU, frames and flushes per put."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

COMMAND = "python3 -m brokergroup.bench.replication_path --puts 3000 --producers 8"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "brokergroup.bench.replication_path", *args], capture_output=True, text=True, timeout=600
    )


def test_the_documented_command_is_in_the_docs_and_reports_per_put_figures() -> None:
    assert COMMAND in Path("docs/benchmarks.md").read_text()
    done = run("--puts", "400", "--producers", "8")  # the documented command, fewer puts
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["puts"], result["producers"]) == (400, 8)
    assert result["puts_per_s"] > 0 and result["cpu_us_per_put"] > 0
    per_put = result["per_put"]
    assert per_put["master_data_frames"] > 0 and per_put["slave_acks"] > 0
    # every replica fsyncs (SYNC flush on slaves too), at most once per put: group commit
    assert len(result["flushes_per_put"]) == 3 and all(0 < f <= 1 for f in result["flushes_per_put"])


def test_bad_input_is_named() -> None:
    done = run("--puts", "0")
    assert done.returncode == 2 and "--puts (0) and --producers (8) must be at least 1" in done.stderr, done.stderr
