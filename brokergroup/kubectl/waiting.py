"""How the plugin's commands wait and say when: a deadline poll, and the time stamp each printed step carries."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from brokergroup.kubectl.targets import PluginError


def now() -> str:
    return datetime.now(UTC).strftime("%H:%M:%S.%f")[:-3]


def wait(what: str, deadline: float, check: Callable[[], Any], last: Callable[[], str] | None = None) -> Any:
    """Poll `check` until it returns something true (returned), or fail once `deadline` (monotonic) passed."""
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            seen = f"; last seen: {last()}" if last is not None else ""
            raise PluginError(f"timed out waiting until {what}{seen}")
        time.sleep(0.5)
