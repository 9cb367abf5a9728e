"""The controller's HTTP API (DESIGN §2.1): an aiohttp application factory.

Handlers are thin: parse and validate the body with the `protocol` models, call the service,
answer JSON. Errors carry RocketMQ's code, name and a remark naming what was wrong.
Leader-only requests received by a follower are forwarded to the leader once (a forwarded
request is never forwarded again); `CONTROLLER_NOT_LEADER` is returned only when no leader is
known within `api.leader_wait` (an election in progress). Mutating admin calls check the bearer
token. Reads of node-local facts (status, the event feed, the event-log files) are answered by
the node asked, without a token.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ValidationError

from brokergroup.controller import core, eventlog, protocol
from brokergroup.controller.codes import ControllerError, ResponseCode, http_status
from brokergroup.controller.replicated import GROUP_ENTRY_FORMAT
from brokergroup.controller.service import ControllerService, monotonic_ms, result_or_raise

logger = logging.getLogger(__name__)

SERVICE = web.AppKey("service", ControllerService)
SESSION = web.AppKey("session", aiohttp.ClientSession)
OPENAPI_PATH = Path(__file__).with_name("openapi.json")
FORWARDED_HEADER = "X-Brokergroup-Forwarded"
LEADER_POLL_S = 0.05
"""How often a request waiting for a leader looks again."""
MAX_BODY = 256 * 1024
NDJSON = "application/x-ndjson"
FILE_CHUNK = 256 * 1024
M = TypeVar("M", bound=BaseModel)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_response(err: ControllerError, *, status: int | None = None) -> web.Response:
    return web.json_response(err.to_body(), status=status or http_status(err.code))


def explain(exc: ValidationError) -> str:
    parts = []
    for item in exc.errors():
        where = ".".join(str(p) for p in item["loc"]) or "body"
        value = item.get("input")
        shown = "" if isinstance(value, dict | list) or item["type"] == "missing" else f" (got {value!r})"
        parts.append(f"{where}: {item['msg']}{shown}")
    return "; ".join(parts)


async def parse(request: web.Request, model: type[M]) -> M:
    body = await request.read()
    if not body:
        raise ControllerError(
            ResponseCode.CONTROLLER_INVALID_REQUEST, "request body is empty; a JSON object is required"
        )
    try:
        return model.model_validate_json(body, by_alias=True, by_name=False)  # the wire is camelCase only
    except ValidationError as exc:
        raise ControllerError(ResponseCode.CONTROLLER_INVALID_REQUEST, explain(exc)) from exc


def presented_token(request: web.Request) -> str | None:
    """The credential a request carries: the `X-Brokergroup-Token` header when present (it reaches us through the
    API server's service proxy, which drops `Authorization`), else an `Authorization: Bearer` token; None when
    it carries neither. A present but empty or non-bearer header is still a (wrong) credential, never a fallback."""
    if protocol.TOKEN_HEADER in request.headers:
        return request.headers[protocol.TOKEN_HEADER]
    given = request.headers.get("Authorization")
    if given is None:
        return None
    return given[7:] if given.startswith("Bearer ") else ""


HOW_TO_SEND = f"{protocol.TOKEN_HEADER}: <token> or Authorization: Bearer <token>"


def check_token(request: web.Request) -> None:
    token = request.app[SERVICE].settings.api.admin_token
    if not token:
        return
    given = presented_token(request)
    if not given or not hmac.compare_digest(given.encode(), token.encode()):
        raise ControllerError(
            ResponseCode.NO_PERMISSION,
            f"this call needs the admin token: {HOW_TO_SEND}",
            {"httpStatus": 401},
        )


def check_broker_token(request: web.Request) -> None:
    """Requests that feed elections or change a sync-state-set carry the group's broker token
    (or the admin token). Missing: 401; wrong: 403. Checked before the body is read."""
    api = request.app[SERVICE].settings.api
    if not api.broker_token:
        return
    given = presented_token(request)
    if not given:
        raise ControllerError(
            ResponseCode.NO_PERMISSION,
            f"{request.method} {request.path} feeds elections and needs this group's broker token: "
            f"{HOW_TO_SEND} (brokers: controller.broker_token)",
            {"httpStatus": 401},
        )
    presented = given.encode()
    accepted = [t.encode() for t in (api.broker_token, api.admin_token) if t]
    matches = [hmac.compare_digest(presented, t) for t in accepted]  # constant time, and every compare runs
    if not any(matches):
        raise ControllerError(
            ResponseCode.NO_PERMISSION,
            f"{request.method} {request.path}: the token is not this group's broker token; nothing changed",
            {"httpStatus": 403},
        )


def ok(model: BaseModel) -> web.Response:
    return web.json_response(model.model_dump(mode="json", by_alias=True))


# ---- middleware --------------------------------------------------------------------------------


@web.middleware
async def errors_and_metrics(request: web.Request, handler: Handler) -> web.StreamResponse:
    service = request.app[SERVICE]
    kind = request.match_info.route.name or "unknown"
    started = time.perf_counter()
    status = "SUCCESS"
    try:
        return await handler(request)
    except ControllerError as err:
        status = err.code.name
        http = err.data.pop("httpStatus", None) if err.data else None
        return error_response(err, status=http)
    except web.HTTPRequestEntityTooLarge:
        status = "CONTROLLER_INVALID_REQUEST"
        return error_response(
            ControllerError(ResponseCode.CONTROLLER_INVALID_REQUEST, f"request body exceeds {MAX_BODY} bytes"),
            status=413,
        )
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = ResponseCode.CONTROLLER_INVALID_REQUEST if exc.status == 400 else ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        status = code.name
        detail = exc.reason
        if exc.text and not exc.text.startswith(f"{exc.status}:"):  # aiohttp's default text repeats the reason
            detail += ": " + " ".join(exc.text.split())
        if "Allow" in exc.headers:
            detail += f" (allowed: {exc.headers['Allow']})"
        return error_response(ControllerError(code, f"{request.method} {request.path}: {detail}"), status=exc.status)
    except Exception:
        status = "SYSTEM_ERROR"
        logger.exception("unexpected error in %s %s", request.method, request.path)
        internal = ControllerError(
            ResponseCode.SYSTEM_ERROR, f"{request.method} {request.path}: internal error, see the log"
        )
        return error_response(internal)
    finally:
        service.metrics.request_done(kind, status, time.perf_counter() - started)


# ---- leader-only plumbing ----------------------------------------------------------------------


async def on_leader(request: web.Request, local: Handler) -> web.StreamResponse:
    """Run `local` on the serving leader, or forward the request to the leader. While no leader is
    known (an election in progress), or the known one refuses connections (it died and the
    election timeout has not yet run out), wait for the next one, up to `api.leader_wait`."""
    service = request.app[SERVICE]
    forwarded = bool(request.headers.get(FORWARDED_HEADER))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + service.settings.api.leader_wait
    why = ""
    while True:
        left = max(deadline - loop.time(), 0.0)
        if service.serving or await service.wait_serving(left):
            return await local(request)
        leader_api = service.node.leader_api_address()
        if not forwarded and leader_api is not None and leader_api != service.settings.me.api:
            try:
                return await forward(request, leader_api)
            except aiohttp.ClientConnectorError as exc:  # never delivered, so safe to send again
                why = f"; forwarding to leader {leader_api} failed: {exc}"
        if loop.time() >= deadline:
            raise ControllerError(ResponseCode.CONTROLLER_NOT_LEADER, "The controller is not in leader state" + why)
        await asyncio.sleep(min(LEADER_POLL_S, left))


async def forward(request: web.Request, leader_api: str) -> web.Response:
    """Send the request once to the leader's API and answer with its answer."""
    service = request.app[SERVICE]
    headers = {FORWARDED_HEADER: service.settings.node_id, "Content-Type": "application/json"}
    for credential in ("Authorization", protocol.TOKEN_HEADER):
        if credential in request.headers:
            headers[credential] = request.headers[credential]
    try:
        async with request.app[SESSION].request(
            request.method,
            f"http://{leader_api}{request.rel_url}",
            data=await request.read(),
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=service.settings.api.forward_timeout),
        ) as response:
            body = await response.read()
            return web.Response(body=body, status=response.status, content_type="application/json")
    except aiohttp.ClientConnectorError:
        raise
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise ControllerError(
            ResponseCode.CONTROLLER_NOT_LEADER,
            f"The controller is not in leader state; forwarding to leader {leader_api} failed: {exc}",
        ) from exc


