"""The audit's findings once more, as plain Python over lists of dicts.

The same rules as the Spark transforms (their module docstrings state them), written the
obvious way: sort, loop, compare with the previous record. It is the oracle of the unit
tests, and `--fail-on-violations` runs it on small inputs as a cross-check of the Spark job,
reading the files itself. It imports neither Spark nor anything that does I/O.

Records are dicts as the controller writes them (`contract.FIELDS`); `dedupe` turns the
lines of every node into events with `copies`, `conflicting` and `nodes`, like
`transform.prepare`.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

from brokergroup.spark import contract
from brokergroup.spark.params import AuditParams

Record = dict[str, Any]
Finding = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class LineStats:
    lines: int
    events: int
    duplicates: int
    invalid: int
    conflicting: int


def _fits(kind: str, value: object) -> bool:
    if kind in ("int", "long"):
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    return isinstance(value, list) and all(_fits("long", v) for v in value)


def is_valid(record: Record) -> bool:
    """The checks of `transform.prepare.is_valid`, on one parsed line."""
    for name, (kind, nullable) in contract.FIELDS.items():
        value = record.get(name)
        if value is None and not nullable:
            return False
        if value is not None and not _fits(kind, value):
            return False
    if record["schemaVersion"] != contract.SCHEMA_VERSION:
        return False
    if record.get("electionResult") not in (None, *contract.ELECTION_RESULTS):
        return False
    if record["source"] == "raft":
        return record["type"] in contract.RAFT_TYPES and record.get("index") is not None
    return record["source"] == "local" and record["type"] in contract.LOCAL_TYPES and record.get("index") is None


def _content(record: Record) -> tuple[object, ...]:
    return tuple(tuple(v) if isinstance(v, list) else v for v in (record.get(c) for c in contract.CONTENT_COLUMNS))


def dedupe(records: Iterable[Record]) -> tuple[list[Record], LineStats]:
    """One event per eventId (the copy of the smallest node id), and counts of what was dropped."""
    groups: dict[str, list[Record]] = defaultdict(list)
    lines = invalid = 0
    for record in records:
        lines += 1
        if is_valid(record):
            groups[record["eventId"]].append(record)
        else:
            invalid += 1
    events = []
    for copies in groups.values():
        chosen = min(copies, key=lambda c: str(c["node"]))
        event: Record = {c: chosen.get(c) for c in contract.EVENT_COLUMNS}
        event["copies"] = len(copies)
        event["conflicting"] = len({_content(c) for c in copies}) > 1
        event["nodes"] = sorted({str(c["node"]) for c in copies})
        events.append(event)
    duplicates = sum(int(e["copies"]) - 1 for e in events)
    conflicting = sum(1 for e in events if e["conflicting"])
    return events, LineStats(lines, len(events), duplicates, invalid, conflicting)


def raft_key(e: Record) -> tuple[int, int, int, str]:
    """(term, index, position, eventId): a record without a position (written before group commit,
    one batch per entry) sorts first in its index, then by eventId as it did."""
    position = e.get("position")
    return (e["term"], e["index"], -1 if position is None else position, e["eventId"])


def local_key(e: Record) -> tuple[int, str]:
    return (e["ts"], e["eventId"])


def set_raft(events: Iterable[Record]) -> dict[str, list[Record]]:
    """Raft events per broker set, in (term, index, position, eventId) order."""
    sets: dict[str, list[Record]] = defaultdict(list)
    for e in events:
        if e["source"] == "raft" and e["brokerName"] is not None:
            sets[e["brokerName"]].append(e)
    return {name: sorted(rows, key=raft_key) for name, rows in sorted(sets.items())}


def finding(kind: str, detail: str = "", **key: object) -> Finding:
    row: Finding = dict.fromkeys(contract.FINDING_COLUMNS)
    row.update(kind=kind, severity=contract.FINDING_KINDS[kind], detail=detail, **key)
    return row


def at(e: Record) -> dict[str, object]:
    """The finding columns that place a record: set, term, index, ts."""
    return {"brokerName": e["brokerName"], "term": e["term"], "index": e["index"], "ts": e["ts"]}


# -- elections and epochs ---------------------------------------------------------------------


def derive_unclean(election: Record, previous: Record | None) -> bool | None:
    if election["electionResult"] != "new_master_elected":
        return False
    if previous is not None:
        if (previous["masterEpoch"] or 0) == 0:
            return False
        if election["masterBrokerId"] is None:
            return None
        return election["masterBrokerId"] not in (previous["syncStateSet"] or [])
    return False if election["masterEpoch"] == 1 else None


def elections(events: Iterable[Record]) -> list[Record]:
    out = []
    for rows in set_raft(events).values():
        previous: Record | None = None
        for e in rows:
            if e["type"] == "ELECT_MASTER":
                derived = derive_unclean(e, previous)
                out.append(
                    {
                        **e,
                        "previousSyncStateSet": previous["syncStateSet"] if previous else None,
                        "controllerUnclean": e["unclean"],
                        "derivedUnclean": derived,
                    }
                )
            previous = e
    return out


def unclean_findings(elections_list: Iterable[Record]) -> Iterator[Finding]:
    for e in elections_list:
        where = {**at(e), "brokerId": e["masterBrokerId"], "value": e["masterEpoch"]}
        if e["controllerUnclean"] or e["derivedUnclean"]:
            yield finding(
                "unclean_election", f"broker {e['masterBrokerId']} not in {e['previousSyncStateSet']}", **where
            )
        if e["derivedUnclean"] is not None and e["derivedUnclean"] != e["controllerUnclean"]:
            yield finding("unclean_flag_mismatch", f"controller {e['controllerUnclean']}", **where)


def segments(rows: list[Record]) -> Iterator[tuple[int, Record]]:
    """(segment, record): a segment ends after a CLEAN_BROKER_DATA that removed the set."""
    segment = 0
    for e in rows:
        yield segment, e
        if e["type"] == "CLEAN_BROKER_DATA" and e["masterEpoch"] is None:
            segment += 1


def epoch_findings(events: Iterable[Record]) -> Iterator[Finding]:
    for rows in set_raft(events).values():
        by_segment: dict[int, list[Record]] = defaultdict(list)
        for segment, e in segments(rows):
            if e["masterEpoch"] is not None:
                by_segment[segment].append(e)
        for seq in by_segment.values():
            yield from _epoch_steps(seq)
            yield from _split_brain(seq)


def _epoch_steps(seq: list[Record]) -> Iterator[Finding]:
    for previous, e in itertools.pairwise(seq):
        d = e["masterEpoch"] - previous["masterEpoch"]
        elect = e["type"] == "ELECT_MASTER" and e["electionResult"] != "keep_current_master"
        other_master = (
            previous["masterBrokerId"] is not None
            and e["masterBrokerId"] is not None
            and previous["masterBrokerId"] != e["masterBrokerId"]
        )
        detail = f"masterEpoch {e['masterEpoch']} after {previous['masterEpoch']} ({e['type']})"
        if (elect and d > 1) or (not elect and d > 0):
            yield finding("epoch_gap", detail, **at(e), value=e["masterEpoch"])
        if (elect and d <= 0 and not (d == 0 and other_master)) or (not elect and d < 0):
            yield finding("epoch_regression", detail, **at(e), value=e["masterEpoch"])


def _split_brain(seq: list[Record]) -> Iterator[Finding]:
    by_epoch: dict[int, list[Record]] = defaultdict(list)
    for e in seq:
        if e["masterBrokerId"] is not None:
            by_epoch[e["masterEpoch"]].append(e)
    for epoch, rows in by_epoch.items():
        masters = sorted({e["masterBrokerId"] for e in rows})
        if len(masters) > 1:
            first = next(e for e in rows if e["masterBrokerId"] != rows[0]["masterBrokerId"])
            detail = f"masters {masters} in masterEpoch {epoch}"
            yield finding("split_brain", detail, **at(first), brokerId=first["masterBrokerId"], value=epoch)


# -- completeness and the controller ------------------------------------------------------------


def positions(events: Iterable[Record]) -> dict[tuple[int, int], tuple[int, set[str]]]:
    """(term, index) -> (earliest ts, nodes) over raft events."""
    out: dict[tuple[int, int], tuple[int, set[str]]] = {}
    for e in events:
        if e["source"] == "raft":
            key = (e["term"], e["index"])
            ts, nodes = out.get(key, (e["ts"], set()))
            out[key] = (min(ts, e["ts"]), nodes | set(e["nodes"]))
    return out


def gap_findings(events: list[Record]) -> Iterator[Finding]:
    where = positions(events)
    by_term: dict[int, list[int]] = defaultdict(list)
    for term, index in where:
        by_term[term].append(index)
    for term, indices in by_term.items():
        indices.sort()
        for index, following in itertools.pairwise(indices):
            if following - index > 1:
                ts = where[(term, index)][0]
                yield finding("index_gap", "", term=term, index=index + 1, ts=ts, value=following - index - 1)
    yield from _node_gaps(where)


def _node_gaps(where: dict[tuple[int, int], tuple[int, set[str]]]) -> Iterator[Finding]:
    ranges: dict[str, list[int]] = {}
    for (_, index), (_, nodes) in where.items():
        for node in nodes:
            lo, hi = ranges.get(node, [index, index])
            ranges[node] = [min(lo, index), max(hi, index)]
    for node, (lo, hi) in sorted(ranges.items()):
        missing: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for (term, index), (ts, nodes) in where.items():
            if lo < index < hi and node not in nodes:
                missing[term].append((index, ts))
        for term, rows in missing.items():
            rows.sort()
            runs: list[list[tuple[int, int]]] = []
            for index, ts in rows:
                if runs and runs[-1][-1][0] == index - 1:
                    runs[-1].append((index, ts))
                else:
                    runs.append([(index, ts)])
            for run in runs:
                ts = min(t for _, t in run)
                yield finding("node_gap", "", node=node, term=term, index=run[0][0], ts=ts, value=len(run))


def conflict_findings(events: Iterable[Record]) -> Iterator[Finding]:
    for e in events:
        if e["conflicting"]:
            yield finding("conflicting_record", e["eventId"], **at(e), value=e["copies"])


def term_conflict_findings(events: Iterable[Record]) -> Iterator[Finding]:
    claims: dict[int, list[Record]] = defaultdict(list)
    for e in events:
        if e["type"] == "CONTROLLER_LEADER_CHANGED":
            claims[e["term"]].append(e)
    for term, rows in claims.items():
        nodes = {e["node"] for e in rows}
        if len(nodes) > 1:
            ts = min(e["ts"] for e in rows)
            yield finding("controller_term_conflict", str(sorted(nodes)), term=term, ts=ts, value=len(nodes))


# -- risk windows and flapping --------------------------------------------------------------------


def risk_windows(events: list[Record], params: AuditParams) -> list[Record]:
    threshold = max(2, params.min_in_sync_replicas)
    horizon = max((e["ts"] for e in events), default=0)
    windows: list[Record] = []
    for rows in set_raft(events).values():
        current: Record | None = None
        for e in rows:
            sss = e["syncStateSet"]
            risk = e["masterBrokerId"] is not None and sss is not None and len(sss) < threshold
            if risk and current is None:
                current = {**at(e), "brokerId": e["masterBrokerId"], "minSize": len(sss), "open": False}
            elif risk and current is not None:
                current["minSize"] = min(current["minSize"], len(sss))
            elif not risk and current is not None:
                windows.append({**current, "endMs": e["ts"]})
                current = None
        if current is not None:
            windows.append({**current, "endMs": horizon, "open": True})
    for w in windows:
        w["durationMs"] = w["endMs"] - w["ts"]
    return windows


def long_window_findings(windows: Iterable[Record], params: AuditParams) -> Iterator[Finding]:
    for w in windows:
        if w["durationMs"] >= params.long_risk_window_ms:
            key = {k: w[k] for k in ("brokerName", "brokerId", "term", "index", "ts")}
            yield finding("long_risk_window", f"{w['durationMs']} ms", **key, value=w["durationMs"])


def flapping_findings(events: Iterable[Record], params: AuditParams) -> Iterator[Finding]:
    observed: dict[tuple[str, int], list[Record]] = defaultdict(list)
    kinds = (*contract.LOSS_TYPES, "BROKER_ACTIVE")
    for e in events:
        if e["source"] == "local" and e["type"] in kinds and e["brokerName"] is not None and e["brokerId"] is not None:
            observed[(e["brokerName"], e["brokerId"])].append(e)
    for (name, broker), rows in sorted(observed.items()):
        times, state = [], "active"
        for e in sorted(rows, key=local_key):
            now = "active" if e["type"] == "BROKER_ACTIVE" else "lost"
            if now != state:
                times.append(e["ts"])
            state = now
        counts = [bisect.bisect_right(times, t) - bisect.bisect_left(times, t - params.flap_window_ms) for t in times]
        flapping_at = [t for t, n in zip(times, counts, strict=True) if n >= params.flap_threshold]
        if flapping_at:
            yield finding("flapping_broker", "", brokerName=name, brokerId=broker, ts=flapping_at[0], value=max(counts))


def audit_findings(records: Iterable[Record], params: AuditParams) -> list[Finding]:
    """Every finding of the audit, from the raw lines of all nodes."""
    events, _ = dedupe(records)
    found = [
        *unclean_findings(elections(events)),
        *epoch_findings(events),
        *conflict_findings(events),
        *term_conflict_findings(events),
        *gap_findings(events),
        *long_window_findings(risk_windows(events, params), params),
        *flapping_findings(events, params),
    ]
    return sorted(found, key=finding_key)


def finding_key(f: Finding) -> tuple[tuple[bool, object], ...]:
    """What identifies a finding (`contract.FINDING_KEY`), sortable: None first in each column."""
    return tuple((f[c] is not None, 0 if f[c] is None else f[c]) for c in contract.FINDING_KEY)
