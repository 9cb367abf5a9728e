"""The binary client port of a real broker set: produce (single, batched, idempotent), consume,
commit, the HTTP API's errors, and bad input (oversized, unknown, garbage, truncated, slow-loris,
unread replies) answered with an ERROR frame or a closed connection and a counter, never a crash."""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from brokergroup.broker.binary_client import BinaryConnection, BinaryConsumer, BinaryLinks, BinaryProducer
from brokergroup.broker.client import MasterFinder, ProduceError
from brokergroup.broker.protocol import client_frames as cf
from brokergroup.controller.client import ControllerClient
from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup
from tests.integration.broker.conftest import running_set
from tests.integration.conftest import eventually

TIGHT = [
    "--set", "binary.frame_timeout_ms=1000",
    "--set", "binary.write_timeout_ms=1000",
    "--set", "binary.max_in_flight=4",
]  # fmt: skip


@pytest.fixture
def tight_set(controller_group: ControllerGroup, tmp_path: Path) -> Iterator[BrokerSet]:
    with running_set(tmp_path, controller_group, TIGHT) as brokers:
        yield brokers


async def binary_address(brokers: BrokerSet, index: int, session: aiohttp.ClientSession) -> tuple[str, int]:
    """The broker's binary port from its status; a slave may still be starting when the master serves."""
    found: list[str] = []

    async def serving() -> bool:
        status = await brokers.status(index, session)
        if status is not None and status.get("binaryAddress"):
            found.append(str(status["binaryAddress"]))
        return bool(found)

    await eventually(f"broker {index} reports its binary address", serving, timeout=60)
    host, port = found[-1].rsplit(":", 1)
    return host, int(port)


async def rejected(session: aiohttp.ClientSession, api: str) -> dict[str, float]:
    async with session.get(f"http://{api}/metrics") as r:
        text = await r.text()
    found = re.findall(r'^brokergroup_broker_binary_rejected_total\{reason="(\w+)"\} ([0-9.e+]+)$', text, re.M)
    return {reason: float(value) for reason, value in found}


async def test_produce_consume_and_commit_over_the_binary_port(
    controller_group: ControllerGroup, async_set: BrokerSet
) -> None:
    master = await async_set.master()
    async with aiohttp.ClientSession() as session:
        links = BinaryLinks(session)
        finder = MasterFinder(broker_name="bs", controller=None, master_address=async_set.nodes[master].api)
        producer = BinaryProducer(finder, links=links)
        one = await producer.send("bin", [b"one"], properties={"k": "v"})
        assert (one.status, one.queue_offsets, one.duplicates) == ("PUT_OK", (0,), (False,))
        batch = await producer.send("bin", [b"two", b"three"])
        assert batch.queue_offsets == (1, 2)

        # A retry of the same producer id and sequence is recognised, as over HTTP.
        again = BinaryProducer(finder, links=links, producer_id=producer.producer_id)
        dup = await again.send("bin", [b"one"])
        assert dup.duplicates == (True,) and dup.queue_offsets == (0,)

        # Pipelined: many requests in flight on the one connection, each answered under its id.
        sent = await asyncio.gather(*(producer.send("bin-pipe", [str(i).encode()]) for i in range(50)))
        assert sorted(s.queue_offsets[0] for s in sent) == list(range(50))

        consumer = BinaryConsumer(finder, group="g", links=links)
        got = await consumer.poll("bin", max_count=10)
        assert [(m.queue_offset, m.body) for m in got] == [(0, b"one"), (1, b"two"), (2, b"three")]
        assert got[0].properties == {"k": "v"} and got[0].producer_id == producer.producer_id
        await consumer.commit("bin")
        fresh = BinaryConsumer(finder, group="g", links=links)
        assert await fresh.committed("bin") == 3
        async with session.get(
            f"http://{async_set.nodes[master].api}/v1/consumer-offsets", params={"group": "g", "topic": "bin"}
        ) as r:
            assert (await r.json())["offset"] == 3  # the same store as the HTTP API

        # The HTTP API's errors, with its status names and codes.
        with pytest.raises(ProduceError, match="BAD_REQUEST: batch header: topic"):
            await producer.send("bad topic!", [b"x"])
        bad_group = BinaryConsumer(finder, group="bad group!", links=links)
        with pytest.raises(ProduceError, match=r"BAD_REQUEST: group: String should match pattern"):
            await bad_group.commit("bin", offset=1)
        slave = next(i for i in range(len(async_set.nodes)) if i != master)

        async def following() -> bool:
            status = await async_set.status(slave, session)
            return status is not None and status.get("role") == "slave"

        await eventually(f"broker {slave} follows the master", following, timeout=60)
        conn = await BinaryConnection.open(":".join(map(str, await binary_address(async_set, slave, session))))
        reply = await conn.request(cf.Produce(_batch()), timeout=10)
        assert isinstance(reply, cf.PutResult) and reply.status == "SERVICE_NOT_AVAILABLE"
        assert reply.master_address == async_set.nodes[master].api
        conn.close()
        links.close()


