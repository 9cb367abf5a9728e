"""The BrokerGroup CRD in a real kube-apiserver: it is accepted, it defaults a CR the way the
operator's spec model does, and its schema and CEL rules refuse bad specs and unsafe updates with a
message that names the field. No operator runs here: status is written by hand through the status
subresource, as the operator would."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from brokergroup.operator import names
from brokergroup.operator.spec import parse_spec
from tests.e2e.kubeenv import ControlPlane, Kubectl

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
API_VERSION = f"{names.GROUP}/{names.VERSION}"


@pytest.fixture(scope="module")
def installed_crd(control_plane: ControlPlane) -> str:
    """The BrokerGroup CRD's name: the `control_plane` fixture installs crds/ and waits until it is served."""
    return f"{names.PLURAL}.{names.GROUP}"


@pytest.fixture
def bg(installed_crd: str, kubectl: Kubectl, namespace: str) -> BrokerGroups:
    return BrokerGroups(kubectl, namespace)


class BrokerGroups:
    """kubectl on BrokerGroups of one namespace; every call returns the CompletedProcess (no raise)."""

    def __init__(self, kubectl: Kubectl, namespace: str) -> None:
        self.kubectl = kubectl
        self.namespace = namespace

    def apply(self, name: str, spec: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
        document: dict[str, Any] = {"apiVersion": API_VERSION, "kind": names.KIND, "metadata": {"name": name}}
        if spec is not None:
            document["spec"] = spec
        return self.apply_yaml(yaml.safe_dump(document))

    def apply_yaml(self, text: str) -> subprocess.CompletedProcess[str]:
        return self.kubectl("apply", "-n", self.namespace, "-f", "-", input=text, check=False)

    def patch(self, name: str, body: dict[str, Any], subresource: str = "") -> subprocess.CompletedProcess[str]:
        extra = [f"--subresource={subresource}"] if subresource else []
        return self.kubectl(
            "patch", "bg", name, "-n", self.namespace, "--type=merge", "-p", json.dumps(body), *extra, check=False
        )

    def get(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.kubectl("get", "bg", name, "-n", self.namespace, "-o", "json").stdout)
        return found

    def created(self, name: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
        accepted(self.apply(name, spec))
        return self.get(name)


def accepted(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stderr


NOISE = ('Invalid value: "object"', 'Invalid value: "integer"', '<nil>: Invalid value: "object"')
"""What the API server prints for a CEL rule with the default reason (FieldValueInvalid): the field's type
instead of a value, and `<nil>` for a rule without a fieldPath. (Its own schema errors, such as `must be of
type boolean: "string"`, and "some validation rules were not checked", are not ours to change.)"""


def refused(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode != 0, f"accepted: {result.stdout}"
    for fragment in fragments:
        assert fragment in result.stderr, f"{fragment!r} not in: {result.stderr}"
    noise = [n for n in NOISE if n in result.stderr]
    assert not noise, f"type noise {noise} in: {result.stderr}"


def defaults() -> dict[str, Any]:
    """What the apiserver stores for an empty spec: the model's defaults, except `image`, which the CRD
    leaves unset for the operator to fill in from its own setting."""
    parsed = parse_spec({}).model_dump(mode="json", by_alias=True, exclude_none=True)
    return {k: v for k, v in parsed.items() if k != "image"}


# -- the CRD and defaulting -------------------------------------------------------------------------


def test_crd_is_established_with_its_names(installed_crd: str, kubectl: Kubectl) -> None:
    crd = json.loads(kubectl("get", "crd", installed_crd, "-o", "json").stdout)
    accepted_names = crd["status"]["acceptedNames"]
    assert accepted_names["shortNames"] == ["bg"]
    assert accepted_names["categories"] == ["brokergroup"]
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions["Established"] == "True"
    assert conditions["NamesAccepted"] == "True"


def test_minimal_example_gets_the_models_defaults(bg: BrokerGroups) -> None:
    accepted(bg.apply_yaml((EXAMPLES / "minimal.yaml").read_text()))
    stored = bg.get(yaml.safe_load((EXAMPLES / "minimal.yaml").read_text())["metadata"]["name"])
    assert stored["spec"] == defaults()


def test_a_cr_without_spec_gets_every_default(bg: BrokerGroups) -> None:
    assert bg.created("nospec")["spec"] == defaults()


def test_nested_defaults_fill_in_around_what_is_given(bg: BrokerGroups) -> None:
    spec = bg.created("partial", {"brokers": {"sets": 2, "storage": {"storageClassName": "fast"}}})["spec"]
    assert spec["brokers"]["sets"] == 2
    assert spec["brokers"]["replicas"] == 3
    assert spec["brokers"]["storage"] == {"size": "10Gi", "storageClassName": "fast"}
    assert spec["controller"] == defaults()["controller"]


def test_full_example_is_stored_as_written(bg: BrokerGroups) -> None:
    example = yaml.safe_load((EXAMPLES / "full.yaml").read_text())
    accepted(bg.apply_yaml((EXAMPLES / "full.yaml").read_text()))
    assert bg.get(example["metadata"]["name"])["spec"] == example["spec"]


def test_unknown_fields_are_refused_by_kubectl(bg: BrokerGroups) -> None:
    refused(bg.apply("typo", {"brokers": {"replica": 3}}), 'unknown field "spec.brokers.replica"')


def test_printer_columns(bg: BrokerGroups) -> None:
    bg.created("cols", {"brokers": {"sets": 2}})
    status = {"masters": "1/2", "phase": "Progressing", "conditions": [condition("Ready", "False")]}
    accepted(bg.patch("cols", {"status": status}, subresource="status"))
    out = bg.kubectl("get", "bg", "cols", "-n", bg.namespace, "-o", "wide").stdout.splitlines()
    assert out[0].split() == ["NAME", "READY", "MASTERS", "SETS", "REPLICAS", "REPLICATION", "PHASE", "PAUSED", "AGE"]
    assert out[1].split()[:7] == ["cols", "False", "1/2", "2", "3", "Sync", "Progressing"]
    narrow = bg.kubectl("get", "bg", "cols", "-n", bg.namespace).stdout.splitlines()
    assert narrow[0].split() == ["NAME", "READY", "MASTERS", "SETS", "AGE"]


# -- refused on create --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "fragments"),
    [
        ({"brokers": {"sets": 0}}, ["spec.brokers.sets", "greater than or equal to 1"]),
        ({"brokers": {"sets": 65}}, ["spec.brokers.sets", "less than or equal to 64"]),
        ({"brokers": {"replicas": 0}}, ["spec.brokers.replicas"]),
        ({"brokers": {"replicas": 17}}, ["spec.brokers.replicas"]),
        ({"brokers": {"minInSyncReplicas": 0}}, ["spec.brokers.minInSyncReplicas"]),
        ({"brokers": {"replication": "Semi"}}, ["spec.brokers.replication", 'Unsupported value: "Semi"']),
        ({"controller": {"replicas": 9}}, ["spec.controller.replicas"]),
        ({"controller": {"heartbeatTimeoutSeconds": 9}}, ["spec.controller.heartbeatTimeoutSeconds"]),
        ({"controller": {"electUncleanMaster": "yes"}}, ["spec.controller.electUncleanMaster"]),
        ({"imagePullPolicy": "Sometimes"}, ["spec.imagePullPolicy"]),
        ({"image": ""}, ["spec.image"]),
        ({"brokers": {"resources": {"requests": {"cpu": "1.5 cores"}}}}, ["spec.brokers.resources.requests.cpu"]),
        ({"controller": {"storage": {"size": "ten"}}}, ["spec.controller.storage.size"]),
        # CEL
        (
            {"controller": {"replicas": 4}},
            ["spec.controller.replicas", "controller.replicas must be odd (1, 3, 5 or 7)"],
        ),
        (
            {"brokers": {"replicas": 2, "minInSyncReplicas": 3}},
            [
                "spec.brokers.minInSyncReplicas",
                "brokers.replicas must be at least brokers.minInSyncReplicas (default 2) in Sync replication",
                "set brokers.minInSyncReplicas between 1 and brokers.replicas",
            ],
        ),
        (
            {"brokers": {"replicas": 1}},  # minInSyncReplicas is the default: the message says so
            ["brokers.replicas must be at least brokers.minInSyncReplicas (default 2)", "raise brokers.replicas"],
        ),
        # retention by size and the free-disk threshold (issue 18)
        ({"brokers": {"retentionSize": "50 GB"}}, ["spec.brokers.retentionSize", "should match"]),
        ({"brokers": {"minFreeDisk": "lots"}}, ["spec.brokers.minFreeDisk", "should match"]),
        ({"brokers": {"syncFromLastFile": "yes"}}, ["spec.brokers.syncFromLastFile", "must be of type boolean"]),
        (
            {"brokers": {"retentionSize": "63Mi"}},
            ["spec.brokers.retentionSize", "brokers.retentionSize must be at least one commit-log segment (64Mi)"],
        ),
        (
            {"brokers": {"retentionSize": "10Gi"}},  # the default storage.size
            [
                "spec.brokers.retentionSize",
                "brokers.retentionSize + one commit-log segment being written (64Mi) + brokers.minFreeDisk",
                "lower brokers.retentionSize or raise brokers.storage.size",
            ],
        ),
        (
            {"brokers": {"retentionSize": "9Gi", "minFreeDisk": "1Gi", "storage": {"size": "10Gi"}}},
            ["spec.brokers.retentionSize", "must fit in brokers.storage.size"],
        ),
        (
            {"brokers": {"minFreeDisk": "20Gi", "storage": {"size": "20Gi"}}},
            ["spec.brokers.minFreeDisk", "brokers.minFreeDisk must be below brokers.storage.size"],
        ),
    ],
)
def test_bad_spec_is_refused(bg: BrokerGroups, spec: dict[str, Any], fragments: list[str]) -> None:
    refused(bg.apply("bad", spec), *fragments)


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("a" * 42, "metadata.name must be at most 41 characters"),
        ("1abc", "metadata.name must be a DNS-1035 label"),
        ("a.b", "metadata.name must be a DNS-1035 label"),
    ],
)
def test_names_that_cannot_prefix_children_are_refused(bg: BrokerGroups, name: str, fragment: str) -> None:
    refused(bg.apply(name, {}), fragment)


def test_the_longest_allowed_name_is_accepted(bg: BrokerGroups) -> None:
    accepted(bg.apply("a" * 41, {}))


def test_retention_that_fits_the_volume_is_accepted_and_parses(bg: BrokerGroups) -> None:
    """The largest retentionSize the CEL rule admits (10Gi - 64Mi - 128Mi) is the model's largest too; a
    storage size that then shrinks the room is refused, and growing the volume lets retention grow."""
    spec = bg.created("kept", {"brokers": {"retentionSize": "10048Mi", "syncFromLastFile": True}})["spec"]
    assert spec["brokers"]["storage"]["size"] == "10Gi"
    brokers = parse_spec(spec).brokers
    assert (brokers.retention_size, brokers.min_free_disk, brokers.sync_from_last_file) == ("10048Mi", None, True)
    refused(
        bg.patch("kept", {"spec": {"brokers": {"minFreeDisk": "129Mi"}}}),
        "spec.brokers.retentionSize",
        "must fit in brokers.storage.size",
    )
    accepted(bg.patch("kept", {"spec": {"brokers": {"storage": {"size": "20Gi"}, "retentionSize": "19Gi"}}}))
    assert bg.get("kept")["spec"]["brokers"]["retentionSize"] == "19Gi"


# -- refused on update ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "fragments"),
    [
        (
            {"controller": {"replicas": 5}},
            ["spec.controller.replicas", "controller.replicas is immutable (the Raft membership is static)"],
        ),
        (
            {"controller": {"storage": {"storageClassName": "fast"}}},
            ["spec.controller.storage.storageClassName", "controller.storage.storageClassName is immutable"],
        ),
        (
            {"brokers": {"storage": {"storageClassName": "fast"}}},
            ["spec.brokers.storage.storageClassName", "brokers.storage.storageClassName is immutable"],
        ),
    ],
)
def test_immutable_fields_cannot_change(bg: BrokerGroups, change: dict[str, Any], fragments: list[str]) -> None:
    bg.created("fixed")
    refused(bg.patch("fixed", {"spec": change}), *fragments)


