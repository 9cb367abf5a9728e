"""Forged controller requests: built from what replica-info tells anyone, judged by refusal and by state."""

from __future__ import annotations

from typing import Any

from brokergroup.chaos.forgery import INFLATED_OFFSET, forged_requests, violations

INFO: dict[str, Any] = {
    "masterBrokerId": 2,
    "masterAddress": "10.77.0.14:10911",
    "masterEpoch": 5,
    "syncStateSet": [1, 2, 3],
    "syncStateSetEpoch": 9,
}


def test_forged_requests_shrink_with_current_epochs_forge_future_ones_and_inflate_offsets() -> None:
    shrink, future, slave, unknown, stream = forged_requests("chaos", "bs0", INFO)
    assert shrink.path == "/v1/alter-sync-state-set"
    assert shrink.body == {
        "brokerName": "bs0",
        "masterBrokerId": 2,
        "masterEpoch": 5,
        "syncStateSet": [2],
        "syncStateSetEpoch": 9,
    }
    assert (future.body["masterEpoch"], future.body["syncStateSetEpoch"], future.body["syncStateSet"]) == (
        6,
        10,
        [1, 2, 3],
    )
    assert slave.path == "/v1/broker/heartbeat"
    assert (slave.body["brokerId"], slave.body["epoch"], slave.body["maxOffset"]) == (1, 5, INFLATED_OFFSET)
    assert unknown.body["brokerId"] not in INFO["syncStateSet"]
    assert stream.path == "/v1/broker/heartbeat-stream"
    assert stream.body["brokerId"] not in [*INFO["syncStateSet"], unknown.body["brokerId"]]


def state(sss: list[int], active: int) -> dict[str, Any]:
    return {"replicaInfo": {**INFO, "syncStateSet": sss}, "activeBrokers": {"n0": active, "n1": active}}


def test_refused_and_unchanged_is_no_violation() -> None:
    answers = [{"what": "x", "controller": "n0", "httpStatus": 403, "refused": True}]
    assert violations(answers, state([1, 2, 3], 3), state([1, 2, 3], 3)) == []


def test_a_request_taken_or_a_changed_fact_is_a_violation() -> None:
    answers: list[dict[str, Any]] = [
        {"what": "shrink", "controller": "n0", "httpStatus": 200, "refused": False},
        {"what": "beat", "controller": "n1", "httpStatus": None, "refused": False},
    ]
    found = violations(answers, state([1, 2, 3], 3), state([2], 4))
    assert found == [
        "shrink: n0 did not refuse it (HTTP 200)",
        "beat: n1 did not refuse it (HTTP None)",
        "syncStateSet changed from [1, 2, 3] to [2]",
        "live brokers on n0 changed from 3 to 4",
        "live brokers on n1 changed from 3 to 4",
    ]
