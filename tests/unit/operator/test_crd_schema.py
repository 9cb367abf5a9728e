"""The BrokerGroup CRD (crds/brokergroup.io_brokergroups.yaml) against the operator's spec model.

The apiserver defaults and validates a BrokerGroup with the CRD; the operator parses what it stored
with `brokergroup.operator.spec`. These tests keep the two in step field by field (names, types,
bounds, enums, defaults, descriptions), check the CRD's structure the way the apiserver would where
that is cheap, validate the examples, and pin the status fields the operator writes. The CEL rules
themselves run against a real apiserver in tests/e2e/test_crd_validation.py.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import BaseModel

from brokergroup.operator import names
from brokergroup.operator.spec import QUANTITY, BrokerGroupSpec, parse_spec

ROOT = Path(__file__).resolve().parents[3]
CRD_FILE = ROOT / "crds" / "brokergroup.io_brokergroups.yaml"
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))

CONSTRAINTS = (
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "pattern", "minLength", "maxLength",
    "enum", "minItems", "maxItems", "minProperties", "maxProperties",
)  # fmt: skip

CRD_ONLY_CONSTRAINTS = {
    ("image", "minLength"): "an empty image makes pods the apiserver refuses",
    ("controller.storage.size", "maxLength"): "bounds the cost of the immutability rule",
    ("brokers.storage.size", "maxLength"): "bounds the cost of the immutability rule",
    ("brokers.retentionSize", "maxLength"): "bounds the cost of the size rules",
    ("brokers.minFreeDisk", "maxLength"): "bounds the cost of the size rules",
    ("controller.storage.storageClassName", "maxLength"): "StorageClass names are DNS subdomains",
    ("brokers.storage.storageClassName", "maxLength"): "StorageClass names are DNS subdomains",
}
"""Where the CRD is stricter than spec.py. Stricter is safe (the model parses all the CRD admits)."""

EXPECTED_RULES: dict[str, list[str]] = {
    "": [
        "size(self.metadata.name) <= 41",
        "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
        "!has(oldSelf.spec) || self.spec.brokers.sets >= oldSelf.spec.brokers.sets || self.spec.brokers.sets >= "
        "(has(self.status) && has(self.status.setsHoldingData) ? self.status.setsHoldingData : 0)",
        *(
            f"!has(oldSelf.spec) || quantity(self.spec.{part}.storage.size).compareTo(quantity(oldSelf.spec.{part}"
            f".storage.size)) >= 0 || (has(self.status) && has(self.status.storage) && has(self.status.storage.{part})"
            f" && quantity(self.spec.{part}.storage.size).compareTo(quantity(self.status.storage.{part})) >= 0)"
            for part in ("controller", "brokers")
        ),
    ],
    "spec.controller.replicas": ["self % 2 == 1", "self == oldSelf"],
    "spec.controller.storage": [
        "has(self.storageClassName) == has(oldSelf.storageClassName) && "
        "(!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)"
    ],
    "spec.brokers": [
        "!has(self.minInSyncReplicas) || !has(self.replicas) || (has(self.replication) && self.replication == 'Async') "
        "|| self.minInSyncReplicas <= self.replicas",
        "!has(self.retentionSize) || !isQuantity(self.retentionSize) || "
        "quantity(self.retentionSize).compareTo(quantity('64Mi')) >= 0",
        "!has(self.minFreeDisk) || !has(self.storage) || !has(self.storage.size) || !isQuantity(self.minFreeDisk) || "
        "!isQuantity(self.storage.size) || quantity(self.minFreeDisk).compareTo(quantity(self.storage.size)) < 0",
        "!has(self.retentionSize) || !has(self.storage) || !has(self.storage.size) || "
        "!isQuantity(self.retentionSize) || !isQuantity(self.storage.size) || "
        "(has(self.minFreeDisk) && !isQuantity(self.minFreeDisk)) || "
        "quantity(self.retentionSize).add(quantity('64Mi')).add(quantity(has(self.minFreeDisk) ? self.minFreeDisk : "
        "'128Mi')).compareTo(quantity(self.storage.size)) <= 0",
    ],
    "spec.brokers.storage": [
        "has(self.storageClassName) == has(oldSelf.storageClassName) && "
        "(!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)"
    ],
}
RULE_NAMES_FIELD = {
    "": [
        "metadata.name",
        "metadata.name",
        "spec.brokers.sets",
        "spec.controller.storage.size",
        "spec.brokers.storage.size",
    ],
    "spec.controller.replicas": ["controller.replicas", "controller.replicas"],
    "spec.controller.storage": ["controller.storage.storageClassName"],
    "spec.controller.storage.size": ["controller.storage.size"],
    "spec.brokers": [
        "brokers.minInSyncReplicas",
        "brokers.retentionSize",
        "brokers.minFreeDisk",
        "brokers.retentionSize",
    ],
    "spec.brokers.storage": ["brokers.storage.storageClassName"],
    "spec.brokers.storage.size": ["brokers.storage.size"],
}
VALIDATION_REASONS = {"FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate"}

STATUS_FIELDS = {
    "observedGeneration": "integer",
    "phase": "string",
    "masters": "string",
    "setsHoldingData": "integer",
    "storage": "object",
    "storage.controller": "string",
    "storage.brokers": "string",
    "lastElectionRequest": "object",
    "lastElectionRequest.request": "string",
    "lastElectionRequest.target": "string",
    "lastElectionRequest.result": "string",
    "lastElectionRequest.masterEpoch": "integer",
    "lastElectionRequest.time": "string",
    "lastElectionRequest.reason": "string",
    "lastElectionRequest.message": "string",
    "conditions": "array",
    "conditions[]": "object",
    "conditions[].type": "string",
    "conditions[].status": "string",
    "conditions[].observedGeneration": "integer",
    "conditions[].lastTransitionTime": "string",
    "conditions[].reason": "string",
    "conditions[].message": "string",
    "controller": "object",
    "controller.replicas": "integer",
    "controller.readyReplicas": "integer",
    "controller.leader": "string",
    "brokerSets": "array",
    "brokerSets[]": "object",
    "brokerSets[].name": "string",
    "brokerSets[].masterPod": "string",
    "brokerSets[].masterBrokerId": "integer",
    "brokerSets[].masterEpoch": "integer",
    "brokerSets[].syncStateSet": "array",
    "brokerSets[].syncStateSet[]": "string",
    "brokerSets[].syncStateSetEpoch": "integer",
    "brokerSets[].desiredReplicas": "integer",
    "brokerSets[].readyReplicas": "integer",
    "brokerSets[].holdsData": "boolean",
    "brokerSets[].released": "boolean",
    "brokerSets[].replicas": "array",
    "brokerSets[].replicas[]": "object",
    "brokerSets[].replicas[].pod": "string",
    "brokerSets[].replicas[].brokerId": "integer",
    "brokerSets[].replicas[].role": "string",
    "brokerSets[].replicas[].inSync": "boolean",
    "brokerSets[].replicas[].alive": "boolean",
    "brokerSets[].rollout": "object",
    "brokerSets[].rollout.step": "string",
    "brokerSets[].rollout.pod": "string",
    "brokerSets[].rollout.message": "string",
    "brokerSets[].rollout.updatedReplicas": "integer",
    "brokerSets[].lastElection": "object",
    "brokerSets[].lastElection.request": "string",
    "brokerSets[].lastElection.target": "string",
    "brokerSets[].lastElection.result": "string",
    "brokerSets[].lastElection.masterEpoch": "integer",
    "brokerSets[].lastElection.time": "string",
    "brokerSets[].lastElection.reason": "string",
    "brokerSets[].lastElection.message": "string",
}
"""The operator's status contract: exactly these fields, nothing else survives pruning."""

