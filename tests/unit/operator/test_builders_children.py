"""desired_children: which objects, in which order, with which metadata, Services and policies."""

from __future__ import annotations

from builder_factories import OWNER, children, spec

from brokergroup.operator.builders import Owner, desired_children, owner_reference

DEFAULT_CHILDREN = [
    ("ConfigMap", "demo-config"),
    ("Service", "demo-controller"),
    ("Service", "demo-controller-api"),
    ("Service", "demo-broker-0"),
    ("Service", "demo-broker-0-master"),
    ("ServiceAccount", "demo-broker"),
    ("Role", "demo-broker"),
    ("RoleBinding", "demo-broker"),
    ("StatefulSet", "demo-controller"),
    ("StatefulSet", "demo-broker-0"),
    ("PodDisruptionBudget", "demo-controller"),
    ("PodDisruptionBudget", "demo-broker-0"),
    ("NetworkPolicy", "demo-controller-raft"),
]
API_VERSIONS = {
    "ConfigMap": "v1",
    "Service": "v1",
    "StatefulSet": "apps/v1",
    "PodDisruptionBudget": "policy/v1",
    "NetworkPolicy": "networking.k8s.io/v1",
    "ServiceAccount": "v1",
    "Role": "rbac.authorization.k8s.io/v1",
    "RoleBinding": "rbac.authorization.k8s.io/v1",
}
OWNER_REF = {
    "apiVersion": "brokergroup.io/v1alpha1",
    "kind": "BrokerGroup",
    "name": "demo",
    "uid": "0b7f6c1e-uid",
    "controller": True,
    "blockOwnerDeletion": True,
}


def test_default_spec_children_in_apply_order() -> None:
    built = desired_children(OWNER, spec())
    assert [(c["kind"], c["metadata"]["name"]) for c in built] == DEFAULT_CHILDREN
    assert {c["kind"]: c["apiVersion"] for c in built} == API_VERSIONS


def test_three_sets_give_three_of_each_per_set_object_in_order() -> None:
    built = desired_children(OWNER, spec(brokers={"sets": 3}))
    names = [(c["kind"], c["metadata"]["name"]) for c in built]
    assert names == [
        ("ConfigMap", "demo-config"),
        ("Service", "demo-controller"),
        ("Service", "demo-controller-api"),
        ("Service", "demo-broker-0"),
        ("Service", "demo-broker-0-master"),
        ("Service", "demo-broker-1"),
        ("Service", "demo-broker-1-master"),
        ("Service", "demo-broker-2"),
        ("Service", "demo-broker-2-master"),
        ("ServiceAccount", "demo-broker"),
        ("Role", "demo-broker"),
        ("RoleBinding", "demo-broker"),
        ("StatefulSet", "demo-controller"),
        ("StatefulSet", "demo-broker-0"),
        ("StatefulSet", "demo-broker-1"),
        ("StatefulSet", "demo-broker-2"),
        ("PodDisruptionBudget", "demo-controller"),
        ("PodDisruptionBudget", "demo-broker-0"),
        ("PodDisruptionBudget", "demo-broker-1"),
        ("PodDisruptionBudget", "demo-broker-2"),
        ("NetworkPolicy", "demo-controller-raft"),
    ]


def test_every_child_is_owned_namespaced_and_labelled() -> None:
    for (kind, name), child in children(spec(brokers={"sets": 2})).items():
        meta = child["metadata"]
        assert meta["namespace"] == "mq", name
        assert meta["ownerReferences"] == [OWNER_REF], (kind, name)
        assert {
            "app.kubernetes.io/name": "brokergroup",
            "app.kubernetes.io/instance": "demo",
            "app.kubernetes.io/managed-by": "brokergroup-operator",
            "brokergroup.io/group": "demo",
        }.items() <= meta["labels"].items(), (kind, name)
        assert "brokergroup.io/role" not in meta["labels"]


def test_component_and_set_labels() -> None:
    objects = children(spec(brokers={"sets": 2}))
    components = {key: c["metadata"]["labels"].get("app.kubernetes.io/component") for key, c in objects.items()}
    assert components[("ConfigMap", "demo-config")] is None
    assert {k for k, v in components.items() if v == "controller"} == {
        ("Service", "demo-controller"),
        ("Service", "demo-controller-api"),
        ("StatefulSet", "demo-controller"),
        ("PodDisruptionBudget", "demo-controller"),
        ("NetworkPolicy", "demo-controller-raft"),
    }
    for kind, name in [
        ("Service", "demo-broker-1"),
        ("Service", "demo-broker-1-master"),
        ("StatefulSet", "demo-broker-1"),
        ("PodDisruptionBudget", "demo-broker-1"),
    ]:
        labels = objects[(kind, name)]["metadata"]["labels"]
        assert (labels["app.kubernetes.io/component"], labels["brokergroup.io/broker-set"]) == (
            "broker",
            "demo-broker-1",
        )


