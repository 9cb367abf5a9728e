"""The event log on disk (EventLogWriter) and the long-poll feed behind GET /v1/events (EventFeed)."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from brokergroup.controller.eventlog import EventFeed, EventLogWriter

NODE = "n1"
BATCH = uuid.UUID("5f0c6f2e-8d1a-4b8e-9c55-0d2f3b7a9e41")


def raft(index: int, *, position: int = 0, term: int = 2) -> dict[str, Any]:
    """A raft record as `records.raft_record` shapes it (only the fields the writer looks at vary)."""
    return {
        "schemaVersion": 1,
        "eventId": str(uuid.uuid5(BATCH, f"{index}/{position}")),
        "ts": 1_700_000_000_000 + index,
        "node": None,
        "term": term,
        "index": index,
        "source": "raft",
        "brokerName": "broker-a",
        "type": "ALTER_SYNC_STATE_SET",
        "syncStateSet": [1, 2],
    }


def local(tag: str) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "eventId": str(uuid.uuid5(BATCH, tag)),
        "ts": 1_700_000_000_000,
        "node": None,
        "term": 2,
        "index": None,
        "source": "local",
        "brokerName": None,
        "type": "CONTROLLER_LEADER_CHANGED",
        "reason": tag,
    }


def lines_of(writer: EventLogWriter) -> list[str]:
    return [line for path in writer.files() for line in path.read_text(encoding="utf-8").splitlines(keepends=True)]


def logged(writer: EventLogWriter) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines_of(writer)]


def positions(writer: EventLogWriter) -> list[int | str]:
    """Each line as its raft index, or the local record's reason."""
    return [r["index"] if r["source"] == "raft" else r["reason"] for r in logged(writer)]


def new_writer(directory: Path, *, max_bytes: int = 1 << 20, node_id: str = NODE) -> EventLogWriter:
    return EventLogWriter(directory, node_id=node_id, max_bytes=max_bytes)


# ---- writing ---------------------------------------------------------------------------------------------


def test_one_line_per_record_stamped_with_the_node(tmp_path: Path) -> None:
    writer = new_writer(tmp_path / "events")
    batch = [raft(1), raft(2, position=0), raft(2, position=1), local("leader")]
    writer.append(batch)
    lines = lines_of(writer)
    assert [p.name for p in writer.files()] == ["events-n1-000000.jsonl"]
    assert len(lines) == 4
    assert all(line.endswith("\n") and line.count("\n") == 1 for line in lines)
    assert [json.loads(line) for line in lines] == [{**r, "node": NODE} for r in batch]
    assert writer.last_index == 2


def test_append_does_not_change_the_callers_records(tmp_path: Path) -> None:
    writer = new_writer(tmp_path)
    record = raft(1)
    writer.append([record])
    assert record["node"] is None


def test_nodes_sharing_a_directory_keep_separate_files(tmp_path: Path) -> None:
    one, two = new_writer(tmp_path, node_id="n1"), new_writer(tmp_path, node_id="n2")
    one.append([raft(1)])
    two.append([raft(1), raft(2)])
    assert [r["node"] for r in logged(one)] == ["n1"]
    assert [r["node"] for r in logged(two)] == ["n2", "n2"]


def test_empty_append_creates_no_file(tmp_path: Path) -> None:
    writer = new_writer(tmp_path)
    writer.append([])
    assert writer.files() == []


def test_rolls_to_a_new_file_past_max_bytes(tmp_path: Path) -> None:
    max_bytes = 600
    writer = new_writer(tmp_path, max_bytes=max_bytes)
    for index in range(1, 21):
        writer.append([raft(index)])
    files = writer.files()
    assert len(files) > 2
    assert [p.name for p in files] == [f"events-n1-{seq:06d}.jsonl" for seq in range(len(files))]
    for path in files[:-1]:
        content = path.read_bytes()
        last_line = content.splitlines(keepends=True)[-1]
        assert len(content) >= max_bytes, path.name  # full before rolling ...
        assert len(content) - len(last_line) < max_bytes, path.name  # ... and rolled as soon as it was
    assert positions(writer) == list(range(1, 21))


def test_the_file_stays_open_between_appends_and_reopens_after_close(tmp_path: Path) -> None:
    writer = new_writer(tmp_path)
    writer.append([raft(1)])
    path = writer.files()[0]
    assert any(
        os.path.samefile(fd, path) for fd in Path("/proc/self/fd").iterdir() if fd.exists()
    )  # kept open: no open, stat and close per append
    writer.append([raft(2)])
    writer.sync()
    writer.close()
    writer.append([raft(3)])  # appends again, to the same file
    writer.close()
    assert positions(writer) == [1, 2, 3]
    assert len(writer.files()) == 1


def test_a_restart_continues_a_full_file_in_the_next_one(tmp_path: Path) -> None:
    first = new_writer(tmp_path, max_bytes=300)
    first.append([raft(1), raft(2)])  # more than 300 bytes: the file is full
    first.close()
    second = new_writer(tmp_path, max_bytes=300)
    second.append([raft(3)])
    second.close()
    assert [p.name for p in second.files()] == ["events-n1-000000.jsonl", "events-n1-000001.jsonl"]
    assert positions(second) == [1, 2, 3]


