"""The one rule for a missing tool in every tier: under CI=true it fails the test; in a local run it skips it,
and the skip reason says that CI would fail."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(message: str) -> NoReturn:
    """Fail (CI=true) or skip (local run) because `message` names something the test needs and lacks."""
    if under_ci():
        pytest.fail(f"CI=true but {message}", pytrace=False)
    pytest.skip(f"{message} (local run; under CI=true this fails instead)")
