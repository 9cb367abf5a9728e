"""`BinaryLinks.drop` after a failed request closes the connection that failed, never one another caller
opened since (on the one shared connection per broker, that would fail every request in flight on it);
request ids never take the connection's id 0."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator

import aiohttp
import pytest

from brokergroup.broker.binary_client import BinaryConnection, BinaryLinks
from brokergroup.broker.protocol import client_frames as cf


async def close_and_wait(writer: asyncio.StreamWriter) -> None:
    """Close a server handler's writer and wait for it: a writer left to the garbage collector after the loop
    closed warns (ResourceWarning) in whichever test runs next."""
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()


async def request_frames(reader: asyncio.StreamReader) -> AsyncIterator[cf.RawFrame]:
    """The frames a client sends, as a server handler reads them."""
    decoder = cf.FrameDecoder(max_frame=cf.DEFAULT_MAX_REQUEST)
    while data := await reader.read(65536):
        decoder.feed(data)
        while (raw := decoder.next_frame()) is not cf.NEED_DATA:
            assert isinstance(raw, cf.RawFrame)
            yield raw


async def test_a_failure_on_an_old_connection_leaves_the_new_one_open() -> None:
    accepted: list[asyncio.StreamWriter] = []

    async def hold(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    async with server, aiohttp.ClientSession() as session:
        links = BinaryLinks(session)
        old, new = await BinaryConnection.open(address), await BinaryConnection.open(address)
        links.connections["broker:8080"], links.addresses["broker:8080"] = new, address

        links.drop("broker:8080", old)  # a caller saw `old` fail after `new` replaced it
        assert old.transport.is_closing() and not new.closed
        assert (links.connections["broker:8080"], links.addresses["broker:8080"]) == (new, address)

        links.drop("broker:8080", new)
        assert new.transport.is_closing() and links.connections == {} and links.addresses == {}
        for writer in accepted:
            await close_and_wait(writer)


async def test_request_ids_wrap_from_2_32_minus_1_to_1_never_to_the_connections_id_0() -> None:
    seen: list[int] = []
    finished = asyncio.Event()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async for raw in request_frames(reader):
            seen.append(raw.request_id)
            writer.write(cf.encode_offset(raw.request_id, len(seen)))
        await close_and_wait(writer)
        finished.set()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    async with server:
        conn = await BinaryConnection.open(f"127.0.0.1:{server.sockets[0].getsockname()[1]}")
        conn.ids = itertools.count(cf.MAX_REQUEST_ID)  # as after 2^32 - 2 requests on one connection
        replies = [await conn.request(cf.GetOffset(group="g", topic="t"), timeout=10) for _ in range(3)]
        conn.close()
        await asyncio.wait_for(finished.wait(), 10)

    assert seen == [cf.MAX_REQUEST_ID, 1, 2]
    assert replies == [cf.Offset(1), cf.Offset(2), cf.Offset(3)]


async def test_requests_made_in_one_loop_iteration_go_out_in_one_write_and_each_gets_its_own_reply() -> None:
    """Producers released together (issue 17): their requests reach the broker in one read, so its puts
    share a flush and a replication frame; the replies, answered in any order, find their callers."""
    reads: list[bytes] = []
    finished = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = await reader.read(65536)
        reads.append(data)
        decoder = cf.FrameDecoder(max_frame=cf.DEFAULT_MAX_REQUEST)
        decoder.feed(data)
        frames = []
        while (raw := decoder.next_frame()) is not cf.NEED_DATA:
            assert isinstance(raw, cf.RawFrame)
            frames.append(raw)
        answers = [cf.encode_error(f.request_id, cf.Error("BAD_REQUEST", 400, f"to {f.payload!r}")) for f in frames]
        writer.write(b"".join(answers[::-1]))
        await reader.read()  # until the client closes
        await close_and_wait(writer)
        finished.set()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    async with server:
        conn = await BinaryConnection.open(f"127.0.0.1:{server.sockets[0].getsockname()[1]}")
        try:
            bodies = (b"a", b"bb", b"ccc")
            replies = await asyncio.gather(*(conn.request(cf.Produce(body), timeout=5) for body in bodies))
        finally:
            conn.close()
        # the handler's writer closed before the loop ends (see close_and_wait)
        await asyncio.wait_for(finished.wait(), 10)
    assert len(reads) == 1 and reads[0].count(b"bb") == 1
    assert [r.remark for r in replies if isinstance(r, cf.Error)] == ["to b'a'", "to b'bb'", "to b'ccc'"]


async def test_each_request_times_out_at_its_own_deadline_and_answered_ones_leave_no_timer_entries() -> None:
    """One timer per connection (issue 17) keeps each request's own timeout: a short one behind a long one
    fails on time, the long one is still answered, and answered requests do not pile up."""
    held: list[int] = []
    finished = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async for raw in request_frames(reader):
            if b"hold" in raw.payload:
                held.append(raw.request_id)
                continue
            if b"release" in raw.payload:
                writer.write(b"".join(cf.encode_offset(request_id, request_id) for request_id in held))
                held.clear()
            writer.write(cf.encode_offset(raw.request_id, raw.request_id))
        await close_and_wait(writer)
        finished.set()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    async with server:
        conn = await BinaryConnection.open(f"127.0.0.1:{server.sockets[0].getsockname()[1]}")
        loop = asyncio.get_running_loop()
        try:
            long = asyncio.create_task(conn.request(cf.GetOffset(group="hold", topic="long"), timeout=30))
            await asyncio.sleep(0)
            started = loop.time()
            with pytest.raises(TimeoutError):
                await conn.request(cf.GetOffset(group="hold", topic="short"), timeout=0.2)
            waited = loop.time() - started
            assert 0.19 <= waited < 2.0, waited
            assert not long.done()

            answers = [await conn.request(cf.GetOffset(group="g", topic="t"), timeout=30) for _ in range(300)]
            assert all(isinstance(a, cf.Offset) for a in answers)
            assert len(conn.link.deadlines) < 100  # not one entry per answered request behind the long one

            await conn.request(cf.GetOffset(group="g", topic="release"), timeout=30)
            assert isinstance(await asyncio.wait_for(long, 10), cf.Offset)
            assert conn.link.pending == {} and not conn.closed
        finally:
            conn.close()
        await asyncio.wait_for(finished.wait(), 10)
    assert conn.link.deadlines == [] and conn.link.timer is None  # the closed connection keeps no timer