def leader_only(local: Handler) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await on_leader(request, local)

    return handler


# ---- handlers ------------------------------------------------------------------------------------


async def next_id(request: web.Request) -> web.Response:
    req = await parse(request, protocol.NextIdRequest)
    result = await request.app[SERVICE].read(lambda s, _live: core.next_broker_id(s, req))
    return ok(result_or_raise(result))


async def apply_id(request: web.Request) -> web.Response:
    check_broker_token(request)
    req = await parse(request, protocol.ApplyIdRequest)
    result = await request.app[SERVICE].write(
        "apply-id", lambda s, _live: core.apply_broker_id(s, req), broker_name=req.broker_name
    )
    return ok(result_or_raise(result))


async def register(request: web.Request) -> web.Response:
    check_broker_token(request)
    req = await parse(request, protocol.RegisterRequest)
    result = await request.app[SERVICE].write(
        "register", lambda s, live: core.register_broker(s, req, live), broker_name=req.broker_name
    )
    return ok(result_or_raise(result))


async def heartbeat(request: web.Request) -> web.Response:
    check_broker_token(request)
    req = await parse(request, protocol.HeartbeatRequest)
    request.app[SERVICE].on_heartbeat(req)
    return web.json_response({})


async def heartbeat_stream(request: web.Request) -> web.WebSocketResponse:
    """A persistent heartbeat channel: JSON heartbeats in; closing it marks the broker inactive."""
    check_broker_token(request)  # at the handshake: a refused stream is never opened
    service = request.app[SERVICE]
    ws = web.WebSocketResponse(heartbeat=10.0, max_msg_size=64 * 1024)
    await ws.prepare(request)
    service.metrics.heartbeat_streams.inc()
    try:
        async for message in ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                await ws.send_json({"code": int(ResponseCode.CONTROLLER_INVALID_REQUEST), "remark": "text frames only"})
                continue
            try:
                req = protocol.HeartbeatRequest.model_validate_json(message.data, by_alias=True, by_name=False)
                service.on_heartbeat(req, channel=ws)
            except ValidationError as exc:
                err = ControllerError(ResponseCode.CONTROLLER_INVALID_REQUEST, explain(exc))
                await ws.send_json(err.to_body())
            except ControllerError as err:
                await ws.send_json(err.to_body())
    finally:
        service.metrics.heartbeat_streams.dec()
        service.on_channel_closed(ws)
    return ws


