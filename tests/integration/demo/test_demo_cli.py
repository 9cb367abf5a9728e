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
    assert "with the idempotent producer over the binary port" in done.stdout
    assert "audit skipped" in done.stdout
    assert "result: OK" in done.stdout
    for name in ("report.html", "latency.png", "throughput.png", "timeline.png", "summary.json", "history.jsonl"):
        assert (out / name).stat().st_size > 0, name
    assert "0 lost, 0 duplicated" in (out / "report.html").read_text()

    summary = json.loads((out / "summary.json").read_text())
    assert summary["lost"] == 0 and summary["duplicated"] == 0 and summary["acknowledged"] == 400
    verification = summary["verification"]
    assert verification["status"] == "VALID" and verification["incomplete"] == [], verification["incomplete"]
    assert verification["stats"]["eventLogNodes"] == ["n0", "n1", "n2"]

    killed = re.search(r"SIGKILL (demo-broker-0-\d)", done.stdout)
    assert killed and f"restarted {killed[1]}: back as slave" in done.stdout, done.stdout[-3000:]
    ops = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
    assert ops[0]["process"] == "harness" and ops[0]["f"] == "topology", ops[0]
    replicas = {f"demo-broker-{s}-{r}" for s in range(2) for r in range(3)}
    assert sorted(ops[0]["value"]["queues"]) == ["demo-broker-0/demo/0", "demo-broker-1/demo/0"]
    assert {r for rs in ops[0]["value"]["queues"].values() for r in rs} == replicas
    finals = {
        o["process"]: o["value"]["messages"] for o in ops if o["process"].startswith("final:") and o["type"] == "ok"
    }
    assert set(finals) == {f"final:{r}" for r in replicas}
    assert {len(m) for m in finals.values()} == {200}, {p: len(m) for p, m in finals.items()}
    sends = [op["value"] for op in ops if op["f"] == "send"]
    assert sends and all(len(v["digest"]) == 16 for v in sends)
    line = summary["timeline"]
    keys = [s["key"] for s in line["steps"]]
    assert [k for k in keys if k in REQUIRED] == REQUIRED, keys
    at = {s["key"]: s["atMs"] for s in line["steps"]}
    assert at["fault"] <= at["detected"] <= at["elected"] <= at["switched"]
    assert line["newMaster"] != line["killed"] and line["newMasterEpoch"] >= 2
    assert 0 < line["dataPlaneMs"] < 30_000

    assert wait_gone(read_state(out / "cluster").pids()) == [], "the demo stops every process it started"
