"""`brokergroup bench failover`: how long a failover takes, for the control plane and for clients.

A local cluster (3 controllers, one set of 3 replicas in sync mode, on 127.0.0.1) runs with a
producer sending one message at a time throughout. Each trial injects one fault, then heals it
and waits until the cluster is whole again before the next:

- `kill-master`: SIGKILL of the set's master (its controller streams close at once);
- `stop-master`: SIGSTOP of the master (a hung process: only the heartbeat timeout finds it);
  SIGCONT once a new master is elected;
- `kill-leader`: SIGKILL of the controller leader (the set's master must keep its write lease
  through the controller election).

Per trial:
- control plane: fault → new master elected (the ELECT_MASTER event's `ts` in the controller
  event log), or for `kill-leader` fault → a new controller leader serves (its
  CONTROLLER_LEADER_CHANGED event); replica-info / status polling when no event is found;
- data plane: the longest gap between two consecutive acknowledged writes from the last one
  before the fault to the first one after the control plane recovered (for a master fault:
  last acknowledged write on the old master → first on the new one).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import itertools
import json
import math
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from brokergroup.bench.stats import machine
from brokergroup.broker.client import MasterFinder, ProduceError, Producer
from brokergroup.chaos.runner import load_events
from brokergroup.chaos.topology import ChaosCluster, ClusterSpec
from brokergroup.controller.client import ControllerClient
from brokergroup.controller.codes import ControllerError
from brokergroup.local import profiles

KINDS = ("kill-master", "stop-master", "kill-leader")
SET = "bs0"
TOPIC = "failover"


def add_parser(kinds: Any) -> None:
    p: argparse.ArgumentParser = kinds.add_parser(
        "failover", help="control-plane and data-plane failover time per fault kind (p50/p99/max)"
    )
    p.add_argument("--trials", type=int, default=5, help="trials per fault kind (default 5)")
    p.add_argument("--profile", choices=sorted(profiles.PROFILES), default="fast", help="timing profile")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"fault kinds, comma-separated (default {','.join(KINDS)})")
    p.add_argument("--out", type=Path, help="also write the JSON here")
    p.add_argument("--keep", type=Path, help="keep the cluster's data and logs in this folder")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if args.trials < 1 or unknown or not kinds:
        print(f"brokergroup bench failover: --trials >= 1 and --kinds from {', '.join(KINDS)}", file=sys.stderr)
        return 2

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    profile = profiles.profile(args.profile)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        result = asyncio.run(bench(args.keep, profile, kinds, args.trials, progress))
    else:
        with tempfile.TemporaryDirectory(prefix="bg-bench-failover-") as tmp:
            result = asyncio.run(bench(Path(tmp), profile, kinds, args.trials, progress))
    result["command"] = "brokergroup bench failover " + " ".join(sys.argv[3:] if len(sys.argv) > 3 else [])
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


class Load:
    """One producer sending one message at a time; remembers when each acknowledgement came."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.acks: list[float] = []
        self.unacknowledged = 0

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.producer.send(TOPIC, [b"x" * 100])
            except ProduceError:
                self.unacknowledged += 1
                continue
            self.acks.append(time.monotonic())

    async def acked_after(self, moment: float, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.acks and self.acks[-1] > moment:
                return next(t for t in self.acks if t > moment)
            await asyncio.sleep(0.01)
        raise TimeoutError(f"no write acknowledged within {timeout:.0f} s")

    def longest_gap(self, start: float, end: float) -> float:
        """Longest time between consecutive acks, from the last one at or before `start` to the first after `end`."""
        before = [t for t in self.acks if t <= start]
        after = [t for t in self.acks if t > end]
        window = ([before[-1]] if before else []) + [t for t in self.acks if start < t <= end] + after[:1]
        return max((b - a for a, b in itertools.pairwise(window)), default=0.0)


@dataclasses.dataclass
class Trial:
    kind: str
    target: str
    control_plane_ms: float
    control_plane_source: str
    data_plane_ms: float
    master_epoch: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "target": self.target,
            "controlPlaneMs": round(self.control_plane_ms, 1),
            "controlPlaneSource": self.control_plane_source,
            "dataPlaneMs": round(self.data_plane_ms, 1),
            "masterEpochAfter": self.master_epoch,
        }


