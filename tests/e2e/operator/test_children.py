"""The operator against a real kube-apiserver: examples become children, spec changes reach them,
deletes cascade, and a restart with nothing changed writes nothing."""

from __future__ import annotations

import base64
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.dynamic import DynamicClient

from tests.e2e.helmchart import InCluster
from tests.e2e.kubeenv import ControlPlane, eventually
from tests.e2e.operator.conftest import ROOT, OperatorProcess, StartOperator
from tests.e2e.operator.helpers import (
    apply,
    brokergroup,
    condition,
    event_reasons,
    get,
    manifest,
    observed,
    patch_spec,
)

EXAMPLES = ROOT / "examples"
LAST_HANDLED = "operator.brokergroup.io/last-handled-configuration"


def load_example(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return doc


def children(bg: str) -> list[tuple[str, str, str]]:
    return [
        ("v1", "ConfigMap", f"{bg}-config"),
        ("v1", "Secret", f"{bg}-controller-auth"),
        ("v1", "Service", f"{bg}-controller"),
        ("v1", "Service", f"{bg}-controller-api"),
        ("apps/v1", "StatefulSet", f"{bg}-controller"),
        ("v1", "Service", f"{bg}-broker-0"),
        ("v1", "Service", f"{bg}-broker-0-master"),
        ("apps/v1", "StatefulSet", f"{bg}-broker-0"),
        ("networking.k8s.io/v1", "NetworkPolicy", f"{bg}-controller-raft"),
    ]


def test_minimal_example_creates_every_child_with_the_expected_spec(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess, dyn: DynamicClient
) -> None:
    control_plane.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "minimal.yaml"))
    name = load_example("minimal.yaml")["metadata"]["name"]
    bg = eventually("status.observedGeneration set", lambda: observed(dyn, namespace, name), timeout=60)
    uid = bg["metadata"]["uid"]

    for api_version, kind, child in children(name):
        obj = get(dyn, api_version, kind, namespace, child)
        assert obj is not None, f"{kind} {child} was not created"
        refs = obj["metadata"].get("ownerReferences") or []
        assert [r["uid"] for r in refs] == [uid], f"{kind} {child}: ownerReferences {refs}"
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/instance"] == name
        assert labels["app.kubernetes.io/managed-by"] == "brokergroup-operator"
        assert labels["app.kubernetes.io/name"] == "brokergroup"

    controller = get(dyn, "apps/v1", "StatefulSet", namespace, f"{name}-controller")
    broker = get(dyn, "apps/v1", "StatefulSet", namespace, f"{name}-broker-0")
    assert controller is not None and broker is not None
    assert controller["spec"]["replicas"] == 3
    assert broker["spec"]["replicas"] == 3
    # Defaults from the CRD reached the containers.
    container = broker["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"] == {"cpu": "250m", "memory": "512Mi"}
    assert container["securityContext"]["runAsNonRoot"] is True
    claim = broker["spec"]["volumeClaimTemplates"][0]
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"

    master = get(dyn, "v1", "Service", namespace, f"{name}-broker-0-master")
    assert master is not None
    assert master["spec"]["selector"] == {
        "brokergroup.io/broker-set": f"{name}-broker-0",
        "brokergroup.io/role": "master",
    }
    secret = get(dyn, "v1", "Secret", namespace, f"{name}-controller-auth")
    assert secret is not None
    for key in ("raftPassword", "adminToken", "brokerToken"):
        assert len(base64.b64decode(secret["data"][key])) >= 32, key
    pdbs = {
        p["metadata"]["name"]
        for p in dyn.resources.get(api_version="policy/v1", kind="PodDisruptionBudget")
        .get(namespace=namespace)
        .to_dict()["items"]
    }
    assert pdbs == {f"{name}-controller", f"{name}-broker-0"}

    status = bg["status"]
    assert status["observedGeneration"] == bg["metadata"]["generation"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == "ReplicasNotReady"  # no kubelet runs the pods
    assert status["setsHoldingData"] == 0
    # The operator posts its Events after it writes the status.
    eventually("a ChildrenApplied Event", lambda: "ChildrenApplied" in event_reasons(dyn, namespace, name))


def test_full_example_applies_every_field(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess, dyn: DynamicClient
) -> None:
    doc = load_example("full.yaml")
    spec = doc["spec"]
    name = doc["metadata"]["name"]
    control_plane.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "full.yaml"))
    eventually("status.observedGeneration set", lambda: observed(dyn, namespace, name), timeout=60)

    for index in range(spec["brokers"]["sets"]):
        sts = get(dyn, "apps/v1", "StatefulSet", namespace, f"{name}-broker-{index}")
        assert sts is not None, f"set {index} missing"
        assert sts["spec"]["replicas"] == spec["brokers"]["replicas"]
        pod = sts["spec"]["template"]["spec"]
        assert pod["containers"][0]["image"] == spec["image"]
        assert pod["containers"][0]["resources"] == normalise(spec["brokers"]["resources"])
        claim = sts["spec"]["volumeClaimTemplates"][0]["spec"]
        assert claim["resources"]["requests"]["storage"] == spec["brokers"]["storage"]["size"]
        assert claim.get("storageClassName") == spec["brokers"]["storage"].get("storageClassName")
    assert get(dyn, "apps/v1", "StatefulSet", namespace, f"{name}-broker-{spec['brokers']['sets']}") is None
    controller = get(dyn, "apps/v1", "StatefulSet", namespace, f"{name}-controller")
    assert controller is not None
    assert controller["spec"]["replicas"] == spec["controller"]["replicas"]
    assert controller["spec"]["template"]["spec"]["containers"][0]["resources"] == normalise(
        spec["controller"]["resources"]
    )
    config = get(dyn, "v1", "ConfigMap", namespace, f"{name}-config")
    assert config is not None
    assert (
        f"heartbeat_timeout_ms = {spec['controller']['heartbeatTimeoutSeconds'] * 1000}"
        in config["data"]["broker.toml"]
    )
    pdb_enabled = spec.get("podDisruptionBudget", {}).get("enabled", True)
    assert (get(dyn, "policy/v1", "PodDisruptionBudget", namespace, f"{name}-broker-0") is not None) == pdb_enabled


