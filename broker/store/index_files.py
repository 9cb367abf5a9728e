"""Persisted indexes: per-queue consume-queue files plus an index checkpoint, so opening a store
replays only the log written since the last checkpoint instead of rescanning all of it.

Why this design: the consume path needs every queue's `queue offset -> (commit offset, size)`
entries, which grow with the log; a checkpoint holding them all would be O(log) to write every
time. So, as RocketMQ's consume queues, each queue's entries go to append-only files, one per column
(`index/cq/<topic hex>.<queueId>.<fileBase>.offsets` and `.sizes`, 8-byte little-endian integers: an
entry is 16 bytes; a topic over 64 bytes is named `h<sha-256 hex>` instead, as a file name holds at
most 255 bytes), and each checkpoint appends only the entries dispatched since the previous one.
Columns rather than RocketMQ's interleaved entries: a column is one int64 array. The checkpoint file
(`index/index.checkpoint`, index_checkpoint.py) is small: the log offset it describes, how many
entries of each queue file are valid, group offsets (with their per-segment history), the
producer table, and how far the commit log was fsynced (`synced`: the log's recovery trusts what
precedes it, segments.py). Loading maps each column of at least `MAP_MIN_ENTRIES` entries
(`mmap`, read-only: its pages are read when a consumer asks for them; entries dispatched later
go to an in-memory tail, `indexes.Column`) and reads the smaller ones, so its cost does not grow
with the retained log; then the log after the checkpoint's offset is replayed.

A mapped file is never cut or rewritten in place (a mapped page past a file's end would be a
SIGBUS): writes append after the checkpointed count, which is at least the mapped one; a queue
file written from scratch (after `invalidate`, or to reclaim a head) is unlinked first and
created anew, and deleted files stay readable through their mappings until those are dropped.

A write (`IndexFiles.write`), each step safe to interrupt with kill -9 or a power loss:

1. each queue's column files are cut to their checkpointed length (a torn earlier write) and the new entries are
   appended, then fsynced (a new file's folder too) - the old checkpoint still reads its prefix;
2. the checkpoint is written to `index.checkpoint.tmp`, fsynced, renamed, the folder fsynced;
3. queue files no longer referenced are deleted (after retention raised a queue's base far enough,
   the next write copies its live entries to a new file named by the new base: that reclaims the
   deleted head's entries; a crash leaves an unreferenced file, deleted by the next load or write).

A write is prepared on the store's thread (`prepare`: the new entries copied, the producer table
captured copy on write, cheap) and its files written by `run`, which may run in another thread (the flusher's
index-checkpoint thread, message_store.py) while the store goes on.

`invalidate` renames the index folder away and deletes it (a truncation below the checkpoint, a
slave seeded or restarted at another offset): a `run` still in progress then fails on the missing
folder rather than putting back a checkpoint of a log that was cut; the next write rewrites every
queue file from scratch. A missing, damaged or stale checkpoint is never fatal: the store logs one
line and rescans the whole log (message_store.py).
`IndexFiles(None)` (a store on `MemoryLog`) persists nothing.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
import shutil
import sys
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from brokergroup.broker.store.index_checkpoint import (
    ENTRY_SIZE,
    CheckpointDoc,
    QueueFileState,
    decode_checkpoint_doc,
    encode_checkpoint_doc,
)
from brokergroup.broker.store.indexes import Column, IndexSnapshot, ProducerCapture, QueueKey, QueueState
from brokergroup.common.durable import durable_mkdir, fsync_path, replace_durably

logger = logging.getLogger(__name__)

CHECKPOINT_FILE: Final = "index.checkpoint"
QUEUE_DIR: Final = "cq"
RECLAIM_ENTRIES: Final = 65536
"""A queue file is rewritten from its base once at least this many entries before the base (and
more than the live ones) are dead: reclaims the space of segments deleted by retention."""
MAP_MIN_ENTRIES: Final = 16384
"""A column of at least this many live entries is mapped on load, smaller ones are read (each
mapping holds a file descriptor: a broker with thousands of small queues must not run out)."""
STEP_INDEX_QUEUES_WRITTEN: Final = "index:queues-written"
STEP_INDEX_CHECKPOINT_WRITTEN: Final = "index:checkpoint-written"
STEP_INDEX_OLD_FILES_DELETED: Final = "index:old-files-deleted"


def _no_step(_step: str) -> None:
    pass


COLUMNS: Final = ("offsets", "sizes")
COLUMN_SIZE: Final = ENTRY_SIZE // len(COLUMNS)


def queue_file_names(key: QueueKey, file_base: int) -> tuple[str, str]:
    """The queue's column files (commit offsets, sizes) holding its entries from `file_base` on."""
    topic, queue_id = key
    raw = topic.encode()
    # a file name has at most 255 bytes: topics of up to 127 bytes would not fit in hex
    name = raw.hex() if len(raw) <= 64 else "h" + hashlib.sha256(raw).hexdigest()
    stem = f"{name}.{queue_id}.{file_base}"
    return f"{stem}.{COLUMNS[0]}", f"{stem}.{COLUMNS[1]}"


