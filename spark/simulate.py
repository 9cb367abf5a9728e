"""One broker set's history, simulated: the events a controller leader would log for it.

`SetHistory.events()` yields `SetEvent`s in time order (simulated milliseconds). Each carries
the set's state *after* it, as the controller's records do. The global driver (`generate`)
merges the sets, assigns Raft terms and indices, and writes the files.

The set starts with three replicas (apply-id, first election of broker 1, sync-state-set
grown to all three), then suffers faults at `fault_rate` per day, never closer than
`MIN_GAP_S` after the previous fault has fully recovered:

- crash (channel closed) or hang (heartbeat timeout) of the master: a clean election of a
  sync-state-set member within milliseconds, a risk window of up to 15 s until the other slave
  is back in sync, the old master back after 20 to 300 s and in sync again 1 to 30 s later;
- a lagging slave: out of the sync-state-set for 5 to 90 s;
- an outage: both slaves lag, the master crashes, no master can be elected cleanly
  (no_master_elected) until the master comes back after 20 to 300 s.

So with the default thresholds a normal history has no finding: risk windows stay under 30 s,
a broker changes liveness at most twice in ten minutes, epochs rise by one per election.
Planted anomalies (`PLANTS`) replace one fault of a chosen set and are the only findings.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator
from typing import Any

MIN_GAP_S = 600.0
LONG_RISK_S = 3600.0
"""Length of the planted long risk window (the audit's default limit is 600 s)."""
PLANTS = ("unclean", "split-brain", "index-gap", "long-risk-window")
FAULTS = (("crash", 0.55), ("hang", 0.25), ("lag", 0.15), ("outage", 0.05))


@dataclasses.dataclass(frozen=True)
class SetEvent:
    t: int
    """Simulated time, ms."""
    source: str
    type: str
    broker_name: str
    broker_id: int | None
    master: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set: tuple[int, ...]
    sync_state_set_epoch: int
    election_result: str | None = None
    unclean: bool = False
    reason: str | None = None
    cluster_name: str | None = None
    anchor: str | None = None
    """Marks an event a planted anomaly's expected finding is computed from."""


class SetHistory:
    def __init__(
        self,
        index: int,
        *,
        cluster: str,
        start_ms: int,
        end_ms: int,
        fault_rate: float,
        seed: int,
        plants: dict[str, int] | None = None,
    ) -> None:
        self.name = f"{cluster}-broker-{index}"
        self.cluster = cluster
        self.rng = random.Random(f"{seed}:set:{index}")
        self.start_ms = start_ms
        self.end_ms = end_ms
        self.fault_rate = fault_rate
        self.plants = dict(sorted((plants or {}).items(), key=lambda kv: kv[1]))
        """Set-level plant -> simulated time from which it replaces the next fault."""
        self.addresses = {b: f"10.{index // 250}.{index % 250}.{b}:10911" for b in (1, 2, 3)}
        self.master: int | None = None
        self.epoch = 0
        self.sss: tuple[int, ...] = ()
        self.sss_epoch = 0
        self.out: list[SetEvent] = []

    # -- emitting -----------------------------------------------------------------------------
    def _event(self, t: float, source: str, kind: str, broker_id: int | None, **extra: Any) -> None:
        """Record an event with the set's state now; `extra` sets SetEvent's optional fields."""
        event = SetEvent(
            t=round(t),
            source=source,
            type=kind,
            broker_name=self.name,
            broker_id=broker_id,
            master=self.master,
            master_address=self.addresses[self.master] if self.master else None,
            master_epoch=self.epoch,
            sync_state_set=self.sss,
            sync_state_set_epoch=self.sss_epoch,
            **extra,
        )
        self.out.append(event)

    def raft(self, t: float, kind: str, broker_id: int | None = None, **extra: Any) -> None:
        self._event(t, "raft", kind, broker_id, cluster_name=self.cluster, **extra)

    def local(self, t: float, kind: str, broker_id: int | None, reason: str | None = None) -> None:
        cluster = None if kind == "ROLE_CHANGE_NOTIFIED" else self.cluster
        self._event(t, "local", kind, broker_id, reason=reason, cluster_name=cluster)

    def alter(self, t: float, members: set[int], anchor: str | None = None) -> None:
        self.sss = tuple(sorted(members))
        self.sss_epoch += 1
        self.raft(t, "ALTER_SYNC_STATE_SET", reason="broker", anchor=anchor)

    def elect(self, t: float, new_master: int | None, reason: str, **extra: Any) -> float:
        """Commit an election at t; returns the time of the role-change pushes after it."""
        self.epoch += 1
        if new_master is None:
            self.master = None
            self.raft(t, "ELECT_MASTER", None, election_result="no_master_elected", reason=reason, **extra)
            return t
        self.master = new_master
        self.sss = (new_master,)
        self.sss_epoch += 1
        self.raft(t, "ELECT_MASTER", new_master, election_result="new_master_elected", reason=reason, **extra)
        pushed = t + self.rng.uniform(1, 5)
        for b in (1, 2, 3):
            self.local(pushed, "ROLE_CHANGE_NOTIFIED", None, f"{self.addresses[b]}: epoch {self.epoch} ok")
        return pushed

    # -- the history ----------------------------------------------------------------------------
    def events(self) -> Iterator[SetEvent]:
        t = self.setup(self.start_ms + self.rng.uniform(0, 60_000))
        yield from self.flush()
        rate_per_ms = self.fault_rate / 86_400_000
        while True:
            gap = self.rng.expovariate(rate_per_ms) if rate_per_ms > 0 else float("inf")
            fault_at = t + max(MIN_GAP_S * 1000, gap)
            plant = next(iter(self.plants), None)
            plant_at = max(self.plants[plant], t + MIN_GAP_S * 1000) if plant else float("inf")
            if plant is not None and plant_at <= fault_at:
                del self.plants[plant]
                t = self.planted(plant, plant_at)
            elif fault_at < self.end_ms:
                t = self.fault(fault_at)
            else:
                return
            yield from self.flush()

    def flush(self) -> Iterator[SetEvent]:
        batch, self.out = self.out, []
        yield from batch

    def setup(self, t: float) -> float:
        for b in (1, 2, 3):
            self.raft(t, "APPLY_BROKER_ID", b)
            self.local(t + self.rng.uniform(1, 10), "BROKER_ACTIVE", b)
            t += self.rng.uniform(12, 20)
        t = self.elect(t, 1, "broker")
        self.alter(t + self.rng.uniform(2, 10), {1, 2, 3})
        return t + 10

    def fault(self, t: float) -> float:
        kind = self.rng.choices([k for k, _ in FAULTS], [w for _, w in FAULTS])[0]
        if kind == "lag":
            assert self.master is not None
            slave = self.rng.choice([b for b in self.sss if b != self.master])
            self.alter(t, set(self.sss) - {slave})
            t += self.rng.uniform(5_000, 90_000)
            self.alter(t, set(self.sss) | {slave})
            return t
        if kind == "outage":
            return self.outage(t)
        return self.failover(t, "channel_closed" if kind == "crash" else "heartbeat_timeout")

    def failover(
        self, t: float, reason: str, *, first_expand_s: float | None = None, anchor: str | None = None
    ) -> float:
        """The master is lost; a clean election; slaves back in sync; the old master returns."""
        old = self.master
        assert old is not None
        self.local(t, "CHANNEL_CLOSED" if reason == "channel_closed" else "HEARTBEAT_LOST", old, reason)
        t += self.rng.uniform(1, 40) if reason == "channel_closed" else self.rng.uniform(5, 300)
        new = self.rng.choice([b for b in self.sss if b != old])
        return self.recover(t, old, new, reason, first_expand_s=first_expand_s, anchor=anchor)

    def recover(
        self,
        t: float,
        old: int,
        new: int,
        reason: str,
        *,
        first_expand_s: float | None = None,
        anchor: str | None = None,
        unclean: bool = False,
    ) -> float:
        elected = t
        t = self.elect(t, new, reason, unclean=unclean, anchor=anchor)
        other = next(b for b in (1, 2, 3) if b not in (old, new))
        delay = first_expand_s * 1000 if first_expand_s is not None else self.rng.uniform(500, 15_000)
        t = elected + delay
        self.alter(t, {new, other}, anchor=f"{anchor}-end" if anchor else None)
        t += self.rng.uniform(20_000, 300_000)
        self.local(t, "BROKER_ACTIVE", old)
        t += self.rng.uniform(1_000, 30_000)
        self.alter(t, {1, 2, 3})
        return t

    def outage(self, t: float) -> float:
        master = self.master
        assert master is not None
        self.alter(t, {master})
        t += self.rng.uniform(1_000, 10_000)
        self.local(t, "CHANNEL_CLOSED", master, "channel_closed")
        t = self.elect(t + self.rng.uniform(1, 40), None, "channel_closed")
        t += self.rng.uniform(20_000, 300_000)
        self.local(t, "BROKER_ACTIVE", master)
        t = self.elect(t + self.rng.uniform(5, 50), master, "broker")
        for b in (1, 2, 3):
            if b != master:
                t += self.rng.uniform(500, 15_000)
                self.alter(t, set(self.sss) | {b})
        return t

    def planted(self, plant: str, t: float) -> float:
        master = self.master
        assert master is not None
        if plant == "long-risk-window":
            return self.failover(t, "channel_closed", first_expand_s=LONG_RISK_S, anchor="long-risk-window")
        if plant == "unclean":
            # both slaves fall out of sync, then the master dies: electUncleanMaster picks a slave
            self.alter(t, {master})
            t += self.rng.uniform(1_000, 10_000)
            self.local(t, "CHANNEL_CLOSED", master, "channel_closed")
            new = self.rng.choice([b for b in (1, 2, 3) if b != master])
            t += self.rng.uniform(1, 40)
            return self.recover(t, master, new, "channel_closed", anchor="unclean", unclean=True)
        if plant == "split-brain":
            # a second controller leader elects an in-sync slave without raising the epoch
            other = self.rng.choice([b for b in self.sss if b != master])
            self.epoch -= 1
            pushed = self.elect(t, other, "admin", anchor="split-brain")
            self.alter(pushed + self.rng.uniform(500, 15_000), {1, 2, 3})
            return pushed + 16_000
        raise ValueError(f"unknown plant {plant!r}")
