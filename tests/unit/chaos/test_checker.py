"""The history checker finds each planted anomaly, passes clean histories, and says INCOMPLETE
(never VALID) when the history or the event logs are too little to check."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from brokergroup.chaos.checker import ANOMALIES, EXIT_CODES, check, dedup_events
from brokergroup.cli import main

Q = "bs0/chaos/0"
REPLICAS = ("bs0-0", "bs0-1", "bs0-2")
CONTROLLERS = ("n0", "n1", "n2")


def digest(pid: int, seq: int) -> str:
    """A stand-in for the body digest of message (pid, seq): the checker only compares them."""
    return f"body-{pid}-{seq}"


def send(process: str, pid: int, seq: int, outcome: str = "open", queue: str = Q) -> list[dict[str, Any]]:
    value = {"queue": queue, "producerId": pid, "seq": seq, "payload": f"{process}-{seq}", "digest": digest(pid, seq)}
    ops = [{"process": process, "type": "invoke", "f": "send", "value": value, "time": 0}]
    if outcome != "open":
        ops.append({"process": process, "type": outcome, "f": "send", "value": value, "time": 1})
    return ops


def ok(process: str, pid: int, seq: int, queue: str = Q) -> list[dict[str, Any]]:
    return send(process, pid, seq, "ok", queue)


def poll(process: str, messages: Sequence[tuple[Any, ...]], queue: str = Q) -> list[dict[str, Any]]:
    """A poll that read `messages`: (offset, pid, seq), with the sent body's digest unless a 4th item gives one."""
    rows = [[*m, digest(m[1], m[2])] if len(m) == 3 else list(m) for m in messages]
    return [
        {"process": process, "type": "invoke", "f": "poll", "value": {"queue": queue, "offset": 0}, "time": 2},
        {"process": process, "type": "ok", "f": "poll", "value": {"queue": queue, "messages": rows}, "time": 3},
    ]


def failed_read(process: str, error: str, queue: str = Q) -> list[dict[str, Any]]:
    return [
        {"process": process, "type": "invoke", "f": "poll", "value": {"queue": queue, "offset": 0}, "time": 2},
        {"process": process, "type": "fail", "f": "poll", "value": {"queue": queue, "error": error}, "time": 3},
    ]


def topology(queues: dict[str, Sequence[str]] | None = None, controllers: Sequence[str] = CONTROLLERS) -> list[Any]:
    value = {"queues": {q: list(r) for q, r in (queues or {Q: REPLICAS}).items()}, "controllers": list(controllers)}
    return [{"process": "harness", "type": "info", "f": "topology", "value": value, "time": 0}]


def finals(messages: Sequence[tuple[Any, ...]], replicas: Sequence[str] = REPLICAS) -> list[dict[str, Any]]:
    return [op for r in replicas for op in poll(f"final:{r}", messages)]


def clean_history() -> list[dict[str, Any]]:
    ops = topology() + ok("p0", 7, 0) + ok("p0", 7, 1) + ok("p1", 9, 0) + send("p0", 7, 2, "info")
    log = [(0, 7, 0), (1, 9, 0), (2, 7, 1), (3, 7, 2)]
    return ops + poll("c0", log[:2]) + poll("c0", log[2:]) + finals(log)


def event(
    index: int, epoch: int, master: int | None, *, kind: str = "ELECT_MASTER", term: int = 1, eid: str | None = None
) -> dict[str, Any]:
    return {
        "eventId": eid or f"e-{index}-{kind}",
        "node": "n0",
        "source": "raft",
        "term": term,
        "index": index,
        "brokerName": "bs0",
        "type": kind,
        "masterBrokerId": master,
        "masterEpoch": epoch,
        "electionResult": None if kind != "ELECT_MASTER" else "new_master_elected" if master else "no_master_elected",
    }


def clean_events(nodes: Sequence[str] = CONTROLLERS) -> list[dict[str, Any]]:
    """The same raft events in the log of every node in `nodes`."""
    one = [
        event(1, 0, None, kind="REGISTER"),
        event(2, 1, 1),
        event(3, 1, 1, kind="ALTER_SYNC_STATE_SET"),
        event(4, 2, 2),
        event(5, 3, None),  # no master elected: the epoch still moves on
        event(6, 4, 3),
    ]
    return [{**e, "node": node} for node in nodes for e in one]


def complete(ops: list[dict[str, Any]], events: list[dict[str, Any]] | None = None, **kwargs: Any) -> dict[str, Any]:
    """Check `ops` (with their own final reads) under a topology of one queue on `REPLICAS`, with full event logs."""
    return check(topology() + ops, clean_events() if events is None else events, **kwargs)


