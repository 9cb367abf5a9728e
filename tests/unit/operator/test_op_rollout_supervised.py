"""The supervised master step of a roll, and the roll's progress in status (operator/rollout.py, pure)."""

from __future__ import annotations

import pytest
from test_op_rollout import NEW, OLD, STS, name, pods, view

from brokergroup.operator import rollout
from brokergroup.operator.rollout import AwaitApproval, DeletePod, ElectUpdated


def plan_supervised(revisions: list[str], *, approved: bool) -> rollout.Step:
    return rollout.plan(
        STS, replicas=3, update_revision=NEW, pods=pods(revisions), view=view(), supervised=True, approved=approved
    )


def test_supervised_rolls_slaves_by_itself() -> None:
    assert plan_supervised([OLD, OLD, OLD], approved=False) == DeletePod(
        name(2), f"{STS}: roll slave {name(2)} to revision {NEW}"
    )


def test_supervised_stops_before_the_masters_election_until_approved() -> None:
    step = plan_supervised([OLD, NEW, NEW], approved=False)
    assert isinstance(step, AwaitApproval)
    assert step.master_pod == name(0)
    assert "brokergroup.io/approve-master-update=bg-broker-0" in step.reason
    assert isinstance(plan_supervised([OLD, NEW, NEW], approved=True), ElectUpdated)


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [(None, False), ("bg-broker-0", True), (" all ", True), ("bg-broker-1", False), ("", False), ("true", False)],
)
def test_approval_names_the_set_or_all(annotation: str | None, expected: bool) -> None:
    assert rollout.is_approved(annotation, STS) is expected


def test_progress_names_the_step_and_the_pod() -> None:
    states = pods([OLD, NEW, NEW])
    assert rollout.progress(rollout.Done(), states, NEW) is None
    waiting = rollout.progress(plan_supervised([OLD, NEW, NEW], approved=False), states, NEW)
    assert waiting is not None
    assert (waiting["step"], waiting["pod"], waiting["updatedReplicas"]) == ("WaitingForApproval", name(0), 2)
    switching = rollout.progress(plan_supervised([OLD, NEW, NEW], approved=True), states, NEW)
    assert switching is not None
    assert (switching["step"], switching["pod"]) == ("SwitchingOver", name(0))
    restarting = rollout.progress(DeletePod(name(2), "why"), states, NEW)
    assert restarting == {"step": "RestartingSlave", "pod": name(2), "message": "why", "updatedReplicas": 2}
    assert (rollout.progress(rollout.Wait("x"), states, NEW) or {})["step"] == "Waiting"
