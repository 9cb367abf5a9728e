"""The OpenAPI 3.1 document of the controller's HTTP API (DESIGN §2.1), built from `protocol`.

`build_openapi()` is pure: the request and response schemas come from the pydantic models in
`protocol` (camelCase aliases, as on the wire), everything else from the `OPERATIONS` table
below, which mirrors `api.ROUTES` (a unit test keeps the two equal; this module does not
import `api`, so it stays free of aiohttp). `python -m brokergroup.controller.openapi`
rewrites the committed `openapi.json` that `GET /v1/openapi.json` serves; a unit test fails
when the committed file differs from `build_openapi()`.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from brokergroup.controller import protocol
from brokergroup.controller.settings import RocketMQConfig

OPENAPI_JSON = Path(__file__).with_name("openapi.json")
REF = "#/components/schemas/{model}"
SECURITY_SCHEME = "adminToken"
BROKER_SCHEME = "brokerToken"
Admin = Literal["always", "designate"]


def ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(model=name)}


def json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def ok(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": json_content(schema)}


@dataclasses.dataclass(frozen=True)
class Operation:
    method: str
    path: str
    name: str
    """operationId; the same as the aiohttp route name in `api.ROUTES`."""
    summary: str
    response: type[BaseModel] | None = None
    """The JSON body of a 200 response, when it is a model."""
    response_description: str = "Success."
    responses: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    """Other responses by status code; `default` (the error) is added to every operation."""
    request: type[BaseModel] | str | None = None
    """The JSON request body, when there is one: a model, or the name of a hand-written schema."""
    parameters: tuple[dict[str, Any], ...] = ()
    admin: Admin | None = None
    """Needs the admin bearer token: always, or only with `designateElect: true`."""
    broker: bool = False
    """Feeds elections or changes a sync-state-set: needs the group's broker token (or the admin token)."""
    leader_only: bool = False
    """Answered by the serving leader; a follower forwards the request once."""
    description: str = ""


def query(name: str, schema: dict[str, Any], description: str, *, required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "schema": schema, "description": description}