def _batch() -> bytes:
    from brokergroup.broker import wire

    return wire.encode_batch(topic="t", queue_id=0, producer_id=-1, messages=[(-1, 0, {}, b"x")])


async def test_bad_input_gets_an_error_or_a_close_and_a_counter(
    controller_group: ControllerGroup, tight_set: BrokerSet
) -> None:
    master = await tight_set.master()
    api = tight_set.nodes[master].api
    async with aiohttp.ClientSession() as session:
        host, port = await binary_address(tight_set, master, session)

        # Unknown type: an ERROR under the request id; the connection goes on.
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(bytes.fromhex("000000057e0000002a") + cf.encode_request(43, cf.GetOffset(group="g", topic="t")))
        decoder = cf.FrameDecoder(max_frame=cf.DEFAULT_MAX_REPLY)
        replies: dict[int, cf.Reply] = {}
        while len(replies) < 2:
            decoder.feed(await asyncio.wait_for(reader.read(65536), 10))
            while (raw := decoder.next_frame()) is not cf.NEED_DATA:
                assert isinstance(raw, cf.RawFrame)
                replies[raw.request_id] = cf.parse_reply(raw)
        error = replies[42]
        assert isinstance(error, cf.Error) and (error.status, error.code) == ("BAD_REQUEST", 400)
        assert "unknown request type 0x7e" in error.remark
        assert replies[43] == cf.Offset(None)
        writer.close()

        # Oversized length: an ERROR (413), then the broker closes the connection.
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(bytes.fromhex("7fffffff0100000001"))
        data = await asyncio.wait_for(reader.read(), 10)
        reply_decoder = cf.FrameDecoder(max_frame=cf.DEFAULT_MAX_REPLY)
        reply_decoder.feed(data)
        frame = reply_decoder.next_frame()
        assert isinstance(frame, cf.RawFrame)
        too_big = cf.parse_reply(frame)
        assert (
            isinstance(too_big, cf.Error) and too_big.code == 413 and "larger than the broker accepts" in too_big.remark
        )
        writer.close()

        # Truncated: the client leaves mid-frame.
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(cf.encode_request(1, cf.GetOffset(group="g", topic="t"))[:-3])
        await writer.drain()
        writer.close()

        # Slow-loris: a frame that never completes is cut after binary.frame_timeout_ms.
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"\x00\x00")
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()

        # Random bytes from many connections: never a crash.
        rng = random.Random(17)
        for size in (1, 4, 9, 17, 100, 5000, 70000):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(bytes(rng.randrange(256) for _ in range(size)))
            await writer.drain()
            await asyncio.wait_for(reader.read(), 15)  # an ERROR and/or a close (slow-loris at the latest)
            writer.close()

        # A client that never reads its replies: reading stops, then the connection is aborted.
        reader, writer = await asyncio.open_connection(host, port)
        sock = writer.get_extra_info("socket")
        import socket

        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        consume = cf.encode_request(1, cf.Consume(topic="big", max_count=1024, max_bytes=64 * 1024 * 1024))
        links = BinaryLinks(session)
        producer = BinaryProducer(MasterFinder(broker_name="bs", master_address=api), links=links)
        for _ in range(4):
            await producer.send("big", [b"x" * 100_000] * 10)
        links.close()

        async def flood() -> None:
            for _ in range(200):
                writer.write(consume)
                await writer.drain()

        with contextlib.suppress(ConnectionError, OSError):  # the broker may abort while we still write
            await asyncio.wait_for(flood(), 30)
        # Keep the connection open without reading: closing it would end the stall before it is judged.
        want = ("unknown_type", "oversized", "truncated", "slow_frame", "reply_stalled")
        seen: dict[str, float] = {}

        async def counted() -> bool:
            seen.clear()
            seen.update(await rejected(session, api))
            return all(seen.get(reason, 0) >= 1 for reason in want)

        try:
            await eventually("every kind of bad input counted", counted, timeout=30)
        except AssertionError as error:
            raise AssertionError(f"{error}; counted: {seen}") from None
        finally:
            writer.close()

        # The broker still serves: no crash (a slow machine may have moved the master meanwhile).
        proc = tight_set.nodes[master].proc
        assert proc is not None and proc.poll() is None
        controller = ControllerClient(controller_group.api_addresses)
        finder = MasterFinder(broker_name="bs", controller=controller)
        links = BinaryLinks(session)
        sent = await BinaryProducer(finder, links=links).send("after-garbage", [b"ok"])
        assert sent.status == "PUT_OK"
        links.close()
        await controller.close()
