"""The binary client port: the asyncio shell around `protocol.client_frames`.

A thin shell over the same core the HTTP handlers use (`PutPath`, the store's reads, the HTTP
API's fencing check and validation models), so both protocols refuse, accept and answer alike.
Requests on one connection run concurrently (pipelining); each reply carries its request id.

Bad input never grows memory without bound and never reaches the store half-read:

- a frame length outside the limits: an ERROR frame (code 413), then the connection is closed;
- an unknown type or a malformed payload: an ERROR frame (code 400); the connection goes on;
- a connection that ends inside a frame: counted, dropped;
- a frame that does not complete within `frame_timeout_ms` (slow-loris): closed;
- at most `max_in_flight` requests per connection: beyond, the broker stops reading the socket;
- a client that does not read its replies: reading stops once the reply buffer is full, and the
  connection is aborted if it stays full for `write_timeout_ms`;
- more than `max_connections` open connections: the new one gets an ERROR frame (code 503, request
  id 0: about the connection) and is closed before anything of it is read.

Each case counts in `brokergroup_broker_binary_rejected_total{reason}`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Any, cast

from prometheus_client import Counter
from pydantic import ValidationError

from brokergroup.broker import wire
from brokergroup.broker.api import BadRequest, BrokerContext, explain, read_only_refusal, refuse_if_fenced
from brokergroup.broker.errors import BrokerError
from brokergroup.broker.permission import NO_PERMISSION
from brokergroup.broker.protocol import client_frames as cf
from brokergroup.broker.service import PutOutcome, wall_ms
from brokergroup.broker.store.types import PutStatus
from brokergroup.broker.turn_writer import TurnWriter

logger = logging.getLogger(__name__)
WRITE_BUFFER_HIGH = 1024 * 1024


def put_result(ctx: BrokerContext, outcome: PutOutcome) -> cf.PutResult:
    """The PUT_RESULT of an outcome: the HTTP API's produce/commit response (api.put_response)."""
    appended: tuple[cf.Appended, ...] = ()
    next_offset = None
    if outcome.result is not None:
        appended = tuple(cf.Appended(a.commit_offset, a.queue_offset, a.duplicate) for a in outcome.result.appended)
        next_offset = outcome.result.next_offset
    master = None
    if outcome.status is PutStatus.SERVICE_NOT_AVAILABLE and ctx.role.master_address != ctx.address:
        master = ctx.role.master_address
    return cf.PutResult(
        status=outcome.status.value,
        remark=outcome.remark,
        master_address=master,
        next_offset=next_offset,
        appended=appended,
    )


async def answer(ctx: BrokerContext, raw: cf.RawFrame) -> bytes:
    """The reply frame to one request frame but PRODUCE (`Connection.produce`); every failure becomes
    an ERROR frame."""
    rid = raw.request_id
    try:
        request = cf.parse_request(raw)
        assert not isinstance(request, cf.Produce), "a PRODUCE is answered by Connection.produce"
        if isinstance(request, cf.Consume):
            refuse_if_fenced(ctx)
            found = ctx.store.get_messages(
                request.topic,
                request.queue_id,
                request.offset,
                max_count=request.max_count,
                max_bytes=request.max_bytes,
            )
            ctx.metrics.consumed.inc(len(found))
            low = ctx.store.queue_min_offset(request.topic, request.queue_id)
            return cf.encode_messages(
                rid,
                # as GET /v1/messages: a read below what retention kept goes on from the queue's min offset
                next_offset=found[-1].queue_offset + 1 if found else max(request.offset, low),
                min_offset=low,
                max_offset=ctx.store.queue_max_offset(request.topic, request.queue_id),
                messages=found,
            )
        if isinstance(request, cf.CommitOffset):
            try:
                checked = wire.ConsumerOffsetRequest(
                    group=request.group, topic=request.topic, queue_id=request.queue_id, offset=request.offset
                )
            except ValidationError as exc:
                raise BadRequest(explain(exc)) from exc
            outcome = await ctx.puts.put_consumer_offset(
                group=checked.group, topic=checked.topic, queue_id=checked.queue_id, offset=checked.offset
            )
            return cf.encode_put_result(rid, put_result(ctx, outcome))
        refuse_if_fenced(ctx)
        return cf.encode_offset(rid, ctx.store.consumer_offset(request.group, request.topic, request.queue_id))
    except Exception as exc:  # noqa: BLE001 - error_reply logs an unexpected one
        return error_reply(ctx, raw, exc)


