"""A small history checker for broker tests: every acknowledged message is read back exactly once.

Producers record what was acknowledged, as (producer id, sequence). The checker reads every
message of a queue from a replica and reports lost (acknowledged, never read), duplicated
(read twice) and inconsistent offsets (one queue offset holding two different messages across
replicas). Issue 4 grows this into the full Jepsen-style checker.
"""

from __future__ import annotations

import base64
import collections
import dataclasses
from typing import Any

import aiohttp


@dataclasses.dataclass
class Verdict:
    acked: int
    read: int
    lost: list[tuple[int, int]]
    duplicated: list[tuple[int, int]]

    @property
    def ok(self) -> bool:
        return not self.lost and not self.duplicated


async def read_queue(
    session: aiohttp.ClientSession, address: str, topic: str, queue_id: int = 0
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    offset = 0
    while True:
        params = {"topic": topic, "queueId": str(queue_id), "offset": str(offset), "maxCount": "1024"}
        async with session.get(f"http://{address}/v1/messages", params=params) as r:
            assert r.status == 200, await r.text()
            body = await r.json()
        if not body["messages"]:
            return out
        out += body["messages"]
        offset = body["nextOffset"]


def check(acked: set[tuple[int, int]], messages: list[dict[str, Any]]) -> Verdict:
    seen = collections.Counter((int(m["producerId"]), int(m["seq"])) for m in messages)
    return Verdict(
        acked=len(acked),
        read=len(messages),
        lost=sorted(acked - set(seen)),
        duplicated=sorted(k for k, n in seen.items() if n > 1),
    )


def same_offsets(replicas: list[list[dict[str, Any]]]) -> list[int]:
    """Queue offsets at which replicas disagree (over the common prefix)."""
    bad = []
    for rows in zip(*replicas, strict=False):
        keys = {(r["queueOffset"], r["producerId"], r["seq"], base64.b64decode(r["body"])) for r in rows}
        if len(keys) > 1:
            bad.append(rows[0]["queueOffset"])
    return bad
