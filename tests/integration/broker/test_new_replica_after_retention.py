"""A new or rebuilt replica joins a set whose master's retention deleted its log's head (#18 item 3).

Real broker and controller processes, small segments and `--retention-bytes`. Two replicas run while
the master's retention cuts the head; then the third starts with an empty data folder, and later a
slave's data folder is wiped and it starts again. Each copies from the master's min offset (or, with
`ha.sync_from_last_file`, from its last segment) after the master's head state, and ends with the
master's queue offsets and messages from its own min offset on, its consumer offsets (also those
committed only in deleted segments) and its producer sequences (a retry of a message that exists
only in deleted segments is still a duplicate once the new replica is elected master).

kill -9 in the middle of the seeding: the broker process cannot be stopped at a chosen step, so the
files such a kill leaves are made by the store's own code (its step hook raising at that step, in
this process, on the wiped replica's folder) before the process starts on them.
"""

from __future__ import annotations

import base64
import shutil
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from brokergroup.broker.settings import StoreSettings
from brokergroup.broker.store.head import HeadFile
from brokergroup.broker.store.message_store import HEAD_FILE, STEP_SEED_HEAD_WRITTEN, STEP_SEED_RESET, MessageStore
from brokergroup.controller import protocol
from brokergroup.controller.client import ControllerClient
from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup
from tests.integration.broker.conftest import SYNC, get, make_set
from tests.integration.conftest import ADMIN_TOKEN, eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SEGMENT = 64 * 1024
EARLY_PRODUCER = 88
"""Writes one message before the load: its sequence survives only in the head state."""
LOAD_PRODUCER = 77


async def put(
    session: aiohttp.ClientSession, api: str, bodies: list[bytes], *, producer: int, seq: int
) -> dict[str, Any]:
    messages = [{"body": base64.b64encode(b).decode(), "seq": seq + i} for i, b in enumerate(bodies)]
    request = {"topic": "t", "producerId": producer, "messages": messages}
    async with session.post(f"http://{api}/v1/messages", json=request) as r:
        answer: dict[str, Any] = await r.json()
        answer["http"] = r.status
        return answer


async def commit(session: aiohttp.ClientSession, api: str, group: str, offset: int) -> None:
    body = {"group": group, "topic": "t", "queueId": 0, "offset": offset}
    async with session.post(f"http://{api}/v1/consumer-offsets", json=body) as r:
        assert r.status == 200, await r.text()


async def status(brokers: BrokerSet, index: int, session: aiohttp.ClientSession) -> dict[str, Any]:
    found = await brokers.status(index, session)
    assert found is not None, f"replica {index} does not answer"
    return found


async def queue_from(session: aiohttp.ClientSession, api: str, low: int) -> list[tuple[int, str]]:
    """(queue offset, body) of queue t/0 from `low` on, in pages."""
    found: list[tuple[int, str]] = []
    while True:
        page = await get(session, api, "/v1/messages", topic="t", queueId=0, offset=low, maxCount=200)
        found += [(m["queueOffset"], m["body"]) for m in page["messages"]]
        if not page["messages"]:
            return found
        low = page["messages"][-1]["queueOffset"] + 1


async def caught_up(brokers: BrokerSet, index: int, master: int, session: aiohttp.ClientSession) -> bool:
    """Replica `index` holds the master's log up to its max offset, and its confirm offset too."""
    mine, theirs = await status(brokers, index, session), await status(brokers, master, session)
    if mine["replication"] and mine["replication"]["slave"]:
        assert "SeedRequired" not in str(mine["replication"]["slave"]["lastError"]), mine["replication"]
    return bool(
        mine["store"]["maxOffset"] == theirs["store"]["maxOffset"] > 0
        and mine["store"]["confirmOffset"] == theirs["store"]["confirmOffset"]
    )


