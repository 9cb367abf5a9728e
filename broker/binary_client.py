"""The binary-protocol producer and consumer (`protocol.client_frames`), with `broker.client`'s API.

The master is found as for HTTP (`MasterFinder`: the controller's replica-info, or a fixed
address), which names a broker by its HTTP address; the broker's binary port is read once from
its `GET /v1/status` (`binaryAddress`). One connection per broker carries every request of this
process, pipelined: each waits only for the reply with its own request id.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import secrets
import time
from collections.abc import Sequence
from typing import cast

import aiohttp

from brokergroup.broker import wire
from brokergroup.broker.client import (
    REFUSED_FOR_GOOD,
    Attempt,
    MasterFinder,
    ProduceError,
    Received,
    Sent,
    send_until_acked,
)
from brokergroup.broker.errors import ProtocolError
from brokergroup.broker.protocol import client_frames as cf
from brokergroup.broker.turn_writer import TurnWriter

RETRY_CODES_NEVER = (400, 413)
"""ERROR codes that no retry can fix (the HTTP API's 400 and 413)."""


class _Link(asyncio.Protocol):
    def __init__(self) -> None:
        self.decoder = cf.FrameDecoder(max_frame=cf.DEFAULT_MAX_REPLY)
        self.pending: dict[int, asyncio.Future[cf.Reply]] = {}
        self.deadlines: list[tuple[float, int]] = []
        """(loop time, request id) of the pending requests, a heap; an entry whose request has been
        answered stays until it reaches the top or the heap is twice the requests pending. One timer for
        the whole connection, armed at the top's time, instead of an `asyncio.timeout` per request
        (issue 17: that was 10 % of the client's CPU)."""
        self.timer: asyncio.TimerHandle | None = None
        self.timer_at = 0.0
        self.transport: asyncio.Transport | None = None
        self.lost: Exception | None = None
        self.refusal: str | None = None
        """The broker's ERROR about the connection (request id 0), sent before it closes it."""
        self.out = TurnWriter()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = self.out.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio's

    def data_received(self, data: bytes) -> None:
        try:
            self.decoder.feed(data)
            while (raw := self.decoder.next_frame()) is not cf.NEED_DATA:
                assert isinstance(raw, cf.RawFrame)
                if raw.request_id == cf.CONNECTION_REQUEST_ID:
                    self.about_connection(raw)
                    continue
                waiter = self.pending.pop(raw.request_id, None)
                if waiter is None or waiter.done():
                    continue
                try:
                    waiter.set_result(cf.parse_reply(raw))
                except ProtocolError as exc:
                    waiter.set_exception(exc)
        except ProtocolError as exc:
            self.fail(exc)
            if self.transport is not None:
                self.transport.abort()

    def send(self, frame: bytes) -> None:
        """Queue a request frame. Requests made in one loop iteration go out in one write, and puts
        that reach the broker together share its replication frames (issue 17)."""
        self.out.write(frame)

    def about_connection(self, raw: cf.RawFrame) -> None:
        reply = cf.parse_reply(raw)
        if isinstance(reply, cf.Error):
            self.refusal = f"{reply.status} ({reply.code}): {reply.remark}"

    def connection_lost(self, exc: Exception | None) -> None:
        if self.refusal is not None:
            exc = ConnectionError(f"the broker closed the connection: {self.refusal}")
        self.fail(exc or ConnectionError("the broker closed the connection"))

    def expire_at(self, request_id: int, when: float) -> None:
        """Fail the request with `TimeoutError` if it has no reply by `when` (the loop's time)."""
        deadlines, pending = self.deadlines, self.pending
        while deadlines and deadlines[0][1] not in pending:  # answered: dropped as it reaches the top
            heapq.heappop(deadlines)
        if len(deadlines) > 2 * len(pending) + 64:  # answered ones held behind a slow request: drop them all
            deadlines[:] = [entry for entry in deadlines if entry[1] in pending]
            heapq.heapify(deadlines)
        heapq.heappush(deadlines, (when, request_id))
        if self.timer is None or when < self.timer_at:
            self._arm()

    def _arm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.deadlines:
            self.timer_at = self.deadlines[0][0]
            self.timer = asyncio.get_running_loop().call_at(self.timer_at, self._expire)

    def _expire(self) -> None:
        self.timer = None
        now = asyncio.get_running_loop().time()
        deadlines, pending = self.deadlines, self.pending
        while deadlines and (deadlines[0][0] <= now or deadlines[0][1] not in pending):
            _, request_id = heapq.heappop(deadlines)
            waiter = pending.pop(request_id, None)
            if waiter is not None and not waiter.done():
                waiter.set_exception(TimeoutError())
        self._arm()

    def fail(self, exc: Exception) -> None:
        self.lost = exc
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.deadlines = []
        pending, self.pending = self.pending, {}
        for waiter in pending.values():
            if not waiter.done():
                waiter.set_exception(ConnectionError(str(exc) or type(exc).__name__))


class BinaryConnection:
    """One pipelined connection to one broker's binary port."""

    def __init__(self, address: str, transport: asyncio.Transport, link: _Link) -> None:
        self.address = address
        self.transport = transport
        self.link = link
        self.ids = itertools.count(1)

    @classmethod
    async def open(cls, address: str, *, timeout: float = 5.0) -> BinaryConnection:
        host, port = address.rsplit(":", 1)
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(timeout):
            transport, link = await loop.create_connection(_Link, host.strip("[]"), int(port))
        return cls(address, transport, link)

    @property
    def closed(self) -> bool:
        return self.link.lost is not None or self.transport.is_closing()

    async def request(self, request: cf.Request, *, timeout: float) -> cf.Reply:
        if self.closed:
            raise ConnectionError(f"{self.address}: {self.link.lost or 'connection closed'}")
        rid = (next(self.ids) - 1) % cf.MAX_REQUEST_ID + 1  # 1..2^32-1, never the connection's id 0
        waiter: asyncio.Future[cf.Reply] = asyncio.get_running_loop().create_future()
        link = self.link
        link.pending[rid] = waiter
        link.send(cf.encode_request(rid, request))
        link.expire_at(rid, waiter.get_loop().time() + timeout)
        try:
            return await waiter
        finally:
            link.pending.pop(rid, None)

    def close(self) -> None:
        self.transport.close()


class BinaryLinks:
    """Binary connections by the brokers' HTTP addresses (as the controller names them)."""

    def __init__(self, session: aiohttp.ClientSession, *, timeout: float = 5.0) -> None:
        self.session = session
        self.timeout = timeout
        self.addresses: dict[str, str] = {}
        self.connections: dict[str, BinaryConnection] = {}
        self.locks: dict[str, asyncio.Lock] = {}

    async def get(self, http_address: str) -> BinaryConnection:
        conn = self.connections.get(http_address)
        if conn is not None and not conn.closed:
            return conn
        async with self.locks.setdefault(http_address, asyncio.Lock()):  # one connection, however many callers
            conn = self.connections.get(http_address)
            if conn is not None and not conn.closed:
                return conn
            conn = await self._connect(http_address)
            self.connections[http_address] = conn
            return conn

    async def _connect(self, http_address: str) -> BinaryConnection:
        binary = self.addresses.get(http_address)
        if binary is None:
            timeout = aiohttp.ClientTimeout(total=self.timeout)
            async with self.session.get(f"http://{http_address}/v1/status", timeout=timeout) as r:
                status = await r.json()
            binary = status.get("binaryAddress")
            if not binary:
                raise ProduceError(
                    "BAD_REQUEST", f"{http_address} serves no binary port (binary.enabled is off); use --protocol http"
                )
            self.addresses[http_address] = binary
        try:
            return await BinaryConnection.open(binary, timeout=self.timeout)
        except (OSError, TimeoutError):
            self.addresses.pop(http_address, None)  # the broker may have restarted on another port
            raise

    def drop(self, http_address: str, failed: BinaryConnection | None = None) -> None:
        """Close the broker's connection (with `failed`, only if it is still that one: a caller that
        saw an older connection fail must not close the one another caller opened since)."""
        current = self.connections.get(http_address)
        if failed is not None and current is not failed:
            failed.close()
            return
        self.connections.pop(http_address, None)
        self.addresses.pop(http_address, None)
        if current is not None:
            current.close()

    def close(self) -> None:
        for address in list(self.connections):
            self.drop(address)


_UNREACHABLE = (OSError, ConnectionError, TimeoutError, aiohttp.ClientError, ValueError, ProtocolError)


class BinaryProducer:
    """`broker.client.Producer` over the binary port: idempotent, retried across failover."""

    def __init__(
        self,
        finder: MasterFinder,
        *,
        links: BinaryLinks,
        producer_id: int | None = None,
        deadline_s: float = 30.0,
        request_timeout_s: float = 10.0,
    ) -> None:
        self.finder = finder
        self.links = links
        self.producer_id = producer_id if producer_id is not None else secrets.randbits(62)
        self.next_seq = 0
        self.deadline_s = deadline_s
        self.request_timeout_s = request_timeout_s

    async def send(
        self, topic: str, bodies: Sequence[bytes], *, queue_id: int = 0, properties: dict[str, str] | None = None
    ) -> Sent:
        now = int(time.time() * 1000)
        batch = wire.encode_batch(
            topic=topic,
            queue_id=queue_id,
            producer_id=self.producer_id,
            messages=[(self.next_seq + i, now, properties or {}, b) for i, b in enumerate(bodies)],
        )
        self.next_seq += len(bodies)
        return await self._send_until_acked(cf.Produce(batch))

    async def _send_until_acked(self, request: cf.Produce) -> Sent:
        async def attempt(master: str, left: float) -> Attempt:
            conn = None
            try:
                conn = await self.links.get(master)
                reply = await conn.request(request, timeout=min(self.request_timeout_s, left))
            except _UNREACHABLE as exc:
                self.links.drop(master, conn)
                return Attempt("UNREACHABLE", f"{master}: {str(exc) or type(exc).__name__}", refresh=True)
            if isinstance(reply, cf.PutResult):
                if reply.status == "PUT_OK":
                    sent = Sent(
                        status=reply.status,
                        commit_offsets=tuple(a.commit_offset for a in reply.appended),
                        queue_offsets=tuple(a.queue_offset for a in reply.appended),
                        duplicates=tuple(a.duplicate for a in reply.appended),
                        attempts=1,
                        master=master,
                    )
                    return Attempt(reply.status, reply.remark, sent=sent)
                return Attempt(
                    reply.status,
                    reply.remark,
                    fatal=reply.status in REFUSED_FOR_GOOD,
                    master_hint=reply.master_address,
                    refresh=reply.status == "SERVICE_NOT_AVAILABLE" and not reply.master_address,
                )
            if isinstance(reply, cf.Error):
                return Attempt(reply.status, reply.remark, fatal=reply.code in RETRY_CODES_NEVER, refresh=True)
            return Attempt("UNREACHABLE", f"{master}: unexpected reply {type(reply).__name__}")

        return await send_until_acked(self.finder, attempt, deadline_s=self.deadline_s)


class BinaryConsumer:
    """`broker.client.Consumer` over the binary port: reads from the committed offset, commits on the master."""

    def __init__(
        self, finder: MasterFinder, *, group: str, links: BinaryLinks, request_timeout_s: float = 10.0
    ) -> None:
        self.finder = finder
        self.group = group
        self.links = links
        self.request_timeout_s = request_timeout_s
        self.positions: dict[tuple[str, int], int] = {}
        self.min_offsets: dict[tuple[str, int], int] = {}
        """Each queue's min offset as the last poll's answer gave it: a poll from below it read nothing and
        moved the position up to it (OFFSET_TOO_SMALL, retention deleted those messages)."""

    async def _ask(self, request: cf.Request) -> cf.Reply:
        for refresh in (False, True, True):
            master = await self.finder.find(refresh=refresh)
            if master is None:
                await asyncio.sleep(0.1)
                continue
            conn = None
            try:
                conn = await self.links.get(master)
                reply = await conn.request(request, timeout=self.request_timeout_s)
            except _UNREACHABLE:
                self.links.drop(master, conn)
                continue
            if isinstance(reply, cf.Error):
                if reply.code in RETRY_CODES_NEVER:
                    raise ProduceError(reply.status, reply.remark)
                continue
            return reply
        raise ProduceError("UNREACHABLE", f"no broker of {self.finder.broker_name} answered {type(request).__name__}")

    async def committed(self, topic: str, queue_id: int = 0) -> int:
        reply = await self._ask(cf.GetOffset(group=self.group, topic=topic, queue_id=queue_id))
        assert isinstance(reply, cf.Offset), reply
        return reply.offset if reply.offset is not None else 0

    async def poll(self, topic: str, queue_id: int = 0, *, max_count: int = 32) -> list[Received]:
        key = (topic, queue_id)
        if key not in self.positions:
            self.positions[key] = await self.committed(topic, queue_id)
        reply = await self._ask(
            cf.Consume(topic=topic, queue_id=queue_id, offset=self.positions[key], max_count=max_count)
        )
        assert isinstance(reply, cf.Messages), reply
        self.positions[key] = reply.next_offset
        self.min_offsets[key] = reply.min_offset
        return [Received(m.queue_offset, m.body, m.producer_id, m.seq, m.properties) for m in reply.messages]

    async def commit(self, topic: str, queue_id: int = 0, offset: int | None = None) -> None:
        value = self.positions.get((topic, queue_id), 0) if offset is None else offset
        request = cf.CommitOffset(group=self.group, topic=topic, queue_id=queue_id, offset=value)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            master = await self.finder.find(refresh=True)
            if master is not None:
                conn = None
                try:
                    conn = await self.links.get(master)
                    reply = await conn.request(request, timeout=self.request_timeout_s)
                except _UNREACHABLE:
                    self.links.drop(master, conn)
                else:
                    if isinstance(reply, cf.PutResult) and reply.status == "PUT_OK":
                        return
                    if isinstance(reply, cf.Error) and reply.code in RETRY_CODES_NEVER:
                        raise ProduceError(reply.status, reply.remark)
            await asyncio.sleep(0.1)
        raise ProduceError("UNREACHABLE", "consumer offset not committed within 30 s")
