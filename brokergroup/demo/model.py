"""The demo's records, as plain data: acknowledgements, the operation history, the audit's outcome.

Pure: no I/O, no event loop (`History` reads the monotonic clock to stamp operations, as the
chaos harness's histories do).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

TOPIC = "demo"
QUEUE_ID = 0
Op = dict[str, Any]


def wall_ms() -> float:
    return time.time() * 1000.0


def queue_name(broker_set: str) -> str:
    """`<set>/<topic>/<queueId>`, the checker's name for a queue."""
    return f"{broker_set}/{TOPIC}/{QUEUE_ID}"


@dataclasses.dataclass(frozen=True)
class Ack:
    broker_set: str
    producer_id: int
    seq: int
    invoked_ms: float
    acked_ms: float
    master: str
    """The broker address that acknowledged it."""
    attempts: int
    queue_offset: int | None

    @property
    def latency_ms(self) -> float:
        return self.acked_ms - self.invoked_ms

    def wire(self) -> dict[str, Any]:
        return {
            "set": self.broker_set,
            "producerId": self.producer_id,
            "seq": self.seq,
            "invokedMs": round(self.invoked_ms, 3),
            "ackedMs": round(self.acked_ms, 3),
            "latencyMs": round(self.latency_ms, 3),
            "master": self.master,
            "attempts": self.attempts,
            "queueOffset": self.queue_offset,
        }


class History:
    """Operations in the chaos history format, in memory; `time` is ns since the history began."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self._started = time.monotonic_ns()

    def record(self, process: str, type_: str, f: str, value: dict[str, Any]) -> None:
        self.ops.append({"process": process, "type": type_, "f": f, "value": value, "time": self._ns()})

    def _ns(self) -> int:
        return time.monotonic_ns() - self._started


@dataclasses.dataclass(frozen=True)
class AuditOutcome:
    ran: bool
    line: str
    """One sentence for the console and the report."""
    summary: dict[str, Any] | None = None
    report: str | None = None
    """Path of the audit's own HTML report, relative to the demo's folder."""

    @property
    def violations(self) -> int:
        if self.summary is None:
            return 0
        return int(self.summary.get("findings", {}).get("violations", 0))

    def wire(self) -> dict[str, Any]:
        return {"ran": self.ran, "line": self.line, "report": self.report, "summary": self.summary}


def describe(summary: dict[str, Any]) -> str:
    found = summary.get("findings", {})
    incidents = summary.get("incidents", {})
    events = summary.get("input", {}).get("events", "?")
    return (
        f"audit: {events} events, {incidents.get('total', '?')} incidents, "
        f"{found.get('violations', '?')} violations, {found.get('warnings', '?')} warnings"
    )
