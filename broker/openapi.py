"""The OpenAPI 3.1 document of the broker's HTTP API, built from `wire`.

`build_openapi()` is pure: the JSON request schemas come from the pydantic models in `wire`
(camelCase aliases, as on the wire), the binary batch is described from `wire`'s docstring, and
everything else comes from the `OPERATIONS` table below, which mirrors `api.ROUTES` (a unit test
keeps the two equal; this module does not import `api`, so it stays free of aiohttp).
`python -m brokergroup.broker.openapi` rewrites the committed `openapi.json` that
`GET /v1/openapi.json` serves; a unit test fails when the committed file differs from
`build_openapi()`.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from brokergroup.broker import wire

OPENAPI_JSON = Path(__file__).with_name("openapi.json")
REF = "#/components/schemas/{model}"
MAX_BODY = 8 * 1024 * 1024
"""`api.MAX_BODY`: larger request bodies are refused with 413."""
MAX_COUNT = 1024
MAX_BYTES = 64 * 1024 * 1024
PUT_STATUSES = (
    "PUT_OK",
    "FLUSH_DISK_TIMEOUT",
    "FLUSH_SLAVE_TIMEOUT",
    "IN_SYNC_REPLICAS_NOT_ENOUGH",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    "SERVICE_NOT_AVAILABLE",
)
NO_PERMISSION = "NO_PERMISSION"
"""`permission.NO_PERMISSION`: a produce refused because the replica's write permission is wiped (HTTP 503)."""
BASE64 = r"^[A-Za-z0-9+/]*={0,2}$"
"""Everything `base64.b64decode(validate=True)` may accept (it still refuses bad padding)."""


def ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(model=name)}


def response_ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/responses/{name}"}


