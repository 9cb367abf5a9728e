"""`python3 -m brokergroup.bench.prewrite` (docs/benchmarks.md, issue 21) runs every variant and reports
per-put CPU and flush latency."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

COMMAND = "python3 -m brokergroup.bench.prewrite --puts 2000 --rounds 3"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "brokergroup.bench.prewrite", *args], capture_output=True, text=True, timeout=600
    )


def test_the_documented_command_is_in_the_docs_and_reports_every_variant(tmp_path: Path) -> None:
    assert COMMAND in Path("docs/benchmarks.md").read_text()
    done = run("--puts", "50", "--rounds", "1", "--dir", str(tmp_path))  # the documented command, fewer puts
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["puts"], result["rounds"]) == (50, 1)
    assert set(result["medians"]) == {"file append", "file ahead", "log prewrite=0", "log prewrite=1048576"}
    for figures in result["medians"].values():
        assert figures["flush_p50_ms"] > 0 and figures["flush_p99_ms"] >= figures["flush_p50_ms"]
    assert list(tmp_path.iterdir()) == []  # its files are removed


def test_bad_arguments_are_named() -> None:
    done = run("--puts", "0")
    assert done.returncode == 2 and "--puts=0 must be at least 1" in done.stderr
