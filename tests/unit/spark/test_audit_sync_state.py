"""Spark: sync-state-set shrinks and expands, risk windows and long-window findings."""

from __future__ import annotations

from audit_factories import T0, Events, Scenario, expected, rows

from brokergroup.spark.transform import prepare, sync_state


def history() -> Scenario:
    s = Scenario().running_set()  # broker 1 alone 0 s .. 1 s
    s.at(100_000).lost("s", 1)
    s.elect("s", 2, reason="channel_closed")  # 100 s: [2]
    s.at(115_000).alter("s", [2, 3])
    s.at(300_000).alter("s", [1, 2, 3])
    s.at(400_000).alter("s", [2])  # open until the last event, at 1000 s
    s.at(1_000_000).lost("s", 3)
    return s


def test_every_replica_that_left_or_joined(events: Events) -> None:
    out = sync_state.changes(prepare.raft_timeline(events(history().records)))
    assert rows(out, "ts", "type", "change", "replica", "sizeBefore", "sizeAfter") == expected(
        [
            change(0, "ELECT_MASTER", "expand", 1, 0, 1),
            change(1_000, "ALTER_SYNC_STATE_SET", "expand", 2, 1, 3),
            change(1_000, "ALTER_SYNC_STATE_SET", "expand", 3, 1, 3),
            change(100_000, "ELECT_MASTER", "shrink", 1, 3, 1),
            change(100_000, "ELECT_MASTER", "shrink", 3, 3, 1),
            change(115_000, "ALTER_SYNC_STATE_SET", "expand", 3, 1, 2),
            change(300_000, "ALTER_SYNC_STATE_SET", "expand", 1, 2, 3),
            change(400_000, "ALTER_SYNC_STATE_SET", "shrink", 1, 3, 1),
            change(400_000, "ALTER_SYNC_STATE_SET", "shrink", 3, 3, 1),
        ]
    )


def test_risk_windows_with_the_default_and_a_higher_min_in_sync(events: Events) -> None:
    df = events(history().records)
    timeline, horizon = prepare.raft_timeline(df), prepare.horizon(df)
    columns = ("startMs", "endMs", "durationMs", "open", "minSize", "masterBrokerId", "long")
    default = sync_state.risk_windows(timeline, horizon, min_in_sync_replicas=1, long_ms=600_000)
    assert rows(default, *columns) == expected(
        [
            window(0, 1_000, False, 1, 1, False),
            window(100_000, 115_000, False, 1, 2, False),
            window(400_000, 1_000_000, True, 1, 2, True),
        ]
    )
    three = sync_state.risk_windows(timeline, horizon, min_in_sync_replicas=3, long_ms=600_000)
    assert rows(three, *columns) == expected(
        [
            window(0, 1_000, False, 1, 1, False),
            window(100_000, 300_000, False, 1, 2, False),
            window(400_000, 1_000_000, True, 1, 2, True),
        ]
    )
    found = sync_state.long_window_findings(default, long_ms=600_000)
    start = next(r for r in history().records if r["ts"] == T0 + 400_000)
    assert rows(found, "kind", "severity", "brokerName", "brokerId", "index", "ts", "value") == [
        {
            "kind": "long_risk_window",
            "severity": "warning",
            "brokerName": "s",
            "brokerId": 2,
            "index": start["index"],
            "ts": T0 + 400_000,
            "value": 600_000,
        }
    ]


def change(ms: int, kind: str, moved: str, replica: int, before: int, after: int) -> dict[str, object]:
    return {"ts": T0 + ms, "type": kind, "change": moved, "replica": replica, "sizeBefore": before, "sizeAfter": after}


def window(start: int, end: int, is_open: bool, size: int, master: int, long: bool) -> dict[str, object]:
    return {
        "startMs": T0 + start,
        "endMs": T0 + end,
        "durationMs": end - start,
        "open": is_open,
        "minSize": size,
        "masterBrokerId": master,
        "long": long,
    }