def json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def ok(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": json_content(schema)}


def query(name: str, schema: dict[str, Any], description: str, *, required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "schema": schema, "description": description}


def nullable(kind: str, description: str = "") -> dict[str, Any]:
    schema: dict[str, Any] = {"type": [kind, "null"]}
    if description:
        schema["description"] = description
    return schema


def obj(properties: dict[str, Any], *, required: tuple[str, ...] | None = None, extra: bool = False) -> dict[str, Any]:
    """An object schema; every property is required unless `required` says otherwise."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties if required is None else required),
        "additionalProperties": extra,
    }


INTEGER = {"type": "integer"}
OFFSET = {"type": "integer", "minimum": 0}


# ---- hand-written schemas (responses and the binary batch) ---------------------------------------

BATCH_DESCRIPTION = (
    "A binary batch of messages for one queue, big-endian, as documented in `brokergroup.broker.wire`:\n\n"
    + "\n".join(line for line in (wire.__doc__ or "").splitlines() if line.startswith("    "))
    + "\n\nThe body must end exactly after the last message. A malformed batch is refused with 400 and a "
    "remark naming the field."
)

ROLE_VIEW: dict[str, Any] = {
    "role": {"type": "string", "enum": ["none", "master", "slave"]},
    "fenced": {"type": "boolean", "description": "True until the controller told the broker its role."},
    "adminFenced": {
        "type": "boolean",
        "description": "Fenced by an administrator (PUT /v1/admin/fence): no writes, no replication, not Ready.",
    },
    "writable": {
        "type": "boolean",
        "description": "False while the write permission is wiped (PUT /v1/admin/write-permission): produces are "
        "refused with NO_PERMISSION; consumes, offset commits, replication and readiness go on.",
    },
    "brokerId": nullable("integer"),
    "masterBrokerId": nullable("integer"),
    "masterAddress": nullable("string"),
    "masterEpoch": INTEGER,
    "writeLeaseRemainingMs": {"type": "integer", "description": "0 unless master."},
}
STATUS_REQUIRED = (
    "clusterName",
    "brokerName",
    "address",
    "haAddress",
    "binaryAddress",
    *(name for name in ROLE_VIEW if name != "writable"),
    "store",
    "replication",
)
"""`writable` is documented but not required in the status: brokers that predate it do not report it."""

HAND_WRITTEN: dict[str, dict[str, Any]] = {
    "Batch": {"type": "string", "format": "binary", "description": BATCH_DESCRIPTION},
    "ErrorResponse": {
        **obj(
            {
                "status": {
                    "type": "string",
                    "enum": ["BAD_REQUEST", "SYSTEM_ERROR"],
                    "description": "SYSTEM_ERROR only with 500; BAD_REQUEST otherwise.",
                },
                "remark": {"type": "string", "description": "What was wrong: the field, parameter or problem."},
            }
        ),
        "description": "An error.",
    },
    "Appended": {
        **obj(
            {
                "commitOffset": {
                    "type": "integer",
                    "description": "Commit-log offset of the record; -1 for a duplicate whose original position "
                    "is no longer remembered.",
                },
                "queueOffset": nullable("integer", "Offset in its queue; null for a consumer-offset commit."),
                "duplicate": {
                    "type": "boolean",
                    "description": "The producer id and sequence were already stored; nothing was written again.",
                },
            }
        ),
        "description": "Where one message of the request is stored.",
    },
    "PutResponse": {
        **obj(
            {
                "status": {"type": "string", "enum": list(PUT_STATUSES)},
                "remark": {"type": "string", "description": "Empty for PUT_OK; otherwise why."},
                "messages": {
                    "type": "array",
                    "items": ref("Appended"),
                    "description": "One entry per message of the request, in order; present when written.",
                },
                "nextOffset": {"type": "integer", "description": "Commit-log offset after the write."},
                "masterAddress": nullable(
                    "string",
                    "With SERVICE_NOT_AVAILABLE: the master's HTTP address as this broker knows it; null when "
                    "unknown or when this broker is the master (lease expired).",
                ),
            },
            required=("status", "remark"),
        ),
        "description": "The outcome of a put (RocketMQ PutMessageStatus).",
    },
    "NoPermissionResponse": {
        **obj(
            {
                "status": {"type": "string", "enum": [NO_PERMISSION]},
                "remark": {"type": "string", "description": "Names the cause: the wiped write permission."},
            }
        ),
        "description": "A produce refused because this replica's write permission is wiped (RocketMQ NO_PERMISSION): "
        "nothing was written; restore it with PUT /v1/admin/write-permission.",
    },
    "RoleView": {
        **obj(ROLE_VIEW, extra=True),
        "description": "This broker's role, fences and write permission (the role part of GET /v1/status).",
    },
    "ConsumerLag": {
        **obj(
            {
                "group": {"type": "string"},
                "topic": {"type": "string"},
                "queueId": INTEGER,
                "consumerOffset": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "The group's committed offset (moved up to the queue's min offset if retention "
                    "deleted the messages below it).",
                },
                "maxOffset": {"type": "integer", "description": "One past the last visible message's queue offset."},
                "lag": {"type": "integer", "minimum": 0, "description": "maxOffset - consumerOffset, at least 0."},
            }
        ),
        "description": "One consumer group's progress on one queue.",
    },
    "ConsumerLagResponse": {
        **obj(
            {
                "totalLag": {"type": "integer", "minimum": 0, "description": "The sum of the rows' lag."},
                "groups": {"type": "integer", "minimum": 0, "description": "Distinct groups among the rows."},
                "queues": {
                    "type": "array",
                    "items": ref("ConsumerLag"),
                    "description": "One row per (group, topic, queueId) a group committed an offset for, sorted "
                    "by group, topic, queueId.",
                },
            }
        ),
        "description": "RocketMQ consumerProgress on this replica.",
    },
    "StoredMessage": {
        **obj(
            {
                "topic": {"type": "string"},
                "queueId": INTEGER,
                "queueOffset": INTEGER,
                "commitOffset": INTEGER,
                "body": {"type": "string", "contentEncoding": "base64"},
                "properties": {"type": "object", "additionalProperties": {"type": "string"}},
                "bornTimestamp": INTEGER,
                "storeTimestamp": INTEGER,
                "producerId": {"type": "integer", "description": "-1 when not idempotent."},
                "seq": {"type": "integer", "description": "-1 when not idempotent."},
            }
        ),
        "description": "A stored message.",
    },
    "MessagesResponse": obj(
        {
            "status": {
                "type": "string",
                "enum": ["FOUND", "NO_NEW_MESSAGE", "NO_MESSAGE_IN_QUEUE", "OFFSET_TOO_SMALL", "OFFSET_OVERFLOW_BADLY"],
                "description": "RocketMQ GetMessageStatus. OFFSET_TOO_SMALL: retention deleted the messages at this "
                "offset; nextOffset is the queue's min offset.",
            },
            "messages": {"type": "array", "items": ref("StoredMessage")},
            "nextOffset": {"type": "integer", "description": "The queue offset to ask for next."},
            "minOffset": INTEGER,
            "maxOffset": {"type": "integer", "description": "One past the last visible message's queue offset."},
        }
    ),
    "ConsumerOffsetResponse": obj(
        {
            "group": {"type": "string"},
            "topic": {"type": "string"},
            "queueId": INTEGER,
            "offset": nullable("integer", "null when the group never committed an offset for the queue."),
        }
    ),
    "QueueRange": obj({"queueId": INTEGER, "minOffset": INTEGER, "maxOffset": INTEGER}),
    "TopicsResponse": obj(
        {
            "topics": {
                "type": "object",
                "additionalProperties": {"type": "array", "items": ref("QueueRange")},
                "description": "Topic -> its queues that hold visible messages.",
            }
        }
    ),
    "StoreStatus": obj(
        {
            "maxOffset": OFFSET,
            "minOffset": OFFSET,
            "confirmOffset": OFFSET,
            "dispatchedOffset": OFFSET,
            "flushedOffset": OFFSET,
            "topics": {"type": "integer", "description": "Number of topics."},
            "epochs": {"type": "array", "items": ref("EpochEntry")},
        },
        extra=True,
    ),
    "StatusResponse": {
        **obj(
            {
                "clusterName": {"type": "string"},
                "brokerName": {"type": "string"},
                "address": {"type": "string", "description": "This broker's HTTP address."},
                "haAddress": nullable("string", "The replication address; null before the broker has an id."),
                "binaryAddress": nullable("string", "The binary client protocol's address; null when it is off."),
                **ROLE_VIEW,
                "writable": {
                    **ROLE_VIEW["writable"],
                    "description": ROLE_VIEW["writable"]["description"] + " Absent from brokers that predate it.",
                },
                "store": ref("StoreStatus"),
                "replication": {
                    "type": ["object", "null"],
                    "description": "Replication runtime info (RocketMQ HARuntimeInfo); null before the broker has "
                    "an id.",
                },
            },
            required=STATUS_REQUIRED,
            extra=True,
        ),
        "description": "This broker's role, store and replication.",
    },
    "EpochEntry": obj({"epoch": INTEGER, "startOffset": OFFSET, "endOffset": {"type": "integer"}}),
    "EpochsResponse": {
        **obj(
            {
                "clusterName": {"type": "string"},
                "brokerName": {"type": "string"},
                "brokerAddr": {"type": "string"},
                "brokerId": nullable("integer"),
                "epochs": {"type": "array", "items": ref("EpochEntry")},
            }
        ),
        "description": "RocketMQ getBrokerEpochCache: the last entry ends at the current max offset.",
    },
    "EmptyResponse": obj({}),
    "HealthResponse": obj({"ok": {"type": "boolean"}}),
    "ReadyResponse": obj(
        {
            "ready": {"type": "boolean", "description": "Not fenced: the broker knows its role."},
            "role": {"type": "string", "enum": ["none", "master", "slave"]},
        }
    ),
}


def request_schemas() -> dict[str, Any]:
    """The JSON request bodies, from `wire`'s pydantic models, with the base64 body documented."""
    models: list[tuple[type[BaseModel], JsonSchemaMode]] = [
        (wire.ProduceRequest, "validation"),
        (wire.ConsumerOffsetRequest, "validation"),
        (wire.FenceRequest, "validation"),
        (wire.WritePermissionRequest, "validation"),
    ]
    keys, document = models_json_schema(models, by_alias=True, ref_template=REF)
    for (model, _mode), schema in keys.items():
        if schema != ref(model.__name__):
            raise ValueError(f"{model.__name__} would be published as {schema}; give it a schema of its own")
    defs: dict[str, Any] = document["$defs"]
    defs["MessageIn"]["properties"]["body"].update(
        contentEncoding="base64",
        pattern=BASE64,
        description="The message body, base64 (RFC 4648, with padding).",
    )
    defs["MessageIn"]["properties"]["seq"]["description"] = (
        "The producer's sequence number; required (>= 0) when producerId is set."
    )
    defs["MessageIn"]["properties"]["bornTimestamp"]["description"] = "ms since the epoch; default: now."
    defs["ProduceRequest"]["properties"]["producerId"]["description"] = (
        "An idempotent producer's id; -1 (the default) means not idempotent."
    )
    return defs


# ---- the operations: one per route of api.ROUTES -------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Operation:
    method: str
    path: str
    name: str
    """operationId; the name of the handler in `api.ROUTES`."""
    summary: str
    responses: dict[str, dict[str, Any]]
    description: str = ""
    parameters: tuple[dict[str, Any], ...] = ()
    request: dict[str, Any] | None = None
    """The requestBody object, when there is one."""


def put_outcome(description: str, statuses: tuple[str, ...]) -> dict[str, Any]:
    only = {"properties": {"status": {"enum": list(statuses)}}}
    return ok(description, {"allOf": [ref("PutResponse"), only]})


PUT_RESPONSES: dict[str, dict[str, Any]] = {
    "200": put_outcome("PUT_OK: stored, flushed and replicated as configured.", ("PUT_OK",)),
    "202": put_outcome(
        "Written on the master but not durable as asked; retry with the same producer id and sequence. "
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND: acknowledged by the sync-state-set, but the set shrank below "
        "minInSyncReplicas while the put waited, so it has fewer copies than asked.",
        ("FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "NOT_ENOUGH_REPLICAS_AFTER_APPEND"),
    ),
    "400": response_ref("BadRequest"),
    "413": response_ref("TooLarge"),
    "503": put_outcome(
        "Not written, or outcome unknown: this broker is not a master with a live write lease "
        "(SERVICE_NOT_AVAILABLE, with the master's address when known), or too few replicas are in sync "
        "(IN_SYNC_REPLICAS_NOT_ENOUGH, nothing written).",
        ("SERVICE_NOT_AVAILABLE", "IN_SYNC_REPLICAS_NOT_ENOUGH"),
    ),
}

PRODUCE_RESPONSES: dict[str, dict[str, Any]] = {
    **PUT_RESPONSES,
    "503": ok(
        "Not written, or outcome unknown: as for every put (SERVICE_NOT_AVAILABLE, IN_SYNC_REPLICAS_NOT_ENOUGH), "
        "or NO_PERMISSION: this replica's write permission is wiped (nothing written).",
        {
            "anyOf": [
                PUT_RESPONSES["503"]["content"]["application/json"]["schema"],
                ref("NoPermissionResponse"),
            ]
        },
    ),
}

ADMIN_RESPONSES: dict[str, dict[str, Any]] = {
    "200": ok("The broker's role view after the change.", ref("RoleView")),
    "400": response_ref("BadRequest"),
    "401": response_ref("Unauthorized"),
    "403": response_ref("Forbidden"),
    "413": response_ref("TooLarge"),
}

FENCED_READ = {"400": response_ref("BadRequest"), "503": response_ref("Fenced")}

QUEUE_ID = query("queueId", {"type": "integer", "minimum": 0, "maximum": wire.MAX_QUEUE_ID, "default": 0}, "The queue.")

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "POST",
        "/v1/messages",
        "produce",
        "Produce a batch of messages to one queue (master only).",
        responses=PRODUCE_RESPONSES,
        description="JSON (bodies in base64) or a binary batch. An idempotent producer sets `producerId` and "
        "numbers its messages with `seq`; a retry of a message already stored is answered with "
        "`duplicate: true` and its original position, and is not stored again. A master whose write permission "
        "is wiped answers NO_PERMISSION (503) and writes nothing.",
        request={
            "required": True,
            "content": {
                "application/json": {"schema": ref("ProduceRequest")},
                wire.BATCH_CONTENT_TYPE: {"schema": ref("Batch")},
            },
        },
    ),
    Operation(
        "GET",
        "/v1/messages",
        "consume",
        "Read visible (confirmed) messages of a queue from an offset.",
        responses={"200": ok("Messages, possibly none.", ref("MessagesResponse")), **FENCED_READ},
        parameters=(
            query("topic", {"type": "string", "minLength": 1}, "The topic.", required=True),
            QUEUE_ID,
            query("offset", {"type": "integer", "minimum": 0, "maximum": 2**62, "default": 0}, "First queue offset."),
            query(
                "maxCount",
                {"type": "integer", "minimum": 1, "maximum": MAX_COUNT, "default": 32},
                "At most this many messages.",
            ),
            query(
                "maxBytes",
                {"type": "integer", "minimum": 1, "maximum": MAX_BYTES, "default": 4 * 1024 * 1024},
                "At most this many bytes of records (but at least one message when one is visible).",
            ),
        ),
    ),
    Operation(
        "POST",
        "/v1/consumer-offsets",
        "commit_offset",
        "Commit a consumer group's offset of a queue (master only; replicated through the commit log).",
        responses=PUT_RESPONSES,
        request={"required": True, "content": json_content(ref("ConsumerOffsetRequest"))},
    ),
    Operation(
        "GET",
        "/v1/consumer-offsets",
        "get_offset",
        "A consumer group's committed offset of a queue.",
        responses={"200": ok("The offset, or null.", ref("ConsumerOffsetResponse")), **FENCED_READ},
        parameters=(
            query("group", {"type": "string", "minLength": 1}, "The consumer group.", required=True),
            query("topic", {"type": "string", "minLength": 1}, "The topic.", required=True),
            QUEUE_ID,
        ),
    ),
    Operation(
        "GET",
        "/v1/topics",
        "topics",
        "Topics and queues that hold visible messages, with their offset ranges.",
        responses={"200": ok("Topics.", ref("TopicsResponse")), "503": response_ref("Fenced")},
    ),
    Operation(
        "GET",
        "/v1/consumer-lag",
        "consumer_lag",
        "Every consumer group's lag on this replica (RocketMQ consumerProgress).",
        description="One row per (group, topic, queueId) a group committed an offset for on this replica: its "
        "committed offset, the queue's max offset and the lag between them (never negative), with their sum and "
        "the number of groups. Groups that never committed here are not listed. A broker set can be removed once "
        "its write permission is wiped and totalLag is 0.",
        responses={"200": ok("The lag.", ref("ConsumerLagResponse")), "503": response_ref("Fenced")},
    ),
    Operation(
        "GET",
        "/v1/status",
        "status",
        "This broker's role, store and replication status.",
        responses={"200": ok("Status.", ref("StatusResponse"))},
    ),
    Operation(
        "GET",
        "/v1/epochs",
        "epochs",
        "This broker's epoch cache (RocketMQ GET_BROKER_EPOCH_CACHE).",
        responses={"200": ok("Epochs, oldest first.", ref("EpochsResponse"))},
    ),
    Operation(
        "POST",
        "/v1/role-change",
        "role_change",
        "The controller's role-change push: a hint only.",
        description="The body is read and ignored: the broker re-reads replica-info from the controller "
        "before acting, so a forged push cannot demote a master or change its epoch.",
        responses={"200": ok("The hint was taken.", ref("EmptyResponse")), "413": response_ref("TooLarge")},
    ),
    Operation(
        "PUT",
        "/v1/admin/fence",
        "admin_fence",
        "Fence or unfence this replica (needs the group's broker token).",
        description="A fenced replica refuses writes, is not Ready, stops replicating (its master drops it from "
        "the sync-state-set) and never asks for an election; the fence is kept in its data folder across "
        "restarts. The broker token goes in the X-Brokergroup-Token header (the API server's proxy drops "
        "Authorization).",
        request={"required": True, "content": json_content(ref("FenceRequest"))},
        responses=ADMIN_RESPONSES,
    ),
    Operation(
        "PUT",
        "/v1/admin/write-permission",
        "admin_write_permission",
        "Wipe or restore this replica's write permission (needs the group's broker token).",
        description="RocketMQ wipeWritePerm: with writable false the replica refuses every produce (HTTP and "
        "binary) with NO_PERMISSION while consumes, consumer-offset commits, replication, elections and readiness "
        "go on; kept in its data folder across restarts until restored with writable true. The broker token goes "
        "in the X-Brokergroup-Token header, as for the fence.",
        request={"required": True, "content": json_content(ref("WritePermissionRequest"))},
        responses=ADMIN_RESPONSES,
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
        "Readiness: the broker knows its role (not fenced).",
        responses={
            "200": ok("Ready.", ref("ReadyResponse")),
            "503": ok("Fenced: the broker has not learned its role yet.", ref("ReadyResponse")),
        },
    ),
    Operation(
        "GET",
        "/metrics",
        "metrics",
        "Prometheus metrics of this broker.",
        responses={
            "200": {
                "description": "Prometheus text exposition format.",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            }
        },
    ),
)

