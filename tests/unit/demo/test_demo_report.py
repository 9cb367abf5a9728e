"""The demo's report: summary.json, report.html and the charts, from a finished run's data."""

from __future__ import annotations

import json
from pathlib import Path

from brokergroup.demo import charts, report
from brokergroup.demo.model import Ack, AuditOutcome, describe
from brokergroup.demo.timeline import Fault, Timeline, build

SET0, SET1 = "demo-broker-0", "demo-broker-1"
T0 = 1_700_000_000_000.0
OLD, NEW = "127.0.0.1:1001", "127.0.0.1:1002"


def acks() -> list[Ack]:
    rows = []
    for i in range(200):
        at = T0 - 1000 + 10 * i
        if not T0 <= at < T0 + 100:  # set 0 pauses during the failover
            rows.append(Ack(SET0, 1, i, at - 2, at, OLD if at < T0 else NEW, 1 if at != T0 + 100 else 3, i))
        rows.append(Ack(SET1, 2, i, at - 4, at, "127.0.0.1:2001", 1, i))
    return rows


def timeline() -> Timeline:
    fault = Fault(SET0, f"{SET0}-0", 1, OLD, 1, T0)
    events = [
        {"type": "CHANNEL_CLOSED", "ts": T0 + 10, "brokerName": SET0, "brokerId": 1, "node": "n0"},
        {"type": "ELECT_MASTER", "ts": T0 + 11, "brokerName": SET0, "electionResult": "new_master_elected",
         "masterEpoch": 2, "masterAddress": NEW, "masterBrokerId": 2, "reason": "channel_closed"},
    ]  # fmt: skip
    return build(fault, events, acks(), {OLD: f"{SET0}-0", NEW: f"{SET0}-1"})


def result(*, valid: bool = True, audit: AuditOutcome | None = None, line: Timeline | None = None) -> report.DemoResult:
    anomalies = {"lost": 0 if valid else 2, "duplicated": 0}
    return report.DemoResult(
        cluster={"controllers": 3, "sets": 2, "replicas": 3, "mode": "sync", "profile": "fast", "startedAt": "now"},
        acks=acks(),
        indeterminate=0,
        timeline=line or timeline(),
        verdict={"valid": valid, "anomalies": anomalies, "stats": {"sendsOk": 390, "distinctMessagesRead": 390}},
        audit=audit or AuditOutcome(ran=False, line="audit skipped: --skip-audit"),
        charts={"latency": "latency.png", "timeline": "timeline.png"},
        durations={"total": 60.0},
    )


def test_summary_carries_the_verdict_timeline_and_per_set_figures() -> None:
    data = report.summary(result())
    assert data["ok"] and data["lost"] == 0 and data["duplicated"] == 0 and data["acknowledged"] == 390
    assert [s["key"] for s in data["timeline"]["steps"]] == ["fault", "detected", "elected", "switched"]
    assert data["timeline"]["ordered"] and data["timeline"]["controlPlaneMs"] == 11
    sets = {s["set"]: s for s in data["sets"]}
    assert sets[SET0]["acknowledged"] == 190 and sets[SET1]["acknowledged"] == 200
    assert sets[SET1]["p50Ms"] == 4.0


def test_a_run_is_not_ok_when_anything_is_lost_or_the_audit_finds_violations_or_the_failover_is_missing() -> None:
    assert not result(valid=False).ok
    violations = AuditOutcome(ran=True, line="audit", summary={"findings": {"violations": 1}})
    assert not result(audit=violations).ok
    missing = build(Fault(SET0, "x", 1, OLD, 1, T0), [], [], {})
    assert not result(line=missing).ok


def test_html_shows_the_verdict_and_timeline_and_escapes_text() -> None:
    text = report.render_html(result(audit=AuditOutcome(ran=False, line="audit skipped: <no java>")))
    assert "0 lost, 0 duplicated" in text
    assert "new master elected" in text and "clients switched" in text
    assert "<img src='latency.png'" in text and "<img src='timeline.png'" in text
    assert "&lt;no java&gt;" in text and "<no java>" not in text


def test_write_puts_summary_report_and_acks_in_the_folder(tmp_path: Path) -> None:
    report.write(tmp_path, result())
    assert json.loads((tmp_path / "summary.json").read_text())["lost"] == 0
    assert (tmp_path / "report.html").read_text().startswith("<!doctype html>")
    assert len((tmp_path / "acks.jsonl").read_text().splitlines()) == 390


def test_charts_are_png_files(tmp_path: Path) -> None:
    files = charts.write_all(tmp_path, acks(), timeline())
    assert set(files) == {"latency", "throughput", "timeline"}
    for name in files.values():
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_audit_summary_line() -> None:
    summary = {"input": {"events": 26}, "incidents": {"total": 1}, "findings": {"violations": 0, "warnings": 2}}
    assert describe(summary) == "audit: 26 events, 1 incidents, 0 violations, 2 warnings"
