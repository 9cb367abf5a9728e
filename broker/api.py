"""The broker's HTTP API: produce, consume, consumer offsets, status, epochs, role-change hint.

Thin aiohttp handlers over `PutPath`, the store, replication and the role manager. Errors
are JSON `{status|code, remark}` with a remark that names what was wrong. Put statuses map to
HTTP: PUT_OK 200; FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT and NOT_ENOUGH_REPLICAS_AFTER_APPEND 202
(written on the master, not durable as asked: retry with the same producer id and sequence); SERVICE_NOT_AVAILABLE and
IN_SYNC_REPLICAS_NOT_ENOUGH 503 (with the master's address when known). A produce on a replica whose write
permission is wiped (`broker.permission`) is NO_PERMISSION 503, nothing written.
"""

from __future__ import annotations

import base64
import dataclasses
import hmac
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ValidationError

from brokergroup.broker import wire
from brokergroup.broker.errors import BrokerError
from brokergroup.broker.permission import NO_PERMISSION
from brokergroup.broker.service import wall_ms
from brokergroup.broker.store.epoch import OPEN
from brokergroup.broker.store.types import PutStatus, StoredMessage

logger = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
OPENAPI_PATH = Path(__file__).with_name("openapi.json")
MAX_BODY = 8 * 1024 * 1024

_HTTP = {
    PutStatus.PUT_OK: 200,
    PutStatus.FLUSH_DISK_TIMEOUT: 202,
    PutStatus.FLUSH_SLAVE_TIMEOUT: 202,
    PutStatus.NOT_ENOUGH_REPLICAS_AFTER_APPEND: 202,
    PutStatus.SERVICE_NOT_AVAILABLE: 503,
    PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH: 503,
}


@dataclasses.dataclass
class BrokerContext:
    """Everything the handlers use; built by `broker.node`."""

    settings: Any
    store: Any
    role: Any
    puts: Any
    metrics: Any
    address: str
    binary_address: str | None = None
    """The binary client port's advertised host:port (`binary_server`); None when it is off."""


CONTEXT = web.AppKey("context", BrokerContext)


class BadRequest(Exception):
    def __init__(self, remark: str, status: int = 400) -> None:
        super().__init__(remark)
        self.remark = remark
        self.status = status


def explain(exc: ValidationError) -> str:
    parts = []
    for item in exc.errors():
        where = ".".join(str(p) for p in item["loc"]) or "body"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


async def parse(request: web.Request, model: type[M]) -> M:
    body = await request.read()
    if not body:
        raise BadRequest("request body is empty; a JSON object is required")
    try:
        return model.model_validate_json(body, by_alias=True, by_name=False)
    except ValidationError as exc:
        raise BadRequest(explain(exc)) from exc


def query_int(request: web.Request, name: str, *, default: int | None = None, low: int = 0, high: int = 2**62) -> int:
    raw = request.query.get(name)
    if raw is None:
        if default is None:
            raise BadRequest(f"query parameter {name} is required")
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise BadRequest(f"{name} must be an integer (got {raw!r})") from exc
    if not low <= value <= high:
        raise BadRequest(f"{name} must be within [{low}, {high}] (got {value})")
    return value


def query_str(request: web.Request, name: str) -> str:
    value = request.query.get(name, "")
    if not value:
        raise BadRequest(f"query parameter {name} is required")
    return value


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except BadRequest as exc:
        return web.json_response({"status": "BAD_REQUEST", "remark": exc.remark}, status=exc.status)
    except BrokerError as exc:
        return web.json_response({"status": "BAD_REQUEST", "remark": str(exc)}, status=400)
    except web.HTTPRequestEntityTooLarge:
        return web.json_response({"status": "BAD_REQUEST", "remark": f"body exceeds {MAX_BODY} bytes"}, status=413)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return web.json_response(
            {"status": "BAD_REQUEST", "remark": f"{request.method} {request.path}: {exc.reason}"}, status=exc.status
        )
    except Exception:
        logger.exception("unexpected error in %s %s", request.method, request.path)
        return web.json_response({"status": "SYSTEM_ERROR", "remark": "internal error, see the broker log"}, status=500)


def refuse_if_fenced(ctx: BrokerContext) -> None:
    if ctx.role.fenced:
        raise BadRequest("the broker is fenced: it has not learned its role from the controller yet", 503)


def put_response(ctx: BrokerContext, outcome: Any) -> web.Response:
    body: dict[str, Any] = {"status": outcome.status.value, "remark": outcome.remark}
    if outcome.result is not None:
        body["messages"] = [
            {"commitOffset": a.commit_offset, "queueOffset": a.queue_offset, "duplicate": a.duplicate}
            for a in outcome.result.appended
        ]
        body["nextOffset"] = outcome.result.next_offset
    if outcome.status is PutStatus.SERVICE_NOT_AVAILABLE:
        body["masterAddress"] = ctx.role.master_address if ctx.role.master_address != ctx.address else None
    return web.json_response(body, status=_HTTP[outcome.status])


