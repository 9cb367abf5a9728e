"""The pysyncobj adapter: the replicated state machine and the Raft node.

Everything camelCase from pysyncobj is wrapped here once. The replicated method is
`StateMachine._apply_batch(entry_json)`: it receives a JSON string (so the only thing
pysyncobj pickles is a `str`), is deterministic (time, ids, term come inside the batch), and
applies batches of events computed by the leader (`core`). An entry is one batch (the format
before group commit, still read from old journals) or a group of batches of different broker
sets (`encode_group`), applied in order. A batch carries its set's state version it was
computed against; a batch computed on a stale state is refused on every node alike (in a
group, that batch alone), and the leader recomputes. pysyncobj snapshots (`fullDumpFile`)
hold the state as JSON too.

Apply runs on pysyncobj's thread. `StateMachine.lock` guards the state; readers on the
asyncio side take it through `read()`. Apply results reach asyncio only through `bridge`.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pysyncobj.pickle
from pysyncobj import SyncObjConf, SyncObjConsumer, replicated

from brokergroup.common.durable import durable_mkdir, fsync_path
from brokergroup.controller import core, model, raft_fixes, records
from brokergroup.controller.journal import DurableJournal, Entry, OsDisk
from brokergroup.controller.raft_fixes import BackgroundSnapshots, FixedSyncObj
from brokergroup.controller.settings import ControllerSettings

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Batch:
    """Events computed by the leader for one request, with the context every node needs."""

    batch_id: str
    term: int
    ts_ms: int
    leader: str
    expect_version: int | None
    """Version of the broker set's state the events were computed against; None for a barrier."""
    events: tuple[model.Event, ...] = ()
    request: str = ""
    reason: str | None = None
    broker_name: str | None = None
    """The broker set every event of the batch belongs to; requests never span sets."""

    def to_body(self) -> dict[str, Any]:
        body = {name: getattr(self, name) for name in model.field_names(Batch)}
        body["events"] = [e.to_dict() for e in self.events]
        return body

    def to_json(self) -> str:
        return json.dumps(self.to_body(), separators=(",", ":"))

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> Batch:
        body = {**body, "events": tuple(model.event_from_dict(e) for e in body["events"])}
        return cls(**body)

    @classmethod
    def from_json(cls, text: str) -> Batch:
        return cls.from_body(json.loads(text))


GROUP_ENTRY_FORMAT = 2
"""The Raft entry format of group entries; this code applies formats 1 (one batch) and 2. A leader
sends format 2 only once every other node says it applies it (`peerformat`, GET /v1/status)."""

GROUP_KEY = "batches"
"""The key of a group entry's JSON object (a single batch's object has no such key)."""


def encode_group(batches: tuple[Batch, ...]) -> str:
    """One Raft entry carrying `batches`, applied in this order, each with its own version check."""
    if not batches:
        raise ValueError("a group entry needs at least one batch")
    return json.dumps({GROUP_KEY: [b.to_body() for b in batches]}, separators=(",", ":"))


def decode_entry(text: str) -> tuple[tuple[Batch, ...], bool]:
    """The batches of an entry and whether it is a group (False: one batch, the format before groups)."""
    body = json.loads(text)
    if GROUP_KEY in body:
        return tuple(Batch.from_body(b) for b in body[GROUP_KEY]), True
    return (Batch.from_body(body),), False


@dataclasses.dataclass(frozen=True)
class Applied:
    """What applying one Raft entry did, handed to listeners (event log, feed, waiters)."""

    batches: tuple[Batch, ...]
    index: int
    applied: tuple[bool, ...]
    """Per batch: whether its version check passed and its events were applied."""
    version: int
    records: tuple[dict[str, Any], ...]


