"""docs/benchmarks.md's short broker-restart command, literally: a real broker process restarted on a log it did not
write itself (filled offline), after SIGTERM and after SIGKILL, serving the message in the middle of a queue."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def documented_line() -> str:
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    lines: list[str] = re.findall(r"`([^`\n]+)`", text)  # the command is written inline
    (line,) = [
        line for line in lines if line.startswith("python3 -m brokergroup.bench.broker_restart --messages 100000 ")
    ]
    return line


@pytest.mark.timeout(600)
def test_a_restarted_broker_serves_a_log_filled_offline(tmp_path: Path) -> None:
    argv = shlex.split(documented_line())
    assert argv[0] == "python3"
    done = subprocess.run(
        [sys.executable, *argv[1:]], capture_output=True, text=True, cwd=tmp_path, timeout=560, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (size,) = json.loads(done.stdout)["sizes"]
    assert size["messages"] == 100000 and size["log_bytes"] > 100000 * 100
    assert [r["after"] for r in size["restarts"]] == ["SIGTERM", "SIGKILL"]
    for run in size["restarts"]:
        assert 0 < run["status_s"] <= run["master_s"] <= run["first_read_s"], run
