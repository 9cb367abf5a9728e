"""`brokergroup bench controller`: heartbeat, replica-info, alter-sync-state-set and elect-master on
a local 3-node group, and a raw pysyncobj replicated counter as the baseline, in the same run.

alter-sync-state-set is measured alone, as a broker sends it: with the epochs of the previous
answer (one replica-info read per set before the measurement, and again only after a refusal);
replica-info is measured alone; `replica_info_then_alter` is the op of earlier runs (a read before
every write), kept to compare with them.

After the run every node's applied Raft state is compared (`GET /v1/raft/state-digest`, once all
report the same last applied index); a difference fails the bench. The controller logs are
searched for pysyncobj's "truncating already-applied log entries" warning (divergence warnings).
`--baseline-tree DIR` adds an A/B of alter-sync-state-set commits, alternating rounds between
controllers run from another source tree (e.g. a `git worktree` of the commit before a change)
and this one, with the CPU time of the three controller processes per operation."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

from brokergroup.bench import cpu
from brokergroup.bench.stats import machine, summarize
from brokergroup.common import eventloop
from brokergroup.controller import protocol
from brokergroup.controller.agreement import Agreement, wait_for_agreement
from brokergroup.controller.client import ControllerClient, ControllerUnavailable
from brokergroup.controller.codes import ControllerError, ResponseCode
from brokergroup.local.controllers import ControllerGroup
from brokergroup.local.ports import free_ports

CLUSTER = "bench"
PREPARE_CONCURRENCY = 32
"""Sets registered at once before a measurement (not measured)."""
LONG_TIMEOUT_MS = 3_600_000
DIVERGENCE = "truncating already-applied log entries"
STARTUP_TIMEOUT_S = 180.0
"""How long a fresh group may take to serve: on a loaded machine the imports alone take tens of seconds."""


def add_parser(kinds: Any) -> None:
    p: argparse.ArgumentParser = kinds.add_parser(
        "controller", help="controller ops/s and latency vs a raw pysyncobj counter"
    )
    p.add_argument("--ops", type=int, default=2000, help="operations per measured request type")
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    p.add_argument(
        "--sets",
        type=set_counts,
        default=[8],
        help="broker set counts, ','-separated (e.g. 8,100,500,2000): a fresh group per count; "
        "alter/elect keep --concurrency sets busy, one request in flight per set",
    )
    p.add_argument("--ab-sets", type=int, help="broker sets of the A/B rounds (default: the first --sets)")
    p.add_argument("--failovers", type=int, default=5, help="kill -9 the leader this many times and time the failover")
    p.add_argument(
        "--baseline-tree",
        type=Path,
        help="also A/B alter-sync-state-set commits against controllers run from this source tree",
    )
    p.add_argument("--rounds", type=int, default=3, help="A/B rounds per side with --baseline-tree")
    p.add_argument(
        "--counter-rounds",
        type=int,
        default=0,
        help="also alternate this many rounds of alter-sync-state-set (a fresh group, --ab-sets sets) with "
        "rounds of the raw pysyncobj counter, and give the median of the per-round ratios",
    )
    p.add_argument(
        "--heartbeat-load-s",
        type=float,
        default=0.0,
        help="also run every broker (3 per set) heartbeating every node at the default 1 s interval for this "
        "many seconds, from one load-generator process, and time a master failover by lost heartbeats",
    )
    p.add_argument(
        "--heartbeat-streams",
        type=int,
        default=256,
        help="heartbeat streams per node the load generator's brokers share",
    )
    p.add_argument(
        "--snapshot-only",
        action="store_true",
        help="measure only the Raft snapshot's pause of the tick thread at each --sets count (no controllers)",
    )
    p.add_argument("--out", type=Path, help="also write the JSON here")
    p.set_defaults(func=run)


def set_counts(text: str) -> list[int]:
    """`--sets`: one count or a ','-separated list of counts, each at least 1."""
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a ','-separated list of whole numbers") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every set count must be at least 1")
    return counts


def run(args: argparse.Namespace) -> int:
    sets = args.sets if isinstance(args.sets, list) else [args.sets]
    ab_sets = getattr(args, "ab_sets", None) or sets[0]
    for name, value in (
        ("ops", args.ops),
        ("concurrency", args.concurrency),
        ("sets", min(sets)),
        ("failovers", args.failovers),
        ("rounds", args.rounds),
        ("ab-sets", ab_sets),
    ):
        if value < 1:
            print(f"brokergroup bench controller: --{name} must be at least 1", file=sys.stderr)
            return 2
    if getattr(args, "counter_rounds", 0) < 0:
        print("brokergroup bench controller: --counter-rounds must be at least 0", file=sys.stderr)
        return 2
    tree = args.baseline_tree
    if tree is not None and not (tree / "brokergroup" / "cli.py").is_file():
        print(f"brokergroup bench controller: --baseline-tree {tree}: no brokergroup/cli.py there", file=sys.stderr)
        return 2
    if getattr(args, "snapshot_only", False):
        snap = {"machine": machine(), "snapshot": [{"sets": n, **snapshot_pause(n)} for n in sets]}
        text = json.dumps(snap, indent=2)
        print(text)
        if args.out:
            args.out.write_text(text + "\n")
        return 0
    result = eventloop.run(  # the load generator on the loop brokers run (uvloop): less of the machine's CPU
        bench(
            ops=args.ops,
            concurrency=args.concurrency,
            sets=sets,
            failovers=args.failovers,
            baseline_tree=tree,
            rounds=args.rounds,
            ab_sets=ab_sets,
            counter_rounds=getattr(args, "counter_rounds", 0),
            heartbeat_load_s=getattr(args, "heartbeat_load_s", 0.0),
            heartbeat_streams=getattr(args, "heartbeat_streams", 256),
        )
    )
    text = json.dumps(result, indent=2)
    print(text)
    if "by_sets" in result:
        print()
        print(table(result))
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
    runs = result.get("by_sets") or [result["results"]]
    found = [(f"run with {r['sets']} sets" if "sets" in r else "main run", r["agreement"]) for r in runs]
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


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU of a running process so far (0 once it is gone), to the nanosecond."""
    return cpu.process_cpu_seconds(pid) or 0.0


