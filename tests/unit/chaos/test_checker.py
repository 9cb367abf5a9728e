"""The history checker finds each planted anomaly, and passes clean histories."""

from __future__ import annotations

from typing import Any

import pytest

from brokergroup.chaos.checker import ANOMALIES, check, dedup_events

Q = "bs0/chaos/0"


def send(process: str, pid: int, seq: int, outcome: str = "ok", queue: str = Q) -> list[dict[str, Any]]:
    value = {"queue": queue, "producerId": pid, "seq": seq, "payload": f"{process}-{seq}"}
    ops = [{"process": process, "type": "invoke", "f": "send", "value": value, "time": 0}]
    if outcome != "open":
        ops.append({"process": process, "type": outcome, "f": "send", "value": value, "time": 1})
    return ops


def poll(process: str, messages: list[tuple[int, int, int]], queue: str = Q) -> list[dict[str, Any]]:
    return [
        {"process": process, "type": "invoke", "f": "poll", "value": {"queue": queue, "offset": 0}, "time": 2},
        {"process": process, "type": "ok", "f": "poll", "value": {"queue": queue, "messages": messages}, "time": 3},
    ]


def clean_history() -> list[dict[str, Any]]:
    ops = send("p0", 7, 0) + send("p0", 7, 1) + send("p1", 9, 0) + send("p0", 7, 2, "info")
    log = [(0, 7, 0), (1, 9, 0), (2, 7, 1), (3, 7, 2)]
    ops += poll("c0", log[:2]) + poll("c0", log[2:])
    for replica in ("bs0-0", "bs0-1", "bs0-2"):
        ops += poll(f"final:{replica}", log)
    return ops


def event(
    index: int, epoch: int, master: int | None, *, kind: str = "ELECT_MASTER", term: int = 1, eid: str | None = None
) -> dict[str, Any]:
    return {
        "eventId": eid or f"e-{index}-{kind}",
        "source": "raft",
        "term": term,
        "index": index,
        "brokerName": "bs0",
        "type": kind,
        "masterBrokerId": master,
        "masterEpoch": epoch,
        "electionResult": None if kind != "ELECT_MASTER" else "new_master_elected" if master else "no_master_elected",
    }


def clean_events() -> list[dict[str, Any]]:
    return [
        event(1, 0, None, kind="REGISTER"),
        event(2, 1, 1),
        event(3, 1, 1, kind="ALTER_SYNC_STATE_SET"),
        event(4, 2, 2),
        event(5, 3, None),  # no master elected: the epoch still moves on
        event(6, 4, 3),
    ]


def only(verdict: dict[str, Any], kind: str) -> None:
    """The verdict is invalid because of `kind`, and of nothing else."""
    found = {k: n for k, n in verdict["anomalies"].items() if n}
    assert list(found) == [kind], verdict
    assert not verdict["valid"]
    assert verdict["failing"] == [kind]
    assert verdict["examples"][kind]


def test_clean_history_and_log_pass() -> None:
    verdict = check(clean_history(), clean_events())
    assert verdict["valid"], verdict
    assert set(verdict["anomalies"]) == set(ANOMALIES)
    assert all(n == 0 for n in verdict["anomalies"].values())
    stats = verdict["stats"]
    assert (stats["sendsOk"], stats["sendsIndeterminate"], stats["indeterminateSendsRead"]) == (3, 1, 1)
    assert stats["finalReads"] == {Q: {"bs0-0": 4, "bs0-1": 4, "bs0-2": 4}}
    assert stats["elections"] == {"new_master_elected": 3, "no_master_elected": 1}
    assert stats["masterEpochs"] == {"bs0": 4}


def test_indeterminate_send_never_read_is_not_lost() -> None:
    ops = send("p0", 1, 0) + send("p0", 1, 1, "info") + send("p0", 1, 2, "open") + poll("final:r0", [(0, 1, 0)])
    verdict = check(ops)
    assert verdict["valid"], verdict
    assert verdict["stats"]["sendsIndeterminate"] == 2