class StateMachine(SyncObjConsumer):  # type: ignore[misc]
    def __init__(self, listener: Callable[[Applied], None]) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self._listener = listener
        # Replicated data (saved in snapshots): the state and its version.
        self._state = model.ControllerState()
        self._version = 0
        self._set_versions: dict[str, int] = {}
        self._applied_index = 0
        """Raft index of the last command applied to this machine (or of the snapshot it was loaded from)."""

    # -- snapshots: JSON, not pickled objects -------------------------------------------------
    def capture(self) -> Captured:
        """A copy of the replicated data, cheap enough for pysyncobj's tick thread (about 1 ms at 2,000
        sets: flat tuples, no sorting, no encoding; `Captured.pieces` does the rest on any thread)."""
        with self.lock:
            return Captured(
                replicas=[
                    (name, r.cluster_name, r.next_assign_broker_id, r.broker_id_info.copy())
                    for name, r in self._state.replica_info.items()
                ],
                syncs=[
                    (
                        name,
                        s.cluster_name,
                        s.master_broker_id,
                        s.master_epoch,
                        tuple(s.sync_state_set),
                        s.sync_state_set_epoch,
                    )
                    for name, s in self._state.sync_state_info.items()
                ],
                version=self._version,
                set_versions=dict(self._set_versions),
            )

    def _serialize(self) -> dict[str, Any]:
        return {"json": "".join(self.capture().pieces())}

    def _deserialize(self, data: dict[str, Any], *, index: int = 0) -> None:
        body = json.loads(data["json"])
        with self.lock:
            self._state = model.ControllerState.from_dict(body["state"])
            self._version = int(body["version"])
            self._set_versions = {str(k): int(v) for k, v in body["setVersions"].items()}
            self._applied_index = index

    # -- reads ----------------------------------------------------------------------------------
    def digest(self, raft_last_applied: Callable[[], int]) -> tuple[int, str]:
        """(last applied index, sha256 of the canonical JSON of state, version and set versions), atomically.

        Entries that are not commands (no-ops) leave the state alone, so the digest at pysyncobj's
        last-applied index is the digest after the last command at or below it; while a command is
        being applied the lock is held, and the index reported is at least that command's."""
        with self.lock:
            body = {"state": self._state.to_dict(), "version": self._version, "setVersions": self._set_versions}
            index = max(raft_last_applied(), self._applied_index)
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return index, hashlib.sha256(text.encode()).hexdigest()

    def read(self, fn: Callable[[model.ControllerState, int], T]) -> T:
        """Run a pure function over the state and its version under the lock."""
        with self.lock:
            return fn(self._state, self._version)

    def read_for_set(self, broker_name: str, fn: Callable[[model.ControllerState], T]) -> tuple[T, int]:
        """Run `fn` over the state and return its result with the broker set's version, atomically."""
        with self.lock:
            return fn(self._state), self._set_versions.get(broker_name, 0)

    # -- the replicated method --------------------------------------------------------------------
    @replicated  # type: ignore[untyped-decorator]
    def _apply_batch(self, entry_json: str) -> dict[str, Any]:
        batches, grouped = decode_entry(entry_json)
        index = int(self._syncObj.raftLastApplied) + 1
        out: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        with self.lock:
            for batch in batches:
                name = batch.broker_name or ""
                applied = batch.expect_version is None or batch.expect_version == self._set_versions.get(name, 0)
                if applied:
                    for position, event in enumerate(batch.events):
                        unclean = records.is_unclean(self._state, event)
                        core.apply_event(self._state, event)
                        out.append(
                            records.raft_record(
                                event=event,
                                state_after=self._state,
                                unclean=unclean,
                                batch_id=batch.batch_id,
                                position=position,
                                entry_position=len(out),
                                ts_ms=batch.ts_ms,
                                term=batch.term,
                                index=index,
                                reason=batch.reason,
                            )
                        )
                    if batch.events:
                        self._version += 1
                        self._set_versions[name] = self._set_versions.get(name, 0) + 1
                results.append({"applied": applied, "version": self._version, "index": index})
            version = self._version
            self._applied_index = index
        try:
            self._listener(Applied(batches, index, tuple(r["applied"] for r in results), version, tuple(out)))
        except Exception:
            logger.exception("apply listener failed for entry %s", index)
        if grouped:
            return {"index": index, "version": version, "results": results}
        return results[0]


SNAPSHOT_PIECE_SETS = 64
_Row = TypeVar("_Row", bound=tuple[Any, ...])
"""Broker sets encoded per piece of a snapshot: a background writer lets the tick thread run between pieces."""


@dataclasses.dataclass(frozen=True)
class Captured:
    """The machine's replicated data at one applied index, copied by `StateMachine.capture`."""

    replicas: list[tuple[str, str, int, dict[int, tuple[str, str]]]]
    """(broker name, cluster, next broker id to assign, broker id -> (address, register check code))"""
    syncs: list[tuple[str, str, int | None, int, tuple[int, ...], int]]
    """(broker name, cluster, master broker id, master epoch, sync state set, sync state set epoch)"""
    version: int
    set_versions: dict[str, int]

    def pieces(self) -> Iterator[str]:
        """The JSON text of `{"state": ControllerState.to_dict(), "version", "setVersions"}`, exactly as
        `json.dumps` writes it, in pieces of `SNAPSHOT_PIECE_SETS` sets (each `json.dumps` call holds
        the GIL for its whole run, so one call over the whole state would stop every other thread)."""
        yield '{"state": {"replicaInfo": {'
        yield from _members(
            self.replicas,
            lambda r: {
                "clusterName": r[1],
                "nextAssignBrokerId": r[2],
                "brokers": {str(b): list(v) for b, v in sorted(r[3].items())},
            },
        )
        yield '}, "syncStateInfo": {'
        yield from _members(
            self.syncs,
            lambda s: {
                "clusterName": s[1],
                "masterBrokerId": s[2],
                "masterEpoch": s[3],
                "syncStateSet": sorted(s[4]),
                "syncStateSetEpoch": s[5],
            },
        )
        yield '}}, "version": ' + json.dumps(self.version) + ', "setVersions": {'
        versions = list(self.set_versions.items())
        for start in range(0, len(versions), SNAPSHOT_PIECE_SETS * 8):
            yield ", " if start else ""
            yield json.dumps(dict(versions[start : start + SNAPSHOT_PIECE_SETS * 8]))[1:-1]
        yield "}}"