async def same_as_master(
    brokers: BrokerSet, index: int, master: int, session: aiohttp.ClientSession, *, from_last_file: bool
) -> bool:
    """Raises AssertionError saying what differs (retried by `eventually`: each replica's retention runs
    on its own, so their heads may differ for a moment)."""
    mine, theirs = await status(brokers, index, session), await status(brokers, master, session)
    start, master_start = mine["store"]["minOffset"], theirs["store"]["minOffset"]
    assert start > 0 and start % SEGMENT == 0, mine["store"]
    if from_last_file:  # the master keeps ~4 segments: its last one starts after its first
        assert start > master_start, (mine["store"], theirs["store"])
    else:
        assert start == master_start, (mine["store"], theirs["store"])
    api, master_api = brokers.nodes[index].api, brokers.nodes[master].api
    low = (await get(session, api, "/v1/messages", topic="t", queueId=0, offset=0))["minOffset"]
    master_low = (await get(session, master_api, "/v1/messages", topic="t", queueId=0, offset=0))["minOffset"]
    assert low >= master_low > 0
    messages = await queue_from(session, api, low)
    assert messages and messages == await queue_from(session, master_api, low)
    assert messages[0][0] == low
    for group in ("early", "ahead"):  # committed in segments retention deleted: carried by the head state
        offset = await get(session, api, "/v1/consumer-offsets", group=group, topic="t", queueId=0)
        master_offset = await get(session, master_api, "/v1/consumer-offsets", group=group, topic="t", queueId=0)
        expected = max(0, low) if group == "early" else 100_000  # a committed offset below the queue reads as its min
        assert offset["offset"] == expected, (group, offset)
        if not from_last_file:
            assert offset == master_offset
    epochs = [(e["epoch"], e["startOffset"]) for e in mine["store"]["epochs"]]
    master_epochs = [(e["epoch"], e["startOffset"]) for e in theirs["store"]["epochs"] if e["endOffset"] > start]
    assert epochs == master_epochs, (mine["store"]["epochs"], theirs["store"]["epochs"])
    return True


async def agrees(
    brokers: BrokerSet, index: int, master: int, session: aiohttp.ClientSession, *, from_last_file: bool
) -> None:
    await eventually(
        f"replica {index} holds what the master holds",
        lambda: same_as_master(brokers, index, master, session, from_last_file=from_last_file),
        timeout=60,
    )


class Crash(Exception):
    """Stands for kill -9 at a step of the seeding."""


def killed_while_seeding(store_dir: Path, head: Path, step: str) -> None:
    """Leave in `store_dir` what a kill -9 at `step` of seeding it with the head state in file `head` leaves."""

    def hook(name: str) -> None:
        if name == step:
            raise Crash(step)

    state = HeadFile(head).read()
    assert state is not None and state.min_offset > 0
    store = MessageStore.open(store_dir, StoreSettings(segment_size=SEGMENT), step_hook=hook)
    with pytest.raises(Crash):
        store.seed(state)
    store._log.close()  # nothing more is written: the process is gone


