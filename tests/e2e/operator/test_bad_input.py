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
    assert "InvalidSecret" in event_reasons(dyn, namespace, name)
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


def test_a_pause_annotation_that_is_not_true_or_false_is_reported_and_does_not_pause(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess, dyn: DynamicClient
) -> None:
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
    assert paused["status"] == "False" and "'yes'" in paused["message"]
    control_plane.kubectl(
        "patch", "-n", namespace, "bg", name, "--type=merge", "-p", '{"spec":{"brokers":{"replicas":4}}}'
    )
    eventually(
        "spec still applied",
        lambda: (get(dyn, "apps/v1", "StatefulSet", namespace, f"{name}-broker-0") or {})["spec"]["replicas"] == 4,
        timeout=30,
    )
