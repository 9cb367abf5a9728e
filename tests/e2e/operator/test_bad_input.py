"""Bad input that gets past the API server reaches the operator: it reports it and changes nothing."""

from __future__ import annotations

import base64

import yaml
from kubernetes.dynamic import DynamicClient

from tests.e2e.kubeenv import ControlPlane, eventually
from tests.e2e.operator.conftest import OperatorProcess
from tests.e2e.operator.helpers import apply, brokergroup, condition, event_reasons, get, manifest, observed


def test_an_incomplete_auth_secret_is_reported_never_regenerated_and_blocks_the_children(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess, dyn: DynamicClient
) -> None:
    name = "nosecret"
    broken = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{name}-controller-auth", "namespace": namespace},
        "data": {"raftPassword": base64.b64encode(b"kept-as-it-is").decode()},
    }
    apply(control_plane, namespace, yaml.safe_dump(broken))
    apply(control_plane, namespace, manifest(name, {}))

    ready = eventually(
        "Ready=False InvalidSecret",
        lambda: (c := condition(dyn, namespace, name, "Ready")).get("reason") == "InvalidSecret" and c,
        timeout=30,
    )
    assert "adminToken" in ready["message"]
    assert brokergroup(dyn, namespace, name)["status"]["phase"] == "Failed"
    eventually("an InvalidSecret Event", lambda: "InvalidSecret" in event_reasons(dyn, namespace, name))
    assert get(dyn, "apps/v1", "StatefulSet", namespace, f"{name}-controller") is None
    secret = get(dyn, "v1", "Secret", namespace, f"{name}-controller-auth")
    assert secret is not None and set(secret["data"]) == {"raftPassword"}, "the operator rewrote the Secret"

    # Completing the Secret unblocks the group on the next resync (every 2 s in these tests).
    broken["data"]["adminToken"] = base64.b64encode(b"now-complete").decode()
    apply(control_plane, namespace, yaml.safe_dump(broken))
    eventually("children created once the Secret is complete", lambda: observed(dyn, namespace, name), timeout=30)
    assert get(dyn, "apps/v1", "StatefulSet", namespace, f"{name}-controller") is not None
    # A Secret with every original key gets the broker token added (as one from an older operator would);
    # the values it held are untouched.
    completed = get(dyn, "v1", "Secret", namespace, f"{name}-controller-auth")
    assert completed is not None
    assert {k: completed["data"][k] for k in broken["data"]} == broken["data"]
    assert len(base64.b64decode(completed["data"]["brokerToken"])) >= 32


def test_a_pause_annotation_that_is_not_true_or_false_keeps_the_group_paused_and_elections_wait(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess, dyn: DynamicClient
) -> None:
    """`pause-reconciliation=yes` pauses (a typo must not un-pause) and says why; an elect-master request
    made while paused is answered at once (Deferred, an Event, status.lastElectionRequest) and its outcome
    recorded when the group resumes, also for a value that names no set."""
    name = "maybe"
    apply(control_plane, namespace, manifest(name, {}))
    eventually("first reconcile", lambda: observed(dyn, namespace, name), timeout=60)
    control_plane.kubectl("annotate", "-n", namespace, "bg", name, "brokergroup.io/pause-reconciliation=yes")

    paused = eventually(
        "ReconciliationPaused reports the bad value",
        lambda: (
            (c := condition(dyn, namespace, name, "ReconciliationPaused")).get("reason") == "InvalidAnnotation" and c
        ),
        timeout=30,
    )
    assert paused["status"] == "True" and "'yes'" in paused["message"] and "stays paused" in paused["message"]
    control_plane.kubectl(
        "patch", "-n", namespace, "bg", name, "--type=merge", "-p", '{"spec":{"brokers":{"replicas":4}}}'
    )
    control_plane.kubectl("annotate", "-n", namespace, "bg", name, "brokergroup.io/elect-master=other-broker-0-1")
    deferred = eventually(
        "the request is answered at once: Deferred",
        lambda: (
            (r := brokergroup(dyn, namespace, name)["status"].get("lastElectionRequest") or {}).get("result")
            == "Deferred"
            and r
        ),
        timeout=30,
    )
    assert deferred["request"] == "other-broker-0-1" and deferred["reason"] == "Paused", deferred
    eventually("an ElectMasterDeferred Event", lambda: "ElectMasterDeferred" in event_reasons(dyn, namespace, name))
    # Several paused cycles later (resync every 2 s) the spec is still not applied and the request still waits.
    seen = operator.metric("brokergroup_operator_reconciles_total", result="paused")
    eventually(
        "two more paused reconciles",
        lambda: operator.metric("brokergroup_operator_reconciles_total", result="paused") >= seen + 2,
        timeout=30,
    )
    assert (get(dyn, "apps/v1", "StatefulSet", namespace, f"{name}-broker-0") or {})["spec"]["replicas"] == 3
    assert brokergroup(dyn, namespace, name)["metadata"]["annotations"]["brokergroup.io/elect-master"]
    assert event_reasons(dyn, namespace, name).count("ElectMasterDeferred") == 1

    control_plane.kubectl(
        "annotate", "-n", namespace, "bg", name, "brokergroup.io/pause-reconciliation=false", "--overwrite"
    )
    eventually(
        "spec applied once resumed",
        lambda: (get(dyn, "apps/v1", "StatefulSet", namespace, f"{name}-broker-0") or {})["spec"]["replicas"] == 4,
        timeout=30,
    )
    outcome = eventually(
        "the deferred request's outcome is recorded",
        lambda: (
            (r := brokergroup(dyn, namespace, name)["status"].get("lastElectionRequest") or {}).get("result")
            == "Refused"
            and r
        ),
        timeout=30,
    )
    assert outcome["request"] == "other-broker-0-1" and outcome["reason"] == "UnknownPod", outcome
    # The operator writes the status, then posts the Event: poll for it rather than read it once.
    eventually("an ElectMasterRefused Event", lambda: "ElectMasterRefused" in event_reasons(dyn, namespace, name))
    # The refusal is its own Warning Event, not a "ChildrenApplied ... Refused" that reads like success.
    found = dyn.resources.get(api_version="events.k8s.io/v1", kind="Event").get(namespace=namespace).to_dict()
    applied = [e.get("note") or "" for e in found["items"] if e["reason"] == "ChildrenApplied"]
    assert not [note for note in applied if "elect-master" in note], applied