def cpu_seconds(group: ControllerGroup) -> float:
    """User + system CPU of the group's running controller processes so far."""
    return sum(
        process_cpu_seconds(node.proc.pid) for node in group.nodes if node.proc is not None and node.proc.poll() is None
    )


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


async def owned_sets(
    names: list[str], concurrency: int, ops: int, body: Callable[[str, int], Awaitable[float | None]]
) -> dict[str, Any]:
    """`ops` requests over the sets `names`, by `min(concurrency, len(names))` workers that each own
    every so-many-th set in turn: one request in flight per set, the same number in flight whatever
    the number of sets. `body(name, n)` gets the set's own count of earlier requests."""
    workers = min(concurrency, len(names))
    latencies: list[float] = []
    done = dict.fromkeys(names, 0)

    async def loop(worker: int) -> None:
        owned = names[worker::workers]
        for i in range(ops // workers):
            name = owned[i % len(owned)]
            took = await body(name, done[name])
            done[name] += 1
            if took is not None:
                latencies.append(took)

    begin = time.perf_counter()
    await asyncio.gather(*(loop(w) for w in range(workers)))
    return summarize(latencies, time.perf_counter() - begin)


def patient(body: Callable[[str, int], Awaitable[float | None]]) -> Callable[[str, int], Awaitable[float | None]]:
    """`body` again (its read included) while no leader serves: on a loaded machine the leader may
    change mid-run; the latency counted is that of the attempt that succeeded."""

    async def run(name: str, i: int) -> float | None:
        for attempt in range(60):
            try:
                return await body(name, i)
            except ControllerError as exc:
                unavailable = isinstance(exc, ControllerUnavailable) or exc.code == ResponseCode.CONTROLLER_NOT_LEADER
                if not unavailable or attempt == 59:
                    raise
                await asyncio.sleep(0.5)
        return None

    return run


async def prepare_sets(client: ControllerClient, names: list[str], concurrency: int) -> None:
    """`prepare_set` for every name, `concurrency` sets at a time."""

    async def loop(owned: list[str]) -> None:
        for name in owned:
            await prepare_set(client, name)

    await asyncio.gather(*(loop(names[w::concurrency]) for w in range(concurrency)))


def set_names(sets: int) -> list[str]:
    return [f"set-{s}" for s in range(sets)]


async def bench_group(
    *, ops: int, concurrency: int, sets: int, failovers: int, heartbeat_load_s: float = 0, heartbeat_streams: int = 256
) -> dict[str, Any]:
    """One fresh group with `sets` broker sets: heartbeats, alter-sync-state-set, elect-master, leader
    failovers; CPU per operation of the three controllers; the states compared at the end."""
    token = secrets.token_urlsafe(16)
    names = set_names(sets)
    with tempfile.TemporaryDirectory(prefix="bg-bench-") as tmp:
        group = ControllerGroup(Path(tmp), admin_token=token, extra_args=["--log-level", "WARNING"])
        group.start_all()
        try:
            leader = group.nodes[await group.leader(timeout=STARTUP_TIMEOUT_S)].api
            addresses = [leader, *(a for a in group.api_addresses if a != leader)]
            async with ControllerClient(addresses, token=token, timeout=30.0, hedge_after=30.0) as client:
                begin = time.perf_counter()
                await heartbeat_everywhere(client, group.api_addresses, names)
                await prepare_sets(client, names, max(concurrency, PREPARE_CONCURRENCY))
                prepared_s = time.perf_counter() - begin
                beats = [
                    protocol.HeartbeatRequest(
                        cluster_name=CLUSTER,
                        broker_name=name,
                        broker_addr=f"127.0.0.1:{20000 + broker_id}",
                        broker_id=broker_id,
                        heartbeat_timeout_mills=LONG_TIMEOUT_MS,
                    )
                    for name in names
                    for broker_id in (1, 2, 3)
                ]
                cpu_before = cpu_seconds(group)
                heartbeat = await timed(ops, concurrency, lambda i: client.heartbeat(beats[i % len(beats)]))
                heartbeat["cpu_ms_per_op"] = cpu_per_op(cpu_seconds(group) - cpu_before, heartbeat)

                async def read(name: str, _i: int) -> float:
                    started = time.perf_counter()
                    await client.replica_info(name)
                    return time.perf_counter() - started

                cpu_before = cpu_seconds(group)
                read_result = await owned_sets(names, concurrency, ops, patient(read))
                read_result["cpu_ms_per_op"] = cpu_per_op(cpu_seconds(group) - cpu_before, read_result)

                writer = EpochWriter(client)
                await writer.learn(names[: min(len(names), ops)])
                cpu_before = cpu_seconds(group)
                alter_result = await owned_sets(names, concurrency, ops, patient(writer.alter))
                alter_result["cpu_ms_per_op"] = cpu_per_op(cpu_seconds(group) - cpu_before, alter_result)
                alter_result["refusals"] = writer.refusals

                async def read_then_alter(name: str, _i: int) -> float:
                    started = time.perf_counter()
                    info = await client.replica_info(name)
                    target = [1] if len(info.sync_state_set) > 1 else [1, 2, 3]
                    req = protocol.AlterSyncStateSetRequest(
                        broker_name=name,
                        master_broker_id=1,
                        master_epoch=info.master_epoch,
                        sync_state_set=target,
                        sync_state_set_epoch=info.sync_state_set_epoch,
                    )
                    await client.alter_sync_state_set(req)
                    return time.perf_counter() - started

                cpu_before = cpu_seconds(group)
                both_result = await owned_sets(names, concurrency, ops, patient(read_then_alter))
                both_result["cpu_ms_per_op"] = cpu_per_op(cpu_seconds(group) - cpu_before, both_result)

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

                cpu_before = cpu_seconds(group)
                elect_result = await owned_sets(
                    names, concurrency, max(min(sets, concurrency), ops // 2), patient(elect)
                )
                elect_result["cpu_ms_per_op"] = cpu_per_op(cpu_seconds(group) - cpu_before, elect_result)
                extra: dict[str, Any] = {}
                if heartbeat_load_s > 0:
                    extra["heartbeat_load"] = await heartbeat_load_phase(
                        group, client, names, duration_s=heartbeat_load_s, streams=heartbeat_streams, token=token
                    )
            failover = await leader_failovers(group, failovers)
            async with group.client(timeout=5.0) as client:
                agreed = await agreement(group, client)
            warnings = divergence_warnings(group)
        finally:
            group.stop_all()
    return {
        "sets": sets,
        "prepare_s": round(prepared_s, 3),
        "heartbeat": heartbeat,
        "replica_info": read_result,
        "alter_sync_state_set": alter_result,
        "replica_info_then_alter": both_result,
        "elect_master": elect_result,
        "leader_failover": failover,
        **extra,
        "snapshot": await asyncio.to_thread(snapshot_pause, sets),
        "agreement": agreed.to_dict(),
        "divergence_warnings": warnings,
    }


HEARTBEAT_INTERVAL_MS = 1000
"""A broker's default heartbeat interval (`controller.heartbeat_interval_ms`)."""
HEARTBEAT_TIMEOUT_MS = 10_000
"""A broker's default heartbeat timeout (`controller.heartbeat_timeout_ms`), sent in each heartbeat."""
SCAN_INTERVAL_MS = 5000
"""The controller's default heartbeat-expiry scan period (`scan_not_active_broker_interval`)."""


async def scrape(addresses: list[str]) -> dict[str, dict[str, float]]:
    """Per node: `brokergroup_controller_heartbeats_total` and the expiry scan's lateness histogram."""
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[str, dict[str, float]] = {}
    async with aiohttp.ClientSession() as session:
        for address in addresses:
            async with session.get(f"http://{address}/metrics") as response:
                text = await response.text()
            values: dict[str, float] = {}
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    if sample.name == "brokergroup_controller_heartbeats_total":
                        values["heartbeats"] = sample.value
                    if sample.name == "brokergroup_controller_scan_lateness_seconds_bucket" and (
                        sample.labels.get("scan") == "expiry"
                    ):
                        values[f"le:{sample.labels['le']}"] = sample.value
            found[address] = values
    return found


def lateness_quantiles(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """p50, p99 and max of the expiry scan's lateness between two scrapes, as bucket upper bounds (ms)."""
    bounds = sorted((float(k[3:]), k) for k in after if k.startswith("le:") and k != "le:+Inf")
    total = after.get("le:+Inf", 0) - before.get("le:+Inf", 0)
    if total <= 0:
        return {"scans": 0}

    def upper(q: float) -> str:
        for bound, key in bounds:
            if after[key] - before.get(key, 0) >= q * total:
                return f"<= {bound * 1000:g}"
        return f"> {bounds[-1][0] * 1000:g}"

    return {"scans": int(total), "p50_ms": upper(0.5), "p99_ms": upper(0.99), "max_ms": upper(1.0)}


async def heartbeat_load_phase(
    group: ControllerGroup, client: ControllerClient, names: list[str], *, duration_s: float, streams: int, token: str
) -> dict[str, Any]:
    """Every broker (3 per set) heartbeats every node at the default interval for `duration_s`
    (`brokergroup.bench.heartbeat_load`, one process); a third of the way in, the master of the
    first set stops heartbeating (its stream stays open: a hung broker) and the time until another
    master is elected is measured. Reports heartbeats/s sent and received against the target, the
    expiry scan's lateness on every node, the controllers' CPU, and that failover."""
    name = names[0]
    info = await client.replica_info(name)
    master = info.master_broker_id or 1
    if len(info.sync_state_set) < 3 or info.master_broker_id is None:  # a failover needs eligible replicas
        await settle_post(
            client,
            "/v1/alter-sync-state-set",
            protocol.AlterSyncStateSetRequest(
                broker_name=name,
                master_broker_id=master,
                master_epoch=info.master_epoch,
                sync_state_set=[1, 2, 3],
                sync_state_set_epoch=info.sync_state_set_epoch,
            ),
        )
    stop_after_s = duration_s / 3
    config = {
        "addresses": group.api_addresses,
        "names": names,
        "cluster": CLUSTER,
        "interval_ms": HEARTBEAT_INTERVAL_MS,
        "timeout_ms": HEARTBEAT_TIMEOUT_MS,
        "duration_s": duration_s,
        "connections": streams,
        "token": token,
        "stop_broker": [name, master],
        "stop_after_s": stop_after_s,
        "farewell_timeout_ms": LONG_TIMEOUT_MS,
    }
    before = await scrape(group.api_addresses)
    cpu_before, started = cpu_seconds(group), time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "brokergroup.bench.heartbeat_load",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    communicate = asyncio.ensure_future(proc.communicate(json.dumps(config).encode()))
    await asyncio.sleep(stop_after_s)
    elected_at = None
    while not communicate.done():
        try:
            now = await client.replica_info(name)
        except (ControllerError, ControllerUnavailable):
            now = None
        if now is not None and now.master_broker_id not in (None, master):
            elected_at = time.monotonic()
            break
        await asyncio.sleep(0.05)
    out, err = await communicate
    took = time.monotonic() - started
    cpu = cpu_seconds(group) - cpu_before
    after = await scrape(group.api_addresses)
    if proc.returncode != 0:
        raise RuntimeError(f"heartbeat load generator failed: {err.decode()[-2000:]}")
    load = json.loads(out.decode().splitlines()[-1])
    received = sum(after[a].get("heartbeats", 0) - before[a].get("heartbeats", 0) for a in after)
    last_sent = load.get("stopped_last_sent_monotonic")
    return {
        "generator": load,
        "received": int(received),
        "received_per_s": round(received / load["seconds"], 1),
        "target_per_s": load["target_per_s"],
        "controllers_cpu_s": round(cpu, 3),
        "controllers_cpu_cores": round(cpu / took, 3),
        "cpu_ms_per_heartbeat": round(cpu * 1000 / max(1, received), 4),
        "expiry_scan_lateness": {a: lateness_quantiles(before[a], after[a]) for a in after},
        "failover": {
            "stopped": [name, master],
            "from_last_heartbeat_s": round(elected_at - last_sent, 3) if elected_at and last_sent else None,
            "bound_s": (HEARTBEAT_TIMEOUT_MS + SCAN_INTERVAL_MS) / 1000,
        },
    }


class EpochWriter:
    """alter-sync-state-set as a broker sends it (broker/role.py `_report`): with the master and
    sync-state-set epochs of the previous answer, no read before the write. The epochs are read once
    per set before a measurement (`learn`), and again after a refusal, then the write is sent again."""

    def __init__(self, client: ControllerClient, *, address: str | None = None) -> None:
        self.client = client
        self.address = address
        self.epochs: dict[str, tuple[int, int, tuple[int, ...]]] = {}
        """Set -> (masterEpoch, syncStateSetEpoch, syncStateSet) as the controller last answered."""
        self.refusals = 0

    async def read(self, name: str) -> None:
        info = await self.client.call("GET", "/v1/replica-info", params={"brokerName": name}, address=self.address)
        self.epochs[name] = (int(info["masterEpoch"]), int(info["syncStateSetEpoch"]), tuple(info["syncStateSet"]))

    async def learn(self, names: list[str]) -> None:
        """One read of every set in `names`, PREPARE_CONCURRENCY at a time (not measured)."""

        async def loop(owned: list[str]) -> None:
            for name in owned:
                await self.read(name)

        await asyncio.gather(*(loop(names[w::PREPARE_CONCURRENCY]) for w in range(PREPARE_CONCURRENCY)))

    async def alter(self, name: str, _i: int) -> float:
        """Shrink a full set to the master, or grow it back to all three: always a change."""
        started = time.perf_counter()
        for attempt in range(3):
            if name not in self.epochs:
                await self.read(name)
            master_epoch, sync_epoch, members = self.epochs[name]
            req = protocol.AlterSyncStateSetRequest(
                broker_name=name,
                master_broker_id=1,
                master_epoch=master_epoch,
                sync_state_set=[1] if len(members) > 1 else [1, 2, 3],
                sync_state_set_epoch=sync_epoch,
            )
            try:
                answer = await post(self.client, "/v1/alter-sync-state-set", req, address=self.address)
            except ControllerError as exc:
                unavailable = isinstance(exc, ControllerUnavailable) or exc.code == ResponseCode.CONTROLLER_NOT_LEADER
                if unavailable or attempt == 2:
                    self.epochs.pop(name, None)  # the outcome is unknown: read before the next write
                    raise
                self.refusals += 1
                await self.read(name)
                continue
            self.epochs[name] = (master_epoch, int(answer["syncStateSetEpoch"]), tuple(answer["syncStateSet"]))
            break
        return time.perf_counter() - started


def snapshot_pause(sets: int, *, rounds: int = 5) -> dict[str, Any]:
    """What a Raft snapshot of a state with `sets` broker sets (3 brokers each) costs pysyncobj's tick
    thread, measured on the code the controller runs, fsync included.

    A thread stands in for the tick thread: it ticks every millisecond (sleep 1 ms, poll the
    serializer) and starts a snapshot at its 20th tick, through pysyncobj's own `Serializer` with
    `Snapshots.serialize` (everything on the tick thread: the controller before issue 19's
    background snapshots) or through `raft_fixes.BackgroundSerializer` (the copy on the tick thread,
    the rest in a thread), alternately. The stall is the longest gap between two ticks while the
    snapshot is taken, less the 1 ms sleep; `idle_gap_ms` is the same without a snapshot (noise)."""
    import pysyncobj.serializer

    from brokergroup.controller import model, raft_fixes
    from brokergroup.controller.replicated import Snapshots, StateMachine

    machine = StateMachine(lambda _applied: None)
    for name in set_names(sets):
        machine._state.replica_info[name] = model.BrokerReplicaInfo(
            cluster_name=CLUSTER,
            broker_name=name,
            next_assign_broker_id=4,
            broker_id_info={b: (f"127.0.0.1:{20000 + b}", f"127.0.0.1:{20000 + b};0") for b in (1, 2, 3)},
        )
        machine._state.sync_state_info[name] = model.SyncStateInfo(
            CLUSTER, name, master_epoch=7, sync_state_set_epoch=9, sync_state_set={1, 2, 3}, master_broker_id=1
        )
        machine._set_versions[name] = 12
    snapshots = Snapshots(machine, journal=None)  # type: ignore[arg-type]
    data: tuple[Any, ...] = (None, (b"", 2, 1), (b"", 1, 1), [])

    def tick_loop(serializer: Any) -> dict[str, float]:
        """Tick until the snapshot started at the 20th tick is reported done, then 20 ticks more."""
        ticks: list[float] = []
        started_at = finished_at = call_s = 0.0
        done_tick: int | None = None
        i = 0
        while done_tick is None or i < done_tick + 20:
            time.sleep(0.001)
            ticks.append(time.perf_counter())
            if serializer is not None and i == 20:
                started_at = time.perf_counter()
                serializer.serialize(data, 1)
                call_s = time.perf_counter() - started_at
            if serializer is not None and i >= 20 and done_tick is None:
                status, _ = serializer.checkSerializing()
                if status == pysyncobj.serializer.SERIALIZER_STATE.FAILED:
                    raise RuntimeError("the snapshot failed")
                if status == pysyncobj.serializer.SERIALIZER_STATE.SUCCESS:
                    done_tick, finished_at = i, time.perf_counter()
            if serializer is None and i == 60:
                done_tick = i
            i += 1
        gaps = [b - a for a, b in itertools.pairwise(ticks[19:])]
        return {
            "stall_ms": max(0.0, max(gaps) - 0.001) * 1000,
            "call_ms": call_s * 1000,
            "done_ms": (finished_at - started_at) * 1000,
        }

    def on_a_thread(serializer: Any) -> dict[str, float]:
        out: list[dict[str, float]] = []
        thread = threading.Thread(target=lambda: out.append(tick_loop(serializer)), name="tick")
        thread.start()
        thread.join()
        if not out:
            raise RuntimeError("the tick loop failed")
        return out[0]

    with tempfile.TemporaryDirectory(prefix="bg-bench-snap-") as tmp:
        target = str(Path(tmp) / "snapshot")
        runs: dict[str, list[dict[str, float]]] = {"idle": [], "tick_thread": [], "background": []}
        locked = []
        for _ in range(rounds):
            started = time.perf_counter()
            machine.capture()  # the part that holds the state lock now: the copy
            locked.append(time.perf_counter() - started)
            runs["idle"].append(on_a_thread(None))
            plain = pysyncobj.serializer.Serializer(target, 1000, False, snapshots.serialize, None, None)
            runs["tick_thread"].append(on_a_thread(plain))
            runs["background"].append(on_a_thread(raft_fixes.BackgroundSerializer(target, 1000, snapshots, None)))
        size = Path(target).stat().st_size

    def median(mode: str, key: str) -> float:
        return round(statistics.median(r[key] for r in runs[mode]), 3)

    return {
        "serialize_ms": median("tick_thread", "call_ms"),
        "state_lock_ms": round(statistics.median(locked) * 1000, 3),
        "bytes": size,
        "rounds": rounds,
        "idle_gap_ms": median("idle", "stall_ms"),
        "tick_stall_ms": {
            "tick_thread": median("tick_thread", "stall_ms"),
            "background": median("background", "stall_ms"),
        },
        "tick_stall_max_ms": {
            "tick_thread": round(max(r["stall_ms"] for r in runs["tick_thread"]), 3),
            "background": round(max(r["stall_ms"] for r in runs["background"]), 3),
        },
        "start_call_ms": median("background", "call_ms"),
        "background_done_ms": median("background", "done_ms"),
    }


def cpu_per_op(cpu_s: float, result: dict[str, Any]) -> float:
    return round(cpu_s * 1000 / max(1, int(result.get("ops", 0))), 3)


async def post(
    client: ControllerClient, path: str, req: protocol.Message, *, address: str | None = None
) -> dict[str, Any]:
    """A request without the fields left at their defaults, which an older controller may not know."""
    result: dict[str, Any] = await client.call(
        "POST", path, body=req.model_dump(mode="json", by_alias=True, exclude_defaults=True), address=address
    )
    return result


async def heartbeat_everywhere(client: ControllerClient, addresses: list[str], names: list[str]) -> None:
    """One heartbeat of every broker of `names` to every node, as brokers do, before the sets are set
    up: liveness is node-local, so a leader elected while the bench runs (a loaded machine) knows
    the brokers too, and its inactive-master scan finds every master alive."""
    beats = [(address, name, broker_id) for address in addresses for name in names for broker_id in (1, 2, 3)]

    async def loop(share: list[tuple[str, str, int]]) -> None:
        for address, name, broker_id in share:
            req = protocol.HeartbeatRequest(
                cluster_name=CLUSTER,
                broker_name=name,
                broker_addr=f"127.0.0.1:{20000 + broker_id}",
                broker_id=broker_id,
                heartbeat_timeout_mills=LONG_TIMEOUT_MS,
            )
            await settle_post(client, "/v1/broker/heartbeat", req, address=address)

    await asyncio.gather(*(loop(beats[w::PREPARE_CONCURRENCY]) for w in range(PREPARE_CONCURRENCY)))


async def settle_post(
    client: ControllerClient, path: str, req: protocol.Message, *, attempts: int = 120, address: str | None = None
) -> None:
    """`post` for the set-up before a measurement: retried while no leader serves (a loaded machine may
    change leaders); an elect-master retried after an unknown outcome may find its master in place."""
    for attempt in range(attempts):
        try:
            await post(client, path, req, address=address)
            return
        except ControllerError as exc:
            if attempt and exc.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST:
                return
            unavailable = isinstance(exc, ControllerUnavailable) or exc.code == ResponseCode.CONTROLLER_NOT_LEADER
            if not unavailable or attempt == attempts - 1:
                raise
            await asyncio.sleep(0.5)


async def prepare_set(client: ControllerClient, name: str) -> None:
    """Three registered brokers and a master for `name`, in requests an older controller also takes
    (the A/B baseline tree), so both sides of a comparison are set up the same way."""
    for broker_id in (1, 2, 3):
        addr = f"127.0.0.1:{20000 + broker_id}"
        check = f"{addr};0"
        await settle_post(
            client,
            "/v1/broker/apply-id",
            protocol.ApplyIdRequest(
                cluster_name=CLUSTER, broker_name=name, applied_broker_id=broker_id, register_check_code=check
            ),
        )
        await settle_post(
            client,
            "/v1/broker/register",
            protocol.RegisterRequest(cluster_name=CLUSTER, broker_name=name, broker_id=broker_id, broker_address=addr),
        )
        await settle_post(
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
    await settle_post(
        client, "/v1/elect-master", protocol.ElectMasterRequest(cluster_name=CLUSTER, broker_name=name, broker_id=1)
    )


async def alter_round(*, tree: Path | None, ops: int, sets: int, concurrency: int) -> dict[str, Any]:
    """One A/B side: a fresh group (from `tree`, or this code), `ops` alter-sync-state-set commits, each
    with the epochs of the previous answer (`EpochWriter`), no read before it."""
    token = secrets.token_urlsafe(16)
    with tempfile.TemporaryDirectory(prefix="bg-bench-ab-") as tmp:
        args: dict[str, Any] = {"admin_token": token, "extra_args": ["--log-level", "WARNING"]}
        group = TreeControllerGroup(Path(tmp), tree, **args) if tree else ControllerGroup(Path(tmp), **args)
        group.start_all()
        try:
            leader = group.nodes[await group.leader(timeout=STARTUP_TIMEOUT_S)].api
            async with ControllerClient([leader], token=token) as client:
                await heartbeat_everywhere(client, group.api_addresses, set_names(sets))
                await prepare_sets(client, set_names(sets), max(concurrency, PREPARE_CONCURRENCY))

                writer = EpochWriter(client)
                await writer.learn(set_names(sets)[:ops])

                cpu_before = cpu_seconds(group)
                result = await owned_sets(set_names(sets), concurrency, ops, writer.alter)
                result["cpu_ms_per_op"] = cpu_per_op(cpu_seconds(group) - cpu_before, result)
                result["refusals"] = writer.refusals
            async with group.client(timeout=5.0) as client:
                result["agreement"] = (await agreement(group, client)).to_dict()
            result["divergence_warnings"] = divergence_warnings(group)
        finally:
            group.stop_all()
    result["side"] = "baseline" if tree else "current"
    return result


async def ab_rounds(*, tree: Path, ops: int, sets: int, rounds: int, concurrency: int) -> dict[str, Any]:
    """Alternate baseline and current rounds, so drift in the machine's load hits both sides alike."""
    done: list[dict[str, Any]] = []
    for _ in range(rounds):
        for side in (tree, None):
            done.append(await alter_round(tree=side, ops=ops, sets=sets, concurrency=concurrency))

    def median(side: str, key: str) -> float:
        return round(statistics.median(float(r[key]) for r in done if r["side"] == side), 3)

    base, cur = median("baseline", "ops_per_s"), median("current", "ops_per_s")
    return {
        "baseline_tree": str(tree),
        "sets": sets,
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


async def versus_counter(*, ops: int, sets: int, rounds: int, concurrency: int) -> dict[str, Any]:
    """The goal's ratio, measured so that the machine's drift hits both sides alike: rounds of
    alter-sync-state-set commits (a fresh group of this code, `alter_round`) alternated with rounds
    of the raw pysyncobj counter, the order swapped every round (A B, B A, ...)."""
    done: list[dict[str, Any]] = []
    for index in range(rounds):
        pair: dict[str, Any] = {}
        if index % 2:
            pair["counter"] = await asyncio.to_thread(raft_baseline, ops=ops, concurrency=concurrency)
        pair["alter"] = await alter_round(tree=None, ops=ops, sets=sets, concurrency=concurrency)
        if "counter" not in pair:
            pair["counter"] = await asyncio.to_thread(raft_baseline, ops=ops, concurrency=concurrency)
        counter_rate = float(pair["counter"].get("ops_per_s") or 0.0)
        pair["alter_over_counter"] = round(pair["alter"]["ops_per_s"] / counter_rate, 3) if counter_rate else None
        pair["cpu_alter_over_counter"] = (
            round(pair["alter"]["cpu_ms_per_op"] / pair["counter"]["cpu_ms_per_op"], 3)
            if pair["counter"].get("cpu_ms_per_op")
            else None
        )
        done.append(pair)
    ratios = [r["alter_over_counter"] for r in done if r["alter_over_counter"] is not None]
    return {
        "sets": sets,
        "rounds": done,
        "alter_over_counter_median": round(statistics.median(ratios), 3) if ratios else None,
        "alter_over_counter_range": [min(ratios), max(ratios)] if ratios else None,
        "divergence_warnings": sum(r["alter"]["divergence_warnings"] for r in done),
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


async def rejoined(group: ControllerGroup, index: int, timeout: float = STARTUP_TIMEOUT_S) -> None:
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
        leader = await group.leader(timeout=STARTUP_TIMEOUT_S)
        killed_at = time.perf_counter()
        group.kill(leader)
        await group.leader(exclude={leader}, timeout=STARTUP_TIMEOUT_S)
        times.append(time.perf_counter() - killed_at)
        group.start(leader)
        await rejoined(group, leader)
    return summarize(times, sum(times))


def raft_baseline(*, ops: int, concurrency: int, durable: bool = False) -> dict[str, Any]:
    """The raw pysyncobj counter (`brokergroup.bench.raft_baseline`), with the CPU of its three
    processes from the leader's "start" line to its result, per operation. `durable`: each process
    keeps its Raft log in the controller's durable journal (fsync per entry) in a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="bg-raft-baseline-") as tmp:
        dirs = [str(Path(tmp) / f"n{i}") for i in range(3)] if durable else None
        return _raft_baseline(ops=ops, concurrency=concurrency, dirs=dirs)


def _raft_baseline(*, ops: int, concurrency: int, dirs: list[str] | None) -> dict[str, Any]:
    ports = free_ports(3)
    addrs = [f"127.0.0.1:{p}" for p in ports]
    password = secrets.token_urlsafe(16)
    procs: list[subprocess.Popen[str]] = []
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
                    *([dirs[i]] if dirs else []),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        )
    lock = threading.Lock()
    cpu: dict[str, float] = {}
    results: list[dict[str, Any]] = []

    def total_cpu() -> float:
        return sum(process_cpu_seconds(proc.pid) for proc in procs)

    def read(proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if not line.startswith("{"):
                continue
            message = json.loads(line)
            with lock:
                if message.get("phase") == "start":
                    cpu.setdefault("start", total_cpu())
                else:
                    cpu.setdefault("end", total_cpu())
                    results.append(message)

    readers = [threading.Thread(target=read, args=(proc,), daemon=True) for proc in procs]
    for reader in readers:
        reader.start()
    try:
        for proc in procs:
            try:
                proc.wait(timeout=180)
            except subprocess.TimeoutExpired:
                proc.kill()
        for reader in readers:
            reader.join(timeout=10)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
    if not results:
        return {"error": "the baseline leader printed no result"}
    result = results[0]
    if "start" in cpu and "end" in cpu:
        result["cpu_ms_per_op"] = cpu_per_op(cpu["end"] - cpu["start"], result)
    return result


async def bench(
    *,
    ops: int,
    concurrency: int,
    sets: int | list[int],
    failovers: int,
    baseline_tree: Path | None = None,
    rounds: int = 3,
    ab_sets: int | None = None,
    counter_rounds: int = 0,
    heartbeat_load_s: float = 0.0,
    heartbeat_streams: int = 256,
) -> dict[str, Any]:
    counts = sets if isinstance(sets, list) else [sets]
    runs = []
    for count in counts:
        runs.append(
            await bench_group(
                ops=ops,
                concurrency=concurrency,
                sets=count,
                failovers=failovers,
                heartbeat_load_s=heartbeat_load_s,
                heartbeat_streams=heartbeat_streams,
            )
        )
        print(json.dumps({"partial": runs[-1]}), file=sys.stderr, flush=True)  # a long run's results so far
    baseline = await asyncio.to_thread(raft_baseline, ops=ops, concurrency=concurrency)
    durable_baseline = await asyncio.to_thread(raft_baseline, ops=ops, concurrency=concurrency, durable=True)
    extra: dict[str, Any] = {}
    if baseline_tree is not None:
        extra["ab"] = await ab_rounds(
            tree=baseline_tree, ops=ops, sets=ab_sets or counts[0], rounds=rounds, concurrency=concurrency
        )
    if counter_rounds > 0:
        extra["versus_counter"] = await versus_counter(
            ops=ops, sets=ab_sets or counts[0], rounds=counter_rounds, concurrency=concurrency
        )
    return {
        "benchmark": "controller",
        "machine": {**machine(), "fdatasync_4k": fdatasync_latency_ms(), "loadavg": os.getloadavg()},
        "params": {"ops": ops, "concurrency": concurrency, "sets": counts, "failovers": failovers, "nodes": 3},
        "results": runs[0],
        "by_sets": runs,
        **extra,
        "baseline": {
            "pysyncobj_replicated_counter": baseline,
            "pysyncobj_replicated_counter_durable_journal": durable_baseline,
        },
        "notes": "heartbeat and replica_info are node-local reads (no Raft); alter/elect commit through Raft, "
        "one request at a time per broker set, --concurrency sets busy at once whatever the number of sets; "
        "alter_sync_state_set sends the epochs of the previous answer (as a broker does), "
        "replica_info_then_alter reads before every write (the op of runs before 2026-11-26's group commit), "
        "elect reads first and includes role-change pushes to (absent) brokers; leader_failover is kill -9 of "
        "the leader until another node serves (its barrier committed), default pysyncobj timeouts 0.4-1.4 s; "
        "cpu_ms_per_op is user + system CPU of the three controller (or baseline) processes per operation; "
        "snapshot: a Raft snapshot of a state with that many sets in the bench process, on pysyncobj's tick "
        "thread as before issue 19 (tick_thread) or copied there and written by a thread (background, what "
        "the controller does): tick_stall_ms is the longest pause of a 1 ms tick loop while it is taken",
    }


def table(result: dict[str, Any]) -> str:
    """The runs as a Markdown table: per set count and operation, beside the raw pysyncobj counter."""
    rows = ["| sets | operation | ops | ops/s | p50 ms | p99 ms | CPU ms/op |", "|---|---|---|---|---|---|---|"]

    def row(sets: Any, name: str, r: dict[str, Any]) -> None:
        cells = [r.get(k, "—") for k in ("ops", "ops_per_s", "p50_ms", "p99_ms", "cpu_ms_per_op")]
        rows.append(f"| {sets} | {name} | " + " | ".join(str(c) for c in cells) + " |")

    for run in result.get("by_sets") or [result["results"]]:
        sets = run.get("sets", "")
        row(sets, "heartbeat", run["heartbeat"])
        if "replica_info" in run:
            row(sets, "replica-info (read alone)", run["replica_info"])
        row(sets, "alter-sync-state-set (write alone, epochs of the last answer)", run["alter_sync_state_set"])
        if "replica_info_then_alter" in run:
            row(sets, "replica-info then alter (read before every write)", run["replica_info_then_alter"])
        row(sets, "elect-master", run["elect_master"])
        row(sets, "leader failover (kill -9)", run["leader_failover"])
        if "snapshot" in run:
            snap = run["snapshot"]
            stall = snap.get("tick_stall_ms", {})
            rows.append(
                f"| {sets} | Raft snapshot, {snap['bytes']} bytes: tick thread stalled "
                f"{stall.get('tick_thread', snap['serialize_ms'])} ms on it, {stall.get('background', '—')} ms "
                f"written in the background (done in {snap.get('background_done_ms', '—')} ms); "
                f"state lock {snap['state_lock_ms']} ms | | | | | |"
            )
    row("—", "**baseline**: raw pysyncobj counter", result["baseline"]["pysyncobj_replicated_counter"])
    if "pysyncobj_replicated_counter_durable_journal" in result["baseline"]:
        row(
            "—",
            "**baseline**: the same counter, log in the controller's durable journal (fsync per entry)",
            result["baseline"]["pysyncobj_replicated_counter_durable_journal"],
        )
    ab = result.get("ab")
    if ab:
        rows.append(
            f"\nA/B ({ab.get('sets')} sets, medians of {len(ab['rounds']) // 2} rounds each): ops/s "
            f"{ab['ops_per_s_median']}, CPU ms/op {ab['cpu_ms_per_op_median']}, current/baseline "
            f"{ab['current_over_baseline']}"
        )
    versus = result.get("versus_counter")
    if versus:
        rows.append(
            f"\nalter-sync-state-set against the raw counter ({versus['sets']} sets, {len(versus['rounds'])} "
            "alternated rounds): "
            + ", ".join(
                f"{r['alter']['ops_per_s']} / {r['counter'].get('ops_per_s')} ops/s = {r['alter_over_counter']}x"
                for r in versus["rounds"]
            )
            + f"; median {versus['alter_over_counter_median']}x"
        )
    return "\n".join(rows)
