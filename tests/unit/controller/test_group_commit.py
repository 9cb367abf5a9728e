"""Group commit: batches of several broker sets in one Raft entry, each with its own version check
(the state machine's apply), and the bridge that groups what arrives while an entry is in flight."""

from __future__ import annotations

import asyncio
import json
import threading
import types
from collections.abc import Callable
from typing import Any

import pytest
from pysyncobj import FAIL_REASON

from brokergroup.controller.bridge import Bridge
from brokergroup.controller.codes import ControllerError, ResponseCode
from brokergroup.controller.model import ApplyBrokerIdEvent, ElectMasterEvent, Event
from brokergroup.controller.replicated import Applied, Batch, StateMachine, decode_entry, encode_group
from tests.unit.controller.controller_factories import CLUSTER, addr, check_code

SETS = ("broker-a", "broker-b", "broker-c")


def batch(name: str, events: tuple[Event, ...], *, expect: int | None, n: int = 0, term: int = 3) -> Batch:
    return Batch(
        batch_id=f"00000000-0000-4000-8000-{n:012d}",
        term=term,
        ts_ms=1_700_000_000_000 + n,
        leader="n1",
        expect_version=expect,
        events=events,
        request="test",
        reason=None,
        broker_name=name,
    )


def register_events(name: str) -> tuple[Event, ...]:
    return (
        ApplyBrokerIdEvent(
            broker_name=name,
            cluster_name=CLUSTER,
            broker_address=addr(1),
            new_broker_id=1,
            register_check_code=check_code(1),
        ),
        ElectMasterEvent(broker_name=name, new_master_elected=True, new_master_broker_id=1),
    )


class Machine:
    """A StateMachine applied directly (as pysyncobj's tick thread does), at increasing indexes."""

    def __init__(self) -> None:
        self.applied: list[Applied] = []
        self.machine = StateMachine(self.applied.append)
        self.machine._syncObj = types.SimpleNamespace(raftLastApplied=0)

    def apply(self, text: str) -> dict[str, Any]:
        result: dict[str, Any] = self.machine._apply_batch(text, _doApply=True)
        self.machine._syncObj.raftLastApplied += 1
        return result


# ---- the entry format --------------------------------------------------------------------------------------


def test_group_round_trip_and_a_single_batch_is_the_old_format() -> None:
    group = (batch(SETS[0], register_events(SETS[0]), expect=0, n=1), batch(SETS[1], (), expect=None, n=2))
    assert decode_entry(encode_group(group)) == (group, True)
    assert decode_entry(group[0].to_json()) == ((group[0],), False)
    assert "batches" not in json.loads(group[0].to_json())


def test_an_empty_group_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one batch"):
        encode_group(())


# ---- the apply ---------------------------------------------------------------------------------------------


def test_a_stale_batch_in_a_group_is_refused_alone_and_positions_run_across_the_entry() -> None:
    m = Machine()
    first = m.apply(encode_group(tuple(batch(s, register_events(s), expect=0, n=i) for i, s in enumerate(SETS))))
    assert first == {
        "index": 1,
        "version": 3,
        "results": [{"applied": True, "version": v, "index": 1} for v in (1, 2, 3)],
    }
    assert [(r["brokerName"], r["position"], r["index"]) for r in m.applied[0].records] == [
        (s, p, 1) for p, s in enumerate(s for s in SETS for _ in (0, 1))
    ]
    # broker-b's batch was computed against version 0 but broker-b is at 1 now: refused, the others applied.
    elect = ElectMasterEvent(broker_name="", new_master_elected=False)
    second = m.apply(
        encode_group(
            (
                batch(SETS[0], (dataclass_replace(elect, SETS[0]),), expect=1, n=10),
                batch(SETS[1], (dataclass_replace(elect, SETS[1]),), expect=0, n=11),
                batch(SETS[2], (dataclass_replace(elect, SETS[2]),), expect=1, n=12),
            )
        )
    )
    assert [r["applied"] for r in second["results"]] == [True, False, True]
    assert m.applied[1].applied == (True, False, True)
    assert [(r["brokerName"], r["position"]) for r in m.applied[1].records] == [(SETS[0], 0), (SETS[2], 1)]
    assert m.machine._set_versions == {SETS[0]: 2, SETS[1]: 1, SETS[2]: 2}