def only(verdict: dict[str, Any], kind: str) -> None:
    """The verdict is invalid because of `kind`, and of nothing else."""
    found = {k: n for k, n in verdict["anomalies"].items() if n}
    assert list(found) == [kind], verdict
    assert not verdict["valid"]
    assert verdict["status"] == "INVALID"
    assert verdict["failing"] == [kind]
    assert verdict["examples"][kind]


def incomplete(verdict: dict[str, Any], *reasons: str) -> None:
    """The verdict is INCOMPLETE, with no anomaly, for exactly `reasons` (each a substring of one reason)."""
    assert verdict["status"] == "INCOMPLETE", verdict
    assert not verdict["valid"]
    assert verdict["failing"] == []
    assert len(verdict["incomplete"]) == len(reasons), verdict["incomplete"]
    for reason, said in zip(reasons, verdict["incomplete"], strict=True):
        assert reason in said, (reason, said)


def test_clean_history_and_log_pass() -> None:
    verdict = check(clean_history(), clean_events())
    assert verdict["valid"], verdict
    assert (verdict["status"], verdict["incomplete"]) == ("VALID", [])
    assert verdict["stats"]["eventLogNodes"] == list(CONTROLLERS)
    assert set(verdict["anomalies"]) == set(ANOMALIES)
    assert all(n == 0 for n in verdict["anomalies"].values())
    stats = verdict["stats"]
    assert (stats["sendsOk"], stats["sendsIndeterminate"], stats["indeterminateSendsRead"]) == (3, 1, 1)
    assert stats["finalReads"] == {Q: dict.fromkeys(REPLICAS, 4)}
    assert stats["elections"] == {"new_master_elected": 3, "no_master_elected": 1}
    assert stats["masterEpochs"] == {"bs0": 4}


def test_indeterminate_send_never_read_is_not_lost() -> None:
    ops = ok("p0", 1, 0) + send("p0", 1, 1, "info") + send("p0", 1, 2, "open") + finals([(0, 1, 0)])
    verdict = complete(ops)
    assert verdict["valid"], verdict
    assert verdict["stats"]["sendsIndeterminate"] == 2


def test_acknowledged_message_missing_from_a_final_read_is_lost() -> None:
    ops = ok("p0", 1, 0) + ok("p0", 1, 1)
    ops += finals([(0, 1, 0), (1, 1, 1)], REPLICAS[:2]) + finals([(0, 1, 0)], REPLICAS[2:])
    verdict = complete(ops)
    only(verdict, "lost")
    assert verdict["examples"]["lost"] == [{"message": [Q, 1, 1], "missingFrom": ["bs0-2"]}]


def test_acknowledged_message_read_by_a_consumer_but_truncated_is_lost_and_read_then_lost() -> None:
    ops = ok("p0", 1, 0) + ok("p0", 1, 1) + poll("c0", [(0, 1, 0), (1, 1, 1)]) + finals([(0, 1, 0)])
    verdict = complete(ops)
    assert verdict["failing"] == ["lost", "readThenLost"]
    assert verdict["examples"]["readThenLost"] == [{"message": [Q, 1, 1], "missingFrom": list(REPLICAS)}]


def test_unacknowledged_message_a_consumer_read_and_that_then_vanished_is_read_then_lost() -> None:
    ops = ok("p0", 1, 0) + send("p0", 1, 1, "info") + poll("c0", [(0, 1, 0), (1, 1, 1)])
    ops += finals([(0, 1, 0), (1, 1, 1)], REPLICAS[:2]) + finals([(0, 1, 0)], REPLICAS[2:])
    verdict = complete(ops)
    only(verdict, "readThenLost")
    assert verdict["examples"]["readThenLost"] == [{"message": [Q, 1, 1], "missingFrom": ["bs0-2"]}]


def test_unacknowledged_message_nobody_read_may_vanish() -> None:
    ops = ok("p0", 1, 0) + send("p0", 1, 1, "info") + poll("c0", [(0, 1, 0)])
    ops += finals([(0, 1, 0), (1, 1, 1)], REPLICAS[:2]) + finals([(0, 1, 0)], REPLICAS[2:])
    assert complete(ops)["status"] == "VALID"


def test_without_final_reads_lost_means_never_read_and_the_verdict_is_invalid_though_incomplete() -> None:
    ops = ok("p0", 1, 0) + ok("p0", 1, 1) + poll("c0", [(0, 1, 0)])
    verdict = complete(ops)
    only(verdict, "lost")
    assert verdict["anomalies"]["lost"] == 1
    assert len(verdict["incomplete"]) == 3  # an anomaly found on partial data is still a violation


