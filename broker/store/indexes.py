"""In-memory indexes over the commit log, fed record by record (pure: no I/O, no clock).

Every record passes two stages, each in log order:

- **append**, when it enters the log (a master's put, a slave's `append_raw`, the rescan on
  open): a MESSAGE takes the next queue offset of its (topic, queue_id), counted from 0, so a
  master can answer a put with its queue offset at once; the idempotent-producer table learns
  `producer_id -> producer_seq` and where that message landed. Master and slave both do this at
  append time, so deduplication survives a failover to a slave.
- **dispatch**, when it is confirmed (its end is at or before the confirm offset): a MESSAGE
  becomes visible in its consume queue, a CONSUMER_OFFSET record updates its group's offset.
  Consumer offsets therefore are exactly as consistent as the messages (DESIGN §4, #4771).

Invariants:

- appended records have strictly increasing offsets; dispatch follows the same order, and a
  record is dispatched iff its end is at or before `dispatched_offset` (the dispatch watermark);
- entry `i` of a consume queue is the message appended with queue offset `i`, so
  `queue_max_offset <= next_queue_offset` for every queue (dispatched never runs ahead of appended);
- queue offsets count from the log's head state (`HeadState`, all zero for a log that was never
  cut at its head): replicas agree on them when their logs start at the same offset, or when a
  replica's head was cut by retention (`cut_head`), which carries each queue's count forward;
- a consume queue holds the entries `[base, base + len)`: `cut_head` drops those before the new
  log start and raises `base` (the queue's min offset);
- the producer table is bounded: the last `window` (1024) sequence numbers per producer, and at
  most `max_producers` (1024) producers, evicting the least recently *appended-to* one. Worst case
  about a million remembered positions (~150 MB); a retry of a forgotten sequence is still
  recognised as a duplicate (`seq <= last`) but has no original position, and a retry from an
  evicted producer is stored again. Only appends change the table, so replicas fed the same log
  hold the same table.

`snapshot()` captures the indexes at a record boundary (`IndexSnapshot.offset`: everything before
it appended and dispatched, nothing after it) and `from_snapshot` + `replay` rebuild them from there:
the result equals a rescan of the whole log (a property test checks it), except that the producer
table may remember less: a producer evicted, or a sequence's position pushed out of its window, by
appends after the snapshot's offset stays forgotten if those appends are truncated away (the
bounded table's usual consequence: such a retry is stored again). The snapshot is what the index
checkpoint persists (index_files.py) and what a truncation of the undispatched tail rewinds to.
"""

from __future__ import annotations

import bisect
import collections
import itertools
from array import array
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Final

from brokergroup.broker.store.record import DecodedRecord, RecordInfo, RecordKind
from brokergroup.broker.store.types import Appended

DEFAULT_SEQ_WINDOW: Final = 1024
DEFAULT_MAX_PRODUCERS: Final = 1024

_REBUILD_DISPATCH_BATCH: Final = 256
"""`rebuild` dispatches every this many records (few calls, few records pending)."""

QueueKey = tuple[str, int]
"""(topic, queue_id)."""


@dataclass(frozen=True, slots=True)
class QueueEntry:
    """One dispatched message of a consume queue."""

    queue_offset: int
    commit_offset: int
    size: int


class _Producer:
    __slots__ = ("last_seq", "recent", "shared")

    def __init__(self) -> None:
        self.last_seq = -1
        self.recent: collections.OrderedDict[int, Appended] = collections.OrderedDict()
        self.shared = False
        """`recent` was handed to a capture (`ProducerTable.capture`): copy it before changing it."""

    def own(self) -> collections.OrderedDict[int, Appended]:
        """`recent`, to change: a copy first if a capture holds it (copy on write)."""
        if self.shared:
            self.recent, self.shared = self.recent.copy(), False
        return self.recent


