"""operator/conditions.py: metav1.Condition bookkeeping (merge, find, transitioned)."""

from __future__ import annotations

from typing import Any

from brokergroup.operator import conditions
from brokergroup.operator.conditions import Condition

T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T00:05:00Z"
T2 = "2026-01-01T00:10:00Z"


def ready(
    status: conditions.Status = "True", reason: str = "AllReplicasReady", message: str = "all ready"
) -> Condition:
    return Condition(conditions.READY, status, reason, message)


def test_new_condition_gets_now_and_generation() -> None:
    (cond,) = conditions.merge(None, [ready()], now=T0, generation=3)
    assert cond == {
        "type": "Ready",
        "status": "True",
        "reason": "AllReplicasReady",
        "message": "all ready",
        "observedGeneration": 3,
        "lastTransitionTime": T0,
    }


def test_same_status_keeps_transition_time_but_follows_reason_message_generation() -> None:
    before = conditions.merge(None, [ready("False", "ReplicasNotReady", "0/3")], now=T0, generation=1)
    after = conditions.merge(before, [ready("False", "ScaleDownWaiting", "waiting")], now=T1, generation=2)
    (cond,) = after
    assert cond["lastTransitionTime"] == T0
    assert (cond["reason"], cond["message"], cond["observedGeneration"]) == ("ScaleDownWaiting", "waiting", 2)


def test_status_flip_moves_transition_time() -> None:
    before = conditions.merge(None, [ready("False", "ReplicasNotReady", "0/3")], now=T0, generation=1)
    after = conditions.merge(before, [ready("True")], now=T1, generation=1)
    assert after[0]["lastTransitionTime"] == T1
    back = conditions.merge(after, [ready("False", "ReplicasNotReady", "2/3")], now=T2, generation=1)
    assert back[0]["lastTransitionTime"] == T2


def test_unknown_to_true_is_a_transition() -> None:
    before = conditions.merge(None, [ready("Unknown", "Pending", "")], now=T0, generation=1)
    assert conditions.merge(before, [ready("True")], now=T1, generation=1)[0]["lastTransitionTime"] == T1


def test_previous_without_transition_time_gets_now() -> None:
    previous = [{"type": "Ready", "status": "True", "reason": "x", "message": "y"}]
    (cond,) = conditions.merge(previous, [ready("True")], now=T1, generation=1)
    assert cond["lastTransitionTime"] == T1


def test_other_types_kept_untouched_and_output_sorted_by_type() -> None:
    paused = {
        "type": conditions.RECONCILIATION_PAUSED,
        "status": "False",
        "reason": "NotPaused",
        "message": "",
        "observedGeneration": 1,
        "lastTransitionTime": T0,
        "extra": "kept",
    }
    quorum = Condition(conditions.CONTROLLER_QUORUM, "True", "QuorumAvailable", "3/3")
    out = conditions.merge([paused], [ready(), quorum], now=T1, generation=2)
    assert [c["type"] for c in out] == sorted(
        [conditions.READY, conditions.RECONCILIATION_PAUSED, conditions.CONTROLLER_QUORUM]
    )
    assert conditions.find(out, conditions.RECONCILIATION_PAUSED) == paused
    assert conditions.find(out, conditions.CONTROLLER_QUORUM)["lastTransitionTime"] == T1  # type: ignore[index]


def test_merge_does_not_mutate_previous() -> None:
    previous = conditions.merge(None, [ready("False", "ReplicasNotReady", "0/3")], now=T0, generation=1)
    snapshot = [dict(c) for c in previous]
    conditions.merge(previous, [ready("True")], now=T1, generation=2)
    assert previous == snapshot


def test_junk_entries_in_previous_are_dropped() -> None:
    previous: list[Any] = ["junk", {"status": "True"}, {"type": "Other", "status": "True"}]
    out = conditions.merge(previous, [ready()], now=T0, generation=1)
    assert [c["type"] for c in out] == ["Other", "Ready"]


def test_merge_is_idempotent() -> None:
    updates = [ready("False", "ReplicasNotReady", "1/3"), Condition(conditions.MASTERS_ELECTED, "True", "Elected", "")]
    first = conditions.merge(None, updates, now=T0, generation=4)
    assert conditions.merge(None, updates, now=T0, generation=4) == first
    # Re-applying the same updates later changes nothing: an unchanged world writes no status.
    assert conditions.merge(first, updates, now=T2, generation=4) == first


def test_updates_order_does_not_change_output() -> None:
    a, b = ready(), Condition(conditions.ROLE_LABELS_CONVERGED, "True", "Converged", "")
    assert conditions.merge(None, [a, b], now=T0, generation=1) == conditions.merge(None, [b, a], now=T0, generation=1)


def test_find() -> None:
    conds = conditions.merge(None, [ready()], now=T0, generation=1)
    assert conditions.find(conds, conditions.READY) is conds[0]
    assert conditions.find(conds, conditions.MASTERS_ELECTED) is None
    assert conditions.find(None, conditions.READY) is None


def test_transitioned() -> None:
    not_ready = conditions.merge(None, [ready("False", "ReplicasNotReady", "0/3")], now=T0, generation=1)
    still_not = conditions.merge(not_ready, [ready("False", "ReplicasNotReady", "2/3")], now=T1, generation=1)
    now_ready = conditions.merge(still_not, [ready("True")], now=T2, generation=1)
    assert conditions.transitioned(None, not_ready, conditions.READY)  # new
    assert conditions.transitioned([], not_ready, conditions.READY)
    assert not conditions.transitioned(not_ready, still_not, conditions.READY)  # only the message moved
    assert conditions.transitioned(still_not, now_ready, conditions.READY)
    assert not conditions.transitioned(now_ready, now_ready, conditions.READY)
    assert not conditions.transitioned(not_ready, not_ready, conditions.MASTERS_ELECTED)  # absent in both
    assert not conditions.transitioned(not_ready, [], conditions.READY)  # removed is not a transition
