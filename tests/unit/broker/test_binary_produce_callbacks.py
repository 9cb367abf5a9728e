"""The binary port answers a PRODUCE from callbacks (`PutPath.put_then`), without a task per request
(issue 17): puts waiting for acks still count toward `max_in_flight`, each reply carries its request id,
and a bug met after the write is answered SYSTEM_ERROR instead of leaving the request unanswered."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from brokergroup.broker import wire
from brokergroup.broker.api import BrokerContext
from brokergroup.broker.binary_server import Connection
from brokergroup.broker.errors import BrokerError
from brokergroup.broker.metrics import BrokerMetrics
from brokergroup.broker.protocol import client_frames as cf
from brokergroup.broker.service import PutOutcome, PutPath, Then
from brokergroup.broker.store.types import Appended, PutResult, PutStatus


class Transport:
    def __init__(self) -> None:
        self.written = bytearray()
        self.paused = False
        self.pauses = 0

    def write(self, data: bytes) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return False

    def set_write_buffer_limits(self, high: int) -> None:
        pass

    def pause_reading(self) -> None:
        self.paused = True
        self.pauses += 1

    def resume_reading(self) -> None:
        self.paused = False

    def reading(self) -> bool:
        return not self.paused

    def replies(self) -> list[tuple[int, Any]]:
        decoder = cf.FrameDecoder(max_frame=cf.DEFAULT_MAX_REQUEST)
        decoder.feed(bytes(self.written))
        out = []
        while (raw := decoder.next_frame()) is not cf.NEED_DATA:
            assert isinstance(raw, cf.RawFrame)
            out.append((raw.request_id, cf.parse_reply(raw)))
        return out


class Puts:
    """`PutPath.put_then` held open: each put's `then` waits for the test to answer it."""

    def __init__(self) -> None:
        self.pending: list[Then] = []
        self.refuse: Exception | None = None

    def put_then(self, messages: list[Any], then: Then) -> None:
        if self.refuse is not None:
            raise self.refuse
        self.pending.append(then)


def connection(max_in_flight: int) -> tuple[Connection, Transport, Puts]:
    puts = Puts()
    ctx = BrokerContext(
        settings=None,
        store=None,
        role=SimpleNamespace(produce_refusal=lambda: None, master_address="127.0.0.1:1"),
        puts=puts,
        metrics=BrokerMetrics(CollectorRegistry()),
        address="127.0.0.1:1",
    )
    settings = SimpleNamespace(
        max_in_flight=max_in_flight, frame_timeout_ms=1000, write_timeout_ms=1000, max_connections=10
    )
    conn = Connection(ctx, settings, set())
    transport = Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport, puts


def produce(request_id: int) -> bytes:
    batch = wire.encode_batch(topic="t", queue_id=0, producer_id=-1, messages=[(0, 1, {}, b"x")])
    return cf.frame(cf.FrameType.PRODUCE, request_id, batch)


def ok(offset: int) -> PutOutcome:
    return PutOutcome(PutStatus.PUT_OK, "", PutResult((Appended(offset, 1, offset, False),), offset + 1))


async def turn() -> None:
    """Let the replies queued in this turn of the loop go out (`TurnWriter`)."""
    await asyncio.sleep(0)
    await asyncio.sleep(0)


async def test_waiting_puts_count_toward_max_in_flight_and_answer_by_request_id() -> None:
    conn, transport, puts = connection(max_in_flight=2)
    conn.data_received(produce(7) + produce(8) + produce(9))
    assert len(puts.pending) == 3
    assert not conn.tasks  # no task per PRODUCE
    assert not transport.reading()  # three puts wait for acks: reading stops at two
    puts.pending[1](ok(10))
    assert not transport.reading()  # two still wait
    puts.pending[0](ok(0))
    assert transport.reading()
    puts.pending[2](PutOutcome(PutStatus.FLUSH_SLAVE_TIMEOUT, "slow replicas"))
    await turn()
    replies = dict(transport.replies())
    assert sorted(replies) == [7, 8, 9]
    assert replies[8].status == "PUT_OK" and replies[8].appended[0].commit_offset == 10
    assert replies[7].status == "PUT_OK" and replies[7].appended[0].commit_offset == 0
    assert replies[9].status == "FLUSH_SLAVE_TIMEOUT" and replies[9].remark == "slow replicas"
    assert conn.puts_pending == 0


