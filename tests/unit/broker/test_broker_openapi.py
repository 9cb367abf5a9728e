"""The broker's committed OpenAPI document: generated from `wire`, complete, and never stale."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brokergroup.broker import api, openapi, wire
from brokergroup.broker.store.types import PutStatus


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return openapi.build_openapi()


def operations(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(method.upper(), path): op for path, item in document["paths"].items() for method, op in item.items()}


def resolve(document: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        *_, section, name = node["$ref"].split("/")
        node = document["components"][section][name]
    return node


def validator(document: dict[str, Any], schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    """A validator for `schema` that resolves the document's `#/components/...` references."""
    return jsonschema.Draft202012Validator({**schema, "components": document["components"]})


def response_schema(document: dict[str, Any], method: str, path: str, code: str) -> dict[str, Any]:
    response = resolve(document, operations(document)[(method, path)]["responses"][code])
    schema: dict[str, Any] = response["content"]["application/json"]["schema"]
    return schema


def test_committed_file_is_the_generated_document(document: dict[str, Any]) -> None:
    committed = openapi.OPENAPI_JSON.read_text(encoding="utf-8")
    assert json.loads(committed) == document, "run `python -m brokergroup.broker.openapi` and commit the result"
    assert committed == openapi.render(document), "openapi.json is not in canonical form (sorted keys, indent 2)"


def test_api_serves_the_committed_file() -> None:
    assert api.OPENAPI_PATH == openapi.OPENAPI_JSON
    assert api.MAX_BODY == openapi.MAX_BODY


def test_document_is_valid_openapi_3_1(document: dict[str, Any]) -> None:
    assert document["openapi"].startswith("3.1.")
    schemathesis.openapi.from_dict(document).validate()


def test_operations_are_exactly_the_api_routes(document: dict[str, Any]) -> None:
    routes = {(method, path, handler.__name__) for method, path, handler in api.ROUTES}
    table = {(op.method, op.path, op.name) for op in openapi.OPERATIONS}
    documented = {(method, path, op["operationId"]) for (method, path), op in operations(document).items()}
    assert table == routes
    assert documented == routes


def test_request_bodies_are_the_wire_models(document: dict[str, Any]) -> None:
    ops = operations(document)
    produce = ops[("POST", "/v1/messages")]["requestBody"]
    assert produce["required"] is True
    assert set(produce["content"]) == {"application/json", wire.BATCH_CONTENT_TYPE}
    assert produce["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ProduceRequest"}
    commit = ops[("POST", "/v1/consumer-offsets")]["requestBody"]["content"]
    assert commit == {"application/json": {"schema": {"$ref": "#/components/schemas/ConsumerOffsetRequest"}}}
    schemas = document["components"]["schemas"]
    produce_schema = schemas["ProduceRequest"]
    assert produce_schema["additionalProperties"] is False
    assert set(produce_schema["required"]) == {"topic", "messages"}
    assert {"topic", "queueId", "producerId", "messages"} == set(produce_schema["properties"])
    assert (
        produce_schema["properties"]["messages"]["minItems"],
        produce_schema["properties"]["messages"]["maxItems"],
    ) == (
        1,
        wire.MAX_BATCH,
    )
    assert produce_schema["properties"]["queueId"]["maximum"] == wire.MAX_QUEUE_ID
    assert produce_schema["properties"]["producerId"]["minimum"] == -1
    assert set(schemas["ConsumerOffsetRequest"]["required"]) == {"group", "topic", "queueId", "offset"}
    message = schemas["MessageIn"]
    assert message["required"] == ["body"]
    assert message["properties"]["body"]["contentEncoding"] == "base64"
    assert {"seq", "bornTimestamp", "properties"} <= set(message["properties"])


