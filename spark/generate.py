"""`brokergroup audit generate`: synthetic controller event logs of any size, with planted anomalies.

The files look like a real controller group's (`<out>/controllers/<node>/events/
events-<node>-<seq>.jsonl`, rolled by size): every raft event is on every node with the same
eventId, local observations only on the node that was controller leader at the time.

- Each broker set is simulated on its own (`simulate.SetHistory`); the driver merges the sets
  by time and plays the controller group: one Raft log with contiguous indices within a term,
  and controller failovers at `controller_failovers` per day. A failover is a leaderless pause
  of 0.3 to 3 s (everything later shifts by it), a new term (sometimes two, a split vote), two
  indices for the new leader's no-op and barrier entries, and CONTROLLER_LEADER_CHANGED logged
  by the new leader.
- `plants` adds anomalies the audit must find, and nothing else: `unclean`, `split-brain` and
  `long-risk-window` replace one fault of a set (`simulate.PLANTS`); `index-gap` drops one raft
  index in the middle of a term from every node. `<out>/planted.json` lists the findings they
  must produce (`contract.FINDING_KEY` fields), for the default audit thresholds.
- The same seed gives byte-identical files.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import heapq
import json
import random
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from brokergroup.common.settings import SettingsError
from brokergroup.spark import contract, simulate
from brokergroup.spark.simulate import SetEvent

EPOCH_2026 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
NODE_MARK = "\x00node\x00"


@dataclasses.dataclass(frozen=True)
class GenerateConfig:
    out: Path
    sets: int = 3
    days: float = 1.0
    fault_rate: float = 24.0
    """Faults per broker set per day (master crash or hang, lagging slave, outage)."""
    seed: int = 1
    plants: tuple[str, ...] = ()
    nodes: int = 3
    controller_failovers: float = 4.0
    """Controller leader failovers per day."""
    start: dt.datetime = EPOCH_2026
    max_file_bytes: int = 64 * 1024 * 1024
    max_lines: int | None = None
    """Stop after this many lines (for benchmarks); planted anomalies past it are not written."""

    def validate(self) -> GenerateConfig:
        problems = []
        if self.sets < 1:
            problems.append(f"sets ({self.sets}) must be at least 1")
        if self.days <= 0:
            problems.append(f"days ({self.days}) must be positive")
        if self.fault_rate < 0 or self.controller_failovers < 0:
            problems.append("fault rates must not be negative")
        if not 1 <= self.nodes <= 9:
            problems.append(f"nodes ({self.nodes}) must be between 1 and 9")
        unknown = sorted(set(self.plants) - set(simulate.PLANTS))
        if unknown:
            problems.append(f"unknown plant(s) {', '.join(unknown)}; known: {', '.join(simulate.PLANTS)}")
        if len(set(self.plants)) != len(self.plants):
            problems.append("each plant may be given once")
        if (self.out / "controllers").exists() and any((self.out / "controllers").iterdir()):
            problems.append(f"{self.out / 'controllers'} already holds logs; choose an empty folder")
        if problems:
            raise SettingsError("; ".join(problems))
        return self


@dataclasses.dataclass(frozen=True)
class GenerateResult:
    lines: int
    events: int
    files: list[Path]
    planted: list[dict[str, Any]]
    first_ts: int
    last_ts: int


class NodeFiles:
    """Appends lines to `<out>/controllers/<node>/events/events-<node>-<seq>.jsonl`, rolled by size."""

    def __init__(self, out: Path, node: str, max_bytes: int) -> None:
        self.dir = out / "controllers" / node / "events"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.node, self.max_bytes, self.seq, self.size = node, max_bytes, 0, 0
        self.files: list[Path] = []
        self.f: IO[str] = self._open()

    def _open(self) -> IO[str]:
        path = self.dir / f"events-{self.node}-{self.seq:06d}.jsonl"
        self.files.append(path)
        return path.open("w", encoding="utf-8")

    def write(self, line: str) -> None:
        if self.size >= self.max_bytes:
            self.f.close()
            self.seq, self.size = self.seq + 1, 0
            self.f = self._open()
        self.f.write(line)
        self.size += len(line)

    def close(self) -> None:
        self.f.close()


@dataclasses.dataclass(frozen=True)
class Failover:
    at: int
    pause: int
    terms: int
    leader: str


def plan_failovers(config: GenerateConfig, start: int, end: int, nodes: list[str]) -> list[Failover]:
    rng = random.Random(f"{config.seed}:controller")
    out, t, leader = [], float(start), nodes[0]
    rate = config.controller_failovers / 86_400_000
    while rate > 0:
        t += rng.expovariate(rate)
        if t >= end:
            break
        leader = rng.choice([n for n in nodes if n != leader] or nodes)
        out.append(Failover(round(t), round(rng.uniform(300, 3000)), 2 if rng.random() < 0.2 else 1, leader))
    return out


def plan_plants(config: GenerateConfig, start: int, end: int) -> dict[int, dict[str, int]]:
    """Set index -> {plant: simulated time}: distinct sets where possible, spread in time."""
    rng = random.Random(f"{config.seed}:plants")
    set_plants = [p for p in simulate.PLANTS if p in config.plants and p != "index-gap"]
    chosen = rng.sample(range(config.sets), min(config.sets, len(set_plants))) if set_plants else []
    plan: dict[int, dict[str, int]] = {}
    for i, plant in enumerate(set_plants):
        at = start + round((end - start) * (0.2 + 0.5 * i / len(set_plants)))
        plan.setdefault(chosen[i % len(chosen)], {})[plant] = at
    return plan


def record(e: SetEvent, *, event_id: str, ts: int, term: int, index: int | None) -> dict[str, Any]:
    return {
        "schemaVersion": contract.SCHEMA_VERSION,
        "eventId": event_id,
        "ts": ts,
        "node": NODE_MARK,
        "term": term,
        "index": index,
        "position": None if index is None else 0,
        "source": e.source,
        "clusterName": e.cluster_name,
        "brokerName": e.broker_name,
        "type": e.type,
        "brokerId": e.broker_id,
        "masterBrokerId": e.master,
        "masterAddress": e.master_address,
        "masterEpoch": e.master_epoch,
        "syncStateSet": list(e.sync_state_set),
        "syncStateSetEpoch": e.sync_state_set_epoch,
        "electionResult": e.election_result,
        "unclean": e.unclean,
        "reason": e.reason,
    }


def leader_record(node: str, *, event_id: str, ts: int, term: int) -> dict[str, Any]:
    empty = dict.fromkeys(contract.FIELDS)
    return empty | {
        "schemaVersion": contract.SCHEMA_VERSION,
        "eventId": event_id,
        "ts": ts,
        "node": NODE_MARK,
        "term": term,
        "source": "local",
        "type": "CONTROLLER_LEADER_CHANGED",
        "unclean": False,
        "reason": f"{node} leads term {term}",
    }


def merged(histories: list[simulate.SetHistory]) -> Iterator[SetEvent]:
    def tagged(i: int, h: simulate.SetHistory) -> Iterator[tuple[tuple[int, int], SetEvent]]:
        for e in h.events():
            yield (e.t, i), e

    for _, e in heapq.merge(*(tagged(i, h) for i, h in enumerate(histories)), key=lambda x: x[0]):
        yield e


class Driver:
    """The controller group: terms, indices, the leader's node, ids, and the files."""

    def __init__(self, config: GenerateConfig, files: dict[str, NodeFiles], failovers: list[Failover]) -> None:
        self.config, self.files = config, files
        self.rng = random.Random(f"{config.seed}:ids")
        self.failovers = iter(failovers)
        self.next_failover = next(self.failovers, None)
        self.shift = 0
        self.term = 1
        self.index = 4
        """Indices 1 to 3 are the first leader's no-op and barrier entries, which carry no event."""
        self.leader = sorted(files)[0]
        self.lines = self.events = 0
        self.first_ts: int | None = None
        self.last_ts = 0
        self.last_raft: tuple[int, int, int] | None = None
        self.gap_at: int | None = None
        self.planted: list[dict[str, Any]] = []
        self.anchors: dict[tuple[str, str], dict[str, Any]] = {}

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)

    def write(self, rec: dict[str, Any], nodes: list[str]) -> None:
        text = json.dumps(rec, separators=(",", ":")) + "\n"
        head, tail = text.split(json.dumps(NODE_MARK), 1)
        for node in nodes:
            self.files[node].write(f'{head}"{node}"{tail}')
        self.lines += len(nodes)
        self.events += 1
        self.first_ts = rec["ts"] if self.first_ts is None else self.first_ts
        self.last_ts = max(self.last_ts, rec["ts"])

    def lead(self, at: int) -> None:
        """The current leader starts serving at simulated time `at` (shifted)."""
        ts = at + self.shift
        self.write(leader_record(self.leader, event_id=str(self.uuid()), ts=ts, term=self.term), [self.leader])

    def failovers_until(self, t: int) -> None:
        while self.next_failover is not None and self.next_failover.at <= t:
            f = self.next_failover
            self.shift += f.pause
            self.term += f.terms
            self.index += 2
            self.leader = f.leader
            self.lead(f.at)
            self.next_failover = next(self.failovers, None)

    def emit(self, e: SetEvent) -> None:
        self.failovers_until(e.t)
        ts = e.t + self.shift
        if e.source == "local":
            self.write(record(e, event_id=str(self.uuid()), ts=ts, term=self.term, index=None), [self.leader])
            return
        if self.gap_at is not None and e.t >= self.gap_at and self.last_raft and self.last_raft[0] == self.term:
            term, index, before = self.last_raft
            self.planted.append(finding("index_gap", term=term, index=index + 1, ts=before, value=1))
            self.index += 1
            self.gap_at = None
        event_id = str(uuid.uuid5(self.uuid(), "0"))
        self.write(record(e, event_id=event_id, ts=ts, term=self.term, index=self.index), sorted(self.files))
        if e.anchor:
            self.anchors[(e.broker_name, e.anchor)] = {
                "ts": ts,
                "term": self.term,
                "index": self.index,
                "master": e.master,
                "epoch": e.master_epoch,
            }
        self.last_raft = (self.term, self.index, ts)
        self.index += 1

    def expected(self) -> list[dict[str, Any]]:
        """The findings the planted anomalies must produce, from where they were written."""
        out = list(self.planted)
        for (name, anchor), a in sorted(self.anchors.items()):
            where = {"brokerName": name, "brokerId": a["master"], "term": a["term"], "index": a["index"], "ts": a["ts"]}
            if anchor == "unclean":
                out.append(finding("unclean_election", **where, value=a["epoch"]))
            elif anchor == "split-brain":
                out.append(finding("split_brain", **where, value=a["epoch"]))
            elif anchor == "long-risk-window" and (name, "long-risk-window-end") in self.anchors:
                end = self.anchors[(name, "long-risk-window-end")]["ts"]
                out.append(finding("long_risk_window", **where, value=end - a["ts"]))
        return out


