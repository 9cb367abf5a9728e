"""Do the controllers' Raft states agree? Poll `GET /v1/raft/state-digest` on every node.

Used after `brokergroup bench controller` (and by chaos runs): wait until every node reports the
same `last_applied`, then compare digests. Equal indexes with different digests means the
replicated state machines diverged, which is always a bug.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from brokergroup.controller.client import ControllerClient
from brokergroup.controller.codes import ControllerError

DIGEST_PATH = "/v1/raft/state-digest"


@dataclasses.dataclass(frozen=True)
class Agreement:
    agreed: bool
    digests: tuple[dict[str, Any], ...]
    """The last answer of every node: node_id, term, last_applied, digest."""
    problem: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"agreed": self.agreed, "problem": self.problem, "nodes": list(self.digests)}


async def state_digest(client: ControllerClient, address: str) -> dict[str, Any]:
    result: dict[str, Any] = await client.call("GET", DIGEST_PATH, address=address)
    return result


async def wait_for_agreement(client: ControllerClient, addresses: Sequence[str], *, timeout: float = 30.0) -> Agreement:
    """Poll until every node reports the same last_applied; then the digests must be equal.

    Gives up after `timeout` seconds (a node that does not catch up: not agreed, with the reason)."""
    deadline = time.monotonic() + timeout
    answers: list[dict[str, Any]] = []
    problem = "no node answered"
    while True:
        try:
            answers = list(await asyncio.gather(*(state_digest(client, a) for a in addresses)))
        except ControllerError as exc:
            problem = f"a node did not answer {DIGEST_PATH}: {exc}"
        else:
            indexes = {a["last_applied"] for a in answers}
            if len(indexes) == 1:
                digests = {a["digest"] for a in answers}
                if len(digests) == 1:
                    return Agreement(True, tuple(answers))
                shown = ", ".join(f"{a['node_id']}={a['digest'][:12]}" for a in answers)
                return Agreement(False, tuple(answers), f"states differ at last_applied {indexes.pop()}: {shown}")
            problem = "nodes did not reach the same last_applied: " + ", ".join(
                f"{a['node_id']}={a['last_applied']}" for a in answers
            )
        if time.monotonic() >= deadline:
            return Agreement(False, tuple(answers), f"{problem} (after {timeout:.0f} s)")
        await asyncio.sleep(0.1)