def test_one_message_at_two_offsets_is_duplicated() -> None:
    ops = ok("p0", 1, 0) + ok("p0", 1, 1) + poll("c0", [(0, 1, 0), (1, 1, 1), (2, 1, 1)])
    verdict = complete(ops + finals([(0, 1, 0), (1, 1, 1)]))
    only(verdict, "duplicated")
    assert verdict["examples"]["duplicated"] == [{"message": [Q, 1, 1], "offsets": [1, 2]}]


def test_one_message_stored_twice_in_a_log_is_duplicated_in_log_even_when_duplicates_are_tolerated() -> None:
    ops = ok("p0", 1, 0) + finals([(0, 1, 0), (1, 1, 0)], REPLICAS[:2]) + finals([(0, 1, 0)], REPLICAS[2:])
    verdict = complete(ops, tolerate=("duplicated",))
    assert verdict["failing"] == ["duplicatedInLog"]
    assert verdict["anomalies"]["duplicated"] == 1
    assert verdict["examples"]["duplicatedInLog"] == [
        {"replica": "bs0-0", "message": [Q, 1, 0], "copies": 2},
        {"replica": "bs0-1", "message": [Q, 1, 0], "copies": 2},
    ]


def test_message_nobody_sent_is_unexpected() -> None:
    ops = ok("p0", 1, 0) + finals([(0, 1, 0), (1, 5, 0)])
    verdict = complete(ops)
    only(verdict, "unexpected")
    assert verdict["examples"]["unexpected"][0]["message"] == [Q, 5, 0]


def test_message_sent_to_another_queue_is_unexpected_here() -> None:
    ops = ok("p0", 1, 0, queue="bs1/chaos/0") + finals([(0, 1, 0)])
    verdict = complete(ops)
    assert verdict["anomalies"]["unexpected"] == 1
    assert verdict["anomalies"]["lost"] == 1  # and never read from bs1's queue
    assert verdict["failing"] == ["lost", "unexpected"]


def test_two_messages_at_one_offset_across_replicas_are_inconsistent() -> None:
    ops = ok("p0", 1, 0) + send("p1", 2, 0, "info")
    ops += poll("c0", [(0, 2, 0)]) + finals([(0, 1, 0)])
    verdict = complete(ops)
    assert verdict["failing"] == ["inconsistentOffsets", "readThenLost"]  # what c0 read is gone
    assert verdict["examples"]["inconsistentOffsets"] == [{"queue": Q, "offset": 0, "messages": [(1, 0), (2, 0)]}]


def test_acknowledgements_out_of_sequence_order_are_non_monotonic() -> None:
    ops = ok("p0", 1, 1) + ok("p0", 1, 0)
    ops += finals([(0, 1, 0), (1, 1, 1)])
    verdict = complete(ops)
    only(verdict, "nonMonotonicSends")
    assert verdict["examples"]["nonMonotonicSends"] == [{"process": "p0", "ackedSeq": 0, "after": 1}]


def test_producer_messages_stored_out_of_sequence_order_are_non_monotonic() -> None:
    ops = ok("p0", 1, 0) + ok("p0", 1, 1) + finals([(0, 1, 1), (1, 1, 0)])
    verdict = complete(ops)
    only(verdict, "nonMonotonicSends")
    assert verdict["examples"]["nonMonotonicSends"][0]["offset"] == 1


def test_consumer_reading_backwards_is_non_monotonic() -> None:
    ops = ok("p0", 1, 0) + ok("p0", 1, 1)
    ops += poll("c0", [(0, 1, 0), (1, 1, 1)]) + poll("c0", [(1, 1, 1)])
    ops += finals([(0, 1, 0), (1, 1, 1)])
    verdict = complete(ops)
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
    node0, node2 = clean_events(["n0"]), clean_events(["n2"])
    node1 = list(reversed(clean_events(["n1"])))  # the same events, another node's file, any order
    verdict = check(clean_history(), node0 + node1 + node2 + [{**node0[1], "source": "local", "eventId": "x"}])
    assert verdict["valid"], verdict
    assert verdict["stats"]["controllerEvents"] == len(node0)
    ordered = dedup_events(node1)
    assert [e["index"] for e in ordered] == [1, 2, 3, 4, 5, 6]


def test_term_orders_before_index() -> None:
    ordered = dedup_events([event(9, 2, 2, term=1), event(3, 3, 3, term=2)])
    assert [(e["term"], e["index"]) for e in ordered] == [(1, 9), (2, 3)]


