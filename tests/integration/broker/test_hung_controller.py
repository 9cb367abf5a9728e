"""One hung controller (SIGSTOP) must not silence the brokers (issue 22, item 3).

Brokers heartbeat every controller node from one task per node, each send bounded by a timeout
under the heartbeat interval, and every client call to the controllers is hedged across nodes.
So with one controller follower stopped for longer than the heartbeat timeout, no master loses
its role and no put is refused; with the leader stopped, the remaining two elect a new leader
that has heard every broker all along, so no master loses its role (puts may pause while the
write lease waits for the new leader).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

import aiohttp

from brokergroup.controller.client import ControllerClient
from brokergroup.controller.codes import ControllerError
from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup
from tests.integration.broker.conftest import sees_in_sync
from tests.integration.conftest import eventually

STOPPED_S = 12.0
"""Longer than the heartbeat timeout of the `fast` profile (5 s) plus the stream's ping timeout."""
PUT_EVERY_S = 0.5


@dataclass
class Puts:
    statuses: list[str] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    acked_at: list[float] = field(default_factory=list)

    def refused(self) -> list[str]:
        return [s for s in self.statuses if s != "PUT_OK"]

    def longest_gap_s(self, since: float) -> float:
        times = [since, *(t for t in self.acked_at if t >= since), time.monotonic()]
        return max(b - a for a, b in itertools.pairwise(times))


async def put_every(session: aiohttp.ClientSession, brokers: BrokerSet, master: int, puts: Puts, stop: asyncio.Event):
    """A put to the master every PUT_EVERY_S, each recorded with its status and latency."""
    body = {"topic": "hung", "messages": [{"body": base64.b64encode(b"x").decode()}]}
    while not stop.is_set():
        started = time.monotonic()
        try:
            async with session.post(
                f"http://{brokers.nodes[master].api}/v1/messages", json=body, timeout=aiohttp.ClientTimeout(total=5)
            ) as r:
                status = str((await r.json())["status"])
        except (aiohttp.ClientError, TimeoutError) as exc:
            status = f"UNREACHABLE {exc!r}"
        puts.statuses.append(status)
        puts.latencies_ms.append((time.monotonic() - started) * 1000)
        if status == "PUT_OK":
            puts.acked_at.append(time.monotonic())
        await asyncio.sleep(max(0.0, PUT_EVERY_S - (time.monotonic() - started)))


async def master_view(group: ControllerGroup, healthy: int) -> tuple[int | None, int] | None:
    """(master broker id, master epoch) as the controllers answer through a node that is not stopped;
    None while they have no leader to answer (the stopped node was the leader)."""
    async with ControllerClient([group.nodes[healthy].api], timeout=5.0) as client:
        try:
            info = await client.replica_info("bs")
        except ControllerError:
            return None
    return info.master_broker_id, info.master_epoch


async def stop_one_controller(
    group: ControllerGroup, brokers: BrokerSet, victim: int, healthy: int
) -> tuple[Puts, float]:
    """SIGSTOP controller `victim` for STOPPED_S while putting; assert the master and its epoch held.
    Returns the puts and the longest time without an ack from the stop on."""
    master = await brokers.master()
    before = await master_view(group, healthy)
    assert before is not None and before[0] is not None
    puts, stop = Puts(), asyncio.Event()
    async with aiohttp.ClientSession() as session:
        await eventually("all 3 replicas are in sync", lambda: sees_in_sync(brokers, master, session, 3), timeout=30)
        task = asyncio.create_task(put_every(session, brokers, master, puts, stop))
        await eventually("puts are acknowledged before the stop", lambda: _acked(puts), timeout=20)
        group.signal(victim, signal.SIGSTOP)
        stopped_at = time.monotonic()
        try:
            while time.monotonic() - stopped_at < STOPPED_S:
                assert await master_view(group, healthy) in (before, None), "a master lost its role"
                await asyncio.sleep(0.5)
        finally:
            group.signal(victim, signal.SIGCONT)
        gap = puts.longest_gap_s(stopped_at)
        await eventually("puts are acknowledged after the resume", lambda: _acked(puts), timeout=30)
        stop.set()
        await task
    await eventually("the controllers answer again", lambda: _answers(group, healthy), timeout=30)
    assert await master_view(group, healthy) == before, "a master lost its role"
    ok = [lat for lat, s in zip(puts.latencies_ms, puts.statuses, strict=True) if s == "PUT_OK"]
    print(
        f"controller {victim} stopped {STOPPED_S} s: {len(puts.statuses)} puts, {len(puts.refused())} refused, "
        f"longest gap without an ack {gap:.2f} s, put latency max {max(ok):.0f} ms, "
        f"median {sorted(ok)[len(ok) // 2]:.0f} ms"
    )
    return puts, gap


async def _answers(group: ControllerGroup, healthy: int) -> bool:
    return await master_view(group, healthy) is not None


async def _acked(puts: Puts) -> bool:
    return bool(puts.acked_at) and time.monotonic() - puts.acked_at[-1] < 2 * PUT_EVERY_S + 1


async def test_a_stopped_controller_follower_refuses_no_put(controller_group: ControllerGroup, sync_set: BrokerSet):
    leader = await controller_group.leader()
    follower = (leader + 1) % 3
    puts, gap = await stop_one_controller(controller_group, sync_set, victim=follower, healthy=leader)
    assert puts.refused() == [], f"puts refused while one controller follower was stopped: {puts.refused()}"
    assert gap < 5 * PUT_EVERY_S, f"{gap:.1f} s without an acknowledged put"


async def test_a_stopped_controller_leader_costs_no_master_its_role(
    controller_group: ControllerGroup, sync_set: BrokerSet
):
    leader = await controller_group.leader()
    other = (leader + 1) % 3
    puts, _gap = await stop_one_controller(controller_group, sync_set, victim=leader, healthy=other)
    assert "PUT_OK" in puts.statuses


async def test_produce_keeps_its_deadline_with_the_first_controller_stopped(
    controller_group: ControllerGroup, sync_set: BrokerSet
):
    await sync_set.master()
    leader = await controller_group.leader()
    victim = (leader + 1) % 3
    order = [controller_group.nodes[victim].api, *(n.api for i, n in enumerate(controller_group.nodes) if i != victim)]
    command = [
        sys.executable,
        "-m",
        "brokergroup.cli",
        "produce",
        "--controller",
        ";".join(order),
        "--broker-name",
        "bs",
        "--topic",
        "deadline",
        "--deadline",
        "2",
        "m1",
        "m2",
        "m3",
    ]

    async def produce() -> tuple[float, subprocess.CompletedProcess[str]]:
        started = time.monotonic()
        done = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=120)
        return time.monotonic() - started, done

    healthy_took, done = await produce()  # Python's start-up and three puts, every controller answering
    assert done.returncode == 0, done.stderr
    controller_group.signal(victim, signal.SIGSTOP)
    try:
        took, done = await produce()
    finally:
        controller_group.signal(victim, signal.SIGCONT)
    print(
        f"brokergroup produce of 3 messages, --deadline 2: {took:.2f} s with the first controller stopped, "
        f"{healthy_took:.2f} s with all answering"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count('"status": "PUT_OK"') == 3, done.stdout
    assert took < healthy_took + 2, f"produce took {took:.1f} s with --deadline 2 ({healthy_took:.1f} s when healthy)"
