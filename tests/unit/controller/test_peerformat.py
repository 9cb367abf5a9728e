"""The leader groups batches only once every other node says it applies group entries
(GET /v1/status, raftEntryFormat): real HTTP servers on 127.0.0.1 answer as new, old and broken nodes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from brokergroup.controller.peerformat import entry_format, refresh
from brokergroup.controller.replicated import GROUP_ENTRY_FORMAT
from brokergroup.local.ports import free_ports


@pytest.fixture
async def servers() -> AsyncIterator[Callable[[Callable[[], web.Response]], Any]]:
    runners: list[web.AppRunner] = []

    async def start(answer: Callable[[], web.Response]) -> str:
        async def status(_request: web.Request) -> web.Response:
            return answer()

        app = web.Application()
        app.router.add_get("/v1/status", status)
        runner = web.AppRunner(app)
        await runner.setup()
        port = free_ports(1)[0]
        await web.TCPSite(runner, "127.0.0.1", port).start()
        runners.append(runner)
        return f"127.0.0.1:{port}"

    yield start
    for runner in runners:
        await runner.cleanup()


def new() -> web.Response:
    return web.json_response({"nodeId": "n1", "raftEntryFormat": GROUP_ENTRY_FORMAT})


def old() -> web.Response:
    return web.json_response({"nodeId": "n2", "serving": False})  # a version before group commit


def broken() -> web.Response:
    return web.Response(status=500, text="boom")


def not_json() -> web.Response:
    return web.Response(text="<html>")


async def test_every_node_new_means_groups(servers: Any) -> None:
    apis = [await servers(new), await servers(new)]
    known: dict[str, int] = {}
    async with aiohttp.ClientSession() as session:
        assert await refresh(session, known, apis)
    assert known == dict.fromkeys(apis, GROUP_ENTRY_FORMAT)


async def test_an_older_node_means_one_batch_per_entry(servers: Any) -> None:
    apis = [await servers(new), await servers(old)]
    async with aiohttp.ClientSession() as session:
        assert await entry_format(session, apis[1], timeout=5) == 1
        assert not await refresh(session, {}, apis)
        # Even after it said 2 before: it was replaced by an older version.
        assert not await refresh(session, dict.fromkeys(apis, GROUP_ENTRY_FORMAT), apis)


@pytest.mark.parametrize("other", [broken, not_json])
async def test_a_bad_answer_tells_nothing(servers: Any, other: Any) -> None:
    apis = [await servers(new), await servers(other)]
    async with aiohttp.ClientSession() as session:
        assert await entry_format(session, apis[1], timeout=5) is None
        assert not await refresh(session, {}, apis)  # never heard: format 1
        assert await refresh(session, dict.fromkeys(apis, GROUP_ENTRY_FORMAT), apis)  # keeps what it said last


async def test_a_silent_node_keeps_what_it_said_last() -> None:
    silent = f"127.0.0.1:{free_ports(1)[0]}"  # nothing listens there
    async with aiohttp.ClientSession() as session:
        assert await entry_format(session, silent, timeout=2) is None
        assert not await refresh(session, {}, [silent], timeout=2)
        known = {silent: GROUP_ENTRY_FORMAT}
        assert await refresh(session, known, [silent], timeout=2)
        assert known == {silent: GROUP_ENTRY_FORMAT}