@pytest.mark.parametrize(
    ("part", "smaller", "larger"),
    [("controller", "512Mi", "1.5Gi"), ("brokers", "9Gi", "10241Mi")],
)
def test_a_storage_size_grows_and_shrinks_only_back_to_the_claims_size(
    bg: BrokerGroups, part: str, smaller: str, larger: str
) -> None:
    bg.created("sized")  # defaults: controller 1Gi, brokers 10Gi
    before = bg.get("sized")["spec"][part]["storage"]["size"]
    message = f"spec.{part}.storage.size cannot shrink below status.storage.{part}, the size of the claims"
    refused(bg.patch("sized", {"spec": {part: {"storage": {"size": smaller}}}}), f"spec.{part}.storage.size", message)
    assert bg.get("sized")["spec"][part]["storage"]["size"] == before
    accepted(bg.patch("sized", {"spec": {part: {"storage": {"size": larger}}}}))
    # No status yet (no operator here): the claims' size is unknown, so even the old size is refused.
    refused(bg.patch("sized", {"spec": {part: {"storage": {"size": before}}}}), message)
    # The operator reports the claims' size (a raise the volumes could not take): back down to it, not below.
    accepted(bg.patch("sized", {"status": {"storage": {part: before}}}, subresource="status"))
    refused(bg.patch("sized", {"spec": {part: {"storage": {"size": smaller}}}}), message)
    accepted(bg.patch("sized", {"spec": {part: {"storage": {"size": before}}}}))
    assert bg.get("sized")["spec"][part]["storage"]["size"] == before


