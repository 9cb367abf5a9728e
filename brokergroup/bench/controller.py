"""`brokergroup bench controller`: heartbeat, alter-sync-state-set and elect-master on a local
3-node group, and a raw pysyncobj replicated counter as the baseline, in the same run."""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from brokergroup.bench.stats import machine, summarize
from brokergroup.controller import protocol
from brokergroup.controller.client import ControllerClient
from brokergroup.controller.codes import ControllerError
from brokergroup.local.controllers import ControllerGroup
from brokergroup.local.ports import free_ports

CLUSTER = "bench"
LONG_TIMEOUT_MS = 3_600_000


def add_parser(kinds: Any) -> None:
    p: argparse.ArgumentParser = kinds.add_parser(
        "controller", help="controller ops/s and latency vs a raw pysyncobj counter"
    )
    p.add_argument("--ops", type=int, default=2000, help="operations per measured request type")
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    p.add_argument("--sets", type=int, default=8, help="broker sets for alter/elect (one in flight per set)")
    p.add_argument("--failovers", type=int, default=5, help="kill -9 the leader this many times and time the failover")
    p.add_argument("--out", type=Path, help="also write the JSON here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    for name in ("ops", "concurrency", "sets", "failovers"):
        if getattr(args, name) < 1:
            print(f"brokergroup bench controller: --{name} must be at least 1", file=sys.stderr)
            return 2
    result = asyncio.run(bench(ops=args.ops, concurrency=args.concurrency, sets=args.sets, failovers=args.failovers))
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


async def timed(ops: int, concurrency: int, op: Callable[[int], Awaitable[None]]) -> dict[str, Any]:
    latencies: list[float] = []
    counter = iter(range(ops))

    async def worker() -> None:
        for i in counter:
            started = time.perf_counter()
            await op(i)
            latencies.append(time.perf_counter() - started)

    begin = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return summarize(latencies, time.perf_counter() - begin)


async def prepare_set(client: ControllerClient, name: str) -> None:
    for broker_id in (1, 2, 3):
        addr = f"127.0.0.1:{20000 + broker_id}"
        await client.apply_id(
            protocol.ApplyIdRequest(
                cluster_name=CLUSTER,
                broker_name=name,
                applied_broker_id=broker_id,
                register_check_code=f"{addr};0",
            )
        )
        await client.register(
            protocol.RegisterRequest(cluster_name=CLUSTER, broker_name=name, broker_id=broker_id, broker_address=addr)
        )
        await client.heartbeat(
            protocol.HeartbeatRequest(
                cluster_name=CLUSTER,
                broker_name=name,
                broker_addr=addr,
                broker_id=broker_id,
                heartbeat_timeout_mills=LONG_TIMEOUT_MS,
            )
        )
    await client.elect_master(protocol.ElectMasterRequest(cluster_name=CLUSTER, broker_name=name, broker_id=1))


async def per_set(sets: int, ops: int, body: Callable[[str, int], Awaitable[float | None]]) -> dict[str, Any]:
    latencies: list[float] = []

    async def loop(name: str) -> None:
        for i in range(ops // sets):
            took = await body(name, i)
            if took is not None:
                latencies.append(took)

    begin = time.perf_counter()
    await asyncio.gather(*(loop(f"set-{s}") for s in range(sets)))
    return summarize(latencies, time.perf_counter() - begin)


async def bench_group(*, ops: int, concurrency: int, sets: int, failovers: int) -> dict[str, Any]:
    token = secrets.token_urlsafe(16)
    with tempfile.TemporaryDirectory(prefix="bg-bench-") as tmp:
        group = ControllerGroup(Path(tmp), admin_token=token, extra_args=["--log-level", "WARNING"])
        group.start_all()
        try:
            leader = group.nodes[await group.leader()].api
            async with ControllerClient([leader], token=token) as client:
                for s in range(sets):
                    await prepare_set(client, f"set-{s}")
                hb = protocol.HeartbeatRequest(
                    cluster_name=CLUSTER,
                    broker_name="set-0",
                    broker_addr="127.0.0.1:20001",
                    broker_id=1,
                    heartbeat_timeout_mills=LONG_TIMEOUT_MS,
                )
                heartbeat = await timed(ops, concurrency, lambda _i: client.heartbeat(hb))

                async def alter(name: str, i: int) -> float:
                    info = await client.replica_info(name)
                    target = [1, 2, 3] if i % 2 == 0 else [1]
                    req = protocol.AlterSyncStateSetRequest(
                        broker_name=name,
                        master_broker_id=1,
                        master_epoch=info.master_epoch,
                        sync_state_set=target,
                        sync_state_set_epoch=info.sync_state_set_epoch,
                    )
                    started = time.perf_counter()
                    await client.alter_sync_state_set(req)
                    return time.perf_counter() - started

                alter_result = await per_set(sets, ops, alter)

                async def elect(name: str, _i: int) -> float:
                    info = await client.replica_info(name)
                    master = info.master_broker_id or 1
                    other = 2 if master != 2 else 1
                    if other not in info.sync_state_set:
                        await client.alter_sync_state_set(
                            protocol.AlterSyncStateSetRequest(
                                broker_name=name,
                                master_broker_id=master,
                                master_epoch=info.master_epoch,
                                sync_state_set=sorted({master, other}),
                                sync_state_set_epoch=info.sync_state_set_epoch,
                            )
                        )
                    started = time.perf_counter()
                    await client.elect_master(
                        protocol.ElectMasterRequest(
                            cluster_name=CLUSTER, broker_name=name, broker_id=other, designate_elect=True
                        )
                    )
                    return time.perf_counter() - started

                elect_result = await per_set(sets, max(sets, ops // 2), elect)
            failover = await leader_failovers(group, failovers)
        finally:
            group.stop_all()
    return {
        "heartbeat": heartbeat,
        "alter_sync_state_set": alter_result,
        "elect_master": elect_result,
        "leader_failover": failover,
    }


async def rejoined(group: ControllerGroup, index: int, timeout: float = 30.0) -> None:
    """Wait until a restarted node follows a leader again."""
    deadline = time.monotonic() + timeout
    async with group.client(timeout=2.0) as client:
        while time.monotonic() < deadline:
            try:
                if (await client.status(address=group.nodes[index].api)).get("leaderId"):
                    return
            except ControllerError:
                pass
            await asyncio.sleep(0.05)
    raise TimeoutError(f"node {group.nodes[index].node_id} did not rejoin within {timeout} s")


async def leader_failovers(group: ControllerGroup, trials: int) -> dict[str, Any]:
    """kill -9 the serving leader; time until another node serves; restart the killed node."""
    times: list[float] = []
    for _ in range(trials):
        leader = await group.leader()
        killed_at = time.perf_counter()
        group.kill(leader)
        await group.leader(exclude={leader})
        times.append(time.perf_counter() - killed_at)
        group.start(leader)
        await rejoined(group, leader)
    return summarize(times, sum(times))


def raft_baseline(*, ops: int, concurrency: int) -> dict[str, Any]:
    ports = free_ports(3)
    addrs = [f"127.0.0.1:{p}" for p in ports]
    password = secrets.token_urlsafe(16)
    procs = []
    for i, me in enumerate(addrs):
        others = [a for j, a in enumerate(addrs) if j != i]
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "brokergroup.bench.raft_baseline",
                    me,
                    *others,
                    str(ops),
                    str(concurrency),
                    password,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        )
    lines = []
    try:
        for proc in procs:
            try:
                out, _ = proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
            lines += [line for line in out.splitlines() if line.startswith("{")]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    if not lines:
        return {"error": "the baseline leader printed no result"}
    result: dict[str, Any] = json.loads(lines[0])
    return result


async def bench(*, ops: int, concurrency: int, sets: int, failovers: int) -> dict[str, Any]:
    api = await bench_group(ops=ops, concurrency=concurrency, sets=sets, failovers=failovers)
    baseline = await asyncio.to_thread(raft_baseline, ops=ops, concurrency=concurrency)
    return {
        "benchmark": "controller",
        "machine": machine(),
        "params": {"ops": ops, "concurrency": concurrency, "sets": sets, "failovers": failovers, "nodes": 3},
        "results": api,
        "baseline": {"pysyncobj_replicated_counter": baseline},
        "notes": "heartbeat is node-local (no Raft); alter/elect commit through Raft, one request at a time per "
        "broker set; elect includes role-change pushes to (absent) brokers; leader_failover is kill -9 of the "
        "leader until another node serves (its barrier committed), default pysyncobj timeouts 0.4-1.4 s",
    }
