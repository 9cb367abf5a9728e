"""`python3 -m brokergroup.bench.store_restart` (docs/benchmarks.md, issue 18) runs and reports each phase."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

COMMAND = "python3 -m brokergroup.bench.store_restart --messages 20000 --divergent 1000"


def test_the_documented_command_reports_open_and_truncation_times() -> None:
    assert COMMAND in Path("docs/benchmarks.md").read_text()
    args = COMMAND.split()
    done = subprocess.run([sys.executable, *args[1:]], capture_output=True, text=True, timeout=600, check=True)
    result = json.loads(done.stdout)
    assert result["messages"] == 20000 and result["divergent"] == 1000
    assert result["log_bytes"] == 20000 * 162
    for key in ("open_s", "open_cpu_s", "truncate_s", "open_after_retention_s"):
        assert result[key] > 0, key
    assert result["retention_deleted_segments"] == 0  # 3 MB: one segment, never deleted
    assert result["retained_bytes"] == result["log_bytes"]


def test_bad_input_is_named(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("x")
    for args, expected in (
        (["--messages", "0"], "--messages (0) and --divergent (1000) must be at least 1"),
        (["--messages", "5", "--dir", str(tmp_path)], f"--dir {tmp_path} is not empty"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "brokergroup.bench.store_restart", *args], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2 and expected in done.stderr, done.stderr
