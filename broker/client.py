"""The broker client library: an idempotent producer and a consumer with committed offsets.

The producer finds the master through the controller (replica-info of its broker set) or uses
a fixed master URL, and retries across failover until a deadline. It numbers its messages
(producer id + sequence), so a retry of a message that was in fact written is recognised by
the master and not stored twice (DESIGN §4). A send returns only when the message is
acknowledged (PUT_OK) or raises `ProduceError` with the last status.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple

import aiohttp

from brokergroup.broker import wire
from brokergroup.controller.client import ControllerClient
from brokergroup.controller.codes import ControllerError

logger = logging.getLogger(__name__)


REFUSED_FOR_GOOD = ("NO_PERMISSION",)
"""Put statuses no retry fixes: the broker's write permission is wiped (read-only, a set being removed); the
producer sends to another set."""


class ProduceError(Exception):
    def __init__(self, status: str, remark: str) -> None:
        super().__init__(f"{status}: {remark}")
        self.status = status
        self.remark = remark


@dataclasses.dataclass(frozen=True)
class Sent:
    status: str
    commit_offsets: tuple[int, ...]
    queue_offsets: tuple[int | None, ...]
    duplicates: tuple[bool, ...]
    attempts: int
    master: str


class MasterFinder:
    """Where the master of a broker set is: from the controller, or a fixed address."""

    def __init__(
        self, *, broker_name: str, controller: ControllerClient | None = None, master_address: str | None = None
    ) -> None:
        if controller is None and master_address is None:
            raise ValueError("give controller addresses or a master address")
        self.broker_name = broker_name
        self.controller = controller
        self.fixed = master_address.removeprefix("http://").rstrip("/") if master_address else None
        self.cached: str | None = self.fixed

    def known(self, *, refresh: bool = False) -> str | None:
        """The master's address if `find` would answer it without asking the controller."""
        if self.fixed is not None:
            return self.fixed
        return None if refresh else self.cached

    async def find(self, *, refresh: bool = False) -> str | None:
        if self.fixed is not None:
            return self.fixed
        if self.cached and not refresh:
            return self.cached
        assert self.controller is not None
        try:
            info = await self.controller.replica_info(self.broker_name)
        except ControllerError as exc:
            logger.debug("replica-info for %s: %s", self.broker_name, exc)
            return None
        self.cached = info.master_address
        return self.cached

    def hint(self, address: str | None) -> None:
        if address and self.fixed is None:
            self.cached = address


class Attempt(NamedTuple):
    """What one try to send a batch to `master` gave: acknowledged (`sent`, whose `attempts` is 1:
    `send_until_acked` counts the tries), refused for good (`fatal`: a bad request that no retry can
    fix), or worth retrying (with the master the broker named, if any). A named tuple: one is built
    per send (issue 17)."""

    status: str
    remark: str
    sent: Sent | None = None
    fatal: bool = False
    master_hint: str | None = None
    refresh: bool = False
    """Ask the controller for the master again before the next try."""


async def send_until_acked(
    finder: MasterFinder, attempt: Callable[[str, float], Awaitable[Attempt]], *, deadline_s: float
) -> Sent:
    """The producers' retry loop, whatever the protocol: find the master, try (`attempt(master, seconds
    left)`), back off, until acknowledged or `deadline_s` passed. An idempotent producer re-sends the same
    sequences, so a retry after an unknown outcome is answered as a duplicate, never stored twice."""
    deadline = time.monotonic() + deadline_s
    attempts, delay = 0, 0.02
    status, remark = "UNREACHABLE", "no master known"
    refresh = False
    while time.monotonic() < deadline:
        # Neither finding the master nor one attempt may outlast the deadline (a hung controller
        # or broker would otherwise hold the send for the whole request timeout).
        master = finder.known(refresh=refresh)
        if master is None:
            try:
                async with asyncio.timeout(deadline - time.monotonic()):
                    master = await finder.find(refresh=refresh)
            except TimeoutError:
                status, remark = "UNREACHABLE", "no controller named the master in time"
                break
        if master is None:
            refresh = True
        else:
            attempts += 1
            outcome = await attempt(master, max(0.001, deadline - time.monotonic()))
            status, remark = outcome.status, outcome.remark
            if outcome.sent is not None:
                return outcome.sent if attempts == 1 else dataclasses.replace(outcome.sent, attempts=attempts)
            if outcome.fatal:
                raise ProduceError(status, remark)
            finder.hint(outcome.master_hint)
            refresh = outcome.refresh
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.5)
    raise ProduceError(status, f"not acknowledged within {deadline_s} s after {attempts} attempts: {remark}")


