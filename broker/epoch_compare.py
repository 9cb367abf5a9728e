"""Two replicas' epoch caches compared: what they share and where the slave would truncate to.

Pure: `compare(a, b)` takes each replica's epoch entries and offsets (read live from `/v1/status`
or from a copied store directory by `epoch_compare_cmd`) and answers what a slave of the other
would do on its next HA handshake, with the reasons. The decision follows `ha.slave_conn`'s
handshake step by step, and the point itself is `store.epoch.find_consistent_point` (RocketMQ's
`findConsistentPoint` / `doTruncate`), not a copy of it:

1. the master's last epoch is older than the slave's: a stale master, the slave refuses it and cuts
   nothing (RocketMQ would let it cut the slave's newer data);
2. the slave has no epoch entry, or its log is empty: it keeps nothing and replicates from the
   master's first byte;
3. otherwise the consistent point `p`: the newest epoch both have *with the same start offset*,
   up to the shorter end. No such epoch: no consistent point, the slave refuses (a human rebuilds
   it). `p` before the slave's log start: refused too. Else the slave cuts its log and epochs at
   `p` (nothing when it ends there and has no epoch the master lacks) and replicates from `p`.

Which replica plays the master: the one the caller names, else a live master, else the one with
the newer last epoch (the one a controller would have elected since), else `a`.

A max offset may be unknown (files copied without `commitlog/`): the last entry's end is then
unbounded, and a point that depends on it says so.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from brokergroup.broker.store.epoch import OPEN, EpochEntry, find_consistent_point


@dataclass(frozen=True, slots=True)
class Replica:
    """What one replica says about itself. `entries`' end offsets are ignored."""

    source: str
    """Where it was read from: a URL or a directory."""
    entries: tuple[EpochEntry, ...]
    max_offset: int | None
    """None: unknown (no commit log given)."""
    min_offset: int = 0
    confirm_offset: int | None = None
    role: str | None = None
    """"master", "slave" or "none" for a live broker; None for files."""
    broker_id: int | None = None

    def __post_init__(self) -> None:
        starts = [(e.epoch, e.start_offset) for e in self.entries]
        for (e1, s1), (e2, s2) in itertools.pairwise(starts):
            if e2 <= e1 or s2 <= s1:
                raise ValueError(f"{self.source}: epoch entries must strictly increase: {e1}-{s1} then {e2}-{s2}")
        if self.max_offset is not None and not 0 <= self.min_offset <= self.max_offset:
            raise ValueError(f"{self.source}: need 0 <= min offset {self.min_offset} <= max offset {self.max_offset}")

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else -1

    def ends(self) -> list[int]:
        """Each entry's end: the next one's start, the last one's the max offset (OPEN if unknown)."""
        last = OPEN if self.max_offset is None else self.max_offset
        return [e.start_offset for e in self.entries[1:]] + ([last] if self.entries else [])


class Outcome(enum.Enum):
    KEEP = "keeps its whole log"
    TRUNCATE = "truncates"
    FROM_SCRATCH = "replicates from scratch"
    STALE_MASTER = "refuses the master (stale)"
    NO_CONSISTENT_POINT = "refuses: no consistent point"
    BEFORE_LOG_START = "refuses: consistent point before its log start"


@dataclass(frozen=True, slots=True)
class Shared:
    """An epoch both replicas hold with the same start offset, and where it ends on each."""

    epoch: int
    start_offset: int
    end_master: int | None
    end_slave: int | None


@dataclass(frozen=True, slots=True)
class Comparison:
    master: Replica
    slave: Replica
    master_because: str
    shared: tuple[Shared, ...]
    """Epochs with the same start on both, ascending (the common prefix, unless old entries were deleted)."""
    first_difference: str | None
    """The first epoch entry that differs, in words; None when the caches agree entry for entry."""
    outcome: Outcome
    point: int | None
    """The offset the slave keeps up to (its truncation point); None when refused or unknown."""
    reasons: list[str] = field(default_factory=list)

    @property
    def truncated_bytes(self) -> int | None:
        """Bytes the slave would cut, when both the point and its max offset are known."""
        if self.point is None or self.slave.max_offset is None:
            return None
        return max(0, self.slave.max_offset - self.point)