def test_json_request_schemas_agree_with_the_models(document: dict[str, Any]) -> None:
    """What the document accepts, the model accepts, and the other way round, on a few bodies."""
    produce = validator(document, {"$ref": "#/components/schemas/ProduceRequest"})
    bodies: list[tuple[dict[str, Any], bool]] = [
        ({"topic": "t", "messages": [{"body": "aGk="}]}, True),
        ({"topic": "t", "queueId": 1023, "producerId": 7, "messages": [{"body": "", "seq": 0}]}, True),
        ({"topic": "t", "messages": []}, False),
        ({"topic": "a b", "messages": [{"body": ""}]}, False),
        ({"topic": "t" * 128, "messages": [{"body": ""}]}, False),
        ({"topic": "t", "queueId": 1024, "messages": [{"body": ""}]}, False),
        ({"topic": "t", "producerId": -2, "messages": [{"body": ""}]}, False),
        ({"topic": "t", "messages": [{"body": ""}], "extra": 1}, False),
        ({"topic": "t", "messages": [{"body": "", "properties": {"k": 1}}]}, False),
        ({"messages": [{"body": ""}]}, False),
    ]
    for body, valid in bodies:
        assert produce.is_valid(body) is valid, body
        try:
            wire.ProduceRequest.model_validate_json(json.dumps(body), by_alias=True, by_name=False)
        except ValueError:
            assert not valid, body
        else:
            assert valid, body


def broker_accepts_body(text: str) -> bool:
    request = wire.ProduceRequest(topic="t", messages=[wire.MessageIn(body=text)])
    try:
        wire.messages_from_json(request, now_ms=1)
    except wire.WireError:
        return False
    return True


BASE64_CHARS = "AZaz09+/=\n -_*é"