# ---- restart: raft records are written once per index --------------------------------------------------------


def test_restart_skips_raft_records_already_on_disk(tmp_path: Path) -> None:
    before = new_writer(tmp_path)
    before.append([raft(i) for i in range(1, 6)])
    before.append([local("before")])

    after = new_writer(tmp_path)  # a new process on the same data dir
    assert after.last_index == 5
    for index in range(1, 6):  # pysyncobj re-applies its journal
        after.append([raft(index)])
    after.append([local("after")])
    after.append([raft(6), raft(7)])
    assert positions(after) == [1, 2, 3, 4, 5, "before", "after", 6, 7]
    assert after.last_index == 7


def test_restart_skips_a_whole_rewritten_batch_but_not_local_records_in_it(tmp_path: Path) -> None:
    new_writer(tmp_path).append([raft(3, position=0), raft(3, position=1)])
    after = new_writer(tmp_path)
    after.append([raft(3, position=0), raft(3, position=1), local("observed")])
    assert positions(after) == [3, 3, "observed"]


def test_restart_finds_the_last_index_after_rolling(tmp_path: Path) -> None:
    before = new_writer(tmp_path, max_bytes=400)
    for index in range(1, 16):
        before.append([raft(index)])
    assert len(before.files()) > 2
    after = new_writer(tmp_path, max_bytes=400)
    assert after.last_index == 15
    after.append([raft(14), raft(15), raft(16)])
    indexes = positions(after)
    assert indexes == list(range(1, 17))
    assert json.loads(after.files()[-1].read_text().splitlines()[-1])["index"] == 16


def test_restart_with_only_local_records_starts_from_zero(tmp_path: Path) -> None:
    new_writer(tmp_path).append([local("a")])
    after = new_writer(tmp_path)
    assert after.last_index == 0
    after.append([raft(1)])
    assert positions(after) == ["a", 1]


def test_torn_last_line_does_not_break_the_restart(tmp_path: Path) -> None:
    before = new_writer(tmp_path)
    before.append([raft(i) for i in range(1, 4)])
    torn = json.dumps({**raft(4), "node": NODE}, separators=(",", ":"))[:37]
    with before.files()[-1].open("a", encoding="utf-8") as f:  # the process died in the middle of a line
        f.write(torn)

    after = new_writer(tmp_path)
    assert after.last_index == 3
    after.append([raft(4)])  # re-applied from the journal
    after.append([raft(5)])
    assert positions(after) == [1, 2, 3, 4, 5]  # every line parses, no fragment is left behind
    assert all(line.endswith("\n") for line in lines_of(after))


def test_torn_line_after_a_full_file_does_not_break_the_restart(tmp_path: Path) -> None:
    before = new_writer(tmp_path, max_bytes=300)
    for index in range(1, 4):
        before.append([raft(index)])
    with before.files()[-1].open("a", encoding="utf-8") as f:
        f.write('{"schemaVersion":1,"eventId":"')
    after = new_writer(tmp_path, max_bytes=300)
    after.append([raft(3), raft(4)])
    assert positions(after) == [1, 2, 3, 4]


# ---- the feed ------------------------------------------------------------------------------------------------------


def feed_with(*indexes: int, capacity: int = 100) -> EventFeed:
    feed = EventFeed(capacity=capacity)
    for index in indexes:
        feed.publish(index, [raft(index)])
    return feed


def indexes_of(page: dict[str, Any]) -> list[int]:
    return [r["index"] for r in page["events"]]


def test_read_returns_records_after_the_index() -> None:
    feed = feed_with(1, 2, 3, 5)
    page = feed.read(2)
    assert (indexes_of(page), page["lastIndex"], page["truncated"]) == ([3, 5], 5, False)
    assert indexes_of(feed.read(0)) == [1, 2, 3, 5]
    assert feed.read(5) == {"events": [], "lastIndex": 5, "truncated": False}


def test_read_honours_the_limit_oldest_first() -> None:
    feed = feed_with(*range(1, 11))
    assert indexes_of(feed.read(3, limit=4)) == [4, 5, 6, 7]


def test_a_page_never_ends_inside_an_entry() -> None:
    """A group-commit entry holds records of several sets at one index; a reader continues after the
    last index it got, so a page cut inside an entry would lose the entry's other records."""
    feed = EventFeed()
    feed.publish(4, [raft(4, position=0)])
    feed.publish(5, [raft(5, position=p) for p in range(3)])
    feed.publish(6, [raft(6, position=0)])
    assert indexes_of(feed.read(3, limit=2)) == [4, 5, 5, 5]
    assert indexes_of(feed.read(5, limit=2)) == [6]
    assert indexes_of(feed.read(3, limit=1)) == [4]


