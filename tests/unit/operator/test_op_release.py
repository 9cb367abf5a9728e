"""Releasing a broker set that held messages (`brokergroup.io/release-set`): which sets may go, and the status."""

from __future__ import annotations

import pytest

from brokergroup.operator import release, status
from brokergroup.operator.status import Observed, Workload

BG = "bg"


def wl(name: str, ready: int = 3) -> Workload:
    return Workload(name=name, desired=3, ready=ready, updated=3, current_generation=True)


def test_only_the_last_set_of_the_spec_is_released() -> None:
    decision = release.decide(BG, 3, " bg-broker-2 ")
    assert decision == release.Released(
        "bg-broker-2",
        "bg-broker-2 released: spec.brokers.sets may now go down to 2; its PersistentVolumeClaims are kept until "
        "deleted by hand",
    )


@pytest.mark.parametrize(
    ("sets", "request_", "why"),
    [
        (3, "bg-broker-1", "'bg-broker-1' is not the last set: sets are removed from the top, so only bg-broker-2"),
        (3, "bg-broker-3", "'bg-broker-3' names no broker set of this group"),
        (3, "other-broker-2", "'other-broker-2' names no broker set of this group"),
        (3, "", "'' names no broker set of this group"),
        (3, "bg-controller-0", "names no broker set of this group"),
        (1, "bg-broker-0", "bg has one broker set, and a BrokerGroup keeps at least one"),
    ],
)
def test_anything_else_is_refused_with_the_reason(sets: int, request_: str, why: str) -> None:
    decision = release.decide(BG, sets, request_)
    assert isinstance(decision, release.Refused)
    assert why in decision.message, decision.message


def test_a_released_set_no_longer_holds_data_while_it_runs() -> None:
    previous = {
        "brokerSets": [
            {"name": "bg-broker-0", "holdsData": True},
            {"name": "bg-broker-1", "holdsData": True, "masterPod": "bg-broker-1-0"},
        ]
    }
    released = release.apply(previous, "bg-broker-1")
    assert previous["brokerSets"][1]["holdsData"] is True  # not mutated
    entries = status.broker_set_entries(
        BG, Observed(controller=wl("bg-controller"), brokers=(wl("bg-broker-0"), wl("bg-broker-1"))), released
    )
    assert entries[1] == {
        "name": "bg-broker-1",
        "masterPod": "bg-broker-1-0",
        "released": True,
        "holdsData": False,
        "desiredReplicas": 3,
        "readyReplicas": 3,
    }
    assert status.sets_holding_data(BG, entries) == 1
    # Once it left the spec, its entry goes (nothing to keep: it holds no data).
    gone = status.broker_set_entries(
        BG, Observed(controller=wl("bg-controller"), brokers=(wl("bg-broker-0"),)), {"brokerSets": entries}
    )
    assert [e["name"] for e in gone] == ["bg-broker-0"]


def test_releasing_a_set_without_an_entry_yet_makes_one() -> None:
    assert release.apply({}, "bg-broker-1") == {
        "brokerSets": [{"name": "bg-broker-1", "released": True, "holdsData": False}]
    }