def test_owner_reference_of_another_owner() -> None:
    other = Owner(name="x", namespace="y", uid="u", api_version="brokergroup.io/v1", kind="BrokerGroup")
    assert owner_reference(other) == {
        "apiVersion": "brokergroup.io/v1",
        "kind": "BrokerGroup",
        "name": "x",
        "uid": "u",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    built = desired_children(other, spec())
    assert {c["metadata"]["namespace"] for c in built} == {"y"}
    assert {c["metadata"]["name"] for c in built} >= {"x-config", "x-controller", "x-broker-0-master"}


# ---- Services ---------------------------------------------------------------------------------------------


def test_controller_services() -> None:
    objects = children()
    headless = objects[("Service", "demo-controller")]["spec"]
    api = objects[("Service", "demo-controller-api")]["spec"]
    selector = {
        "app.kubernetes.io/name": "brokergroup",
        "app.kubernetes.io/instance": "demo",
        "app.kubernetes.io/component": "controller",
    }
    assert headless == {
        "clusterIP": "None",
        "publishNotReadyAddresses": True,
        "selector": selector,
        "ports": [
            {"name": "raft", "port": 9877, "targetPort": "raft", "protocol": "TCP"},
            {"name": "api", "port": 9878, "targetPort": "api", "protocol": "TCP"},
        ],
    }
    assert api == {
        "type": "ClusterIP",
        "selector": selector,
        "ports": [{"name": "api", "port": 9878, "targetPort": "api", "protocol": "TCP"}],
    }


def test_broker_set_services() -> None:
    objects = children(spec(brokers={"sets": 2}))
    headless = objects[("Service", "demo-broker-1")]["spec"]
    master = objects[("Service", "demo-broker-1-master")]["spec"]
    assert headless["clusterIP"] == "None" and headless["publishNotReadyAddresses"] is True
    assert headless["selector"] == {
        "app.kubernetes.io/name": "brokergroup",
        "app.kubernetes.io/instance": "demo",
        "app.kubernetes.io/component": "broker",
        "brokergroup.io/broker-set": "demo-broker-1",
    }
    assert [(p["name"], p["port"]) for p in headless["ports"]] == [("http", 10911), ("ha", 10912), ("binary", 10909)]
    assert master == {
        "type": "ClusterIP",
        "selector": {"brokergroup.io/broker-set": "demo-broker-1", "brokergroup.io/role": "master"},
        "ports": [
            {"name": "http", "port": 10911, "targetPort": "http", "protocol": "TCP"},
            {"name": "binary", "port": 10909, "targetPort": "binary", "protocol": "TCP"},
        ],
    }


# ---- PodDisruptionBudgets and the NetworkPolicy -----------------------------------------------------------


def test_disruption_budgets_allow_one_pod_at_a_time() -> None:
    objects = children(spec(brokers={"sets": 2}))
    assert objects[("PodDisruptionBudget", "demo-controller")]["spec"] == {
        "maxUnavailable": 1,
        "selector": {
            "matchLabels": {
                "app.kubernetes.io/name": "brokergroup",
                "app.kubernetes.io/instance": "demo",
                "app.kubernetes.io/component": "controller",
            }
        },
    }
    for i in range(2):
        pdb = objects[("PodDisruptionBudget", f"demo-broker-{i}")]["spec"]
        statefulset = objects[("StatefulSet", f"demo-broker-{i}")]["spec"]
        assert pdb == {"maxUnavailable": 1, "selector": statefulset["selector"]}


def test_a_single_controller_still_drains() -> None:
    pdb = children(spec(controller={"replicas": 1}))[("PodDisruptionBudget", "demo-controller")]
    assert pdb["spec"]["maxUnavailable"] == 1


def test_disruption_budgets_can_be_switched_off() -> None:
    built = desired_children(OWNER, spec(brokers={"sets": 2}, podDisruptionBudget={"enabled": False}))
    assert [c for c in built if c["kind"] == "PodDisruptionBudget"] == []
    assert len(built) == len(desired_children(OWNER, spec(brokers={"sets": 2}))) - 3


def test_network_policy_admits_only_controllers_to_raft() -> None:
    policy = children()[("NetworkPolicy", "demo-controller-raft")]["spec"]
    controllers = {
        "matchLabels": {
            "app.kubernetes.io/name": "brokergroup",
            "app.kubernetes.io/instance": "demo",
            "app.kubernetes.io/component": "controller",
        }
    }
    assert policy == {
        "podSelector": controllers,
        "policyTypes": ["Ingress"],
        "ingress": [
            {"from": [{"podSelector": controllers}], "ports": [{"protocol": "TCP", "port": 9877}]},
            {"ports": [{"protocol": "TCP", "port": 9878}]},
        ],
    }