@pytest.mark.parametrize(
    "storage_class",
    [{"storageClassName": "slow"}, {"storageClassName": None}, {"storageClassName": ""}],
    ids=["changed", "removed", "emptied"],
)
def test_a_storage_class_cannot_change_or_go(bg: BrokerGroups, storage_class: dict[str, Any]) -> None:
    bg.created("classy", {"brokers": {"storage": {"storageClassName": "fast"}}})
    refused(
        bg.patch("classy", {"spec": {"brokers": {"storage": storage_class}}}),
        "spec.brokers.storage.storageClassName",
        "brokers.storage.storageClassName is immutable",
    )
    assert bg.get("classy")["spec"]["brokers"]["storage"]["storageClassName"] == "fast"


def test_mutable_fields_change_and_immutable_ones_may_be_restated(bg: BrokerGroups) -> None:
    bg.created("tuned", {"brokers": {"storage": {"storageClassName": "fast"}}})
    change = {
        "image": "example.org/brokergroup:dev",
        "controller": {"replicas": 3, "heartbeatTimeoutSeconds": 30, "electUncleanMaster": True},
        "brokers": {
            "sets": 3,
            "replicas": 5,
            "replication": "Async",
            "storage": {"size": "10Gi", "storageClassName": "fast"},
            "resources": {"requests": {"cpu": 1}},
        },
        "podDisruptionBudget": {"enabled": False},
    }
    accepted(bg.patch("tuned", {"spec": change}))
    spec = bg.get("tuned")["spec"]
    assert spec["brokers"]["sets"] == 3
    assert spec["brokers"]["replication"] == "Async"
    assert spec["controller"]["heartbeatTimeoutSeconds"] == 30


