"""The demo's verdict on its history: lost and duplicated messages, and INCOMPLETE (never valid)
when the history lacks what the checker needs (topology, body digests, every replica's final read)."""

from __future__ import annotations

from typing import Any

from brokergroup.chaos.history import body_digest, record_topology
from brokergroup.demo import verify
from brokergroup.demo.model import History, queue_name

SET = "demo-broker-0"
Q = queue_name(SET)
REPLICAS = [f"{SET}-{i}" for i in range(3)]
CONTROLLERS = ["n0", "n1", "n2"]
EVENTS = [
    {"eventId": "e1", "node": n, "source": "raft", "term": 1, "index": 1, "brokerName": SET, "type": "ELECT_MASTER",
     "masterBrokerId": 1, "masterEpoch": 1, "electionResult": "new_master_elected"}
    for n in CONTROLLERS
]  # fmt: skip


def body(seq: int) -> str:
    return body_digest(f"{SET}-{seq}".encode())


def history(
    acked: list[int],
    read: list[tuple[int, int]],
    *,
    unacked: tuple[int, ...] = (),
    finals: bool = True,
    topology: bool = True,
    bodies: dict[int, str] | None = None,
) -> list[dict[str, Any]]:
    """As the demo records it: the topology, sends of seqs `acked` (ok) and `unacked` (info), one read of
    (offset, seq) pairs through the master, and (`finals`) the same read from every replica in full.
    `bodies` gives a read's digest for a seq other than the digest of what was sent."""
    h = History()
    if topology:
        record_topology(h, {Q: REPLICAS}, CONTROLLERS)
    for seq in [*acked, *unacked]:
        value = {"queue": Q, "producerId": 7, "seq": seq, "digest": body(seq)}
        h.record(f"producer:{SET}", "invoke", "send", value)
        h.record(f"producer:{SET}", "ok" if seq in acked else "info", "send", value)
    messages = [[o, 7, s, (bodies or {}).get(s, body(s))] for o, s in read]
    for process in [f"consumer:{SET}", *([f"final:{r}" for r in REPLICAS] if finals else [])]:
        h.record(process, "invoke", "poll", {"queue": Q, "offset": 0})
        h.record(process, "ok", "poll", {"queue": Q, "messages": messages})
    return h.ops


def test_a_clean_history_is_valid() -> None:
    result = verify.verdict(history([0, 1, 2], [(0, 0), (1, 1), (2, 2)]), EVENTS)
    assert result["status"] == "VALID", result["incomplete"]
    assert result["anomalies"]["lost"] == 0 and result["anomalies"]["duplicated"] == 0


def test_without_topology_or_final_reads_or_event_logs_it_is_incomplete_not_valid() -> None:
    read = [(0, 0), (1, 1)]
    no_topology = verify.verdict(history([0, 1], read, topology=False), EVENTS)
    assert no_topology["status"] == "INCOMPLETE" and not no_topology["valid"]
    assert any("no topology record" in why for why in no_topology["incomplete"])
    no_finals = verify.verdict(history([0, 1], read, finals=False), EVENTS)
    assert no_finals["status"] == "INCOMPLETE"
    assert [why for why in no_finals["incomplete"] if why.startswith("no final read")] == [
        f"no final read of {Q} from {r}" for r in REPLICAS
    ]
    no_events = verify.verdict(history([0, 1], read), EVENTS[:2])
    assert no_events["incomplete"] == ["no controller event-log records from n2"]


def test_an_acknowledged_message_never_read_is_lost() -> None:
    result = verify.verdict(history([0, 1, 2], [(0, 0), (1, 2)]), EVENTS)
    assert result["status"] == "INVALID"
    assert result["anomalies"]["lost"] == 1
    assert result["examples"]["lost"][0]["message"] == [Q, 7, 1]


def test_a_message_at_two_offsets_is_duplicated() -> None:
    result = verify.verdict(history([0, 1], [(0, 0), (1, 1), (2, 1)]), EVENTS)
    assert result["status"] == "INVALID"
    assert result["anomalies"]["duplicated"] == 1


def test_a_body_read_that_differs_from_the_one_sent_is_a_mismatch() -> None:
    result = verify.verdict(history([0, 1], [(0, 0), (1, 1)], bodies={1: body_digest(b"other")}), EVENTS)
    assert result["status"] == "INVALID"
    assert result["anomalies"]["bodyMismatch"] >= 1


def test_an_unacknowledged_send_may_or_may_not_be_there() -> None:
    assert verify.verdict(history([0], [(0, 0)], unacked=(1,)), EVENTS)["valid"]
    assert verify.verdict(history([0], [(0, 0), (1, 1)], unacked=(1,)), EVENTS)["valid"]


def test_the_headline_counts_what_was_checked() -> None:
    line = verify.headline(verify.verdict(history([0, 1], [(0, 0), (1, 1)]), EVENTS))
    assert line.startswith("2 acknowledged, 2 read back: 0 lost, 0 duplicated")
    assert verify.headline(verify.verdict(history([0, 1], [(0, 0)]), EVENTS)) == (
        "2 acknowledged, 1 read back: 1 lost, 0 duplicated, 0 unexpected, 0 inconsistent offsets, "
        "0 split brain, 0 epoch regressions"
    )
