"""GET /v1/messages says why a read is empty (RocketMQ GetMessageStatus), never a silent empty read (#18)."""

from __future__ import annotations

import pytest

from brokergroup.broker.api import read_status


@pytest.mark.parametrize(
    ("offset", "low", "high", "found", "status"),
    [
        (5, 3, 9, True, "FOUND"),
        (2, 3, 9, False, "OFFSET_TOO_SMALL"),  # retention deleted it: nextOffset is the queue's min
        (9, 3, 9, False, "NO_NEW_MESSAGE"),
        (0, 0, 0, False, "NO_MESSAGE_IN_QUEUE"),
        (12, 3, 9, False, "OFFSET_OVERFLOW_BADLY"),
    ],
)
def test_each_empty_read_names_its_reason(offset: int, low: int, high: int, found: bool, status: str) -> None:
    assert read_status(offset, low, high, found=found) == status