@given(st.text(alphabet=BASE64_CHARS, max_size=12) | st.binary(max_size=9).map(lambda b: base64.b64encode(b).decode()))
@settings(max_examples=500, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_base64_pattern_refuses_only_what_the_broker_refuses(document: dict[str, Any], text: str) -> None:
    """Negative tests may send any body the pattern refuses, so the broker must refuse it too."""
    matches = validator(document, {"$ref": "#/components/schemas/MessageIn"}).is_valid({"body": text})
    assert matches or not broker_accepts_body(text), text


def test_the_base64_pattern_accepts_base64(document: dict[str, Any]) -> None:
    body = validator(document, {"$ref": "#/components/schemas/MessageIn"})
    for text in ("", "aGk=", "aGVsbG8=", "+/+/"):
        assert broker_accepts_body(text)
        assert body.is_valid({"body": text}), text
    for text in ("a b", "*", "a===", "=aGk", "aGk=aGk="):
        assert not broker_accepts_body(text)
        assert not body.is_valid({"body": text}), text


def test_batch_content_type_documents_the_framing(document: dict[str, Any]) -> None:
    batch = resolve(
        document, operations(document)[("POST", "/v1/messages")]["requestBody"]["content"][wire.BATCH_CONTENT_TYPE]
    )["schema"]
    batch = resolve(document, batch)
    assert (batch["type"], batch["format"]) == ("string", "binary")
    for field in ("u8   version = 1", "i64  producer id (-1 = not idempotent)", "u32  body length, then the body"):
        assert field in batch["description"]


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/consumer-offsets"])
def test_put_responses(document: dict[str, Any], path: str) -> None:
    responses = operations(document)[("POST", path)]["responses"]
    assert {"200", "202", "400", "413", "500", "503"} <= set(responses)
    cases = {
        "200": ("PUT_OK", ("FLUSH_DISK_TIMEOUT", "SERVICE_NOT_AVAILABLE")),
        "202": ("FLUSH_SLAVE_TIMEOUT", ("PUT_OK", "IN_SYNC_REPLICAS_NOT_ENOUGH")),
        "503": ("SERVICE_NOT_AVAILABLE", ("PUT_OK", "FLUSH_DISK_TIMEOUT")),
    }
    for code, (good, bad) in cases.items():
        check = validator(document, response_schema(document, "POST", path, code))
        written = {
            "status": good,
            "remark": "",
            "messages": [{"commitOffset": 0, "queueOffset": None, "duplicate": False}],
            "nextOffset": 60,
        }
        check.validate(written)
        check.validate({"status": good, "remark": "why", "masterAddress": None})
        for status in bad:
            assert not check.is_valid({**written, "status": status}), (code, status)
        assert not check.is_valid({**written, "messages": [{"commitOffset": 0, "duplicate": False}]})
        assert not check.is_valid({"remark": ""})


def test_put_response_statuses_are_the_store_statuses(document: dict[str, Any]) -> None:
    status = document["components"]["schemas"]["PutResponse"]["properties"]["status"]
    assert set(status["enum"]) == {s.value for s in PutStatus}


def test_every_operation_has_a_success_and_an_error_response(document: dict[str, Any]) -> None:
    for (method, path), op in operations(document).items():
        assert "200" in op["responses"], f"{method} {path}: no success response"
        for code in ("default", "500"):
            error = resolve(document, op["responses"][code])
            schema = resolve(document, error["content"]["application/json"]["schema"])
            assert schema["required"] == ["status", "remark"], f"{method} {path}"


def test_error_responses(document: dict[str, Any]) -> None:
    responses = document["components"]["responses"]
    assert {"BadRequest", "NotFound", "MethodNotAllowed", "TooLarge", "InternalError", "Fenced"} <= set(responses)
    check = validator(document, {"$ref": "#/components/schemas/ErrorResponse"})
    check.validate({"status": "BAD_REQUEST", "remark": "topic: String should match pattern"})
    assert not check.is_valid({"status": "BAD_REQUEST"})
    assert not check.is_valid({"code": 1, "status": "BAD_REQUEST", "remark": ""})


def test_query_parameters(document: dict[str, Any]) -> None:
    ops = operations(document)
    consume = {p["name"]: p for p in ops[("GET", "/v1/messages")]["parameters"]}
    assert set(consume) == {"topic", "queueId", "offset", "maxCount", "maxBytes"}
    assert all(p["in"] == "query" for p in consume.values())
    assert [name for name, p in consume.items() if p["required"]] == ["topic"]
    assert (consume["queueId"]["schema"]["minimum"], consume["queueId"]["schema"]["maximum"]) == (0, 1023)
    assert consume["offset"]["schema"]["minimum"] == 0
    assert (consume["maxCount"]["schema"]["minimum"], consume["maxCount"]["schema"]["maximum"]) == (1, 1024)
    assert consume["maxBytes"]["schema"]["minimum"] == 1
    offsets = {p["name"]: p for p in ops[("GET", "/v1/consumer-offsets")]["parameters"]}
    assert {name for name, p in offsets.items() if p["required"]} == {"group", "topic"}
    assert set(offsets) == {"group", "topic", "queueId"}


def test_special_responses(document: dict[str, Any]) -> None:
    ops = operations(document)
    assert {"200", "503"} <= set(ops[("GET", "/readyz")]["responses"])
    assert list(ops[("GET", "/metrics")]["responses"]["200"]["content"]) == ["text/plain"]
    role_change = ops[("POST", "/v1/role-change")]
    assert "requestBody" not in role_change
    assert "ignored" in role_change["description"]
    for path in ("/v1/messages", "/v1/consumer-offsets", "/v1/topics"):
        assert "503" in ops[("GET", path)]["responses"], path


def test_status_schema_accepts_a_fenced_broker(document: dict[str, Any]) -> None:
    check = validator(document, response_schema(document, "GET", "/v1/status", "200"))
    store = {
        "maxOffset": 0,
        "minOffset": 0,
        "confirmOffset": 0,
        "dispatchedOffset": 0,
        "flushedOffset": 0,
        "topics": 0,
        "epochs": [],
    }
    fenced = {
        "clusterName": "c",
        "brokerName": "b",
        "address": "127.0.0.1:1",
        "haAddress": None,
        "binaryAddress": None,
        "role": "none",
        "fenced": True,
        "adminFenced": False,
        "brokerId": None,
        "masterBrokerId": None,
        "masterAddress": None,
        "masterEpoch": 0,
        "writeLeaseRemainingMs": 0,
        "store": store,
        "replication": None,
    }
    check.validate(fenced)
    assert not check.is_valid({**fenced, "role": "leader"})


def test_main_writes_the_document(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "openapi.json"
    monkeypatch.setattr(openapi, "OPENAPI_JSON", target)
    openapi.main()
    text = target.read_text(encoding="utf-8")
    assert text.endswith("}\n")
    assert json.loads(text) == openapi.build_openapi()


def test_build_returns_a_fresh_document() -> None:
    first = openapi.build_openapi()
    first["components"]["responses"]["Error"]["description"] = "changed"
    first["components"]["schemas"]["MessageIn"]["properties"]["body"]["pattern"] = "x"
    first["paths"]["/v1/messages"]["get"]["parameters"][0]["schema"]["minLength"] = 0
    assert openapi.build_openapi() == json.loads(openapi.OPENAPI_JSON.read_text(encoding="utf-8"))
