"""`brokergroup bench produce` with retention, the short command docs/benchmarks.md gives ("Produce with
retention running", issue 18), run as written: both sets store every message, the `on` master deletes
segments during its phases and the `off` one never does, and the summary has both variants."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.bench.documented import run_documented

COMMAND = (
    "brokergroup bench produce --modes sync --messages 300 --warmup 10 --no-baseline "
    "--retention-bytes 8192 --segment-bytes 4096 --rounds 1"
)


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_the_documented_short_retention_ab_run(tmp_path: Path) -> None:
    sync = run_documented(COMMAND, tmp_path)["results"]["sync"]
    assert all(check["ok"] for check in sync["check"].values()), sync["check"]
    phases = sync["phases"]
    assert [(p["round"], p["phase"], p["retention"]) for p in phases] == [
        (1, "single", "off"), (1, "single", "on"), (1, "batched", "off"), (1, "batched", "on"),
    ]  # fmt: skip
    for p in phases:
        deleted = p["segments_deleted_on_master"]
        assert (deleted > 0) if p["retention"] == "on" else (deleted == 0), p
        assert p["msgs_per_s"] > 0 and p["cpu_ms_per_message"] > 0, p
    assert "--set" in sync["broker_flags"]["on"] and "store.retention_bytes=8192" in sync["broker_flags"]["on"]
    assert "store.retention_bytes=8192" not in sync["broker_flags"]["off"]
    for kind in ("single", "batched"):
        assert sync["summary"][kind]["msgs_per_s_ratio_median_of_rounds"] > 0
