"""Spec hashes change exactly where the operator would write, and config hashes roll exactly the pods
that read a changed settings file."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from builder_factories import children, spec

from brokergroup.operator.builders import live_spec_hash, spec_hash, with_spec_hash

HASH = "brokergroup.io/spec-hash"
CONFIG_HASH = "brokergroup.io/config-hash"


def hashes(**fields: Any) -> dict[tuple[str, str], str]:
    return {key: child["metadata"]["annotations"][HASH] for key, child in children(spec(**fields)).items()}


def changed(before: dict[tuple[str, str], str], after: dict[tuple[str, str], str]) -> set[tuple[str, str]]:
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


def test_every_child_carries_its_own_hash() -> None:
    for key, child in children().items():
        value = child["metadata"]["annotations"][HASH]
        assert len(value) == 16 and int(value, 16) >= 0, key
        assert spec_hash(child) == value == live_spec_hash(child), key


def test_same_input_same_hashes() -> None:
    fields = {"brokers": {"sets": 2, "replication": "Async"}}
    assert hashes(**fields) == hashes(**fields)
    assert len(set(hashes(**fields).values())) == len(hashes(**fields))


def test_with_spec_hash_is_idempotent_and_replaces_a_stale_hash() -> None:
    child = children()[("Service", "demo-controller")]
    fresh = copy.deepcopy(child)
    assert with_spec_hash(fresh) is fresh and fresh == child
    stale = copy.deepcopy(child)
    stale["metadata"]["annotations"][HASH] = "0000000000000000"
    assert with_spec_hash(stale) == child
    assert live_spec_hash({"metadata": {}}) is None


def test_restamping_an_adjusted_object_changes_its_hash() -> None:
    sts = children()[("StatefulSet", "demo-broker-0")]
    before = sts["metadata"]["annotations"][HASH]
    sts["spec"]["replicas"] = 2
    assert with_spec_hash(sts)["metadata"]["annotations"][HASH] != before
    assert spec_hash(sts) == live_spec_hash(sts)
    sts["spec"]["replicas"] = 3
    assert with_spec_hash(sts)["metadata"]["annotations"][HASH] == before


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"brokers": {"replicas": 5}},
            # The brokers' Role names every broker pod: a new pod may patch its own label.
            {("StatefulSet", "demo-broker-0"), ("StatefulSet", "demo-broker-1"), ("Role", "demo-broker")},
        ),
        (
            {"brokers": {"replication": "Async"}},
            {("ConfigMap", "demo-config"), ("StatefulSet", "demo-broker-0"), ("StatefulSet", "demo-broker-1")},
        ),
        (
            {"controller": {"heartbeatTimeoutSeconds": 20}},
            {("ConfigMap", "demo-config"), ("StatefulSet", "demo-broker-0"), ("StatefulSet", "demo-broker-1")},
        ),
        (
            {"controller": {"electUncleanMaster": True}},
            {("ConfigMap", "demo-config"), ("StatefulSet", "demo-controller")},
        ),
        ({"controller": {"resources": {"limits": {"memory": "1Gi"}}}}, {("StatefulSet", "demo-controller")}),
        (
            {"image": "registry.example/bg:2"},
            {("StatefulSet", "demo-controller"), ("StatefulSet", "demo-broker-0"), ("StatefulSet", "demo-broker-1")},
        ),
        (
            {"podDisruptionBudget": {"enabled": False}},
            {
                ("PodDisruptionBudget", "demo-controller"),
                ("PodDisruptionBudget", "demo-broker-0"),
                ("PodDisruptionBudget", "demo-broker-1"),
            },
        ),
    ],
    ids=["broker-replicas", "replication", "heartbeat-timeout", "unclean", "controller-resources", "image", "no-pdb"],
)
def test_a_spec_change_touches_exactly_the_affected_children(
    fields: dict[str, Any], expected: set[tuple[str, str]]
) -> None:
    base = {"brokers": {"sets": 2}}
    merged = {**base, **fields, "brokers": {**base["brokers"], **fields.get("brokers", {})}}
    assert changed(hashes(**base), hashes(**merged)) == expected


def test_adding_a_set_adds_its_children_and_changes_nothing_else() -> None:
    assert changed(hashes(brokers={"sets": 1}), hashes(brokers={"sets": 2})) == {
        ("Service", "demo-broker-1"),
        ("Service", "demo-broker-1-master"),
        ("StatefulSet", "demo-broker-1"),
        ("PodDisruptionBudget", "demo-broker-1"),
        ("Role", "demo-broker"),
    }


def test_a_different_owner_uid_changes_every_hash() -> None:
    from brokergroup.operator.builders import Owner, desired_children

    a = desired_children(Owner("demo", "mq", "uid-a"), spec())
    b = desired_children(Owner("demo", "mq", "uid-b"), spec())
    assert all(
        x["metadata"]["annotations"][HASH] != y["metadata"]["annotations"][HASH] for x, y in zip(a, b, strict=True)
    )


# ---- config hash on pod templates ---------------------------------------------------------------------------


def template_config_hashes(**fields: Any) -> dict[str, str]:
    return {
        name: child["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH]
        for (kind, name), child in children(spec(**fields)).items()
        if kind == "StatefulSet"
    }


def test_a_broker_settings_change_rolls_broker_pods_only() -> None:
    before = template_config_hashes(brokers={"sets": 2})
    after = template_config_hashes(brokers={"sets": 2, "replication": "Async"})
    assert {name for name in before if before[name] != after[name]} == {"demo-broker-0", "demo-broker-1"}
    assert after["demo-broker-0"] == after["demo-broker-1"]


def test_a_controller_settings_change_rolls_controller_pods_only() -> None:
    before = template_config_hashes()
    after = template_config_hashes(controller={"electUncleanMaster": True})
    assert {name for name in before if before[name] != after[name]} == {"demo-controller"}


def test_a_pod_only_change_keeps_the_config_hash() -> None:
    assert template_config_hashes() == template_config_hashes(brokers={"replicas": 5}, image="other:1")