def read_column(path: Path, count: int) -> array[int]:
    """The first `count` integers of a column file; ValueError if it holds fewer."""
    column = array("q")
    if count:
        with path.open("rb") as file:
            try:
                column.fromfile(file, count)
            except EOFError:
                raise ValueError(f"{path} holds {len(column)} entries, the checkpoint needs {count}") from None
    if sys.byteorder == "big":
        column.byteswap()
    return column


def map_column(path: Path, skip: int, count: int) -> Column:
    """Values `[skip, count)` of a column file: mapped (read on demand) when there are at least
    `MAP_MIN_ENTRIES` of them, else read; ValueError if the file holds fewer than `count`."""
    if count - skip < MAP_MIN_ENTRIES or sys.byteorder == "big":
        values = read_column(path, count)
        del values[:skip]
        return Column(tail=values)
    with path.open("rb") as file:
        try:
            mapped = mmap.mmap(file.fileno(), count * COLUMN_SIZE, access=mmap.ACCESS_READ)
        except ValueError:
            size = os.fstat(file.fileno()).st_size
            raise ValueError(f"{path} holds {size // COLUMN_SIZE} entries, the checkpoint needs {count}") from None
    # the mapping lives as long as a view of it (the file may be unlinked meanwhile: index_files' docstring)
    return Column(head=memoryview(mapped).cast("q")[skip:count].toreadonly())


@dataclass(frozen=True, slots=True)
class QueueWrite:
    """One queue file pair's part of a checkpoint write: `data` (offsets', sizes' buffers, native
    int64) goes after the first `have` entries of the files of `file_base`."""

    key: QueueKey
    file_base: int
    have: int
    data: tuple[tuple[memoryview | bytes, ...], tuple[memoryview | bytes, ...]]


@dataclass(frozen=True, slots=True)
class PreparedWrite:
    """A checkpoint write prepared on the store's thread (`IndexFiles.prepare`): immutable data only,
    so `IndexFiles.run` may run it in another thread while the store goes on."""

    generation: int
    doc: CheckpointDoc
    """Its producers are empty when `producers` is set: `run` encodes them from it."""
    producers: ProducerCapture | None
    queues: tuple[QueueWrite, ...]