A_STATUS = {
    "observedGeneration": 4,
    "phase": "Ready",
    "masters": "1/1",
    "setsHoldingData": 1,
    "conditions": [
        {
            "type": "Ready",
            "status": "True",
            "observedGeneration": 4,
            "lastTransitionTime": "2026-11-21T10:00:00Z",
            "reason": "AllSetsHaveMasters",
            "message": "",
        }
    ],
    "controller": {"replicas": 3, "readyReplicas": 3, "leader": "demo-controller-1"},
    "brokerSets": [
        {
            "name": "demo-broker-0",
            "masterPod": "demo-broker-0-0",
            "masterBrokerId": 1,
            "masterEpoch": 2,
            "syncStateSet": ["demo-broker-0-0", "demo-broker-0-1"],
            "syncStateSetEpoch": 5,
            "desiredReplicas": 3,
            "readyReplicas": 3,
            "holdsData": True,
            "replicas": [
                {"pod": "demo-broker-0-0", "brokerId": 1, "role": "master", "inSync": True, "alive": True},
                {"pod": "demo-broker-0-1", "brokerId": 2, "role": "slave", "inSync": True, "alive": True},
                {"pod": "demo-broker-0-2", "role": "unknown", "inSync": False, "alive": False},
            ],
            "lastElection": {
                "request": "demo-broker-0-0",
                "target": "demo-broker-0-0",
                "result": "new_master_elected",
                "masterEpoch": 2,
                "time": "2026-11-21T10:00:00Z",
                "reason": "Elected",
                "message": "demo-broker-0-0 is master at epoch 2",
            },
        }
    ],
}


