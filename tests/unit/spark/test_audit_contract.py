"""The audit reads exactly the controller's event format: the Spark schema, the plain-Python field
table and the committed JSON Schema agree, and so do the type lists with the controller's."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from pyspark.sql import types as T

from brokergroup.controller import records
from brokergroup.spark import contract, schema


def json_schema() -> dict[str, Any]:
    text = resources.files("brokergroup.controller").joinpath("event.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def kind_of(prop: dict[str, Any]) -> tuple[str, bool]:
    """(contract kind, nullable) of one JSON Schema property."""
    if "const" in prop:
        return ("int" if isinstance(prop["const"], int) else "string"), False
    if "enum" in prop:
        values = prop["enum"]
        return "string", None in values
    types = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
    nullable = "null" in types
    main = next(t for t in types if t != "null")
    if main == "array":
        assert prop["items"] == {"type": "integer"}
        return "long[]", nullable
    return {"integer": "long", "string": "string", "boolean": "boolean"}[main], nullable


def test_fields_kinds_and_nullability_match_the_json_schema() -> None:
    js = json_schema()
    assert list(js["properties"]) == list(contract.FIELDS)
    assert js["required"] == list(contract.FIELDS)
    assert js["additionalProperties"] is False
    described = {name: kind_of(prop) for name, prop in js["properties"].items()}
    ours = {
        name: ("long" if kind == "int" and name != "schemaVersion" else kind, nullable)
        for name, (kind, nullable) in contract.FIELDS.items()
    }
    assert described == ours


def test_the_spark_schema_is_the_field_table() -> None:
    assert schema.EVENT_SCHEMA.fieldNames() == list(contract.FIELDS)
    assert [f.nullable for f in schema.EVENT_SCHEMA.fields] == [n for _, n in contract.FIELDS.values()]
    assert schema.EVENT_SCHEMA["ts"].dataType == T.LongType()
    assert schema.EVENT_SCHEMA["schemaVersion"].dataType == T.IntegerType()
    assert schema.EVENT_SCHEMA["syncStateSet"].dataType == T.ArrayType(T.LongType(), containsNull=False)
    assert schema.EVENT_SCHEMA["unclean"].dataType == T.BooleanType()
    assert schema.READ_SCHEMA.fieldNames() == [*contract.FIELDS, "_corrupt_record"]


def test_versions_types_and_results_match_the_json_schema_and_the_controller() -> None:
    js = json_schema()
    props = js["properties"]
    assert props["schemaVersion"]["const"] == contract.SCHEMA_VERSION == records.SCHEMA_VERSION
    assert props["type"]["enum"] == [*contract.RAFT_TYPES, *contract.LOCAL_TYPES]
    assert js["then"]["properties"]["type"]["enum"] == list(contract.RAFT_TYPES) == list(records.RAFT_TYPES)
    assert js["else"]["properties"]["type"]["enum"] == list(contract.LOCAL_TYPES) == list(records.LOCAL_TYPES)
    assert props["electionResult"]["enum"] == [*contract.ELECTION_RESULTS, None]
    assert props["source"]["enum"] == ["raft", "local"]
