"""`brokergroup bench produce` with one producer, the command docs/benchmarks.md gives for the timeline of one sync
put cycle (issue 17, ninth session), run as written: every message lands, and with one producer no two puts share a
flush, so every replica fsyncs at least once per message (each put waits for its own flush on all three before the
producer sends the next)."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
COMMAND = "brokergroup bench produce --modes sync --messages 3000 --batch 1 --concurrency 1 --no-baseline --warmup 200"


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_the_documented_one_producer_run(tmp_path: Path) -> None:
    assert f"\n{COMMAND}\n" in (ROOT / "docs" / "benchmarks.md").read_text()
    out = tmp_path / "one.json"
    done = subprocess.run(
        [*shlex.split(COMMAND), "--out", str(out)], capture_output=True, text=True, timeout=540, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["params"]["concurrency"] == 1 and report["params"]["batch"] == 1, report["params"]
    sync = report["results"]["sync"]
    assert sync["check"]["ok"], sync["check"]
    assert sync["check"]["queue_max_offsets"] == {"bench-single": 3000, "bench-batched": 3000}, sync["check"]
    for phase in ("single", "batched"):
        result = sync[phase]
        assert result["messages"] == result["requests"] == 3000, result
        assert result["retries"] == 0, result
        assert 0 < result["p50_ms"] <= result["p99_ms"] <= result["max_ms"], result
        assert result["msgs_per_s"] > 0 and result["cpu_ms_per_message"] > 0, result
        assert set(result["flushes_per_message"]) == {"master", "slave1", "slave2"}, result
        assert all(f >= 0.99 for f in result["flushes_per_message"].values()), result["flushes_per_message"]
