"""Store restart and truncation cost (issue 18): `python3 -m brokergroup.bench.store_restart --messages N`.

Builds a store of N messages (100-byte bodies, 16 queues, 64 MiB segments, all confirmed) straight
through the store API in a temporary folder (or `--dir`), closes it, then measures:

- `open_s`: `MessageStore.open` until the store serves (indexes loaded from the index checkpoint
  the close wrote, and the log after it replayed), plus a first read; `open_log_s`: the share of
  it that opening the commit log alone takes (segments.py's recovery of its last segment), so
  `open_s - open_log_s` is the indexes' share;
- `truncate_s`: a slave's truncation of a divergent, unconfirmed tail of `--divergent` messages;
- `open_after_retention_s`: the same open once retention deleted all segments but the last two.

Prints one JSON object. Each phase runs in this process; CPU seconds are this process's.

`--index-only` skips the store: it writes N consume-queue entries (16 queues) with `IndexFiles.write`
and times `IndexFiles.load`, the queue files' share of an open at a size (50M) too slow to fill here.
"""

from __future__ import annotations

import argparse
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

from brokergroup.broker.settings import StoreSettings
from brokergroup.broker.store.index_files import IndexFiles
from brokergroup.broker.store.indexes import IndexSnapshot, QueueState
from brokergroup.broker.store.message_store import COMMITLOG_DIR, MessageStore
from brokergroup.broker.store.segments import CommitLog
from brokergroup.broker.store.types import Message

BATCH = 256
QUEUES = 16


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def fill(store: MessageStore, count: int) -> None:
    body = b"m" * 100
    for first in range(0, count, BATCH):
        n = min(BATCH, count - first)
        batch = [Message("bench", (first + i) % QUEUES, body, 1) for i in range(n)]
        store.put_messages(batch, now_ms=1)
        store.set_confirm_offset(store.max_offset)
    store.flush()


def timed_log_open(directory: Path, settings: StoreSettings) -> float:
    started = time.perf_counter()
    CommitLog(directory / COMMITLOG_DIR, segment_size=settings.segment_size, max_body=settings.max_message_size).close()
    return time.perf_counter() - started


def timed_open(directory: Path, settings: StoreSettings) -> tuple[float, float, MessageStore]:
    started, cpu = time.perf_counter(), cpu_s()
    store = MessageStore.open(directory, settings)
    low = store.queue_min_offset("bench", 0)
    store.get_messages("bench", 0, low, max_count=1, max_bytes=1 << 20)
    return time.perf_counter() - started, cpu_s() - cpu, store


def run(directory: Path, messages: int, divergent: int) -> dict[str, Any]:
    settings = StoreSettings(segment_size=64 * 1024 * 1024, retention_bytes=2 * 64 * 1024 * 1024)
    started = time.perf_counter()
    with closing(MessageStore.open(directory, settings)) as store:
        fill(store, messages)
        log_bytes = store.max_offset
    result: dict[str, Any] = {
        "messages": messages,
        "log_bytes": log_bytes,
        "fill_s": round(time.perf_counter() - started, 3),
    }
    open_log_s = timed_log_open(directory, settings)
    open_s, open_cpu, store = timed_open(directory, settings)
    result |= {"open_s": round(open_s, 3), "open_cpu_s": round(open_cpu, 3), "open_log_s": round(open_log_s, 3)}
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
    queues = {("bench", q): QueueState(0, array("q", range(n)), array("q", [162]) * n) for q, n in enumerate(per_queue)}
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m brokergroup.bench.store_restart", description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages in the log (default 1M)")
    parser.add_argument("--divergent", type=int, default=1000, help="messages of the divergent tail (default 1000)")
    parser.add_argument("--index-only", action="store_true", help="time only loading N queue entries (docstring)")
    parser.add_argument("--dir", type=Path, help="an empty folder for the store (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.messages < 1 or args.divergent < 1:
        parser.error(f"--messages ({args.messages}) and --divergent ({args.divergent}) must be at least 1")
    if args.dir is not None and args.dir.exists() and any(args.dir.iterdir()):
        parser.error(f"--dir {args.dir} is not empty")
    directory = args.dir or Path(tempfile.mkdtemp(prefix="bg-store-restart-"))
    try:
        if args.index_only:
            print(json.dumps(run_index_only(directory, args.messages)))
        else:
            print(json.dumps(run(directory, args.messages, args.divergent)))
    finally:
        if args.dir is None:
            shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
