"""Integration tier: real controller processes on 127.0.0.1, started per test."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from brokergroup.local import profiles
from brokergroup.local.controllers import ControllerGroup, running_group

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # `pytestmark` in a conftest marks nothing; this hook sees the whole session's items.
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.integration)


ADMIN_TOKEN = "integration-admin-token"


@pytest.fixture
def controller_group(tmp_path: Path) -> Iterator[ControllerGroup]:
    extra = ["--log-level", "INFO", *profiles.FAST.controller_args()]
    with running_group(tmp_path / "controllers", admin_token=ADMIN_TOKEN, extra_args=extra) as group:
        yield group


async def eventually(what: str, check: Callable[[], Awaitable[bool]], *, timeout: float = 30.0) -> float:
    """Poll `check` until it is true; return how long it took, or fail after `timeout` seconds. The default is
    sized for what most callers wait for (a Raft election, a broker election, replicas catching up) on a loaded
    2-core CI machine; it only costs time when the test fails."""
    started = time.monotonic()
    last_error: Exception | None = None
    while time.monotonic() - started < timeout:
        try:
            if await check():
                return time.monotonic() - started
        except Exception as exc:  # the system may be mid-failover; keep polling until the deadline
            last_error = exc
        await asyncio.sleep(0.02)
    raise AssertionError(f"{what}: not true within {timeout} s (last error: {last_error})")