async def elect_master(request: web.Request) -> web.Response:
    req = await parse(request, protocol.ElectMasterRequest)
    if not req.designate_elect:
        check_broker_token(request)
    if req.designate_elect:
        check_token(request)
        if req.broker_id < 1:  # RocketMQ would read -1 as "controller-triggered" and demote a live master
            raise ControllerError(
                ResponseCode.CONTROLLER_INVALID_REQUEST,
                f"designateElect needs brokerId, the broker to elect (>= 1, got {req.broker_id})",
            )
    trigger = "admin" if req.designate_elect else "broker"
    result = await request.app[SERVICE].elect(req, trigger=trigger, reason=trigger)
    return ok(result_or_raise(result))


async def alter_sync_state_set(request: web.Request) -> web.Response:
    check_broker_token(request)
    req = await parse(request, protocol.AlterSyncStateSetRequest)
    result = await request.app[SERVICE].write(
        "alter-sync-state-set",
        lambda s, live: core.alter_sync_state_set(s, req, live),
        broker_name=req.broker_name,
        reason="broker",
    )
    return ok(result_or_raise(result))


async def replica_info(request: web.Request) -> web.Response:
    name = request.query.get("brokerName", "")
    if not name:
        raise ControllerError(ResponseCode.CONTROLLER_INVALID_REQUEST, "query parameter brokerName is required")
    broker_id = _int_query(request, "brokerId", 0, low=1, high=2**53) if "brokerId" in request.query else None
    service = request.app[SERVICE]
    answer = result_or_raise(await service.read(lambda s, _live: core.get_replica_info(s, name)))
    if broker_id is not None and isinstance(answer, protocol.ReplicaInfoResponse):
        answer = answer.model_copy(update={"heartbeat_age_ms": heartbeat_age_ms(service, name, broker_id)})
    return ok(answer)


def heartbeat_age_ms(service: ControllerService, broker_name: str, broker_id: int) -> int | None:
    """How long ago this node last heard the broker's heartbeat; None if not within its timeout."""
    info = service.heartbeats.get(broker_name, broker_id)
    now = monotonic_ms()
    return now - info.last_update_ms if info is not None and info.active_at(now) else None