async def test_a_bug_after_the_write_is_answered_system_error(caplog: pytest.LogCaptureFixture) -> None:
    conn, transport, puts = connection(max_in_flight=8)
    conn.data_received(produce(3) + produce(4))
    with caplog.at_level(logging.ERROR):
        puts.pending[0](RuntimeError("a bug on the way"))
    puts.pending[1](ok(5))
    await turn()
    replies = dict(transport.replies())
    assert isinstance(replies[3], cf.Error) and replies[3].code == 500 and replies[3].status == "SYSTEM_ERROR"
    assert replies[4].status == "PUT_OK"  # the connection goes on
    assert "a bug on the way" in caplog.text
    assert conn.puts_pending == 0


async def test_what_the_write_refuses_is_answered_bad_request_and_not_counted_waiting() -> None:
    conn, transport, puts = connection(max_in_flight=1)
    puts.refuse = BrokerError("message body exceeds max_message_size")
    conn.data_received(produce(1) + cf.frame(cf.FrameType.PRODUCE, 2, b"bad"))
    await turn()
    replies = dict(transport.replies())
    assert isinstance(replies[1], cf.Error) and replies[1].code == 400
    assert "max_message_size" in replies[1].remark
    assert isinstance(replies[2], cf.Error) and replies[2].code == 400  # a batch that does not decode
    assert conn.puts_pending == 0 and transport.reading()


class Role:
    """A role whose check after the acks fails: a bug met from a callback, not on the first call."""

    def __init__(self, ha: Any) -> None:
        self.checks = 0
        self.ha = ha

    def check_write(self) -> tuple[PutStatus, str] | None:
        self.checks += 1
        if self.checks > 1:
            raise RuntimeError("role check failed after the acks")
        return None

    def replication(self) -> Any:
        return self.ha


async def test_put_then_hands_a_bug_after_the_acks_to_then_and_put_raises_it() -> None:
    loop = asyncio.get_running_loop()
    acks: asyncio.Future[PutStatus] = loop.create_future()
    ha = SimpleNamespace(check_put=lambda: None, replicated_soon=lambda offset: acks, after_acks=lambda status: status)
    store = SimpleNamespace(put_messages=lambda messages, now_ms: PutResult((Appended(0, 10, 0, False),), 10))
    flusher = SimpleNamespace(flushed_soon=lambda offset: True)
    path = PutPath(store=store, flusher=flusher, role=Role(ha), metrics=BrokerMetrics(CollectorRegistry()))  # type: ignore[arg-type]
    got: list[PutOutcome | Exception] = []
    path.put_then([], got.append)
    assert got == []  # waits for the acks
    acks.set_result(PutStatus.PUT_OK)
    await asyncio.sleep(0)
    assert len(got) == 1 and isinstance(got[0], RuntimeError)

    path.role = Role(ha)  # type: ignore[assignment]
    with pytest.raises(RuntimeError, match="after the acks"):
        await path.put([])


def test_put_then_hands_a_bug_after_the_write_to_then_when_the_acks_are_in_at_once() -> None:
    """`put_then` raises only what comes up to the write (then `then` is never called): with the acks in at
    once (one ack asked for), a bug after the write goes to `then` as from a callback."""
    ha = SimpleNamespace(
        check_put=lambda: None, replicated_soon=lambda offset: PutStatus.PUT_OK, after_acks=lambda status: status
    )
    store = SimpleNamespace(put_messages=lambda messages, now_ms: PutResult((Appended(0, 10, 0, False),), 10))
    flusher = SimpleNamespace(flushed_soon=lambda offset: True)
    path = PutPath(store=store, flusher=flusher, role=Role(ha), metrics=BrokerMetrics(CollectorRegistry()))  # type: ignore[arg-type]
    got: list[PutOutcome | Exception] = []
    path.put_then([], got.append)
    assert len(got) == 1 and isinstance(got[0], RuntimeError)
