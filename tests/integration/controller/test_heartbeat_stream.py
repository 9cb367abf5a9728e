"""Liveness on the leader: a closed heartbeat stream or an expired heartbeat triggers an election,
and the controller pushes the role change to the surviving brokers."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokergroup.controller import protocol
from brokergroup.controller.client import ControllerClient
from brokergroup.local.controllers import ControllerGroup
from brokergroup.local.ports import free_ports
from tests.integration.conftest import eventually
from tests.integration.controller.scenario import CLUSTER

FAKE_BROKER = Path(__file__).with_name("fake_broker.py")


class Brokers:
    def __init__(self, group: ControllerGroup, tmp: Path) -> None:
        self.group = group
        self.tmp = tmp
        self.procs: dict[int, subprocess.Popen[str]] = {}
        self.ports: dict[int, int] = {}

    def start(self, name: str, broker_id: int, *, timeout_ms: int) -> str:
        if broker_id in self.procs:
            self.kill(broker_id)
        port = free_ports(1)[0]
        self.ports[broker_id] = port
        proc = subprocess.Popen(
            [
                sys.executable,
                str(FAKE_BROKER),
                CLUSTER,
                name,
                str(broker_id),
                str(port),
                str(timeout_ms),
                str(self.notify_file(broker_id)),
                *self.group.api_addresses,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        self.procs[broker_id] = proc
        return f"127.0.0.1:{port}"

    def kill(self, broker_id: int) -> None:
        proc = self.procs[broker_id]
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def notify_file(self, broker_id: int) -> Path:
        return self.tmp / f"notify-{broker_id}.jsonl"

    def notifications(self, broker_id: int) -> list[dict[str, object]]:
        path = self.notify_file(broker_id)
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def stop(self) -> None:
        for broker_id, proc in self.procs.items():
            proc.send_signal(signal.SIGCONT)
            self.kill(broker_id)


@pytest.fixture
def brokers(controller_group: ControllerGroup, tmp_path: Path) -> Iterator[Brokers]:
    b = Brokers(controller_group, tmp_path)
    try:
        yield b
    finally:
        b.stop()


async def setup_set(group: ControllerGroup, brokers: Brokers, name: str, *, timeout_ms: int) -> None:
    async with group.client() as client:
        for broker_id in (1, 2, 3):
            address = brokers.start(name, broker_id, timeout_ms=timeout_ms)
            await client.apply_id(
                protocol.ApplyIdRequest(
                    cluster_name=CLUSTER,
                    broker_name=name,
                    applied_broker_id=broker_id,
                    register_check_code=f"{address};1",
                )
            )
            await client.register(
                protocol.RegisterRequest(
                    cluster_name=CLUSTER, broker_name=name, broker_id=broker_id, broker_address=address
                )
            )

        async def all_alive() -> bool:
            data = await client.sync_state_data([name])
            info = data.replicas_info_table[name]
            return all(r.alive for r in info.in_sync_replicas + info.not_in_sync_replicas)

        await eventually("all three replicas heartbeat", all_alive)
        elected = await client.elect_master(
            protocol.ElectMasterRequest(cluster_name=CLUSTER, broker_name=name, broker_id=1)
        )
        await client.alter_sync_state_set(
            protocol.AlterSyncStateSetRequest(
                broker_name=name,
                master_broker_id=1,
                master_epoch=elected.master_epoch or 0,
                sync_state_set=[1, 2, 3],
                sync_state_set_epoch=elected.sync_state_set_epoch or 0,
            )
        )


async def fed_elections(client: ControllerClient, *, master_epoch: int) -> list[dict[str, Any]]:
    """The ELECT_MASTER events of `master_epoch` in the event feed, once there are any.

    The feed is node-local: the node answering may apply the election a moment after the leader."""

    async def elections() -> list[dict[str, Any]]:
        events = (await client.events(after=0))["events"]
        return [e for e in events if e["type"] == "ELECT_MASTER" and e["masterEpoch"] == master_epoch]

    async def fed() -> bool:
        return bool(await elections())

    await eventually("the election is in the event feed", fed, timeout=10)
    return await elections()


async def test_killed_master_stream_close_triggers_election(
    controller_group: ControllerGroup, brokers: Brokers
) -> None:
    group = controller_group
    await group.leader()
    # a 60 s heartbeat timeout: only the closed stream can explain a quick election
    await setup_set(group, brokers, "set-ws", timeout_ms=60_000)
    async with group.client() as client:
        killed_at = time.monotonic()
        brokers.kill(1)

        async def new_master() -> bool:
            info = await client.replica_info("set-ws")
            return info.master_broker_id in (2, 3)

        took = await eventually("a new master after the master's process died", new_master, timeout=20)
        print(f"SIGKILLed master replaced after {took * 1000:.0f} ms")
        assert time.monotonic() - killed_at < 10, "election came from the heartbeat timeout, not the closed stream"
        info = await client.replica_info("set-ws")
        assert info.master_epoch == 2
        assert info.sync_state_set == [info.master_broker_id]
        # broker 3 reported the higher maxOffset, so the policy picks it
        assert info.master_broker_id == 3

        elect = await fed_elections(client, master_epoch=2)
        assert len(elect) == 1
        assert elect[0]["reason"] == "channel_closed"
        assert elect[0]["unclean"] is False

        async def pushed() -> bool:
            return all(
                any(n["masterEpoch"] == 2 and n["masterBrokerId"] == 3 for n in brokers.notifications(b))
                for b in (2, 3)
            )

        await eventually("surviving brokers get the role-change push", pushed)


async def test_stopped_master_heartbeat_timeout_triggers_election(
    controller_group: ControllerGroup, brokers: Brokers
) -> None:
    group = controller_group
    await group.leader()
    await setup_set(group, brokers, "set-hb", timeout_ms=1500)
    async with group.client() as client:
        brokers.procs[1].send_signal(signal.SIGSTOP)  # the stream stays open; heartbeats stop

        async def new_master() -> bool:
            return (await client.replica_info("set-hb")).master_broker_id in (2, 3)

        took = await eventually("a new master after the master stopped heartbeating", new_master, timeout=20)
        print(f"SIGSTOPped master replaced after {took * 1000:.0f} ms (heartbeat timeout 1500 ms)")

        assert [e["reason"] for e in await fed_elections(client, master_epoch=2)] == ["heartbeat_timeout"]


async def test_no_alive_member_means_no_master_then_first_member_back_wins(
    controller_group: ControllerGroup, brokers: Brokers
) -> None:
    group = controller_group
    await group.leader()
    await setup_set(group, brokers, "set-all", timeout_ms=60_000)
    async with group.client() as client:
        for broker_id in (2, 3, 1):
            brokers.kill(broker_id)

        async def no_master() -> bool:
            info = await client.replica_info("set-all")
            return info.master_broker_id is None

        await eventually("master cleared when nobody in the set is alive", no_master)
        info = await client.replica_info("set-all")
        assert info.sync_state_set == [1, 2, 3]  # kept: only these may become master without unclean election
        # the master's own stream closed last, so broker-triggered elect by broker 2 (restarted) wins
        brokers.start("set-all", 2, timeout_ms=60_000)

        async def elected() -> bool:
            try:
                r = await client.elect_master(
                    protocol.ElectMasterRequest(cluster_name=CLUSTER, broker_name="set-all", broker_id=2)
                )
            except Exception:
                return False
            return r.master_broker_id == 2

        await eventually("restarted in-set broker is elected", elected)