def test_sets_shrink_freely_while_no_set_holds_data(bg: BrokerGroups) -> None:
    bg.created("fresh", {"brokers": {"sets": 3}})
    accepted(bg.patch("fresh", {"spec": {"brokers": {"sets": 1}}}))
    accepted(bg.patch("fresh", {"status": {"setsHoldingData": 0}}, subresource="status"))
    accepted(bg.patch("fresh", {"spec": {"brokers": {"sets": 4}}}))
    accepted(bg.patch("fresh", {"spec": {"brokers": {"sets": 2}}}))


def test_sets_cannot_shrink_below_the_sets_holding_data(bg: BrokerGroups) -> None:
    bg.created("held", {"brokers": {"sets": 3}})
    accepted(bg.patch("held", {"status": {"setsHoldingData": 2}}, subresource="status"))

    refused(
        bg.patch("held", {"spec": {"brokers": {"sets": 1}}}),
        "spec.brokers.sets",
        "spec.brokers.sets cannot shrink below status.setsHoldingData",
    )
    accepted(bg.patch("held", {"spec": {"brokers": {"sets": 2}}}))
    assert bg.get("held")["spec"]["brokers"]["sets"] == 2
    # The status may claim more than the spec has (removed sets still holding data): the rule only
    # guards spec changes, so the operator's status writes are never refused by it.
    accepted(bg.patch("held", {"status": {"setsHoldingData": 3}}, subresource="status"))
    accepted(bg.patch("held", {"spec": {"brokers": {"sets": 2}}}))
    refused(bg.patch("held", {"spec": {"brokers": {"sets": 1}}}), "cannot shrink below status.setsHoldingData")
    accepted(bg.patch("held", {"spec": {"brokers": {"sets": 3}}}))


