"""The committed OpenAPI document: generated from `protocol`, complete, and never stale."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
import schemathesis

from brokergroup.controller import api, openapi, protocol


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


def test_committed_file_is_the_generated_document(document: dict[str, Any]) -> None:
    committed = openapi.OPENAPI_JSON.read_text(encoding="utf-8")
    assert json.loads(committed) == document, "run `python -m brokergroup.controller.openapi` and commit the result"
    assert committed == openapi.render(document), "openapi.json is not in canonical form (sorted keys, indent 2)"


def test_api_serves_the_committed_file() -> None:
    assert api.OPENAPI_PATH == openapi.OPENAPI_JSON


def test_document_is_valid_openapi_3_1(document: dict[str, Any]) -> None:
    assert document["openapi"].startswith("3.1.")
    schemathesis.openapi.from_dict(document).validate()


def test_operations_are_exactly_the_api_routes(document: dict[str, Any]) -> None:
    routes = {(method, path, name) for method, path, _handler, name in api.ROUTES}
    table = {(op.method, op.path, op.name) for op in openapi.OPERATIONS}
    documented = {(method, path, op["operationId"]) for (method, path), op in operations(document).items()}
    assert table == routes
    assert documented == routes


def test_every_request_model_is_a_component(document: dict[str, Any]) -> None:
    request_models = {
        name
        for name, obj in inspect.getmembers(protocol, inspect.isclass)
        if issubclass(obj, protocol.Message) and name.endswith("Request")
    }
    assert len(request_models) >= 8
    assert request_models <= set(document["components"]["schemas"])
    bodies = {
        op["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
        for op in operations(document).values()
        if "requestBody" in op
    }
    assert request_models <= bodies, f"request models no operation takes: {request_models - bodies}"


def test_request_schemas_use_wire_names_and_refuse_unknown_fields(document: dict[str, Any]) -> None:
    schema = document["components"]["schemas"]["HeartbeatRequest"]
    assert schema["additionalProperties"] is False
    assert {"clusterName", "brokerName", "brokerAddr", "brokerId"} == set(schema["required"])
    assert "heartbeatTimeoutMills" in schema["properties"]
    assert "broker_name" not in schema["properties"]


def test_every_operation_has_a_success_and_an_error_response(document: dict[str, Any]) -> None:
    for (method, path), op in operations(document).items():
        codes = set(op["responses"])
        assert codes & {"101", "200"}, f"{method} {path}: no success response"
        error = resolve(document, op["responses"]["default"])
        schema = resolve(document, error["content"]["application/json"]["schema"])
        assert schema["required"] == ["code", "name", "remark"], f"{method} {path}"
        assert schema["additionalProperties"] is True, "MASTER_STILL_EXIST carries data with the error"


@pytest.mark.parametrize(
    ("method", "path", "security"),
    [
        ("POST", "/v1/elect-master", [{"brokerToken": []}, {"adminToken": []}]),
        ("POST", "/v1/clean-broker-data", [{"adminToken": []}]),
        ("POST", "/v1/config", [{"adminToken": []}]),
    ],
)
def test_admin_operations_need_the_bearer_token(
    document: dict[str, Any], method: str, path: str, security: list[dict[str, Any]]
) -> None:
    op = operations(document)[(method, path)]
    assert op["security"] == security
    assert "401" in op["responses"]
    scheme = document["components"]["securitySchemes"]["adminToken"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")


def test_only_admin_and_broker_operations_declare_security(document: dict[str, Any]) -> None:
    ops = operations(document)
    secured = {key for key, op in ops.items() if "security" in op}
    broker = {
        ("POST", "/v1/broker/apply-id"),
        ("POST", "/v1/broker/register"),
        ("POST", "/v1/broker/heartbeat"),
        ("GET", "/v1/broker/heartbeat-stream"),
        ("POST", "/v1/alter-sync-state-set"),
        ("POST", "/v1/elect-master"),
    }
    assert secured == broker | {("POST", "/v1/clean-broker-data"), ("POST", "/v1/config")}
    for key in broker:
        assert ops[key]["security"] == [{"brokerToken": []}, {"adminToken": []}], key
        assert {"401", "403"} <= set(ops[key]["responses"]), key
    assert "security" not in document


def test_query_parameters(document: dict[str, Any]) -> None:
    ops = operations(document)
    broker_name, broker_id = ops[("GET", "/v1/replica-info")]["parameters"]
    assert (broker_name["name"], broker_name["in"], broker_name["required"]) == ("brokerName", "query", True)
    assert (broker_id["name"], broker_id["required"], broker_id["schema"]["minimum"]) == ("brokerId", False, 1)
    params = {p["name"]: p for p in ops[("GET", "/v1/events")]["parameters"]}
    assert params["after"]["schema"]["minimum"] == 0
    assert (params["waitSeconds"]["schema"]["minimum"], params["waitSeconds"]["schema"]["maximum"]) == (0, 60)
    events = resolve(document, ops[("GET", "/v1/events")]["responses"]["200"]["content"]["application/json"]["schema"])
    assert events["properties"]["lastIndex"]["type"] == "integer"
    assert events["properties"]["events"]["items"]["type"] == "object"


def test_special_responses(document: dict[str, Any]) -> None:
    ops = operations(document)
    stream = ops[("GET", "/v1/broker/heartbeat-stream")]["responses"]
    assert "101" in stream and "HeartbeatRequest" in stream["101"]["description"]
    assert set(ops[("GET", "/readyz")]["responses"]) == {"200", "503", "default"}
    assert list(ops[("GET", "/metrics")]["responses"]["200"]["content"]) == ["text/plain"]


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
    first["paths"]["/v1/events"]["get"]["parameters"][0]["schema"]["minimum"] = -1
    assert openapi.build_openapi() == json.loads(openapi.OPENAPI_JSON.read_text(encoding="utf-8"))
