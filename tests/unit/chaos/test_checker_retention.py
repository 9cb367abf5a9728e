"""The history checker with retention (issue 18): messages a replica's final read or a consumer was told
were deleted (OFFSET_TOO_SMALL, the `skipped` ranges of a poll) are accounted for, not lost; anything the
broker did not say it deleted is still lost; a read that jumps over offsets without being told is an
anomaly; a missing message whose offset nobody knows makes the run INCOMPLETE, never VALID."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from test_checker import REPLICAS, Q, complete, digest, incomplete, only

from brokergroup.chaos.checker import ANOMALIES, check


def acked(process: str, pid: int, seq: int, offset: int | None) -> list[dict[str, Any]]:
    value = {"queue": Q, "producerId": pid, "seq": seq, "payload": f"{process}-{seq}", "digest": digest(pid, seq)}
    return [
        {"process": process, "type": "invoke", "f": "send", "value": value, "time": 0},
        {"process": process, "type": "ok", "f": "send", "value": {**value, "attempts": 1, "queueOffset": offset}},
    ]


def read(
    process: str, start: int, messages: Sequence[tuple[int, int, int]], skipped: Sequence[tuple[int, int]] = ()
) -> list[dict[str, Any]]:
    """A poll from `start` that read `messages` (offset, pid, seq) after being told `skipped` was deleted."""
    value: dict[str, Any] = {"queue": Q, "offset": start, "messages": [[*m, digest(m[1], m[2])] for m in messages]}
    if skipped:
        value["skipped"] = [list(s) for s in skipped]
    return [
        {"process": process, "type": "invoke", "f": "poll", "value": {"queue": Q, "offset": start}, "time": 2},
        {"process": process, "type": "ok", "f": "poll", "value": value, "time": 3},
    ]


LOG = [(offset, 7, offset) for offset in range(6)]  # producer 7 stored seq n at offset n


def sends() -> list[dict[str, Any]]:
    return [op for offset, pid, seq in LOG for op in acked("p0", pid, seq, offset)]


def finals_from(min_offset: int, replicas: Sequence[str] = REPLICAS) -> list[dict[str, Any]]:
    """Each replica's final read: offsets below `min_offset` deleted by retention (told), the rest read."""
    told = [(0, min_offset)] if min_offset else []
    return [op for r in replicas for op in read(f"final:{r}", 0, LOG[min_offset:], told)]


def test_what_retention_deleted_before_the_final_reads_and_the_consumer_is_not_lost() -> None:
    # The consumer read 0..1, was told 2..3 were deleted when it came back, read 4..5; finals start at 4.
    consumer = read("c0", 0, LOG[:2]) + read("c0", 2, [], [(2, 4)]) + read("c0", 4, LOG[4:])
    verdict = complete(sends() + consumer + finals_from(4))
    assert verdict["status"] == "VALID", verdict
    retention = verdict["stats"]["retention"]
    assert retention["ackedDeletedBeforeFinalRead"] == {f"final:{r}": 4 for r in REPLICAS}
    assert retention["ackedDeletedBeforeAnyConsumerRead"] == 2  # seq 2 and 3: no consumer ever read them
    assert retention["ackedDeletedBeforeConsumerRead"] == {"c0": 2}
    assert retention["offsetsToldDeleted"] == {f"{Q} c0": 2, **{f"{Q} final:{r}": 4 for r in REPLICAS}}
    assert retention["missingWithUnknownOffset"] == {}


def test_a_message_below_what_the_replica_said_it_deleted_is_still_lost() -> None:
    # bs0-2 says it deleted 0..1, yet offset 3 is missing from its read too.
    ops = sends() + read("c0", 0, LOG)
    ops += [op for r in REPLICAS[:2] for op in read(f"final:{r}", 0, LOG)]
    ops += read("final:bs0-2", 0, [LOG[2], *LOG[4:]], [(0, 2)])
    verdict = complete(ops)
    assert verdict["anomalies"]["lost"] == 1 and verdict["anomalies"]["readThenLost"] == 1, verdict
    assert verdict["examples"]["lost"][0] == {"message": [Q, 7, 3], "missingFrom": ["bs0-2"]}
    assert verdict["anomalies"]["unreportedGaps"] == 1  # its read jumped from 3 to 4 untold
    assert verdict["examples"]["unreportedGaps"] == [{"process": "final:bs0-2", "queue": Q, "from": 3, "to": 4}]


def test_a_consumer_that_skips_offsets_without_being_told_is_an_anomaly() -> None:
    consumer = read("c0", 0, LOG[:2]) + read("c0", 2, LOG[4:])  # 2..3 skipped with no OFFSET_TOO_SMALL
    only(complete(sends() + consumer + finals_from(0)), "unreportedGaps")


def test_a_missing_message_with_an_unknown_offset_is_incomplete_not_valid() -> None:
    ops = [op for offset, pid, seq in LOG for op in acked("p0", pid, seq, None if seq == 1 else offset)]
    consumer = read("c0", 0, [], [(0, 4)]) + read("c0", 4, LOG[4:])
    verdict = complete(ops + consumer + finals_from(4))
    incomplete(verdict, *["1 acknowledged messages are missing from the final read final:bs0-"] * 3)
    assert verdict["stats"]["retention"]["missingWithUnknownOffset"] == {f"final:{r}": 1 for r in REPLICAS}


def test_the_acknowledged_offset_accounts_for_a_message_no_one_read() -> None:
    consumer = read("c0", 0, [], [(0, 4)]) + read("c0", 4, LOG[4:])
    verdict = complete(sends() + consumer + finals_from(4))
    assert verdict["status"] == "VALID", verdict
    assert verdict["stats"]["retention"]["ackedDeletedBeforeAnyConsumerRead"] == 4


def test_without_retention_the_checks_are_unchanged() -> None:
    verdict = complete(sends() + read("c0", 0, LOG) + finals_from(0))
    assert verdict["status"] == "VALID", verdict
    assert verdict["stats"]["retention"] == {
        "offsetsToldDeleted": {},
        "ackedDeletedBeforeFinalRead": {},
        "ackedDeletedBeforeConsumerRead": {},
        "ackedDeletedBeforeAnyConsumerRead": 0,
        "missingWithUnknownOffset": {},
    }
    assert "unreportedGaps" in ANOMALIES
    assert check([], [])["anomalies"]["unreportedGaps"] == 0
