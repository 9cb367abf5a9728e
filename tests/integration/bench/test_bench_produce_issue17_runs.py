"""The `brokergroup bench produce` runs docs/benchmarks.md gives for issue 17's fifteenth session, run as written:
single sends in both phases (the client's CPU per send), batches of 32 (the replication frame size), and the
60k-message window. Each lands every message and reports CPU per message, the other processes' share and the
time stolen by the hypervisor."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.bench.documented import run_documented

RUNS = {
    "python3 -m brokergroup.cli bench produce --modes sync --messages 20000 --batch 1 --no-baseline --warmup 200": (
        20000,
        1,
    ),
    "python3 -m brokergroup.cli bench produce --modes sync --messages 40000 --no-baseline --warmup 200": (40000, 32),
    "brokergroup bench produce --modes sync --messages 60000 --no-baseline --warmup 200": (60000, 32),
}


@pytest.mark.integration
@pytest.mark.timeout(600)
@pytest.mark.parametrize("command", list(RUNS))
def test_the_documented_issue17_produce_runs(tmp_path: Path, command: str) -> None:
    messages, batch = RUNS[command]
    report = run_documented(command, tmp_path)
    assert report["params"]["batch"] == batch, report["params"]
    sync = report["results"]["sync"]
    assert sync["check"]["ok"], sync["check"]
    assert sync["check"]["queue_max_offsets"] == {"bench-single": messages, "bench-batched": messages}
    for phase in ("single", "batched"):
        result = sync[phase]
        assert result["messages"] == messages and result["retries"] == 0, result
        assert result["msgs_per_s"] > 0 and result["cpu_ms_per_message"] > 0, result
        cpu = result["cpu_percent_of_one_core"]
        assert cpu["stolen by the hypervisor"] >= 0 and cpu["other processes"] >= 0, cpu
    assert sync["single"]["requests"] == messages
    assert sync["batched"]["requests"] == -(-messages // batch)
