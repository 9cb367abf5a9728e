"""Baseline for `bench controller`: a raw pysyncobj replicated counter, 3 processes.

Run as `python -m brokergroup.bench.raft_baseline <self> <other> <other> <ops> <concurrency> <password> [<dir>]`.
Every process joins the group; the one that becomes leader drives `ops` increments with
`concurrency` in flight and prints one JSON line with the latency summary. Same pysyncobj
settings as the controller (password, appendEntriesUseBatch=False), no HTTP, no JSON.

With `<dir>`, the counter keeps its Raft log in the controller's durable journal there (every entry
fsynced before it counts, as the controller's are): the same counter, with the controller's durability.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

from pysyncobj import SyncObj, SyncObjConf
from pysyncobj.batteries import ReplCounter

from brokergroup.bench.stats import summarize


def main(argv: list[str]) -> int:
    me, others, ops, concurrency, password = argv[0], argv[1:3], int(argv[3]), int(argv[4]), argv[5]
    counter = ReplCounter()
    conf = SyncObjConf(password=password, appendEntriesUseBatch=False, commandsWaitLeader=False)
    if len(argv) > 6:
        from brokergroup.controller import raft_fixes
        from brokergroup.controller.replicated import open_journal

        raft_fixes.install()
        conf.journalFile = open_journal(Path(argv[6]))
    node = SyncObj(me, others, conf, consumers=[counter])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and node._getLeader() is None:
        time.sleep(0.05)
    time.sleep(0.5)
    if not node._isLeader():
        time.sleep(ops / 500 + 10)  # followers stay up while the leader measures
        return 0
    latencies: list[float] = []
    lock = threading.Lock()
    slots = threading.Semaphore(concurrency)
    done = threading.Event()
    remaining = [ops]

    def submit() -> None:
        started = time.perf_counter()

        def callback(_result: object, err: int) -> None:
            with lock:
                if err == 0:
                    latencies.append(time.perf_counter() - started)
                remaining[0] -= 1
                if remaining[0] == 0:
                    done.set()
            slots.release()

        counter.add(1, callback=callback)

    print(json.dumps({"phase": "start"}), flush=True)  # the bench samples every process's CPU here
    begin = time.perf_counter()
    for _ in range(ops):
        slots.acquire()
        submit()
    done.wait(60)
    print(json.dumps(summarize(latencies, time.perf_counter() - begin)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
