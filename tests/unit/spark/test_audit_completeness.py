"""Spark: raft index gaps inside a term, per-node gaps and conflicting copies."""

from __future__ import annotations

from audit_factories import T0, Events, Scenario, only, rows

from brokergroup.spark.transform import completeness


def history() -> Scenario:
    s = Scenario().at(0)
    s.register("s")  # 4, 5, 6 on every node
    s.raft("s", "ALTER_SYNC_STATE_SET", nodes=("n0", "n1"))  # 7 and 8: n2 misses them
    s.raft("s", "ALTER_SYNC_STATE_SET", nodes=("n0", "n1"))
    s.at(500).raft("s", "ALTER_SYNC_STATE_SET")  # 9
    s.skip(3)  # 10, 11, 12 reach nobody
    s.at(700).raft("s", "ALTER_SYNC_STATE_SET", nodes=("n0", "n2"))  # 13: n1 died before it, not a gap
    s.at(900).lead("n2", 2)  # 14, 15: the new leader's no-op and barrier, not a gap
    s.raft("s", "ALTER_SYNC_STATE_SET", nodes=("n0", "n2"))  # 16
    return s


def test_index_gaps_inside_a_term_only(events: Events) -> None:
    gaps = completeness.index_gaps(completeness.positions(events(history().records)))
    assert rows(gaps) == [{"term": 1, "firstMissing": 10, "missing": 3, "beforeTs": T0 + 500}]


def test_node_gaps_inside_the_nodes_own_range(events: Events) -> None:
    gaps = completeness.node_gaps(completeness.positions(events(history().records)))
    assert rows(gaps) == [{"node": "n2", "term": 1, "firstMissing": 7, "missing": 2, "ts": T0}]


def test_copies_that_differ_are_a_conflicting_record(events: Events) -> None:
    s = Scenario().running_set()
    copy = only(s.records, type="ELECT_MASTER", node="n2")[0]
    copy["syncStateSet"] = [1, 2]
    found = completeness.conflict_findings(events(s.records))
    assert rows(found, "kind", "severity", "brokerName", "term", "index", "value") == [
        {
            "kind": "conflicting_record",
            "severity": "violation",
            "brokerName": "s",
            "term": 1,
            "index": copy["index"],
            "value": 3,
        }
    ]