def test_acknowledged_message_missing_from_a_final_read_is_lost() -> None:
    ops = send("p0", 1, 0) + send("p0", 1, 1)
    ops += poll("final:r0", [(0, 1, 0), (1, 1, 1)]) + poll("final:r1", [(0, 1, 0)])
    verdict = check(ops)
    only(verdict, "lost")
    assert verdict["examples"]["lost"] == [{"message": [Q, 1, 1], "missingFrom": ["r1"]}]


def test_acknowledged_message_read_by_a_consumer_but_truncated_is_lost() -> None:
    ops = send("p0", 1, 0) + send("p0", 1, 1) + poll("c0", [(0, 1, 0), (1, 1, 1)]) + poll("final:r0", [(0, 1, 0)])
    only(check(ops), "lost")


def test_without_final_reads_lost_means_never_read() -> None:
    ops = send("p0", 1, 0) + send("p0", 1, 1) + poll("c0", [(0, 1, 0)])
    verdict = check(ops)
    only(verdict, "lost")
    assert verdict["anomalies"]["lost"] == 1


def test_one_message_at_two_offsets_is_duplicated() -> None:
    ops = send("p0", 1, 0) + send("p0", 1, 1) + poll("c0", [(0, 1, 0), (1, 1, 1), (2, 1, 1)])
    verdict = check(ops)
    only(verdict, "duplicated")
    assert verdict["examples"]["duplicated"] == [{"message": [Q, 1, 1], "offsets": [1, 2]}]


def test_one_message_stored_twice_in_a_log_is_duplicated_in_log_even_when_duplicates_are_tolerated() -> None:
    ops = send("p0", 1, 0) + poll("final:r0", [(0, 1, 0), (1, 1, 0)]) + poll("final:r1", [(0, 1, 0), (1, 1, 0)])
    verdict = check(ops, tolerate=("duplicated",))
    assert verdict["failing"] == ["duplicatedInLog"]
    assert verdict["anomalies"]["duplicated"] == 1
    assert verdict["examples"]["duplicatedInLog"] == [
        {"replica": "r0", "message": [Q, 1, 0], "copies": 2},
        {"replica": "r1", "message": [Q, 1, 0], "copies": 2},
    ]


def test_message_nobody_sent_is_unexpected() -> None:
    ops = send("p0", 1, 0) + poll("final:r0", [(0, 1, 0), (1, 5, 0)])
    verdict = check(ops)
    only(verdict, "unexpected")
    assert verdict["examples"]["unexpected"][0]["message"] == [Q, 5, 0]


def test_message_sent_to_another_queue_is_unexpected_here() -> None:
    ops = send("p0", 1, 0, queue="bs1/chaos/0") + poll("final:r0", [(0, 1, 0)])
    verdict = check(ops)
    assert verdict["anomalies"]["unexpected"] == 1
    assert verdict["anomalies"]["lost"] == 1  # and never read from bs1's queue
    assert verdict["failing"] == ["lost", "unexpected"]


def test_two_messages_at_one_offset_across_replicas_are_inconsistent() -> None:
    ops = send("p0", 1, 0) + send("p1", 2, 0, "info")
    ops += poll("c0", [(0, 2, 0)]) + poll("final:r0", [(0, 1, 0)])
    verdict = check(ops)
    only(verdict, "inconsistentOffsets")
    assert verdict["examples"]["inconsistentOffsets"] == [{"queue": Q, "offset": 0, "messages": [(1, 0), (2, 0)]}]


def test_acknowledgements_out_of_sequence_order_are_non_monotonic() -> None:
    ops = send("p0", 1, 1) + send("p0", 1, 0)
    ops += poll("final:r0", [(0, 1, 0), (1, 1, 1)])
    verdict = check(ops)
    only(verdict, "nonMonotonicSends")
    assert verdict["examples"]["nonMonotonicSends"] == [{"process": "p0", "ackedSeq": 0, "after": 1}]


def test_producer_messages_stored_out_of_sequence_order_are_non_monotonic() -> None:
    ops = send("p0", 1, 0) + send("p0", 1, 1) + poll("final:r0", [(0, 1, 1), (1, 1, 0)])
    verdict = check(ops)
    only(verdict, "nonMonotonicSends")
    assert verdict["examples"]["nonMonotonicSends"][0]["offset"] == 1


