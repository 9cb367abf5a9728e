"""The history checker: what clients saw, and what the controllers decided, against our guarantees.

Pure: it takes the operations of a history (`brokergroup.chaos.history`) and the controller
event-log records of every node, and returns a verdict dict. No I/O, no clock.

The verdict's `status` is one of:
- INVALID: an anomaly below that the run does not tolerate (whatever else is missing);
- INCOMPLETE: no anomaly, but too little to say VALID (`incomplete` lists why): the history has
  no acknowledged send, or no topology record naming the replicas of each queue and the
  controllers; a queue lacks a successful final read from one of its replicas; a controller has
  no raft records in the event logs (split-brain and epoch checks would run on less than all);
  or a send or a read carries no body digest (bodies could not be compared); or a client process
  invoked an operation while its previous one was still open (a process does one at a time: its
  reads' order means nothing otherwise, and a poll begun twice at one position reads the same
  offsets twice, which `nonMonotonicPolls` then reports);
  a message missing from a final read of a replica that says retention deleted part of the queue
  has no known queue offset (neither read nor in its acknowledgement), so whether retention took
  it cannot be told;
- VALID: none of that.

Retention (issue 18): a read below a queue's min offset is answered with that min offset
(OFFSET_TOO_SMALL), and the history records the offsets `[from, to)` the reader was told are gone
(`skipped` of a poll, `brokergroup.chaos.history`). A message missing from a replica's final read
counts as deleted by retention, not lost, only when every queue offset it is known at (read, or
acknowledged) lies in a range that replica's final read was told is gone; a reader whose reads
jump over offsets without being told is an anomaly (`unreportedGaps`). `stats.retention` counts
what retention deleted before the final reads and before any consumer read it.

Anomalies in the clients' history (a message is `(queue, producerId, seq)`):
- lost: an acknowledged (`ok`) send missing from a final read of its queue (every replica is
  read in full at the end; without final reads, missing from every read);
- readThenLost: a message a consumer read (acknowledged or not) missing from a final read of its
  queue: readers must see only what survives (an acknowledged one is also `lost`);
- duplicated: one message read at two different offsets of its queue (by any readers);
- duplicatedInLog: one message stored at two offsets of one replica's final log (stricter than
  `duplicated`: readers of an async master may see a message that is truncated and then sent
  again, but no log may keep two copies);
- unexpected: a message read that no producer ever sent;
- bodyMismatch: a message read whose body digest differs from the digest of the body sent
  with that (producerId, seq);
- inconsistentOffsets: two different messages read at one offset of a queue (by any readers,
  from any replicas, at any time);
- nonMonotonicSends: a producer's acknowledgements out of sequence order, or a producer's
  messages stored out of sequence order in its queue;
- nonMonotonicPolls: a reader's offsets in one queue not strictly increasing;
- unreportedGaps: a poll (a consumer's or a final read) that read past offsets it neither read nor
  was told retention had deleted (a silently skipped message).

Anomalies in the controller event log (records deduplicated by `eventId`, raft events only,
ordered by (term, index)):
- splitBrain: two different masters recorded for one (broker set, master epoch);
- epochRegressions: a set's master epoch going down, or an ELECT_MASTER not raising it.

`tolerate` names anomalies that are counted and shown but do not make the verdict invalid:
async replication may lose acknowledged messages on failover (docs/broker.md), and then
readers may also have seen a truncated message at an offset that now holds another.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Collection, Iterable
from typing import Any

Op = dict[str, Any]
Message = tuple[str, int, int]  # queue, producerId, seq

ANOMALIES = (
    "lost",
    "readThenLost",
    "duplicated",
    "duplicatedInLog",
    "unexpected",
    "bodyMismatch",
    "inconsistentOffsets",
    "nonMonotonicSends",
    "nonMonotonicPolls",
    "unreportedGaps",
    "splitBrain",
    "epochRegressions",
)
FINAL_PREFIX = "final:"
TOPOLOGY = "topology"
VALID, INVALID, INCOMPLETE = "VALID", "INVALID", "INCOMPLETE"
EXIT_CODES = {VALID: 0, INVALID: 1, INCOMPLETE: 3}
"""Exit codes of `brokergroup chaos run` and `chaos check` per status (2 is a usage error)."""


class _Examples:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.counts: collections.Counter[str] = collections.Counter()
        self.shown: dict[str, list[Any]] = collections.defaultdict(list)

    def add(self, kind: str, example: Any) -> None:
        self.counts[kind] += 1
        if len(self.shown[kind]) < self.limit:
            self.shown[kind].append(example)


def _message(value: dict[str, Any]) -> Message:
    return (str(value["queue"]), int(value["producerId"]), int(value["seq"]))


class _Sends:
    """Each send's outcome; an invoke without a completion is indeterminate."""

    def __init__(self) -> None:
        self.outcome: dict[Message, str] = {}
        self.digest: dict[Message, str | None] = {}
        self.acked_order: dict[str, list[int]] = collections.defaultdict(list)
        self.acked_offset: dict[Message, int] = {}
        """Where the master said it stored an acknowledged message (`queueOffset` of the ok, when known)."""
        self.nemesis: collections.Counter[str] = collections.Counter()
        self.topology: dict[str, Any] | None = None
        self.ops = 0

    def feed(self, op: Op) -> None:
        self.ops += 1
        process, kind = str(op["process"]), op["type"]
        if op["f"] != "send":
            if process == "nemesis" and isinstance(op.get("value"), dict) and op["value"].get("phase") == "start":
                self.nemesis[str(op["f"])] += 1
            if op["f"] == TOPOLOGY and isinstance(op.get("value"), dict):
                self.topology = op["value"]
            return
        message = _message(op["value"])
        if kind == "invoke":
            self.outcome.setdefault(message, "open")
            self.digest.setdefault(message, op["value"].get("digest"))
            return
        current = self.outcome.get(message, "open")
        # One message may be sent more than once only by a buggy client; ok wins, then info (maybe).
        if current != "ok" and not (kind == "fail" and current == "info"):
            self.outcome[message] = str(kind)
        if kind == "ok":
            self.acked_order[process].append(message[2])
            if op["value"].get("queueOffset") is not None:
                self.acked_offset[message] = int(op["value"]["queueOffset"])

    @property
    def acked(self) -> set[Message]:
        return {m for m, o in self.outcome.items() if o == "ok"}


