"""Store restart and truncation cost (issue 18): `python3 -m brokergroup.bench.store_restart --messages N`.

Builds a store of N messages (100-byte bodies, 16 queues, 64 MiB segments, all confirmed) in a
temporary folder (or `--dir`), closes it, then measures:

- `open_s`: `MessageStore.open` until the store serves (indexes loaded from the index checkpoint
  the close wrote, and the log after it replayed), plus a first read; `open_log_s`: the share of
  it that opening the commit log alone takes (segments.py's recovery of its last segment after
  the checkpoint's fsynced offset), so `open_s - open_log_s` is the indexes' share;
  `open_log_full_s`: the same without the checkpoint (its whole last segment verified), for scale;
- `truncate_s`: a slave's truncation of a divergent, unconfirmed tail of `--divergent` messages;
- `open_after_retention_s`: the same open once retention deleted all segments but the last two.

Prints one JSON object. Each phase runs in this process; CPU seconds are this process's.

`--fill puts` (the default below 5M messages) puts batches of 256 through `put_messages` (~40k
messages/s). `--fill segments` (the default from 5M on) writes whole 64 MiB segments of records
encoded once by the store's encoder through the commit log's own write path, installs the indexes
those segments make (computed, not scanned: every record is the same size, queues round-robin) and
closes the store, which writes its index checkpoint as any broker's; the result is the store
`--fill puts` builds, byte for byte (a unit test checks it at a small size). The JSON says which.

`--stall` measures instead what an index checkpoint with a worst-case producer table (1024
producers x 1024 remembered sequences) costs the event loop: the longest gap of a 1 ms ticker while
the checkpoint is written inline on the loop (as before issue 18's step 2) and in the flusher's
index thread (now), alternately, with the process's CPU seconds for each, and the ticker alone for
2 s ("idle": the loop's gaps from this machine's other load).

`--index-only` skips the store: it writes N consume-queue entries (16 queues) with `IndexFiles.write`
and times `IndexFiles.load`, the queue files' share of an open at a size (50M) too slow to fill here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from array import array
from contextlib import closing
from pathlib import Path
from typing import Any

from brokergroup.broker.settings import FlushMode, StoreSettings
from brokergroup.broker.store.flusher import GroupCommitFlusher
from brokergroup.broker.store.index_files import IndexFiles
from brokergroup.broker.store.indexes import (
    DEFAULT_MAX_PRODUCERS,
    DEFAULT_SEQ_WINDOW,
    Column,
    IndexSnapshot,
    QueueState,
    StoreIndexes,
)
from brokergroup.broker.store.message_store import COMMITLOG_DIR, INDEX_DIR, MessageStore
from brokergroup.broker.store.put_plan import encode_messages
from brokergroup.broker.store.record import BLANK_MIN_SIZE, encode_blank
from brokergroup.broker.store.segments import CommitLog
from brokergroup.broker.store.types import Message

BATCH = 256
QUEUES = 16


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


BODY = b"m" * 100
SEGMENTS_FILL_FROM = 5_000_000


def fill(store: MessageStore, count: int) -> None:
    """N messages through `put_messages`, 256 a batch, each batch confirmed."""
    for first in range(0, count, BATCH):
        n = min(BATCH, count - first)
        batch = [Message("bench", (first + i) % QUEUES, BODY, 1) for i in range(n)]
        store.put_messages(batch, now_ms=1)
        store.set_confirm_offset(store.max_offset)
    store.flush()


def fill_segments(store: MessageStore, count: int) -> None:
    """The store `fill` builds, written a segment at a time (module docstring): records encoded
    once, each segment one write through the log's write path (the bench's own records need no
    validation, which is what costs `append_raw` ~10 us a record), the consume queues computed."""
    log, segment = store._log, store._log.segment_size
    if log.max_offset != 0:
        raise ValueError("fill_segments needs an empty store")
    records = encode_messages(
        [Message("bench", q, BODY, 1) for q in range(QUEUES)],
        now_ms=1,
        max_body=store.settings.max_message_size,
        segment_size=segment,
    )
    size = len(records[0])
    per = segment // size if segment % size == 0 else (segment - BLANK_MIN_SIZE) // size  # as `append` places them
    cycle = b"".join(records) * (per // QUEUES + 2)
    offsets: list[array[int]] = [array("q") for _ in range(QUEUES)]
    written = 0
    for start in range(0, -(-count // per) * segment, segment):
        n, first = min(per, count - written), written % QUEUES  # messages in this segment; queue of its first
        data = cycle[first * size : (first + n) * size]
        if written + n < count and len(data) < segment:  # as `append` pads it when the next record comes
            data += encode_blank(segment - len(data))
        log._write([(start, 0, data)])
        for queue in range(QUEUES):
            lead = (queue - first) % QUEUES
            offsets[queue].extend(range(start + lead * size, start + n * size, QUEUES * size))
        written += n
    queues = {
        ("bench", q): QueueState(0, Column(tail=column), Column(tail=array("q", [size]) * len(column)))
        for q, column in enumerate(offsets)
        if column  # as with puts: a queue exists once it holds a message
    }
    snapshot = IndexSnapshot(
        offset=log.max_offset,
        dispatched=log.max_offset,
        history_bucket=segment,
        queues=queues,
        group_offsets={},
        group_history={},
        producers=(),
    )
    store._indexes = StoreIndexes.from_snapshot(snapshot)
    store.set_confirm_offset(log.max_offset)
    store.flush()


def timed_log_open(directory: Path, settings: StoreSettings, *, trusted: bool) -> float:
    """Seconds to open the commit log alone, from the index checkpoint's fsynced offset or not."""
    synced = IndexFiles(directory / INDEX_DIR).peek_synced() if trusted else None
    started = time.perf_counter()
    CommitLog(
        directory / COMMITLOG_DIR,
        segment_size=settings.segment_size,
        max_body=settings.max_message_size,
        synced_offset=synced,
    ).close()
    return time.perf_counter() - started