class FailoverBench:
    def __init__(self, cluster: ChaosCluster, controller: ControllerClient, load: Load, timeout_s: float) -> None:
        self.cluster = cluster
        self.controller = controller
        self.load = load
        self.timeout_s = timeout_s

    async def trial(self, kind: str) -> Trial:
        await self.cluster.wait_healthy(timeout=self.timeout_s)
        await self.load.acked_after(time.monotonic(), self.timeout_s)
        info = await self.controller.replica_info(SET)
        master = self.cluster.name_of_broker(SET, info.master_address)
        assert master is not None
        leader = await self.cluster.controller_leader()
        target = leader if kind == "kill-leader" else master
        process = self.cluster.processes()[target]
        fault_wall_ms, fault_at = time.time() * 1000, time.monotonic()
        process.signal(signal.SIGSTOP if kind == "stop-master" else signal.SIGKILL)
        if kind == "kill-leader":
            old = [n.name for n in self.cluster.controllers.nodes].index(leader)
            await self.cluster.controllers.leader(timeout=self.timeout_s, exclude={old})
        else:
            await self._new_master(info.master_epoch, info.master_address)
        polled_ms = (time.monotonic() - fault_at) * 1000
        recovered_at = await self.load.acked_after(time.monotonic(), self.timeout_s)
        if kind == "stop-master":
            process.signal(signal.SIGCONT)
        else:
            self.cluster.restart(target)
        data_plane = self.load.longest_gap(fault_at, recovered_at) * 1000
        logged = self._logged_ms(kind, fault_wall_ms, info.master_epoch, leader)
        epoch = (await self.controller.replica_info(SET)).master_epoch
        return Trial(
            kind=kind,
            target=target,
            control_plane_ms=logged if logged is not None else polled_ms,
            control_plane_source="event-log" if logged is not None else "polling",
            data_plane_ms=data_plane,
            master_epoch=epoch,
        )

    async def _new_master(self, epoch_before: int, old_address: str | None) -> None:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            try:
                info = await self.controller.replica_info(SET)
            except ControllerError:
                info = None
            if info and info.master_epoch > epoch_before and info.master_address not in (None, old_address):
                return
            await asyncio.sleep(0.02)
        raise TimeoutError(f"no new master of {SET} within {self.timeout_s:.0f} s")

    def _logged_ms(self, kind: str, fault_wall_ms: float, epoch_before: int, old_leader: str) -> float | None:
        """Fault → the controller's own record of the recovery, from the event logs of every node."""
        events = load_events(self.cluster.event_logs())
        if kind == "kill-leader":
            times = [
                e["ts"]
                for e in events
                if e.get("type") == "CONTROLLER_LEADER_CHANGED"
                and e.get("node") != old_leader
                and e["ts"] >= fault_wall_ms
            ]
        else:
            times = [
                e["ts"]
                for e in events
                if e.get("type") == "ELECT_MASTER"
                and e.get("brokerName") == SET
                and e.get("electionResult") == "new_master_elected"
                and (e.get("masterEpoch") or 0) > epoch_before
            ]
        return min(times) - fault_wall_ms if times else None


def percentiles(values: list[float]) -> dict[str, float | int]:
    """Nearest-rank percentiles: the smallest sample with at least p of the samples at or below it."""
    ordered = sorted(values)

    def rank(p: float) -> float:
        return round(ordered[max(0, math.ceil(p * len(ordered)) - 1)], 1)

    return {"n": len(ordered), "p50": rank(0.50), "p99": rank(0.99), "max": round(ordered[-1], 1)}


def cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


async def bench(
    base_dir: Path, profile: profiles.TimingProfile, kinds: list[str], trials: int, progress: Callable[[str], None]
) -> dict[str, Any]:
    timeout_s = 3 * profile.heartbeat_timeout_ms / 1000 + 30
    spec = ClusterSpec(sets=1, replicas=3, mode=profiles.SYNC, profile=profile, netns=False)
    request_timeout = profile.ha_slave_timeout_ms / 1000 + 1.0
    results: dict[str, list[Trial]] = {k: [] for k in kinds}
    started = time.monotonic()
    with ChaosCluster(base_dir, spec) as cluster:
        stop = asyncio.Event()
        async with aiohttp.ClientSession() as session, cluster.controller_client() as controller:
            producer = Producer(
                MasterFinder(broker_name=SET, controller=controller),
                session=session,
                deadline_s=timeout_s,
                request_timeout_s=request_timeout,
            )
            load = Load(producer)
            await cluster.wait_healthy(timeout=timeout_s)
            task = asyncio.create_task(load.run(stop))
            try:
                runner = FailoverBench(cluster, controller, load, timeout_s)
                for kind in kinds:
                    for n in range(1, trials + 1):
                        trial = await runner.trial(kind)
                        results[kind].append(trial)
                        progress(
                            f"{kind} {n}/{trials}: control plane {trial.control_plane_ms:.0f} ms "
                            f"({trial.control_plane_source}), data plane {trial.data_plane_ms:.0f} ms"
                        )
            finally:
                stop.set()
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
    return {
        "benchmark": "failover",
        "profile": profile.name,
        "profileDescription": profile.description,
        "timing": dataclasses.asdict(profile),
        "mode": "sync (--all-ack --min-in-sync-replicas 2, SYNC flush), 3 controllers, 1 set x 3 replicas, 127.0.0.1",
        "producerRequestTimeoutS": request_timeout,
        "trialsPerKind": trials,
        "machine": {**machine(), "cpuModel": cpu_model()},
        "seconds": round(time.monotonic() - started, 1),
        "writesAcknowledged": len(load.acks),
        "kinds": {
            kind: {
                "controlPlaneMs": percentiles([t.control_plane_ms for t in done]),
                "dataPlaneMs": percentiles([t.data_plane_ms for t in done]),
                "trials": [t.as_dict() for t in done],
            }
            for kind, done in results.items()
        },
    }
