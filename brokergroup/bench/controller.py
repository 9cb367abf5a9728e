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
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from brokergroup.bench.stats import machine, summarize
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
    tree = args.baseline_tree
    if tree is not None and not (tree / "brokergroup" / "cli.py").is_file():
        print(f"brokergroup bench controller: --baseline-tree {tree}: no brokergroup/cli.py there", file=sys.stderr)
        return 2
    result = asyncio.run(
        bench(
            ops=args.ops,
            concurrency=args.concurrency,
            sets=sets,
            failovers=args.failovers,
            baseline_tree=tree,
            rounds=args.rounds,
            ab_sets=ab_sets,
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
    """User + system CPU of a running process so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (fields 14, 15)


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


async def bench_group(*, ops: int, concurrency: int, sets: int, failovers: int) -> dict[str, Any]:
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
                alter_result = await owned_sets(names, concurrency, ops, patient(alter))
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

                cpu_before = cpu_seconds(group)
                elect_result = await owned_sets(
                    names, concurrency, max(min(sets, concurrency), ops // 2), patient(elect)
                )
                elect_result["cpu_ms_per_op"] = cpu_per_op(cpu_seconds(group) - cpu_before, elect_result)
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
        "alter_sync_state_set": alter_result,
        "elect_master": elect_result,
        "leader_failover": failover,
        "snapshot": await asyncio.to_thread(snapshot_pause, sets),
        "agreement": agreed.to_dict(),
        "divergence_warnings": warnings,
    }


def snapshot_pause(sets: int) -> dict[str, Any]:
    """What a Raft snapshot of a state with `sets` broker sets (3 brokers each) costs pysyncobj's tick
    thread, measured on the code the controller runs (`Snapshots.serialize`, fsync included): the
    whole call, and the part that holds the state lock (the asyncio side's reads wait that long)."""
    from brokergroup.controller import model
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
    with tempfile.TemporaryDirectory(prefix="bg-bench-snap-") as tmp:
        target = str(Path(tmp) / "snapshot")
        took, locked = [], []
        for _ in range(5):
            with machine.lock:  # what `_serialize` does under the lock: the copy into plain data
                started = time.perf_counter()
                machine._state.to_dict()
                locked.append(time.perf_counter() - started)
            started = time.perf_counter()
            snapshots.serialize(target, ((b"", 2, 1), (b"", 1, 1), []))
            took.append(time.perf_counter() - started)
        size = Path(target).stat().st_size
    return {
        "serialize_ms": round(statistics.median(took) * 1000, 3),
        "state_lock_ms": round(statistics.median(locked) * 1000, 3),
        "bytes": size,
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
    """One A/B side: a fresh group (from `tree`, or this code), `ops` alter-sync-state-set commits."""
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
                result = await owned_sets(set_names(sets), concurrency, ops, alter)
                result["cpu_ms_per_op"] = cpu_per_op(cpu_seconds(group) - cpu_before, result)
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


def raft_baseline(*, ops: int, concurrency: int) -> dict[str, Any]:
    """The raw pysyncobj counter (`brokergroup.bench.raft_baseline`), with the CPU of its three
    processes from the leader's "start" line to its result, per operation."""
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
) -> dict[str, Any]:
    counts = sets if isinstance(sets, list) else [sets]
    runs = []
    for count in counts:
        runs.append(await bench_group(ops=ops, concurrency=concurrency, sets=count, failovers=failovers))
        print(json.dumps({"partial": runs[-1]}), file=sys.stderr, flush=True)  # a long run's results so far
    baseline = await asyncio.to_thread(raft_baseline, ops=ops, concurrency=concurrency)
    extra: dict[str, Any] = {}
    if baseline_tree is not None:
        extra["ab"] = await ab_rounds(
            tree=baseline_tree, ops=ops, sets=ab_sets or counts[0], rounds=rounds, concurrency=concurrency
        )
    return {
        "benchmark": "controller",
        "machine": {**machine(), "fdatasync_4k": fdatasync_latency_ms(), "loadavg": os.getloadavg()},
        "params": {"ops": ops, "concurrency": concurrency, "sets": counts, "failovers": failovers, "nodes": 3},
        "results": runs[0],
        "by_sets": runs,
        **extra,
        "baseline": {"pysyncobj_replicated_counter": baseline},
        "notes": "heartbeat is node-local (no Raft); alter/elect commit through Raft, one request at a time per "
        "broker set, --concurrency sets busy at once whatever the number of sets; elect includes role-change "
        "pushes to (absent) brokers; leader_failover is kill -9 of the leader until another node serves (its "
        "barrier committed), default pysyncobj timeouts 0.4-1.4 s; cpu_ms_per_op is user + system CPU of the "
        "three controller (or baseline) processes per operation; snapshot is Snapshots.serialize of a state "
        "with that many sets, timed in the bench process",
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
        row(sets, "alter-sync-state-set", run["alter_sync_state_set"])
        row(sets, "elect-master", run["elect_master"])
        row(sets, "leader failover (kill -9)", run["leader_failover"])
        if "snapshot" in run:
            snap = run["snapshot"]
            rows.append(
                f"| {sets} | Raft snapshot: tick thread {snap['serialize_ms']} ms, state lock "
                f"{snap['state_lock_ms']} ms, {snap['bytes']} bytes | | | | | |"
            )
    row("—", "**baseline**: raw pysyncobj counter", result["baseline"]["pysyncobj_replicated_counter"])
    ab = result.get("ab")
    if ab:
        rows.append(
            f"\nA/B ({ab.get('sets')} sets, medians of {len(ab['rounds']) // 2} rounds each): ops/s "
            f"{ab['ops_per_s_median']}, CPU ms/op {ab['cpu_ms_per_op_median']}, current/baseline "
            f"{ab['current_over_baseline']}"
        )
    return "\n".join(rows)