def _members(items: list[_Row], encode: Callable[[_Row], dict[str, Any]]) -> Iterator[str]:
    """`"name": {...}` members of a JSON object, sorted by name (each item's first field), as `json.dumps`
    writes them, `SNAPSHOT_PIECE_SETS` per piece."""
    ordered = sorted(items, key=lambda item: item[0])
    for start in range(0, len(ordered), SNAPSHOT_PIECE_SETS):
        yield ", " if start else ""
        yield ", ".join(
            json.dumps(item[0]) + ": " + json.dumps(encode(item))
            for item in ordered[start : start + SNAPSHOT_PIECE_SETS]
        )


SNAPSHOT_FORMAT = "brokergroup-raft-snapshot/1"
SNAPSHOT_CLOSE_WAIT_S = 10.0
"""How long closing a node waits for a snapshot still being written (its thread would otherwise write
`snapshot.tmp` while a node opened again on the same directory writes its own)."""
GZIP_MAGIC = b"\x1f\x8b"


def _entry_json(entry: Entry) -> list[Any]:
    command, index, term = entry
    return [base64.b64encode(bytes(command)).decode(), int(index), int(term)]


def _entry_from_json(value: list[Any]) -> Entry:
    return base64.b64decode(value[0]), int(value[1]), int(value[2])


class Snapshots(BackgroundSnapshots):
    """pysyncobj's custom snapshot (`fullDumpFile`) serializer: JSON, synced before it is renamed into place.

    pysyncobj passes `(last entry, previous entry, cluster)` and keeps nothing of the consumers
    with a custom serializer, so the machine's state is taken (and restored) here. `serialize` does
    it all on the calling thread (pysyncobj's contract); `start` and `poll` (used by
    `raft_fixes.BackgroundSerializer`) copy the state on pysyncobj's tick thread, when it is at
    the snapshot's index, encode, write and fsync it to `<path>.tmp` in a thread, and rename it to
    `path` on the tick thread once written, so a crash mid-write leaves the previous snapshot.
    The rename does not sync the directory; the journal syncs it before it drops the head of the
    log (`DurableJournal.deleteEntriesTo`). A snapshot received from the leader is synced with its
    directory before it is loaded (so before the log is cleared for it), and abandons a snapshot
    of our own still being written (it would be older)."""

    def __init__(
        self, machine: StateMachine, journal: DurableJournal, before: Callable[[], None] | None = None
    ) -> None:
        self.machine = machine
        self.journal = journal
        self.before = before
        """Runs before a snapshot is written: the event log's sync (the journal forgets the entries
        a snapshot covers, so their records could not be written again after a power loss)."""
        self._job: _SnapshotJob | None = None

    def serialize(self, path: str, data: tuple[Entry, Entry, Any]) -> None:
        if self.before is not None:
            self.before()
        _write_snapshot(path, _snapshot_pieces(data, self.machine.capture()))

    def start(self, path: str, data: tuple[Entry, Entry, Any]) -> None:
        if self._job is not None:
            raise RuntimeError("a snapshot is being written already")
        job = _SnapshotJob(path, _snapshot_pieces(data, self.machine.capture()), self.before)
        self._job = job
        job.thread.start()

    def poll(self) -> int:
        job = self._job
        if job is None:
            return raft_fixes.NOT_SERIALIZING
        if job.thread.is_alive():
            return raft_fixes.SERIALIZING
        self._job = None
        if job.abandoned:
            _remove_quietly(job.tmp)
            return raft_fixes.NOT_SERIALIZING
        if job.error is not None:
            logger.error("snapshot %s not written: %s", job.path, job.error)
            _remove_quietly(job.tmp)
            return raft_fixes.FAILED
        try:
            Path(job.tmp).replace(job.path)
        except OSError:
            logger.exception("snapshot %s not renamed into place", job.path)
            return raft_fixes.FAILED
        return raft_fixes.SUCCESS

    def wait(self, timeout: float) -> None:
        """Wait (at most `timeout` s) for a snapshot being written, e.g. before the process stops."""
        job = self._job
        if job is not None:
            job.thread.join(timeout)

    def deserialize(self, path: str) -> tuple[Entry, Entry, list[str]]:
        if self._job is not None:  # ours is older than the one being loaded: never rename it over it
            self._job.abandoned = True
        fsync_path(Path(path))
        fsync_path(Path(path).parent, directory=True)
        raw = Path(path).read_bytes()
        if raw[:2] == GZIP_MAGIC:  # pysyncobj's own format, written by this node before the durable journal
            legacy = pysyncobj.pickle.loads(gzip.decompress(raw))
            last, prev = tuple(legacy[1]), tuple(legacy[2])
            self.machine._deserialize(legacy[0][1], index=int(last[1]))
            cluster = [str(getattr(node, "id", node)) for node in legacy[3]]
        else:
            body = json.loads(raw)
            if body.get("format") != SNAPSHOT_FORMAT:
                raise ValueError(f"{path}: not a {SNAPSHOT_FORMAT} snapshot")
            last, prev = _entry_from_json(body["last"]), _entry_from_json(body["prev"])
            self.machine._deserialize(body["machine"], index=last[1])
            cluster = [str(n) for n in body["cluster"]]
        self.journal.align_with_snapshot(prev, last)
        return last, prev, cluster