def normalise(resources: dict[str, Any]) -> dict[str, Any]:
    return {part: {k: str(v) for k, v in values.items()} for part, values in resources.items()}


def test_spec_changes_reach_the_children_and_delete_cleans_up(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess, dyn: DynamicClient
) -> None:
    name = "grow"
    apply(control_plane, namespace, manifest(name, {"brokers": {"replicas": 2}}))
    eventually("first reconcile", lambda: observed(dyn, namespace, name), timeout=60)
    secret_before = get(dyn, "v1", "Secret", namespace, f"{name}-controller-auth")
    assert secret_before is not None

    patch_spec(
        dyn,
        namespace,
        name,
        {
            "brokers": {"replicas": 3, "sets": 2, "resources": {"requests": {"cpu": "300m", "memory": "600Mi"}}},
            "podDisruptionBudget": {"enabled": False},
            "controller": {"electUncleanMaster": True},
        },
    )

    def applied() -> bool:
        if observed(dyn, namespace, name) is None:
            return False
        sets = [get(dyn, "apps/v1", "StatefulSet", namespace, f"{name}-broker-{i}") for i in (0, 1)]
        return all(s is not None and s["spec"]["replicas"] == 3 for s in sets)

    eventually("spec change applied", applied, timeout=60)
    sts = get(dyn, "apps/v1", "StatefulSet", namespace, f"{name}-broker-0")
    assert sts is not None
    assert sts["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "300m",
        "memory": "600Mi",
    }
    for pdb in (f"{name}-controller", f"{name}-broker-0", f"{name}-broker-1"):
        assert get(dyn, "policy/v1", "PodDisruptionBudget", namespace, pdb) is None, f"{pdb} not pruned"
    config = get(dyn, "v1", "ConfigMap", namespace, f"{name}-config")
    assert config is not None and "enable_elect_unclean_master = true" in config["data"]["controller.toml"]
    assert get(dyn, "v1", "Service", namespace, f"{name}-broker-1-master") is not None
    secret_after = get(dyn, "v1", "Secret", namespace, f"{name}-controller-auth")
    assert secret_after is not None and secret_after["data"] == secret_before["data"], "the Secret was regenerated"

    # A deleted child comes back (drift repair), unchanged.
    dyn.resources.get(api_version="v1", kind="Service").delete(name=f"{name}-broker-1-master", namespace=namespace)
    eventually(
        "deleted master Service recreated",
        lambda: get(dyn, "v1", "Service", namespace, f"{name}-broker-1-master") is not None,
        timeout=30,
    )

    control_plane.kubectl(
        "delete", "-n", namespace, "brokergroup", name, "--wait=true", "--timeout=60s", timeout=90
    )  # kubectl times out first, and says so
    eventually(
        "children garbage-collected",
        lambda: all(get(dyn, v, k, namespace, c) is None for v, k, c in children(name)),
        timeout=60,
    )