def test_batches_share_an_index_and_entries_without_events_advance_last_index() -> None:
    feed = EventFeed()
    feed.publish(4, [raft(4, position=0), raft(4, position=1)])
    feed.publish(6, [])  # a barrier: applied, no events
    page = feed.read(3)
    assert (len(page["events"]), page["lastIndex"]) == (2, 6)
    assert feed.read(4)["events"] == []


def test_capacity_drops_the_oldest_and_reports_truncation() -> None:
    feed = feed_with(*range(1, 8), capacity=3)
    assert indexes_of(feed.read(0)) == [5, 6, 7]
    assert feed.read(0)["truncated"] is True
    assert feed.read(3)["truncated"] is True
    assert feed.read(4)["truncated"] is False
    assert indexes_of(feed.read(4)) == [5, 6, 7]


def test_a_loaded_snapshot_is_a_gap() -> None:
    feed = EventFeed()
    feed.note_gap(40)
    feed.publish(41, [raft(41)])
    assert feed.read(10) == {"events": [raft(41)], "lastIndex": 41, "truncated": True}
    assert feed.read(40)["truncated"] is False


async def test_wait_returns_at_once_when_records_are_there() -> None:
    feed = feed_with(1, 2)
    page = await asyncio.wait_for(feed.wait(1, timeout=30.0), 1.0)
    assert indexes_of(page) == [2]


async def test_wait_returns_when_a_record_is_published() -> None:
    feed = feed_with(1)
    waiter = asyncio.create_task(feed.wait(1, timeout=30.0))
    await asyncio.sleep(0)  # let the waiter block on the feed
    assert not waiter.done()
    feed.publish(2, [raft(2)])
    page = await asyncio.wait_for(waiter, 1.0)
    assert (indexes_of(page), page["lastIndex"]) == ([2], 2)


async def test_every_waiter_wakes_on_one_publish() -> None:
    feed = EventFeed()
    waiters = [asyncio.create_task(feed.wait(0, timeout=30.0)) for _ in range(3)]
    await asyncio.sleep(0)
    feed.publish(1, [raft(1)])
    pages = await asyncio.wait_for(asyncio.gather(*waiters), 1.0)
    assert [indexes_of(p) for p in pages] == [[1], [1], [1]]


async def test_publish_from_another_thread_wakes_the_loop_only_for_a_waiter() -> None:
    """pysyncobj's thread publishes; the loop is woken (through `wake`) only while a reader waits."""
    loop = asyncio.get_running_loop()
    woken: list[object] = []

    def wake(fn: Callable[[], None]) -> None:
        woken.append(fn)
        loop.call_soon_threadsafe(fn)

    feed = EventFeed(wake=wake)
    await asyncio.to_thread(feed.publish, 1, [raft(1)])
    assert woken == [] and indexes_of(feed.read(0)) == [1]
    waiter = asyncio.create_task(feed.wait(1, timeout=30.0))
    await asyncio.sleep(0)  # the waiter blocks on the feed
    assert not waiter.done()
    await asyncio.to_thread(feed.publish, 2, [raft(2)])
    page = await asyncio.wait_for(waiter, 5.0)
    assert (indexes_of(page), len(woken)) == ([2], 1)
    await asyncio.to_thread(feed.publish, 3, [raft(3)])  # the waiter is gone: no wake-up
    assert len(woken) == 1


async def test_a_reader_never_misses_a_publish_from_another_thread() -> None:
    """Readers and a publishing thread race: every reader gets its next record well before its timeout."""
    loop = asyncio.get_running_loop()
    feed = EventFeed(wake=loop.call_soon_threadsafe)

    async def reader(after: int) -> list[int]:
        got: list[int] = []
        while after < 200:
            page = await feed.wait(after, timeout=30.0)
            got += indexes_of(page)
            after = page["events"][-1]["index"] if page["events"] else after
        return got

    def publisher() -> None:
        for index in range(1, 201):
            feed.publish(index, [raft(index)])
            if index % 20 == 0:
                time.sleep(0.001)

    readers = [asyncio.create_task(reader(0)) for _ in range(4)]
    await asyncio.to_thread(publisher)
    pages = await asyncio.wait_for(asyncio.gather(*readers), 10.0)
    assert all(p == list(range(1, 201)) for p in pages)


async def test_wait_times_out_with_an_empty_page() -> None:
    feed = feed_with(1)
    page = await asyncio.wait_for(feed.wait(1, timeout=0.05), 1.0)
    assert page == {"events": [], "lastIndex": 1, "truncated": False}


async def test_wait_without_timeout_does_not_block() -> None:
    page = await asyncio.wait_for(EventFeed().wait(0, timeout=0), 1.0)
    assert page == {"events": [], "lastIndex": 0, "truncated": False}


@pytest.mark.parametrize("limit", [1, 2])
async def test_wait_applies_the_limit(limit: int) -> None:
    feed = feed_with(1, 2, 3)
    assert len((await feed.wait(0, timeout=0, limit=limit))["events"]) == limit