def _end(value: int) -> int | None:
    return None if value == OPEN else value


def _show_end(value: int | None) -> str:
    return "its (unknown) max offset" if value is None else str(value)


def choose_master(a: Replica, b: Replica, named: str | None = None) -> tuple[Replica, Replica, str]:
    """(master, slave, why). `named` is "a" or "b" when the caller chose."""
    if named is not None:
        if named not in ("a", "b"):
            raise ValueError(f"the master must be 'a' or 'b' (got {named!r})")
        return (a, b, "named by --master") if named == "a" else (b, a, "named by --master")
    if a.role == "master" and b.role != "master":
        return a, b, "it is the live master"
    if b.role == "master" and a.role != "master":
        return b, a, "it is the live master"
    if b.last_epoch > a.last_epoch:
        return b, a, f"its last epoch {b.last_epoch} is newer than {a.last_epoch}"
    if a.last_epoch > b.last_epoch:
        return a, b, f"its last epoch {a.last_epoch} is newer than {b.last_epoch}"
    return a, b, "same last epoch: a plays the master (give --master b for the other way)"


def shared_epochs(master: Replica, slave: Replica) -> tuple[Shared, ...]:
    theirs = {e.epoch: (e.start_offset, end) for e, end in zip(master.entries, master.ends(), strict=True)}
    out = []
    for mine, my_end in zip(slave.entries, slave.ends(), strict=True):
        other = theirs.get(mine.epoch)
        if other is not None and other[0] == mine.start_offset:
            out.append(Shared(mine.epoch, mine.start_offset, _end(other[1]), _end(my_end)))
    return tuple(out)


def first_difference(master: Replica, slave: Replica) -> str | None:
    for i, (m, s) in enumerate(zip(master.entries, slave.entries, strict=False)):
        if (m.epoch, m.start_offset) != (s.epoch, s.start_offset):
            return (
                f"entry {i + 1}: the master has epoch {m.epoch} from {m.start_offset}, "
                f"the slave epoch {s.epoch} from {s.start_offset}"
            )
    more = master.entries[len(slave.entries) :] or slave.entries[len(master.entries) :]
    if not more:
        return None
    who = "master" if len(master.entries) > len(slave.entries) else "slave"
    extra = ", ".join(f"{e.epoch} from {e.start_offset}" for e in more)
    return f"only the {who} has epoch(s) {extra}"


