"""Spark: incidents (master lost -> master back) and time-to-recover percentiles."""

from __future__ import annotations

from audit_factories import T0, Events, Scenario, expected, rows

from brokergroup.spark.transform import incidents


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
            mttr_row("all", "all", 3, 1, 500, 100_100, 100_100, 100_100),
            mttr_row("set", "s", 3, 1, 500, 100_100, 100_100, 100_100),
            mttr_row("cause", "channel_closed", 1, 1, 20, 20, 20, 20),
            mttr_row("cause", "heartbeat_timeout", 2, 0, 500, 100_100, 100_100, 100_100),
        ]
    )


def mttr_row(
    scope: str, key: str, count: int, still_open: int, p50: int, p90: int, p99: int, most: int
) -> dict[str, object]:
    return {
        "scope": scope,
        "key": key,
        "incidents": count,
        "open": still_open,
        "p50Ms": p50,
        "p90Ms": p90,
        "p99Ms": p99,
        "maxMs": most,
    }


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