async def sync_state_data(request: web.Request) -> web.Response:
    req = await parse(request, protocol.SyncStateDataRequest)
    result = await request.app[SERVICE].read(lambda s, live: core.get_sync_state_data(s, req, live))
    return ok(result_or_raise(result))


async def clean_broker_data(request: web.Request) -> web.Response:
    check_token(request)
    req = await parse(request, protocol.CleanBrokerDataRequest)
    result = await request.app[SERVICE].write(
        "clean-broker-data",
        lambda s, live: core.clean_broker_data(s, req, live),
        broker_name=req.broker_name,
        reason="admin",
    )
    return ok(result_or_raise(result))


async def metadata(request: web.Request) -> web.Response:
    service = request.app[SERVICE]
    leader_id = service.node.leader_peer_id()
    return ok(
        protocol.MetadataResponse(
            group=service.settings.group,
            controller_leader_id=leader_id,
            controller_leader_address=service.node.leader_api_address(),
            is_leader=service.serving,
            peers=[f"{p.id}:{p.api}" for p in service.settings.peers],
        )
    )


async def get_config(request: web.Request) -> web.Response:
    return web.json_response(request.app[SERVICE].get_config())


async def update_config(request: web.Request) -> web.Response:
    check_token(request)
    body = await request.read()
    try:
        changes = json.loads(body or b"null")
    except (ValueError, RecursionError) as exc:  # RecursionError: nesting too deep for the json module
        raise ControllerError(ResponseCode.CONTROLLER_INVALID_REQUEST, f"body is not JSON: {exc}") from exc
    if not isinstance(changes, dict) or not changes:
        raise ControllerError(
            ResponseCode.CONTROLLER_INVALID_REQUEST, "body must be a non-empty JSON object of key: value"
        )
    return web.json_response(request.app[SERVICE].update_config(changes))


