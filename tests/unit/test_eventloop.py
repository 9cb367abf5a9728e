"""The event loop every process runs on: uvloop when importable, asyncio's otherwise (said once)."""

from __future__ import annotations

import asyncio
import builtins
import logging
from typing import Any

import pytest

from brokergroup.common import eventloop


async def loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_runs_on_uvloop_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BROKERGROUP_EVENT_LOOP", raising=False)
    assert eventloop.run(loop_module()).startswith("uvloop")


def test_environment_chooses_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROKERGROUP_EVENT_LOOP", "asyncio")
    assert eventloop.run(loop_module()).startswith("asyncio")


def test_without_uvloop_asyncio_and_one_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("BROKERGROUP_EVENT_LOOP", raising=False)
    monkeypatch.setattr(eventloop, "_warned", False)
    real_import = builtins.__import__

    def no_uvloop(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "uvloop":
            raise ImportError("No module named 'uvloop'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_uvloop)
    with caplog.at_level(logging.WARNING, logger="brokergroup.common.eventloop"):
        assert eventloop.run(loop_module()).startswith("asyncio")
        assert eventloop.run(loop_module()).startswith("asyncio")
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == ["uvloop is not installed; running on asyncio's event loop (slower)"]