def path_parameter(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": schema, "description": description}


# ---- schemas that are not pydantic models --------------------------------------------------------

HAND_WRITTEN: dict[str, dict[str, Any]] = {
    "EventsResponse": {
        "type": "object",
        "description": "Committed controller events after a Raft index, oldest first (at most 1000).",
        "properties": {
            "events": {
                "type": "array",
                "items": {"type": "object", "description": "One event-log record, with its Raft `index`."},
            },
            "lastIndex": {"type": "integer", "description": "Highest Raft index this node has published."},
            "truncated": {
                "type": "boolean",
                "description": "True when events after `after` may be missing (feed overflow or a snapshot load).",
            },
        },
        "required": ["events", "lastIndex", "truncated"],
        "additionalProperties": False,
    },
    "EventLogListing": {
        "type": "object",
        "description": "This node's event-log files, oldest first.",
        "properties": {
            "nodeId": {"type": "string", "description": "The node that wrote the files (its `node` field)."},
            "files": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {
                            "type": "string",
                            "description": "`events-<nodeId>-<seq>.jsonl`; fetch it with GET /v1/eventlog/{name}.",
                        },
                        "size": {
                            "type": "integer",
                            "minimum": 0,
                            "description": "Bytes of complete lines when listed; a line still being written is "
                            "not counted. The file only grows.",
                        },
                    },
                    "required": ["name", "size"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["nodeId", "files"],
        "additionalProperties": False,
    },
    "ConfigUpdate": {
        "type": "object",
        "description": "RocketMQ ControllerConfig keys (as shown by GET /v1/config) and their new values. "
        "Unknown keys are refused (400), black-listed keys too (403).",
        "minProperties": 1,
        "additionalProperties": True,
    },
    "StatusResponse": {
        "type": "object",
        "description": "This node's view of Raft and of the brokers it hears from.",
        "properties": {
            "nodeId": {"type": "string"},
            "serving": {"type": "boolean", "description": "Serving as controller leader (barrier applied)."},
            "raftLeader": {"type": "boolean"},
            "leaderId": {"type": ["string", "null"]},
            "term": {"type": "integer"},
            "commitIndex": {"type": "integer"},
            "lastApplied": {"type": "integer"},
            "hasQuorum": {"type": "boolean"},
            "stateVersion": {"type": "integer"},
            "activeBrokers": {"type": "integer"},
            "raftEntryFormat": {
                "type": "integer",
                "description": "Highest Raft entry format this node applies: 2 = group-commit entries (batches of "
                "several broker sets). A leader groups batches only once every other node reports 2.",
            },
            "groupCommit": {
                "type": "boolean",
                "description": "This node, as leader, puts batches of several broker sets in one Raft entry.",
            },
        },
        "required": [
            "nodeId",
            "serving",
            "raftLeader",
            "leaderId",
            "term",
            "commitIndex",
            "lastApplied",
            "hasQuorum",
            "stateVersion",
            "activeBrokers",
            "raftEntryFormat",
            "groupCommit",
        ],
        "additionalProperties": True,
    },
    "StateResponse": {
        "type": "object",
        "description": "This node's replicated state machine: the same `state` at the same `version` on every node.",
        "properties": {
            "version": {"type": "integer", "description": "Number of state-changing commands applied."},
            "state": {"type": "object", "description": "replicaInfo and syncStateInfo, keyed by broker name."},
            "lastApplied": {"type": "integer", "description": "Raft index last applied on this node."},
        },
        "required": ["version", "state", "lastApplied"],
        "additionalProperties": True,
    },
    "StateDigestResponse": {
        "type": "object",
        "description": "A digest of this node's applied Raft state: "
        "equal `digest` at equal `last_applied` on every node.",
        "properties": {
            "node_id": {"type": "string"},
            "term": {"type": "integer", "description": "This node's Raft term."},
            "last_applied": {"type": "integer", "description": "Raft index the digest is taken at."},
            "digest": {
                "type": "string",
                "description": "sha256 (hex) of the canonical JSON (sorted keys, no spaces) of "
                "{state, version, setVersions}.",
            },
        },
        "required": ["node_id", "term", "last_applied", "digest"],
        "additionalProperties": False,
    },
    "HealthResponse": {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
    },
    "ReadyResponse": {
        "type": "object",
        "properties": {
            "ready": {"type": "boolean", "description": "A Raft leader is known."},
            "leader": {"type": ["string", "null"], "description": "Node id of the Raft leader."},
        },
        "required": ["ready", "leader"],
    },
}

# ---- the operations: one per route of api.ROUTES -------------------------------------------------

HEARTBEAT_STREAM = """\
A persistent heartbeat channel (WebSocket). The broker sends one text frame per heartbeat, each
a JSON object with the fields of `HeartbeatRequest` (camelCase). Nothing is sent back for a good
heartbeat; a frame that is not text, or not a valid heartbeat, is answered with an error frame
`{"code", "name", "remark"}` and the stream stays open. When the stream closes, the node marks
the broker inactive at once (on the leader, a master's close triggers an election)."""

EVENTLOG_FILE = """\
The node stats the file once, when it opens it, and answers the bytes up to and including the
last newline within that size: the file being appended to may end in a line that is half
written, and that line is left out (a later request includes it whole). Files only grow, so an
answer is always a prefix of what the same request returns later. Names that are not plain file
names (a `/`, `..`, other characters) are refused with 400; any other name that is not one of
this node's files with 404."""

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "POST",
        "/v1/broker/next-id",
        "next-id",
        "CONTROLLER_GET_NEXT_BROKER_ID: the broker id the controller would assign next.",
        response=protocol.NextIdResponse,
        request=protocol.NextIdRequest,
        leader_only=True,
    ),
    Operation(
        "POST",
        "/v1/broker/apply-id",
        "apply-id",
        "CONTROLLER_APPLY_BROKER_ID: claim a broker id for a broker address.",
        response=protocol.ApplyIdResponse,
        request=protocol.ApplyIdRequest,
        broker=True,
        leader_only=True,
    ),
    Operation(
        "POST",
        "/v1/broker/register",
        "register",
        "CONTROLLER_REGISTER_BROKER: register a broker and learn its set's master.",
        response=protocol.RegisterResponse,
        request=protocol.RegisterRequest,
        broker=True,
        leader_only=True,
    ),
    Operation(
        "POST",
        "/v1/broker/heartbeat",
        "heartbeat",
        "BROKER_HEARTBEAT: one heartbeat, to this node (brokers heartbeat every node).",
        response=protocol.EmptyResponse,
        request=protocol.HeartbeatRequest,
        broker=True,
    ),
    Operation(
        "GET",
        "/v1/broker/heartbeat-stream",
        "heartbeat-stream",
        "Heartbeats over a WebSocket; closing it marks the broker inactive.",
        responses={"101": {"description": "Switching Protocols: the WebSocket is open. " + HEARTBEAT_STREAM}},
        broker=True,
        description=HEARTBEAT_STREAM,
    ),
    Operation(
        "POST",
        "/v1/elect-master",
        "elect-master",
        "CONTROLLER_ELECT_MASTER: elect a master for a broker set.",
        response=protocol.ElectMasterResponse,
        request=protocol.ElectMasterRequest,
        admin="designate",
        broker=True,
        leader_only=True,
        description="`brokerId` -1 (the default) is a controller-triggered election: the policy picks, and "
        "when no replica is alive the set is left without a master and the answer is "
        "CONTROLLER_MASTER_NOT_AVAILABLE (2004, HTTP 503). With `designateElect: true` an administrator "
        "designates `brokerId` (>= 1), and the admin token is required when one is configured; without it the "
        "broker token (or the admin token) is. A set whose "
        "master is still alive answers CONTROLLER_MASTER_STILL_EXIST (2011) with the ElectMasterResponse "
        "fields in the error body.",
    ),
    Operation(
        "POST",
        "/v1/alter-sync-state-set",
        "alter-sync-state-set",
        "CONTROLLER_ALTER_SYNC_STATE_SET: the master changes its sync-state-set.",
        response=protocol.AlterSyncStateSetResponse,
        request=protocol.AlterSyncStateSetRequest,
        broker=True,
        leader_only=True,
        description="Committed only if `syncStateSetEpoch` is the current one (the answer carries it + 1). "
        "brokergroup: each member being added must have reported, in its last heartbeat, a max offset of at "
        "least `confirmOffset` (the master's confirm offset when it proposed), else CONTROLLER_INVALID_REPLICAS "
        "(2003) names the replica that is behind.",
    ),
    Operation(
        "GET",
        "/v1/replica-info",
        "replica-info",
        "CONTROLLER_GET_REPLICA_INFO: master and sync-state-set of one broker set.",
        response=protocol.ReplicaInfoResponse,
        parameters=(
            query("brokerName", {"type": "string", "minLength": 1}, "The broker set.", required=True),
            query(
                "brokerId",
                {"type": "integer", "minimum": 1},
                "A broker of the set: the answer's heartbeatAgeMs says how long ago the leader heard it.",
            ),
        ),
        leader_only=True,
    ),
    Operation(
        "POST",
        "/v1/sync-state-data",
        "sync-state-data",
        "CONTROLLER_GET_SYNC_STATE_DATA: replicas and their liveness, per broker set.",
        response=protocol.SyncStateDataResponse,
        request=protocol.SyncStateDataRequest,
        leader_only=True,
    ),
    Operation(
        "GET",
        "/v1/metadata",
        "metadata",
        "CONTROLLER_GET_METADATA_INFO: the controller group and its leader.",
        response=protocol.MetadataResponse,
    ),
    Operation(
        "POST",
        "/v1/clean-broker-data",
        "clean-broker-data",
        "CLEAN_BROKER_DATA: forget brokers of a set (all of them, or the ids given). brokergroup refuses ids "
        "whose removal would empty the set's sync-state-set while other replicas remain, unless `force`.",
        response=protocol.EmptyResponse,
        request=protocol.CleanBrokerDataRequest,
        admin="always",
        leader_only=True,
    ),
    Operation(
        "GET",
        "/v1/config",
        "get-config",
        "GET_CONTROLLER_CONFIG: this node's RocketMQ ControllerConfig keys (node-local).",
        response=RocketMQConfig,
        response_description="The node's current config, key -> value.",
    ),
    Operation(
        "POST",
        "/v1/config",
        "update-config",
        "UPDATE_CONTROLLER_CONFIG: change config keys on this node only; black-listed keys are refused.",
        response=RocketMQConfig,
        response_description="The node's config after the change, key -> value.",
        responses={"403": {"$ref": "#/components/responses/Forbidden"}},
        request="ConfigUpdate",
        admin="always",
    ),
    Operation(
        "GET",
        "/v1/events",
        "events",
        "Long-poll of committed controller events, for the operator.",
        responses={"200": ok("Events after `after`, possibly none when `waitSeconds` ran out.", ref("EventsResponse"))},
        parameters=(
            query(
                "after",
                {"type": "integer", "minimum": 0, "maximum": 2**62, "default": 0},
                "Return events with a Raft index greater than this.",
            ),
            query(
                "waitSeconds",
                {"type": "integer", "minimum": 0, "maximum": 60, "default": 0},
                "Wait up to this long for an event when there is none after `after`.",
            ),
        ),
    ),
    Operation(
        "GET",
        "/v1/eventlog",
        "eventlog",
        "This node's event-log files (node-local; `brokergroup audit fetch` downloads them).",
        responses={"200": ok("The files, oldest first.", ref("EventLogListing"))},
    ),
    Operation(
        "GET",
        "/v1/eventlog/{name}",
        "eventlog-file",
        "One of this node's event-log files, streamed as JSON lines.",
        description=EVENTLOG_FILE,
        responses={
            "200": {
                "description": "The file's complete lines (Content-Length bytes).",
                "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
            },
            "400": ok("CONTROLLER_INVALID_REQUEST (2005): `name` is not a plain file name.", ref("ErrorResponse")),
            "404": ok(
                "REQUEST_CODE_NOT_SUPPORTED (3): `name` is not one of this node's event-log files.",
                ref("ErrorResponse"),
            ),
        },
        parameters=(
            path_parameter(
                "name",
                {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]*$", "maxLength": 255},
                "A file name from GET /v1/eventlog; letters, digits, '.', '_' and '-', without '..'.",
            ),
        ),
    ),
    Operation(
        "GET",
        "/v1/status",
        "status",
        "This node's Raft status.",
        responses={"200": ok("Status.", ref("StatusResponse"))},
    ),
    Operation(
        "GET",
        "/v1/state",
        "state",
        "This node's replicated state.",
        responses={"200": ok("State.", ref("StateResponse"))},
    ),
    Operation(
        "GET",
        "/v1/raft/state-digest",
        "raft-state-digest",
        "A digest of this node's applied Raft state, to compare the nodes.",
        responses={"200": ok("State digest.", ref("StateDigestResponse"))},
    ),
    Operation(
        "GET",
        "/v1/openapi.json",
        "openapi",
        "This document.",
        responses={"200": ok("The OpenAPI 3.1 document.", {"type": "object"})},
    ),
    Operation(
        "GET",
        "/healthz",
        "healthz",
        "Liveness: the process answers.",
        responses={"200": ok("Alive.", ref("HealthResponse"))},
    ),
    Operation(
        "GET",
        "/readyz",
        "readyz",
        "Readiness: a Raft leader is known.",
        responses={
            "200": ok("A leader is known.", ref("ReadyResponse")),
            "503": ok("No leader is known.", ref("ReadyResponse")),
        },
    ),
    Operation(
        "GET",
        "/metrics",
        "metrics",
        "Prometheus metrics of this node.",
        responses={
            "200": {
                "description": "Prometheus text exposition format.",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            }
        },
    ),
)