def compare(a: Replica, b: Replica, *, master: str | None = None) -> Comparison:
    """What the slave (the replica not playing the master) would do on its next handshake."""
    m, s, because = choose_master(a, b, master)
    shared = shared_epochs(m, s)
    difference = first_difference(m, s)

    def result(outcome: Outcome, point: int | None, *reasons: str) -> Comparison:
        return Comparison(m, s, because, shared, difference, outcome, point, list(reasons))

    if m.last_epoch < s.last_epoch or (not m.entries and s.entries):
        return result(
            Outcome.STALE_MASTER,
            None,
            f"the master's last epoch {m.last_epoch} is older than the slave's {s.last_epoch}: "
            "the slave refuses it and cuts nothing (another replica was elected since)",
        )
    if not s.entries or s.max_offset == s.min_offset:
        why = "has no epoch entry" if not s.entries else f"has an empty log (at {s.min_offset})"
        cut = "" if s.max_offset == s.min_offset else f"; it cuts its log back to its start {s.min_offset} first"
        return result(
            Outcome.FROM_SCRATCH,
            s.min_offset,
            f"the slave {why}: it keeps nothing and replicates from the master's first byte{cut}",
        )
    slave_max = OPEN if s.max_offset is None else s.max_offset
    master_max = OPEN if m.max_offset is None else m.max_offset
    point = find_consistent_point(s.entries, slave_max, m.entries, master_max)
    if point < 0:
        return result(
            Outcome.NO_CONSISTENT_POINT,
            None,
            "no epoch of the slave's has the same start offset on the master: the slave refuses to "
            "replicate (rebuild it from an empty data directory)",
        )
    if point == OPEN:
        last = shared[-1]
        return result(
            Outcome.KEEP,
            None,
            f"both logs end in shared epoch {last.epoch} and neither max offset is known (no commitlog/ given): "
            f"the slave keeps what it has of epoch {last.epoch}, up to the shorter log's end",
        )
    match = shared[-1]  # find_consistent_point takes the newest shared epoch
    reasons = [
        f"newest shared epoch: {match.epoch} from {match.start_offset}, ending at "
        f"{_show_end(match.end_master)} on the master and {_show_end(match.end_slave)} on the slave: "
        f"consistent point {point}"
    ]
    if point < s.min_offset:
        reasons.append(f"the point is before the slave's log start {s.min_offset}: it refuses (rebuild it)")
        return result(Outcome.BEFORE_LOG_START, None, *reasons)
    starts = {e.epoch: e.start_offset for e in m.entries}
    stale = [e for e in s.entries if e.start_offset >= point and starts.get(e.epoch) != e.start_offset]
    if s.max_offset is None:
        reasons.append(f"the slave's max offset is unknown: it cuts whatever it holds past {point}")
        return result(Outcome.TRUNCATE, point, *reasons)
    if point < s.max_offset or stale:
        if point < s.max_offset:
            reasons.append(f"the slave cuts {s.max_offset - point} bytes [{point}, {s.max_offset})")
        if stale:
            reasons.append("and drops its epoch(s) " + ", ".join(f"{e.epoch} from {e.start_offset}" for e in stale))
        if s.confirm_offset is not None and point < s.confirm_offset:
            reasons.append(
                f"the cut goes below the slave's confirm offset {s.confirm_offset}: consumers of that replica "
                "may have read bytes that are now lost"
            )
        reasons.append(f"then it replicates from {point}")
        return result(Outcome.TRUNCATE, point, *reasons)
    reasons.append(f"the slave ends at {point}: nothing to cut, it replicates from there")
    return result(Outcome.KEEP, point, *reasons)


def parse_entries(source: str, rows: Sequence[object]) -> tuple[EpochEntry, ...]:
    """Epoch entries from JSON rows `{"epoch": int, "startOffset": int, ...}`. Raises ValueError."""
    out = []
    for row in rows:
        epoch, start = (row.get("epoch"), row.get("startOffset")) if isinstance(row, dict) else (None, None)
        if type(epoch) is not int or type(start) is not int:
            raise ValueError(f"{source}: an epoch entry must be an object with integer epoch and startOffset: {row!r}")
        out.append(EpochEntry(epoch, start))
    return tuple(out)


def wire(c: Comparison) -> dict[str, object]:
    """The comparison as JSON."""

    def side(r: Replica) -> dict[str, object]:
        return {
            "source": r.source,
            "role": r.role,
            "brokerId": r.broker_id,
            "minOffset": r.min_offset,
            "maxOffset": r.max_offset,
            "confirmOffset": r.confirm_offset,
            "epochs": [
                {"epoch": e.epoch, "startOffset": e.start_offset, "endOffset": _end(end)}
                for e, end in zip(r.entries, r.ends(), strict=True)
            ],
        }

    return {
        "master": side(c.master),
        "slave": side(c.slave),
        "masterBecause": c.master_because,
        "sharedEpochs": [
            {"epoch": x.epoch, "startOffset": x.start_offset, "endOnMaster": x.end_master, "endOnSlave": x.end_slave}
            for x in c.shared
        ],
        "firstDifference": c.first_difference,
        "outcome": c.outcome.name,
        "consistentPoint": c.point,
        "truncatedBytes": c.truncated_bytes,
        "reasons": c.reasons,
    }