def error_reply(ctx: BrokerContext, raw: cf.RawFrame, exc: Exception) -> bytes:
    """The ERROR frame answering `raw` that failed with `exc` (an unexpected one is logged)."""
    rid = raw.request_id
    if isinstance(exc, cf.BadFrame):
        ctx.metrics.binary_rejected.labels(exc.reason).inc()
        return cf.encode_error(rid, cf.Error("BAD_REQUEST", 400, exc.remark))
    if isinstance(exc, BadRequest):
        return cf.encode_error(rid, cf.Error("BAD_REQUEST", exc.status, exc.remark))
    if isinstance(exc, BrokerError):
        return cf.encode_error(rid, cf.Error("BAD_REQUEST", 400, str(exc)))
    logger.error("unexpected error answering a binary %s request", _type_name(raw.type), exc_info=exc)
    return cf.encode_error(rid, cf.Error("SYSTEM_ERROR", 500, "internal error, see the broker log"))


def _type_name(kind: int) -> str:
    try:
        return cf.FrameType(kind).name
    except ValueError:
        return f"0x{kind:02x}"


class Connection(asyncio.Protocol):
    def __init__(self, ctx: BrokerContext, settings: Any, live: set[Connection]) -> None:
        self.ctx = ctx
        self.live = live
        self.metrics = ctx.metrics
        self.max_in_flight: int = settings.max_in_flight
        self.frame_timeout = settings.frame_timeout_ms / 1000
        self.write_timeout = settings.write_timeout_ms / 1000
        self.decoder = cf.FrameDecoder(max_frame=cf.DEFAULT_MAX_REQUEST)
        self.transport: asyncio.Transport | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.puts_pending = 0
        """PRODUCE requests written and waiting for their acks and flush (they run without a task)."""
        self.reading_paused = False
        self.writing_paused = False
        self.partial_since: float | None = None
        self.partial_timer: asyncio.TimerHandle | None = None
        self.stall_timer: asyncio.TimerHandle | None = None
        self.max_connections: int = settings.max_connections
        self.admitted = False
        self.replies = TurnWriter()
        """Replies finished in one loop iteration go out in one write."""
        self.request_counters: dict[int, Counter] = {}  # a labels() lookup per request costs more than its inc()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = self.replies.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio's
        if len(self.live) >= self.max_connections:
            self.reject("too_many_connections")
            remark = (
                f"too many connections: {len(self.live)} open, binary.max_connections={self.max_connections}; "
                "share one connection per process (it pipelines) or raise the limit"
            )
            self.transport.write(
                cf.encode_error(cf.CONNECTION_REQUEST_ID, cf.Error("SERVICE_NOT_AVAILABLE", 503, remark))
            )
            self.transport.close()
            return
        self.admitted = True
        self.transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
        self.live.add(self)
        self.metrics.binary_connections.inc()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.admitted:
            self.transport = None
            return
        self.live.discard(self)
        self.metrics.binary_connections.dec()
        if self.decoder.buffered and self.partial_since is not None:
            self.reject("truncated")
        for timer in (self.partial_timer, self.stall_timer):
            if timer is not None:
                timer.cancel()
        self.transport = None

    def reject(self, reason: str) -> None:
        self.metrics.binary_rejected.labels(reason).inc()

    def data_received(self, data: bytes) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        try:
            self.decoder.feed(data)
            while (raw := self.decoder.next_frame()) is not cf.NEED_DATA:
                assert isinstance(raw, cf.RawFrame)
                self.partial_since = None
                self.start(raw)
        except cf.FrameTooLarge as exc:
            self.reject("oversized")
            transport.write(cf.encode_error(cf.CONNECTION_REQUEST_ID, cf.Error("BAD_REQUEST", 413, str(exc))))
            transport.close()
            return
        if self.decoder.buffered and self.partial_since is None:
            self.partial_since = time.monotonic()
            if self.partial_timer is None:
                self.partial_timer = asyncio.get_running_loop().call_later(self.frame_timeout, self.check_partial)

    def check_partial(self) -> None:
        """Slow-loris: a frame begun must complete within frame_timeout."""
        self.partial_timer = None
        if self.transport is None or self.partial_since is None or not self.decoder.buffered:
            return
        left = self.partial_since + self.frame_timeout - time.monotonic()
        if left > 0:
            self.partial_timer = asyncio.get_running_loop().call_later(left, self.check_partial)
            return
        self.reject("slow_frame")
        self.partial_since = None  # counted here, not again as truncated
        self.transport.abort()

    def start(self, raw: cf.RawFrame) -> None:
        counter = self.request_counters.get(raw.type)
        if counter is None:
            counter = self.request_counters[raw.type] = self.metrics.binary_requests.labels(_type_name(raw.type))
        counter.inc()
        if raw.type == cf.FrameType.PRODUCE:
            self.produce(raw)
        else:
            task = asyncio.get_running_loop().create_task(self.run(raw))
            self.tasks.add(task)
            task.add_done_callback(self.finished)
        self.flow()

    def produce(self, raw: cf.RawFrame) -> None:
        """A PRODUCE is answered from callbacks (`PutPath.put_then`), not by a task per request: the
        write now, the reply once the acks and the flush are in (issue 17)."""
        ctx = self.ctx
        try:
            messages = wire.decode_batch(raw.payload, now_ms=wall_ms())
            refused = read_only_refusal(ctx)
            if refused is not None:
                return self.reply(
                    cf.encode_put_result(raw.request_id, cf.PutResult(status=NO_PERMISSION, remark=refused))
                )
            self.puts_pending += 1
            try:
                ctx.puts.put_then(messages, functools.partial(self.put_done, raw))
            except BaseException:
                self.puts_pending -= 1
                raise
        except Exception as exc:  # noqa: BLE001 - error_reply logs an unexpected one
            self.reply(error_reply(ctx, raw, exc))

    def put_done(self, raw: cf.RawFrame, outcome: PutOutcome | Exception) -> None:
        self.puts_pending -= 1
        if isinstance(outcome, PutOutcome):
            try:
                self.reply(cf.encode_put_result(raw.request_id, put_result(self.ctx, outcome)))
            except Exception as exc:  # noqa: BLE001 - error_reply logs an unexpected one
                self.reply(error_reply(self.ctx, raw, exc))
        else:
            self.reply(error_reply(self.ctx, raw, outcome))
        self.flow()

    def reply(self, frame: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.replies.write(frame)

    async def run(self, raw: cf.RawFrame) -> None:
        self.reply(await answer(self.ctx, raw))

    def finished(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        self.flow()

    def flow(self) -> None:
        """Read only while few enough requests run and the client takes its replies."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        stop = len(self.tasks) + self.puts_pending >= self.max_in_flight or self.writing_paused
        if stop and not self.reading_paused:
            transport.pause_reading()
            self.reading_paused = True
        elif not stop and self.reading_paused:
            transport.resume_reading()
            self.reading_paused = False

    def pause_writing(self) -> None:
        self.writing_paused = True
        self.flow()
        self.stall_timer = asyncio.get_running_loop().call_later(self.write_timeout, self.stalled)

    def resume_writing(self) -> None:
        self.writing_paused = False
        if self.stall_timer is not None:
            self.stall_timer.cancel()
            self.stall_timer = None
        self.flow()

    def stalled(self) -> None:
        self.stall_timer = None
        if self.writing_paused and self.transport is not None:
            self.reject("reply_stalled")
            self.transport.abort()


class BinaryServer:
    """The listening socket; `address` is the bound host:port once started."""

    def __init__(self, ctx: BrokerContext, settings: Any) -> None:
        self.ctx = ctx
        self.settings = settings
        self.server: asyncio.Server | None = None
        self.connections: set[Connection] = set()
        self.port = 0

    async def start(self, host: str) -> int:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(
            lambda: Connection(self.ctx, self.settings, self.connections), host, self.settings.port, reuse_address=True
        )
        self.port = int(self.server.sockets[0].getsockname()[1])
        return self.port

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            for conn in list(self.connections):
                if conn.transport is not None:
                    conn.transport.abort()
            await self.server.wait_closed()
