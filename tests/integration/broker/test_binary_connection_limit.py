"""`binary.max_connections`: one connection beyond the limit is refused with an ERROR naming the limit,
counted in `brokergroup_broker_binary_rejected_total{reason="too_many_connections"}`, and closed; the
admitted ones go on, and a place freed is taken again."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from brokergroup.broker.binary_client import BinaryConnection
from brokergroup.broker.protocol import client_frames as cf
from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup
from tests.integration.broker.conftest import running_set
from tests.integration.broker.test_binary_port import binary_address, rejected
from tests.integration.conftest import eventually

pytestmark = pytest.mark.integration


@pytest.fixture
def limited_set(controller_group: ControllerGroup, tmp_path: Path) -> Iterator[BrokerSet]:
    with running_set(tmp_path, controller_group, ["--set", "binary.max_connections=2"]) as brokers:
        yield brokers


async def open_connections(session: aiohttp.ClientSession, api: str) -> float:
    async with session.get(f"http://{api}/metrics") as r:
        text = await r.text()
    found = re.search(r"^brokergroup_broker_binary_connections ([0-9.e+]+)$", text, re.M)
    assert found, "brokergroup_broker_binary_connections is not exported"
    return float(found.group(1))


async def test_a_connection_beyond_the_limit_is_refused_with_a_reason_and_counted(limited_set: BrokerSet) -> None:
    master = await limited_set.master()
    api = limited_set.nodes[master].api
    consume = cf.Consume(topic="limit", offset=0)
    async with aiohttp.ClientSession() as session:
        address = ":".join(map(str, await binary_address(limited_set, master, session)))
        first, second = await BinaryConnection.open(address), await BinaryConnection.open(address)
        for conn in (first, second):
            assert isinstance(await conn.request(consume, timeout=30), cf.Messages)

        third = await BinaryConnection.open(address)  # TCP accepts it; the broker answers and closes
        with pytest.raises(ConnectionError) as refused:
            await third.request(consume, timeout=30)
        assert "SERVICE_NOT_AVAILABLE (503): too many connections: 2 open, binary.max_connections=2" in str(
            refused.value
        ), refused.value
        assert (await rejected(session, api)).get("too_many_connections") == 1
        assert await open_connections(session, api) == 2

        assert isinstance(await first.request(consume, timeout=30), cf.Messages)  # the admitted go on
        second.close()

        async def freed() -> bool:
            return await open_connections(session, api) == 1

        await eventually("the closed connection is counted out", freed, timeout=30)
        fourth = await BinaryConnection.open(address)
        assert isinstance(await fourth.request(consume, timeout=30), cf.Messages)
        assert (await rejected(session, api)).get("too_many_connections") == 1
        for conn in (first, third, fourth):
            conn.close()