class Producer:
    def __init__(
        self,
        finder: MasterFinder,
        *,
        session: aiohttp.ClientSession,
        producer_id: int | None = None,
        deadline_s: float = 30.0,
        request_timeout_s: float = 10.0,
    ) -> None:
        self.finder = finder
        self.session = session
        self.producer_id = producer_id if producer_id is not None else secrets.randbits(62)
        self.next_seq = 0
        self.deadline_s = deadline_s
        self.timeout = aiohttp.ClientTimeout(total=request_timeout_s)

    async def send(
        self, topic: str, bodies: Sequence[bytes], *, queue_id: int = 0, properties: dict[str, str] | None = None
    ) -> Sent:
        seqs = list(range(self.next_seq, self.next_seq + len(bodies)))
        self.next_seq += len(bodies)
        now = int(time.time() * 1000)
        payload = {
            "topic": topic,
            "queueId": queue_id,
            "producerId": self.producer_id,
            "messages": [
                {"body": base64.b64encode(b).decode(), "seq": s, "bornTimestamp": now, "properties": properties or {}}
                for s, b in zip(seqs, bodies, strict=True)
            ],
        }
        return await self._send_until_acked(payload)

    async def _send_until_acked(self, payload: dict[str, Any]) -> Sent:
        async def attempt(master: str, left: float) -> Attempt:
            timeout = aiohttp.ClientTimeout(total=min(self.timeout.total or left, left))
            try:
                async with self.session.post(f"http://{master}/v1/messages", json=payload, timeout=timeout) as r:
                    body = await r.json()
            except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                return Attempt("UNREACHABLE", f"{master}: {str(exc) or type(exc).__name__}", refresh=True)
            status, remark = str(body.get("status")), str(body.get("remark", ""))
            if r.status == 200 and status == "PUT_OK":
                return Attempt(status, remark, sent=self._sent(body, 1, master))
            hint = body.get("masterAddress")
            return Attempt(
                status,
                remark,
                fatal=r.status in (400, 413) or status in REFUSED_FOR_GOOD,
                master_hint=hint,
                refresh=status == "SERVICE_NOT_AVAILABLE" and not hint,
            )

        return await send_until_acked(self.finder, attempt, deadline_s=self.deadline_s)

    @staticmethod
    def _sent(body: dict[str, Any], attempts: int, master: str) -> Sent:
        messages = body.get("messages", [])
        return Sent(
            status=str(body["status"]),
            commit_offsets=tuple(int(m["commitOffset"]) for m in messages),
            queue_offsets=tuple(m.get("queueOffset") for m in messages),
            duplicates=tuple(bool(m["duplicate"]) for m in messages),
            attempts=attempts,
            master=master,
        )


@dataclasses.dataclass(frozen=True)
class Received:
    queue_offset: int
    body: bytes
    producer_id: int
    seq: int
    properties: dict[str, str]


class Consumer:
    """Reads a queue from its committed offset; commits through the master (replicated)."""

    def __init__(
        self, finder: MasterFinder, *, group: str, session: aiohttp.ClientSession, request_timeout_s: float = 10.0
    ) -> None:
        self.finder = finder
        self.group = group
        self.session = session
        self.timeout = aiohttp.ClientTimeout(total=request_timeout_s)
        self.positions: dict[tuple[str, int], int] = {}
        self.min_offsets: dict[tuple[str, int], int] = {}
        """Each queue's min offset as the last poll's answer gave it: a poll from below it read nothing and
        moved the position up to it (OFFSET_TOO_SMALL, retention deleted those messages)."""

    async def _get(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        for refresh in (False, True, True):
            master = await self.finder.find(refresh=refresh)
            if master is None:
                await asyncio.sleep(0.1)
                continue
            try:
                async with self.session.get(f"http://{master}{path}", params=params, timeout=self.timeout) as r:
                    body: dict[str, Any] = await r.json()
                    if r.status == 200:
                        return body
                    if r.status == 400:
                        raise ProduceError(str(body.get("status")), str(body.get("remark")))
            except (aiohttp.ClientError, TimeoutError, ValueError):
                continue
        raise ProduceError("UNREACHABLE", f"no broker of {self.finder.broker_name} answered {path}")

    async def committed(self, topic: str, queue_id: int = 0) -> int:
        body = await self._get("/v1/consumer-offsets", {"group": self.group, "topic": topic, "queueId": str(queue_id)})
        return int(body["offset"]) if body.get("offset") is not None else 0

    async def poll(self, topic: str, queue_id: int = 0, *, max_count: int = 32) -> list[Received]:
        key = (topic, queue_id)
        if key not in self.positions:
            self.positions[key] = await self.committed(topic, queue_id)
        body = await self._get(
            "/v1/messages",
            {"topic": topic, "queueId": str(queue_id), "offset": str(self.positions[key]), "maxCount": str(max_count)},
        )
        out = [
            Received(
                int(m["queueOffset"]),
                base64.b64decode(m["body"]),
                int(m["producerId"]),
                int(m["seq"]),
                dict(m["properties"]),
            )
            for m in body["messages"]
        ]
        self.positions[key] = int(body["nextOffset"])
        self.min_offsets[key] = int(body["minOffset"])
        return out

    async def commit(self, topic: str, queue_id: int = 0, offset: int | None = None) -> None:
        value = self.positions.get((topic, queue_id), 0) if offset is None else offset
        request = wire.ConsumerOffsetRequest(group=self.group, topic=topic, queue_id=queue_id, offset=value)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            master = await self.finder.find(refresh=True)
            if master is not None:
                try:
                    async with self.session.post(
                        f"http://{master}/v1/consumer-offsets",
                        json=request.model_dump(by_alias=True),
                        timeout=self.timeout,
                    ) as r:
                        if r.status == 200:
                            return
                        if r.status == 400:
                            body = await r.json()
                            raise ProduceError(str(body.get("status")), str(body.get("remark")))
                except (aiohttp.ClientError, TimeoutError):
                    pass
            await asyncio.sleep(0.1)
        raise ProduceError("UNREACHABLE", "consumer offset not committed within 30 s")
