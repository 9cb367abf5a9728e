"""operator/spec.py: parse_spec defaults, SpecError naming the field, Async coercion."""

from __future__ import annotations

from typing import Any

import pytest

from brokergroup.operator.spec import (
    DEFAULT_IMAGE,
    BrokerGroupSpec,
    ImagePullPolicy,
    Replication,
    SpecError,
    parse_spec,
    quantity_bytes,
)


def refused(spec: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as exc:
        parse_spec(spec)
    assert isinstance(exc.value, ValueError)
    return str(exc.value)


def test_defaults() -> None:
    s = parse_spec({})
    assert s.image == DEFAULT_IMAGE
    assert s.image_pull_policy is ImagePullPolicy.IF_NOT_PRESENT
    c = s.controller
    assert (c.replicas, c.elect_unclean_master, c.heartbeat_timeout_seconds) == (3, False, 10)
    assert c.resources.to_k8s() == {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}}
    assert (c.storage.size, c.storage.storage_class_name) == ("1Gi", None)
    b = s.brokers
    assert (b.sets, b.replicas, b.replication, b.min_in_sync_replicas) == (1, 3, Replication.SYNC, 2)
    assert b.resources.to_k8s() == {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}
    assert (b.storage.size, b.storage.storage_class_name) == ("10Gi", None)
    assert s.pod_disruption_budget.enabled is True
    assert s == BrokerGroupSpec()


def test_partial_section_keeps_other_defaults() -> None:
    s = parse_spec({"brokers": {"sets": 4}, "controller": {"storage": {"storageClassName": "fast"}}})
    assert (s.brokers.sets, s.brokers.replicas, s.brokers.min_in_sync_replicas) == (4, 3, 2)
    assert (s.controller.storage.size, s.controller.storage.storage_class_name) == ("1Gi", "fast")


def test_full_spec() -> None:
    s = parse_spec(
        {
            "image": "registry.local/bg:dev",
            "imagePullPolicy": "Always",
            "controller": {
                "replicas": 5,
                "electUncleanMaster": True,
                "heartbeatTimeoutSeconds": 30,
                "resources": {"requests": {"cpu": 1, "memory": "1.5Gi"}},
                "storage": {"size": "2Gi", "storageClassName": "ssd"},
            },
            "brokers": {
                "sets": 2,
                "replicas": 5,
                "replication": "Sync",
                "minInSyncReplicas": 3,
                "resources": {"limits": {"memory": "2Gi", "cpu": "500m"}},
                "storage": {"size": "100Gi"},
            },
            "podDisruptionBudget": {"enabled": False},
        }
    )
    assert s.image_pull_policy is ImagePullPolicy.ALWAYS
    assert (s.controller.replicas, s.controller.elect_unclean_master, s.controller.heartbeat_timeout_seconds) == (
        5,
        True,
        30,
    )
    assert s.controller.resources.to_k8s() == {"requests": {"cpu": "1", "memory": "1.5Gi"}}
    assert s.brokers.resources.to_k8s() == {"limits": {"cpu": "500m", "memory": "2Gi"}}
    assert (s.brokers.sets, s.brokers.replicas, s.brokers.min_in_sync_replicas) == (2, 5, 3)
    assert s.pod_disruption_budget.enabled is False


def test_parse_accepts_any_mapping() -> None:
    from types import MappingProxyType

    assert parse_spec(MappingProxyType({"brokers": {"sets": 2}})).brokers.sets == 2


def test_spec_is_frozen() -> None:
    s = parse_spec({})
    with pytest.raises(ValueError, match="frozen"):
        s.image = "other"


@pytest.mark.parametrize("replicas", [1, 3, 5, 7])
def test_odd_controller_replicas(replicas: int) -> None:
    assert parse_spec({"controller": {"replicas": replicas}}).controller.replicas == replicas


@pytest.mark.parametrize("replicas", [2, 4, 6])
def test_even_controller_replicas_refused(replicas: int) -> None:
    message = refused({"controller": {"replicas": replicas}})
    assert message.startswith("spec.controller")
    assert f"controller.replicas must be odd (1, 3, 5 or 7), not {replicas}" in message


@pytest.mark.parametrize("replicas", [0, 8, 9])
def test_controller_replicas_out_of_range_refused(replicas: int) -> None:
    assert refused({"controller": {"replicas": replicas}}).startswith("spec.controller.replicas:")


