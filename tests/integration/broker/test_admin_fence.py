"""`PUT /v1/admin/fence` on real broker processes: a fenced slave leaves the sync-state-set while the master
keeps writing, stays fenced across its restart, and rejoins with every message once unfenced; a fenced master
refuses writes; the call needs the group's broker token."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from brokergroup.broker.api import TOKEN_HEADER
from brokergroup.broker.client import MasterFinder, Producer
from brokergroup.controller.client import ControllerClient
from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup
from tests.integration.broker.conftest import SYNC, running_set, same_log
from tests.integration.conftest import eventually

TOKEN = "broker-token"


@pytest.fixture
def fence_set(controller_group: ControllerGroup, tmp_path: Path) -> Iterator[BrokerSet]:
    with running_set(tmp_path, controller_group, [*SYNC, "--set", f"controller.broker_token={TOKEN}"]) as brokers:
        yield brokers


async def fence(
    session: aiohttp.ClientSession, brokers: BrokerSet, index: int, fenced: Any, token: str | None = TOKEN
) -> tuple[int, dict[str, Any]]:
    headers = {TOKEN_HEADER: token} if token is not None else {}
    url = f"http://{brokers.nodes[index].api}/v1/admin/fence"
    async with session.put(url, json={"fenced": fenced}, headers=headers) as r:
        return r.status, await r.json()


async def test_fence_a_slave_then_the_master(controller_group: ControllerGroup, fence_set: BrokerSet) -> None:
    brokers = fence_set
    master = await brokers.master()
    slave = next(i for i in range(3) if i != master)
    async with aiohttp.ClientSession() as session, ControllerClient(controller_group.api_addresses) as controller:
        producer = Producer(MasterFinder(broker_name="bs", controller=controller), session=session, deadline_s=20)

        async def in_sync() -> int:
            return len((await controller.replica_info("bs")).sync_state_set)

        async def full() -> bool:
            return await in_sync() == 3

        await eventually("all replicas in the sync-state-set", full)
        slave_id = (await brokers.status(slave, session) or {})["brokerId"]

        # Bad calls change nothing.
        assert (await fence(session, brokers, slave, True, token=None))[0] == 401
        status, body = await fence(session, brokers, slave, True, token="wrong")
        assert status == 403 and "wrong broker token" in body["remark"]
        status, body = await fence(session, brokers, slave, "yes")
        assert status == 400 and "fenced" in body["remark"]
        assert (await brokers.status(slave, session) or {})["adminFenced"] is False

        status, body = await fence(session, brokers, slave, True)
        assert status == 200 and body["adminFenced"] is True and body["role"] == "slave"

        async def slave_left() -> bool:
            return slave_id not in (await controller.replica_info("bs")).sync_state_set

        await eventually("the fenced slave leaves the sync-state-set", slave_left, timeout=30)
        for i in range(20):
            await producer.send("t", [f"a{i}".encode()])
        async with session.get(f"http://{brokers.nodes[slave].api}/readyz") as r:
            assert r.status == 503

        # The fence is in the data folder: a restart keeps it.
        brokers.kill(slave)
        brokers.start(slave)

        async def restarted_fenced() -> bool:
            s = await brokers.status(slave, session)
            return s is not None and s["adminFenced"] is True and s["role"] == "slave"

        await eventually("the restarted slave is still fenced", restarted_fenced, timeout=30)
        assert await slave_left()

        status, body = await fence(session, brokers, slave, False)
        assert status == 200 and body["adminFenced"] is False
        await eventually("the unfenced slave rejoins the sync-state-set", full, timeout=30)
        await eventually("it caught up", lambda: same_log(brokers, session), timeout=30)

        # A fenced master takes no writes, and says why.
        assert (await fence(session, brokers, master, True))[0] == 200
        put = {"topic": "t", "messages": [{"body": "eA=="}]}
        async with session.post(f"http://{brokers.nodes[master].api}/v1/messages", json=put) as r:
            assert r.status == 503
            answer = await r.json()
        assert answer["status"] == "SERVICE_NOT_AVAILABLE" and "fenced by an administrator" in answer["remark"]
        assert (await fence(session, brokers, master, False))[0] == 200
        await producer.send("t", [b"after"])