def read_only_refusal(ctx: BrokerContext) -> str | None:
    """The remark refusing a produce because this replica's write permission is wiped, or None (counted in the
    put metrics as NO_PERMISSION). Checked after the request is read and right before the put, with no await
    between: once `PUT /v1/admin/write-permission` answered, no produce writes."""
    remark: str | None = ctx.role.produce_refusal()
    if remark is not None:
        ctx.metrics.puts.labels(NO_PERMISSION).inc()
    return remark


async def produce(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    if request.content_type == wire.BATCH_CONTENT_TYPE:
        messages = wire.decode_batch(await request.read(), now_ms=wall_ms())
    else:
        messages = wire.messages_from_json(await parse(request, wire.ProduceRequest), now_ms=wall_ms())
    refused = read_only_refusal(ctx)
    if refused is not None:
        return web.json_response({"status": NO_PERMISSION, "remark": refused}, status=503)
    return put_response(ctx, await ctx.puts.put(messages))


def message_json(m: StoredMessage) -> dict[str, Any]:
    return {
        "topic": m.topic,
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "commitOffset": m.commit_offset,
        "body": base64.b64encode(m.body).decode(),
        "properties": dict(m.properties),
        "bornTimestamp": m.born_timestamp_ms,
        "storeTimestamp": m.store_timestamp_ms,
        "producerId": m.producer_id,
        "seq": m.producer_seq,
    }


async def consume(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    refuse_if_fenced(ctx)
    topic = query_str(request, "topic")
    queue_id = query_int(request, "queueId", default=0, high=wire.MAX_QUEUE_ID)
    offset = query_int(request, "offset", default=0)
    max_count = query_int(request, "maxCount", default=32, low=1, high=1024)
    max_bytes = query_int(request, "maxBytes", default=4 * 1024 * 1024, low=1, high=64 * 1024 * 1024)
    low, high = ctx.store.queue_min_offset(topic, queue_id), ctx.store.queue_max_offset(topic, queue_id)
    messages = ctx.store.get_messages(topic, queue_id, offset, max_count=max_count, max_bytes=max_bytes)
    ctx.metrics.consumed.inc(len(messages))
    return web.json_response(
        {
            "status": read_status(offset, low, high, found=bool(messages)),
            "messages": [message_json(m) for m in messages],
            "nextOffset": messages[-1].queue_offset + 1 if messages else max(offset, low),
            "minOffset": low,
            "maxOffset": high,
        }
    )


def read_status(offset: int, low: int, high: int, *, found: bool) -> str:
    """RocketMQ's GetMessageStatus for a read at `offset` of a queue holding [low, high): OFFSET_TOO_SMALL
    when retention deleted the messages there (nextOffset is the queue's min offset), never an empty read."""
    if found:
        return "FOUND"
    if offset < low:
        return "OFFSET_TOO_SMALL"
    if offset == high:
        return "NO_NEW_MESSAGE" if high else "NO_MESSAGE_IN_QUEUE"
    return "OFFSET_OVERFLOW_BADLY"


async def commit_offset(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    req = await parse(request, wire.ConsumerOffsetRequest)
    outcome = await ctx.puts.put_consumer_offset(
        group=req.group, topic=req.topic, queue_id=req.queue_id, offset=req.offset
    )
    return put_response(ctx, outcome)


async def get_offset(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    refuse_if_fenced(ctx)
    group, topic = query_str(request, "group"), query_str(request, "topic")
    queue_id = query_int(request, "queueId", default=0, high=wire.MAX_QUEUE_ID)
    return web.json_response(
        {
            "group": group,
            "topic": topic,
            "queueId": queue_id,
            "offset": ctx.store.consumer_offset(group, topic, queue_id),
        }
    )


async def consumer_lag(request: web.Request) -> web.Response:
    """RocketMQ consumerProgress on this replica: every group that committed an offset here, per queue, with
    its lag behind the queue's visible end (never negative)."""
    ctx = request.app[CONTEXT]
    refuse_if_fenced(ctx)
    rows = []
    for group, topic, queue_id, offset in ctx.store.consumer_offsets():
        high = ctx.store.queue_max_offset(topic, queue_id)
        rows.append(
            {
                "group": group,
                "topic": topic,
                "queueId": queue_id,
                "consumerOffset": offset,
                "maxOffset": high,
                "lag": max(0, high - offset),
            }
        )
    return web.json_response(
        {
            "totalLag": sum(row["lag"] for row in rows),
            "groups": len({row["group"] for row in rows}),
            "queues": rows,
        }
    )


async def status(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    return web.json_response(
        {
            "clusterName": ctx.settings.cluster_name,
            "brokerName": ctx.settings.broker_name,
            "address": ctx.address,
            "haAddress": advertised_ha_address(ctx),
            "binaryAddress": ctx.binary_address,
            **ctx.role.view(),
            "store": ctx.store.status(),
            "replication": ctx.role.ha.runtime_info() if ctx.role.ha is not None else None,
        }
    )


def advertised_ha_address(ctx: BrokerContext) -> str | None:
    """The HA address slaves should dial: the bound port on the advertised host."""
    if ctx.role.ha is None:
        return None
    port = str(ctx.role.ha.address).rsplit(":", 1)[1]
    return f"{ctx.settings.advertise_host or ctx.settings.ha.host}:{port}"


async def epochs(request: web.Request) -> web.Response:
    """RocketMQ getBrokerEpochCache: the last entry's end is the current max offset."""
    ctx = request.app[CONTEXT]
    entries = ctx.store.epochs.entries()
    out = []
    for e in entries:
        end = ctx.store.max_offset if e.end_offset == OPEN else e.end_offset
        out.append({"epoch": e.epoch, "startOffset": e.start_offset, "endOffset": end})
    return web.json_response(
        {
            "clusterName": ctx.settings.cluster_name,
            "brokerName": ctx.settings.broker_name,
            "brokerAddr": ctx.address,
            "brokerId": ctx.role.broker_id,
            "epochs": out,
        }
    )


async def role_change(request: web.Request) -> web.Response:
    """The controller's push. Only a hint: the broker re-reads replica-info before acting."""
    ctx = request.app[CONTEXT]
    await request.read()
    ctx.role.poke()
    return web.json_response({})


async def topics(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    refuse_if_fenced(ctx)
    out = {
        topic: [
            {
                "queueId": q,
                "minOffset": ctx.store.queue_min_offset(topic, q),
                "maxOffset": ctx.store.queue_max_offset(topic, q),
            }
            for q in queues
        ]
        for topic, queues in sorted(ctx.store.topics().items())
    }
    return web.json_response({"topics": out})


async def openapi(_request: web.Request) -> web.Response:
    return web.Response(body=OPENAPI_PATH.read_bytes(), content_type="application/json")


async def healthz(_request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def readyz(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    ready = ctx.role.ready()
    return web.json_response({"ready": ready, "role": ctx.role.role.value}, status=200 if ready else 503)


async def metrics(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    m = ctx.metrics
    m.is_master.set(1 if ctx.role.role.value == "master" else 0)
    m.master_epoch.set(ctx.role.master_epoch)
    m.max_offset.set(ctx.store.max_offset)
    m.confirm_offset.set(ctx.store.confirm_offset)
    m.lease_remaining.set(ctx.role.lease_remaining_ms() / 1000)
    m.writable.set(1 if ctx.role.writable else 0)
    return web.Response(body=generate_latest(m.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})


TOKEN_HEADER = "X-Brokergroup-Token"  # noqa: S105 (a header name)
"""The header of the broker's admin calls' credential. Not `Authorization`: the API server's proxy drops that
one after authenticating the caller (`kubectl brokergroup fence` reaches the broker through the pod proxy)."""


def check_admin(ctx: BrokerContext, request: web.Request) -> None:
    """Admin calls carry the group's broker token (`controller.broker_token`, Secret key `brokerToken`): a
    broker never holds the controllers' admin token, and whoever has the broker token can already act as
    any broker of the group at the controllers, so fencing with it grants nothing new."""
    expected = ctx.settings.controller.broker_token
    if not expected:
        raise BadRequest("this broker has no broker token (controller.broker_token): admin calls are disabled", 403)
    given = request.headers.get(TOKEN_HEADER, "")
    if not given:
        raise BadRequest(f"admin call without the broker token: send it in the {TOKEN_HEADER} header", 401)
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise BadRequest(f"wrong broker token in the {TOKEN_HEADER} header", 403)


async def admin_fence(request: web.Request) -> web.Response:
    """Fence or unfence this replica (`broker.fence`); answers with the broker's role view."""
    ctx = request.app[CONTEXT]
    check_admin(ctx, request)
    req = await parse(request, wire.FenceRequest)
    await ctx.role.set_admin_fence(req.fenced)
    return web.json_response(ctx.role.view())


async def admin_write_permission(request: web.Request) -> web.Response:
    """Wipe or restore this replica's write permission (`broker.permission`); answers with the role view."""
    ctx = request.app[CONTEXT]
    check_admin(ctx, request)
    req = await parse(request, wire.WritePermissionRequest)
    ctx.role.set_writable(req.writable)
    return web.json_response(ctx.role.view())


ROUTES: list[tuple[str, str, Handler]] = [
    ("POST", "/v1/messages", produce),
    ("GET", "/v1/messages", consume),
    ("POST", "/v1/consumer-offsets", commit_offset),
    ("GET", "/v1/consumer-offsets", get_offset),
    ("GET", "/v1/topics", topics),
    ("GET", "/v1/consumer-lag", consumer_lag),
    ("GET", "/v1/status", status),
    ("GET", "/v1/epochs", epochs),
    ("POST", "/v1/role-change", role_change),
    ("PUT", "/v1/admin/fence", admin_fence),
    ("PUT", "/v1/admin/write-permission", admin_write_permission),
    ("GET", "/v1/openapi.json", openapi),
    ("GET", "/healthz", healthz),
    ("GET", "/readyz", readyz),
    ("GET", "/metrics", metrics),
]


def create_app(ctx: BrokerContext) -> web.Application:
    app = web.Application(middlewares=[errors], client_max_size=MAX_BODY)
    app[CONTEXT] = ctx
    for method, path, handler in ROUTES:
        app.router.add_route(method, path, handler)
    return app
