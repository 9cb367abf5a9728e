"""One chaos run: a local cluster, clients recording a history, N faults, a final heal and read, the check.

    start the cluster -> wait until healthy -> start producers and consumers
    N times: inject a fault -> hold it -> heal it -> wait until the cluster is healthy again
             and every producer has been acknowledged again
    heal everything -> stop producers -> wait until every replica has the same log
    -> drain the consumers -> read every replica in full -> compare the controllers' applied states
    -> check history + controller event logs (a difference in the controllers' states fails the run too)

Everything lands in the output folder: `history.jsonl`, `verdict.json`, `run.json`, and the
cluster's data and logs under `cluster/` (controller event logs in
`cluster/controllers/n*/events/`).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from brokergroup.broker.binary_client import BinaryConsumer, BinaryLinks, BinaryProducer
from brokergroup.broker.client import Consumer, MasterFinder, Producer
from brokergroup.chaos import checker, outage
from brokergroup.chaos.history import (
    ConsumerClient,
    HistoryWriter,
    ProducerClient,
    final_read,
    queue_name,
    read_history,
    record_topology,
)
from brokergroup.chaos.nemesis import FAILOVER_CATCHUP, FORGE, LEADER_KINDS, MINORITY_CONTROLLER_KINDS, Fault, Nemesis
from brokergroup.chaos.topology import ChaosCluster, ClusterSpec
from brokergroup.common.jsonl import read_jsonl
from brokergroup.controller.agreement import wait_for_agreement
from brokergroup.controller.client import ControllerClient
from brokergroup.controller.codes import ControllerError

TOPIC = "chaos"
# What async replication does not promise (docs/broker.md): a failover may lose acknowledged
# messages (which readers may have seen: read then lost); readers of the old master may have seen
# some at offsets the new master reuses, and
# a producer's retry stores such a message again at another offset. No log keeps two copies.
ASYNC_TOLERATED = ("lost", "readThenLost", "inconsistentOffsets", "duplicated")


@dataclasses.dataclass(frozen=True)
class RunOptions:
    out: Path
    kinds: tuple[str, ...]
    faults: int = 10
    seed: int = 0
    spec: ClusterSpec = dataclasses.field(default_factory=ClusterSpec)
    producers_per_set: int = 2
    rate: float = 25.0
    """Sends per second per producer (each waits for its acknowledgement)."""
    recovery_timeout_s: float = 90.0
    protocol: str = "binary"
    """How producers and consumers reach the brokers: "binary" (the binary client port) or "http"."""
    lagging_every_s: float | None = None
    """Also run one consumer per set that polls only this often (256 messages at most each time), so that
    with `spec.retention` it falls below what retention keeps and is told so (OFFSET_TOO_SMALL)."""

    @property
    def tolerate(self) -> tuple[str, ...]:
        return ASYNC_TOLERATED if self.spec.mode.name == "async" else ()


def plan_faults(kinds: tuple[str, ...], count: int, rng: random.Random) -> list[str]:
    """`count` faults cycling through every kind in a shuffled order, so each appears before any repeats."""
    plan: list[str] = []
    while len(plan) < count:
        batch = list(kinds)
        rng.shuffle(batch)
        plan += batch
    return plan[:count]


def hold_seconds(kind: str, rng: random.Random, heartbeat_timeout_s: float) -> float:
    """How long a fault lasts: kills are short; stops and partitions straddle the heartbeat timeout,
    so some end before the controller reacts and some force a failover; master partitions always do.
    A controller follower's stop or blackhole lasts 2-5 heartbeat timeouts: long enough for a broker's
    heartbeat stream to it to die and its reconnect to hang; nothing may fail meanwhile."""
    if kind in MINORITY_CONTROLLER_KINDS:
        return rng.uniform(2.0 * heartbeat_timeout_s, 5.0 * heartbeat_timeout_s)
    if kind in (FAILOVER_CATCHUP, FORGE):
        return rng.uniform(0.5, 3.0)  # what they do happens when they start
    if kind.startswith("kill-") or kind.endswith("-kill") or kind == "power-loss":
        return rng.uniform(0.5, 3.0)
    if kind.startswith("partition-master"):
        # Long enough for the controllers to give the master up: the old master must have stopped
        # acknowledging (its lease) before the new one is elected.
        return rng.uniform(1.2 * heartbeat_timeout_s, 2.0 * heartbeat_timeout_s)
    return rng.uniform(1.0, 1.6 * heartbeat_timeout_s)


class ChaosRun:
    def __init__(self, options: RunOptions, progress: Callable[[str], None]) -> None:
        self.options = options
        self.progress = progress
        self.rng = random.Random(options.seed)
        self.cluster = ChaosCluster(options.out / "cluster", options.spec)
        self.history = HistoryWriter(options.out / "history.jsonl")
        self.faults: list[dict[str, Any]] = []
        self.liveness: list[str] = []
        self.raft_states: dict[str, Any] | None = None
        """The controllers' applied states, compared once writes stopped (`_compare_raft_states`)."""
        self.safety: list[str] = []
        """What a fault saw that must never happen (a forged request taken)."""
        self.outages: list[outage.WriteOutage] = []
        self.leader_outages: list[outage.WriteOutage] = []
        self.retention_samples: list[dict[str, Any]] = []
        """Each replica's commit-log min offset after each fault and before the final reads (retention runs)."""

    async def run(self) -> dict[str, Any]:
        started = time.monotonic()
        try:
            with self.cluster, self.cluster.clients():
                await self._exercise()
        finally:
            self.history.close()
        events = load_events(self.cluster.event_logs())
        verdict = checker.check(
            read_history(self.history.path), events, tolerate=self.options.tolerate, max_examples=10
        )
        status = checker.INVALID if self.liveness or self.safety else verdict["status"]
        if self.raft_states is None or not self.raft_states["agreed"]:
            status = checker.INVALID  # the controllers' replicated states differ, or could not be compared
            verdict["failing"] = [*verdict["failing"], "raftStates"]
        result = {
            "status": status,
            "valid": status == checker.VALID,
            "verdict": verdict,
            "liveness": self.liveness,
            "raftStates": self.raft_states,
            "safety": self.safety,
            "writeOutage": outage.summarize(self.outages),
            "leaderFaultOutage": outage.summarize(self.leader_outages),
            "retentionSamples": self.retention_samples,
            "run": self._summary(time.monotonic() - started),
            "faults": self.faults,
        }
        (self.options.out / "verdict.json").write_text(json.dumps(verdict, indent=2) + "\n")
        (self.options.out / "run.json").write_text(json.dumps(result, indent=2) + "\n")
        return result

    def _summary(self, took: float) -> dict[str, Any]:
        spec = self.options.spec
        return {
            "seed": self.options.seed,
            "mode": spec.mode.name,
            "profile": spec.profile.name,
            "sets": spec.sets,
            "replicas": spec.replicas,
            "netns": spec.netns,
            "powerFs": spec.power_fs,
            "protocol": self.options.protocol,
            "retention": spec.retention.describe() if spec.retention is not None else None,
            "laggingConsumerEveryS": self.options.lagging_every_s,
            "faultsInjected": len(self.faults),
            "faultMix": dict(sorted(collections.Counter(f["kind"] for f in self.faults).items())),
            "durationS": round(took, 1),
            "out": str(self.options.out),
        }

    async def _exercise(self) -> None:
        opts = self.options
        took = await self.cluster.wait_healthy(timeout=opts.recovery_timeout_s)
        self.progress(f"cluster up: {len(self.cluster.processes())} processes, healthy after {took:.1f} s")
        queues = {queue_name(name, TOPIC, 0): self.cluster.replica_names(name) for name in sorted(self.cluster.sets)}
        record_topology(self.history, queues, self.cluster.controller_names())
        timing = opts.spec.profile
        request_timeout = max(3.0, timing.ha_slave_timeout_ms / 1000 + 1.0)
        deadline = 2 * timing.heartbeat_timeout_ms / 1000 + 10
        stop_producing, stop_consuming = asyncio.Event(), asyncio.Event()
        async with aiohttp.ClientSession() as session, self.cluster.controller_client() as controller:
            links = BinaryLinks(session)

            def producer(name: str) -> Producer | BinaryProducer:
                finder = self._finder(name, controller)
                if opts.protocol == "binary":
                    return BinaryProducer(finder, links=links, deadline_s=deadline, request_timeout_s=request_timeout)
                return Producer(finder, session=session, deadline_s=deadline, request_timeout_s=request_timeout)

            def consumer(name: str, group: str) -> Consumer | BinaryConsumer:
                finder = self._finder(name, controller)
                if opts.protocol == "binary":
                    return BinaryConsumer(finder, group=group, links=links, request_timeout_s=request_timeout)
                return Consumer(finder, group=group, session=session, request_timeout_s=request_timeout)

            producers = [
                ProducerClient(
                    f"p{len(self.cluster.sets) * k + i}", producer(name),
                    self.history, broker_set=name, topic=TOPIC, rate=opts.rate,
                )
                for i, name in enumerate(sorted(self.cluster.sets))
                for k in range(opts.producers_per_set)
            ]  # fmt: skip
            consumers = [
                ConsumerClient(
                    f"c{i}", consumer(name, f"chaos-{i}"), self.history, broker_set=name, topic=TOPIC,
                )
                for i, name in enumerate(sorted(self.cluster.sets))
            ]  # fmt: skip
            lagging = [
                ConsumerClient(
                    f"c{len(consumers) + i}", consumer(name, f"chaos-lagging-{i}"), self.history,
                    broker_set=name, topic=TOPIC,
                )
                for i, name in enumerate(sorted(self.cluster.sets))
                if opts.lagging_every_s is not None
            ]  # fmt: skip
            tasks = [asyncio.create_task(p.run(stop_producing)) for p in producers]
            tasks += [asyncio.create_task(c.run(stop_consuming)) for c in consumers]
            tasks += [asyncio.create_task(c.run(stop_consuming, every_s=opts.lagging_every_s)) for c in lagging]
            consumers += lagging
            try:
                await self._until_acked_again(producers, timeout=opts.recovery_timeout_s)
                await self._until_retention_deleted(session)
                nemesis = Nemesis(self.cluster, self.rng, self.history)
                for number, kind in enumerate(plan_faults(opts.kinds, opts.faults, self.rng), 1):
                    await self._one_fault(number, kind, nemesis, producers)
                    await self._sample_retention(session, f"after fault {number}")
                self.progress("final heal")
                nemesis.heal_everything()
                await self._recover("final heal", producers)
                stop_producing.set()
                await asyncio.gather(*tasks[: len(producers)])
                await self.cluster.wait_healthy(timeout=opts.recovery_timeout_s, quiescent=True)
                stop_consuming.set()  # the polling loops end before the drain: one poll at a time per consumer
                await asyncio.gather(*tasks[len(producers) :])
                await self._drain(consumers)
                await self._sample_retention(session, "before the final reads")
                await self._final_reads(session)
                await self._compare_raft_states(controller)
            finally:
                stop_producing.set()
                stop_consuming.set()
                for task in tasks:
                    task.cancel()
                links.close()
                await asyncio.gather(*tasks, return_exceptions=True)

    def _finder(self, broker_set: str, controller: ControllerClient) -> MasterFinder:
        return MasterFinder(broker_name=broker_set, controller=controller)

    async def _one_fault(self, number: int, kind: str, nemesis: Nemesis, producers: list[ProducerClient]) -> None:
        timeout_s = self.options.spec.profile.heartbeat_timeout_ms / 1000
        epochs_before = {name: await self._master_epoch(name) for name in self.cluster.sets}
        started, refused_before = time.monotonic(), sum(p.refused for p in producers)
        try:
            fault: Fault = await nemesis.inject(kind)
        except (RuntimeError, TimeoutError) as exc:
            self.liveness.append(f"fault {number} ({kind}) could not start: {exc}")
            nemesis.heal_everything()
            await self._recover(f"fault {number} ({kind}) that could not start", producers)
            return
        hold = hold_seconds(kind, self.rng, timeout_s)
        await asyncio.sleep(hold)  # the fault lasts this long while the clients keep going
        await nemesis.heal(fault)
        recovered = await self._recover(f"fault {number} ({kind} {fault.target})", producers)
        acked = sum(p.acked for p in producers)
        self.safety += [f"fault {number} ({kind}): {v}" for v in fault.detail.get("violations", [])]
        extra: dict[str, Any] = {}
        if kind in MINORITY_CONTROLLER_KINDS or kind in LEADER_KINDS:
            window = outage.measure(
                refused_before=refused_before,
                refused_after=sum(p.refused for p in producers),
                epochs_before=epochs_before,
                epochs_after={name: await self._master_epoch(name) for name in self.cluster.sets},
                ack_times=[p.ack_times for p in producers],
                start=started,
                end=time.monotonic(),
            )
            (self.outages if kind in MINORITY_CONTROLLER_KINDS else self.leader_outages).append(window)
            extra["writeOutage"] = window.describe()
            if outage.FAILS_RUN and window.any and kind in MINORITY_CONTROLLER_KINDS:
                self.liveness.append(f"fault {number} ({kind} {fault.target}): write outage {window.describe()}")
        self.faults.append(
            {
                **extra,
                "number": number,
                "kind": kind,
                **fault.describe(),
                "holdS": round(hold, 2),
                "recoveredS": recovered,
                "masterEpochBefore": epochs_before.get(fault.broker_set) if fault.broker_set else None,
                "masterEpochAfter": await self._master_epoch(fault.broker_set),
            }
        )
        took = f"{recovered:.1f} s" if recovered is not None else "NOT RECOVERED"
        self.progress(
            f"[{number}/{self.options.faults}] {kind:<29} {fault.target:<7} held {hold:4.1f} s, "
            f"recovered in {took}; {acked} acknowledged"
        )

    async def _master_epoch(self, broker_set: str | None) -> int | None:
        if broker_set is None:
            return None
        try:
            async with self.cluster.controller_client() as controller:
                return (await controller.replica_info(broker_set)).master_epoch
        except ControllerError:
            return None

    async def _recover(self, what: str, producers: list[ProducerClient]) -> float | None:
        """Time until the cluster is healthy and every producer was acknowledged since; None if never."""
        started = time.monotonic()
        try:
            await self.cluster.wait_healthy(timeout=self.options.recovery_timeout_s)
            await self._until_acked_again(producers, timeout=self.options.recovery_timeout_s)
        except TimeoutError as exc:
            self.liveness.append(f"after {what}: {exc}")
            self.history.record("nemesis", "info", "recovery", {"phase": "timeout", "after": what, "error": str(exc)})
            return None
        return round(time.monotonic() - started, 2)

    async def _until_acked_again(self, producers: list[ProducerClient], *, timeout: float) -> None:
        since = time.monotonic()
        deadline = since + timeout
        while time.monotonic() < deadline:
            if all(p.last_ack is not None and p.last_ack > since for p in producers):
                return
            await asyncio.sleep(0.05)
        slow = [p.process for p in producers if p.last_ack is None or p.last_ack <= since]
        raise TimeoutError(f"producers {slow} not acknowledged within {timeout:.0f} s")

    async def _drain(self, consumers: list[ConsumerClient]) -> None:
        """Each consumer reads on until a poll finds nothing (writes have stopped)."""
        deadline = time.monotonic() + self.options.recovery_timeout_s
        for consumer in consumers:
            while time.monotonic() < deadline and await consumer.poll_one() > 0:
                pass

    async def _compare_raft_states(self, controller: ControllerClient) -> None:
        """Every controller's applied state at one applied index: equal digests, or the run fails."""
        addresses = self.cluster.controllers.api_addresses
        agreement = await wait_for_agreement(controller, addresses, timeout=self.options.recovery_timeout_s)
        self.raft_states = agreement.to_dict()
        nodes = agreement.digests
        shown = f"at last_applied {nodes[0]['last_applied']}" if agreement.agreed and nodes else agreement.problem
        self.progress(f"controllers' states: {'identical' if agreement.agreed else 'DIFFER'} {shown}")

    async def _until_retention_deleted(self, session: aiohttp.ClientSession) -> None:
        """With retention on, the faults start once every replica has deleted a segment, so that they fall on
        logs whose head retention is cutting (a liveness failure if none does within the time allowed)."""
        retention = self.options.spec.retention
        if retention is None:
            return
        allowed = (retention.retention_ms or 0) / 1000 + self.options.recovery_timeout_s
        deadline = time.monotonic() + allowed
        while time.monotonic() < deadline:
            found = await self._sample_retention(session, "before the faults", record=False)
            if found and len(found) == sum(len(b.nodes) for b in self.cluster.sets.values()) and all(found.values()):
                await self._sample_retention(session, "before the faults")
                self.progress(f"retention deleted segments on every replica: min offsets {found}")
                return
            await asyncio.sleep(1.0)
        self.liveness.append(f"retention deleted no segment on some replica within {allowed:.0f} s")

    async def _sample_retention(
        self, session: aiohttp.ClientSession, when: str, *, record: bool = True
    ) -> dict[str, int]:
        """With retention on: each replica's commit-log min offset (`GET /v1/status`), recorded in the history
        (`harness` info `retention`) so that a run shows its segments were deleted while it went on. A replica
        that does not answer (a fault) is left out of that sample."""
        found: dict[str, int] = {}
        if self.options.spec.retention is None:
            return found
        for brokers in self.cluster.sets.values():
            for node in brokers.nodes:
                try:
                    async with session.get(f"http://{node.api}/v1/status", timeout=aiohttp.ClientTimeout(total=3)) as r:
                        found[node.name] = int((await r.json())["store"]["minOffset"])
                except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError):
                    continue
        if record:
            self.history.record("harness", "info", "retention", {"when": when, "minOffsets": found})
            self.retention_samples.append({"when": when, "minOffsets": found})
        return found

    async def _final_reads(self, session: aiohttp.ClientSession) -> None:
        for name, brokers in sorted(self.cluster.sets.items()):
            for node in brokers.nodes:
                count = await final_read(self.history, session, node.name, node.api, TOPIC, queue_name(name, TOPIC, 0))
                self.progress(f"final read {node.name}: " + (f"{count} messages" if count is not None else "FAILED"))


def load_events(paths: list[Path]) -> list[dict[str, Any]]:
    """Every controller event-log record of every node (the checker deduplicates by eventId)."""
    return [record for path in paths for record in read_jsonl(path)]
