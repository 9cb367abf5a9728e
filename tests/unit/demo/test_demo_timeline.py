"""The failover timeline, built from event-log records and acknowledgements on one clock."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from brokergroup.demo.model import Ack
from brokergroup.demo.timeline import Fault, build, read_events

SET = "demo-broker-0"
OLD, NEW = "127.0.0.1:1001", "127.0.0.1:1002"
NAMES = {OLD: f"{SET}-0", NEW: f"{SET}-1"}
T0 = 1_000_000.0
FAULT = Fault(broker_set=SET, replica=f"{SET}-0", broker_id=1, address=OLD, master_epoch=1, at_ms=T0)


def event(type_: str, ts: float, **fields: Any) -> dict[str, Any]:
    return {"type": type_, "ts": int(ts), "brokerName": SET, "node": "n0", **fields}


def elect(ts: float, epoch: int = 2, **fields: Any) -> dict[str, Any]:
    base = {"electionResult": "new_master_elected", "masterEpoch": epoch, "masterBrokerId": 2, "masterAddress": NEW}
    return event("ELECT_MASTER", ts, **{"source": "raft", "reason": "channel_closed", **base, **fields})


def ack(at: float, master: str, seq: int, broker_set: str = SET) -> Ack:
    return Ack(broker_set, 7, seq, at - 3, at, master, 1, seq)


ACKS = [ack(T0 - 40, OLD, 0), ack(T0 - 2, OLD, 1), ack(T0 + 1, OLD, 2), ack(T0 + 150, NEW, 3), ack(T0 + 160, NEW, 4)]


def test_steps_come_in_order_with_their_sources() -> None:
    events = [
        event("CHANNEL_CLOSED", T0 + 20, brokerId=1, source="local"),
        elect(T0 + 22),
        event("ROLE_CHANGE_NOTIFIED", T0 + 30, reason=f"{NEW}: epoch 2 ok", source="local"),
    ]
    line = build(FAULT, events, ACKS, NAMES)
    assert [s.key for s in line.steps] == ["fault", "detected", "elected", "notified", "switched"]
    assert line.complete and line.ordered
    assert line.control_plane_ms == 22
    assert line.data_plane_ms == 152  # last ack before (T0 - 2) -> first at the new master (T0 + 150)
    assert line.new_master == f"{SET}-1" and line.new_master_epoch == 2
    assert "CHANNEL_CLOSED on n0" in line.steps[1].detail
    assert f"pushed to {SET}-1 (epoch 2 ok)" in line.steps[3].detail
    assert line.wire()["steps"][4]["sinceFaultMs"] == 150


def test_an_ack_from_the_old_master_in_flight_at_the_kill_is_not_the_switch() -> None:
    line = build(FAULT, [elect(T0 + 22)], ACKS, NAMES)
    switched = line.step("switched")
    assert switched is not None and switched.at_ms == T0 + 150


def test_without_a_local_observation_detection_is_the_election() -> None:
    line = build(FAULT, [elect(T0 + 5000, reason="heartbeat_timeout")], ACKS, NAMES)
    detected, elected = line.step("detected"), line.step("elected")
    assert detected is not None and elected is not None and detected.at_ms == elected.at_ms
    assert "no local event" in detected.detail


def test_events_of_other_sets_earlier_epochs_and_before_the_fault_are_ignored() -> None:
    events = [
        elect(T0 - 5000, epoch=1),  # the first election, long before
        {**elect(T0 + 10), "brokerName": "demo-broker-1"},  # another set
        elect(T0 + 12, epoch=1),  # not a higher epoch
        event("CHANNEL_CLOSED", T0 + 8, brokerId=3, source="local"),  # a slave's stream
        elect(T0 + 40),
    ]
    line = build(FAULT, events, ACKS, NAMES)
    elected = line.step("elected")
    assert elected is not None and elected.at_ms == T0 + 40
    assert line.step("detected") is not None and line.since_fault("detected") == 40


def test_a_failover_that_never_happened_is_incomplete() -> None:
    line = build(FAULT, [], [a for a in ACKS if a.master == OLD], NAMES)
    assert not line.complete
    assert line.control_plane_ms is None and line.data_plane_ms is None
    assert [s.key for s in line.steps] == ["fault"]


def test_out_of_order_steps_are_reported() -> None:
    """A write acknowledged by the new master before its election would be a bug; the timeline says so."""
    line = build(FAULT, [elect(T0 + 500)], ACKS, NAMES)
    assert line.complete and not line.ordered


def test_read_events_names_the_node_and_skips_a_torn_line(tmp_path: Path) -> None:
    folder = tmp_path / "n1"
    folder.mkdir()
    lines = [json.dumps(elect(T0 + 1) | {"node": None}), json.dumps(event("CHANNEL_CLOSED", T0, brokerId=1)), '{"torn']
    (folder / "events-n1-000001.jsonl").write_text("\n".join(lines))
    records = read_events(tmp_path)
    assert [r["type"] for r in records] == ["ELECT_MASTER", "CHANNEL_CLOSED"]
    assert records[0]["node"] == "n1" and records[1]["node"] == "n0"
