"""Broker restart → serving, as a process (issue 18's goal): `python3 -m brokergroup.bench.broker_restart
--messages 1000000,10000000`.

`store_restart` times `MessageStore.open` inside one process. This times what an operator waits for: a real
`brokergroup broker` process restarted on a log of N messages, with 3 real controllers on 127.0.0.1. Per size,
a fresh group: the broker starts once on an empty folder (it registers and is elected master of its
one-replica set; RocketMQ's default timings), stops, its store is filled offline with N messages
(`store_restart`'s fill: 100-byte bodies, 16 queues, 64 MiB segments, all confirmed; the store closes with its
index checkpoint), and then the broker is restarted `--restarts` times after SIGTERM (a clean stop) and once
after SIGKILL (its log recovered as after a crash, from the last index checkpoint). Each restart reports, from
the spawn:

- `status_s`: the HTTP API answers `GET /v1/status` (the store is open: the broker opens it before it serves);
- `master_s`: the broker is master with a write lease again (the controller has heard it and told it);
- `first_read_s`: `GET /v1/messages` returns the message at the middle of queue 0, read through the store's
  mapped consume queue.

Prints one JSON object (the load average beside each size: the machine is shared).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import aiohttp

from brokergroup.bench.store_restart import QUEUES, SEGMENTS_FILL_FROM, fill, fill_segments
from brokergroup.broker.settings import StoreSettings
from brokergroup.broker.store.message_store import MessageStore
from brokergroup.common import eventloop
from brokergroup.local import profiles
from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup
from brokergroup.local.processes import tail
from brokergroup.local.snapshot import get_json

TOPIC = "bench"
DEADLINE_S = float(os.environ.get("BROKERGROUP_BENCH_DEADLINE_S", "300"))


async def until(what: str, check: Callable[[], Awaitable[bool]], started: float) -> float:
    """Seconds from `started` until `await check()` is true; fails after DEADLINE_S naming `what`."""
    while time.monotonic() - started < DEADLINE_S:
        if await check():
            return round(time.monotonic() - started, 3)
        await asyncio.sleep(0.01)
    raise TimeoutError(f"{what} not reached within {DEADLINE_S:.0f} s")


async def restart(brokers: BrokerSet, session: aiohttp.ClientSession, middle: int) -> dict[str, float]:
    api = brokers.nodes[0].api
    started = time.monotonic()
    brokers.start(0)

    async def status() -> bool:
        return await get_json(session, f"http://{api}/v1/status") is not None

    async def master() -> bool:
        doc = await get_json(session, f"http://{api}/v1/status")
        return bool(doc and doc.get("role") == "master" and doc.get("writeLeaseRemainingMs", 0) > 0)

    async def read() -> bool:
        url = f"http://{api}/v1/messages?topic={TOPIC}&queueId=0&offset={middle}&maxCount=1"
        doc = await get_json(session, url)
        messages = (doc or {}).get("messages") or []
        return bool(messages and messages[0].get("queueOffset") == middle)

    try:
        return {
            "status_s": await until("GET /v1/status", status, started),
            "master_s": await until("master with a write lease", master, started),
            "first_read_s": await until(f"the message at offset {middle} of queue 0", read, started),
        }
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; the broker's log ends:\n{tail(brokers.nodes[0].log_path)}") from None


async def stopped(brokers: BrokerSet, sig: signal.Signals) -> None:
    node = brokers.nodes[0]
    brokers.signal(0, sig)

    async def gone() -> bool:
        return not node.running

    await until(f"the broker's exit after {sig.name}", gone, time.monotonic())


async def one_size(base: Path, messages: int, restarts: int) -> dict[str, Any]:
    group = ControllerGroup(
        base / "controllers", extra_args=["--log-level", "WARNING", *profiles.DEFAULT.controller_args()]
    )
    group.start_all()
    brokers = BrokerSet(
        base / "brokers",
        controllers=group.api_addresses,
        broker_name="restart",
        replicas=1,
        extra_args=["--log-level", "WARNING", *profiles.DEFAULT.broker_args()],
    )
    try:
        brokers.start(0)
        await brokers.master(timeout=DEADLINE_S / 2)  # registered and elected on an empty log
        await stopped(brokers, signal.SIGTERM)
        load = {"before_fill": os.getloadavg()}
        fill_with = "puts" if messages < SEGMENTS_FILL_FROM else "segments"
        started = time.monotonic()
        with closing(MessageStore.open(brokers.nodes[0].data_dir / "store", StoreSettings())) as store:
            (fill if fill_with == "puts" else fill_segments)(store, messages)
            log_bytes, middle = store.max_offset, store.queue_max_offset(TOPIC, 0) // 2
        fill_s = round(time.monotonic() - started, 1)
        runs = []
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
            for i in range(restarts):  # the broker was last stopped by SIGTERM (before the fill, then here)
                runs.append({"after": "SIGTERM", **await restart(brokers, session, middle)})
                await stopped(brokers, signal.SIGTERM if i + 1 < restarts else signal.SIGKILL)
            runs.append({"after": "SIGKILL", **await restart(brokers, session, middle)})
        load["at_end"] = os.getloadavg()
        return {
            "messages": messages,
            "log_bytes": log_bytes,
            "fill": fill_with,
            "fill_s": fill_s,
            "restarts": runs,
            "loadavg": load,
        }
    finally:
        brokers.stop_all()
        group.stop_all()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m brokergroup.bench.broker_restart", description=__doc__)
    parser.add_argument("--messages", default="1000000,10000000", help="comma-separated log sizes in messages")
    parser.add_argument("--restarts", type=int, default=2, help="restarts after SIGTERM per size (then one SIGKILL)")
    args = parser.parse_args(argv)
    try:
        sizes = [int(s) for s in args.messages.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--messages {args.messages!r}: comma-separated whole numbers, e.g. 1000000,10000000")
    if not sizes or any(n < QUEUES * 2 for n in sizes):
        parser.error(f"--messages {args.messages!r}: each size at least {QUEUES * 2}")
    if not 1 <= args.restarts <= 20:
        parser.error(f"--restarts {args.restarts}: within 1..20")
    results = []
    for n in sizes:
        base = Path(tempfile.mkdtemp(prefix="bg-broker-restart-"))
        try:
            results.append(eventloop.run(one_size(base, n, args.restarts)))
        finally:
            shutil.rmtree(base, ignore_errors=True)
    print(json.dumps({"benchmark": "broker restart", "sizes": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
