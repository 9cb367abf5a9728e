"""Consumer-group offsets travel through the commit log: they survive a master failover
consistently with the messages (DESIGN §4, RocketMQ #4771), and `admin get-broker-epoch` shows
every replica's epochs."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import aiohttp

from brokergroup.broker.client import Consumer, MasterFinder, Producer
from brokergroup.controller.client import ControllerClient
from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup
from tests.integration.conftest import eventually


async def test_committed_offset_survives_master_failover(
    controller_group: ControllerGroup, sync_set: BrokerSet
) -> None:
    old = await sync_set.master()
    async with aiohttp.ClientSession() as session, ControllerClient(controller_group.api_addresses) as controller:

        async def full_set() -> bool:
            return len((await controller.replica_info("bs")).sync_state_set) == 3

        await eventually("all replicas in the sync-state-set", full_set)
        finder = MasterFinder(broker_name="bs", controller=controller)
        producer = Producer(finder, session=session)
        for i in range(40):
            await producer.send("orders", [f"o{i}".encode()])
        consumer = Consumer(finder, group="billing", session=session)
        first = await consumer.poll("orders", max_count=25)
        assert [m.seq for m in first] == list(range(25))
        await consumer.commit("orders")

        sync_set.kill(old)
        await sync_set.master(exclude={old})
        resumed = Consumer(MasterFinder(broker_name="bs", controller=controller), group="billing", session=session)
        assert await resumed.committed("orders") == 25
        rest = await resumed.poll("orders", max_count=100)
        assert [m.seq for m in rest] == list(range(25, 40))


async def test_admin_get_broker_epoch_lists_every_replica(
    controller_group: ControllerGroup, sync_set: BrokerSet
) -> None:
    master = await sync_set.master()
    async with aiohttp.ClientSession() as session:
        master_id = (await sync_set.status(master, session) or {})["brokerId"]
    async with ControllerClient(controller_group.api_addresses) as controller:

        async def all_registered() -> bool:
            data = await controller.sync_state_data(["bs"])
            info = data.replicas_info_table.get("bs")
            return info is not None and len(info.in_sync_replicas + info.not_in_sync_replicas) == 3

        # The command lists the replicas the controller knows; a slave may still be registering.
        await eventually("all three replicas registered", all_registered)
    result = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-m",
            "brokergroup.cli",
            "admin",
            "get-broker-epoch",
            "-a",
            ";".join(controller_group.api_addresses),
            "-b",
            "bs",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    epochs = json.loads(result.stdout)
    assert sorted(epochs) == ["bs/1", "bs/2", "bs/3"]
    assert epochs[f"bs/{master_id}"]["epochs"][-1]["epoch"] == 1
    assert all("epochs" in body for body in epochs.values())