def test_consumer_reading_backwards_is_non_monotonic() -> None:
    ops = send("p0", 1, 0) + send("p0", 1, 1)
    ops += poll("c0", [(0, 1, 0), (1, 1, 1)]) + poll("c0", [(1, 1, 1)])
    ops += poll("final:r0", [(0, 1, 0), (1, 1, 1)])
    verdict = check(ops)
    only(verdict, "nonMonotonicPolls")
    assert verdict["examples"]["nonMonotonicPolls"] == [{"process": "c0", "queue": Q, "offset": 1, "after": 1}]


def test_two_masters_in_one_epoch_is_split_brain() -> None:
    events = [*clean_events(), event(7, 4, 1, kind="ALTER_SYNC_STATE_SET")]
    verdict = check(clean_history(), events)
    only(verdict, "splitBrain")
    assert verdict["examples"]["splitBrain"] == [{"brokerName": "bs0", "masterEpoch": 4, "masters": [1, 3]}]


def test_election_that_does_not_raise_the_epoch_is_a_regression() -> None:
    events = [*clean_events(), event(7, 4, 3)]
    verdict = check(clean_history(), events)
    only(verdict, "epochRegressions")


def test_epoch_going_down_is_a_regression() -> None:
    events = [*clean_events(), event(7, 2, 2, kind="ALTER_SYNC_STATE_SET")]
    verdict = check(clean_history(), events)
    assert verdict["anomalies"]["epochRegressions"] == 1
    assert verdict["anomalies"]["splitBrain"] == 0  # epoch 2 had master 2 already
    assert not verdict["valid"]


def test_events_of_every_node_count_once_and_in_raft_order() -> None:
    node0 = clean_events()
    node1 = list(reversed(clean_events()))  # the same events, another node's file, any order
    verdict = check(clean_history(), node0 + node1 + [{**node0[1], "source": "local", "eventId": "x"}])
    assert verdict["valid"], verdict
    assert verdict["stats"]["controllerEvents"] == len(node0)
    ordered = dedup_events(node1)
    assert [e["index"] for e in ordered] == [1, 2, 3, 4, 5, 6]


def test_term_orders_before_index() -> None:
    ordered = dedup_events([event(9, 2, 2, term=1), event(3, 3, 3, term=2)])
    assert [(e["term"], e["index"]) for e in ordered] == [(1, 9), (2, 3)]


def test_tolerated_anomalies_are_counted_but_do_not_fail() -> None:
    ops = send("p0", 1, 0) + send("p0", 1, 1) + poll("final:r0", [(0, 1, 0)])
    verdict = check(ops, tolerate=("lost",))
    assert verdict["valid"]
    assert verdict["anomalies"]["lost"] == 1
    assert verdict["tolerated"] == ["lost"]
    assert verdict["examples"]["lost"][0]["message"] == [Q, 1, 1]


def test_tolerating_does_not_hide_other_anomalies() -> None:
    ops = send("p0", 1, 0) + poll("final:r0", [(0, 1, 0), (1, 1, 0)])
    verdict = check(ops, tolerate=("lost",))
    assert verdict["failing"] == ["duplicated", "duplicatedInLog"]


def test_unknown_anomaly_to_tolerate_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown anomalies"):
        check([], tolerate=("losts",))


def test_examples_are_capped_but_counts_are_not() -> None:
    ops = [op for s in range(30) for op in send("p0", 1, s)] + poll("final:r0", [])
    verdict = check(ops, max_examples=5)
    assert verdict["anomalies"]["lost"] == 30
    assert len(verdict["examples"]["lost"]) == 5


def test_nemesis_faults_are_counted() -> None:
    nemesis = [
        {"process": "nemesis", "type": "info", "f": "kill-master", "value": {"phase": "start"}, "time": 0},
        {"process": "nemesis", "type": "info", "f": "kill-master", "value": {"phase": "stop"}, "time": 1},
    ]
    verdict = check(clean_history() + nemesis)
    assert verdict["valid"]
    assert verdict["stats"]["faults"] == {"kill-master": 1}