class _Reads:
    """Every message read, by whom and where."""

    def __init__(self) -> None:
        self.at_offset: dict[tuple[str, int], set[tuple[int, int]]] = collections.defaultdict(set)
        self.offsets_of: dict[Message, set[int]] = collections.defaultdict(set)
        self.by_process: dict[tuple[str, str], list[int]] = collections.defaultdict(list)
        self.final: dict[str, dict[str, set[Message]]] = collections.defaultdict(dict)
        self.final_failed: dict[tuple[str, str], str] = {}
        """(queue, replica) → why its last final read failed (an invoke without an ok counts)."""
        self.stored_twice: list[tuple[str, Message, int]] = []
        self.digests: dict[Message, set[str]] = collections.defaultdict(set)
        self.consumed: set[Message] = set()
        self.gone: dict[tuple[str, str], list[tuple[int, int]]] = collections.defaultdict(list)
        """(queue, reader process) → the offset ranges [from, to) the broker said retention had deleted."""
        self.gaps: list[dict[str, Any]] = []
        self.without_digest = 0
        self.total = 0

    def feed(self, op: Op) -> None:
        if op["f"] != "poll":
            return
        process, queue = str(op["process"]), str(op["value"]["queue"])
        final = process.startswith(FINAL_PREFIX)
        replica = process[len(FINAL_PREFIX) :]
        if op["type"] != "ok":
            if final and replica not in self.final.get(queue, {}):
                error = "no answer recorded" if op["type"] == "invoke" else op["value"].get("error", op["type"])
                self.final_failed[(queue, replica)] = str(error)
            return
        messages = op["value"].get("messages") or []
        gone = [(int(a), int(b)) for a, b in op["value"].get("skipped") or []]
        self.gone[(queue, process)] += gone
        if op["value"].get("offset") is not None:
            self._check_contiguous(process, queue, int(op["value"]["offset"]), messages, gone)
        if final:
            self.final_failed.pop((queue, replica), None)
            seen = self.final[queue].setdefault(replica, set())
            copies = collections.Counter((queue, int(m[1]), int(m[2])) for m in messages)
            seen.update(copies)
            self.stored_twice += [(replica, m, n) for m, n in copies.items() if n > 1]
        for offset, pid, seq, *digest in messages:
            offset, pid, seq = int(offset), int(pid), int(seq)
            self.total += 1
            self.at_offset[(queue, offset)].add((pid, seq))
            self.offsets_of[(queue, pid, seq)].add(offset)
            self.by_process[(process, queue)].append(offset)
            if not final:
                self.consumed.add((queue, pid, seq))
            if digest:
                self.digests[(queue, pid, seq)].add(str(digest[0]))
            else:
                self.without_digest += 1

    def _check_contiguous(
        self, process: str, queue: str, start: int, messages: list[Any], gone: list[tuple[int, int]]
    ) -> None:
        """A read from `start` covers its offsets without a hole: each message or told-deleted range begins
        where the one before ended."""
        spans = sorted([(int(m[0]), int(m[0]) + 1) for m in messages] + gone)
        at = start
        for begin, end in spans:
            if begin > at:
                self.gaps.append({"process": process, "queue": queue, "from": at, "to": begin})
            at = max(at, end)

    def expired_on(self, queue: str, reader: str, offsets: Collection[int]) -> bool:
        """Every offset in `offsets` lies in a range `reader` was told retention deleted (False when none)."""
        ranges = self.gone.get((queue, reader), [])
        return bool(offsets) and all(any(a <= o < b for a, b in ranges) for o in offsets)