def test_a_size_the_claims_cannot_take_is_refused_and_changes_nothing_else(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess, dyn: DynamicClient
) -> None:
    """Raising the broker storage size while the claims cannot grow (here: no pod runs, so no claim is bound;
    elsewhere a StorageClass without allowVolumeExpansion): the API server's refusal is in `StorageResized`
    and one Warning Event; the StatefulSet and the claims keep their size; other changes still apply."""
    name = "sized"
    apply(control_plane, namespace, manifest(name, {"brokers": {"replicas": 1, "minInSyncReplicas": 1}}))
    sts_name, claim = f"{name}-broker-0", f"data-{name}-broker-0-0"

    def claim_request() -> str | None:
        pvc = get(dyn, "v1", "PersistentVolumeClaim", namespace, claim)
        return None if pvc is None else str(pvc["spec"]["resources"]["requests"]["storage"])

    eventually("the StatefulSet controller made the claim", claim_request, timeout=60)
    sts = get(dyn, "apps/v1", "StatefulSet", namespace, sts_name)
    assert sts is not None
    patch_spec(dyn, namespace, name, {"brokers": {"replicas": 2, "storage": {"size": "20Gi"}}})

    def refused() -> dict[str, Any] | None:
        cond = condition(dyn, namespace, name, "StorageResized")
        return cond if cond.get("reason") == "ResizeRefused" else None

    cond = eventually("StorageResized=False (ResizeRefused)", refused, timeout=60)
    assert cond["status"] == "False", cond
    assert cond["message"].startswith(f"growing the claims of {sts_name} to 20Gi was refused: HTTP 4"), cond
    assert "allowVolumeExpansion" in cond["message"], cond
    after = get(dyn, "apps/v1", "StatefulSet", namespace, sts_name)
    assert after is not None and after["metadata"]["uid"] == sts["metadata"]["uid"], "the StatefulSet was re-created"
    assert after["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"] == {"storage": "10Gi"}
    assert after["spec"]["replicas"] == 2  # the rest of the change applied
    assert claim_request() == "10Gi"
    eventually("one ResizeRefused Event", lambda: event_reasons(dyn, namespace, name).count("ResizeRefused") == 1)
    assert brokergroup(dyn, namespace, name)["status"]["storage"] == {"controller": "1Gi", "brokers": "10Gi"}
    # The API server lets the spec go back to the claims' size (status.storage): nothing is left to grow.
    patch_spec(dyn, namespace, name, {"brokers": {"storage": {"size": "10Gi"}}})
    resized = eventually(
        "StorageResized back to its size",
        lambda: (lambda c: c if c.get("reason") != "ResizeRefused" else None)(
            condition(dyn, namespace, name, "StorageResized")
        ),
        timeout=60,
    )
    # No claim is bound here, so none has a capacity yet: the condition names them instead of calling it done.
    assert (resized["status"], resized["reason"]) == ("False", "Resizing"), resized
    assert f"{claim} has no capacity of 10Gi" in resized["message"], resized
    assert event_reasons(dyn, namespace, name).count("ResizeRefused") == 1


def test_restart_with_nothing_changed_writes_nothing(
    control_plane: ControlPlane,
    namespace: str,
    operator: OperatorProcess,
    dyn: DynamicClient,
    operator_login: InCluster,
) -> None:
    name = "steady"
    apply(control_plane, namespace, manifest(name, {"brokers": {"sets": 2}}))
    eventually("first reconcile", lambda: observed(dyn, namespace, name), timeout=60)
    # kopf records the handled spec in an annotation once the create handler returned.
    eventually(
        "kopf recorded the handled spec",
        lambda: LAST_HANDLED in (brokergroup(dyn, namespace, name)["metadata"].get("annotations") or {}),
        timeout=30,
    )

    # The follower (started from the BrokerGroup's first watch event) has found the controller unreachable,
    # said so once (status, Event) and had the reconcile recompute Ready.
    eventually(
        "the follower reported the unreachable controller",
        lambda: (
            condition(dyn, namespace, name, "MasterServicesReady").get("reason") == "ControllerUnreachable"
            and operator.metric("brokergroup_operator_reconciles_total", trigger="follower") >= 1
        ),
        timeout=30,
    )

    # The StatefulSet controller has caught up with every spec (Ready's message stops saying otherwise):
    # until then a restarted operator has a real change to write.
    eventually(
        "the StatefulSet controller saw every spec",
        lambda: "has not seen the latest spec" not in str(condition(dyn, namespace, name, "Ready").get("message")),
        timeout=60,
    )

    # Settled: several resync periods (2 s) pass without a write.
    def quiet_since(mark: int) -> bool:
        return not control_plane.audit_writes(operator_login.user, after=mark)

    mark = control_plane.mark()
    writes_before = operator.metric("brokergroup_operator_api_writes_total")
    # Counted from the mark: a total reached before it would end the wait at once, with no resync looked at.
    unchanged = operator.metric("brokergroup_operator_reconciles_total", result="no_change")
    eventually(
        "the operator reconciled 3 more times",
        lambda: operator.metric("brokergroup_operator_reconciles_total", result="no_change") >= unchanged + 3,
        timeout=30,
    )
    assert quiet_since(mark), [
        (w["verb"], w["objectRef"], w.get("requestURI"))
        for w in control_plane.audit_writes(operator_login.user, after=mark)
    ]
    assert operator.metric("brokergroup_operator_api_writes_total") == writes_before

    operator.stop()
    mark = control_plane.mark()
    operator.start()
    eventually(
        "the restarted operator resumed and resynced",
        lambda: operator.metric("brokergroup_operator_reconciles_total", trigger="timer") >= 2,
        timeout=30,
    )
    writes = control_plane.audit_writes(operator_login.user, after=mark)
    assert writes == [], [(w["verb"], w["objectRef"]) for w in writes]
    assert operator.metric("brokergroup_operator_api_writes_total") == 0


