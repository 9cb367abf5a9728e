"""`brokergroup bench controller`: heartbeat, alter-sync-state-set and elect-master on a local
3-node group, and a raw pysyncobj replicated counter as the baseline, in the same run.

After the run every node's applied Raft state is compared (`GET /v1/raft/state-digest`, once all
report the same last applied index); a difference fails the bench. The controller logs are
searched for pysyncobj's "truncating already-applied log entries" warning (divergence warnings).
`--baseline-tree DIR` adds an A/B of alter-sync-state-set commits, alternating rounds between
controllers run from another source tree (e.g. a `git worktree` of the commit before a change)
and this one, with the CPU time of the three controller processes per operation."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from brokergroup.bench.stats import machine, summarize
from brokergroup.controller import protocol
from brokergroup.controller.agreement import Agreement, wait_for_agreement
from brokergroup.controller.client import ControllerClient
from brokergroup.controller.codes import ControllerError
from brokergroup.local.controllers import ControllerGroup
from brokergroup.local.ports import free_ports

CLUSTER = "bench"
LONG_TIMEOUT_MS = 3_600_000
DIVERGENCE = "truncating already-applied log entries"


def add_parser(kinds: Any) -> None:
    p: argparse.ArgumentParser = kinds.add_parser(
        "controller", help="controller ops/s and latency vs a raw pysyncobj counter"
    )
    p.add_argument("--ops", type=int, default=2000, help="operations per measured request type")
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    p.add_argument("--sets", type=int, default=8, help="broker sets for alter/elect (one in flight per set)")
    p.add_argument("--failovers", type=int, default=5, help="kill -9 the leader this many times and time the failover")
    p.add_argument(
        "--baseline-tree",
        type=Path,
        help="also A/B alter-sync-state-set commits against controllers run from this source tree",
    )
    p.add_argument("--rounds", type=int, default=3, help="A/B rounds per side with --baseline-tree")
    p.add_argument("--out", type=Path, help="also write the JSON here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    for name in ("ops", "concurrency", "sets", "failovers", "rounds"):
        if getattr(args, name) < 1:
            print(f"brokergroup bench controller: --{name} must be at least 1", file=sys.stderr)
            return 2
    tree = args.baseline_tree
    if tree is not None and not (tree / "brokergroup" / "cli.py").is_file():
        print(f"brokergroup bench controller: --baseline-tree {tree}: no brokergroup/cli.py there", file=sys.stderr)
        return 2
    result = asyncio.run(
        bench(
            ops=args.ops,
            concurrency=args.concurrency,
            sets=args.sets,
            failovers=args.failovers,
            baseline_tree=tree,
            rounds=args.rounds,
        )
    )
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    problems = [f"{where}: {a['problem']}" for where, a in agreements(result) if not a["agreed"]]
    if problems:
        print("brokergroup bench controller: the controllers' Raft states differ:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    return 0


def agreements(result: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found = [("main run", result["results"]["agreement"])]
    for i, r in enumerate(result.get("ab", {}).get("rounds", [])):
        found.append((f"A/B round {i} ({r['side']})", r["agreement"]))
    return found


class TreeControllerGroup(ControllerGroup):
    """Controllers run from another source tree (`PYTHONPATH` holds only its `brokergroup` package)."""

    def __init__(self, base_dir: Path, tree: Path, **kwargs: Any) -> None:
        super().__init__(base_dir, **kwargs)
        self.path_dir = base_dir / "pythonpath"
        self.path_dir.mkdir(parents=True, exist_ok=True)
        link = self.path_dir / "brokergroup"
        if not link.exists():
            link.symlink_to((tree / "brokergroup").resolve())

    def start(self, index: int) -> None:
        node = self.nodes[index]
        env = {"BG_CONTROLLER_RAFT__PASSWORD": self.password, "PYTHONPATH": str(self.path_dir), "PYTHONSAFEPATH": "1"}
        if self.admin_token:
            env["BG_CONTROLLER_API__ADMIN_TOKEN"] = self.admin_token
        node.spawn(self.command(node), env)


def cpu_seconds(group: ControllerGroup) -> float:
    """User + system CPU of the group's running controller processes so far."""
    total = 0
    for node in group.nodes:
        if node.proc is None or node.proc.poll() is not None:
            continue
        fields = Path(f"/proc/{node.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / os.sysconf("SC_CLK_TCK")


def divergence_warnings(group: ControllerGroup) -> int:
    count = 0
    for node in group.nodes:
        if node.log_path.exists():
            count += node.log_path.read_text(errors="replace").count(DIVERGENCE)
    return count


async def agreement(group: ControllerGroup, client: ControllerClient) -> Agreement:
    return await wait_for_agreement(client, group.api_addresses, timeout=60)


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

                cpu_before = cpu_seconds(group)
                alter_result = await per_set(sets, ops, alter)
                alter_result["cpu_ms_per_op"] = cpu_per_op(cpu_seconds(group) - cpu_before, alter_result)

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
            async with group.client(timeout=5.0) as client:
                agreed = await agreement(group, client)
            warnings = divergence_warnings(group)
        finally:
            group.stop_all()
    return {
        "heartbeat": heartbeat,
        "alter_sync_state_set": alter_result,
        "elect_master": elect_result,
        "leader_failover": failover,
        "agreement": agreed.to_dict(),
        "divergence_warnings": warnings,
    }


def cpu_per_op(cpu_s: float, result: dict[str, Any]) -> float:
    return round(cpu_s * 1000 / max(1, int(result.get("ops", 0))), 3)


async def post(client: ControllerClient, path: str, req: protocol.Message) -> dict[str, Any]:
    """A request without the fields left at their defaults, which an older controller may not know."""
    result: dict[str, Any] = await client.call(
        "POST", path, body=req.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    )
    return result


async def prepare_set(client: ControllerClient, name: str) -> None:
    """Three registered brokers and a master for `name`, in requests an older controller also takes
    (the A/B baseline tree), so both sides of a comparison are set up the same way."""
    for broker_id in (1, 2, 3):
        addr = f"127.0.0.1:{20000 + broker_id}"
        check = f"{addr};0"
        await post(
            client,
            "/v1/broker/apply-id",
            protocol.ApplyIdRequest(
                cluster_name=CLUSTER, broker_name=name, applied_broker_id=broker_id, register_check_code=check
            ),
        )
        await post(
            client,
            "/v1/broker/register",
            protocol.RegisterRequest(cluster_name=CLUSTER, broker_name=name, broker_id=broker_id, broker_address=addr),
        )
        await post(
            client,
            "/v1/broker/heartbeat",
            protocol.HeartbeatRequest(
                cluster_name=CLUSTER,
                broker_name=name,
                broker_addr=addr,
                broker_id=broker_id,
                heartbeat_timeout_mills=LONG_TIMEOUT_MS,
            ),
        )
    await post(
        client, "/v1/elect-master", protocol.ElectMasterRequest(cluster_name=CLUSTER, broker_name=name, broker_id=1)
    )


async def alter_round(*, tree: Path | None, ops: int, sets: int) -> dict[str, Any]:
    """One A/B side: a fresh group (from `tree`, or this code), `ops` alter-sync-state-set commits."""
    token = secrets.token_urlsafe(16)
    with tempfile.TemporaryDirectory(prefix="bg-bench-ab-") as tmp:
        args: dict[str, Any] = {"admin_token": token, "extra_args": ["--log-level", "WARNING"]}
        group = TreeControllerGroup(Path(tmp), tree, **args) if tree else ControllerGroup(Path(tmp), **args)
        group.start_all()
        try:
            leader = group.nodes[await group.leader()].api
            async with ControllerClient([leader], token=token) as client:
                for s in range(sets):
                    await prepare_set(client, f"set-{s}")

                async def alter(name: str, i: int) -> float:
                    info = await client.call("GET", "/v1/replica-info", params={"brokerName": name})
                    req = protocol.AlterSyncStateSetRequest(
                        broker_name=name,
                        master_broker_id=1,
                        master_epoch=info["masterEpoch"],
                        sync_state_set=[1, 2, 3] if i % 2 == 0 else [1],
                        sync_state_set_epoch=info["syncStateSetEpoch"],
                    )
                    started = time.perf_counter()
                    await post(client, "/v1/alter-sync-state-set", req)
                    return time.perf_counter() - started

                cpu_before = cpu_seconds(group)
                result = await per_set(sets, ops, alter)
                result["cpu_ms_per_op"] = cpu_per_op(cpu_seconds(group) - cpu_before, result)
            async with group.client(timeout=5.0) as client:
                result["agreement"] = (await agreement(group, client)).to_dict()
            result["divergence_warnings"] = divergence_warnings(group)
        finally:
            group.stop_all()
    result["side"] = "baseline" if tree else "current"
    return result


async def ab_rounds(*, tree: Path, ops: int, sets: int, rounds: int) -> dict[str, Any]:
    """Alternate baseline and current rounds, so drift in the machine's load hits both sides alike."""
    done: list[dict[str, Any]] = []
    for _ in range(rounds):
        for side in (tree, None):
            done.append(await alter_round(tree=side, ops=ops, sets=sets))

    def median(side: str, key: str) -> float:
        return round(statistics.median(float(r[key]) for r in done if r["side"] == side), 3)

    base, cur = median("baseline", "ops_per_s"), median("current", "ops_per_s")
    return {
        "baseline_tree": str(tree),
        "rounds": done,
        "ops_per_s_median": {"baseline": base, "current": cur},
        "cpu_ms_per_op_median": {
            "baseline": median("baseline", "cpu_ms_per_op"),
            "current": median("current", "cpu_ms_per_op"),
        },
        "p50_ms_median": {"baseline": median("baseline", "p50_ms"), "current": median("current", "p50_ms")},
        "current_over_baseline": round(cur / base, 3) if base else None,
        "divergence_warnings": {
            side: sum(r["divergence_warnings"] for r in done if r["side"] == side) for side in ("baseline", "current")
        },
    }


def fdatasync_latency_ms(samples: int = 200) -> dict[str, Any]:
    """This machine's cost of a 4 KiB write + fdatasync in the temporary directory (the bench's disk)."""
    took: list[float] = []
    with tempfile.NamedTemporaryFile(prefix="bg-fdatasync-") as f:
        block = b"x" * 4096
        for i in range(samples):
            started = time.perf_counter()
            os.pwrite(f.fileno(), block, i * 4096)
            os.fdatasync(f.fileno())
            took.append(time.perf_counter() - started)
    took.sort()
    return {
        "p50_ms": round(took[len(took) // 2] * 1000, 3),
        "p99_ms": round(took[int(len(took) * 0.99)] * 1000, 3),
        "dir": tempfile.gettempdir(),
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


async def bench(
    *,
    ops: int,
    concurrency: int,
    sets: int,
    failovers: int,
    baseline_tree: Path | None = None,
    rounds: int = 3,
) -> dict[str, Any]:
    api = await bench_group(ops=ops, concurrency=concurrency, sets=sets, failovers=failovers)
    baseline = await asyncio.to_thread(raft_baseline, ops=ops, concurrency=concurrency)
    extra: dict[str, Any] = {}
    if baseline_tree is not None:
        extra["ab"] = await ab_rounds(tree=baseline_tree, ops=ops, sets=sets, rounds=rounds)
    return {
        "benchmark": "controller",
        "machine": {**machine(), "fdatasync_4k": fdatasync_latency_ms()},
        "params": {"ops": ops, "concurrency": concurrency, "sets": sets, "failovers": failovers, "nodes": 3},
        "results": api,
        **extra,
        "baseline": {"pysyncobj_replicated_counter": baseline},
        "notes": "heartbeat is node-local (no Raft); alter/elect commit through Raft, one request at a time per "
        "broker set; elect includes role-change pushes to (absent) brokers; leader_failover is kill -9 of the "
        "leader until another node serves (its barrier committed), default pysyncobj timeouts 0.4-1.4 s",
    }
