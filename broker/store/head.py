"""The head-state file: what the segments deleted by retention leave behind (`indexes.HeadState`).

Retention deletes whole segments from the log's head. The records in them still count: queue
offsets continue from them, consumer groups' offsets and idempotent producers' sequences were set
by them. Before any segment is deleted, their sum (the `HeadState` at the new first segment's
start) is written here; opening the store rebuilds its indexes from it and the records after it.

File format ('\\n' the only separator; JSON holds no raw newline)::

    <crc32>\\n     zlib CRC-32 of the JSON line below, newline included, decimal
    <json>\\n      {"minOffset": int, "queues": [[topic, queueId, base], ...],
                   "groups": [[group, topic, queueId, offset], ...], "producers": [[id, lastSeq], ...]}

Written like the other checkpoints: `<file>.tmp`, fsync, rename, fsync of the folder, so a crash
leaves the old or the new state. A missing file is the empty head (a log never cut). A damaged
one raises `CorruptLogError`: guessing would renumber queues.
"""

from __future__ import annotations

import os
from pathlib import Path

from brokergroup.broker.errors import CorruptLogError
from brokergroup.broker.store import crcjson
from brokergroup.broker.store.crcjson import integer as _int
from brokergroup.broker.store.crcjson import rows as _rows
from brokergroup.broker.store.crcjson import string as _str
from brokergroup.broker.store.indexes import HeadState
from brokergroup.common.durable import replace_durably


def encode_head(head: HeadState) -> bytes:
    document = {
        "minOffset": head.min_offset,
        "queues": [[topic, queue_id, base] for (topic, queue_id), base in sorted(head.queue_bases.items())],
        "groups": [[g, t, q, offset] for (g, t, q), offset in sorted(head.group_offsets.items())],
        "producers": [[producer_id, seq] for producer_id, seq in head.producers.items()],
    }
    return crcjson.encode(document)


def decode_head(data: bytes) -> HeadState:
    """The head state in `data`; raises ValueError or TypeError naming what is wrong."""
    document = crcjson.decode(data)
    queues = {
        (_str(t, "queue topic"), _int(q, "queueId", 0)): _int(b, "queue base", 0)
        for t, q, b in _rows(document, "queues", 3)
    }
    groups = {
        (
            _str(g, "group"),
            _str(t, "group topic"),
            _int(q, "group queueId", 0),
        ): _int(o, "group offset")
        for g, t, q, o in _rows(document, "groups", 4)
    }
    producers = {_int(p, "producer id", 0): _int(s, "producer seq") for p, s in _rows(document, "producers", 2)}
    if "minOffset" not in document:
        raise ValueError("the JSON object has no 'minOffset'")
    return HeadState(_int(document["minOffset"], "minOffset", 0), queues, groups, producers)


class HeadFile:
    """The head state in a file, or (`path=None`) in memory for stores built on `MemoryLog`."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = Path(path) if path is not None else None
        self._memory: HeadState | None = None

    def read(self) -> HeadState | None:
        """The state last written; None if there is none (the log was never cut at its head)."""
        if self.path is None:
            return self._memory
        self.path.with_name(self.path.name + ".tmp").unlink(missing_ok=True)  # a torn write
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            return decode_head(data)
        except (ValueError, KeyError, TypeError) as error:
            raise CorruptLogError(f"{self.path} is damaged ({error}): cannot tell where queues start") from None

    def write(self, head: HeadState) -> None:
        if self.path is None:
            self._memory = head
            return
        replace_durably(self.path, encode_head(head))
