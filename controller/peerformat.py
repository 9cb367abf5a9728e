"""Whether every other controller applies group-commit entries: asked over HTTP (`GET /v1/status`,
`raftEntryFormat`), so that during a rolling upgrade a new leader sends one batch per entry (the
format every version applies) until no older node is left.

An older node answers without the field (format 1). A node that does not answer, or answers
with an error, tells nothing: the leader keeps what that node said last (a slow peer on a loaded
machine must not switch group commit off), and a node never heard from counts as format 1. Going
back to a version before group commit is not supported once group entries were committed: an older
node could not apply them from the log (until a snapshot covers them)."""

from __future__ import annotations

import asyncio
import logging

import aiohttp

from brokergroup.controller.replicated import GROUP_ENTRY_FORMAT

logger = logging.getLogger(__name__)


async def entry_format(session: aiohttp.ClientSession, api: str, *, timeout: float) -> int | None:
    """The highest Raft entry format the node at `api` applies: 1 when its status does not say (a
    version before group commit); None when it gives no status (no answer, an error, not JSON)."""
    try:
        async with session.get(f"http://{api}/v1/status", timeout=aiohttp.ClientTimeout(total=timeout)) as response:
            if response.status != 200:
                return None
            body = await response.json()
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        logger.debug("entry format of %s: no answer (%s)", api, exc)
        return None
    if not isinstance(body, dict):
        return None
    value = body.get("raftEntryFormat")
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


async def refresh(
    session: aiohttp.ClientSession, known: dict[str, int], apis: list[str], *, timeout: float = 2.0
) -> bool:
    """Ask every node in `apis`, note the answers in `known` (api -> format; silence changes nothing),
    and say whether every one of them is known to apply group entries."""
    answers = await asyncio.gather(*(entry_format(session, api, timeout=timeout) for api in apis))
    for api, answer in zip(apis, answers, strict=True):
        if answer is not None:
            known[api] = answer
    return all(known.get(api, 1) >= GROUP_ENTRY_FORMAT for api in apis)
