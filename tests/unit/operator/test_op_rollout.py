"""operator/rollout.py: the master-last roll planner (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from brokergroup.operator import labels, rollout
from brokergroup.operator.roles import Member, SetView
from brokergroup.operator.rollout import DeletePod, Done, ElectUpdated, PodState, Wait

STS = "bg-broker-0"
OLD = "rev-old"
NEW = "rev-new"


def name(ordinal: int) -> str:
    return f"{STS}-{ordinal}"


def ps(
    ordinal: int,
    revision: str | None = OLD,
    *,
    ready: bool = True,
    terminating: bool = False,
    role: str | None = "slave",
    sts: str = STS,
) -> PodState:
    return PodState(f"{sts}-{ordinal}", revision, ready, terminating, role)


def member(ordinal: int, *, alive: bool = True, in_sync: bool = True, broker_id: int | None = None) -> Member:
    return Member(name(ordinal), ordinal + 1 if broker_id is None else broker_id, alive, in_sync)


def view(master: int | None = 0, members: list[Member] | None = None, n: int = 3) -> SetView:
    return SetView(
        name=STS,
        master_pod=None if master is None else name(master),
        master_broker_id=None if master is None else master + 1,
        master_epoch=3,
        sync_state_set_epoch=4,
        members=tuple(members if members is not None else [member(i) for i in range(n)]),
    )


def pods(revisions: list[str], master: int | None = 0) -> list[PodState]:
    return [ps(i, r, role="master" if i == master else "slave") for i, r in enumerate(revisions)]


def plan(
    pod_states: list[PodState],
    v: SetView | None,
    *,
    replicas: int = 3,
    update_revision: str | None = NEW,
) -> rollout.Step:
    return rollout.plan(STS, replicas=replicas, update_revision=update_revision, pods=pod_states, view=v)


# ---- PodState.of --------------------------------------------------------------------------------


def test_pod_state_of_a_ready_pod() -> None:
    raw: dict[str, Any] = {
        "metadata": {
            "name": name(1),
            "labels": {rollout.REVISION_LABEL: "abc", labels.ROLE_LABEL: "master"},
        },
        "status": {"conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]},
    }
    assert PodState.of(raw) == PodState(name(1), "abc", ready=True, terminating=False, role="master")


def test_pod_state_of_a_terminating_unready_pod() -> None:
    raw: dict[str, Any] = {
        "metadata": {"name": name(2), "labels": {}, "deletionTimestamp": "2026-01-01T00:00:00Z"},
        "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "ContainersReady", "status": "True"}]},
    }
    assert PodState.of(raw) == PodState(name(2), None, ready=False, terminating=True, role=None)


@pytest.mark.parametrize(
    "raw",
    [
        {},
        {"metadata": None, "status": None},
        {"metadata": {"name": "p", "labels": None}, "status": {"conditions": None}},
        {"metadata": {"name": "p"}, "status": {}},
    ],
)
def test_pod_state_of_tolerates_missing_fields(raw: dict[str, Any]) -> None:
    state = PodState.of(raw)
    assert state.revision is None and state.role is None
    assert state.ready is False and state.terminating is False


def test_pod_state_ready_needs_the_string_true() -> None:
    raw = {"metadata": {"name": "p"}, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}
    assert PodState.of(raw).ready is False


# ---- plan: waiting ------------------------------------------------------------------------------


@pytest.mark.parametrize("update_revision", [None, ""])
def test_no_update_revision_waits(update_revision: str | None) -> None:
    step = plan(pods([OLD, OLD, OLD]), view(), update_revision=update_revision)
    assert isinstance(step, Wait)
    assert "update revision" in step.reason


def test_all_current_is_done() -> None:
    assert plan(pods([NEW, NEW, NEW]), view()) == Done()
    assert plan(pods([NEW, NEW, NEW]), None) == Done()  # nothing to do needs no view


def test_pods_of_other_sets_are_ignored() -> None:
    others = [ps(0, OLD, sts="bg-broker-1"), ps(0, OLD, sts="bg-broker-00"), PodState(STS, OLD, True, False, None)]
    assert plan([*pods([NEW, NEW, NEW]), *others], view()) == Done()


@pytest.mark.parametrize(
    "busy",
    [
        {"ready": False},
        {"terminating": True},
        {"ready": False, "terminating": True},
    ],
)
@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_busy_pod_waits(busy: dict[str, bool], which: int) -> None:
    states = pods([OLD, OLD, NEW])
    states[which] = ps(which, states[which].revision, role=states[which].role, **busy)
    step = plan(states, view())
    assert isinstance(step, Wait)
    assert name(which) in step.reason


def test_fewer_pods_than_replicas_waits() -> None:
    step = plan(pods([OLD, OLD]), view(n=2), replicas=3)
    assert isinstance(step, Wait)
    assert "missing pods" in step.reason


def test_view_none_waits() -> None:
    step = plan(pods([OLD, OLD, OLD]), None)
    assert isinstance(step, Wait)
    assert "view" in step.reason


@pytest.mark.parametrize(
    "lagging",
    [
        member(2, alive=False),
        member(2, in_sync=False),
        member(2, alive=False, in_sync=False),
    ],
)
def test_a_lagging_member_waits(lagging: Member) -> None:
    step = plan(pods([OLD, OLD, OLD]), view(members=[member(0), member(1), lagging]))
    assert isinstance(step, Wait)
    assert name(2) in step.reason and "sync-state-set" in step.reason


def test_an_unregistered_pod_waits() -> None:
    step = plan(pods([OLD, OLD, OLD]), view(members=[member(0), member(1)]))
    assert isinstance(step, Wait)
    assert name(2) in step.reason


def test_lagging_master_member_waits_too() -> None:
    step = plan(pods([NEW, NEW, OLD]), view(members=[member(0, in_sync=False), member(1), member(2)]))
    assert isinstance(step, Wait)


# ---- plan: rolling slaves -----------------------------------------------------------------------


def test_outdated_slaves_go_highest_ordinal_first() -> None:
    step = plan(pods([OLD, OLD, OLD]), view(master=0))
    assert isinstance(step, DeletePod)
    assert step.pod == name(2)
    assert NEW in step.why


def test_next_slave_after_the_highest_is_current() -> None:
    step = plan(pods([OLD, OLD, NEW]), view(master=0))
    assert isinstance(step, DeletePod) and step.pod == name(1)


def test_slaves_before_master_whatever_the_ordinals() -> None:
    # master is the highest ordinal: slaves still roll first, highest slave first
    states = pods([OLD, OLD, OLD], master=2)
    step = plan(states, view(master=2))
    assert isinstance(step, DeletePod) and step.pod == name(1)


def test_ordinal_10_sorts_above_ordinal_9() -> None:
    n = 11
    states = pods([OLD] * n, master=0)
    step = plan(states, view(master=0, n=n), replicas=n)
    assert isinstance(step, DeletePod) and step.pod == name(10)


def test_outdated_slave_still_labelled_master_waits() -> None:
    # controller moved the master to 0; pod 2 is outdated and its role label has not converged yet
    states = [ps(0, OLD, role="slave"), ps(1, OLD, role="slave"), ps(2, OLD, role="master")]
    step = plan(states, view(master=0))
    assert isinstance(step, Wait)
    assert name(2) in step.reason and "labelled master" in step.reason


def test_no_master_in_view_rolls_slaves() -> None:
    step = plan(pods([OLD, OLD, OLD], master=None), view(master=None))
    assert isinstance(step, DeletePod) and step.pod == name(2)


# ---- plan: the master last ----------------------------------------------------------------------


def test_only_master_outdated_elects_an_updated_member() -> None:
    step = plan(pods([OLD, NEW, NEW], master=0), view(master=0))
    assert step == ElectUpdated(master_pod=name(0), target_pod=name(1), target_broker_id=2)


def test_elect_updated_uses_the_members_broker_id() -> None:
    v = view(master=2, members=[member(0, broker_id=40), member(1, broker_id=41), member(2, broker_id=42)])
    step = plan(pods([NEW, NEW, OLD], master=2), v)
    assert step == ElectUpdated(master_pod=name(2), target_pod=name(0), target_broker_id=40)


def test_pods_beyond_the_wanted_replicas_are_not_rolled() -> None:
    # spec.replicas 0 while pod 0 is still there: it is going away, not rolling.
    v = SetView(STS, name(0), 1, 3, 4, (member(0),))
    assert plan([ps(0, OLD, role="master")], v, replicas=0) == Done()


def test_elect_updated_follows_view_order_and_skips_members_without_a_pod() -> None:
    # the view still lists pod 3 (e.g. after a scale-down) first; it has no pod, so the next member, pod 2, is chosen
    v = view(master=0, members=[member(3), member(2), member(0), member(1)])
    states = [ps(0, OLD, role="master"), ps(1, NEW), ps(2, NEW)]
    assert plan(states, v) == ElectUpdated(name(0), name(2), 3)


def test_master_outdated_after_slaves_rolled_then_old_master_is_deleted_once_labels_say_slave() -> None:
    # 1) only master 0 outdated -> elect 1
    step = plan(pods([OLD, NEW, NEW], master=0), view(master=0))
    assert step == ElectUpdated(name(0), name(1), 2)
    # 2) controller elected 1, labels not converged yet: pod 0 still labelled master -> wait
    not_converged = [ps(0, OLD, role="master"), ps(1, NEW, role="slave"), ps(2, NEW)]
    assert isinstance(plan(not_converged, view(master=1)), Wait)
    # 3) labels converged -> delete the old master
    converged = [ps(0, OLD, role="slave"), ps(1, NEW, role="master"), ps(2, NEW)]
    step = plan(converged, view(master=1))
    assert isinstance(step, DeletePod) and step.pod == name(0)
    # 4) all current
    assert plan([ps(0, NEW), ps(1, NEW, role="master"), ps(2, NEW)], view(master=1)) == Done()


# ---- plan: single replica -----------------------------------------------------------------------


@pytest.mark.parametrize("v", [None, view(master=0, n=1)])
def test_single_replica_deletes_the_only_pod(v: SetView | None) -> None:
    step = plan([ps(0, OLD, role="master")], v, replicas=1)
    assert isinstance(step, DeletePod)
    assert step.pod == name(0)
    assert "single replica" in step.why


def test_single_replica_not_ready_is_still_rolled() -> None:
    # a broken single pod can only be fixed by rolling it
    step = plan([ps(0, OLD, ready=False, role="master")], view(master=0, n=1), replicas=1)
    assert isinstance(step, DeletePod) and step.pod == name(0)


def test_single_replica_current_is_done() -> None:
    assert plan([ps(0, NEW, role="master")], None, replicas=1) == Done()


def test_single_replica_with_leftover_outdated_pods_does_not_crash() -> None:
    states = [ps(0, OLD, role="master"), ps(1, OLD, terminating=True), ps(2, OLD, terminating=True)]
    step = plan(states, view(master=0), replicas=1)
    assert isinstance(step, (Wait, DeletePod))


def test_single_replica_already_terminating_waits() -> None:
    step = plan([ps(0, OLD, terminating=True, role="master")], view(master=0, n=1), replicas=1)
    assert isinstance(step, Wait)
