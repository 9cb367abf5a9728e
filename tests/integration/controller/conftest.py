"""Shared fixtures of the controller integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brokergroup.local import profiles
from brokergroup.local.controllers import ControllerGroup, running_group
from tests.integration.conftest import ADMIN_TOKEN

BROKER_TOKEN = "integration-broker-token"


@pytest.fixture
def guarded_group(tmp_path: Path) -> Iterator[ControllerGroup]:
    """3 controllers with both credentials set: the admin token and the brokers' token."""
    extra = ["--log-level", "INFO", *profiles.FAST.controller_args()]
    with running_group(
        tmp_path / "controllers", admin_token=ADMIN_TOKEN, broker_token=BROKER_TOKEN, extra_args=extra
    ) as group:
        yield group