# ---- assembly ------------------------------------------------------------------------------------

RESPONSES: dict[str, dict[str, Any]] = {
    "Error": ok(
        "An error: RocketMQ's response code and name, and a remark naming what was wrong. Some errors carry "
        "data as well (CONTROLLER_MASTER_STILL_EXIST carries the ElectMasterResponse fields).",
        ref("ErrorResponse"),
    ),
    "Unauthorized": ok(
        "NO_PERMISSION (16): the admin token is missing or wrong (`X-Brokergroup-Token: <token>` or "
        "`Authorization: Bearer <token>`; the header wins when both are sent).",
        ref("ErrorResponse"),
    ),
    "BrokerTokenMissing": ok(
        "NO_PERMISSION (16): no token; this request feeds elections and needs the group's broker token "
        "(`X-Brokergroup-Token: <token>` or `Authorization: Bearer <token>`). Nothing changed.",
        ref("ErrorResponse"),
    ),
    "BrokerTokenWrong": ok(
        "NO_PERMISSION (16): the token is neither the group's broker token nor its admin token. Nothing changed.",
        ref("ErrorResponse"),
    ),
    "Forbidden": ok("NO_PERMISSION (16): the config key is black-listed.", ref("ErrorResponse")),
}


def model_schemas(operations: tuple[Operation, ...]) -> dict[str, Any]:
    """JSON schemas of every model the operations name (requests validated, responses serialized)."""
    wanted: list[tuple[type[BaseModel], JsonSchemaMode]] = [(protocol.ErrorResponse, "serialization")]
    for op in operations:
        if isinstance(op.request, type):
            wanted.append((op.request, "validation"))
        if op.response is not None:
            wanted.append((op.response, "serialization"))
    keys, document = models_json_schema(list(dict.fromkeys(wanted)), by_alias=True, ref_template=REF)
    for (model, _mode), schema in keys.items():
        if schema != ref(model.__name__):
            raise ValueError(f"{model.__name__} would be published as {schema}; give it a schema of its own")
    defs: dict[str, Any] = document["$defs"]
    return defs


