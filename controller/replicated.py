"""The pysyncobj adapter: the replicated state machine and the Raft node.

Everything camelCase from pysyncobj is wrapped here once. The replicated method is
`StateMachine._apply_batch(batch_json)`: it receives a JSON string (so the only thing
pysyncobj pickles is a `str`), is deterministic (time, ids, term come inside the batch), and
applies a batch of events computed by the leader (`core`). A batch carries the state version
it was computed against; a batch computed on a stale state is rejected on every node alike,
and the leader recomputes. pysyncobj snapshots (`fullDumpFile`) hold the state as JSON too.

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
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pysyncobj.pickle
from pysyncobj import SyncObjConf, SyncObjConsumer, replicated

from brokergroup.common.durable import durable_mkdir, fsync_path
from brokergroup.controller import core, model, records
from brokergroup.controller.journal import DurableJournal, Entry, OsDisk
from brokergroup.controller.raft_fixes import FixedSyncObj
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

    def to_json(self) -> str:
        body = {name: getattr(self, name) for name in model.field_names(Batch)}
        body["events"] = [e.to_dict() for e in self.events]
        return json.dumps(body, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Batch:
        body = json.loads(text)
        body["events"] = tuple(model.event_from_dict(e) for e in body["events"])
        return cls(**body)


@dataclasses.dataclass(frozen=True)
class Applied:
    """What applying one batch did, handed to listeners (event log, feed, waiters)."""

    batch: Batch
    index: int
    applied: bool
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
    def _serialize(self) -> dict[str, Any]:
        # Only the copy into plain data holds the lock; the encoding (the larger part at 2,000 sets,
        # docs/benchmarks.md) runs without it, so the event loop's reads wait for the copy alone.
        with self.lock:
            body = {"state": self._state.to_dict(), "version": self._version, "setVersions": dict(self._set_versions)}
        return {"json": json.dumps(body)}

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
    def _apply_batch(self, batch_json: str) -> dict[str, Any]:
        batch = Batch.from_json(batch_json)
        index = int(self._syncObj.raftLastApplied) + 1
        out: list[dict[str, Any]] = []
        with self.lock:
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
                            ts_ms=batch.ts_ms,
                            term=batch.term,
                            index=index,
                            reason=batch.reason,
                        )
                    )
                if batch.events:
                    self._version += 1
                    self._set_versions[name] = self._set_versions.get(name, 0) + 1
            version = self._version
            self._applied_index = index
        try:
            self._listener(Applied(batch, index, applied, version, tuple(out)))
        except Exception:
            logger.exception("apply listener failed for batch %s", batch.batch_id)
        return {"applied": applied, "version": version, "index": index}


SNAPSHOT_FORMAT = "brokergroup-raft-snapshot/1"
GZIP_MAGIC = b"\x1f\x8b"


def _entry_json(entry: Entry) -> list[Any]:
    command, index, term = entry
    return [base64.b64encode(bytes(command)).decode(), int(index), int(term)]


def _entry_from_json(value: list[Any]) -> Entry:
    return base64.b64decode(value[0]), int(value[1]), int(value[2])


class Snapshots:
    """pysyncobj's custom snapshot (`fullDumpFile`) serializer: JSON, synced before pysyncobj renames it.

    pysyncobj passes `(last entry, previous entry, cluster)` and keeps nothing of the consumers
    with a custom serializer, so the machine's state is taken (and restored) here. pysyncobj renames
    the file into place without syncing the directory; the journal syncs it before it drops the
    head of the log (`DurableJournal.deleteEntriesTo`). A snapshot received from the leader is
    synced with its directory before it is loaded (so before the log is cleared for it)."""

    def __init__(
        self, machine: StateMachine, journal: DurableJournal, before: Callable[[], None] | None = None
    ) -> None:
        self.machine = machine
        self.journal = journal
        self.before = before
        """Runs before a snapshot is written: the event log's sync (the journal forgets the entries
        a snapshot covers, so their records could not be written again after a power loss)."""

    def serialize(self, path: str, data: tuple[Entry, Entry, Any]) -> None:
        if self.before is not None:
            self.before()
        last, prev, cluster = data
        body = {
            "format": SNAPSHOT_FORMAT,
            "last": _entry_json(last),
            "prev": _entry_json(prev),
            "cluster": sorted(str(getattr(node, "id", node)) for node in cluster),
            "machine": self.machine._serialize(),
        }
        with open(path, "wb") as f:
            f.write(json.dumps(body).encode())
            f.flush()
            os.fsync(f.fileno())

    def deserialize(self, path: str) -> tuple[Entry, Entry, list[str]]:
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
        self.machine._apply_batch(batch.to_json(), callback=callback)

    def close(self) -> None:
        self.destroy()


def snapshot_path(data_dir: Path) -> Path:
    return data_dir / "raft" / "snapshot"