# ---- assembly ------------------------------------------------------------------------------------


def error(description: str) -> dict[str, Any]:
    return ok(description, ref("ErrorResponse"))


RESPONSES: dict[str, dict[str, Any]] = {
    "Error": error(
        "An error, with a remark naming what was wrong: 400 a bad body or query parameter, 404 an unknown "
        "path, 405 a method the path does not have, 413 a body over 8 MiB, 500 an internal error (see the "
        "broker log), 503 the broker is fenced."
    ),
    "BadRequest": error("A bad body or query parameter; the remark names the field or parameter."),
    "NotFound": error("An unknown path."),
    "MethodNotAllowed": error("A method the path does not have."),
    "TooLarge": error(f"The request body exceeds {MAX_BODY} bytes."),
    "InternalError": error("An internal error (status SYSTEM_ERROR); see the broker log."),
    "Fenced": error("The broker is fenced: it has not learned its role from the controller yet."),
    "Unauthorized": error("An admin call without the broker token."),
    "Forbidden": error("A wrong broker token, or a broker without one (admin calls disabled)."),
}


def operation_object(op: Operation) -> dict[str, Any]:
    item: dict[str, Any] = {"operationId": op.name, "summary": op.summary}
    if op.description:
        item["description"] = op.description
    if op.parameters:
        item["parameters"] = list(op.parameters)
    if op.request is not None:
        item["requestBody"] = op.request
    item["responses"] = {**op.responses, "500": response_ref("InternalError"), "default": response_ref("Error")}
    return item


def build_openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 document of every route the broker serves (a fresh copy on every call)."""
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method.lower()] = operation_object(op)
    document = {
        "openapi": "3.1.0",
        "info": {
            "title": "brokergroup broker",
            "version": "1",
            "description": "A broker replica's client and admin API: produce, consume, consumer offsets, status, "
            "epochs and the controller's role-change hint. JSON with camelCase fields; errors are "
            "`{status, remark}`. Put outcomes map to HTTP: PUT_OK 200; FLUSH_DISK_TIMEOUT, "
            "FLUSH_SLAVE_TIMEOUT and NOT_ENOUGH_REPLICAS_AFTER_APPEND 202; SERVICE_NOT_AVAILABLE and "
            "IN_SYNC_REPLICAS_NOT_ENOUGH 503; a produce on a replica whose write permission is wiped: "
            "NO_PERMISSION 503.",
        },
        "paths": paths,
        "components": {"schemas": {**request_schemas(), **HAND_WRITTEN}, "responses": RESPONSES},
    }
    return copy.deepcopy(document)


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> None:
    OPENAPI_JSON.write_text(render(build_openapi()), encoding="utf-8")
    print(f"wrote {OPENAPI_JSON}")


if __name__ == "__main__":
    main()