def timed_open(directory: Path, settings: StoreSettings) -> tuple[float, float, MessageStore]:
    started, cpu = time.perf_counter(), cpu_s()
    store = MessageStore.open(directory, settings)
    low = store.queue_min_offset("bench", 0)
    store.get_messages("bench", 0, low, max_count=1, max_bytes=1 << 20)
    return time.perf_counter() - started, cpu_s() - cpu, store


def run(directory: Path, messages: int, divergent: int, fill_with: str) -> dict[str, Any]:
    settings = StoreSettings(segment_size=64 * 1024 * 1024, retention_bytes=2 * 64 * 1024 * 1024)
    started = time.perf_counter()
    with closing(MessageStore.open(directory, settings)) as store:
        (fill if fill_with == "puts" else fill_segments)(store, messages)
        log_bytes = store.max_offset
    result: dict[str, Any] = {
        "messages": messages,
        "fill": fill_with,
        "log_bytes": log_bytes,
        "fill_s": round(time.perf_counter() - started, 3),
    }
    open_log_full_s = timed_log_open(directory, settings, trusted=False)
    open_log_s = timed_log_open(directory, settings, trusted=True)
    open_s, open_cpu, store = timed_open(directory, settings)
    result |= {
        "open_s": round(open_s, 3),
        "open_cpu_s": round(open_cpu, 3),
        "open_log_s": round(open_log_s, 3),
        "open_log_full_s": round(open_log_full_s, 3),
    }
    with closing(store):  # what a consumer reads through the mapped queues is what was written
        for queue in (0, QUEUES - 1):
            high = store.queue_max_offset("bench", queue)
            for offset in (0, high // 2, high - 1):
                [message] = store.get_messages("bench", queue, offset, max_count=1, max_bytes=1 << 20)
                if (message.queue_id, message.queue_offset, message.body) != (queue, offset, BODY):
                    raise RuntimeError(f"queue {queue} offset {offset} reads {message}")
    open_s, open_cpu, store = timed_open(directory, settings)
    with closing(store):
        cut = store.max_offset
        store.put_messages([Message("bench", i % QUEUES, b"d" * 100, 1) for i in range(divergent)], now_ms=1)
        started, cpu = time.perf_counter(), cpu_s()
        store.truncate(cut)
        result |= {
            "divergent": divergent,
            "truncate_s": round(time.perf_counter() - started, 3),
            "truncate_cpu_s": round(cpu_s() - cpu, 3),
        }
        result["retention_deleted_segments"] = store.apply_retention()
    open_s, open_cpu, store = timed_open(directory, settings)
    with closing(store):
        result |= {
            "open_after_retention_s": round(open_s, 3),
            "open_after_retention_cpu_s": round(open_cpu, 3),
            "retained_bytes": store.max_offset - store.min_offset,
        }
    result["loadavg"] = os.getloadavg()
    return result


def run_index_only(directory: Path, messages: int) -> dict[str, Any]:
    per_queue = [messages // QUEUES + (q < messages % QUEUES) for q in range(QUEUES)]
    queues = {
        ("bench", q): QueueState(0, Column(tail=array("q", range(n))), Column(tail=array("q", [162]) * n))
        for q, n in enumerate(per_queue)
    }
    snapshot = IndexSnapshot(
        offset=0, dispatched=0, history_bucket=1, queues=queues, group_offsets={}, group_history={}, producers=()
    )
    started = time.perf_counter()
    IndexFiles(directory).write(snapshot)
    write_s = time.perf_counter() - started
    del snapshot, queues
    started, cpu = time.perf_counter(), cpu_s()
    loaded, why = IndexFiles(directory).load()
    if loaded is None:
        raise RuntimeError(f"the index just written does not load: {why}")
    return {
        "messages": messages,
        "index_write_s": round(write_s, 3),
        "index_load_s": round(time.perf_counter() - started, 3),
        "index_load_cpu_s": round(cpu_s() - cpu, 3),
        "loaded_entries": sum(len(q.offsets) for q in loaded.queues.values()),
        "loadavg": os.getloadavg(),
    }


async def tick(gaps: list[float], done: asyncio.Event) -> None:
    """Sleep 1 ms at a time until `done`, recording each wake-up's distance from the previous one."""
    last = time.perf_counter()
    while not done.is_set():
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now


async def run_stall(directory: Path, producers: int, rounds: int = 2) -> dict[str, Any]:
    """Worst-case producer table, then index checkpoints inline and in the flusher's thread, alternately."""
    settings = StoreSettings(segment_size=64 * 1024 * 1024)
    clock = [0.0]
    store = MessageStore.open(directory, settings, clock=lambda: clock[0], index_checkpoint_interval_s=1.0)
    started = time.perf_counter()
    for producer in range(producers):
        for first in range(0, DEFAULT_SEQ_WINDOW, BATCH):
            batch = [Message("bench", producer % QUEUES, b"s", 1, {}, producer, first + i) for i in range(BATCH)]
            store.put_messages(batch, now_ms=1)
        store.set_confirm_offset(store.max_offset)  # clock[0] stays: no checkpoint yet
    result: dict[str, Any] = {"producers": producers, "window": DEFAULT_SEQ_WINDOW}
    result["fill_s"] = round(time.perf_counter() - started, 3)
    flusher = GroupCommitFlusher(store, FlushMode.SYNC, interval_ms=10, timeout_ms=60_000)
    samples: dict[str, list[dict[str, float]]] = {"inline": [], "thread": [], "idle": []}
    for _round in range(rounds):
        for mode in ("inline", "thread", "idle"):
            before = store.max_offset  # a new message (no producer: the table stays as it is) to confirm
            store.put_messages([Message("bench", 0, b"t", 1)], now_ms=1)
            assert store.max_offset > before
            gaps: list[float] = []
            done = asyncio.Event()
            ticker = asyncio.create_task(tick(gaps, done))
            if mode == "thread":
                flusher.start()
            await asyncio.sleep(0.05)
            gaps.clear()
            wall, cpu = time.perf_counter(), cpu_s()
            if mode == "inline":
                clock[0] += 3600.0  # due
                store.set_confirm_offset(store.max_offset)  # no runner: written here, on the loop
            elif mode == "idle":  # the same ticker with no checkpoint: this machine's own noise
                await asyncio.sleep(2.0)
            else:
                clock[0] += 3600.0
                store.set_confirm_offset(store.max_offset)  # handed to the flusher's index thread
                while store.index_checkpoint_running:  # noqa: ASYNC110 - the store has no event to await
                    await asyncio.sleep(0.001)
            took = time.perf_counter() - wall
            used = cpu_s() - cpu
            await asyncio.sleep(0.01)
            done.set()
            await ticker
            if mode == "thread":
                await flusher.stop()
                flusher = GroupCommitFlusher(store, FlushMode.SYNC, interval_ms=10, timeout_ms=60_000)
            gaps.sort()
            sample = {
                "wall_s": round(took, 3),
                "cpu_s": round(used, 3),
                "max_loop_gap_ms": round(gaps[-1] * 1000, 1),
                "p99_loop_gap_ms": round(gaps[len(gaps) * 99 // 100] * 1000, 1),
            }
            samples[mode].append(sample)
    store.close()
    result |= samples
    result["loadavg"] = os.getloadavg()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m brokergroup.bench.store_restart", description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages in the log (default 1M)")
    parser.add_argument("--divergent", type=int, default=1000, help="messages of the divergent tail (default 1000)")
    parser.add_argument("--index-only", action="store_true", help="time only loading N queue entries (docstring)")
    parser.add_argument("--dir", type=Path, help="an empty folder for the store (default: a temporary one)")
    parser.add_argument(
        "--fill",
        choices=("puts", "segments"),
        help=f"how the store is built (docstring; default: puts below {SEGMENTS_FILL_FROM:,} messages, else segments)",
    )
    parser.add_argument("--stall", action="store_true", help="measure an index checkpoint's event-loop stall instead")
    parser.add_argument(
        "--producers",
        type=int,
        default=DEFAULT_MAX_PRODUCERS,
        help=f"--stall: producers remembering {DEFAULT_SEQ_WINDOW} sequences each (default {DEFAULT_MAX_PRODUCERS})",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.producers <= DEFAULT_MAX_PRODUCERS:
        parser.error(f"--producers ({args.producers}) must be between 1 and {DEFAULT_MAX_PRODUCERS}")
    if args.messages < 1 or args.divergent < 1:
        parser.error(f"--messages ({args.messages}) and --divergent ({args.divergent}) must be at least 1")
    if args.dir is not None and args.dir.exists() and any(args.dir.iterdir()):
        parser.error(f"--dir {args.dir} is not empty")
    directory = args.dir or Path(tempfile.mkdtemp(prefix="bg-store-restart-"))
    try:
        if args.stall:
            print(json.dumps(asyncio.run(run_stall(directory, args.producers))))
        elif args.index_only:
            print(json.dumps(run_index_only(directory, args.messages)))
        else:
            fill_with = args.fill or ("puts" if args.messages < SEGMENTS_FILL_FROM else "segments")
            print(json.dumps(run(directory, args.messages, args.divergent, fill_with)))
    finally:
        if args.dir is None:
            shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