def test_two_batches_of_one_set_in_one_entry_apply_in_order_and_the_second_is_checked_after_the_first() -> None:
    m = Machine()
    out = m.apply(
        encode_group((batch(SETS[0], register_events(SETS[0]), expect=0, n=1), batch(SETS[0], (), expect=0, n=2)))
    )
    # An empty batch with a version check passes or fails by the version alone: 0 is stale after the first.
    assert [r["applied"] for r in out["results"]] == [True, False]


def test_a_single_batch_entry_answers_and_logs_as_before_group_commit() -> None:
    m = Machine()
    out = m.apply(batch(SETS[0], register_events(SETS[0]), expect=0, n=1).to_json())
    assert out == {"applied": True, "version": 1, "index": 1}
    assert [r["position"] for r in m.applied[0].records] == [0, 1]


def dataclass_replace(event: ElectMasterEvent, name: str) -> ElectMasterEvent:
    return ElectMasterEvent(broker_name=name, new_master_elected=event.new_master_elected)


# ---- the bridge --------------------------------------------------------------------------------------------


class FakeNode:
    """Records what the bridge submits; the test answers from another thread, as pysyncobj does."""

    def __init__(self) -> None:
        self.entries: list[tuple[tuple[Batch, ...], Callable[[Any, int], None]]] = []
        self.submitted = asyncio.Event()

    def submit(self, batch: Batch, callback: Callable[[Any, int], None]) -> None:
        self.entries.append(((batch,), callback))
        self.submitted.set()

    def submit_group(self, batches: tuple[Batch, ...], callback: Callable[[Any, int], None]) -> None:
        self.entries.append((batches, callback))
        self.submitted.set()

    async def entry(self, number: int) -> tuple[tuple[Batch, ...], Callable[[Any, int], None]]:
        async with asyncio.timeout(30):
            while len(self.entries) <= number:
                self.submitted.clear()
                await self.submitted.wait()
        return self.entries[number]


def answer(callback: Callable[[Any, int], None], result: Any, err: int = FAIL_REASON.SUCCESS) -> None:
    thread = threading.Thread(target=callback, args=(result, err))
    thread.start()
    thread.join()


async def test_batches_that_arrive_while_an_entry_is_in_flight_share_the_next_entry() -> None:
    bridge = Bridge(asyncio.get_running_loop(), max_in_flight=1)
    node = FakeNode()
    first = asyncio.create_task(bridge.commit(node, batch(SETS[0], (), expect=0, n=1), timeout=30))  # type: ignore[arg-type]
    batches, callback = await node.entry(0)
    assert [b.broker_name for b in batches] == [SETS[0]]
    rest = [
        asyncio.create_task(bridge.commit(node, batch(s, (), expect=0, n=2 + i), timeout=30))  # type: ignore[arg-type]
        for i, s in enumerate(SETS[1:])
    ]
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert len(node.entries) == 1  # the slot is taken: they wait
    answer(callback, {"applied": True, "version": 1, "index": 5})
    assert await first == {"applied": True, "version": 1, "index": 5}
    batches, callback = await node.entry(1)
    assert [b.broker_name for b in batches] == list(SETS[1:])
    results = [{"applied": False, "version": 1, "index": 6}, {"applied": True, "version": 2, "index": 6}]
    answer(callback, {"index": 6, "version": 2, "results": results})
    assert await asyncio.gather(*rest) == results
    assert (bridge.entries, bridge.batches) == (2, 3)


async def test_a_failed_entry_fails_every_batch_it_carried() -> None:
    bridge = Bridge(asyncio.get_running_loop(), max_in_flight=1)
    node = FakeNode()
    tasks = [asyncio.create_task(bridge.commit(node, batch(s, (), expect=0), timeout=30)) for s in SETS]  # type: ignore[arg-type]
    batches, callback = await node.entry(0)
    assert len(batches) == 3  # all three arrived before the first flush
    answer(callback, None, FAIL_REASON.NOT_LEADER)
    for task in tasks:
        with pytest.raises(ControllerError) as failed:
            await task
        assert failed.value.code == ResponseCode.CONTROLLER_NOT_LEADER


