"""Plain-Python invariants: deduplication, bad lines, raft index gaps, node gaps, conflicts, controller terms."""

from __future__ import annotations

from audit_factories import T0, Scenario, only

from brokergroup.spark import invariants
from brokergroup.spark.params import AuditParams


def findings(records: list[dict[str, object]]) -> list[tuple[object, ...]]:
    """(kind, node, term, index, ts, value) of every finding."""
    found = invariants.audit_findings(records, AuditParams())
    return [(f["kind"], f["node"], f["term"], f["index"], f["ts"], f["value"]) for f in found]


def test_one_event_per_event_id_from_the_smallest_node() -> None:
    s = Scenario().running_set()
    s.at(2_000).lost("s", 2)
    events, stats = invariants.dedupe(s.records)
    raft = [e for e in events if e["source"] == "raft"]
    assert (stats.lines, stats.events, stats.duplicates, stats.invalid) == (5 * 3 + 1, 6, 10, 0)
    assert {(e["node"], e["copies"], tuple(e["nodes"])) for e in raft} == {("n0", 3, ("n0", "n1", "n2"))}
    assert [(e["type"], e["copies"], e["nodes"]) for e in events if e["source"] == "local"] == [
        ("CHANNEL_CLOSED", 1, ["n0"])
    ]


def test_lines_that_break_the_format_are_counted_and_dropped() -> None:
    s = Scenario().running_set()
    good = s.records[0]
    bad = [
        good | {"eventId": None},
        good | {"schemaVersion": 2},
        good | {"index": None},  # a raft event without its index
        good | {"source": "local"},  # a local event with an index, and a raft type
        good | {"type": "BROKER_EXPLODED"},
        good | {"electionResult": "maybe"},
        good | {"ts": "yesterday"},
        good | {"unclean": None},
    ]
    _, stats = invariants.dedupe(s.records + bad)
    assert stats.invalid == len(bad)
    assert stats.events == 5


def test_copies_that_differ_are_a_conflicting_record() -> None:
    s = Scenario().running_set()
    elected = only(s.records, type="ELECT_MASTER", node="n2")[0]
    elected["masterEpoch"] = 7
    assert findings(s.records) == [("conflicting_record", None, 1, elected["index"], T0, 3)]


def test_index_gap_inside_a_term_but_not_across_a_leader_change() -> None:
    s = Scenario().running_set()  # indices 4..8 in term 1
    s.skip(2)
    after_gap = s.at(3_000).alter("s", [1, 2])
    s.at(4_000).lead("n1", 2)  # the new leader's no-op and barrier: two indices without events
    s.alter("s", [1, 2, 3])
    assert after_gap["index"] == 11
    assert findings(s.records) == [("index_gap", None, 1, 9, T0 + 1_000, 2)]


def test_node_gap_only_strictly_inside_the_nodes_own_range() -> None:
    s = Scenario().at(0)
    s.register("s")  # 4, 5, 6 on every node
    s.raft("s", "ALTER_SYNC_STATE_SET", nodes=("n0", "n1"))  # 7: n2 misses it
    s.raft("s", "ALTER_SYNC_STATE_SET", nodes=("n0", "n1"))  # 8: and this
    s.at(500).raft("s", "ALTER_SYNC_STATE_SET", nodes=("n0", "n1", "n2"))  # 9
    s.raft("s", "ALTER_SYNC_STATE_SET", nodes=("n0", "n2"))  # 10: n1 died before it; not a gap
    assert findings(s.records) == [("node_gap", "n2", 1, 7, T0, 2)]


def test_two_nodes_leading_one_term_is_a_controller_term_conflict() -> None:
    s = Scenario().running_set()
    s.at(5_000).lead("n1", 2)
    s.at(5_100).local(None, "CONTROLLER_LEADER_CHANGED", node="n2", reason="n2 leads term 2")
    assert findings(s.records) == [("controller_term_conflict", None, 2, None, T0 + 5_000, 2)]