def finding(kind: str, **key: object) -> dict[str, Any]:
    return {c: key.get(c) for c in contract.FINDING_KEY} | {"kind": kind}


def generate(config: GenerateConfig, progress: Callable[[float], None] | None = None) -> GenerateResult:
    """Write the logs and `planted.json`; `progress(fraction)` is called now and then."""
    config.validate()
    start = int(config.start.timestamp() * 1000)
    end = start + round(config.days * 86_400_000)
    nodes = [f"n{i}" for i in range(config.nodes)]
    files = {n: NodeFiles(config.out, n, config.max_file_bytes) for n in nodes}
    driver = Driver(config, files, plan_failovers(config, start, end, nodes))
    if "index-gap" in config.plants:
        driver.gap_at = start + (end - start) // 2
    plants = plan_plants(config, start, end)
    histories = [
        simulate.SetHistory(
            i,
            cluster="gen",
            start_ms=start,
            end_ms=end,
            fault_rate=config.fault_rate,
            seed=config.seed,
            plants=plants.get(i),
        )
        for i in range(config.sets)
    ]
    try:
        driver.lead(start - 1000)
        for n, e in enumerate(merged(histories)):
            if config.max_lines is not None and driver.lines >= config.max_lines:
                break
            driver.emit(e)
            if progress is not None and n % 20_000 == 0:
                progress(min(1.0, (e.t - start) / (end - start)))
        else:
            driver.failovers_until(end)
    finally:
        for f in files.values():
            f.close()
    planted = driver.expected()
    manifest = {
        "config": {k: str(v) for k, v in dataclasses.asdict(config).items()},
        "lines": driver.lines,
        "events": driver.events,
        "planted": planted,
        "assumes": "default audit thresholds: --min-in-sync-replicas 1, --long-risk-window 600",
    }
    (config.out / "planted.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return GenerateResult(
        lines=driver.lines,
        events=driver.events,
        files=[p for f in files.values() for p in f.files],
        planted=planted,
        first_ts=driver.first_ts or start,
        last_ts=driver.last_ts,
    )
