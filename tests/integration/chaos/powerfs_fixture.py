"""A mounted power-loss file system for a test (real FUSE, real kernel), with one disk made."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokergroup.chaos import powerfs
from tests.needs import missing


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[powerfs.MountedPowerFs]:
    lacking = powerfs.missing_capabilities()
    if lacking:
        missing("; ".join(lacking))
    with tempfile.TemporaryDirectory(prefix="bgpowerfs-") as short:  # AF_UNIX paths are short
        fs = powerfs.MountedPowerFs(tmp_path / "at-rest", tmp_path / "mnt", Path(short) / "c.sock", tmp_path / "log")
        with fs:
            (fs.mount / "m1").mkdir()  # a disk: durable once made
            yield fs