def test_tolerated_anomalies_are_counted_but_do_not_fail() -> None:
    ops = ok("p0", 1, 0) + ok("p0", 1, 1) + finals([(0, 1, 0)])
    verdict = complete(ops, tolerate=("lost",))
    assert verdict["valid"], verdict
    assert verdict["anomalies"]["lost"] == 1
    assert verdict["tolerated"] == ["lost"]
    assert verdict["examples"]["lost"][0]["message"] == [Q, 1, 1]


def test_tolerating_does_not_hide_other_anomalies() -> None:
    ops = ok("p0", 1, 0) + finals([(0, 1, 0), (1, 1, 0)])
    verdict = complete(ops, tolerate=("lost",))
    assert verdict["failing"] == ["duplicated", "duplicatedInLog"]


def test_unknown_anomaly_to_tolerate_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown anomalies"):
        check([], tolerate=("losts",))


def test_examples_are_capped_but_counts_are_not() -> None:
    ops = [op for s in range(30) for op in ok("p0", 1, s)] + finals([])
    verdict = complete(ops, max_examples=5)
    assert verdict["anomalies"]["lost"] == 30
    assert len(verdict["examples"]["lost"]) == 5


def test_nemesis_faults_are_counted() -> None:
    nemesis = [
        {"process": "nemesis", "type": "info", "f": "kill-master", "value": {"phase": "start"}, "time": 0},
        {"process": "nemesis", "type": "info", "f": "kill-master", "value": {"phase": "stop"}, "time": 1},
    ]
    verdict = check(clean_history() + nemesis, clean_events())
    assert verdict["valid"], verdict
    assert verdict["stats"]["faults"] == {"kill-master": 1}


# ---- bodies ---------------------------------------------------------------------------------------


def test_two_messages_with_swapped_bodies_are_body_mismatches() -> None:
    ops = ok("p0", 1, 0) + ok("p0", 1, 1)
    ops += finals([(0, 1, 0, digest(1, 1)), (1, 1, 1, digest(1, 0))])  # ids in place, bodies swapped
    verdict = complete(ops)
    only(verdict, "bodyMismatch")
    assert verdict["anomalies"]["bodyMismatch"] == 2
    assert verdict["examples"]["bodyMismatch"][0] == {
        "message": [Q, 1, 0],
        "sent": digest(1, 0),
        "read": [digest(1, 1)],
    }


def test_one_consumer_reading_another_body_is_a_body_mismatch() -> None:
    ops = ok("p0", 1, 0) + poll("c0", [(0, 1, 0, "garbage")]) + finals([(0, 1, 0)])
    verdict = complete(ops)
    only(verdict, "bodyMismatch")
    assert verdict["examples"]["bodyMismatch"] == [
        {"message": [Q, 1, 0], "sent": digest(1, 0), "read": [digest(1, 0), "garbage"]}
    ]


def test_reads_without_body_digests_are_incomplete() -> None:
    ops = ok("p0", 1, 0) + finals([(0, 1, 0)], REPLICAS[:2])
    ops += [
        {**op, "value": {**op["value"], "messages": [[0, 1, 0]]}} if op["type"] == "ok" else op
        for op in finals([(0, 1, 0)], REPLICAS[2:])
    ]
    incomplete(complete(ops), "1 messages were read without a body digest")


def test_sends_without_body_digests_are_incomplete() -> None:
    ops = [{**op, "value": {k: v for k, v in op["value"].items() if k != "digest"}} for op in ok("p0", 1, 0)]
    incomplete(complete(ops + finals([(0, 1, 0)])), "1 sends carry no body digest")


# ---- too little to say VALID ----------------------------------------------------------------------


def test_empty_history_is_incomplete() -> None:
    verdict = check([], clean_events())
    incomplete(verdict, "the history is empty", "no topology record")
    assert EXIT_CODES[verdict["status"]] == 3
    assert EXIT_CODES["INVALID"] == 1 and EXIT_CODES["VALID"] == 0


def test_history_without_acknowledged_sends_is_incomplete() -> None:
    ops = send("p0", 1, 0, "info") + finals([])
    incomplete(complete(ops), "no send was acknowledged")


def test_history_without_topology_is_incomplete() -> None:
    ops = ok("p0", 1, 0) + finals([(0, 1, 0)])
    incomplete(check(ops, clean_events()), "no topology record")


def test_queue_without_final_reads_is_incomplete_even_when_consumers_read_everything() -> None:
    ops = ok("p0", 1, 0) + ok("p0", 1, 1) + poll("c0", [(0, 1, 0), (1, 1, 1)])
    verdict = complete(ops)
    incomplete(verdict, *(f"no final read of {Q} from {r}" for r in REPLICAS))
    assert verdict["anomalies"]["lost"] == 0