class _OpenOps:
    """Client processes (sends and polls) that invoked an operation while their previous one was open."""

    def __init__(self) -> None:
        self.open: dict[str, int] = {}
        self.overlaps: dict[str, list[int]] = collections.defaultdict(list)
        """process → the times of the invokes made while another was open."""

    def feed(self, op: Op) -> None:
        if op["f"] not in ("send", "poll"):
            return
        process = str(op["process"])
        if op["type"] != "invoke":
            self.open.pop(process, None)
            return
        if process in self.open:
            self.overlaps[process].append(int(op.get("time", 0)))
        self.open[process] = int(op.get("time", 0))

    def problems(self) -> list[str]:
        return [
            f"process {process} invoked {len(times)} operations while its previous one was open "
            f"(first at {times[0] / 1e9:.3f} s): one operation at a time per process, or its order means nothing"
            for process, times in sorted(self.overlaps.items())
        ]


def _check_history(sends: _Sends, reads: _Reads, found: _Examples) -> dict[str, Any]:
    acked = sends.acked
    for process, seqs in sends.acked_order.items():
        for before, after in itertools.pairwise(seqs):
            if after <= before:
                found.add("nonMonotonicSends", {"process": process, "ackedSeq": after, "after": before})
    retention = _Retention()
    for message in sorted(acked):
        queue = message[0]
        finals = reads.final.get(queue)
        if finals:
            missing = [replica for replica, seen in finals.items() if message not in seen]
            offsets = _offsets(message, sends, reads)
            lost = sorted(r for r in missing if not retention.took(message, f"{FINAL_PREFIX}{r}", offsets, reads))
            if lost:
                found.add("lost", {"message": list(message), "missingFrom": lost})
        elif message not in reads.offsets_of:
            found.add("lost", {"message": list(message), "missingFrom": ["every read"]})
        told = [
            process
            for (q, process) in reads.gone
            if q == queue
            and not process.startswith(FINAL_PREFIX)
            and reads.expired_on(queue, process, _offsets(message, sends, reads))
        ]
        for process in told:
            retention.told_consumer[process] += 1
        if told and message not in reads.consumed:
            retention.unread.add(message)
    for message in sorted(reads.consumed):
        finals_of = reads.final.get(message[0], {})
        offsets = reads.offsets_of[message]
        missing = sorted(
            r
            for r, seen in finals_of.items()
            if message not in seen and not retention.took(message, f"{FINAL_PREFIX}{r}", offsets, reads)
        )
        if missing:
            found.add("readThenLost", {"message": list(message), "missingFrom": missing})
    for gap in reads.gaps:
        found.add("unreportedGaps", gap)
    for message, offsets in sorted(reads.offsets_of.items()):
        if len(offsets) > 1:
            found.add("duplicated", {"message": list(message), "offsets": sorted(offsets)})
        if message not in sends.outcome:
            found.add("unexpected", {"message": list(message), "offsets": sorted(offsets)})
    for message, digests in sorted(reads.digests.items()):
        sent = sends.digest.get(message)
        if sent and digests != {sent}:
            found.add("bodyMismatch", {"message": list(message), "sent": sent, "read": sorted(digests)})
    for replica, message, copies in reads.stored_twice:
        found.add("duplicatedInLog", {"replica": replica, "message": list(message), "copies": copies})
    for (queue, offset), values in sorted(reads.at_offset.items()):
        if len(values) > 1:
            found.add("inconsistentOffsets", {"queue": queue, "offset": offset, "messages": sorted(values)})
    for (process, queue), read_offsets in sorted(reads.by_process.items()):
        for before, after in itertools.pairwise(read_offsets):
            if after <= before:
                found.add("nonMonotonicPolls", {"process": process, "queue": queue, "offset": after, "after": before})
    _check_log_order(reads, found)
    outcomes = collections.Counter(sends.outcome.values())
    read_ids = set(reads.offsets_of)
    return {
        "sendsInvoked": len(sends.outcome),
        "sendsOk": outcomes["ok"],
        "sendsFailed": outcomes["fail"],
        "sendsIndeterminate": outcomes["info"] + outcomes["open"],
        "indeterminateSendsRead": sum(1 for m, o in sends.outcome.items() if o in ("info", "open") and m in read_ids),
        "messagesRead": reads.total,
        "distinctMessagesRead": len(read_ids),
        "finalReads": {q: {r: len(s) for r, s in sorted(rs.items())} for q, rs in sorted(reads.final.items())},
        "faults": dict(sorted(sends.nemesis.items())),
        "retention": retention.stats(reads, sends.acked),
    }


