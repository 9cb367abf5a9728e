"""The event loop every brokergroup process runs on: uvloop when it is installed, else asyncio's.

uvloop (libuv) cuts the CPU each request costs (issue 17: -11 to -22 % under aiohttp). It is a
dependency; where it cannot be installed the processes run on asyncio's loop and say so once.
`BROKERGROUP_EVENT_LOOP=asyncio` in the environment chooses asyncio's loop anyway (A/B measurements;
child processes inherit it).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

logger = logging.getLogger(__name__)
T = TypeVar("T")
_warned = False


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or None (asyncio's default loop) when uvloop is not importable."""
    global _warned
    if os.environ.get("BROKERGROUP_EVENT_LOOP") == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if not _warned:
            _warned = True
            logger.warning("uvloop is not installed; running on asyncio's event loop (slower)")
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run` on uvloop when available."""
    factory = loop_factory()
    if factory is None:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
