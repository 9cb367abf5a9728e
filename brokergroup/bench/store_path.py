"""The batched put path's CPU per message, master and slave, in one process (issue 17):
`python3 -m brokergroup.bench.store_path`.

A master store takes `--batches` binary batches of `--batch` 1-KiB messages from one idempotent producer
as the binary port hands them over (`wire.decode_batch`, then `MessageStore.put_messages`); a slave store
then appends the master's log as replication ships it (`read_raw` in 256 KiB reads, `append_raw`). Both
are file-backed, ASYNC flush, no fsync in the loop, no sockets, no event loop: what is left is the Python
each message costs a master and a slave on the put path, which the end-to-end `bench produce` cannot
separate from this machine's window-to-window swings. `--rounds` repeats both, each on new stores.

Prints one JSON object: per round, the CPU microseconds per message (`time.process_time`: this
process, kernel time included) of the master and of the slave, and their medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from brokergroup.broker.settings import StoreSettings
from brokergroup.broker.store.message_store import MessageStore
from brokergroup.broker.wire import decode_batch, encode_batch

BODY_SIZE = 1024
READ_SIZE = 256 * 1024
"""What a master ships per replication frame (`ha.transfer_batch_size`'s default)."""
PRODUCER_ID = 1
NOW_MS = 1_700_000_000_000


def one_round(directory: Path, batches: int, batch: int) -> dict[str, float]:
    body = os.urandom(BODY_SIZE)
    bodies = [
        encode_batch(
            topic="bench",
            queue_id=0,
            producer_id=PRODUCER_ID,
            messages=[(b * batch + i, NOW_MS, {}, body) for i in range(batch)],
        )
        for b in range(batches)
    ]
    master = MessageStore.open(directory / "master", StoreSettings())
    slave = MessageStore.open(directory / "slave", StoreSettings())
    try:
        started = time.process_time()
        for data in bodies:
            master.put_messages(decode_batch(data, now_ms=NOW_MS), now_ms=NOW_MS)
        master_s = time.process_time() - started
        offset, end = 0, master.max_offset
        started = time.process_time()
        while offset < end:
            chunk = master.read_raw(offset, READ_SIZE)
            slave.append_raw(offset, chunk)
            offset += len(chunk)
        slave_s = time.process_time() - started
        if slave.max_offset != end:
            raise RuntimeError(f"the slave holds {slave.max_offset} bytes, the master {end}")
    finally:
        master.close()
        slave.close()
    messages = batches * batch
    return {"master_us_per_message": master_s / messages * 1e6, "slave_us_per_message": slave_s / messages * 1e6}


def run(batches: int, batch: int, rounds: int) -> dict[str, Any]:
    results = []
    for index in range(rounds):
        with tempfile.TemporaryDirectory(prefix=f"bg-store-path-{index}-") as directory:
            results.append(one_round(Path(directory), batches, batch))
    return {
        "benchmark": "store_path",
        "batches": batches,
        "batch": batch,
        "body_bytes": BODY_SIZE,
        "rounds": [{k: round(v, 2) for k, v in r.items()} for r in results],
        "median": {k: round(statistics.median(r[k] for r in results), 2) for k in results[0]},
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m brokergroup.bench.store_path", description=__doc__)
    parser.add_argument("--batches", type=int, default=2000, help="batches the master takes")
    parser.add_argument("--batch", type=int, default=32, help="messages per batch (1..1024)")
    parser.add_argument("--rounds", type=int, default=3, help="repetitions, each on new stores")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    if args.batches < 1 or args.rounds < 1 or not 1 <= args.batch <= 1024:
        parser.error(
            f"--batches ({args.batches}) and --rounds ({args.rounds}) must be at least 1, "
            f"--batch ({args.batch}) 1..1024"
        )
    result = run(args.batches, args.batch, args.rounds)
    text = json.dumps(result)
    if args.out is not None:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