def _offsets(message: Message, sends: _Sends, reads: _Reads) -> set[int]:
    """Every queue offset a message is known at: where readers read it and where its acknowledgement put it."""
    known = set(reads.offsets_of.get(message, ()))
    if message in sends.acked_offset:
        known.add(sends.acked_offset[message])
    return known


class _Retention:
    """What retention deleted before the final reads and before the consumers, as the broker said."""

    def __init__(self) -> None:
        self.before_final: dict[str, set[Message]] = collections.defaultdict(set)
        """final reader → messages missing from its read that lie in what it was told is deleted."""
        self.unknown: dict[str, set[Message]] = collections.defaultdict(set)
        """final reader → missing messages whose offset nobody knows, from a replica whose head is deleted."""
        self.unread: set[Message] = set()
        """Acknowledged messages no consumer read, which a consumer was told retention had deleted."""
        self.told_consumer: collections.Counter[str] = collections.Counter()
        """consumer → acknowledged messages it was told retention had deleted before it read them."""

    def took(self, message: Message, reader: str, offsets: set[int], reads: _Reads) -> bool:
        if reads.expired_on(message[0], reader, offsets):
            self.before_final[reader].add(message)
            return True
        if not offsets and reads.gone.get((message[0], reader)):
            self.unknown[reader].add(message)
            return True  # not counted as lost: the run is INCOMPLETE instead (`_incompleteness`)
        return False

    def stats(self, reads: _Reads, acked: set[Message]) -> dict[str, Any]:
        told = {
            f"{queue} {reader}": sum(b - a for a, b in ranges) for (queue, reader), ranges in sorted(reads.gone.items())
        }
        return {
            "offsetsToldDeleted": {k: v for k, v in told.items() if v},
            "ackedDeletedBeforeFinalRead": {r: len(m) for r, m in sorted(self.before_final.items())},
            "ackedDeletedBeforeConsumerRead": dict(sorted(self.told_consumer.items())),
            "ackedDeletedBeforeAnyConsumerRead": len(self.unread & acked),
            "missingWithUnknownOffset": {r: len(m) for r, m in sorted(self.unknown.items())},
        }