def test_min_in_sync_above_replicas_refused() -> None:
    message = refused({"brokers": {"replicas": 2, "minInSyncReplicas": 3}})
    assert message.startswith("spec.brokers")
    assert "brokers.minInSyncReplicas (3) cannot exceed brokers.replicas (2)" in message


def test_min_in_sync_equal_to_replicas_accepted() -> None:
    assert parse_spec({"brokers": {"replicas": 2, "minInSyncReplicas": 2}}).brokers.min_in_sync_replicas == 2


def test_single_replica_needs_min_in_sync_one_like_the_crd() -> None:
    # The CRD's rule (minInSyncReplicas <= replicas, default 2) refuses `replicas: 1` alone too.
    assert "brokers.minInSyncReplicas (2) cannot exceed brokers.replicas (1)" in refused({"brokers": {"replicas": 1}})
    assert parse_spec({"brokers": {"replicas": 1, "minInSyncReplicas": 1}}).brokers.replicas == 1


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        ({"foo": 1}, "spec.foo:"),
        ({"brokers": {"bogus": 1}}, "spec.brokers.bogus:"),
        ({"controller": {"storage": {"class": "x"}}}, "spec.controller.storage.class:"),
        ({"podDisruptionBudget": {"minAvailable": 1}}, "spec.podDisruptionBudget.minAvailable:"),
    ],
)
def test_unknown_field_refused(spec: dict[str, Any], where: str) -> None:
    message = refused(spec)
    assert message.startswith(where)
    assert "Extra inputs are not permitted" in message


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        ({"brokers": {"storage": {"size": "lots"}}}, "spec.brokers.storage.size:"),
        ({"controller": {"storage": {"size": "1 Gi"}}}, "spec.controller.storage.size:"),
        ({"brokers": {"storage": {"size": "-1Gi"}}}, "spec.brokers.storage.size:"),
        ({"brokers": {"storage": {"size": "1GB"}}}, "spec.brokers.storage.size:"),
        ({"brokers": {"resources": {"requests": {"cpu": "lots"}}}}, "spec.brokers.resources.requests.cpu"),
        ({"controller": {"resources": {"limits": {"memory": "1gi"}}}}, "spec.controller.resources.limits.memory"),
    ],
)
def test_bad_quantity_refused(spec: dict[str, Any], where: str) -> None:
    assert refused(spec).startswith(where)


@pytest.mark.parametrize("size", ["1", "1.5", "500m", "10k", "1Gi", "2.5Ti", "1E", "3Ei"])
def test_good_quantities(size: str) -> None:
    assert parse_spec({"brokers": {"storage": {"size": size}}}).brokers.storage.size == size


@pytest.mark.parametrize(
    ("spec", "where", "choices"),
    [
        ({"brokers": {"replication": "Semi"}}, "spec.brokers.replication:", "'Sync' or 'Async'"),
        ({"brokers": {"replication": "sync"}}, "spec.brokers.replication:", "'Sync' or 'Async'"),
        ({"imagePullPolicy": "Sometimes"}, "spec.imagePullPolicy:", "'Always', 'IfNotPresent' or 'Never'"),
    ],
)
def test_wrong_enum_refused(spec: dict[str, Any], where: str, choices: str) -> None:
    message = refused(spec)
    assert message.startswith(where)
    assert choices in message


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        ({"brokers": {"sets": 0}}, "spec.brokers.sets:"),
        ({"brokers": {"sets": 65}}, "spec.brokers.sets:"),
        ({"brokers": {"replicas": 17}}, "spec.brokers.replicas:"),
        ({"brokers": {"minInSyncReplicas": 0}}, "spec.brokers.minInSyncReplicas:"),
        ({"controller": {"heartbeatTimeoutSeconds": 9}}, "spec.controller.heartbeatTimeoutSeconds:"),
        ({"controller": {"heartbeatTimeoutSeconds": 601}}, "spec.controller.heartbeatTimeoutSeconds:"),
        ({"controller": {"storage": {"storageClassName": 5}}}, "spec.controller.storage.storageClassName:"),
        ({"brokers": "three"}, "spec.brokers:"),
    ],
)
def test_out_of_range_or_wrong_type_names_the_field(spec: dict[str, Any], where: str) -> None:
    assert refused(spec).startswith(where)


