"""The index checkpoint's format (pure): the indexes at a log offset, minus the consume-queue entries.

The consume-queue entries live in append-only files, two columns per queue (index_files.py); this
document says how many of each queue's entries are valid and everything else the indexes hold (small: a few
values per queue, group and producer). File format, like head.py ('\\n' the only separator)::

    <crc32>\\n     zlib CRC-32 of the JSON line below, newline included, decimal
    <json>\\n      {"version": 1, "offset": int, "dispatched": int, "historyBucket": int,
                   "queues": [[topic, queueId, base, fileBase, count], ...],
                   "groups": [[group, topic, queueId, offset], ...],
                   "history": [[group, topic, queueId, [[recordOffset, value], ...]], ...],
                   "producers": [[id, lastSeq, [[seq, commitOffset, size, queueOffset], ...]], ...],
                   "synced": int}   (optional)

A queue's files hold the entries of queue offsets `[fileBase, fileBase + count)` (more bytes after
them are a torn or unreferenced write); the queue's live entries are `[base, fileBase + count)`
(`base >= fileBase`: retention raised it, the file's head is reclaimed when the file is rewritten).
`synced`, when present, is a log offset (an item boundary) up to which the commit log had been
fsynced when the checkpoint was written: opening the log need not verify the bytes before it
(segments.py, "Recovery on open"). A checkpoint without it (older) only costs that verification.
`decode_checkpoint` raises ValueError or TypeError naming what is wrong.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from brokergroup.broker.store import crcjson
from brokergroup.broker.store.crcjson import array as _list
from brokergroup.broker.store.crcjson import integer as _int
from brokergroup.broker.store.crcjson import rows as _rows
from brokergroup.broker.store.crcjson import string as _str
from brokergroup.broker.store.indexes import ProducerState, QueueKey

VERSION: Final = 1
ENTRY_SIZE: Final = 16
"""Bytes of one consume-queue entry: its commit offset and size, a little-endian int64 in each column file."""


@dataclass(frozen=True, slots=True)
class QueueFileState:
    base: int
    file_base: int
    count: int
    """Valid entries in the file, from queue offset `file_base`."""

    @property
    def end(self) -> int:
        return self.file_base + self.count


@dataclass(frozen=True, slots=True)
class CheckpointDoc:
    offset: int
    dispatched: int
    history_bucket: int
    queues: dict[QueueKey, QueueFileState]
    group_offsets: dict[tuple[str, str, int], int]
    group_history: dict[tuple[str, str, int], list[tuple[int, int]]]
    producers: tuple[ProducerState, ...]
    synced: int | None = None
    """The commit log was fsynced up to here (an item boundary) when this was written; None: unknown."""


def encode_checkpoint_doc(doc: CheckpointDoc, producer_rows: Sequence[str] | None = None) -> bytes:
    """The file's bytes; `producer_rows`, if given, are the producers already encoded, one JSON
    array per producer (`ProducerCapture.rows`), used instead of `doc.producers`."""
    document = {
        "version": VERSION,
        "offset": doc.offset,
        "dispatched": doc.dispatched,
        "historyBucket": doc.history_bucket,
        "queues": [[t, q, s.base, s.file_base, s.count] for (t, q), s in sorted(doc.queues.items())],
        "groups": [[g, t, q, offset] for (g, t, q), offset in sorted(doc.group_offsets.items())],
        "history": [[g, t, q, [list(h) for h in history]] for (g, t, q), history in sorted(doc.group_history.items())],
    }
    if doc.synced is not None:
        document["synced"] = doc.synced
    # The producers (up to ~a million positions) are encoded one producer at a time, so that a
    # thread writing a checkpoint lets the event loop run between them (one json.dumps of all of
    # them would hold the GIL for its whole duration).
    head = json.dumps(document, separators=(",", ":"), ensure_ascii=True)
    if producer_rows is None:
        producer_rows = [
            json.dumps([p.producer_id, p.last_seq, [list(r) for r in p.recent]], separators=(",", ":"))
            for p in doc.producers
        ]
    # crcjson's framing (crcjson.decode reads it), built from small parts: one copy of the ~30 MB
    # worst case at the end instead of several (each a single C call that holds the GIL)
    parts = [head[:-1].encode() + b',"producers":[']
    for index, row in enumerate(producer_rows):
        parts.append(b"," + row.encode() if index else row.encode())
    parts.append(b"]}\n")
    crc = 0
    for part in parts:
        crc = zlib.crc32(part, crc)
    return b"".join([b"%d\n" % crc, *parts])


def _queue(row: list[Any]) -> tuple[QueueKey, QueueFileState]:
    topic, queue_id, base, file_base, count = row
    state = QueueFileState(
        _int(base, "queue base", 0),
        _int(file_base, "queue fileBase", 0),
        _int(count, "count", 0),
    )
    if not state.file_base <= state.base <= state.end:
        raise ValueError(f"queue {topic!r}/{queue_id}: base={base} is outside [fileBase, fileBase + count]")
    return (_str(topic, "queue topic"), _int(queue_id, "queueId", 0)), state


def _producer(index: int, row: list[Any]) -> ProducerState:
    producer_id, last_seq, recent = row
    entries = tuple(
        (
            _int(s, "seq"),
            _int(c, "commitOffset", 0),
            _int(z, "size", 0),
            _int(q, "queueOffset"),
        )
        for s, c, z, q in (_list(r, f"producers[{index}] recent entry", 4) for r in _list(recent, "recent"))
    )
    return ProducerState(_int(producer_id, "producer id", 0), _int(last_seq, "producer lastSeq"), entries)


def decode_checkpoint_doc(data: bytes) -> CheckpointDoc:
    """The checkpoint in `data`; raises ValueError or TypeError naming what is wrong."""
    document = crcjson.decode(data)
    for key in ("version", "offset", "dispatched", "historyBucket"):
        if key not in document:
            raise ValueError(f"the JSON object has no {key!r}")
    if document["version"] != VERSION:
        raise ValueError(f"version {document['version']!r} is not {VERSION}")
    offset = _int(document["offset"], "offset", 0)
    dispatched = _int(document["dispatched"], "dispatched", 0)
    if dispatched < offset:
        raise ValueError(f"dispatched={dispatched} is below offset={offset}")
    history = {
        (
            _str(g, "history group"),
            _str(t, "history topic"),
            _int(q, "history queueId", 0),
        ): [
            (_int(o, "history record offset"), _int(v, "history value"))
            for o, v in (_list(h, "history entry", 2) for h in _list(hs, "history"))
        ]
        for g, t, q, hs in _rows(document, "history", 4)
    }
    return CheckpointDoc(
        offset=offset,
        dispatched=dispatched,
        history_bucket=_int(document["historyBucket"], "historyBucket", 1),
        queues=dict(_queue(row) for row in _rows(document, "queues", 5)),
        group_offsets={
            (
                _str(g, "group"),
                _str(t, "group topic"),
                _int(q, "group queueId", 0),
            ): _int(o, "group offset")
            for g, t, q, o in _rows(document, "groups", 4)
        },
        group_history=history,
        producers=tuple(_producer(i, row) for i, row in enumerate(_rows(document, "producers", 3))),
        synced=_int(document["synced"], "synced", 0) if "synced" in document else None,
    )
