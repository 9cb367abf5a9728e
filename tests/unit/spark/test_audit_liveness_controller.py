"""Spark: flapping brokers, controller leader changes and leaderless intervals, term conflicts."""

from __future__ import annotations

import datetime as dt

from audit_factories import T0, Events, Scenario, expected, rows

from brokergroup.spark.transform import controller, liveness


def flapping_history() -> Scenario:
    s = Scenario().running_set()
    for second, kind in zip([100, 110, 200, 220, 300, 400, 700], "LHALALA", strict=True):
        s.at(second * 1000)
        s.active("s", 2) if kind == "A" else s.lost("s", 2, "HEARTBEAT_LOST" if kind == "H" else "CHANNEL_CLOSED")
    for second, kind in zip([100, 200, 300, 400, 500, 701], "LALALA", strict=True):
        s.at(second * 1000)
        s.active("s", 3) if kind == "A" else s.lost("s", 3)
    return s


def test_transitions_per_broker_and_who_flaps(events: Events) -> None:
    out = liveness.flapping(events(flapping_history().records), window_ms=600_000, threshold=6)
    assert rows(out) == expected(
        [
            broker(2, transitions=6, most=6, first=100, last=700, since=700),
            broker(3, transitions=6, most=5, first=100, last=701, since=None),
        ]
    )
    found = liveness.flapping_findings(out, window_ms=600_000)
    assert rows(found, "kind", "brokerName", "brokerId", "ts", "value") == [
        {"kind": "flapping_broker", "brokerName": "s", "brokerId": 2, "ts": T0 + 700_000, "value": 6}
    ]


def test_leader_changes_with_leaderless_intervals_and_an_overlap(events: Events) -> None:
    s = Scenario()
    s.at(0).lead("n0", 1)
    s.running_set()
    s.at(1_500).lost("s", 3)  # the last event of term 1
    s.at(4_000).lead("n1", 3)  # term 2 had no leader
    s.at(4_200).active("s", 3)
    s.at(9_000).lead("n2", 4)
    s.at(9_100).local(None, "ROLE_CHANGE_NOTIFIED", node="n1", term=3)  # n1 has not noticed n2 yet
    out = controller.leaders(events(s.records))
    day = dt.date(2026, 1, 1)
    assert rows(out) == expected(
        [
            leader(1, "n0", 0, day, None, None, None),
            leader(3, "n1", 4_000, day, 1, "n0", 1_500),
            leader(4, "n2", 9_000, day, 3, "n1", 9_100),  # negative: an overlap
        ]
    )


def test_two_leaders_in_one_term_is_a_violation(events: Events) -> None:
    s = Scenario().running_set()
    s.at(5_000).lead("n1", 2)
    s.at(5_100).local(None, "CONTROLLER_LEADER_CHANGED", node="n2", reason="n2 leads term 2")
    found = controller.term_conflicts(events(s.records))
    assert rows(found, "kind", "severity", "term", "ts", "value") == [
        {"kind": "controller_term_conflict", "severity": "violation", "term": 2, "ts": T0 + 5_000, "value": 2}
    ]


def broker(
    broker_id: int, *, transitions: int, most: int, first: int, last: int, since: int | None
) -> dict[str, object]:
    return {
        "brokerName": "s",
        "brokerId": broker_id,
        "transitions": transitions,
        "maxInWindow": most,
        "firstMs": T0 + first * 1000,
        "lastMs": T0 + last * 1000,
        "flappingSinceMs": None if since is None else T0 + since * 1000,
        "flapping": since is not None,
    }


def leader(
    term: int, node: str, ms: int, day: dt.date, previous: int | None, previous_node: str | None, last: int | None
) -> dict[str, object]:
    return {
        "term": term,
        "node": node,
        "ts": T0 + ms,
        "day": day,
        "previousTerm": previous,
        "previousNode": previous_node,
        "lastEventBeforeMs": None if last is None else T0 + last,
        "leaderlessMs": None if last is None else ms - last,
    }
