"""The failover timeline: from the kill to the first acknowledged write at the new master.

Built from two sources on one clock (UTC wall time, ms): the controllers' event log (DESIGN
§2.3) and the producers' own acknowledgements. Steps, in the order they must happen:

1. fault injected: the demo sends SIGKILL to the master of a set;
2. detected: the controller leader sees the master's heartbeat stream close (CHANNEL_CLOSED) or
   its heartbeats expire (HEARTBEAT_LOST); if neither was logged, the election's own time;
3. elected: the ELECT_MASTER event that names a new master, at a higher master epoch;
4. brokers told: the leader's ROLE_CHANGE_NOTIFIED push to the new master (when logged);
5. clients switched: the first write acknowledged by the new master.

Pure, except `read_events`, which reads event-log files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from brokergroup.common.jsonl import read_jsonl
from brokergroup.demo.model import Ack

REQUIRED = ("fault", "detected", "elected", "switched")
SLACK_MS = 50
"""Events this much before the fault still count (clocks are read at slightly different moments)."""


@dataclasses.dataclass(frozen=True)
class Fault:
    broker_set: str
    replica: str
    """The killed process's name."""
    broker_id: int
    address: str
    master_epoch: int
    at_ms: float


@dataclasses.dataclass(frozen=True)
class Step:
    key: str
    title: str
    at_ms: float
    detail: str

    def wire(self, fault_ms: float) -> dict[str, Any]:
        return {
            "key": self.key,
            "title": self.title,
            "atMs": round(self.at_ms, 3),
            "sinceFaultMs": round(self.at_ms - fault_ms, 1),
            "detail": self.detail,
        }


@dataclasses.dataclass(frozen=True)
class Timeline:
    fault: Fault
    steps: tuple[Step, ...]
    last_ack_before_ms: float | None
    new_master: str | None
    new_master_epoch: int | None

    def step(self, key: str) -> Step | None:
        return next((s for s in self.steps if s.key == key), None)

    def since_fault(self, key: str) -> float | None:
        step = self.step(key)
        return None if step is None else step.at_ms - self.fault.at_ms

    @property
    def control_plane_ms(self) -> float | None:
        """Fault → a new master elected."""
        return self.since_fault("elected")

    @property
    def data_plane_ms(self) -> float | None:
        """Last write acknowledged before the fault → first after it."""
        first = self.step("switched")
        if first is None or self.last_ack_before_ms is None:
            return None
        return first.at_ms - self.last_ack_before_ms

    @property
    def complete(self) -> bool:
        return all(self.step(k) is not None for k in REQUIRED)

    @property
    def ordered(self) -> bool:
        """fault <= detected <= elected <= switched (the brokers-told step may fall anywhere after elected)."""
        times = [t for t in (self.step(k) for k in REQUIRED) if t is not None]
        return [t.at_ms for t in times] == sorted(t.at_ms for t in times)

    def wire(self) -> dict[str, Any]:
        return {
            "brokerSet": self.fault.broker_set,
            "killed": self.fault.replica,
            "steps": [s.wire(self.fault.at_ms) for s in self.steps],
            "complete": self.complete,
            "ordered": self.ordered,
            "controlPlaneMs": _round(self.control_plane_ms),
            "dataPlaneMs": _round(self.data_plane_ms),
            "newMaster": self.new_master,
            "newMasterEpoch": self.new_master_epoch,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def build(fault: Fault, events: Iterable[dict[str, Any]], acks: Sequence[Ack], names: dict[str, str]) -> Timeline:
    """`names` maps broker addresses to replica names."""
    since = fault.at_ms - SLACK_MS
    mine = sorted(
        (e for e in events if e.get("brokerName") == fault.broker_set and int(e.get("ts") or 0) >= since),
        key=lambda e: int(e["ts"]),
    )
    steps = [
        Step("fault", "fault injected", fault.at_ms, f"SIGKILL {fault.replica} (master, epoch {fault.master_epoch})")
    ]
    elected = next(
        (
            e
            for e in mine
            if e.get("type") == "ELECT_MASTER"
            and e.get("electionResult") == "new_master_elected"
            and int(e.get("masterEpoch") or 0) > fault.master_epoch
        ),
        None,
    )
    detected = next(
        (
            e
            for e in mine
            if e.get("type") in ("CHANNEL_CLOSED", "HEARTBEAT_LOST") and e.get("brokerId") == fault.broker_id
        ),
        None,
    )
    if detected is not None:
        steps.append(
            Step(
                "detected",
                "detected by the controller",
                detected["ts"],
                f"{detected['type']} on {detected.get('node')}",
            )
        )
    elif elected is not None:
        steps.append(Step("detected", "detected by the controller", elected["ts"], "at the election (no local event)"))
    new_master = new_epoch = None
    if elected is not None:
        new_master = names.get(str(elected.get("masterAddress")), str(elected.get("masterAddress")))
        new_epoch = int(elected["masterEpoch"])
        steps.append(
            Step(
                "elected",
                "new master elected",
                elected["ts"],
                f"{new_master} (brokerId {elected.get('masterBrokerId')}), masterEpoch {new_epoch}, "
                f"reason {elected.get('reason')}",
            )
        )
        told = next(
            (e for e in mine if e.get("type") == "ROLE_CHANGE_NOTIFIED" and e["ts"] >= elected["ts"]),
            None,
        )
        if told is not None:
            steps.append(Step("notified", "brokers told", told["ts"], _told(told, names)))
    mine_acks = sorted((a for a in acks if a.broker_set == fault.broker_set), key=lambda a: a.acked_ms)
    before = [a for a in mine_acks if a.acked_ms < fault.at_ms]
    first = next((a for a in mine_acks if a.acked_ms >= fault.at_ms and a.master != fault.address), None)
    if first is not None:
        steps.append(
            Step(
                "switched",
                "clients switched",
                first.acked_ms,
                f"first write acknowledged by {names.get(first.master, first.master)} "
                f"(seq {first.seq}, {first.attempts} attempts)",
            )
        )
    return Timeline(
        fault=fault,
        steps=tuple(sorted(steps, key=lambda s: s.at_ms)),
        last_ack_before_ms=before[-1].acked_ms if before else None,
        new_master=new_master,
        new_master_epoch=new_epoch,
    )


def _told(event: dict[str, Any], names: dict[str, str]) -> str:
    """ROLE_CHANGE_NOTIFIED's reason is `<address>: <outcome>`; name the broker."""
    address, _, outcome = str(event.get("reason") or "").partition(": ")
    return f"role change pushed to {names.get(address, address or '?')}" + (f" ({outcome})" if outcome else "")


def read_events(directory: Path) -> list[dict[str, Any]]:
    """Every record of every event-log file below `directory`, with `node` filled in from the file name."""
    records = []
    for path in sorted(directory.rglob("events-*.jsonl")):
        node = path.stem.removeprefix("events-").rsplit("-", 1)[0]
        records += [{**r, "node": r.get("node") or node} for r in read_jsonl(path) if isinstance(r, dict)]
    return records
