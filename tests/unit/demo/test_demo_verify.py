"""The demo's verdict on its history: lost and duplicated messages."""

from __future__ import annotations

from typing import Any

from brokergroup.demo import verify
from brokergroup.demo.model import History, queue_name

Q = queue_name("demo-broker-0")


def history(acked: list[int], read: list[tuple[int, int]], *, unacked: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    """Sends of seqs `acked` (ok) and `unacked` (info), then one read of (offset, seq) pairs."""
    h = History()
    for seq in [*acked, *unacked]:
        value = {"queue": Q, "producerId": 7, "seq": seq}
        h.record("producer:demo-broker-0", "invoke", "send", value)
        h.record("producer:demo-broker-0", "ok" if seq in acked else "info", "send", value)
    h.record("consumer:demo-broker-0", "invoke", "poll", {"queue": Q, "offset": 0})
    h.record("consumer:demo-broker-0", "ok", "poll", {"queue": Q, "messages": [[o, 7, s] for o, s in read]})
    return h.ops


def test_a_clean_history_is_valid() -> None:
    result = verify.verdict(history([0, 1, 2], [(0, 0), (1, 1), (2, 2)]), [])
    assert result["valid"]
    assert result["anomalies"]["lost"] == 0 and result["anomalies"]["duplicated"] == 0


def test_an_acknowledged_message_never_read_is_lost() -> None:
    result = verify.verdict(history([0, 1, 2], [(0, 0), (1, 2)]), [])
    assert not result["valid"]
    assert result["anomalies"]["lost"] == 1
    assert result["examples"]["lost"] == [{"message": [Q, 7, 1], "missingFrom": ["every read"]}]


def test_a_message_at_two_offsets_is_duplicated() -> None:
    result = verify.verdict(history([0, 1], [(0, 0), (1, 1), (2, 1)]), [])
    assert not result["valid"]
    assert result["anomalies"]["duplicated"] == 1


def test_an_unacknowledged_send_may_or_may_not_be_there() -> None:
    assert verify.verdict(history([0], [(0, 0)], unacked=(1,)), [])["valid"]
    assert verify.verdict(history([0], [(0, 0), (1, 1)], unacked=(1,)), [])["valid"]


def test_the_headline_counts_what_was_checked() -> None:
    line = verify.headline(verify.verdict(history([0, 1], [(0, 0), (1, 1)]), []))
    assert line.startswith("2 acknowledged, 2 read back: 0 lost, 0 duplicated")
    assert verify.headline(verify.verdict(history([0, 1], [(0, 0)]), [])) == (
        "2 acknowledged, 1 read back: 1 lost, 0 duplicated, 0 unexpected, 0 inconsistent offsets, "
        "0 split brain, 0 epoch regressions"
    )
