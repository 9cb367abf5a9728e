"""Hand-made controller event logs for the audit tests: records exactly as the controller writes them.

`Scenario` plays one controller group. It keeps each broker set's state, so every record carries
the state after the event like the real ones, and it numbers raft entries like Raft does. Time is
explicit: `at(ms)` sets the clock to T0 + ms, and every record takes the current time.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Record = dict[str, Any]
Events = Callable[[list[Record]], "DataFrame"]
"""The `events` fixture: records in, deduplicated events out."""
T0 = 1_767_225_600_000
"""2026-01-01T00:00:00Z in ms."""


class Scenario:
    def __init__(self, nodes: tuple[str, ...] = ("n0", "n1", "n2"), *, index: int = 4) -> None:
        self.nodes = nodes
        self.ts = T0
        self.term = 1
        self.index = index
        self.leader = nodes[0]
        self.records: list[Record] = []
        self.sets: dict[str, Record] = {}
        self._ids = 0
        self._position: int | None = None
        """Inside `entry()`: the next record's place in the shared Raft entry (group commit)."""

    # -- plumbing ---------------------------------------------------------------------------------
    def at(self, ms: int) -> Scenario:
        self.ts = T0 + ms
        return self

    def event_id(self) -> str:
        self._ids += 1
        return str(uuid.UUID(int=self._ids))

    def _base(self, name: str | None, kind: str, source: str, broker_id: int | None) -> Record:
        state = self.sets.get(name) if name else None
        record: Record = {
            "schemaVersion": 1,
            "eventId": self.event_id(),
            "ts": self.ts,
            "node": None,
            "term": self.term,
            "index": None,
            "source": source,
            "clusterName": "c" if name else None,
            "brokerName": name,
            "type": kind,
            "brokerId": broker_id,
            "masterBrokerId": None,
            "masterAddress": None,
            "masterEpoch": None,
            "syncStateSet": None,
            "syncStateSetEpoch": None,
            "electionResult": None,
            "unclean": False,
            "reason": None,
        }
        if state is not None:
            master = state["master"]
            record.update(
                masterBrokerId=master,
                masterAddress=f"10.0.0.{master}:10911" if master else None,
                masterEpoch=state["epoch"],
                syncStateSet=sorted(state["sss"]),
                syncStateSetEpoch=state["sssEpoch"],
            )
        return record

    def raft(
        self, name: str, kind: str, broker_id: int | None = None, *, nodes: tuple[str, ...] | None = None, **extra: Any
    ) -> Record:
        record = self._base(name, kind, "raft", broker_id) | {"index": self.index} | extra
        if self._position is None:  # a line as written before group commit: no position key
            self.index += 1
        else:
            record = {**record, "position": self._position}
            self._position += 1
        for node in nodes or self.nodes:
            self.records.append(record | {"node": node})
        return record

    def local(self, name: str | None, kind: str, broker_id: int | None = None, **extra: Any) -> Record:
        record = self._base(name, kind, "local", broker_id) | {"node": self.leader} | extra
        self.records.append(record)
        return record

    @contextlib.contextmanager
    def entry(self) -> Iterator[None]:
        """The raft records made inside share one Raft entry (one index) and carry their `position`
        in it, as the controller writes them since group commit."""
        self._position = 0
        try:
            yield
        finally:
            self._position = None
            self.index += 1

    # -- what happens -------------------------------------------------------------------------------
    def register(self, name: str, ids: tuple[int, ...] = (1, 2, 3)) -> None:
        self.sets.setdefault(name, {"master": None, "epoch": 0, "sss": [], "sssEpoch": 0})
        for broker_id in ids:
            self.raft(name, "APPLY_BROKER_ID", broker_id)

    def elect(
        self, name: str, master: int, *, reason: str = "broker", unclean: bool = False, epoch: int | None = None
    ) -> Record:
        state = self.sets[name]
        state.update(master=master, epoch=state["epoch"] + 1 if epoch is None else epoch, sss=[master])
        state["sssEpoch"] += 1
        return self.raft(
            name, "ELECT_MASTER", master, electionResult="new_master_elected", unclean=unclean, reason=reason
        )

    def no_master(self, name: str, *, reason: str = "channel_closed") -> Record:
        state = self.sets[name]
        state.update(master=None, epoch=state["epoch"] + 1)
        return self.raft(name, "ELECT_MASTER", None, electionResult="no_master_elected", reason=reason)

    def alter(self, name: str, members: list[int]) -> Record:
        state = self.sets[name]
        state["sss"] = sorted(members)
        state["sssEpoch"] += 1
        return self.raft(name, "ALTER_SYNC_STATE_SET", reason="broker")

    def clean(self, name: str) -> Record:
        """CLEAN_BROKER_DATA of the whole set: its state is gone."""
        del self.sets[name]
        return self.raft(name, "CLEAN_BROKER_DATA")

    def lost(self, name: str, broker_id: int, kind: str = "CHANNEL_CLOSED") -> Record:
        reason = "channel_closed" if kind == "CHANNEL_CLOSED" else "heartbeat_timeout"
        return self.local(name, kind, broker_id, reason=reason)

    def active(self, name: str, broker_id: int) -> Record:
        return self.local(name, "BROKER_ACTIVE", broker_id)

    def lead(self, node: str, term: int) -> Record:
        """`node` starts serving `term`: the no-op and barrier entries take two indices."""
        self.term, self.leader = term, node
        self.index += 2
        return self.local(None, "CONTROLLER_LEADER_CHANGED", reason=f"{node} leads term {term}")

    def skip(self, indices: int = 1) -> None:
        """Raft entries that reach no node's log."""
        self.index += indices

    def running_set(self, name: str = "s") -> Scenario:
        """A registered set with broker 1 elected at 0 s and all three in sync at 1 s."""
        self.at(0).register(name)
        self.elect(name, 1)
        self.at(1000).alter(name, [1, 2, 3])
        return self


def rows(df: DataFrame, *columns: str) -> list[dict[str, Any]]:
    """The output rows (only `columns` when given), sorted, for comparing with expected rows."""
    selected = df.select(*columns) if columns else df
    return sorted((r.asDict() for r in selected.collect()), key=repr)


def expected(rows_: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Expected rows in the order `rows` returns them."""
    return sorted(rows_, key=repr)


def only(records: list[Record], **match: Any) -> list[Record]:
    """The records whose fields equal `match`."""
    return [r for r in records if all(r.get(k) == v for k, v in match.items())]


def persistent_rdds(spark: SparkSession) -> int:
    """How many RDDs the session keeps blocks of (cached or checkpointed)."""
    return int(spark.sparkContext._jsc.getPersistentRDDs().size())
