"""`brokergroup demo`, the README's first command, end to end on a small number of messages."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from brokergroup.local.state import read_state
from tests.integration.local.processes import brokergroup, wait_gone

pytestmark = pytest.mark.integration

REQUIRED = ["fault", "detected", "elected", "switched"]


def test_demo_kills_a_master_and_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    done = brokergroup("demo", "--out", out, "--messages", "400", "--skip-audit", timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]

    assert re.search(r"400 acknowledged, 400 read back: 0 lost, 0 duplicated", done.stdout), done.stdout[-3000:]
    assert "SIGKILL demo-broker-0-" in done.stdout
    assert "audit skipped" in done.stdout
    assert "result: OK" in done.stdout
    for name in ("report.html", "latency.png", "throughput.png", "timeline.png", "summary.json", "history.jsonl"):
        assert (out / name).stat().st_size > 0, name
    assert "0 lost, 0 duplicated" in (out / "report.html").read_text()

    summary = json.loads((out / "summary.json").read_text())
    assert summary["lost"] == 0 and summary["duplicated"] == 0 and summary["acknowledged"] == 400
    line = summary["timeline"]
    keys = [s["key"] for s in line["steps"]]
    assert [k for k in keys if k in REQUIRED] == REQUIRED, keys
    at = {s["key"]: s["atMs"] for s in line["steps"]}
    assert at["fault"] <= at["detected"] <= at["elected"] <= at["switched"]
    assert line["newMaster"] != line["killed"] and line["newMasterEpoch"] >= 2
    assert 0 < line["dataPlaneMs"] < 30_000

    assert wait_gone(read_state(out / "cluster").pids()) == [], "the demo stops every process it started"