def test_the_main_resource_cannot_write_status(bg: BrokerGroups) -> None:
    bg.created("owned", {"brokers": {"sets": 3}})
    accepted(bg.patch("owned", {"status": {"setsHoldingData": 3}}, subresource="status"))
    bg.patch("owned", {"status": {"setsHoldingData": 0}})  # ignored: status goes through its subresource
    assert bg.get("owned")["status"]["setsHoldingData"] == 3
    refused(bg.patch("owned", {"spec": {"brokers": {"sets": 1}}}), "cannot shrink below status.setsHoldingData")


# -- status ---------------------------------------------------------------------------------------------


def condition(type_: str, status: str, reason: str = "Testing") -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": "",
        "lastTransitionTime": "2026-11-21T10:00:00Z",
    }


FULL_STATUS: dict[str, Any] = {
    "observedGeneration": 1,
    "phase": "Ready",
    "masters": "1/1",
    "setsHoldingData": 1,
    "conditions": [condition("Ready", "True", "AllReplicasReady") | {"observedGeneration": 1}],
    "controller": {"replicas": 3, "readyReplicas": 3, "leader": "st-controller-0"},
    "brokerSets": [
        {
            "name": "st-broker-0",
            "masterPod": "st-broker-0-0",
            "masterBrokerId": 1,
            "masterEpoch": 1,
            "syncStateSet": ["st-broker-0-0", "st-broker-0-1"],
            "syncStateSetEpoch": 2,
            "desiredReplicas": 3,
            "readyReplicas": 3,
            "holdsData": True,
            "replicas": [
                {"pod": "st-broker-0-0", "brokerId": 1, "role": "master", "inSync": True, "alive": True},
                {"pod": "st-broker-0-1", "brokerId": 2, "role": "slave", "inSync": True, "alive": True},
                {"pod": "st-broker-0-2", "role": "unknown", "inSync": False, "alive": False},
            ],
            "lastElection": {
                "request": "st-broker-0-0",
                "target": "st-broker-0-0",
                "result": "new_master_elected",
                "masterEpoch": 1,
                "time": "2026-11-21T10:00:00Z",
                "reason": "Elected",
                "message": "st-broker-0-0 is master at epoch 1",
            },
        }
    ],
}


def test_a_full_status_is_stored_as_written(bg: BrokerGroups) -> None:
    bg.created("st")
    accepted(bg.patch("st", {"status": FULL_STATUS}, subresource="status"))
    assert bg.get("st")["status"] == FULL_STATUS


@pytest.mark.parametrize(
    ("status", "fragments"),
    [
        ({"conditions": [condition("Ready", "Maybe")]}, ["status.conditions[0].status", 'Unsupported value: "Maybe"']),
        ({"conditions": [condition("Ready", "True", "not camel")]}, ["status.conditions[0].reason"]),
        ({"conditions": [{"type": "Ready", "status": "True"}]}, ["status.conditions[0].reason", "Required value"]),
        ({"setsHoldingData": -1}, ["status.setsHoldingData"]),
        ({"brokerSets": [{"masterPod": "x"}]}, ["status.brokerSets[0].name", "Required value"]),
    ],
)
def test_bad_status_is_refused(bg: BrokerGroups, status: dict[str, Any], fragments: list[str]) -> None:
    bg.created("badstatus")
    refused(bg.patch("badstatus", {"status": status}, subresource="status"), *fragments)


def test_unknown_status_fields_are_pruned(bg: BrokerGroups) -> None:
    bg.created("pruned")
    bg.patch("pruned", {"status": {"phase": "Ready", "kopf": {"progress": {}}}}, subresource="status")
    assert bg.get("pruned").get("status") == {"phase": "Ready"}
