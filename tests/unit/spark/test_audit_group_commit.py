"""Logs from before and after group commit, in one audit: old lines (no `position`, one batch per
Raft entry) and new lines (several broker sets in one entry, ordered by `position`). The plain-Python
invariants and the Spark transforms order both exactly, and the index-gap check stays exact."""

from __future__ import annotations

from typing import Any

from audit_factories import Events, Scenario, expected, only, rows

from brokergroup.spark import invariants, transform
from brokergroup.spark.params import AuditParams

Record = dict[str, Any]


def upgraded(*, gap: int = 0) -> tuple[Scenario, Record, Record]:
    """Sets s and t written before group commit, then one entry (after `gap` lost indices) carrying
    s's election and sync-state change and t's sync-state change. The eventIds of s's two events
    are swapped, so ordering by eventId within the index would put the change before the election."""
    s = Scenario().running_set("s")
    s.at(500).register("t")
    s.elect("t", 1)
    s.skip(gap)
    with s.at(2_000).entry():
        elect = s.elect("s", 2)
        alter = s.alter("s", [2, 3])
        s.alter("t", [1, 2])
    first, second = elect["eventId"], alter["eventId"]
    for record in s.records:
        if record["eventId"] in (first, second):
            record["eventId"] = second if record["eventId"] == first else first
    elect["eventId"], alter["eventId"] = second, first
    assert alter["eventId"] < elect["eventId"]
    return s, elect, alter


def findings(records: list[Record]) -> list[tuple[object, ...]]:
    return [
        (f["kind"], f["brokerName"], f["index"], f["value"]) for f in invariants.audit_findings(records, AuditParams())
    ]


def spark_findings(events: Events, records: list[Record]) -> list[tuple[object, ...]]:
    found = transform.audit(events(records), AuditParams())["findings"]
    return sorted((r["kind"], r["brokerName"], r["index"], r["value"]) for r in found.collect())


def test_the_entrys_records_share_an_index_and_run_in_position_order() -> None:
    s, elect, alter = upgraded()
    entry = [r for r in s.records if r["node"] == "n0" and r.get("position") is not None]
    assert [(r["brokerName"], r["type"], r["position"]) for r in entry] == [
        ("s", "ELECT_MASTER", 0),
        ("s", "ALTER_SYNC_STATE_SET", 1),
        ("t", "ALTER_SYNC_STATE_SET", 2),
    ]
    assert len({r["index"] for r in entry}) == 1
    assert all("position" not in r for r in s.records if r["index"] is not None and r["index"] < elect["index"])
    events, _ = invariants.dedupe(s.records)
    ordered = invariants.set_raft(events)["s"]
    assert [e["eventId"] for e in ordered[-2:]] == [elect["eventId"], alter["eventId"]]


def test_old_and_new_lines_together_give_no_finding_in_python_and_spark(events: Events) -> None:
    s, elect, _ = upgraded()
    assert findings(s.records) == []
    tables = transform.audit(events(s.records), AuditParams())
    assert tables["findings"].count() == 0
    first = only(s.records, brokerName="s", type="ELECT_MASTER", node="n0")[0]
    got = rows(tables["elections"].where("brokerName = 's'"), "index", "masterEpoch", "previousMasterBrokerId")
    assert got == expected(
        [
            {"index": first["index"], "masterEpoch": 1, "previousMasterBrokerId": None},
            {"index": elect["index"], "masterEpoch": 2, "previousMasterBrokerId": 1},
        ]
    )


def test_without_positions_the_swapped_ids_would_read_as_epoch_findings() -> None:
    """The check above can fail: drop the positions and eventId decides the order within the index."""
    s, elect, _ = upgraded()
    old = [{k: v for k, v in r.items() if k != "position"} for r in s.records]
    at = elect["index"]
    assert sorted(findings(old)) == [("epoch_gap", "s", at, 2), ("epoch_regression", "s", at, 2)]


def test_an_index_gap_between_old_and_new_lines_is_exact(events: Events) -> None:
    s, elect, _ = upgraded(gap=2)
    expected = [("index_gap", None, elect["index"] - 2, 2)]
    assert findings(s.records) == expected
    assert spark_findings(events, s.records) == expected


def test_a_group_entry_counts_once_for_the_node_gap_check() -> None:
    s, elect, _ = upgraded()
    s.at(3_000).alter("t", [1, 2, 3])  # an old-style line after the entry: n1 misses the entry only
    lacking = [r for r in s.records if not (r["node"] == "n1" and r["index"] == elect["index"])]
    assert findings(lacking) == [("node_gap", None, elect["index"], 1)]
    assert only(s.records, index=elect["index"], node="n1")
