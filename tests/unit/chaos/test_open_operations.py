"""A client process does one operation at a time: the checker names a process that invoked one while its
previous one was open (issue 17: a drain beside the polling loop read the same offsets twice, which
looked like a consumer going back an offset)."""

from __future__ import annotations

from typing import Any

from brokergroup.chaos.checker import check
from tests.unit.chaos.test_checker import Q, event, finals, ok, poll, topology


def invoke(process: str, offset: int, time: int) -> dict[str, Any]:
    return {"process": process, "type": "invoke", "f": "poll", "value": {"queue": Q, "offset": offset}, "time": time}


def read(process: str, rows: list[tuple[int, int, int]], time: int) -> dict[str, Any]:
    messages = [[o, pid, seq, f"body-{pid}-{seq}"] for o, pid, seq in rows]
    return {"process": process, "type": "ok", "f": "poll", "value": {"queue": Q, "messages": messages}, "time": time}


def events() -> list[dict[str, Any]]:
    return [{**event(1, 1, 1), "node": n} for n in ("n0", "n1", "n2")]


def test_two_polls_open_at_once_are_named_beside_the_offsets_they_read_twice() -> None:
    log = [(1650, 7, 0), (1651, 7, 1)]
    ops = topology() + ok("p0", 7, 0) + ok("p0", 7, 1)
    # The shape of issue 17's run: the drain's poll and the loop's poll both start at 1650.
    ops += [invoke("c0", 1650, 10_000_000_000), invoke("c0", 1650, 10_001_000_000)]
    ops += [read("c0", log, 10_002_000_000), read("c0", log, 10_003_000_000)]
    ops += finals(log)

    verdict = check(ops, events())

    assert verdict["status"] == "INVALID" and verdict["failing"] == ["nonMonotonicPolls"], verdict
    assert verdict["examples"]["nonMonotonicPolls"] == [{"process": "c0", "queue": Q, "offset": 1650, "after": 1651}]
    assert verdict["incomplete"] == [
        "process c0 invoked 1 operations while its previous one was open (first at 10.001 s): "
        "one operation at a time per process, or its order means nothing"
    ]


def test_polls_and_sends_one_after_another_are_not_named() -> None:
    log = [(0, 7, 0), (1, 7, 1)]
    ops = topology() + ok("p0", 7, 0) + ok("p0", 7, 1) + poll("c0", log[:1]) + poll("c0", log[1:]) + finals(log)
    ops += [{"process": "nemesis", "type": "info", "f": "kill-master", "value": {"phase": "start"}, "time": 5}] * 2

    verdict = check(ops, events())

    assert (verdict["status"], verdict["incomplete"]) == ("VALID", []), verdict
