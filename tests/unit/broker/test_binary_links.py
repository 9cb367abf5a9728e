"""`BinaryLinks.drop` after a failed request closes the connection that failed, never one another caller
opened since (on the one shared connection per broker, that would fail every request in flight on it)."""

from __future__ import annotations

import asyncio

import aiohttp

from brokergroup.broker.binary_client import BinaryConnection, BinaryLinks


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
            writer.close()