async def test_batches_of_different_terms_never_share_an_entry() -> None:
    bridge = Bridge(asyncio.get_running_loop(), max_in_flight=2)
    node = FakeNode()
    tasks = [
        asyncio.create_task(bridge.commit(node, batch(SETS[term - 3], (), expect=0, term=term), timeout=30))  # type: ignore[arg-type]
        for term in (3, 4)
    ]
    await node.entry(1)
    assert [[b.term for b in batches] for batches, _ in node.entries] == [[3], [4]]
    for task in tasks:
        task.cancel()


async def test_an_entry_never_answered_frees_its_slot_once_its_waiters_give_up() -> None:
    bridge = Bridge(asyncio.get_running_loop(), max_in_flight=1)
    node = FakeNode()
    with pytest.raises(ControllerError, match="not committed within"):
        await bridge.commit(node, batch(SETS[0], (), expect=0), timeout=0.05)  # type: ignore[arg-type]
    later = asyncio.create_task(bridge.commit(node, batch(SETS[1], (), expect=0, n=2), timeout=30))  # type: ignore[arg-type]
    batches, callback = await node.entry(1)
    assert [b.broker_name for b in batches] == [SETS[1]]
    answer(callback, {"applied": True, "version": 1, "index": 2})
    assert (await later)["applied"] is True


async def test_the_next_entry_waits_for_the_sets_just_answered_to_come_back() -> None:
    """An entry answered 2 batches while 1 was queued: the next entry waits (linger) until 3 are queued."""
    bridge = Bridge(asyncio.get_running_loop(), max_in_flight=1, linger=30.0)
    node = FakeNode()
    names = [f"set-{i}" for i in range(6)]

    def commit(i: int) -> asyncio.Task[dict[str, Any]]:
        return asyncio.create_task(bridge.commit(node, batch(names[i], (), expect=0, n=i), timeout=30))  # type: ignore[arg-type]

    first = [commit(0), commit(1)]
    batches, callback = await node.entry(0)
    assert len(batches) == 2
    waiting = commit(2)
    await asyncio.sleep(0)
    results = [{"applied": True, "version": 1, "index": 5}] * 2
    answer(callback, {"index": 5, "version": 1, "results": results})
    assert await asyncio.gather(*first) == results
    await asyncio.sleep(0.05)
    assert len(node.entries) == 1  # 1 queued, 3 expected: it waits (the linger is 30 s)
    back = [commit(3), commit(4)]  # the answered sets' next requests
    batches, callback = await node.entry(1)
    assert [b.broker_name for b in batches] == [names[2], names[3], names[4]]
    answer(callback, {"index": 6, "version": 2, "results": [{"applied": True, "version": 2, "index": 6}] * 3})
    await asyncio.gather(waiting, *back)


async def test_the_wait_ends_after_the_linger_and_a_lone_request_never_waits() -> None:
    bridge = Bridge(asyncio.get_running_loop(), max_in_flight=1, linger=0.2)
    node = FakeNode()
    one = asyncio.create_task(bridge.commit(node, batch(SETS[0], (), expect=0, n=1), timeout=30))  # type: ignore[arg-type]
    _, callback = await node.entry(0)
    answer(callback, {"applied": True, "version": 1, "index": 2})
    await one
    started = asyncio.get_running_loop().time()
    alone = asyncio.create_task(bridge.commit(node, batch(SETS[0], (), expect=1, n=2), timeout=30))  # type: ignore[arg-type]
    _, callback = await node.entry(1)  # its entry answered one batch: this one, nothing to wait for
    assert asyncio.get_running_loop().time() - started < 0.15
    other = asyncio.create_task(bridge.commit(node, batch(SETS[1], (), expect=0, n=3), timeout=30))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    answer(callback, {"applied": True, "version": 2, "index": 3})
    await alone
    answered_at = asyncio.get_running_loop().time()
    batches, callback = await node.entry(2)  # SETS[0] does not come back: `other` goes after the linger
    assert asyncio.get_running_loop().time() - answered_at >= 0.15
    assert [b.broker_name for b in batches] == [SETS[1]]
    answer(callback, {"applied": True, "version": 1, "index": 4})
    await other


def test_bad_limits_are_refused() -> None:
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(ValueError, match="max_in_flight"):
            Bridge(loop, max_in_flight=0)
        with pytest.raises(ValueError, match="linger"):
            Bridge(loop, linger=-1.0)
    finally:
        loop.close()