class ProducerTable:
    """`producer_id -> last producer_seq`, and where its recent sequences landed (bounded, see
    the module docstring)."""

    def __init__(self, *, max_producers: int = DEFAULT_MAX_PRODUCERS, window: int = DEFAULT_SEQ_WINDOW) -> None:
        if max_producers < 1 or window < 1:
            raise ValueError(f"max_producers={max_producers} and window={window} must be at least 1")
        self.max_producers = max_producers
        self.window = window
        self._producers: collections.OrderedDict[int, _Producer] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._producers)

    def last_seq(self, producer_id: int) -> int:
        """The highest sequence appended for `producer_id`, or -1 (unknown or evicted)."""
        producer = self._producers.get(producer_id)
        return producer.last_seq if producer is not None else -1

    def original(self, producer_id: int, producer_seq: int) -> Appended | None:
        """Where `(producer_id, producer_seq)` landed, as a duplicate, if it is remembered."""
        producer = self._producers.get(producer_id)
        appended = producer.recent.get(producer_seq) if producer is not None else None
        return Appended(appended.commit_offset, appended.size, appended.queue_offset, True) if appended else None

    def restore(self, producer_id: int, last_seq: int) -> None:
        """Remember a producer's last sequence from a head state (no positions)."""
        producer = self._producers.setdefault(producer_id, _Producer())
        self._producers.move_to_end(producer_id)
        producer.last_seq = max(producer.last_seq, last_seq)
        if len(self._producers) > self.max_producers:
            self._producers.popitem(last=False)

    def last_seqs_before(self, offset: int) -> dict[int, int]:
        """producer_id -> the last sequence appended before `offset`, as far as the table knows
        (least recently appended-to first). A producer whose remembered sequences all lie at or
        after `offset` is left out: a rescan from `offset` finds them again. Never higher than
        the truth, so a retry is never wrongly dropped as a duplicate."""
        found: dict[int, int] = {}
        for producer_id, producer in self._producers.items():
            before = [seq for seq, appended in producer.recent.items() if appended.commit_offset < offset]
            if before:
                found[producer_id] = max(before)
            elif not producer.recent:
                found[producer_id] = producer.last_seq
        return found

    def forget_before(self, offset: int) -> None:
        """Forget where sequences landed before `offset` (retention deleted them); the last
        sequences stay, as a rescan from the head state would have them."""
        for producer in self._producers.values():
            while producer.recent and next(iter(producer.recent.values())).commit_offset < offset:
                producer.own().popitem(last=False)

    def record(self, producer_id: int, producer_seq: int, appended: Appended) -> None:
        producer = self._producers.get(producer_id)
        if producer is None:
            producer = self._producers[producer_id] = _Producer()
            if len(self._producers) > self.max_producers:
                self._producers.popitem(last=False)
        else:
            self._producers.move_to_end(producer_id)
        producer.last_seq = max(producer.last_seq, producer_seq)
        recent = producer.own()
        recent[producer_seq] = appended
        if len(recent) > self.window:
            recent.popitem(last=False)

    def capture(self) -> tuple[tuple[int, int, Mapping[int, Appended]], ...]:
        """Every producer's `(id, last_seq, recent)` as of now, least recently appended-to first,
        in O(producers): the `recent` mappings are shared, and copied by the table before it changes
        one (copy on write), so the capture never changes and may be read by another thread."""
        for producer in self._producers.values():
            producer.shared = True
        return tuple((i, p.last_seq, p.recent) for i, p in self._producers.items())


@dataclass(frozen=True, slots=True)
class HeadState:
    """What the records before `min_offset` (deleted by retention) leave behind: each queue's count
    of messages before it, each group's offset as of it, and producers' last sequences before it."""

    min_offset: int
    queue_bases: dict[QueueKey, int]
    group_offsets: dict[tuple[str, str, int], int]
    producers: dict[int, int]
    """producer_id -> last producer_seq, least recently appended-to first."""

    @classmethod
    def empty(cls, min_offset: int = 0) -> HeadState:
        return cls(min_offset, {}, {}, {})


@dataclass(frozen=True, slots=True)
class ProducerState:
    """One producer of the table: its last sequence and where its recent sequences landed,
    `(seq, commit_offset, size, queue_offset)` in append order (queue_offset -1: none)."""

    producer_id: int
    last_seq: int
    recent: tuple[tuple[int, int, int, int], ...]


_NO_VALUES: Final = memoryview(array("q")).toreadonly()


