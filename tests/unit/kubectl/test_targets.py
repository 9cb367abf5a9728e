"""Which set a pod named on the command line is in, and the refusals before any switchover request."""

from __future__ import annotations

from typing import Any

import pytest

from brokergroup.kubectl import targets
from brokergroup.kubectl.targets import PluginError


def bg(**overrides: Any) -> dict[str, Any]:
    sets = [
        {"name": "bg-broker-0", "desiredReplicas": 3, "masterPod": "bg-broker-0-0", "masterEpoch": 2},
        {"name": "bg-broker-1", "desiredReplicas": 2, "masterPod": "bg-broker-1-1", "masterEpoch": 1},
    ]
    obj: dict[str, Any] = {
        "metadata": {"name": "bg", "namespace": "mq", "annotations": {}},
        "status": {"brokerSets": sets},
    }
    obj["metadata"]["annotations"].update(overrides.get("annotations", {}))
    obj["status"]["conditions"] = overrides.get("conditions", [])
    return obj


@pytest.mark.parametrize(("pod", "set_name"), [("bg-broker-0-2", "bg-broker-0"), ("bg-broker-1-0", "bg-broker-1")])
def test_a_pod_maps_to_its_set(pod: str, set_name: str) -> None:
    assert targets.set_of_pod(bg(), pod) == set_name


@pytest.mark.parametrize(
    ("pod", "words"),
    [
        ("bg-broker-1-2", "has 2 replicas (ordinals 0-1)"),
        ("bg-controller-0", "is not a broker pod of brokergroup mq/bg"),
        ("other-broker-0-1", "is not a broker pod of brokergroup mq/bg"),
        ("bg-broker-2-0", "sets: bg-broker-0, bg-broker-1"),
        ("bg-broker-0-01", "is not a broker pod"),
        ("", "is not a broker pod"),
    ],
)
def test_pods_of_no_set_are_refused_with_a_line_naming_them(pod: str, words: str) -> None:
    with pytest.raises(PluginError) as err:
        targets.set_of_pod(bg(), pod)
    assert words in str(err.value)
    assert "\n" not in str(err.value)


def test_switchover_refusals() -> None:
    assert targets.switchover_problem(bg(), "bg-broker-0-1", "bg-broker-0") is None
    assert "already the master of bg-broker-0 (epoch 2)" in str(
        targets.switchover_problem(bg(), "bg-broker-0-0", "bg-broker-0")
    )
    paused = bg(conditions=[{"type": "ReconciliationPaused", "status": "True"}])
    assert "is paused; run `kubectl brokergroup resume bg` first" in str(
        targets.switchover_problem(paused, "bg-broker-0-1", "bg-broker-0")
    )
    asked = bg(annotations={"brokergroup.io/pause-reconciliation": "true"})
    assert "is paused" in str(targets.switchover_problem(asked, "bg-broker-0-1", "bg-broker-0"))
    pending = bg(annotations={"brokergroup.io/elect-master": "bg-broker-0-2"})
    assert "request for bg-broker-0-2 is still waiting" in str(
        targets.switchover_problem(pending, "bg-broker-0-1", "bg-broker-0")
    )


def test_only_a_new_record_for_our_pod_is_an_answer() -> None:
    old = {"request": "bg-broker-0-1", "result": "Elected", "time": "t1", "masterEpoch": 2}
    assert not targets.election_answer(old, old, "bg-broker-0-1")
    assert not targets.election_answer(old, {**old, "request": "bg-broker-0-2", "time": "t2"}, "bg-broker-0-1")
    assert targets.election_answer(old, {**old, "time": "t2", "masterEpoch": 3}, "bg-broker-0-1")
    assert targets.election_answer(None, {"request": "bg-broker-0-1", "result": "Refused"}, "bg-broker-0-1")
    assert not targets.election_answer(old, None, "bg-broker-0-1")


def with_replicas(ready: int = 3, in_sync: tuple[str, ...] = ("bg-broker-0-0", "bg-broker-0-2")) -> dict[str, Any]:
    obj = bg()
    entry = obj["status"]["brokerSets"][0]
    entry["readyReplicas"] = ready
    entry["replicas"] = [
        {"pod": f"bg-broker-0-{i}", "inSync": f"bg-broker-0-{i}" in in_sync, "alive": True} for i in range(3)
    ]
    return obj


def test_restart_a_slave_needs_no_handover_and_the_master_goes_last() -> None:
    assert targets.restart_handover(with_replicas(), "bg-broker-0-1", "bg-broker-0") is None
    assert targets.restart_handover(with_replicas(), "bg-broker-0-0", "bg-broker-0") == "bg-broker-0-2"


@pytest.mark.parametrize(
    ("obj", "pod", "words"),
    [
        (with_replicas(ready=2), "bg-broker-0-1", "has 2/3 replicas ready"),
        (with_replicas(in_sync=("bg-broker-0-0",)), "bg-broker-0-0", "no other replica is in sync and alive"),
    ],
)
def test_restart_refusals(obj: dict[str, Any], pod: str, words: str) -> None:
    with pytest.raises(PluginError) as err:
        targets.restart_handover(obj, pod, "bg-broker-0")
    assert words in str(err.value) and "\n" not in str(err.value)


def test_restarting_the_master_of_a_paused_group_is_refused() -> None:
    paused = with_replicas()
    paused["status"]["conditions"] = [{"type": "ReconciliationPaused", "status": "True"}]
    with pytest.raises(PluginError) as err:
        targets.restart_handover(paused, "bg-broker-0-0", "bg-broker-0")
    assert "must be switched over first, but brokergroup bg is paused" in str(err.value)
    assert targets.restart_handover(paused, "bg-broker-0-1", "bg-broker-0") is None
    assert targets.restart_handover(with_replicas(ready=2), "bg-broker-0-1", "bg-broker-0", force=True) is None
    # The one replica down is the pod itself (a fenced broker is never Ready): it may be restarted.
    assert targets.restart_handover(with_replicas(ready=2), "bg-broker-0-1", "bg-broker-0", pod_ready=False) is None


def test_controller_pods_are_known() -> None:
    assert targets.controller_pod_ordinal(bg(), "bg-controller-2") == 2
    assert targets.controller_pod_ordinal(bg(), "bg-broker-0-2") is None
