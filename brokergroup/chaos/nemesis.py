"""The nemesis: faults injected into a running cluster, one at a time, each with its heal.

Fault kinds (`--nemesis` takes kinds or the families `kill`, `stop`, `partition`):

- kill-master / kill-slave / kill-leader / kill-random: SIGKILL of a set's master, one of its
  slaves, the controller leader, or any process; heal: restart it (same data dir and address).
- stop-master / stop-slave / stop-leader / stop-random: SIGSTOP of the same targets (a hung
  process whose sockets stay open); heal: SIGCONT.
- partition-master-controllers: the master and the controllers cannot reach each other; the
  master keeps its slaves and the clients. Heal: remove the cut.
- partition-master-all: the master reaches no one (controllers, its slaves, the clients).
- partition-leader: the controller leader cannot reach the other controllers; brokers and
  clients still reach every controller.
- partition-master-slaves-kill: the master is cut from its slaves (not from the controllers or
  the clients), then SIGKILLed 1 s later, while its slaves are still in the sync-state-set (a
  slave leaves it only after `max_time_slave_not_catchup_ms`). Heal: remove the cut and restart.
  In sync mode nothing written during that second was acknowledged; in async mode it was, by the
  master alone, and the elected slave never had it: the loss async replication allows.

Faults of a controller follower alone (a minority: the leader and one follower stay healthy), after
which no master may lose its role and no put may be refused (docs/chaos.md, "write outage"):

- stop-follower: SIGSTOP of a controller that is not the Raft leader; its sockets stay open and
  its kernel still accepts connections. Heal: SIGCONT.
- blackhole-follower: every packet to or from a controller follower is dropped silently, in both
  directions (the nftables `cut` set of `brokergroup.chaos.netns`; no RST, no ICMP), from the
  other controllers, every broker and the clients. Heal: remove the cut.

- failover-catchup: SIGKILL of a set's master; as soon as the controller names a new master, the
  remaining slave is SIGKILLed too, and both are restarted at once, so two replicas catch up
  with the new master and two sync-state-set expansions race. Heal: nothing left (both run).
- forge-requests: requests that change the sync-state-set or feed the election, sent without a
  credential by the harness (`brokergroup.chaos.forgery`); each must be refused and change
  nothing, which the fault checks when it starts and again at its heal (`violations` in its
  detail). The cluster's brokers carry the group's broker token (`ChaosCluster.broker_token`).

Partitions and blackholes need the cluster's network namespaces (`ClusterSpec(netns=True)`).

Power (`power`, needs the power-loss file system: `ClusterSpec(power_fs=True)`):

- power-loss: every replica of a set and a majority or all of the controllers lose power at
  once: SIGKILL of each, then every write and directory change their disks had not fsynced is
  dropped (`brokergroup.chaos.powerfs`). Heal: restart them (controllers first).

What each partition exercises: cut off from the controllers, the master stops acknowledging when
its write lease runs out (docs/broker.md), and after the heartbeat timeout the controllers elect
one of its in-sync slaves; on heal the old master learns it was replaced and truncates to the new
master. With `master-controllers` the old master still reaches its slaves, so it is the lease
(not a lost quorum of replicas) that must stop it; with `master-all` the clients cannot reach it
either. `partition-leader` leaves a controller leader without its Raft quorum: it must stop
serving and the majority side elects a new one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import signal
import time
from typing import Any

import aiohttp

from brokergroup.chaos import forgery
from brokergroup.chaos.history import HistoryWriter
from brokergroup.chaos.topology import CLUSTER_NAME, ChaosCluster
from brokergroup.controller.codes import ControllerError

PROCESS_KINDS = tuple(
    f"{action}-{target}" for action in ("kill", "stop") for target in ("master", "slave", "leader", "random")
)
PARTITION_KINDS = (
    "partition-master-controllers",
    "partition-master-all",
    "partition-leader",
    "partition-master-slaves-kill",
)
CUT_BEFORE_KILL_S = 1.0
POWER_LOSS = "power-loss"
MINORITY_CONTROLLER_KINDS = ("stop-follower", "blackhole-follower")
"""Faults of one controller follower: the run measures refused puts and master changes during them."""
LEADER_KINDS = ("kill-leader", "stop-leader", "partition-leader")
"""Faults of the controller leader: the run measures the same, reported apart (no master may lose its role)."""
NETNS_KINDS = (*PARTITION_KINDS, "blackhole-follower")
FAILOVER_CATCHUP = "failover-catchup"
FORGE = "forge-requests"
KINDS = (*PROCESS_KINDS, *PARTITION_KINDS, *MINORITY_CONTROLLER_KINDS, FAILOVER_CATCHUP, FORGE)
FAMILIES = {
    "kill": (*(k for k in KINDS if k.startswith("kill-")), FAILOVER_CATCHUP),
    "stop": tuple(k for k in KINDS if k.startswith("stop-")),
    "partition": NETNS_KINDS,
    "forge": (FORGE,),
}

KINDS = (*KINDS, POWER_LOSS)
FAMILIES["power"] = (POWER_LOSS,)


class NemesisError(ValueError):
    """A nemesis specification that cannot be used."""


def expand(spec: str, *, partitions_available: bool) -> list[str]:
    """`kill,stop-master,partition` → the list of fault kinds; partitions need namespaces."""
    kinds: list[str] = []
    for item in (s.strip() for s in spec.split(",") if s.strip()):
        if item in FAMILIES:
            kinds += FAMILIES[item]
        elif item in KINDS:
            kinds.append(item)
        else:
            raise NemesisError(f"unknown nemesis {item!r}; use {', '.join(FAMILIES)} or one of {', '.join(KINDS)}")
    if not kinds:
        raise NemesisError("no nemesis given")
    if not partitions_available and any(k in NETNS_KINDS for k in kinds):
        raise NemesisError("partitions and blackholes need network namespaces (root, iproute2 and nftables)")
    return list(dict.fromkeys(kinds))


@dataclasses.dataclass
class Fault:
    kind: str
    target: str
    broker_set: str | None
    detail: dict[str, Any]

    def describe(self) -> dict[str, Any]:
        return {"target": self.target, "set": self.broker_set, **self.detail}


class Nemesis:
    def __init__(self, cluster: ChaosCluster, rng: random.Random, history: HistoryWriter | None = None) -> None:
        self.cluster = cluster
        self.rng = rng
        self.history = history

    async def inject(self, kind: str) -> Fault:
        action, _, target_kind = kind.partition("-")
        broker_set = self.rng.choice(sorted(self.cluster.sets))
        if kind == POWER_LOSS:
            fault = await self._power_loss(broker_set)
        elif action == "partition":
            fault = await self._partition(kind, broker_set)
        elif kind == "blackhole-follower":
            fault = await self._blackhole_follower()
        elif kind == FAILOVER_CATCHUP:
            fault = await self._failover_catchup(broker_set)
        elif kind == FORGE:
            fault = await self._forge(broker_set)
        else:
            target = await self._target(target_kind, broker_set)
            owner = next((name for name in self.cluster.sets if target in self.cluster.replica_names(name)), None)
            fault = Fault(kind, target, owner, {})
            process = self.cluster.processes()[target]
            process.signal(signal.SIGKILL if action == "kill" else signal.SIGSTOP)
        self._record(fault, "start")
        return fault

    async def heal(self, fault: Fault) -> None:
        if fault.kind == POWER_LOSS:
            for name in fault.detail["controllers"] + fault.detail["brokers"]:
                self.cluster.restart(name)
            self._record(fault, "stop")
            return
        if fault.kind == FORGE:
            await self._forge_check(fault)
        elif fault.kind == FAILOVER_CATCHUP:
            pass  # both replicas were restarted when the fault started
        elif fault.kind.startswith("kill-"):
            self.cluster.restart(fault.target)
        elif fault.kind.startswith("stop-"):
            self.cluster.processes()[fault.target].signal(signal.SIGCONT)
        else:
            assert self.cluster.network is not None
            self.cluster.network.heal()
            if fault.kind.endswith("-kill"):
                self.cluster.restart(fault.target)
        self._record(fault, "stop")

    def heal_everything(self) -> None:
        """Final heal: resume every process, restart the dead ones, remove every cut."""
        if self.cluster.network is not None:
            self.cluster.network.heal()
        for name, process in self.cluster.processes().items():
            if process.running:
                process.signal(signal.SIGCONT)
            else:
                self.cluster.restart(name)

    async def _power_loss(self, broker_set: str) -> Fault:
        """Power loss of every replica of `broker_set` and of 2 or 3 controllers (leader among them)."""
        controllers = self.cluster.controller_names()
        majority = len(controllers) // 2 + 1
        count = self.rng.choice([majority, len(controllers)])
        leader = await self.cluster.controller_leader()
        hit = [leader, *self.rng.sample([c for c in controllers if c != leader], count - 1)]
        brokers = self.cluster.replica_names(broker_set)
        report = await asyncio.to_thread(self.cluster.power_loss, hit + brokers)
        dropped = {k: report[k] for k in ("files_reverted", "bytes_lost", "entries_reverted", "reverted")}
        return Fault(POWER_LOSS, broker_set, broker_set, {"controllers": sorted(hit), "brokers": brokers,
                                                            "dropped": dropped})  # fmt: skip

    def _record(self, fault: Fault, phase: str) -> None:
        if self.history is not None:
            self.history.record("nemesis", "info", fault.kind, {"phase": phase, **fault.describe()})

    async def _target(self, target_kind: str, broker_set: str) -> str:
        if target_kind == "leader":
            return await self.cluster.controller_leader()
        if target_kind == "follower":
            leader = await self.cluster.controller_leader()
            return self.rng.choice([c for c in self.cluster.controller_names() if c != leader])
        if target_kind == "random":
            return self.rng.choice(sorted(n for n, p in self.cluster.processes().items() if p.running))
        async with self.cluster.controller_client() as controller:
            master = await self.cluster.master_of(broker_set, controller)
        if master is None:
            raise RuntimeError(f"{broker_set} has no master to attack")
        if target_kind == "master":
            return master
        return self.rng.choice([r for r in self.cluster.replica_names(broker_set) if r != master])

    async def _partition(self, kind: str, broker_set: str) -> Fault:
        network = self.cluster.network
        if network is None:
            raise NemesisError(f"{kind} needs network namespaces")
        controllers = self.cluster.controller_names()
        if kind == "partition-master-slaves-kill":
            master = await self._target("master", broker_set)
            network.cut([master], [r for r in self.cluster.replica_names(broker_set) if r != master])
            cuts = network.describe_cuts()
            await asyncio.sleep(CUT_BEFORE_KILL_S)  # the master may acknowledge alone meanwhile (async)
            self.cluster.processes()[master].signal(signal.SIGKILL)
            return Fault(kind, master, broker_set, {"cuts": cuts, "killedAfterS": CUT_BEFORE_KILL_S})
        if kind == "partition-leader":
            leader = await self.cluster.controller_leader()
            network.cut([leader], [c for c in controllers if c != leader])
            return Fault(kind, leader, None, {"cuts": network.describe_cuts()})
        master = await self._target("master", broker_set)
        others = controllers
        if kind == "partition-master-all":
            others = controllers + [r for r in self.cluster.replica_names(broker_set) if r != master] + ["hub"]
        network.cut([master], others)
        return Fault(kind, master, broker_set, {"cuts": network.describe_cuts()})

    async def _blackhole_follower(self) -> Fault:
        network = self.cluster.network
        if network is None:
            raise NemesisError("blackhole-follower needs network namespaces")
        follower = await self._target("follower", "")
        network.cut([follower], [n for n in self.cluster.processes() if n != follower] + ["hub"])
        return Fault("blackhole-follower", follower, None, {"cuts": {follower: network.describe_cuts()[follower]}})

    async def _failover_catchup(self, broker_set: str) -> Fault:
        """Kill the master; once another is elected, kill the last slave and restart both at once."""
        old = await self._target("master", broker_set)
        processes = self.cluster.processes()
        processes[old].signal(signal.SIGKILL)
        killed_at = time.monotonic()
        timeout_s = 2 * self.cluster.spec.profile.heartbeat_timeout_ms / 1000 + 10
        new = None
        async with self.cluster.controller_client() as controller:
            while time.monotonic() - killed_at < timeout_s:
                new = await self.cluster.master_of(broker_set, controller)
                if new is not None and new != old:
                    break
                await asyncio.sleep(0.05)
            else:
                raise TimeoutError(f"no new master of {broker_set} within {timeout_s:.0f} s after killing {old}")
        elected_s = time.monotonic() - killed_at
        other = next(r for r in self.cluster.replica_names(broker_set) if r not in (old, new))
        processes[other].signal(signal.SIGKILL)
        self.cluster.restart(old)
        self.cluster.restart(other)
        detail = {"newMaster": new, "restarted": [old, other], "electedAfterS": round(elected_s, 2)}
        return Fault(FAILOVER_CATCHUP, old, broker_set, detail)

    async def _forge(self, broker_set: str) -> Fault:
        """Send the forged requests; whether they were refused is checked now and again at heal."""
        controllers = self.cluster.controllers.api_addresses
        try:
            async with aiohttp.ClientSession() as session, self.cluster.controller_client() as controller:
                before = await forgery.snapshot(session, controller, controllers, broker_set)
                forged = forgery.forged_requests(CLUSTER_NAME, broker_set, before["replicaInfo"])
                answers = await forgery.send(session, controllers, forged)
                after = await forgery.snapshot(session, controller, controllers, broker_set)
        except (ControllerError, aiohttp.ClientError, ValueError) as exc:
            raise RuntimeError(f"could not read the controllers' state around the forged requests: {exc}") from exc
        found = forgery.violations(answers, before, after)
        detail = {"before": before, "answers": answers, "violations": found}
        return Fault(FORGE, broker_set, broker_set, detail)

    async def _forge_check(self, fault: Fault) -> None:
        controllers = self.cluster.controllers.api_addresses
        assert fault.broker_set is not None
        try:
            async with aiohttp.ClientSession() as session, self.cluster.controller_client() as controller:
                after = await forgery.snapshot(session, controller, controllers, fault.broker_set)
        except (ControllerError, aiohttp.ClientError, ValueError, TimeoutError) as exc:
            fault.detail["healCheck"] = f"not re-read: {exc}"  # the check right after sending still stands
            return
        late = forgery.violations([], fault.detail["before"], after)
        fault.detail["violations"] += [f"at heal: {v}" for v in late]