def _snapshot_pieces(data: tuple[Entry, Entry, Any], captured: Captured) -> Iterator[str]:
    """The snapshot file's text, exactly `json.dumps` of `{"format", "last", "prev", "cluster", "machine":
    {"json": <the machine's JSON text>}}`, in pieces (the machine's text is escaped piece by piece)."""
    last, prev, cluster = data
    head = {
        "format": SNAPSHOT_FORMAT,
        "last": _entry_json(last),
        "prev": _entry_json(prev),
        "cluster": sorted(str(getattr(node, "id", node)) for node in cluster),
    }
    yield json.dumps(head)[:-1] + ', "machine": {"json": "'
    for piece in captured.pieces():
        yield json.dumps(piece)[1:-1]  # escaping is per character, so pieces escape as the whole would
    yield '"}}'


def _write_snapshot(path: str, pieces: Iterable[str], *, between: Callable[[], None] | None = None) -> None:
    with open(path, "wb") as f:
        for piece in pieces:
            f.write(piece.encode("ascii"))  # json.dumps escapes everything else
            if between is not None:
                between()
        f.flush()
        os.fsync(f.fileno())


def _remove_quietly(path: str) -> None:
    Path(path).unlink(missing_ok=True)


class _SnapshotJob:
    """One snapshot written by a thread: the event log's sync, then `<path>.tmp`, written and fsynced."""

    def __init__(self, path: str, pieces: Iterator[str], before: Callable[[], None] | None) -> None:
        self.path = path
        self.tmp = path + ".tmp"
        self.abandoned = False
        self.error: Exception | None = None
        self._pieces = pieces
        self._before = before
        self.thread = threading.Thread(target=self._run, name="raft-snapshot", daemon=True)

    def _run(self) -> None:
        try:
            if self._before is not None:
                self._before()
            # time.sleep(0) gives up the GIL between pieces, so the tick thread waits a piece at most
            _write_snapshot(self.tmp, self._pieces, between=lambda: time.sleep(0))
        except Exception as exc:  # noqa: BLE001 (reported by `Snapshots.poll` on the tick thread)
            self.error = exc


def legacy_journal(raft_dir: Path) -> Callable[[], tuple[bytes | None, dict[str, Any]]]:
    """The files of pysyncobj's `FileJournal` (before the durable journal), for a one-time migration."""

    def load() -> tuple[bytes | None, dict[str, Any]]:
        log = raft_dir / "journal"
        meta = raft_dir / "journal.meta"
        found: dict[str, Any] = {}
        if meta.exists():  # our own file, written by pysyncobj 0.3.17 on this node
            try:
                found = dict(pysyncobj.pickle.loads(meta.read_bytes()))
            except (ValueError, EOFError, TypeError, AttributeError, ImportError) as exc:
                raise ValueError(f"{meta}: cannot migrate pysyncobj's term and vote ({exc})") from exc
        return (log.read_bytes() if log.exists() else None), found

    return load