def test_pause_annotation_stops_reconciliation_and_shows_a_condition(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess, dyn: DynamicClient, tmp_path: Path
) -> None:
    name = "paused"
    apply(control_plane, namespace, manifest(name, {}))
    eventually("first reconcile", lambda: observed(dyn, namespace, name), timeout=60)
    control_plane.kubectl("annotate", "-n", namespace, "bg", name, "brokergroup.io/pause-reconciliation=true")

    def paused() -> bool:
        conds = (brokergroup(dyn, namespace, name).get("status") or {}).get("conditions") or []
        return any(c["type"] == "ReconciliationPaused" and c["status"] == "True" for c in conds)

    eventually("ReconciliationPaused=True", paused, timeout=30)
    patch_spec(dyn, namespace, name, {"brokers": {"replicas": 5}})
    # While paused, resyncs run and change nothing: wait for two, then look.
    count = operator.metric("brokergroup_operator_reconciles_total", result="paused")
    eventually(
        "two paused reconciles",
        lambda: operator.metric("brokergroup_operator_reconciles_total", result="paused") >= count + 2,
        timeout=30,
    )
    sts = get(dyn, "apps/v1", "StatefulSet", namespace, f"{name}-broker-0")
    assert sts is not None and sts["spec"]["replicas"] == 3
    assert brokergroup(dyn, namespace, name)["status"]["phase"] == "Paused"

    control_plane.kubectl("annotate", "-n", namespace, "bg", name, "brokergroup.io/pause-reconciliation-")
    eventually(
        "resumed and applied",
        lambda: (get(dyn, "apps/v1", "StatefulSet", namespace, f"{name}-broker-0") or {})["spec"]["replicas"] == 5,
        timeout=30,
    )

    def resumed() -> dict[str, Any] | None:
        conds = brokergroup(dyn, namespace, name)["status"]["conditions"]
        found = next(c for c in conds if c["type"] == "ReconciliationPaused")
        return found if found["status"] == "False" else None

    condition = eventually("ReconciliationPaused=False", resumed, timeout=30)
    assert condition["reason"] == "Resumed"
    assert "Paused" not in brokergroup(dyn, namespace, name)["status"]["phase"]


@pytest.fixture
def silent_controller() -> Iterator[str]:
    """A controller URL that takes connections and never answers: every call the operator makes to it
    lasts the operator's whole controller timeout (5 s)."""
    with socket.create_server(("127.0.0.1", 0), backlog=64) as server:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


def test_delete_is_prompt_while_the_resync_timer_waits_behind_a_slow_controller(
    control_plane: ControlPlane,
    namespace: str,
    start_operator: StartOperator,
    silent_controller: str,
    dyn: DynamicClient,
) -> None:
    """The follower holds the group's lock through each 5 s controller call, so the 2 s resync timer is
    nearly always waiting for it. kopf cannot cancel a timer and re-checks a stopping one every
    `cancellation_polling` seconds: at kopf's default (60) the deletion waited a minute."""
    start_operator(silent_controller)
    name = "slow"
    apply(control_plane, namespace, manifest(name, {"brokers": {"replicas": 1, "minInSyncReplicas": 1}}))
    eventually("first reconcile", lambda: observed(dyn, namespace, name), timeout=60)
    eventually(
        "the follower timed out on the controller",
        lambda: condition(dyn, namespace, name, "ControllerQuorumAvailable").get("reason") == "ControllerUnreachable",
        timeout=30,
    )
    started = time.monotonic()
    control_plane.kubectl("delete", "-n", namespace, "brokergroup", name, "--wait=true", "--timeout=90s", timeout=120)
    took = time.monotonic() - started
    print(f"\ndeleted in {took:.1f} s")
    assert took < 20, f"the deletion took {took:.1f} s: kopf waited for a stopping timer"