def _int_query(request: web.Request, name: str, default: int, *, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ControllerError(
            ResponseCode.CONTROLLER_INVALID_REQUEST, f"{name} must be an integer (got {raw!r})"
        ) from exc
    if not low <= value <= high:
        raise ControllerError(
            ResponseCode.CONTROLLER_INVALID_REQUEST, f"{name} must be within [{low}, {high}] (got {value})"
        )
    return value


async def events(request: web.Request) -> web.Response:
    after = _int_query(request, "after", 0, low=0, high=2**62)
    wait = _int_query(request, "waitSeconds", 0, low=0, high=60)
    feed = request.app[SERVICE].feed
    return web.json_response(await feed.wait(after, timeout=float(wait)))


async def eventlog_files(request: web.Request) -> web.Response:
    """This node's event-log files, oldest first; `size` counts complete lines only (see `eventlog`)."""
    service = request.app[SERVICE]
    listed = await asyncio.to_thread(service.event_log.listing)
    files = [{"name": f.name, "size": f.size} for f in listed]
    return web.json_response({"nodeId": service.settings.node_id, "files": files})


async def eventlog_file(request: web.Request) -> web.StreamResponse:
    """One of this node's event-log files, streamed. The file is stat'ed once when opened and the
    answer stops after the last newline within that size (Content-Length says how far): a line
    the writer is still appending is never served, so the body is whole lines, a prefix of what
    the file holds later. 400 for a name that is not a plain file name, 404 for any other name
    that is not one of this node's files."""
    name = request.match_info["name"]
    if not eventlog.is_safe_file_name(name):
        raise ControllerError(
            ResponseCode.CONTROLLER_INVALID_REQUEST,
            f"path parameter name must be a file name of letters, digits, '.', '_' and '-' without '..' (got {name!r})",
        )
    service = request.app[SERVICE]
    opened = await asyncio.to_thread(service.event_log.open_complete, name)
    if opened is None:
        raise ControllerError(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            f"no event-log file {name!r} on node {service.settings.node_id}; GET /v1/eventlog lists them",
        )
    f, length = opened
    with f:
        response = web.StreamResponse(headers={"Content-Type": NDJSON})
        response.content_length = length
        await response.prepare(request)
        remaining = length
        try:
            while remaining > 0:
                chunk = await asyncio.to_thread(f.read, min(FILE_CHUNK, remaining))
                if not chunk:  # cannot happen to an append-only file; the client sees a short body
                    logger.error("event-log file %s ended %d bytes early while being served", name, remaining)
                    break
                await response.write(chunk)
                remaining -= len(chunk)
            await response.write_eof()
        except ConnectionResetError:
            logger.info("client went away while reading event-log file %s (%d bytes unsent)", name, remaining)
    return response


async def status(request: web.Request) -> web.Response:
    service = request.app[SERVICE]
    node = service.node
    version = service.machine.read(lambda _s, v: v)
    return web.json_response(
        {
            "nodeId": service.settings.node_id,
            "serving": service.serving,
            "raftLeader": node.is_leader(),
            "leaderId": node.leader_peer_id(),
            "term": node.term(),
            "commitIndex": node.commit_index(),
            "lastApplied": node.last_applied(),
            "hasQuorum": node.has_quorum(),
            "stateVersion": version,
            "activeBrokers": service.heartbeats.active_count(monotonic_ms()),
            "raftEntryFormat": GROUP_ENTRY_FORMAT,
            "groupCommit": service.bridge.max_group > 1,
        }
    )


async def state(request: web.Request) -> web.Response:
    service = request.app[SERVICE]
    body = service.machine.read(lambda s, v: {"version": v, "state": s.to_dict()})
    return web.json_response({**body, "lastApplied": service.node.last_applied()})


async def state_digest(request: web.Request) -> web.Response:
    service = request.app[SERVICE]
    last_applied, digest = service.node.state_digest()
    body = {"node_id": service.settings.node_id, "term": service.node.term(), "last_applied": last_applied}
    return web.json_response({**body, "digest": digest})


async def openapi(_request: web.Request) -> web.Response:
    return web.Response(body=OPENAPI_PATH.read_bytes(), content_type="application/json")


async def healthz(_request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def readyz(request: web.Request) -> web.Response:
    service = request.app[SERVICE]
    ready = service.node.leader_peer_id() is not None
    return web.json_response({"ready": ready, "leader": service.node.leader_peer_id()}, status=200 if ready else 503)


async def metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[SERVICE].metrics.registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


ROUTES: list[tuple[str, str, Handler, str]] = [
    ("POST", "/v1/broker/next-id", leader_only(next_id), "next-id"),
    ("POST", "/v1/broker/apply-id", leader_only(apply_id), "apply-id"),
    ("POST", "/v1/broker/register", leader_only(register), "register"),
    ("POST", "/v1/broker/heartbeat", heartbeat, "heartbeat"),
    ("GET", "/v1/broker/heartbeat-stream", heartbeat_stream, "heartbeat-stream"),
    ("POST", "/v1/elect-master", leader_only(elect_master), "elect-master"),
    ("POST", "/v1/alter-sync-state-set", leader_only(alter_sync_state_set), "alter-sync-state-set"),
    ("GET", "/v1/replica-info", leader_only(replica_info), "replica-info"),
    ("POST", "/v1/sync-state-data", leader_only(sync_state_data), "sync-state-data"),
    ("GET", "/v1/metadata", metadata, "metadata"),
    ("POST", "/v1/clean-broker-data", leader_only(clean_broker_data), "clean-broker-data"),
    ("GET", "/v1/config", get_config, "get-config"),
    ("POST", "/v1/config", update_config, "update-config"),
    ("GET", "/v1/events", events, "events"),
    ("GET", "/v1/eventlog", eventlog_files, "eventlog"),
    ("GET", "/v1/eventlog/{name}", eventlog_file, "eventlog-file"),
    ("GET", "/v1/status", status, "status"),
    ("GET", "/v1/state", state, "state"),
    ("GET", "/v1/raft/state-digest", state_digest, "raft-state-digest"),
    ("GET", "/v1/openapi.json", openapi, "openapi"),
    ("GET", "/healthz", healthz, "healthz"),
    ("GET", "/readyz", readyz, "readyz"),
    ("GET", "/metrics", metrics, "metrics"),
]


def create_app(service: ControllerService) -> web.Application:
    app = web.Application(middlewares=[errors_and_metrics], client_max_size=MAX_BODY)
    app[SERVICE] = service

    async def session_ctx(app: web.Application) -> Any:
        app[SESSION] = aiohttp.ClientSession()
        yield
        await app[SESSION].close()

    app.cleanup_ctx.append(session_ctx)
    for method, path, handler, name in ROUTES:
        app.router.add_route(method, path, handler, name=name)
    return app
