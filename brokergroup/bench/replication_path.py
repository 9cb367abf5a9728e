"""The sync put and replication path alone (issues 17 and 21): `python3 -m brokergroup.bench.replication_path`.

Three replicas in this process, each a file-backed `MessageStore` with SYNC flush, its
`GroupCommitFlusher` and its `HAService` (master 1, slaves 2 and 3 over 127.0.0.1, all-ack, every
proposal committed at once as a controller would). `--producers` tasks put `--puts` messages of
1 KiB in total, each waiting for the master's fsync and both slaves' fsynced acks, as a put does.
No HTTP, no controller processes: what is left is the store, group commit, HA frames and acks.

Prints one JSON object: puts/s, CPU per put (this process, every thread, kernel time included:
the three replicas' fsyncs), and per put the HA frames (the master's data frames, its frames
carrying only the confirm offset, the slaves' acks) and each replica's flushes. Frames are counted
by wrapping the HA shells' `encode`, a measurement seam of this bench only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import brokergroup.broker.ha.master as ha_master
import brokergroup.broker.ha.slave as ha_slave
from brokergroup.broker.ha.service import HAService
from brokergroup.broker.protocol.ha import Frame, MasterTransfer
from brokergroup.broker.settings import FlushMode, HASettings, StoreSettings
from brokergroup.broker.store.flusher import GroupCommitFlusher
from brokergroup.broker.store.message_store import MessageStore
from brokergroup.broker.store.types import Message, PutStatus

IDS = (1, 2, 3)
HA = HASettings(host="127.0.0.1", port=0, all_ack_in_sync_state_set=True, min_in_sync_replicas=2)


def _counting(encode: Callable[[Frame], bytes], counts: Counter[str], side: str) -> Callable[[Frame], bytes]:
    def counted(frame: Frame) -> bytes:
        if side == "slave":
            counts["slave_acks"] += 1
        elif isinstance(frame, MasterTransfer) and not frame.body:
            counts["master_confirm_only_frames"] += 1
        else:
            counts["master_data_frames"] += 1
        return encode(frame)

    return counted


async def run(puts: int, producers: int, directory: Path) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    shells = {side: vars(module) for side, module in (("master", ha_master), ("slave", ha_slave))}
    originals = {side: namespace["encode"] for side, namespace in shells.items()}
    for side, namespace in shells.items():
        namespace["encode"] = _counting(originals[side], counts, side)
    nodes: dict[int, tuple[MessageStore, GroupCommitFlusher, HAService]] = {}

    def commit(proposed: frozenset[int]) -> None:
        ha = nodes[1][2]
        asyncio.get_running_loop().call_soon(ha.set_sync_state_set, proposed, ha.sync_state_set_epoch + 1)

    for broker_id in IDS:
        store = MessageStore.open(directory / str(broker_id), StoreSettings(flush=FlushMode.SYNC))
        flusher = GroupCommitFlusher(store, FlushMode.SYNC, interval_ms=500, timeout_ms=10_000)
        flusher.start()
        ha = HAService(store, broker_id=broker_id, settings=HA, on_sync_state_set_change=commit)
        await ha.start()
        nodes[broker_id] = (store, flusher, ha)
    store, flusher, ha = nodes[1]
    body = os.urandom(1024)

    async def put() -> tuple[bool, PutStatus]:
        message = Message(topic="bench", queue_id=0, body=body, born_timestamp_ms=time.time_ns() // 1_000_000)
        result = store.put_messages([message], now_ms=message.born_timestamp_ms)
        replicated = await ha.wait_replicated(result.next_offset)
        return await flusher.wait_flushed(result.next_offset), replicated

    try:
        await ha.become_master(epoch=1, sync_state_set=frozenset({1}), sync_state_set_epoch=1)
        for broker_id in IDS[1:]:
            await nodes[broker_id][2].become_slave(master_ha_address=ha.address, epoch=1)
        deadline = time.monotonic() + 30
        while ha.sync_state_set != set(IDS):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the sync-state-set is {sorted(ha.sync_state_set)} after 30 s, not {list(IDS)}")
            await put()
            await asyncio.sleep(0.05)
        for _ in range(100):  # warm-up
            await put()
        counts.clear()
        flushes = [node[1].flush_count for node in nodes.values()]
        cpu, wall = time.process_time(), time.perf_counter()
        todo = iter(range(puts))
        failed: list[tuple[bool, PutStatus]] = []

        async def producer() -> None:
            for _ in todo:
                outcome = await put()
                if outcome != (True, PutStatus.PUT_OK):
                    failed.append(outcome)

        await asyncio.gather(*(producer() for _ in range(producers)))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        if failed:
            raise RuntimeError(f"{len(failed)} puts not acknowledged, e.g. {failed[0]}")
        return {
            "puts": puts,
            "producers": producers,
            "puts_per_s": round(puts / wall),
            "cpu_us_per_put": round(cpu / puts * 1e6),
            "per_put": {key: round(value / puts, 3) for key, value in sorted(counts.items())},
            "flushes_per_put": [
                round((node[1].flush_count - n) / puts, 3) for node, n in zip(nodes.values(), flushes, strict=True)
            ],
            "load_average_1m": round(os.getloadavg()[0], 2),
        }
    finally:
        for side, namespace in shells.items():
            namespace["encode"] = originals[side]
        for node_store, node_flusher, node_ha in nodes.values():
            await node_ha.stop()
            await node_flusher.stop()
            node_store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m brokergroup.bench.replication_path", description=__doc__)
    parser.add_argument("--puts", type=int, default=3000, help="messages put (1 KiB each)")
    parser.add_argument("--producers", type=int, default=8, help="concurrent producers, one put in flight each")
    args = parser.parse_args(argv)
    if args.puts < 1 or args.producers < 1:
        parser.error(f"--puts ({args.puts}) and --producers ({args.producers}) must be at least 1")
    logging.basicConfig(level=logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="bg-replication-path-") as directory:
        result = asyncio.run(run(args.puts, args.producers, Path(directory)))
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