def operation_object(op: Operation) -> dict[str, Any]:
    item: dict[str, Any] = {"operationId": op.name, "summary": op.summary}
    description = op.description
    if op.leader_only:
        description += (
            "\n\nAnswered by the serving leader; a follower forwards the request to it. "
            "CONTROLLER_NOT_LEADER (2007, HTTP 503) only when no leader is known within the node's "
            "`api.leader_wait` (3 s by default: an election in progress)."
        )
    if description:
        item["description"] = description.strip()
    if op.parameters:
        item["parameters"] = list(op.parameters)
    if op.request is not None:
        name = op.request if isinstance(op.request, str) else op.request.__name__
        item["requestBody"] = {"required": True, "content": json_content(ref(name))}
    responses = {**op.responses, "default": {"$ref": "#/components/responses/Error"}}
    if op.response is not None:
        responses["200"] = ok(op.response_description, ref(op.response.__name__))
    if op.broker:
        responses["401"] = {"$ref": "#/components/responses/BrokerTokenMissing"}
        responses["403"] = {"$ref": "#/components/responses/BrokerTokenWrong"}
        # Either token (elect-master with designateElect needs the admin token).
        item["security"] = [{BROKER_SCHEME: []}, {SECURITY_SCHEME: []}]
    elif op.admin is not None:
        responses["401"] = {"$ref": "#/components/responses/Unauthorized"}
        # `{}` first: without designateElect no token is needed; with it, the bearer token is.
        item["security"] = [{}, {SECURITY_SCHEME: []}] if op.admin == "designate" else [{SECURITY_SCHEME: []}]
    item["responses"] = responses
    return item


