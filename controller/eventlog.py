"""The controller event log on disk, and the in-memory feed behind `GET /v1/events`.

Files: `<data-dir>/events/events-<node>-<seq>.jsonl`, one JSON object per line, a new file
after `max_bytes`. Raft records are written once per Raft index: after a restart pysyncobj
re-applies its journal, and records at or below the highest index already on disk are not
written again. `EventLogWriter.append` is called from pysyncobj's thread (raft records) and
from the event loop (local records), so it takes a lock.

Readers of the files (`GET /v1/eventlog`, `GET /v1/eventlog/{name}`) see *complete lines
only*: `EventLogWriter.listing` and `open_complete` stat a file once and cut it after the last
newline within that size. The file being appended to may end in a line half written; it is
left out, and a later read includes it whole. Files only grow (a torn tail is cut only at
start, before anything is served), so what a reader got is always a prefix of what the file
holds later.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO

from brokergroup.common.durable import durable_mkdir, fsync_path

logger = logging.getLogger(__name__)

SAFE_FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,254}")
"""What a file name asked for over HTTP may look like: no `/`, not `.` or `..`, nothing to escape."""
TAIL_CHUNK = 64 * 1024


def file_pattern(node_id: str) -> re.Pattern[str]:
    """The names of `node_id`'s event-log files: `events-<node>-<seq>.jsonl`, seq of 6 or more digits."""
    return re.compile(rf"events-{re.escape(node_id)}-[0-9]{{6,}}\.jsonl")


def is_safe_file_name(name: str) -> bool:
    """A plain file name: letters, digits, `.`, `_` and `-`, not starting with `.`, without `..`."""
    return SAFE_FILE_NAME.fullmatch(name) is not None and ".." not in name