def test_second_queue_without_final_reads_is_incomplete() -> None:
    q1 = "bs1/chaos/0"
    ops = topology({Q: REPLICAS, q1: ["bs1-0"]}) + ok("p0", 1, 0) + ok("p1", 2, 0, queue=q1) + finals([(0, 1, 0)])
    ops += poll("c1", [(0, 2, 0)], q1)  # read, but not by a final read of every replica
    incomplete(check(ops, clean_events()), f"no final read of {q1} from bs1-0")


def test_final_reads_from_one_of_three_replicas_are_incomplete() -> None:
    ops = ok("p0", 1, 0) + finals([(0, 1, 0)], REPLICAS[:1])
    incomplete(complete(ops), f"no final read of {Q} from bs0-1", f"no final read of {Q} from bs0-2")


def test_failed_final_read_is_incomplete_and_says_why() -> None:
    ops = ok("p0", 1, 0) + finals([(0, 1, 0)], REPLICAS[:2]) + failed_read("final:bs0-2", "HTTP 503: fenced")
    incomplete(complete(ops), f"the final read of {Q} from bs0-2 failed: HTTP 503: fenced")


def test_final_read_without_an_answer_is_incomplete() -> None:
    ops = ok("p0", 1, 0) + finals([(0, 1, 0)], REPLICAS[:2]) + failed_read("final:bs0-2", "x")[:1]
    incomplete(complete(ops), f"the final read of {Q} from bs0-2 failed: no answer recorded")


def test_final_read_that_failed_then_succeeded_is_complete() -> None:
    ops = ok("p0", 1, 0) + failed_read("final:bs0-2", "timeout") + finals([(0, 1, 0)])
    assert complete(ops)["status"] == "VALID"


def test_no_controller_event_logs_is_incomplete() -> None:
    verdict = check(clean_history(), [])
    incomplete(verdict, *(f"no controller event-log records from {n}" for n in CONTROLLERS), "ran on nothing")
    assert verdict["anomalies"]["splitBrain"] == 0


def test_event_log_of_one_controller_missing_is_incomplete() -> None:
    incomplete(check(clean_history(), clean_events(CONTROLLERS[:2])), "no controller event-log records from n2")


def test_local_records_alone_do_not_count_as_an_event_log() -> None:
    local = [{**e, "source": "local"} for e in clean_events()]
    incomplete(check(clean_history(), clean_events(CONTROLLERS[:2]) + local), "from n2")


def test_sends_to_a_queue_the_topology_does_not_name_are_incomplete() -> None:
    ops = clean_history() + ok("p9", 5, 0, queue="bs9/chaos/0") + poll("final:bs9-0", [(0, 5, 0)], "bs9/chaos/0")
    incomplete(check(ops, clean_events()), "sends to bs9/chaos/0, a queue the topology does not name")


# ---- `brokergroup chaos check DIR` ----------------------------------------------------------------


def run_dir(base: Path, ops: list[dict[str, Any]], events: list[dict[str, Any]]) -> Path:
    """A run's output folder as `chaos run` leaves it: history.jsonl and cluster/controllers/n*/events/."""
    base.mkdir()
    (base / "history.jsonl").write_text("".join(json.dumps(op) + "\n" for op in ops))
    for node in sorted({e["node"] for e in events}):
        folder = base / "cluster" / "controllers" / node / "events"
        folder.mkdir(parents=True)
        (folder / "events-0.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events if e["node"] == node))
    return base


@pytest.mark.parametrize(
    ("case", "code", "said"),
    [
        ("complete", 0, "VALID (sync)"),
        ("one final read failed", 3, "INCOMPLETE: the final read of bs0/chaos/0 from bs0-2 failed: refused"),
        ("no event logs", 3, "INCOMPLETE: no controller event-log records from n0"),
        ("body swapped", 1, "INVALID: bodyMismatch"),
    ],
)
def test_check_command_exits_by_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, code: int, said: str
) -> None:
    ops, events = clean_history(), clean_events()
    if case == "one final read failed":
        ops = [op for op in ops if op["process"] != "final:bs0-2"] + failed_read("final:bs0-2", "refused")
    elif case == "no event logs":
        events = []
    elif case == "body swapped":
        ops += poll("c1", [(0, 7, 0, digest(9, 0))])
    exit_code = main(["chaos", "check", str(run_dir(tmp_path / "run", ops, events))])
    out = capsys.readouterr().out
    assert (exit_code, out.splitlines()[-1][: len(said)]) == (code, said), out
    assert json.loads(out[: out.rindex("}") + 1])["status"] == said.split(" ")[0].rstrip(":")