class Column:
    """A consume queue's column of int64 values: an immutable head read on demand (a read-only
    `memoryview` of format 'q', typically over a mapped queue file: index_files.py) followed by an
    in-memory tail that `append` grows. Opening a store thus costs nothing per retained entry: the
    mapped pages are read when a consumer asks for them. The head's bytes never change while it is
    referenced (the files are only appended to, or replaced by new files), so it may be handed to
    another thread as it is; the tail may not (`frozen`)."""

    __slots__ = ("_head", "_tail")

    def __init__(self, head: memoryview | None = None, tail: array[int] | None = None) -> None:
        if head is not None and (head.format != "q" or head.ndim != 1):
            raise ValueError(f"a column's head must be a 1-d memoryview of format 'q', not {head.format!r}")
        self._head = head if head is not None else _NO_VALUES
        self._tail = tail if tail is not None else array("q")

    def __len__(self) -> int:
        return len(self._head) + len(self._tail)

    def __iter__(self) -> Iterator[int]:
        return itertools.chain(self._head.tolist(), self._tail)

    def __getitem__(self, index: int) -> int:
        """The value at `index` (0 <= index < len): enough for `bisect`."""
        split = len(self._head)
        return int(self._head[index]) if index < split else self._tail[index - split]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Column) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Column(mapped={len(self._head)}, tail={len(self._tail)})"

    @property
    def mapped(self) -> int:
        """How many values come from the head."""
        return len(self._head)

    def append(self, value: int) -> None:
        self._tail.append(value)

    def values(self, first: int, stop: int) -> list[int]:
        """The values at `[first, stop)` (clamped to the column)."""
        split = len(self._head)
        if stop <= split:
            return self._head[first:stop].tolist()
        if first >= split:
            return self._tail[first - split : stop - split].tolist()
        return self._head[first:].tolist() + self._tail[: stop - split].tolist()

    def frozen(self, first: int, stop: int) -> tuple[memoryview | bytes, ...]:
        """The values at `[first, stop)` as native int64 buffers that nothing changes later: the
        head's share as a view (no copy), the tail's as a copy. Safe to pass to another thread."""
        split, parts = len(self._head), list[memoryview | bytes]()
        if first < split:
            parts.append(self._head[first : min(stop, split)])
        if stop > split:
            parts.append(self._tail[max(first - split, 0) : stop - split].tobytes())
        return tuple(parts)

    def drop_front(self, count: int) -> None:
        """Forget the first `count` values."""
        split = len(self._head)
        if count <= split:
            self._head = self._head[count:]
        else:
            self._head = _NO_VALUES
            del self._tail[: count - split]


@dataclass(frozen=True, slots=True)
class QueueState:
    """A consume queue: commit offsets and sizes of its entries from queue offset `base` on."""

    base: int
    offsets: Column
    sizes: Column

    @property
    def end(self) -> int:
        return self.base + len(self.offsets)


@dataclass(frozen=True, slots=True)
class ProducerCapture:
    """The producer table at a moment (`StoreIndexes.capture`): `(producer_id, last_seq, {seq:
    Appended})` least recently appended-to first, mappings that nothing changes later (the table
    copies one before changing it; `Appended` is immutable); `offset` is the snapshot's."""

    offset: int
    producers: tuple[tuple[int, int, Mapping[int, Appended]], ...]

    def states(self) -> tuple[ProducerState, ...]:
        """The snapshot's producers: only what was appended before `offset` (module docstring)."""
        offset = self.offset
        found: list[tuple[int, ProducerState]] = []  # (last position before `offset`, state)
        for producer_id, last_seq, positions in self.producers:
            recent = tuple(
                (seq, a.commit_offset, a.size, a.queue_offset if a.queue_offset is not None else -1)
                for seq, a in positions.items()
                if a.commit_offset < offset
            )
            if recent:
                state = ProducerState(producer_id, max(seq for seq, *_ in recent), recent)
                found.append((max(position for _, position, *_ in recent), state))
            elif not positions:
                found.append((-1, ProducerState(producer_id, last_seq, ())))
        found.sort(key=lambda item: item[0])  # least recently appended-to as of `offset` first (stable)
        return tuple(state for _, state in found)

    def rows(self) -> list[str]:
        """`states()` encoded for the index checkpoint, one JSON array `[id, lastSeq, [[seq,
        commitOffset, size, queueOffset], ...]]` per producer (index_checkpoint.py), built as
        strings: no tuple or list per position, which a million of would cost the process
        (every thread, the event loop's too) full garbage-collector passes."""
        offset = self.offset
        found: list[tuple[int, str]] = []  # (last position before `offset`, row)
        for producer_id, last_seq, positions in self.producers:
            last, top, parts = -1, -1, []
            for seq, a in positions.items():
                if a.commit_offset < offset:
                    queue_offset = a.queue_offset if a.queue_offset is not None else -1
                    parts.append(f"[{seq},{a.commit_offset},{a.size},{queue_offset}]")
                    last, top = max(last, a.commit_offset), max(top, seq)
            if parts:
                found.append((last, f"[{producer_id},{top},[{','.join(parts)}]]"))
            elif not positions:
                found.append((-1, f"[{producer_id},{last_seq},[]]"))
        found.sort(key=lambda item: item[0])
        return [row for _, row in found]