@pytest.mark.parametrize(
    ("from_last_file", "killed_at"),
    [(False, None), (True, None), (False, STEP_SEED_HEAD_WRITTEN), (True, STEP_SEED_RESET)],
    ids=["from-min-offset", "sync-from-last-file", "killed-after-head-written", "killed-after-log-reset"],
)
async def test_an_empty_and_a_wiped_replica_join_after_retention_and_can_be_elected(
    controller_group: ControllerGroup, tmp_path: Path, from_last_file: bool, killed_at: str | None
) -> None:
    extra = [
        "--set", f"store.segment_size={SEGMENT}",
        "--retention-bytes", str(4 * SEGMENT),
        "--set", "store.retention_check_interval_ms=200",
        "--min-free-disk-bytes", "0",
        "--set", f"ha.sync_from_last_file={str(from_last_file).lower()}",
    ]  # fmt: skip
    brokers = make_set(tmp_path, controller_group, SYNC + extra)
    late = 2
    brokers.start(0)
    brokers.start(1)
    try:
        async with (
            aiohttp.ClientSession() as session,
            ControllerClient(controller_group.api_addresses, token=ADMIN_TOKEN) as controller,
        ):
            master = await brokers.master(timeout=120)
            other = 1 - master
            api = brokers.nodes[master].api

            async def first_put() -> bool:
                answer = await put(session, api, [b"early"], producer=EARLY_PRODUCER, seq=0)
                return bool(answer["status"] == "PUT_OK")

            await eventually("a first put", first_put, timeout=90)
            await commit(session, api, "early", 0)
            await commit(session, api, "ahead", 100_000)
            seq = 0
            for n in range(40):  # ~40 x 4 x 8 KiB = 1.3 MiB: 20 segments, retention keeps ~5
                answer = await put(session, api, [b"%05d" % (4 * n + i) + b"x" * 8000 for i in range(4)],
                                   producer=LOAD_PRODUCER, seq=seq)  # fmt: skip
                assert answer["status"] == "PUT_OK", answer
                seq += 4

            async def head_deleted() -> bool:
                starts = [(await status(brokers, i, session))["store"]["minOffset"] for i in (0, 1)]
                return all(start > 4 * SEGMENT for start in starts)

            await eventually("the running replicas deleted their heads", head_deleted, timeout=90)

            # An empty replica joins.
            brokers.start(late)
            await eventually(
                "the new replica caught up", lambda: caught_up(brokers, late, master, session), timeout=120
            )
            await agrees(brokers, late, master, session, from_last_file=from_last_file)

            # A slave's data folder is lost (a new volume): it starts empty and copies again.
            brokers.kill(other)
            brokers.nodes[other].wait_stopped()
            shutil.rmtree(brokers.nodes[other].data_dir)
            stale_head = tmp_path / "stale-head.state"  # the master's head now: it moves on with the load below
            stale_head.write_bytes((brokers.nodes[master].data_dir / "store" / HEAD_FILE).read_bytes())
            for n in range(8):  # meanwhile more load: the master's head moves on
                answer = await put(session, api, [b"more%03d" % n + b"y" * 8000], producer=LOAD_PRODUCER, seq=seq)
                assert answer["status"] == "PUT_OK", answer
                seq += 1
            if killed_at is not None:  # it was seeded from the master's head before the load above, and killed
                killed_while_seeding(brokers.nodes[other].data_dir / "store", stale_head, killed_at)
            brokers.start(other)
            await eventually(
                "the wiped replica caught up", lambda: caught_up(brokers, other, master, session), timeout=120
            )
            await agrees(brokers, other, master, session, from_last_file=from_last_file)
            await agrees(brokers, late, master, session, from_last_file=from_last_file)

            # The new replica can be master: elected (it is in the sync-state-set), it numbers on.
            late_id = (await status(brokers, late, session))["brokerId"]

            async def in_sync() -> bool:
                return late_id in (await controller.replica_info(brokers.broker_name)).sync_state_set

            await eventually("the new replica is in the sync-state-set", in_sync, timeout=120)
            queue_end = (await get(session, api, "/v1/messages", topic="t", queueId=0, offset=0))["maxOffset"]
            answer = await controller.elect_master(
                protocol.ElectMasterRequest(
                    cluster_name="it", broker_name=brokers.broker_name, broker_id=late_id, designate_elect=True
                )
            )
            assert answer.master_broker_id == late_id
            assert await brokers.master(timeout=120, exclude={master, other}) == late
            new_api = brokers.nodes[late].api

            async def put_on_new_master() -> bool:
                answer = await put(session, new_api, [b"after"], producer=LOAD_PRODUCER, seq=seq)
                assert answer["http"] in (200, 503), answer
                return bool(answer["status"] == "PUT_OK")

            await eventually("a put on the new master", put_on_new_master, timeout=90)
            after = await queue_from(session, new_api, queue_end)
            assert [(o, base64.b64decode(b)) for o, b in after] == [(queue_end, b"after")]
            retry = await put(session, new_api, [b"early"], producer=EARLY_PRODUCER, seq=0)  # deleted long ago
            assert retry["status"] == "PUT_OK" and retry["messages"][0]["duplicate"] is True, retry
            retry = await put(session, new_api, [b"after"], producer=LOAD_PRODUCER, seq=seq)
            assert retry["messages"][0] == {**retry["messages"][0], "duplicate": True, "queueOffset": queue_end}
    finally:
        brokers.stop_all()