def build_openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 document of every route the controller serves (a fresh copy on every call)."""
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method.lower()] = operation_object(op)
    document = {
        "openapi": "3.1.0",
        "info": {
            "title": "brokergroup controller",
            "version": "1",
            "description": "RocketMQ 5 controller-mode requests over HTTP/JSON (DESIGN §2.1). Any node accepts "
            "any request; errors are `{code, name, remark}` with RocketMQ's response codes.",
        },
        "paths": paths,
        "components": {
            "schemas": {**model_schemas(OPERATIONS), **HAND_WRITTEN},
            "responses": RESPONSES,
            "securitySchemes": {
                SECURITY_SCHEME: {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "The controller's admin token (`api.admin_token`; on Kubernetes from a Secret). "
                    "Needed only when one is configured. The same token is accepted in the `X-Brokergroup-Token` "
                    "header, which the Kubernetes API server's service proxy passes on (it drops `Authorization`); "
                    "when that header is present it is the credential.",
                },
                BROKER_SCHEME: {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "The group's broker token (`api.broker_token`; on Kubernetes from the Secret "
                    "`<bg>-controller-auth`, key `brokerToken`). Needed only when one is configured. Also accepted "
                    "in the `X-Brokergroup-Token` header.",
                },
            },
        },
    }
    return copy.deepcopy(document)


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> None:
    OPENAPI_JSON.write_text(render(build_openapi()), encoding="utf-8")
    print(f"wrote {OPENAPI_JSON}")


if __name__ == "__main__":
    main()