def open_journal(raft_dir: Path) -> DurableJournal:
    durable_mkdir(raft_dir)
    return DurableJournal(OsDisk(raft_dir), legacy=legacy_journal(raft_dir))


PEER_DNS_CACHE_SECONDS = 5.0
"""How long a peer's resolved address is reused before it is resolved again."""


def build_conf(
    settings: ControllerSettings,
    machine: StateMachine,
    *,
    on_state_changed: Callable[[int, int], None],
    journal: DurableJournal | None = None,
    before_snapshot: Callable[[], None] | None = None,
) -> SyncObjConf:
    raft_dir = settings.data_dir / "raft"
    journal = journal or open_journal(raft_dir)
    snapshots = Snapshots(machine, journal, before_snapshot)
    me = settings.me
    host = settings.raft.bind_host or me.raft.rsplit(":", 1)[0]
    return SyncObjConf(
        password=settings.raft.password or None,
        journalFile=journal,
        fullDumpFile=str(raft_dir / "snapshot"),
        serializer=snapshots.serialize,
        deserializer=snapshots.deserialize,
        useFork=False,
        autoTick=True,
        autoTickPeriod=0.05,
        appendEntriesUseBatch=False,
        commandsWaitLeader=False,
        raftMinTimeout=settings.raft.min_timeout,
        raftMaxTimeout=settings.raft.max_timeout,
        appendEntriesPeriod=settings.raft.append_entries_period,
        connectionTimeout=max(3.5, settings.raft.max_timeout),
        connectionRetryTime=0.5,
        # pysyncobj caches a peer's resolved IP for 10 minutes by default, and only the peer with the larger
        # address connects: a controller pod re-created with a new IP (a rolling restart) was unreachable
        # for its lower-named peers until their cache expired. Resolve again after a few seconds (CoreDNS
        # serves pod records with a 5 s TTL).
        dnsCacheTime=PEER_DNS_CACHE_SECONDS,
        dnsFailCacheTime=1.0,
        leaderFallbackTimeout=max(3.0, settings.raft.max_timeout * 2),
        bindAddress=f"{host}:{me.raft.rsplit(':', 1)[1]}",
        onStateChanged=on_state_changed,
        logCompactionMinEntries=5000,
        logCompactionMinTime=3600,
    )


class RaftNode(FixedSyncObj):
    """A Raft member holding one `StateMachine`. Wraps pysyncobj's API in PEP 8 names."""

    def __init__(self, settings: ControllerSettings, machine: StateMachine, conf: SyncObjConf) -> None:
        self._peer_by_raft = {p.raft: p for p in settings.peers}
        super().__init__(settings.me.raft, [p.raft for p in settings.others], conf, consumers=[machine])
        self.machine = machine
        owner = getattr(conf.serializer, "__self__", None)
        self._snapshots = owner if isinstance(owner, Snapshots) else None

    def is_leader(self) -> bool:
        return bool(self._isLeader())

    def leader_raft_address(self) -> str | None:
        leader = self._getLeader()
        return None if leader is None else str(leader.address)

    def leader_peer_id(self) -> str | None:
        address = self.leader_raft_address()
        peer = self._peer_by_raft.get(address) if address else None
        return peer.id if peer else None

    def leader_api_address(self) -> str | None:
        address = self.leader_raft_address()
        peer = self._peer_by_raft.get(address) if address else None
        return peer.api if peer else None

    def term(self) -> int:
        return int(self.raftCurrentTerm)

    def last_applied(self) -> int:
        return int(self.raftLastApplied)

    def state_digest(self) -> tuple[int, str]:
        """(last applied index, digest of the applied state): equal on every node at the same index."""
        return self.machine.digest(lambda: int(self.raftLastApplied))

    def commit_index(self) -> int:
        return int(self.raftCommitIndex)

    def has_quorum(self) -> bool:
        return bool(self.hasQuorum)

    def submit(self, batch: Batch, callback: Callable[[Any, int], None]) -> None:
        """One batch as one entry (the format before group commit)."""
        self.machine._apply_batch(batch.to_json(), callback=callback)

    def submit_group(self, batches: tuple[Batch, ...], callback: Callable[[Any, int], None]) -> None:
        """Several batches as one entry; the callback gets `{"index", "version", "results"}`, one result per batch."""
        self.machine._apply_batch(encode_group(batches), callback=callback)

    def close(self) -> None:
        self.destroy()
        if self._snapshots is not None:  # a snapshot being written finishes its .tmp before we return
            self._snapshots.wait(SNAPSHOT_CLOSE_WAIT_S)


def snapshot_path(data_dir: Path) -> Path:
    return data_dir / "raft" / "snapshot"