# -- reading the CRD --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    return yaml.safe_load(CRD_FILE.read_text())


@pytest.fixture(scope="module")
def version(crd: dict[str, Any]) -> dict[str, Any]:
    (only,) = crd["spec"]["versions"]
    return only


@pytest.fixture(scope="module")
def root_schema(version: dict[str, Any]) -> dict[str, Any]:
    return version["schema"]["openAPIV3Schema"]


@pytest.fixture(scope="module")
def spec_schema(root_schema: dict[str, Any]) -> dict[str, Any]:
    return root_schema["properties"]["spec"]


def walk(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with its dotted path (`[]` for array items, `{}` for map values)."""
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from walk(child, f"{path}.{name}" if path else name)
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}{{}}")


def at(node: dict[str, Any], path: str) -> dict[str, Any]:
    for part in filter(None, path.split(".")):
        node = node["properties"][part]
    return node


def apply_defaults(node: dict[str, Any], value: Any) -> Any:
    """The apiserver's structural defaulting (apiextensions-apiserver `defaulting.Default`)."""
    value = copy.deepcopy(value)
    if isinstance(value, dict):
        for name, prop in node.get("properties", {}).items():
            if "default" in prop and value.get(name) is None:
                value[name] = copy.deepcopy(prop["default"])
        for name in list(value):
            child = node.get("properties", {}).get(name) or node.get("additionalProperties")
            if isinstance(child, dict):
                value[name] = apply_defaults(child, value[name])
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        value = [apply_defaults(node["items"], item) for item in value]
    return value


def to_json_schema(node: dict[str, Any]) -> dict[str, Any]:
    """A structural schema as JSON Schema: x-kubernetes-* dropped, int-or-string as anyOf, and unknown
    fields refused where fields are listed (what `kubectl apply`'s strict field validation does)."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key == "default":
            continue
        if key == "properties":
            out[key] = {name: to_json_schema(child) for name, child in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = to_json_schema(value)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [to_json_schema(branch) for branch in value]
        else:
            out[key] = value
    if node.get("x-kubernetes-int-or-string"):
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if "properties" in node and "additionalProperties" not in node:
        out["additionalProperties"] = False
    return out


def validator(node: dict[str, Any]) -> jsonschema.Draft7Validator:
    converted = to_json_schema(node)
    jsonschema.Draft7Validator.check_schema(converted)
    return jsonschema.Draft7Validator(converted)


def errors(node: dict[str, Any], value: Any) -> list[str]:
    """Each error as `<dotted path>: <message>`."""
    found = validator(node).iter_errors(value)
    return sorted(".".join(str(p) for p in e.absolute_path) + ": " + e.message for e in found)


# -- reading the model ------------------------------------------------------------------------------


def inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            target = defs[node["$ref"].rsplit("/", 1)[1]]
            return inline_refs({**target, **{k: v for k, v in node.items() if k != "$ref"}}, defs)
        return {k: inline_refs(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [inline_refs(v, defs) for v in node]
    return node


@pytest.fixture(scope="module")
def model_schema() -> dict[str, Any]:
    """BrokerGroupSpec as pydantic validates it, in JSON Schema, with every $ref inlined."""
    raw = BrokerGroupSpec.model_json_schema(by_alias=True)
    return inline_refs({k: v for k, v in raw.items() if k != "$defs"}, raw.get("$defs", {}))


def model_fields(cls: type[BaseModel], prefix: str = "") -> Iterator[tuple[type[BaseModel], str, str]]:
    """(owning model, attribute name, dotted alias path) of every field, recursively."""
    for attr, field in cls.model_fields.items():
        path = f"{prefix}.{field.alias}" if prefix else str(field.alias)
        yield cls, attr, path
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from model_fields(annotation, path)


def kind_of(node: dict[str, Any]) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "int-or-string"
    branches = [b for b in node.get("anyOf", []) if b.get("type") != "null"]
    types = {b.get("type") for b in branches}
    if types == {"integer", "string"}:
        return "int-or-string"
    if len(branches) == 1:
        return str(branches[0]["type"])
    return str(node["type"])


def constraints_of(node: dict[str, Any]) -> dict[str, Any]:
    found = {k: node[k] for k in CONSTRAINTS if k in node}
    for branch in node.get("anyOf", []):
        found.update({k: branch[k] for k in CONSTRAINTS if k in branch})
    return found


def normalize(text: str) -> str:
    return " ".join(text.split())


def spec_of(document: dict[str, Any]) -> dict[str, Any]:
    return dict(document.get("spec") or {})


# -- 1. structure -----------------------------------------------------------------------------------


def test_names_and_scope(crd: dict[str, Any]) -> None:
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == f"{names.PLURAL}.{names.GROUP}"
    assert crd["spec"]["group"] == names.GROUP
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"] == {
        "kind": names.KIND,
        "listKind": f"{names.KIND}List",
        "plural": names.PLURAL,
        "singular": "brokergroup",
        "shortNames": ["bg"],
        "categories": ["brokergroup"],
    }


def test_one_served_storage_version_with_only_the_status_subresource(version: dict[str, Any]) -> None:
    assert version["name"] == names.VERSION
    assert version["served"] is True
    assert version["storage"] is True
    assert version["subresources"] == {"status": {}}


def test_printer_columns(version: dict[str, Any]) -> None:
    columns = [(c["name"], c["type"], c["jsonPath"], c.get("priority", 0)) for c in version["additionalPrinterColumns"]]
    assert columns == [
        ("Ready", "string", '.status.conditions[?(@.type=="Ready")].status', 0),
        ("Masters", "string", ".status.masters", 0),
        ("Sets", "integer", ".spec.brokers.sets", 0),
        ("Replicas", "integer", ".spec.brokers.replicas", 1),
        ("Replication", "string", ".spec.brokers.replication", 1),
        ("Phase", "string", ".status.phase", 1),
        ("Paused", "string", '.status.conditions[?(@.type=="ReconciliationPaused")].status', 1),
        ("Age", "date", ".metadata.creationTimestamp", 0),
    ]


def test_printer_columns_point_at_schema_fields(version: dict[str, Any], root_schema: dict[str, Any]) -> None:
    condition_filter = re.compile(r'\[\?\(@\.(\w+)=="\w+"\)\]')
    for column in version["additionalPrinterColumns"]:
        keys = condition_filter.findall(column["jsonPath"])
        path = condition_filter.sub(".[]", column["jsonPath"]).lstrip(".")
        if path.startswith("metadata."):
            continue
        node = root_schema
        for part in path.split("."):
            if part == "[]":
                node = node["items"]
                assert keys.pop(0) in node["properties"], column["name"]
            else:
                node = node["properties"][part]
        assert node["type"] == ("integer" if column["type"] == "integer" else "string"), column["name"]


def test_schema_is_structural_and_prunes_unknown_fields(root_schema: dict[str, Any]) -> None:
    for path, node in walk(root_schema):
        assert "x-kubernetes-preserve-unknown-fields" not in node, path  # `false` is refused; unset prunes
        assert "$ref" not in node, path
        assert "type" in node or node.get("x-kubernetes-int-or-string"), f"{path} has no type"
        assert not ("properties" in node and "additionalProperties" in node), path
        for name in node.get("required", []):
            assert name in node["properties"], f"{path} requires unknown {name}"
        if node.get("x-kubernetes-list-type") == "map":
            items = node["items"]
            for key in node["x-kubernetes-list-map-keys"]:
                assert key in items.get("required", []), f"{path}: list-map key {key} must be required"
                assert items["properties"][key]["type"] not in ("array", "object"), path


def test_every_nested_spec_object_defaults_so_defaults_cascade(spec_schema: dict[str, Any]) -> None:
    assert spec_schema["default"] == {}
    for path, node in walk(spec_schema):
        if node.get("type") == "object" and path:
            assert "default" in node, f"spec.{path} needs a default so its fields get theirs"


def test_defaults_are_valid_for_their_own_schema(root_schema: dict[str, Any]) -> None:
    checked = 0
    for path, node in walk(root_schema):
        if "default" in node:
            assert errors(node, apply_defaults(node, node["default"])) == [], path
            checked += 1
    assert checked > 10


def test_every_field_is_described(root_schema: dict[str, Any]) -> None:
    for path, node in walk(root_schema):
        if path and path not in ("metadata",) and not path.endswith(("[]", "{}")):
            assert node.get("description", "").strip(), f"{path} has no description"


# -- 2. the same fields, types, bounds and defaults as operator/spec.py --------------------------------


def test_the_crd_has_exactly_the_models_fields(spec_schema: dict[str, Any], model_schema: dict[str, Any]) -> None:
    crd_paths = {p for p, _ in walk(spec_schema) if p}
    model_paths = {p for p, _ in walk(model_schema) if p}
    assert crd_paths == model_paths
    assert {p for _, _, p in model_fields(BrokerGroupSpec)} == {p for p in crd_paths if not p.endswith("{}")}


def test_types_enums_and_bounds_match(spec_schema: dict[str, Any], model_schema: dict[str, Any]) -> None:
    model_nodes = dict(walk(model_schema))
    for path, crd_node in walk(spec_schema):
        model_node = model_nodes[path]
        assert kind_of(crd_node) == kind_of(model_node), path
        crd_bounds, model_bounds = constraints_of(crd_node), constraints_of(model_node)
        for key, value in model_bounds.items():
            assert crd_bounds.get(key) == value, f"spec.{path}: {key} is {crd_bounds.get(key)!r}, model {value!r}"
        for key in crd_bounds.keys() - model_bounds.keys():
            assert (path, key) in CRD_ONLY_CONSTRAINTS, f"spec.{path}: {key} is in the CRD only"


def test_quantities_use_the_models_pattern(spec_schema: dict[str, Any]) -> None:
    quantities = [p for p, n in walk(spec_schema) if "pattern" in n]
    assert len(quantities) == 8  # requests, limits and size of controller and brokers; retentionSize, minFreeDisk
    for path in quantities:
        node = dict(walk(spec_schema))[path]
        assert node["pattern"] == QUANTITY, path


def test_optional_fields_are_not_required(spec_schema: dict[str, Any]) -> None:
    # Every spec field has a default or may be left unset, so nothing is required of a user.
    for path, node in walk(spec_schema):
        assert "required" not in node, path


# Defaulted by the operator's settings, not by the CRD (the operator's image runs groups that name none).
OPERATOR_DEFAULTED = {"image"}


def test_field_defaults_match(spec_schema: dict[str, Any]) -> None:
    compared = 0
    for cls, attr, path in model_fields(BrokerGroupSpec):
        parent, _, alias = path.rpartition(".")
        model_default = cls().model_dump(mode="json", by_alias=True, exclude_none=True).get(alias)
        crd_default = apply_defaults(at(spec_schema, parent), {}).get(alias)
        if path in OPERATOR_DEFAULTED:
            assert crd_default is None, f"spec.{path} must have no CRD default"
        else:
            assert crd_default == model_default, f"spec.{path} ({cls.__name__}.{attr})"
        compared += 1
    assert compared == len(list(model_fields(BrokerGroupSpec)))


def test_the_image_comes_from_the_operator_when_unset() -> None:
    assert parse_spec({}, default_image="example.org/bg:1").image == "example.org/bg:1"
    assert parse_spec({"image": "example.org/mine:2"}, default_image="example.org/bg:1").image == "example.org/mine:2"


def test_an_empty_spec_defaults_to_the_models_defaults(spec_schema: dict[str, Any]) -> None:
    defaulted = apply_defaults(spec_schema, {})
    parsed = parse_spec({}).model_dump(mode="json", by_alias=True, exclude_none=True)
    assert defaulted == {k: v for k, v in parsed.items() if k not in OPERATOR_DEFAULTED}
    assert parse_spec(defaulted) == parse_spec({})


def test_storage_sizes_default_per_component_when_only_the_class_is_given(spec_schema: dict[str, Any]) -> None:
    # The size is immutable once stored, so a partial `storage` must still get the component's size.
    given = {"brokers": {"storage": {"storageClassName": "fast"}}, "controller": {"storage": {"storageClassName": "f"}}}
    stored = apply_defaults(spec_schema, given)
    parsed = parse_spec(given)
    assert stored["brokers"]["storage"]["size"] == parsed.brokers.storage.size == "10Gi"
    assert stored["controller"]["storage"]["size"] == parsed.controller.storage.size == "1Gi"


def test_descriptions_carry_the_models_docstrings(spec_schema: dict[str, Any]) -> None:
    carried = 0
    for cls, attr, path in model_fields(BrokerGroupSpec):
        docstring = cls.model_fields[attr].description
        if docstring:
            assert normalize(docstring) in normalize(at(spec_schema, path)["description"]), f"spec.{path}"
            carried += 1
    assert carried >= 9


# -- 3. examples ------------------------------------------------------------------------------------


@pytest.fixture(params=EXAMPLES, ids=[p.name for p in EXAMPLES])
def example(request: pytest.FixtureRequest) -> dict[str, Any]:
    return yaml.safe_load(request.param.read_text())


def test_there_are_a_minimal_and_a_full_example() -> None:
    assert {p.name for p in EXAMPLES} >= {"minimal.yaml", "full.yaml"}


def test_example_validates_against_the_crd(example: dict[str, Any], root_schema: dict[str, Any]) -> None:
    assert example["apiVersion"] == f"{names.GROUP}/{names.VERSION}"
    assert example["kind"] == names.KIND
    assert errors(root_schema, example) == []
    assert errors(root_schema, apply_defaults(root_schema, example)) == []


def test_example_parses_with_the_model(example: dict[str, Any], root_schema: dict[str, Any]) -> None:
    stored = apply_defaults(root_schema, example)
    parsed = parse_spec(stored["spec"], default_image="example.org/operator-default:1")
    assert parsed.model_dump(mode="json", by_alias=True, exclude_none=True) == {
        "image": "example.org/operator-default:1",
        **stored["spec"],
    }


def test_example_name_passes_the_name_rules(example: dict[str, Any], root_schema: dict[str, Any]) -> None:
    name = example["metadata"]["name"]
    limit_rule, pattern_rule = (r["rule"] for r in root_schema["x-kubernetes-validations"][:2])
    limit = re.fullmatch(r"size\(self\.metadata\.name\) <= (\d+)", limit_rule)
    pattern = re.fullmatch(r"self\.metadata\.name\.matches\('(.*)'\)", pattern_rule)
    assert limit and pattern
    assert len(name) <= int(limit.group(1))
    assert re.search(pattern.group(1), name)


def test_minimal_example_relies_on_defaults() -> None:
    minimal = yaml.safe_load((ROOT / "examples" / "minimal.yaml").read_text())
    assert spec_of(minimal) == {}


def test_full_example_sets_every_field() -> None:
    full = yaml.safe_load((ROOT / "examples" / "full.yaml").read_text())
    spec = spec_of(full)
    for _, _, path in model_fields(BrokerGroupSpec):
        node: Any = spec
        for part in path.split("."):
            assert isinstance(node, dict) and part in node, f"examples/full.yaml does not set spec.{path}"
            node = node[part]
    parsed = parse_spec(spec)
    assert parsed.brokers.sets == 2
    assert parsed.pod_disruption_budget.enabled
    assert parsed.brokers.storage.storage_class_name and parsed.controller.storage.storage_class_name


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        ({"brokers": {"sets": 0}}, "spec.brokers.sets"),
        ({"brokers": {"sets": 65}}, "spec.brokers.sets"),
        ({"brokers": {"replicas": 17}}, "spec.brokers.replicas"),
        ({"brokers": {"replication": "Semi"}}, "spec.brokers.replication"),
        ({"brokers": {"minInSyncReplicas": 0}}, "spec.brokers.minInSyncReplicas"),
        ({"controller": {"replicas": 9}}, "spec.controller.replicas"),
        ({"controller": {"heartbeatTimeoutSeconds": 9}}, "spec.controller.heartbeatTimeoutSeconds"),
        ({"controller": {"electUncleanMaster": "yes"}}, "spec.controller.electUncleanMaster"),
        ({"imagePullPolicy": "Sometimes"}, "spec.imagePullPolicy"),
        ({"image": ""}, "spec.image"),
        ({"brokers": {"resources": {"requests": {"cpu": "1.5 cores"}}}}, "spec.brokers.resources.requests.cpu"),
        ({"brokers": {"resources": {"limits": {"cpu": 1.5}}}}, "spec.brokers.resources.limits.cpu"),
        ({"controller": {"storage": {"size": "ten"}}}, "spec.controller.storage.size"),
        ({"brokers": {"retentionSize": "50 GB"}}, "spec.brokers.retentionSize"),
        ({"brokers": {"minFreeDisk": -1}}, "spec.brokers.minFreeDisk"),
        ({"brokers": {"syncFromLastFile": "true"}}, "spec.brokers.syncFromLastFile"),
        ({"brokers": {"replica": 3}}, "spec.brokers"),
        ({"podDisruptionBudget": {"enabled": True, "minAvailable": 1}}, "spec.podDisruptionBudget"),
    ],
)
def test_the_schema_refuses(spec: dict[str, Any], where: str, root_schema: dict[str, Any]) -> None:
    document = {"apiVersion": "brokergroup.io/v1alpha1", "kind": "BrokerGroup", "metadata": {"name": "x"}}
    found = errors(root_schema, {**document, "spec": spec})
    assert found, spec
    assert all(e.startswith(where + ":") for e in found), found


# -- 4. CEL rules -----------------------------------------------------------------------------------


def rules(root_schema: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {
        path: node["x-kubernetes-validations"] for path, node in walk(root_schema) if "x-kubernetes-validations" in node
    }


def test_the_cel_rules_are_the_expected_ones(root_schema: dict[str, Any]) -> None:
    assert {path: [r["rule"] for r in found] for path, found in rules(root_schema).items()} == EXPECTED_RULES


def test_every_rule_has_a_message_naming_its_field(root_schema: dict[str, Any]) -> None:
    for path, found in rules(root_schema).items():
        for rule, field in zip(found, RULE_NAMES_FIELD[path], strict=True):
            assert rule["message"].strip() and "\n" not in rule["message"], rule
            assert field in rule["message"], (field, rule["message"])
            assert rule.get("reason", "FieldValueInvalid") in VALIDATION_REASONS, rule
            assert "\n" not in rule["rule"], rule


def test_no_message_is_built_by_an_expression(root_schema: dict[str, Any]) -> None:
    # `string(<int>)` has an unbounded estimated size: kube-apiserver v1.33 refuses such a
    # messageExpression as costing more than 100 times its budget. The static messages stand alone.
    for found in rules(root_schema).values():
        assert all("messageExpression" not in rule for rule in found)


def test_cel_rules_only_name_fields_that_exist(root_schema: dict[str, Any]) -> None:
    reference = re.compile(r"\b(?:self|oldSelf)((?:\.[A-Za-z_]\w*)+)(\()?")
    checked = 0
    for path, found in rules(root_schema).items():
        for rule in found:
            for match in reference.finditer(rule["rule"]):
                fields = match.group(1).lstrip(".")
                if match.group(2):  # a method call: the last part is the method
                    fields = fields.rpartition(".")[0]
                checked += 1
                if fields.startswith("metadata."):
                    assert path == "" and fields in ("metadata.name", "metadata.generateName"), rule
                    continue
                at(at(root_schema, path), fields)  # KeyError names a missing field
            if "fieldPath" in rule:
                at(at(root_schema, path), rule["fieldPath"])
    assert checked >= 15


def test_transition_rules_sit_on_fields_that_always_exist(root_schema: dict[str, Any]) -> None:
    # A rule using oldSelf runs only when both old and new values exist; every one of these is
    # defaulted, so the apiserver never skips them.
    transition = [path for path, found in rules(root_schema).items() if any("oldSelf" in r["rule"] for r in found)]
    assert len(transition) == 4  # the root's rules on spec sizes run on every update
    for path in filter(None, transition):
        assert "default" in at(root_schema, path), path


# -- the status contract ----------------------------------------------------------------------------


def test_status_has_exactly_the_contracted_fields(root_schema: dict[str, Any]) -> None:
    status = root_schema["properties"]["status"]
    found = {path: node["type"] for path, node in walk(status) if path}
    assert found == STATUS_FIELDS


def test_status_lists_merge_by_key(root_schema: dict[str, Any]) -> None:
    status = root_schema["properties"]["status"]
    assert status["properties"]["conditions"]["x-kubernetes-list-map-keys"] == ["type"]
    assert status["properties"]["brokerSets"]["x-kubernetes-list-map-keys"] == ["name"]
    assert at(status, "brokerSets")["items"]["properties"]["replicas"]["x-kubernetes-list-map-keys"] == ["pod"]


def test_a_status_as_the_operator_writes_it_is_valid(root_schema: dict[str, Any]) -> None:
    assert errors(root_schema["properties"]["status"], A_STATUS) == []


@pytest.mark.parametrize(
    ("patch", "where"),
    [
        ({"conditions": [{**A_STATUS["conditions"][0], "status": "Maybe"}]}, "conditions.0.status"),
        ({"conditions": [{**A_STATUS["conditions"][0], "reason": "not camel"}]}, "conditions.0.reason"),
        ({"conditions": [{"type": "Ready", "status": "True"}]}, "conditions.0"),
        ({"setsHoldingData": -1}, "setsHoldingData"),
        ({"brokerSets": [{"masterPod": "x"}]}, "brokerSets.0"),
        ({"kopf": {"progress": {}}}, ""),
    ],
)
def test_status_schema_refuses(patch: dict[str, Any], where: str, root_schema: dict[str, Any]) -> None:
    found = errors(root_schema["properties"]["status"], {**A_STATUS, **patch})
    assert found
    assert all(e.startswith(where + ":") for e in found), found
