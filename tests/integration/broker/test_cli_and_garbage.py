"""`brokergroup produce` / `consume` as a user runs them (the binary port by default, the HTTP API with
`--protocol http`), and garbage on the replication port."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys

import aiohttp

from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup
from tests.integration.broker.conftest import sees_in_sync
from tests.integration.broker.history import read_queue
from tests.integration.conftest import eventually


async def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "brokergroup.cli", *args],
        input=stdin, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


async def test_produce_and_consume_commands(controller_group: ControllerGroup, sync_set: BrokerSet) -> None:
    await sync_set.master()
    controllers = ";".join(controller_group.api_addresses)
    common = ["--controller", controllers, "--broker-name", "bs", "--topic", "cli"]
    produced = await cli("produce", *common, "hello", "world")
    assert produced.returncode == 0, produced.stderr
    lines = [json.loads(line) for line in produced.stdout.splitlines()]
    assert [line["status"] for line in lines] == ["PUT_OK", "PUT_OK"]
    assert [line["queueOffset"] for line in lines] == [0, 1]
    piped = await cli("produce", *common, "--protocol", "http", stdin="three\nfour\n")  # the HTTP API
    assert piped.returncode == 0, piped.stderr
    consumed = await cli("consume", *common, "--group", "g", "--commit")
    assert [json.loads(line)["body"] for line in consumed.stdout.splitlines()] == ["hello", "world", "three", "four"]
    again = await cli("consume", *common, "--group", "g", "--protocol", "http")
    assert again.returncode == 0 and again.stdout == ""  # committed: nothing new for this group
    bad = await cli("produce", "--broker-name", "bs", "--topic", "cli", "x")
    assert bad.returncode != 0 and "--controller or --master" in bad.stderr
    bad_topic = await cli("produce", *common[:-1], "bad topic!", "x")
    assert bad_topic.returncode == 1 and "topic" in bad_topic.stderr


async def test_garbage_on_the_replication_port_is_dropped(
    controller_group: ControllerGroup, sync_set: BrokerSet
) -> None:
    master = await sync_set.master()
    async with aiohttp.ClientSession() as session:
        # Sync mode refuses puts below 2 in-sync replicas; the slaves may still be joining the set.
        every = len(sync_set.nodes)
        await eventually("every replica in the sync-state-set", lambda: sees_in_sync(sync_set, master, session, every))
        status = await sync_set.status(master, session)
        assert status is not None
        host, port = str(status["haAddress"]).rsplit(":", 1)
        rng = random.Random(1)
        for size in (1, 16, 17, 100, 5000):
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(bytes(rng.randrange(256) for _ in range(size)))
            await writer.drain()
            closed = await asyncio.wait_for(reader.read(), timeout=10)  # the master drops the connection
            assert closed == b""
            writer.close()
        body = {"topic": "after-garbage", "messages": [{"body": "b2s="}]}
        async with session.post(f"http://{sync_set.nodes[master].api}/v1/messages", json=body) as r:
            assert (await r.json())["status"] == "PUT_OK"
        assert [m["body"] for m in await read_queue(session, sync_set.nodes[master].api, "after-garbage")] == ["b2s="]
