"""Final reads over HTTP: bodies become digests of what was stored, and a failed read is recorded, so the
checker says INCOMPLETE instead of the run crashing or passing.

A stand-in for a broker's `GET /v1/messages` (the broker's HTTP API is our seam) serves a queue in
pages, or fails.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from brokergroup.chaos.checker import check
from brokergroup.chaos.history import HistoryWriter, body_digest, final_read, read_history, record_topology

FAIL = web.AppKey("fail", dict[str, bool])  # {"now": whether the next read fails}
STORED = [(0, 7, 0, b"p0-0"), (1, 7, 1, b"p0-1"), (2, 9, 0, b"\x00binary\xff")]


async def messages(request: web.Request) -> web.Response:
    if request.app[FAIL]["now"]:
        return web.json_response({"status": "SERVICE_NOT_AVAILABLE", "remark": "fenced"}, status=503)
    offset = int(request.query["offset"])
    page = [m for m in STORED if m[0] >= offset][:2]  # two per page: the reader must follow nextOffset
    body = [
        {"queueOffset": o, "producerId": p, "seq": s, "body": base64.b64encode(b).decode(), "properties": {}}
        for o, p, s, b in page
    ]
    return web.json_response({"messages": body, "nextOffset": page[-1][0] + 1 if page else offset})


@pytest.fixture
async def broker() -> AsyncIterator[tuple[str, web.Application]]:
    app = web.Application()
    app[FAIL] = {"now": False}
    app.router.add_get("/v1/messages", messages)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"127.0.0.1:{port}", app
    finally:
        await runner.cleanup()


async def test_final_read_records_a_digest_of_each_stored_body(
    tmp_path: Path, broker: tuple[str, web.Application]
) -> None:
    address, _ = broker
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        async with aiohttp.ClientSession() as session:
            count = await final_read(history, session, "bs0-0", address, "chaos", "bs0/chaos/0")
    assert count == 3
    ops = list(read_history(tmp_path / "history.jsonl"))
    assert [(o["process"], o["type"]) for o in ops] == [("final:bs0-0", "invoke"), ("final:bs0-0", "ok")]
    assert ops[1]["value"]["messages"] == [[o, p, s, body_digest(b)] for o, p, s, b in STORED]
    assert body_digest(b"p0-0") != body_digest(b"p0-1")


async def test_failed_final_read_is_recorded_and_makes_the_verdict_incomplete(
    tmp_path: Path, broker: tuple[str, web.Application]
) -> None:
    address, app = broker
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as history:
        record_topology(history, {"bs0/chaos/0": ["bs0-0", "bs0-1"]}, ["n0"])
        for _, pid, seq, body in STORED:
            value = {"queue": "bs0/chaos/0", "producerId": pid, "seq": seq, "payload": "", "digest": body_digest(body)}
            history.record(f"p{pid}", "invoke", "send", value)
            history.record(f"p{pid}", "ok", "send", value)
        async with aiohttp.ClientSession() as session:
            assert await final_read(history, session, "bs0-0", address, "chaos", "bs0/chaos/0") == 3
            app[FAIL]["now"] = True
            assert await final_read(history, session, "bs0-1", address, "chaos", "bs0/chaos/0") is None
    failed = [o for o in read_history(path) if o["type"] == "fail"]
    assert failed == [
        {
            **failed[0],
            "process": "final:bs0-1",
            "f": "poll",
            "value": {"queue": "bs0/chaos/0", "error": failed[0]["value"]["error"]},
        }
    ]
    assert "HTTP 503" in failed[0]["value"]["error"]
    events = [{"source": "raft", "node": "n0", "eventId": "e1", "term": 1, "index": 1, "type": "REGISTER"}]
    verdict = check(read_history(path), events)
    assert verdict["status"] == "INCOMPLETE", verdict
    assert verdict["incomplete"] == [f"the final read of bs0/chaos/0 from bs0-1 failed: {failed[0]['value']['error']}"]
    assert verdict["stats"]["finalReads"] == {"bs0/chaos/0": {"bs0-0": 3}}
