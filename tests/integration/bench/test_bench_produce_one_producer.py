"""`brokergroup bench produce` with one producer, the command docs/benchmarks.md gives for the timeline of one sync
put cycle (issue 17, ninth session), run as written: every message lands, and with one producer no two puts share a
flush, so every replica fsyncs at least once per message (each put waits for its own flush on all three before the
producer sends the next)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.bench.documented import run_documented

COMMAND = "brokergroup bench produce --modes sync --messages 3000 --batch 1 --concurrency 1 --no-baseline --warmup 200"


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_the_documented_one_producer_run(tmp_path: Path) -> None:
    report = run_documented(COMMAND, tmp_path, as_block=True)
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
