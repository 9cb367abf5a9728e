"""Spark: incidents (master lost -> master back) and time-to-recover percentiles."""

from __future__ import annotations

from collections.abc import Callable

from audit_factories import T0, Scenario, expected, rows
from pyspark.sql import DataFrame

from brokergroup.spark.transform import incidents

Events = Callable[[list[dict[str, object]]], DataFrame]


def history() -> Scenario:
    s = Scenario().running_set()  # the first election is not an incident: nothing was lost
    s.at(100_000).lost("s", 1)
    s.at(100_020).elect("s", 2, reason="channel_closed")
    s.at(200_000).alter("s", [2, 3])
    s.at(300_000).lost("s", 2, "HEARTBEAT_LOST")
    s.at(300_500).lost("s", 2)  # seen again, by the next controller leader
    s.at(300_600).no_master("s", reason="heartbeat_timeout")
    s.at(400_000).active("s", 2)  # back, but no longer master: not a recovery yet
    s.at(400_100).elect("s", 2)
    s.at(500_000).lost("s", 3)  # not the master
    s.at(600_000).lost("s", 2, "HEARTBEAT_LOST")
    s.at(600_500).active("s", 2)  # the master returned before any election
    s.at(700_000).lost("s", 2)
    return s


def test_incidents_from_the_first_loss_to_the_recovery(events: Events) -> None:
    out = incidents.incidents(events(history().records))
    assert rows(out.drop("brokerName")) == expected(
        [
            incident(
                100_000, 100_020, "channel_closed", "CHANNEL_CLOSED", 1, 2, "new_master_elected", "channel_closed", 1
            ),
            incident(300_000, 400_100, "heartbeat_timeout", "HEARTBEAT_LOST", 2, 2, "new_master_elected", "broker", 3),
            incident(600_000, 600_500, "heartbeat_timeout", "HEARTBEAT_LOST", 2, 2, "master_returned", None, 1),
            incident(700_000, None, "channel_closed", "CHANNEL_CLOSED", 2, None, None, None, 1),
        ]
    )


def test_mttr_percentiles_overall_per_set_and_per_cause(events: Events) -> None:
    out = incidents.mttr(incidents.incidents(events(history().records)))
    assert rows(out) == expected(
        [
            {
                "scope": "all",
                "key": "all",
                "incidents": 3,
                "open": 1,
                "p50Ms": 500,
                "p90Ms": 100_100,
                "p99Ms": 100_100,
                "maxMs": 100_100,
            },
            {
                "scope": "set",
                "key": "s",
                "incidents": 3,
                "open": 1,
                "p50Ms": 500,
                "p90Ms": 100_100,
                "p99Ms": 100_100,
                "maxMs": 100_100,
            },
            {
                "scope": "cause",
                "key": "channel_closed",
                "incidents": 1,
                "open": 1,
                "p50Ms": 20,
                "p90Ms": 20,
                "p99Ms": 20,
                "maxMs": 20,
            },
            {
                "scope": "cause",
                "key": "heartbeat_timeout",
                "incidents": 2,
                "open": 0,
                "p50Ms": 500,
                "p90Ms": 100_100,
                "p99Ms": 100_100,
                "maxMs": 100_100,
            },
        ]
    )


def incident(
    start: int,
    end: int | None,
    cause: str,
    signal: str,
    lost: int,
    new: int | None,
    recovery: str | None,
    election_reason: str | None,
    downs: int,
) -> dict[str, object]:
    return {
        "startMs": T0 + start,
        "endMs": None if end is None else T0 + end,
        "durationMs": None if end is None else end - start,
        "recovered": end is not None,
        "cause": cause,
        "firstSignal": signal,
        "lostMaster": lost,
        "newMaster": new,
        "recovery": recovery,
        "electionReason": election_reason,
        "downEvents": downs,
    }