class IndexFiles:
    """The persisted indexes in folder `root` (module docstring), or nothing when `root` is None.

    Threads: everything runs on the store's thread but `run`, which may run in another, one
    write at a time, while the store refrains from writing itself (message_store.py). `run`
    creates no folder: `invalidate` renames the whole folder away (then deletes it), so a write
    still running fails (ENOENT) instead of putting a checkpoint of the cut log back, and a
    write prepared before an `invalidate` is not counted by `complete`."""

    def __init__(self, root: str | os.PathLike[str] | None, *, step_hook: Callable[[str], None] = _no_step) -> None:
        self.root = Path(root) if root is not None else None
        self._step = step_hook
        self._persisted: dict[QueueKey, QueueFileState] = {}
        self._generation = 0
        self._peeked: tuple[bytes, CheckpointDoc | None] | None = None
        self.checkpoint_dispatched: int | None = None
        """The dispatch watermark of the checkpoint on disk (None: there is none)."""

    @property
    def _checkpoint(self) -> Path:
        assert self.root is not None
        return self.root / CHECKPOINT_FILE

    @property
    def _invalidated(self) -> Path:
        assert self.root is not None
        return self.root.with_name(self.root.name + ".invalidated")

    @property
    def _queue_dir(self) -> Path:
        assert self.root is not None
        return self.root / QUEUE_DIR

    def _read_doc(self) -> CheckpointDoc:
        """The checkpoint on disk (FileNotFoundError, or ValueError/TypeError when damaged)."""
        data = self._checkpoint.read_bytes()
        if self._peeked is not None and self._peeked[0] == data and self._peeked[1] is not None:
            return self._peeked[1]
        return decode_checkpoint_doc(data)

    def peek_synced(self) -> int | None:
        """The log offset up to which the checkpoint on disk says the commit log was fsynced, or
        None (no checkpoint, a damaged one, or one that does not say). Read before the log opens;
        `load` reuses the decoded checkpoint."""
        if self.root is None:
            return None
        try:
            data = self._checkpoint.read_bytes()
            doc = decode_checkpoint_doc(data)
        except (OSError, ValueError, TypeError):
            return None
        self._peeked = (data, doc)
        return doc.synced

    def load(self) -> tuple[IndexSnapshot | None, str]:
        """The snapshot of the checkpoint on disk, or None and why not (missing or damaged). The
        queue columns of at least `MAP_MIN_ENTRIES` entries are mapped, not read (`map_column`)."""
        if self.root is None:
            return None, "the store is in memory"
        shutil.rmtree(self._invalidated, ignore_errors=True)  # a crash during `invalidate`
        self._checkpoint.with_name(CHECKPOINT_FILE + ".tmp").unlink(missing_ok=True)
        try:
            doc = self._read_doc()
        except FileNotFoundError:
            return None, f"{self._checkpoint} does not exist"
        except (ValueError, TypeError, OSError) as error:
            return None, f"{self._checkpoint} is damaged or incomplete ({error})"
        finally:
            self._peeked = None
        try:
            queues = {key: self._read_queue(key, state) for key, state in doc.queues.items()}
        except (ValueError, TypeError, OSError) as error:
            return None, f"{self._checkpoint} is damaged or incomplete ({error})"
        self._persisted = dict(doc.queues)
        self.checkpoint_dispatched = doc.dispatched
        self._delete_unreferenced(self._persisted)
        snapshot = IndexSnapshot(
            offset=doc.offset,
            dispatched=doc.dispatched,
            history_bucket=doc.history_bucket,
            queues=queues,
            group_offsets=doc.group_offsets,
            group_history=doc.group_history,
            producers=doc.producers,
        )
        return snapshot, ""

    def _read_queue(self, key: QueueKey, state: QueueFileState) -> QueueState:
        skip = state.base - state.file_base
        offsets, sizes = (
            map_column(self._queue_dir / n, skip, state.count) for n in queue_file_names(key, state.file_base)
        )
        return QueueState(state.base, offsets, sizes)

    def write(
        self, snapshot: IndexSnapshot, producers: ProducerCapture | None = None, *, synced: int | None = None
    ) -> None:
        """Persist `snapshot` now, in this thread (module docstring: append new entries, then the
        checkpoint); `prepare` + `run` + `complete`."""
        prepared = self.prepare(snapshot, producers, synced=synced)
        if prepared is not None:
            self.run(prepared)
            self.complete(prepared)

    def prepare(
        self, snapshot: IndexSnapshot, producers: ProducerCapture | None = None, *, synced: int | None = None
    ) -> PreparedWrite | None:
        """What writing `snapshot` takes, as immutable data (None: the store is in memory). Costs
        a copy of the entries dispatched since the previous checkpoint (the whole live queue when
        a queue file is rewritten: after `invalidate`, or to reclaim the head retention deleted).
        `producers`: the snapshot's producers, computed in `run` (`snapshot.producers` if None).
        `synced`: the log offset fsynced so far (recorded as the doc's `synced`, capped at its offset)."""
        if self.root is None:
            return None
        durable_mkdir(self._queue_dir)
        states: dict[QueueKey, QueueFileState] = {}
        writes: list[QueueWrite] = []
        for key, queue in snapshot.queues.items():
            old = self._persisted.get(key)
            dead = queue.base - old.file_base if old is not None else 0
            if (
                old is None
                or queue.base > old.end
                or queue.end < old.end
                or (dead >= RECLAIM_ENTRIES and dead > old.end - queue.base)
            ):
                file_base, have = queue.base, 0
            else:
                file_base, have = old.file_base, old.count
            states[key] = QueueFileState(queue.base, file_base, queue.end - file_base)
            if old is not None and file_base == old.file_base and queue.end == old.end:
                continue
            low, high = file_base + have - queue.base, queue.end - queue.base
            data = (queue.offsets.frozen(low, high), queue.sizes.frozen(low, high))
            writes.append(QueueWrite(key, file_base, have, data))
        doc = CheckpointDoc(
            offset=snapshot.offset,
            dispatched=snapshot.dispatched,
            history_bucket=snapshot.history_bucket,
            queues=states,
            group_offsets=snapshot.group_offsets,
            group_history=snapshot.group_history,
            producers=snapshot.producers if producers is None else (),
            synced=min(synced, snapshot.offset) if synced is not None else None,
        )
        return PreparedWrite(self._generation, doc, producers, tuple(writes))

    def run(self, prepared: PreparedWrite) -> None:
        """Write a prepared checkpoint (module docstring's steps); any thread, touches no state of
        these files' owner but the files."""
        assert self.root is not None
        created = False
        for write in prepared.queues:
            created |= write.have == 0
            for name, parts in zip(queue_file_names(write.key, write.file_base), write.data, strict=True):
                _write_all(self._queue_dir / name, parts, truncate_to=write.have * COLUMN_SIZE)
        if created:
            fsync_path(self._queue_dir, directory=True)
        self._step(STEP_INDEX_QUEUES_WRITTEN)
        doc = prepared.doc
        rows = prepared.producers.rows() if prepared.producers is not None else None
        replace_durably(self._checkpoint, encode_checkpoint_doc(doc, rows))
        self._step(STEP_INDEX_CHECKPOINT_WRITTEN)
        self._delete_unreferenced(doc.queues)
        self._step(STEP_INDEX_OLD_FILES_DELETED)

    def current(self, prepared: PreparedWrite) -> bool:
        """No `invalidate` since `prepared` was prepared."""
        return prepared.generation == self._generation

    def complete(self, prepared: PreparedWrite) -> None:
        """Count a write that `run` finished (on the store's thread)."""
        if self.current(prepared):
            self._persisted = prepared.doc.queues
            self.checkpoint_dispatched = prepared.doc.dispatched

    def _delete_unreferenced(self, persisted: dict[QueueKey, QueueFileState]) -> None:
        if self.root is None or not self._queue_dir.is_dir():
            return
        keep = {name for key, state in persisted.items() for name in queue_file_names(key, state.file_base)}
        for path in self._queue_dir.iterdir():
            if path.name not in keep:
                path.unlink(missing_ok=True)

    def invalidate(self) -> None:
        """Delete the checkpoint and the queue files (durably: the folder is renamed away, then
        deleted); the next `write` rewrites every queue file. A write running in another thread
        meanwhile fails, one prepared before this call is not counted (class docstring)."""
        self._generation += 1
        self._persisted = {}
        self.checkpoint_dispatched = None
        if self.root is None or not self.root.exists():
            return
        shutil.rmtree(self._invalidated, ignore_errors=True)
        self.root.rename(self._invalidated)
        fsync_path(self.root.parent, directory=True)
        shutil.rmtree(self._invalidated, ignore_errors=True)


def _write_all(path: Path, parts: tuple[memoryview | bytes, ...], *, truncate_to: int) -> None:
    """Cut `path` (created if missing) to `truncate_to` bytes, write `parts` (native int64) there,
    fsync. At 0 the file is unlinked and created anew instead: a mapped file is never cut (an
    access to a mapped page past a file's end would kill the process with SIGBUS)."""
    if truncate_to == 0:
        path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, truncate_to)
        position = truncate_to
        for part in parts:
            view = memoryview(_little_endian(part)).cast("B")
            while view:
                written = os.pwrite(fd, view, position)
                view, position = view[written:], position + written
        os.fsync(fd)
    finally:
        os.close(fd)


def _little_endian(part: memoryview | bytes) -> memoryview | bytes:
    if sys.byteorder == "little":
        return part
    values = array("q", bytes(part))
    values.byteswap()
    return values.tobytes()
