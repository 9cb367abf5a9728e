"""`brokergroup demo`: the main job.

Until the brokers exist, the demo drives the controller the way brokers will: it starts a
local 3-node controller group, registers three broker replicas through the real API
(next-id, apply-id, register), holds their heartbeat streams, elects a master, grows the
sync-state-set, kill -9s the controller leader, checks that the new leader has the same
state, then drops the master's heartbeat stream and times the automatic failover.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
from rich.console import Console

from brokergroup.controller import protocol
from brokergroup.controller.client import HeartbeatStream
from brokergroup.local.controllers import ControllerGroup

CLUSTER = "demo"
SET = "demo-broker-0"


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("demo", help="the main job: a local failover session, explained")
    p.add_argument("--out", type=Path, default=Path("brokergroup-demo"), help="folder for data, logs and summary")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    console = Console()
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        summary = asyncio.run(demo(args.out, console))
    except (TimeoutError, AssertionError) as exc:
        console.print(f"[bold red]demo failed:[/] {exc}")
        return 1
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    console.print(f"\nsummary written to {args.out / 'summary.json'}; logs and data under {args.out}")
    return 0


class SimulatedBroker:
    """Registration and heartbeats of one replica, as the broker will do them."""

    def __init__(self, broker_id: int, group: ControllerGroup, session: aiohttp.ClientSession) -> None:
        self.broker_id = broker_id
        self.address = f"127.0.0.1:{30910 + broker_id}"
        self.streams = [HeartbeatStream(a, session=session) for a in group.api_addresses]

    def heartbeat(self) -> protocol.HeartbeatRequest:
        return protocol.HeartbeatRequest(
            cluster_name=CLUSTER,
            broker_name=SET,
            broker_addr=self.address,
            broker_id=self.broker_id,
            epoch=1,
            max_offset=1000 * self.broker_id,
        )

    async def beat(self) -> None:
        for stream in self.streams:
            try:
                await stream.send(self.heartbeat())
            except (aiohttp.ClientError, OSError):
                continue  # that controller is down; the others count

    async def close(self) -> None:
        for stream in self.streams:
            await stream.close()


async def wait_for(what: str, predicate: Any, timeout: float = 30.0) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if await predicate():
            return time.monotonic() - started
        await asyncio.sleep(0.02)
    raise TimeoutError(f"{what}: not within {timeout} s")


async def demo(out: Path, console: Console) -> dict[str, Any]:
    group = ControllerGroup(out / "controllers", extra_args=["--log-level", "INFO"])
    timeline: list[dict[str, Any]] = []
    t0 = time.monotonic()

    def step(text: str, **data: Any) -> None:
        timeline.append({"t": round(time.monotonic() - t0, 3), "what": text, **data})
        console.print(f"[cyan]{time.monotonic() - t0:7.3f}s[/] {text}")

    console.rule("brokergroup demo: controller failover session")
    group.start_all()
    try:
        leader = await group.leader()
        step(f"3 controllers up; leader is {group.nodes[leader].node_id}", leader=group.nodes[leader].node_id)
        async with aiohttp.ClientSession() as session, group.client() as client:
            brokers = [SimulatedBroker(i, group, session) for i in (1, 2, 3)]
            for b in brokers:
                nxt = await client.next_id(protocol.NextIdRequest(cluster_name=CLUSTER, broker_name=SET))
                await client.apply_id(
                    protocol.ApplyIdRequest(
                        cluster_name=CLUSTER,
                        broker_name=SET,
                        applied_broker_id=nxt.next_broker_id,
                        register_check_code=f"{b.address};{int(time.time() * 1000)}",
                    )
                )
                b.broker_id = nxt.next_broker_id
                await client.register(
                    protocol.RegisterRequest(
                        cluster_name=CLUSTER, broker_name=SET, broker_id=b.broker_id, broker_address=b.address
                    )
                )
                await b.beat()
            step("registered 3 replicas with next-id / apply-id / register; heartbeat streams open to every node")
            elected = await client.elect_master(
                protocol.ElectMasterRequest(cluster_name=CLUSTER, broker_name=SET, broker_id=1)
            )
            step(
                f"first election: broker {elected.master_broker_id} is master, masterEpoch {elected.master_epoch}",
                masterEpoch=elected.master_epoch,
            )
            altered = await client.alter_sync_state_set(
                protocol.AlterSyncStateSetRequest(
                    broker_name=SET,
                    master_broker_id=1,
                    master_epoch=elected.master_epoch or 0,
                    sync_state_set=[1, 2, 3],
                    sync_state_set_epoch=elected.sync_state_set_epoch or 0,
                )
            )
            step(f"alter-sync-state-set: {altered.sync_state_set}, syncStateSetEpoch {altered.sync_state_set_epoch}")
            before = (await client.replica_info(SET)).wire()

            beating = asyncio.create_task(keep_beating(brokers))
            killed = group.nodes[leader].node_id
            kill_at = time.monotonic()
            group.kill(leader)
            step(f"kill -9 controller leader {killed}")
            new_leader = await group.leader(exclude={leader})
            took = time.monotonic() - kill_at
            step(
                f"new controller leader {group.nodes[new_leader].node_id} serving after {took:.2f} s",
                leaderFailoverSeconds=round(took, 3),
            )
            after = (await client.replica_info(SET)).wire()
            assert before == after, f"state changed across leader failover: {before} != {after}"
            step("replica info identical on the new leader: state intact")

            master = brokers[0]
            brokers.remove(master)
            drop_at = time.monotonic()
            await master.close()
            step(f"broker {master.broker_id} (the master) drops its heartbeat streams, as a killed process would")

            async def switched() -> bool:
                info = await client.replica_info(SET)
                return info.master_broker_id not in (None, master.broker_id)

            await wait_for("automatic failover", switched, timeout=20)
            info = await client.replica_info(SET)
            took = time.monotonic() - drop_at
            step(
                f"automatic election: broker {info.master_broker_id} is master, masterEpoch {info.master_epoch}, "
                f"syncStateSet {info.sync_state_set}, {took * 1000:.0f} ms after the stream closed",
                brokerFailoverSeconds=round(took, 3),
            )
            beating.cancel()
            for b in brokers:
                await b.close()
            events = await client.events(after=0)
            console.rule("controller event log (raft events)")
            for e in events["events"]:
                console.print(
                    f"  #{e['index']:<4} {e['type']:<22} set={e['brokerName']} master={e['masterBrokerId']} "
                    f"masterEpoch={e['masterEpoch']} sss={e['syncStateSet']} reason={e['reason']}"
                )
    finally:
        group.stop_all()
    return {"timeline": timeline, "eventLogs": str(out / "controllers")}


async def keep_beating(brokers: list[SimulatedBroker]) -> None:
    while True:
        for b in brokers:
            await b.beat()
        await asyncio.sleep(1.0)
