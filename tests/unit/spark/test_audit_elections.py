"""Spark: the elections table, daily counts, unclean verdicts and epoch invariants as rows."""

from __future__ import annotations

import datetime as dt

import pytest
from audit_factories import T0, Events, Scenario, expected, rows

from brokergroup.spark.transform import elections, findings, prepare

DAY = 86_400_000


@pytest.fixture
def zoo() -> Scenario:
    """One set per case; every set starts as `running_set` (broker 1 elected, all in sync)."""
    s = Scenario()
    for name in ("clean", "unclean", "flag", "gap", "regress", "split", "again"):
        s.running_set(name)
    s.at(10_000).elect("clean", 2, reason="channel_closed")
    s.at(10_000).alter("unclean", [1])
    s.at(11_000).elect("unclean", 3, reason="channel_closed", unclean=True)
    s.at(12_000).elect("flag", 2, unclean=True)
    s.at(13_000).elect("gap", 2, epoch=3)
    s.at(14_000).elect("regress", 2)
    s.at(15_000).elect("regress", 2, epoch=2)
    s.at(16_000).elect("split", 3, epoch=1, reason="admin")
    s.at(17_000).clean("again")
    s.at(18_000).register("again")
    s.elect("again", 3)
    s.at(DAY + 1_000).no_master("clean")
    return s


def test_each_election_with_the_state_before_it_and_both_verdicts(events: Events, zoo: Scenario) -> None:
    out = elections.elections(prepare.raft_timeline(events(zoo.records)))
    picked = out.where("masterEpoch > 1 or brokerName = 'again' or brokerName = 'split'")
    columns = ("brokerName", "masterEpoch", "electionResult", "previousSyncStateSet", "controllerUnclean")
    assert rows(picked, *columns, "derivedUnclean", "agrees") == expected(
        [
            election("again", 1, "new_master_elected", [], False, False),
            election("again", 1, "new_master_elected", [], False, False),  # after CLEAN_BROKER_DATA
            election("clean", 2, "new_master_elected", [1, 2, 3], False, False),
            election("clean", 3, "no_master_elected", [2], False, False),
            election("flag", 2, "new_master_elected", [1, 2, 3], True, False),
            election("gap", 3, "new_master_elected", [1, 2, 3], False, False),
            election("regress", 2, "new_master_elected", [1, 2, 3], False, False),
            election("regress", 2, "new_master_elected", [2], False, False),
            election("split", 1, "new_master_elected", [], False, False),
            election("split", 1, "new_master_elected", [1, 2, 3], False, False),
            election("unclean", 2, "new_master_elected", [1], True, True),
        ]
    )


def test_elections_per_set_day_and_result(events: Events, zoo: Scenario) -> None:
    daily = elections.elections_daily(elections.elections(prepare.raft_timeline(events(zoo.records)))).where(
        "brokerName in ('clean', 'unclean')"
    )
    first, second = dt.date(2026, 1, 1), dt.date(2026, 1, 2)
    assert rows(daily) == expected(
        [
            {"brokerName": "clean", "day": first, "electionResult": "new_master_elected", "elections": 2, "unclean": 0},
            {"brokerName": "clean", "day": second, "electionResult": "no_master_elected", "elections": 1, "unclean": 0},
            {
                "brokerName": "unclean",
                "day": first,
                "electionResult": "new_master_elected",
                "elections": 2,
                "unclean": 1,
            },
        ]
    )


def test_unclean_and_epoch_findings(events: Events, zoo: Scenario) -> None:
    timeline = prepare.raft_timeline(events(zoo.records))
    found = findings.union(
        [*elections.unclean_findings(elections.elections(timeline)), *elections.epoch_findings(timeline)]
    )
    index = {(r["brokerName"], r["ts"]): r["index"] for r in zoo.records if r["type"] == "ELECT_MASTER"}

    def at(kind: str, name: str, ms: int, broker: int | None, value: int) -> dict[str, object]:
        where = {"brokerName": name, "brokerId": broker, "index": index[(name, T0 + ms)], "ts": T0 + ms}
        return {"kind": kind, **where, "value": value}

    assert rows(found, "kind", "brokerName", "brokerId", "index", "ts", "value") == expected(
        [
            at("unclean_election", "unclean", 11_000, 3, 2),
            at("unclean_election", "flag", 12_000, 2, 2),
            at("unclean_flag_mismatch", "flag", 12_000, 2, 2),
            at("epoch_gap", "gap", 13_000, None, 3),
            at("epoch_regression", "regress", 15_000, None, 2),
            at("split_brain", "split", 16_000, 3, 1),
        ]
    )
    assert {r["severity"] for r in found.collect()} == {"violation"}


def election(name: str, epoch: int, result: str, before: list[int], flag: bool, derived: bool) -> dict[str, object]:
    return {
        "brokerName": name,
        "masterEpoch": epoch,
        "electionResult": result,
        "previousSyncStateSet": before,
        "controllerUnclean": flag,
        "derivedUnclean": derived,
        "agrees": flag == derived,
    }
