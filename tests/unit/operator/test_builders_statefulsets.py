"""The controller and broker StatefulSets: selectors, pod labels, containers, security, storage."""

from __future__ import annotations

from typing import Any

import pytest
from builder_factories import children, only_container, pod_spec, spec

CONTAINER_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 10001,
    "runAsGroup": 10001,
    "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTROLLER_SELECTOR = {
    "app.kubernetes.io/name": "brokergroup",
    "app.kubernetes.io/instance": "demo",
    "app.kubernetes.io/component": "controller",
}


def statefulset(name: str, **fields: Any) -> dict[str, Any]:
    result: dict[str, Any] = children(spec(**fields))[("StatefulSet", name)]
    return result


def test_controller_statefulset_shape() -> None:
    sts = statefulset("demo-controller", controller={"replicas": 5})["spec"]
    assert sts["replicas"] == 5
    assert sts["serviceName"] == "demo-controller"
    assert sts["podManagementPolicy"] == "Parallel"
    assert sts["updateStrategy"] == {"type": "RollingUpdate"}
    assert sts["selector"] == {"matchLabels": CONTROLLER_SELECTOR}
    assert sts["template"]["metadata"]["labels"] == {
        "app.kubernetes.io/name": "brokergroup",
        "app.kubernetes.io/instance": "demo",
        "app.kubernetes.io/managed-by": "brokergroup-operator",
        "app.kubernetes.io/component": "controller",
        "brokergroup.io/group": "demo",
    }


def test_controller_container() -> None:
    container = only_container(
        statefulset("demo-controller", image="registry.example/bg:1.2", imagePullPolicy="Always")
    )
    assert container["name"] == "controller"
    assert (container["image"], container["imagePullPolicy"]) == ("registry.example/bg:1.2", "Always")
    assert container["command"] == ["brokergroup", "controller", "--config", "/etc/brokergroup/controller.toml"]
    assert [(p["name"], p["containerPort"]) for p in container["ports"]] == [("raft", 9877), ("api", 9878)]
    assert container["env"] == [
        {
            "name": "BG_CONTROLLER_NODE_ID",
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
        },
        {
            "name": "BG_CONTROLLER_RAFT__PASSWORD",
            "valueFrom": {"secretKeyRef": {"name": "demo-controller-auth", "key": "raftPassword", "optional": False}},
        },
        {
            "name": "BG_CONTROLLER_API__ADMIN_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "demo-controller-auth", "key": "adminToken", "optional": False}},
        },
        {
            "name": "BG_CONTROLLER_API__BROKER_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "demo-controller-auth", "key": "brokerToken", "optional": False}},
        },
    ]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "api", "scheme": "HTTP"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "api", "scheme": "HTTP"}
    assert (container["livenessProbe"]["failureThreshold"], container["livenessProbe"]["periodSeconds"]) == (6, 10)
    assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert container["resources"] == {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}}


def test_broker_statefulset_shape_and_labels_without_role() -> None:
    sts = statefulset("demo-broker-2", brokers={"sets": 3, "replicas": 4})["spec"]
    selector = {
        "app.kubernetes.io/name": "brokergroup",
        "app.kubernetes.io/instance": "demo",
        "app.kubernetes.io/component": "broker",
        "brokergroup.io/broker-set": "demo-broker-2",
    }
    assert (sts["replicas"], sts["serviceName"], sts["podManagementPolicy"]) == (4, "demo-broker-2", "Parallel")
    assert sts["selector"] == {"matchLabels": selector}
    pod_labels = sts["template"]["metadata"]["labels"]
    assert selector.items() <= pod_labels.items()
    assert pod_labels["app.kubernetes.io/managed-by"] == "brokergroup-operator"
    assert "brokergroup.io/role" not in pod_labels and "brokergroup.io/broker-id" not in pod_labels


def test_broker_container() -> None:
    container = only_container(
        statefulset(
            "demo-broker-1", brokers={"sets": 2, "resources": {"requests": {"cpu": 1}, "limits": {"memory": "2Gi"}}}
        )
    )
    assert container["name"] == "broker"
    assert container["command"] == ["brokergroup", "broker", "--config", "/etc/brokergroup/broker.toml"]
    assert [(p["name"], p["containerPort"]) for p in container["ports"]] == [
        ("http", 10911),
        ("ha", 10912),
        ("binary", 10909),
    ]
    assert container["env"] == [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
        {"name": "BG_BROKER_BROKER_NAME", "value": "demo-broker-1"},
        {"name": "BG_BROKER_ADVERTISE_HOST", "value": "$(POD_NAME).demo-broker-1.mq.svc"},
        {"name": "BG_BROKER_KUBERNETES__ENABLED", "value": "true"},
        {
            "name": "BG_BROKER_KUBERNETES__POD_NAME",
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
        },
        {
            "name": "BG_BROKER_KUBERNETES__NAMESPACE",
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}},
        },
        {
            "name": "BG_BROKER_CONTROLLER__BROKER_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "demo-controller-auth", "key": "brokerToken", "optional": False}},
        },
    ]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http", "scheme": "HTTP"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http", "scheme": "HTTP"}
    assert container["resources"] == {"requests": {"cpu": "1"}, "limits": {"memory": "2Gi"}}


@pytest.mark.parametrize(
    ("name", "grace", "config_file"), [("demo-controller", 30, "controller.toml"), ("demo-broker-0", 60, "broker.toml")]
)
def test_pods_run_locked_down(name: str, grace: int, config_file: str) -> None:
    sts = statefulset(name)
    pod = pod_spec(sts)
    container = only_container(sts)
    assert container["securityContext"] == CONTAINER_SECURITY
    assert pod["securityContext"]["fsGroup"] == 10001
    assert pod["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["enableServiceLinks"] is False
    if name.startswith("demo-broker"):  # brokers patch their own role label, as the broker ServiceAccount
        assert (pod["serviceAccountName"], pod["automountServiceAccountToken"]) == ("demo-broker", True)
    else:
        assert "serviceAccountName" not in pod
        assert pod["automountServiceAccountToken"] is False
    assert pod["terminationGracePeriodSeconds"] == grace
    assert container["volumeMounts"] == [
        {"name": "data", "mountPath": "/var/lib/brokergroup"},
        {"name": "config", "mountPath": "/etc/brokergroup", "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    assert pod["volumes"] == [
        {
            "name": "config",
            "configMap": {
                "name": "demo-config",
                "items": [{"key": config_file, "path": config_file}],
                "defaultMode": 0o444,
            },
        },
        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
    ]


@pytest.mark.parametrize("name", ["demo-controller", "demo-broker-0"])
def test_pods_prefer_distinct_nodes(name: str) -> None:
    sts = statefulset(name)
    (term,) = pod_spec(sts)["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"] == {
        "labelSelector": sts["spec"]["selector"],
        "topologyKey": "kubernetes.io/hostname",
    }
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in pod_spec(sts)["affinity"]["podAntiAffinity"]


def test_volume_claim_templates_follow_storage() -> None:
    controller = statefulset("demo-controller")
    broker = statefulset("demo-broker-0", brokers={"storage": {"size": "50Gi", "storageClassName": "fast-ssd"}})
    (claim,) = controller["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    (claim,) = broker["spec"]["volumeClaimTemplates"]
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "50Gi"}},
        "storageClassName": "fast-ssd",
    }
    assert claim["metadata"]["labels"]["brokergroup.io/broker-set"] == "demo-broker-0"