def complete_length(f: BinaryIO, size: int) -> int:
    """The length of the first `size` bytes of `f` up to and including their last newline (0 when
    there is none): the part of a file that holds complete lines. Reads backwards from `size`."""
    end = size
    while end > 0:
        start = max(0, end - TAIL_CHUNK)
        f.seek(start)
        chunk = f.read(end - start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        end = start
    return 0


@dataclasses.dataclass(frozen=True)
class LogFile:
    name: str
    size: int
    """Bytes up to and including the last newline, when the file was stat'ed."""


class EventLogWriter:
    def __init__(self, directory: Path, *, node_id: str, max_bytes: int) -> None:
        self._dir = directory
        self._node = node_id
        self._max = max_bytes
        self._lock = threading.Lock()
        self._unsynced: set[Path] = set()
        self._dir_dirty = False
        """A file was created since the last `sync`: the folder's entries need an fsync too."""
        durable_mkdir(self._dir)
        files = self.files()
        if files:
            self._drop_torn_tail(files[-1])
        self._seq = int(files[-1].stem.rsplit("-", 1)[1]) if files else 0
        self.last_index = 0
        self._last_ids: set[str] = set()
        """eventIds already on disk at `last_index` (a batch may hold several events)."""
        for path in files[-2:]:
            self._note_written(path)
        self._fd: int | None = None
        """The file being appended to, kept open between appends (`close` closes it)."""
        self._path = self._dir / self._name(self._seq)
        self._size = 0

    def files(self) -> list[Path]:
        pattern = file_pattern(self._node)
        return sorted(p for p in self._dir.iterdir() if pattern.fullmatch(p.name))

    def listing(self) -> list[LogFile]:
        """This node's files in order, each with the size of its complete lines (see the module doc)."""
        listed = []
        for path in self.files():
            try:
                with path.open("rb") as f:
                    listed.append(LogFile(path.name, complete_length(f, os.fstat(f.fileno()).st_size)))
            except (FileNotFoundError, IsADirectoryError):  # removed or replaced by hand since it was listed
                continue
        return listed

    def open_complete(self, name: str) -> tuple[BinaryIO, int] | None:
        """`name` opened for reading, at offset 0, and the length of its complete lines at the time
        of opening; None when `name` is not one of this node's event-log files. The caller closes it.
        Serve exactly that many bytes: more may be a line the writer has not finished."""
        if not file_pattern(self._node).fullmatch(name):
            return None
        try:
            f = (self._dir / name).open("rb")
        except (FileNotFoundError, IsADirectoryError):
            return None
        try:
            length = complete_length(f, os.fstat(f.fileno()).st_size)
            f.seek(0)
        except BaseException:
            f.close()
            raise
        return f, length

    @staticmethod
    def _drop_torn_tail(path: Path) -> None:
        """Cut a last line the previous process did not finish (killed mid-write); a raft record in
        it is re-applied from the journal and written again, whole."""
        data = path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            logger.warning("event log %s: dropping a torn last line of %d bytes", path, len(data) - end)
            with path.open("r+b") as f:
                f.truncate(end)

    def _note_written(self, path: Path) -> None:
        with path.open("rb") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                self._remember(record)

    def _remember(self, record: dict[str, Any]) -> None:
        index = record.get("index")
        if record.get("source") != "raft" or not isinstance(index, int):
            return
        if index > self.last_index:
            self.last_index = index
            self._last_ids = set()
        if index == self.last_index:
            self._last_ids.add(str(record.get("eventId")))

    def _written(self, record: dict[str, Any]) -> bool:
        index = record.get("index")
        if record.get("source") != "raft" or not isinstance(index, int):
            return False
        return index < self.last_index or (index == self.last_index and record.get("eventId") in self._last_ids)

    def _name(self, seq: int) -> str:
        return f"events-{self._node}-{seq:06d}.jsonl"

    def _open_current(self) -> int:
        """The descriptor to append to: the current file, or the next one once it holds `max_bytes`."""
        if self._fd is not None and self._size < self._max:
            return self._fd
        if self._fd is not None:  # full: the next file
            os.close(self._fd)
            self._fd = None
            self._seq += 1
            self._path = self._dir / self._name(self._seq)
        while True:
            created = not self._path.exists()
            fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            size = os.fstat(fd).st_size
            if size < self._max:
                break
            os.close(fd)  # a file from before this process that is already full
            self._seq += 1
            self._path = self._dir / self._name(self._seq)
        self._fd, self._size = fd, size
        self._dir_dirty = self._dir_dirty or created
        return fd

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        """Append records; raft records already on disk (re-applied after a restart) are skipped.

        The file stays open between appends: one `write` per call, no open, stat or close. A new
        file starts once the current one holds `max_bytes` or more (checked before writing, so a
        file ends with the append that crossed the limit).

        Not fsynced here (one fsync per applied batch would cost every commit): a power loss may take
        the unsynced tail, and the records of Raft entries after the last snapshot are written again
        when the journal is re-applied at start. `sync` runs before every snapshot, so no record of
        an entry the snapshot covers (and the journal then forgets) can be lost."""
        with self._lock:
            node = self._node
            fresh = [r if r.get("node") == node else {**r, "node": node} for r in records if not self._written(r)]
            if not fresh:
                return
            data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in fresh).encode()
            fd = self._open_current()
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            self._size += len(data)
            self._unsynced.add(self._path)
            for record in fresh:
                self._remember(record)

    def sync(self) -> None:
        """fsync what was appended before this call, and the folder if a file was created.

        The fsyncs run without the lock (on a duplicate of the open file's descriptor), so appends
        from pysyncobj's thread do not wait for them while a snapshot's thread syncs."""
        with self._lock:
            paths = sorted(self._unsynced)
            self._unsynced.clear()
            dir_dirty, self._dir_dirty = self._dir_dirty, False
            current = os.dup(self._fd) if self._fd is not None and self._path in paths else None
        try:
            for path in paths:
                if current is not None and path == self._path:
                    os.fsync(current)
                else:
                    fsync_path(path)
            if dir_dirty:
                fsync_path(self._dir, directory=True)
        except BaseException:
            with self._lock:  # not synced: the next call tries again
                self._unsynced.update(paths)
                self._dir_dirty = self._dir_dirty or dir_dirty
            raise
        finally:
            if current is not None:
                os.close(current)

    def close(self) -> None:
        """Close the file being appended to (a later `append` opens it again)."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


class EventFeed:
    """Recent applied Raft records for long-polling readers (the operator).

    `publish` and `note_gap` may run on any thread (pysyncobj's applies records there) and cost no
    event-loop wake-up unless a reader waits: only then is `wake` (the bridge's `call_soon`) asked
    to wake the waiters on the loop. Without `wake`, `publish` wakes them itself, so it must run on
    the loop. `wait` runs on the loop; `read` on any thread."""

    def __init__(self, *, capacity: int = 20000, wake: Callable[[Callable[[], None]], None] | None = None) -> None:
        self._records: collections.deque[dict[str, Any]] = collections.deque(maxlen=capacity)
        self._lock = threading.Lock()
        self._wake = wake
        self._changed = asyncio.Event()
        self._waiting = 0
        """Readers blocked in `wait` (changed under the lock, with the check that found nothing to read)."""
        self.last_index = 0
        self._dropped_before = 0
        """Every record with an index <= this may be missing from the feed."""

    def publish(self, index: int, records: Iterable[dict[str, Any]]) -> None:
        with self._lock:
            for record in records:
                if len(self._records) == self._records.maxlen:
                    self._dropped_before = int(self._records[0]["index"])
                self._records.append(record)
            self.last_index = max(self.last_index, index)
            waiting = self._waiting > 0
        if waiting:  # a reader that checked before this publish is counted here, so none is missed
            if self._wake is None:
                self._wake_waiters()
            else:
                self._wake(self._wake_waiters)

    def _wake_waiters(self) -> None:
        """On the loop: wake every reader blocked in `wait` (each reads again)."""
        self._changed.set()
        self._changed = asyncio.Event()

    def note_gap(self, index: int) -> None:
        """Records up to `index` exist that the feed never saw (a snapshot was loaded)."""
        with self._lock:
            self._dropped_before = max(self._dropped_before, index)
            self.last_index = max(self.last_index, index)

    def _first_after(self, after: int) -> int:
        """Position of the first record with an index above `after` (records are in index order): a
        walk back from the newest, so a reader that keeps up costs O(what it gets), not O(capacity)."""
        position = len(self._records)
        while position > 0 and self._records[position - 1]["index"] > after:
            position -= 1
        return position

    def read(self, after: int, *, limit: int = 1000) -> dict[str, Any]:
        """Records with an index above `after`: `limit` of them, and then the rest of the last one's
        index, so a page never ends inside a Raft entry (a reader continues after the last index it
        got; one group-commit entry holds the records of several broker sets)."""
        with self._lock:
            return self._read(after, limit)

    def _read(self, after: int, limit: int) -> dict[str, Any]:
        start = self._first_after(after)
        records = self._records
        end = min(start + limit, len(records))
        while start < end < len(records) and records[end]["index"] == records[end - 1]["index"]:
            end += 1
        events = [records[i] for i in range(start, end)]  # near the end: cheap
        return {
            "events": events,
            "lastIndex": self.last_index,
            "truncated": after < self._dropped_before,
        }

    async def wait(self, after: int, *, timeout: float, limit: int = 1000) -> dict[str, Any]:
        with self._lock:
            if (self._records and self._records[-1]["index"] > after) or timeout <= 0:
                return self._read(after, limit)
            waiter = self._changed
            self._waiting += 1
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter.wait(), timeout)
        finally:
            with self._lock:
                self._waiting -= 1
        return self.read(after, limit=limit)
