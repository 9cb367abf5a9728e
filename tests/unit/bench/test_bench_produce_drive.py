"""`drive` runs every request once over its workers and reports progress in steps, not per request."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from brokergroup.bench.produce import PROGRESS_EVERY, drive


async def test_every_request_runs_once_and_progress_comes_in_steps() -> None:
    seen: list[int] = []
    reported: list[int] = []

    def worker(retries_every: int) -> Callable[[int], Awaitable[int]]:
        async def op(i: int) -> int:
            seen.append(i)
            await asyncio.sleep(0)
            return 2 if i % retries_every == 0 else 1

        return op

    requests = 2 * PROGRESS_EVERY + 37
    latencies, elapsed, retries = await drive(requests, [worker(50) for _ in range(3)], reported.append)
    assert sorted(seen) == list(range(requests))
    assert len(latencies) == requests and elapsed > 0
    assert retries == len(range(0, requests, 50))
    assert sum(reported) == requests
    assert reported == [PROGRESS_EVERY, PROGRESS_EVERY, 37]