def test_spec_error_chains_the_validation_error() -> None:
    with pytest.raises(SpecError) as exc:
        parse_spec({"foo": 1})
    assert exc.value.__cause__ is not None


@pytest.mark.parametrize("given", [1, 2, 3])
def test_async_coerces_min_in_sync_to_one(given: int) -> None:
    s = parse_spec({"brokers": {"replication": "Async", "minInSyncReplicas": given}})
    assert s.brokers.replication is Replication.ASYNC
    assert s.brokers.min_in_sync_replicas == 1
    assert s.brokers.replicas == 3


def test_async_default_min_in_sync_is_coerced() -> None:
    assert parse_spec({"brokers": {"replication": "Async"}}).brokers.min_in_sync_replicas == 1


def test_async_coercion_is_stable() -> None:
    s = parse_spec({"brokers": {"replication": "Async", "minInSyncReplicas": 3, "sets": 2}})
    assert s.brokers.sets == 2
    again = parse_spec(s.model_dump(by_alias=True, mode="json"))
    assert again == s


def test_sync_keeps_min_in_sync() -> None:
    assert parse_spec({"brokers": {"replication": "Sync", "minInSyncReplicas": 3}}).brokers.min_in_sync_replicas == 3


def test_round_trip_through_camel_case_dump() -> None:
    s = parse_spec({"brokers": {"sets": 3, "storage": {"storageClassName": "x"}}, "imagePullPolicy": "Never"})
    dumped = s.model_dump(by_alias=True, mode="json")
    assert dumped["imagePullPolicy"] == "Never"
    assert dumped["brokers"]["storage"]["storageClassName"] == "x"
    assert parse_spec(dumped) == s


@pytest.mark.parametrize(
    ("quantity", "expected"),
    [("0", 0), ("1", 1), ("500m", 1), ("1.5k", 1500), ("64Mi", 64 * 2**20), ("50Gi", 50 * 2**30), ("2E", 2 * 10**18)],
)
def test_quantity_bytes(quantity: str, expected: int) -> None:
    assert quantity_bytes(quantity) == expected


def test_retention_size_free_disk_and_sync_from_last_file_parse() -> None:
    brokers = parse_spec(
        {
            "brokers": {
                "retentionSize": "8Gi",
                "minFreeDisk": "1Gi",
                "syncFromLastFile": True,
                "storage": {"size": "10Gi"},
            }
        }
    ).brokers
    assert (brokers.retention_size, brokers.min_free_disk, brokers.sync_from_last_file) == ("8Gi", "1Gi", True)
    assert not parse_spec({}).brokers.sync_from_last_file


@pytest.mark.parametrize(
    ("brokers", "fragments"),
    [
        ({"retentionSize": "fifty"}, ["spec.brokers.retentionSize:"]),
        ({"minFreeDisk": "-1Mi"}, ["spec.brokers.minFreeDisk:"]),
        ({"syncFromLastFile": "maybe"}, ["spec.brokers.syncFromLastFile:"]),
        ({"retentionSize": "63Mi"}, ["brokers.retentionSize (63Mi) must be at least one commit-log segment (64Mi)"]),
        (
            {"retentionSize": "10Gi"},  # the default storage.size: nothing left for the segment being written
            ["brokers.retentionSize (10Gi) + one segment being written (64Mi) + brokers.minFreeDisk (128Mi)", "10Gi"],
        ),
        (
            {"retentionSize": "9Gi", "minFreeDisk": "1Gi"},
            ["brokers.minFreeDisk (1Gi) must fit in brokers.storage.size (10Gi)"],
        ),
        ({"minFreeDisk": "10Gi"}, ["brokers.minFreeDisk (10Gi) must be below brokers.storage.size (10Gi)"]),
    ],
)
def test_bad_retention_or_free_disk_is_refused_naming_the_field(brokers: dict[str, Any], fragments: list[str]) -> None:
    message = refused({"brokers": brokers})
    for fragment in fragments:
        assert fragment in message, message


def test_the_largest_retention_size_that_fits_is_accepted() -> None:
    # 10Gi - 64Mi - 128Mi: exactly what the CRD's rule admits too
    assert parse_spec({"brokers": {"retentionSize": "10048Mi"}}).brokers.retention_size == "10048Mi"
    assert refused({"brokers": {"retentionSize": "10049Mi"}})