def _check_log_order(reads: _Reads, found: _Examples) -> None:
    """Within a queue, each producer's messages must be stored in sequence order."""
    by_producer: dict[tuple[str, int], list[tuple[int, int]]] = collections.defaultdict(list)
    for (queue, offset), values in reads.at_offset.items():
        if len(values) == 1:  # an inconsistent offset is already reported
            (pid, seq) = next(iter(values))
            by_producer[(queue, pid)].append((offset, seq))
    for (queue, pid), stored in sorted(by_producer.items()):
        stored.sort()
        for (_, before), (offset, after) in itertools.pairwise(stored):
            if after < before:
                found.add(
                    "nonMonotonicSends",
                    {"queue": queue, "producerId": pid, "seq": after, "storedAfterSeq": before, "offset": offset},
                )


def dedup_events(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Raft events of all nodes, each once (by eventId), in (term, index) order; a batch keeps its order."""
    seen: set[str] = set()
    out: list[tuple[int, int, int, dict[str, Any]]] = []
    for position, record in enumerate(records):
        if record.get("source") != "raft" or record.get("eventId") in seen:
            continue
        seen.add(str(record["eventId"]))
        out.append((int(record["term"]), int(record["index"]), position, record))
    out.sort(key=lambda t: (t[0], t[1], t[2]))
    return [r for *_, r in out]


def _incompleteness(sends: _Sends, reads: _Reads, event_nodes: set[str]) -> list[str]:
    """Why the history and event logs are too little to call a run VALID (empty when they suffice)."""
    why: list[str] = []
    if sends.ops == 0:
        why.append("the history is empty")
    elif not sends.acked:
        why.append("no send was acknowledged: there is nothing to check")
    topology = sends.topology
    if topology is None:
        why.append(
            "the history has no topology record naming each queue's replicas and the controllers, "
            "so missing final reads and event logs cannot be told apart from absent ones"
        )
    else:
        queues = {str(q): [str(r) for r in rs] for q, rs in dict(topology.get("queues") or {}).items()}
        controllers = [str(c) for c in topology.get("controllers") or []]
        if not queues:
            why.append("the topology record names no queue")
        if not controllers:
            why.append("the topology record names no controller")
        why += [
            f"sends to {q}, a queue the topology does not name"
            for q in sorted({m[0] for m in sends.outcome} - set(queues))
        ]
        for queue, replicas in sorted(queues.items()):
            for replica in replicas:
                if replica in reads.final.get(queue, {}):
                    continue
                failed = reads.final_failed.get((queue, replica))
                why.append(
                    f"the final read of {queue} from {replica} failed: {failed}"
                    if failed
                    else f"no final read of {queue} from {replica}"
                )
        why += [f"no controller event-log records from {c}" for c in controllers if c not in event_nodes]
    if not event_nodes:
        why.append("no controller event-log records: the split-brain and epoch checks ran on nothing")
    unsigned = sum(1 for digest in sends.digest.values() if not digest)
    if unsigned:
        why.append(f"{unsigned} sends carry no body digest: their bodies cannot be compared")
    if reads.without_digest:
        why.append(f"{reads.without_digest} messages were read without a body digest: their bodies cannot be compared")
    return why


def _check_events(records: Iterable[dict[str, Any]], found: _Examples) -> dict[str, Any]:
    events = dedup_events(records)
    masters: dict[tuple[str, int], set[int]] = collections.defaultdict(set)
    last_epoch: dict[str, int] = {}
    last_elect_epoch: dict[str, int] = {}
    elections = collections.Counter[str]()
    for e in events:
        name, epoch = e.get("brokerName"), e.get("masterEpoch")
        if name is None or epoch is None:
            continue
        where = {"brokerName": name, "masterEpoch": epoch, "term": e["term"], "index": e["index"], "type": e["type"]}
        if e.get("masterBrokerId") is not None:
            masters[(name, epoch)].add(int(e["masterBrokerId"]))
        if epoch < last_epoch.get(name, -1):
            found.add("epochRegressions", {**where, "previous": last_epoch[name]})
        if e["type"] == "ELECT_MASTER":
            elections[str(e.get("electionResult"))] += 1
            if epoch <= last_elect_epoch.get(name, -1):
                found.add("epochRegressions", {**where, "previousElection": last_elect_epoch[name]})
            last_elect_epoch[name] = max(epoch, last_elect_epoch.get(name, epoch))
        last_epoch[name] = max(epoch, last_epoch.get(name, epoch))
    for (name, epoch), ids in sorted(masters.items()):
        if len(ids) > 1:
            found.add("splitBrain", {"brokerName": name, "masterEpoch": epoch, "masters": sorted(ids)})
    return {
        "controllerEvents": len(events),
        "elections": dict(sorted(elections.items())),
        "masterEpochs": dict(sorted(last_epoch.items())),
    }


def check(
    history: Iterable[Op],
    events: Iterable[dict[str, Any]] = (),
    *,
    tolerate: Collection[str] = (),
    max_examples: int = 10,
) -> dict[str, Any]:
    """The verdict: `status` (VALID, INVALID or INCOMPLETE) and `valid`, why it is incomplete, a count
    per anomaly, examples of each, and statistics."""
    unknown = set(tolerate) - set(ANOMALIES)
    if unknown:
        raise ValueError(f"unknown anomalies to tolerate: {sorted(unknown)}; known: {list(ANOMALIES)}")
    found = _Examples(max_examples)
    sends, reads, open_ops = _Sends(), _Reads(), _OpenOps()
    for op in history:
        sends.feed(op)
        reads.feed(op)
        open_ops.feed(op)
    records = list(events)
    event_nodes = {str(r.get("node")) for r in records if r.get("source") == "raft"}
    stats = {**_check_history(sends, reads, found), **_check_events(records, found)}
    stats["eventLogNodes"] = sorted(event_nodes)
    anomalies = {kind: found.counts[kind] for kind in ANOMALIES}
    failing = sorted(kind for kind, n in anomalies.items() if n and kind not in tolerate)
    incomplete = _incompleteness(sends, reads, event_nodes) + open_ops.problems()
    incomplete += [
        f"{n} acknowledged messages are missing from the final read {reader} of a queue whose head retention "
        "deleted, and their queue offsets are unknown (never read, no offset in the acknowledgement): deleted "
        "or lost cannot be told"
        for reader, n in stats["retention"]["missingWithUnknownOffset"].items()
    ]
    status = INVALID if failing else INCOMPLETE if incomplete else VALID
    return {
        "status": status,
        "valid": status == VALID,
        "incomplete": incomplete,
        "failing": failing,
        "tolerated": sorted(tolerate),
        "anomalies": anomalies,
        "examples": {kind: found.shown[kind] for kind in ANOMALIES if found.shown.get(kind)},
        "stats": stats,
    }
