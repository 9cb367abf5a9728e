"""Retention and a full disk with real broker processes (#18).

Each replica's data folder is its own small tmpfs (`mount -t tmpfs -o size=...`, root only; unmounted
after the test). A full master refuses puts with SERVICE_NOT_AVAILABLE and a disk-full remark while
reads go on, and takes writes again by itself once space is free. Retention deletes head segments
under load; consumers reading below a queue's new start get OFFSET_TOO_SMALL, committed offsets
move up, a master killed with -9 comes back with the same queue offsets as its slaves.
"""

from __future__ import annotations

import base64
import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp

from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup
from tests.integration.broker.conftest import SYNC, get, make_set, same_log
from tests.integration.conftest import eventually
from tests.needs import missing

MIB = 1024 * 1024
SEGMENT = 64 * 1024


@contextlib.contextmanager
def tmpfs_mounts(paths: list[Path], size: str) -> Iterator[None]:
    if os.geteuid() != 0:
        missing("the disk tests mount tmpfs and need root")
    mounted: list[Path] = []
    try:
        for path in paths:
            path.mkdir(parents=True, exist_ok=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
            mounted.append(path)
        yield
    finally:
        for path in reversed(mounted):
            subprocess.run(["umount", "-l", str(path)], check=False)


@contextlib.contextmanager
def small_disk_set(tmp: Path, controllers: ControllerGroup, extra: list[str], size: str) -> Iterator[BrokerSet]:
    brokers = make_set(tmp, controllers, SYNC + extra)
    with tmpfs_mounts([node.data_dir for node in brokers.nodes], size):
        brokers.start_all()
        try:
            yield brokers
        finally:
            brokers.stop_all()


async def put(session: aiohttp.ClientSession, api: str, body: bytes, count: int = 1) -> dict[str, Any]:
    messages = [{"body": base64.b64encode(body).decode()} for _ in range(count)]
    async with session.post(f"http://{api}/v1/messages", json={"topic": "t", "messages": messages}) as r:
        answer: dict[str, Any] = await r.json()
        answer["http"] = r.status
        return answer


async def test_a_full_disk_refuses_puts_keeps_reads_and_resumes_by_itself(
    controller_group: ControllerGroup, tmp_path: Path
) -> None:
    extra = ["--min-free-disk-bytes", str(4 * MIB), "--set", f"store.segment_size={SEGMENT}"]
    with small_disk_set(tmp_path, controller_group, extra, "16m") as brokers:
        master = await brokers.master(timeout=120)
        api = brokers.nodes[master].api
        async with aiohttp.ClientSession() as session:
            await eventually("a first put", lambda: _ok(put(session, api, b"first")), timeout=90)
            ballast = brokers.nodes[master].data_dir / "ballast"
            with ballast.open("wb") as f:  # leave 2 MiB free: below the 4 MiB threshold
                free = os.statvfs(ballast.parent).f_bavail * os.statvfs(ballast.parent).f_frsize
                f.write(b"\0" * (free - 2 * MIB))
            refused = await put(session, api, b"refused")
            assert refused["http"] == 503 and refused["status"] == "SERVICE_NOT_AVAILABLE"
            assert "disk full" in refused["remark"] and "min_free_disk_bytes" in refused["remark"]
            status = await get(session, api, "/v1/status")
            assert status["store"]["diskFull"] is not None
            read = await get(session, api, "/v1/messages", topic="t", queueId=0, offset=0)
            assert [base64.b64decode(m["body"]) for m in read["messages"]] == [b"first"]
            ballast.unlink()  # space is free again: no restart, no reset
            await eventually("puts accepted again", lambda: _ok(put(session, api, b"after")), timeout=90)
            await eventually("replicas agree", lambda: same_log(brokers, session), timeout=90)
            read = await get(session, api, "/v1/messages", topic="t", queueId=0, offset=0)
            assert [base64.b64decode(m["body"]) for m in read["messages"]] == [b"first", b"after"]


async def _ok(answer: Any) -> bool:
    return bool((await answer)["status"] == "PUT_OK")


async def test_retention_under_load_moves_queues_and_offsets_and_survives_kill_9(
    controller_group: ControllerGroup, tmp_path: Path
) -> None:
    extra = [
        "--set", f"store.segment_size={SEGMENT}",
        "--retention-bytes", str(4 * SEGMENT),
        "--set", "store.retention_check_interval_ms=200",
        "--min-free-disk-bytes", str(MIB),
    ]  # fmt: skip
    with small_disk_set(tmp_path, controller_group, extra, "64m") as brokers:
        master = await brokers.master(timeout=120)
        api = brokers.nodes[master].api
        async with aiohttp.ClientSession() as session:
            await eventually("a first put", lambda: _ok(put(session, api, b"first")), timeout=90)
            # Every replica holds the log's start before retention may cut it, so that this test is about
            # retention on replicas that hold the same log; a replica that starts late copies from the
            # master's head state instead (test_new_replica_after_retention.py).
            await eventually("every replica copied the first put", lambda: same_log(brokers, session), timeout=90)
            async with session.post(
                f"http://{api}/v1/consumer-offsets", json={"group": "g", "topic": "t", "queueId": 0, "offset": 0}
            ) as r:
                assert r.status == 200, await r.text()
            for n in range(40):  # ~40 x 8 KiB x 4 = 1.3 MiB: 20 segments, retention keeps ~5
                answer = await put(session, api, b"%05d" % n + b"x" * 8000, count=4)
                assert answer["status"] == "PUT_OK", answer

            async def all_cut() -> bool:
                statuses = [await brokers.status(i, session) for i in range(3)]
                if all(s is not None and s["store"]["minOffset"] > 0 for s in statuses):
                    return True
                # Not yet: say where each replica is (the deadline's message shows the last of these).
                keys = ("minOffset", "maxOffset", "confirmOffset", "flushedOffset", "dispatchedOffset")
                raise AssertionError(
                    "; ".join(
                        f"{i} {s and s.get('role')}: "
                        + (", ".join(f"{k}={s['store'][k]}" for k in keys) if s else "no status")
                        for i, s in enumerate(statuses)
                    )
                )

            await eventually("every replica deleted head segments", all_cut, timeout=90)
            await eventually("replicas agree", lambda: same_log(brokers, session), timeout=90)
            read = await get(session, api, "/v1/messages", topic="t", queueId=0, offset=0)
            low = read["minOffset"]
            assert low > 0 and read["status"] == "OFFSET_TOO_SMALL" and read["messages"] == []
            assert read["nextOffset"] == low
            offset = await get(session, api, "/v1/consumer-offsets", group="g", topic="t", queueId=0)
            assert offset["offset"] >= low

            async def bounded() -> bool:  # a slave deletes once the master's confirm offset reached it
                counts = [len(os.listdir(node.data_dir / "store" / "commitlog")) for node in brokers.nodes]
                return all(count <= 6 for count in counts)

            await eventually("every replica holds at most 6 segments", bounded, timeout=90)

            async def views() -> list[dict[int, bytes]]:
                """Each replica's messages of queue 0 from the highest of their min offsets on."""
                mins = [
                    (await get(session, n.api, "/v1/messages", topic="t", offset=0))["minOffset"] for n in brokers.nodes
                ]
                found = []
                for node in brokers.nodes:
                    r = await get(session, node.api, "/v1/messages", topic="t", offset=max(mins), maxCount=100)
                    found.append({m["queueOffset"]: m["body"] for m in r["messages"]})
                return found

            before = await views()
            assert before[0] and before[0] == before[1] == before[2]
            brokers.kill(master)
            brokers.start(master)

            async def back() -> bool:
                status = await brokers.status(master, session)
                return status is not None and not status["fenced"]

            await eventually("the killed replica is back", back, timeout=120)
            await eventually("replicas agree", lambda: same_log(brokers, session), timeout=120)
            after = await views()
            assert after == before