@dataclass(frozen=True, slots=True)
class IndexSnapshot:
    """The indexes at `offset`, a record boundary: every record before it appended and dispatched,
    none after it. `dispatched` (>= offset) is the dispatch watermark to restore."""

    offset: int
    dispatched: int
    history_bucket: int
    queues: dict[QueueKey, QueueState]
    group_offsets: dict[tuple[str, str, int], int]
    group_history: dict[tuple[str, str, int], list[tuple[int, int]]]
    producers: tuple[ProducerState, ...]
    """Least recently appended-to first."""


class _ConsumeQueue:
    """Commit offsets and sizes of dispatched messages from queue offset `base` on (compact arrays)."""

    __slots__ = ("base", "offsets", "sizes")

    def __init__(self, base: int = 0) -> None:
        self.base = base
        self.offsets = Column()
        self.sizes = Column()

    @property
    def end(self) -> int:
        return self.base + len(self.offsets)


class StoreIndexes:
    """Consume queues, append counters, producer table and group offsets (module docstring)."""

    def __init__(
        self,
        *,
        max_producers: int = DEFAULT_MAX_PRODUCERS,
        seq_window: int = DEFAULT_SEQ_WINDOW,
        head: HeadState | None = None,
        history_bucket: int = 1,
    ) -> None:
        head = head or HeadState.empty()
        if history_bucket < 1:
            raise ValueError(f"history_bucket={history_bucket} must be at least 1")
        self._history_bucket = history_bucket
        self.producers = ProducerTable(max_producers=max_producers, window=seq_window)
        for producer_id, last_seq in head.producers.items():
            self.producers.restore(producer_id, last_seq)
        self._next_queue_offset: dict[QueueKey, int] = dict(head.queue_bases)
        self._queues: dict[QueueKey, _ConsumeQueue] = {k: _ConsumeQueue(b) for k, b in head.queue_bases.items()}
        self._group_offsets: dict[tuple[str, str, int], int] = dict(head.group_offsets)
        self._group_history: dict[tuple[str, str, int], list[tuple[int, int]]] = {
            key: [(-1, value)] for key, value in head.group_offsets.items()
        }
        """Dispatched values of a group offset with the offset of its record, since the head (the
        head's own value at -1), only the last one per `history_bucket` bytes of log (the segment
        size): enough for `head_state` at a segment start, and bounded by the number of segments."""
        self._pending: collections.deque[tuple[RecordInfo, int | None]] = collections.deque()
        self._appended_offset = head.min_offset
        self._dispatched_offset = head.min_offset

    @classmethod
    def rebuild(
        cls,
        records: Iterable[DecodedRecord | RecordInfo],
        *,
        dispatch_up_to: int,
        max_producers: int = DEFAULT_MAX_PRODUCERS,
        seq_window: int = DEFAULT_SEQ_WINDOW,
        head: HeadState | None = None,
        history_bucket: int = 1,
    ) -> StoreIndexes:
        """Indexes of a log holding `records` (in log order, from `head.min_offset`), dispatched up
        to `dispatch_up_to`."""
        indexes = cls(max_producers=max_producers, seq_window=seq_window, head=head, history_bucket=history_bucket)
        for record in records:
            info = record if isinstance(record, RecordInfo) else RecordInfo.from_decoded(record)
            indexes.append(info)
            if info.end <= dispatch_up_to and len(indexes._pending) >= _REBUILD_DISPATCH_BATCH:
                indexes.dispatch(info.end)
        indexes.dispatch(dispatch_up_to)
        return indexes

    @classmethod
    def from_snapshot(
        cls,
        snapshot: IndexSnapshot,
        *,
        max_producers: int = DEFAULT_MAX_PRODUCERS,
        seq_window: int = DEFAULT_SEQ_WINDOW,
    ) -> StoreIndexes:
        """The indexes a snapshot describes (the snapshot's arrays are taken over, not copied);
        feed them the records from `snapshot.offset` on with `replay`."""
        indexes = cls(max_producers=max_producers, seq_window=seq_window, history_bucket=snapshot.history_bucket)
        for state in snapshot.producers:
            producer = _Producer()
            producer.last_seq = state.last_seq
            for seq, commit_offset, size, queue_offset in state.recent:
                producer.recent[seq] = Appended(commit_offset, size, queue_offset if queue_offset >= 0 else None, False)
            indexes.producers._producers[state.producer_id] = producer
            if len(indexes.producers._producers) > max_producers:
                indexes.producers._producers.popitem(last=False)
        for key, queue_state in snapshot.queues.items():
            queue = indexes._queues[key] = _ConsumeQueue(queue_state.base)
            queue.offsets, queue.sizes = queue_state.offsets, queue_state.sizes
            indexes._next_queue_offset[key] = queue.end
        indexes._group_offsets = dict(snapshot.group_offsets)
        indexes._group_history = {key: list(history) for key, history in snapshot.group_history.items()}
        indexes._appended_offset = snapshot.offset
        indexes._dispatched_offset = snapshot.dispatched
        return indexes

    def replay(self, records: Iterable[DecodedRecord | RecordInfo], *, dispatch_up_to: int) -> StoreIndexes:
        """Append `records` (the log from where these indexes end, in order) and dispatch up to
        `dispatch_up_to`; returns self."""
        for record in records:
            info = record if isinstance(record, RecordInfo) else RecordInfo.from_decoded(record)
            self.append(info)
            if info.end <= dispatch_up_to and len(self._pending) >= _REBUILD_DISPATCH_BATCH:
                self.dispatch(info.end)
        self.dispatch(dispatch_up_to)
        return self

    def snapshot(self) -> IndexSnapshot:
        """The indexes at the first undispatched record (or the end of the appended log): the
        consume queues' columns are shared, not copied (cheap; write them out before appending
        more). Producers keep only what was appended before that offset (see the module docstring)."""
        snapshot, producers = self.capture()
        return replace(snapshot, producers=producers.states())

    def capture(self) -> tuple[IndexSnapshot, ProducerCapture]:
        """`snapshot()` without its producers, and the producer table as it is now (shared, copy on
        write: `ProducerTable.capture`, O(producers)): `ProducerCapture.states()` computes the
        snapshot's producers from it later, in any thread (an index checkpoint write)."""
        offset = self._pending[0][0].offset if self._pending else self._appended_offset
        producers = ProducerCapture(offset, self.producers.capture())
        snapshot = IndexSnapshot(
            offset=offset,
            dispatched=self._dispatched_offset,
            history_bucket=self._history_bucket,
            queues={key: QueueState(q.base, q.offsets, q.sizes) for key, q in self._queues.items()},
            group_offsets=dict(self._group_offsets),
            group_history={key: list(history) for key, history in self._group_history.items()},
            producers=(),
        )
        return snapshot, producers

    # -- append stage
    def next_queue_offset(self, topic: str, queue_id: int) -> int:
        """The queue offset the next MESSAGE appended to this queue takes."""
        return self._next_queue_offset.get((topic, queue_id), 0)

    def append(self, info: RecordInfo) -> Appended:
        """Index a record that just entered the log; returns where it landed (not a duplicate)."""
        if info.offset < self._appended_offset:
            raise ValueError(f"record at offset={info.offset} appended after offset={self._appended_offset}")
        self._appended_offset = info.end
        queue_offset: int | None = None
        if info.kind == RecordKind.MESSAGE:
            key = (info.topic, info.queue_id)
            queue_offset = self._next_queue_offset.get(key, 0)
            self._next_queue_offset[key] = queue_offset + 1
        appended = Appended(info.offset, info.size, queue_offset, False)
        if info.producer_id >= 0:
            self.producers.record(info.producer_id, info.producer_seq, appended)
        self._pending.append((info, queue_offset))
        return appended

    # -- dispatch stage
    @property
    def dispatched_offset(self) -> int:
        """The dispatch watermark: every record ending at or before it is visible."""
        return self._dispatched_offset

    @property
    def pending_count(self) -> int:
        """Records appended but not yet dispatched."""
        return len(self._pending)

    def dispatch(self, up_to: int) -> int:
        """Make every appended record ending at or before `up_to` visible; returns how many."""
        count = 0
        while self._pending and self._pending[0][0].end <= up_to:
            info, queue_offset = self._pending.popleft()
            if queue_offset is not None:
                queue = self._queues.setdefault((info.topic, info.queue_id), _ConsumeQueue())
                assert queue.end == queue_offset, "dispatch follows append order"
                queue.offsets.append(info.offset)
                queue.sizes.append(info.size)
            elif info.consumer_offset is not None:
                co = info.consumer_offset
                key = (co.group, co.topic, co.queue_id)
                self._group_offsets[key] = co.offset
                history = self._group_history.setdefault(key, [])
                bucket = info.offset // self._history_bucket
                if history and history[-1][0] >= 0 and history[-1][0] // self._history_bucket == bucket:
                    history[-1] = (info.offset, co.offset)
                else:
                    history.append((info.offset, co.offset))
            count += 1
        self._dispatched_offset = max(self._dispatched_offset, up_to)
        return count

    # -- queries over dispatched records
    def queue_min_offset(self, topic: str, queue_id: int) -> int:
        """The queue offset of the oldest message still held (0 until retention cut the queue)."""
        queue = self._queues.get((topic, queue_id))
        return queue.base if queue is not None else 0

    def queue_max_offset(self, topic: str, queue_id: int) -> int:
        """The queue offset one past the last visible message (0 for an unknown queue)."""
        queue = self._queues.get((topic, queue_id))
        return queue.end if queue is not None else 0

    def entries(self, topic: str, queue_id: int, queue_offset: int, max_count: int) -> list[QueueEntry]:
        """Up to `max_count` visible messages of a queue from `queue_offset` on (none below its min)."""
        queue = self._queues.get((topic, queue_id))
        if queue is None or queue_offset < queue.base:
            return []
        first = queue_offset - queue.base
        stop = min(len(queue.offsets), first + max_count)
        if first >= stop:
            return []
        offsets, sizes = queue.offsets.values(first, stop), queue.sizes.values(first, stop)
        return [QueueEntry(queue.base + first + i, o, z) for i, (o, z) in enumerate(zip(offsets, sizes, strict=True))]

    def consumer_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        return self._group_offsets.get((group, topic, queue_id))

    def consumer_offsets(self) -> list[tuple[str, str, int, int]]:
        """Every dispatched group offset, `(group, topic, queue_id, offset)` sorted by group, topic, queue id;
        includes the offsets retention's head state carried forward."""
        return sorted(
            (group, topic, queue_id, offset) for (group, topic, queue_id), offset in self._group_offsets.items()
        )

    def topics(self) -> dict[str, list[int]]:
        """Topic -> sorted queue ids that hold (or held, before retention) visible messages."""
        found: dict[str, list[int]] = {}
        for topic, queue_id in sorted(self._queues):
            found.setdefault(topic, []).append(queue_id)
        return found

    # -- retention
    def head_state(self, min_offset: int) -> HeadState:
        """The state the records before `min_offset` leave behind; `min_offset` must be dispatched
        (retention deletes only confirmed segments) and a multiple of `history_bucket`."""
        if min_offset > self._dispatched_offset:
            raise ValueError(f"min_offset={min_offset} is beyond the dispatched offset={self._dispatched_offset}")
        if min_offset % self._history_bucket:
            raise ValueError(f"min_offset={min_offset} is not a multiple of history_bucket={self._history_bucket}")
        bases = {key: queue.base + bisect.bisect_left(queue.offsets, min_offset) for key, queue in self._queues.items()}
        groups: dict[tuple[str, str, int], int] = {}
        for key, history in self._group_history.items():
            before = [value for offset, value in history if offset < min_offset]
            if before:
                groups[key] = before[-1]
        return HeadState(min_offset, bases, groups, self.producers.last_seqs_before(min_offset))

    def cut_head(self, head: HeadState) -> None:
        """Forget the consume-queue entries, group-offset history and producers' positions before
        `head.min_offset`."""
        self.producers.forget_before(head.min_offset)
        for key, base in head.queue_bases.items():
            queue = self._queues.get(key)
            if queue is None:  # a snapshot taken before the queue's first message (as the constructor)
                self._queues[key] = _ConsumeQueue(base)
                self._next_queue_offset[key] = max(self._next_queue_offset.get(key, 0), base)
                continue
            if base <= queue.base:
                continue
            drop = base - queue.base
            queue.offsets.drop_front(drop)
            queue.sizes.drop_front(drop)
            queue.base = base
        for group_key, history in self._group_history.items():
            keep = [(offset, value) for offset, value in history if offset >= head.min_offset]
            if group_key in head.group_offsets:
                keep.insert(0, (-1, head.group_offsets[group_key]))
            history[:] = keep
