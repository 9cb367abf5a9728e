"""operator/status.py: the BrokerGroup status computed from one snapshot of its children."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from brokergroup.operator import conditions, status
from brokergroup.operator.conditions import Condition
from brokergroup.operator.spec import BrokerGroupSpec, parse_spec
from brokergroup.operator.status import Observed, Workload

BG = "bg"
T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T00:05:00Z"


def sts(
    *, generation: int | None = 2, observed: int | None = 2, ready: int | None = 3, updated: int | None = 3
) -> dict[str, Any]:
    st: dict[str, Any] = {}
    for key, value in (("observedGeneration", observed), ("readyReplicas", ready), ("updatedReplicas", updated)):
        if value is not None:
            st[key] = value
    meta = {"name": "x"} if generation is None else {"name": "x", "generation": generation}
    return {"metadata": meta, "status": st}


def wl(name: str, desired: int = 3, ready: int | None = None, *, current: bool = True) -> Workload:
    ready = desired if ready is None else ready
    return Workload(name=name, desired=desired, ready=ready, updated=ready, current_generation=current)


def observed(*brokers: Workload, controller: Workload | None = None) -> Observed:
    return Observed(controller=controller or wl("bg-controller"), brokers=tuple(brokers))


def spec(sets: int = 1) -> BrokerGroupSpec:
    return parse_spec({"brokers": {"sets": sets}})


def build(
    obs: Observed,
    previous: dict[str, Any],
    *,
    sets: int = 1,
    extra: list[Condition] | None = None,
    now: str = T0,
    generation: int = 1,
) -> dict[str, Any]:
    return status.build(
        bg=BG,
        spec=spec(sets),
        generation=generation,
        observed=obs,
        previous=previous,
        extra_conditions=extra or [],
        now=now,
    )


# ---- workload ----------------------------------------------------------------------------------


def test_workload_settled() -> None:
    w = status.workload(sts(), "bg-broker-0", 3)
    assert w == Workload("bg-broker-0", desired=3, ready=3, updated=3, current_generation=True)
    assert w.settled


def test_workload_absent_statefulset() -> None:
    w = status.workload(None, "bg-broker-0", 3)
    assert w == Workload("bg-broker-0", desired=3, ready=0, updated=0, current_generation=False)
    assert not w.settled


def test_workload_missing_status() -> None:
    w = status.workload({"metadata": {"generation": 1}}, "bg-broker-0", 3)
    assert (w.ready, w.updated, w.current_generation) == (0, 0, False)
    w = status.workload({"metadata": {"generation": 1}, "status": None}, "bg-broker-0", 3)
    assert (w.ready, w.updated, w.current_generation) == (0, 0, False)


def test_workload_missing_metadata_or_generation_is_not_current() -> None:
    assert not status.workload({"status": {"observedGeneration": 1}}, "s", 1).current_generation
    assert not status.workload(sts(generation=None, observed=None), "s", 1).current_generation


def test_workload_stale_observed_generation_is_not_settled() -> None:
    w = status.workload(sts(generation=3, observed=2), "s", 3)
    assert w.ready == 3 and w.updated == 3
    assert not w.current_generation
    assert not w.settled


def test_workload_zero_ready_replicas_omitted_by_the_apiserver() -> None:
    w = status.workload(sts(ready=None, updated=None), "s", 3)
    assert (w.ready, w.updated, w.current_generation) == (0, 0, True)


@pytest.mark.parametrize(("ready", "updated"), [(2, 3), (3, 2)])
def test_workload_not_settled_until_ready_and_updated(ready: int, updated: int) -> None:
    assert not status.workload(sts(ready=ready, updated=updated), "s", 3).settled


def test_workload_scaled_to_zero_is_settled() -> None:
    assert status.workload(sts(ready=None, updated=None), "s", 0).settled


# ---- readiness ---------------------------------------------------------------------------------


SERVED = {
    "type": conditions.MASTER_SERVICES_READY,
    "status": "True",
    "reason": "MastersSelected",
    "message": "every master Service selects its set's elected master",
    "lastTransitionTime": T0,
    "observedGeneration": 1,
}


def test_readiness_all_settled_and_every_master_selected() -> None:
    cond = status.readiness(observed(wl("bg-broker-0"), wl("bg-broker-1")), [SERVED])
    assert (cond.type, cond.status, cond.reason) == (conditions.READY, "True", "AllReplicasReady")


def test_ready_replicas_without_a_known_master_are_not_ready() -> None:
    cond = status.readiness(observed(wl("bg-broker-0")), [])
    assert (cond.status, cond.reason) == ("False", "WaitingForController")


@pytest.mark.parametrize("reason", ["ControllerUnreachable", "NoMaster", "MasterNotReady"])
def test_ready_replicas_whose_master_service_selects_no_master_are_not_ready(reason: str) -> None:
    unserved = SERVED | {"status": "False", "reason": reason, "message": f"because {reason}"}
    cond = status.readiness(observed(wl("bg-broker-0")), [unserved])
    assert (cond.status, cond.reason, cond.message) == ("False", reason, f"because {reason}")


def test_readiness_names_every_waiting_workload() -> None:
    obs = observed(wl("bg-broker-0"), wl("bg-broker-1", 3, 1), controller=wl("bg-controller", 3, 3, current=False))
    cond = status.readiness(obs)
    assert (cond.status, cond.reason) == ("False", "ReplicasNotReady")
    assert cond.message == (
        "bg-controller 3/3 ready, the StatefulSet controller has not seen the latest spec yet, bg-broker-1 1/3 ready"
    )


def test_readiness_counts_read_right_while_scaling_down() -> None:
    """A set going from 4 replicas to 2 still has 4 ready pods: not "4/2 ready"."""
    scaling = status.Workload("demo-broker-0", desired=2, ready=4, updated=4, current_generation=True)
    assert status.progress(scaling) == "demo-broker-0 scaling down to 2 (4 pods still ready)"
    rolling = status.Workload("demo-broker-0", desired=3, ready=3, updated=1, current_generation=True)
    assert status.progress(rolling) == "demo-broker-0 3/3 ready, 1/3 at the new revision"


# ---- sets_holding_data -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], 0),
        ([False, False], 0),
        ([True], 1),
        ([True, False, False], 1),
        ([False, True], 2),
        ([True, False, True, False], 3),
    ],
)
def test_sets_holding_data(flags: list[bool], expected: int) -> None:
    entries = [{"name": f"bg-broker-{i}", "holdsData": f} for i, f in enumerate(flags)]
    assert status.sets_holding_data("bg", entries) == expected


def test_sets_holding_data_missing_flag_is_false() -> None:
    assert status.sets_holding_data("bg", [{"name": "bg-broker-0"}]) == 0


# ---- broker_set_entries ------------------------------------------------------------------------


def test_entries_one_per_spec_set() -> None:
    entries = status.broker_set_entries(BG, observed(wl("bg-broker-0", 3, 0), wl("bg-broker-1", 3, 2)), {})
    assert entries == [
        {"name": "bg-broker-0", "desiredReplicas": 3, "readyReplicas": 0, "holdsData": False},
        {"name": "bg-broker-1", "desiredReplicas": 3, "readyReplicas": 2, "holdsData": True},
    ]


def test_holds_data_is_sticky() -> None:
    previous = {"brokerSets": [{"name": "bg-broker-0", "holdsData": True, "readyReplicas": 3}]}
    (entry,) = status.broker_set_entries(BG, observed(wl("bg-broker-0", 3, 0)), previous)
    assert entry["holdsData"] is True
    assert entry["readyReplicas"] == 0


def test_unknown_fields_of_previous_entries_are_carried_over() -> None:
    owned_elsewhere = {
        "masterPod": "bg-broker-0-1",
        "masterBrokerId": 2,
        "masterEpoch": 5,
        "syncStateSet": ["bg-broker-0-1", "bg-broker-0-0"],
        "lastElection": {"pod": "bg-broker-0-1"},
    }
    previous = {"brokerSets": [{"name": "bg-broker-0", "desiredReplicas": 2, **owned_elsewhere}]}
    (entry,) = status.broker_set_entries(BG, observed(wl("bg-broker-0", 3, 3)), previous)
    assert entry == {
        "name": "bg-broker-0",
        "desiredReplicas": 3,
        "readyReplicas": 3,
        "holdsData": True,
        **owned_elsewhere,
    }


def test_previous_entries_are_not_mutated() -> None:
    previous = {"brokerSets": [{"name": "bg-broker-0", "holdsData": False, "readyReplicas": 0}]}
    snapshot = copy.deepcopy(previous)
    status.broker_set_entries(BG, observed(wl("bg-broker-0", 3, 3)), previous)
    assert previous == snapshot


def test_removed_set_holding_data_is_kept_unchanged() -> None:
    removed = {"name": "bg-broker-1", "desiredReplicas": 3, "readyReplicas": 3, "holdsData": True, "masterPod": "p"}
    previous = {"brokerSets": [{"name": "bg-broker-0", "holdsData": True}, removed]}
    entries = status.broker_set_entries(BG, observed(wl("bg-broker-0")), previous)
    assert [e["name"] for e in entries] == ["bg-broker-0", "bg-broker-1"]
    assert entries[1] == removed
    assert status.sets_holding_data("bg", entries) == 2


def test_removed_set_without_data_is_dropped() -> None:
    previous = {
        "brokerSets": [
            {"name": "bg-broker-0", "holdsData": True},
            {"name": "bg-broker-1", "holdsData": False},
            {"name": "bg-broker-2"},
        ]
    }
    entries = status.broker_set_entries(BG, observed(wl("bg-broker-0")), previous)
    assert [e["name"] for e in entries] == ["bg-broker-0"]


def test_entries_of_other_names_in_previous_are_dropped() -> None:
    previous = {"brokerSets": [{"name": "other-broker-1", "holdsData": True}, "junk", {"holdsData": True}]}
    entries = status.broker_set_entries(BG, observed(wl("bg-broker-0")), previous)
    assert [e["name"] for e in entries] == ["bg-broker-0"]


def test_sets_holding_data_follows_set_indexes_not_positions() -> None:
    previous = {
        "brokerSets": [
            {"name": "bg-broker-0", "holdsData": True},
            {"name": "bg-broker-1", "holdsData": True},
            {"name": "bg-broker-2", "holdsData": False},
            {"name": "bg-broker-3", "holdsData": True},
        ]
    }
    entries = status.broker_set_entries(BG, observed(wl("bg-broker-0"), wl("bg-broker-1")), previous)
    assert [e["name"] for e in entries] == ["bg-broker-0", "bg-broker-1", "bg-broker-3"]
    assert status.sets_holding_data("bg", entries) == 4


# ---- phase_of ----------------------------------------------------------------------------------


def conds(*updates: Condition) -> list[dict[str, Any]]:
    return conditions.merge(None, list(updates), now=T0, generation=1)


def ready(status_: conditions.Status, reason: str) -> Condition:
    return Condition(conditions.READY, status_, reason, "")


def paused(status_: conditions.Status) -> Condition:
    return Condition(conditions.RECONCILIATION_PAUSED, status_, "Annotation", "")


@pytest.mark.parametrize(
    ("conds_", "phase"),
    [
        ([], "Pending"),
        ([paused("False")], "Pending"),
        ([ready("True", "AllReplicasReady")], "Ready"),
        ([ready("False", "ReplicasNotReady")], "Progressing"),
        ([ready("Unknown", "Whatever")], "Progressing"),
        ([ready("False", "InvalidSpec")], "Failed"),
        ([ready("False", "InvalidSecret")], "Failed"),
        ([ready("True", "AllReplicasReady"), paused("True")], "Paused"),
        ([ready("False", "InvalidSpec"), paused("True")], "Paused"),
        ([ready("True", "AllReplicasReady"), paused("False")], "Ready"),
    ],
)
def test_phase_of(conds_: list[Condition], phase: str) -> None:
    assert status.phase_of(conds(*conds_)) == phase


# ---- build -------------------------------------------------------------------------------------


def test_build_ready_group() -> None:
    out = build(observed(wl("bg-broker-0")), {"conditions": [SERVED], "controller": {"leader": "bg-controller-1"}})
    assert out["observedGeneration"] == 1
    assert out["phase"] == "Ready"
    assert out["controller"] == {"replicas": 3, "readyReplicas": 3, "leader": "bg-controller-1"}
    assert out["brokerSets"] == [{"name": "bg-broker-0", "desiredReplicas": 3, "readyReplicas": 3, "holdsData": True}]
    assert out["setsHoldingData"] == 1
    assert out["masters"] == "0/1"
    cond = conditions.find(out["conditions"], conditions.READY) or {}
    assert (cond["type"], cond["status"], cond["lastTransitionTime"]) == ("Ready", "True", T0)


def test_build_progressing_group() -> None:
    obs = observed(wl("bg-broker-0", 3, 1), wl("bg-broker-1", 3, 0), controller=wl("bg-controller", 3, 2))
    out = build(obs, {}, sets=2)
    assert out["phase"] == "Progressing"
    assert out["controller"] == {"replicas": 3, "readyReplicas": 2}
    assert out["setsHoldingData"] == 1
    assert conditions.find(out["conditions"], conditions.READY)["reason"] == "ReplicasNotReady"  # type: ignore[index]


@pytest.mark.parametrize(
    "obs",
    [
        observed(wl("bg-broker-0")),
        observed(wl("bg-broker-0", 3, 1), controller=wl("bg-controller", 3, 2, current=False)),
    ],
)
def test_build_is_idempotent(obs: Observed) -> None:
    first = build(obs, {})
    assert build(obs, {}) == first
    snapshot = copy.deepcopy(first)
    again = build(obs, first, now=T1)
    assert again == first  # no spurious status write
    assert first == snapshot  # previous not mutated


def test_build_idempotent_with_extra_conditions_and_removed_set() -> None:
    previous = {
        "brokerSets": [
            {"name": "bg-broker-0", "holdsData": True},
            {"name": "bg-broker-1", "holdsData": True, "readyReplicas": 3},
        ],
        "masters": "1/2",
    }
    extra = [
        Condition(conditions.READY, "False", "SetHoldsData", "bg-broker-1 holds data; not deleting its StatefulSet")
    ]
    first = build(observed(wl("bg-broker-0")), previous, extra=extra)
    assert [e["name"] for e in first["brokerSets"]] == ["bg-broker-0", "bg-broker-1"]
    assert first["setsHoldingData"] == 2
    assert first["phase"] == "Progressing"
    assert conditions.find(first["conditions"], conditions.READY)["reason"] == "SetHoldsData"  # type: ignore[index]
    assert first["masters"] == "0/1"  # sets of the spec with a known master (none is known here)
    assert build(observed(wl("bg-broker-0")), first, extra=extra, now=T1) == first


def test_build_extra_ready_condition_replaces_readiness() -> None:
    extra = [Condition(conditions.READY, "False", "ScaleDownBlocked", "waiting")]
    out = build(observed(wl("bg-broker-0")), {}, extra=extra)
    (cond,) = out["conditions"]
    assert (cond["status"], cond["reason"]) == ("False", "ScaleDownBlocked")


def test_build_extra_conditions_of_other_types_are_added() -> None:
    extra = [Condition(conditions.CONTROLLER_QUORUM, "True", "QuorumAvailable", "3/3")]
    out = build(observed(wl("bg-broker-0")), {"conditions": [SERVED]}, extra=extra)
    assert [c["type"] for c in out["conditions"]] == [
        conditions.CONTROLLER_QUORUM,
        conditions.MASTER_SERVICES_READY,
        conditions.READY,
    ]
    assert out["phase"] == "Ready"


def test_build_ready_transition_time_moves_only_on_flip() -> None:
    def ready_time(out: dict[str, Any]) -> str:
        return str((conditions.find(out["conditions"], conditions.READY) or {})["lastTransitionTime"])

    not_ready = build(observed(wl("bg-broker-0", 3, 0)), {"conditions": [SERVED]}, now=T0)
    less_not_ready = build(observed(wl("bg-broker-0", 3, 2)), not_ready, now=T1)
    assert ready_time(less_not_ready) == T0
    now_ready = build(observed(wl("bg-broker-0")), less_not_ready, now=T1)
    assert ready_time(now_ready) == T1


def test_build_keeps_unknown_top_level_fields_and_advances_generation() -> None:
    previous = build(observed(wl("bg-broker-0")), {}) | {"somethingElse": 1}
    out = build(observed(wl("bg-broker-0")), previous, generation=2)
    assert out["somethingElse"] == 1
    assert out["observedGeneration"] == 2
    assert out["conditions"][0]["observedGeneration"] == 2


def test_build_masters_denominator_follows_sets() -> None:
    first = build(observed(wl("bg-broker-0")), {}, sets=1)
    grown = build(observed(wl("bg-broker-0"), wl("bg-broker-1"), wl("bg-broker-2")), first, sets=3)
    assert grown["masters"].endswith("/3")


# ---- with_conditions ---------------------------------------------------------------------------


def test_with_conditions_changes_only_conditions_and_phase() -> None:
    previous = build(observed(wl("bg-broker-0")), {})
    out = status.with_conditions(previous, [paused("True")], now=T1, generation=5)
    assert out["phase"] == "Paused"
    assert out["observedGeneration"] == previous["observedGeneration"]
    assert {k: v for k, v in out.items() if k not in ("conditions", "phase")} == {
        k: v for k, v in previous.items() if k not in ("conditions", "phase")
    }
    assert conditions.find(out["conditions"], conditions.READY) == conditions.find(
        previous["conditions"], conditions.READY
    )
    assert status.with_conditions(out, [paused("True")], now=T1, generation=5) == out


def test_with_conditions_on_empty_status() -> None:
    out = status.with_conditions({}, [ready("False", "InvalidSpec")], now=T0, generation=1)
    assert out["phase"] == "Failed"
    assert set(out) == {"conditions", "phase"}
