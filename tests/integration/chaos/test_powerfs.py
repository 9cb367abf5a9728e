"""The power-loss file system through the kernel: planted writes, renames and mmaps, then a drop.

Each test writes through ordinary system calls on the FUSE mount, drops the disk's unsynced state
over the control socket and reads back through the kernel what survived.
"""

from __future__ import annotations

import mmap
import os
import subprocess
import sys
from pathlib import Path

import pytest

from brokergroup.chaos.powerfs import MountedPowerFs
from tests.integration.chaos.powerfs_fixture import mounted

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
__all__ = ["mounted"]


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write(path: Path, data: bytes, *, sync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def test_fsynced_survives_unsynced_is_gone_and_an_unsynced_rename_is_undone(mounted: MountedPowerFs) -> None:
    disk = mounted.mount / "m1"
    write(disk / "synced", b"kept", sync=True)
    write(disk / "state", b"v1", sync=True)
    fsync_path(disk)
    write(disk / "synced", b"overwritten, never synced", sync=False)
    write(disk / "unsynced", b"lost", sync=True)  # its data is durable, its name is not
    write(disk / "state.tmp", b"v2", sync=True)
    (disk / "state.tmp").replace(disk / "state")  # no directory fsync after it
    assert (disk / "state").read_bytes() == b"v2"

    report = mounted.client.drop(["m1"])

    assert sorted(p.name for p in disk.iterdir()) == ["state", "synced"]
    assert (disk / "synced").read_bytes() == b"kept"
    assert (disk / "state").read_bytes() == b"v1"
    assert report["files_reverted"] >= 1 and report["entries_reverted"] == 1


def test_a_rename_followed_by_a_directory_fsync_survives(mounted: MountedPowerFs) -> None:
    disk = mounted.mount / "m1"
    write(disk / "state.tmp", b"v2", sync=True)
    (disk / "state.tmp").replace(disk / "state")
    fsync_path(disk)
    mounted.client.drop(["m1"])
    assert [p.name for p in disk.iterdir()] == ["state"]
    assert (disk / "state").read_bytes() == b"v2"


def test_mmap_writes_reach_it_and_msync_makes_them_durable(mounted: MountedPowerFs) -> None:
    disk = mounted.mount / "m1"
    write(disk / "journal", bytes(8192), sync=True)
    fsync_path(disk)
    fd = os.open(disk / "journal", os.O_RDWR)
    with mmap.mmap(fd, 0) as mapped:
        mapped[0:5] = b"first"
        mapped.flush()  # msync: durable
        mapped[4096:4102] = b"second"  # never synced
    os.close(fd)
    assert (disk / "journal").read_bytes()[4096:4102] == b"second"
    mounted.client.drop(["m1"])
    data = (disk / "journal").read_bytes()
    assert data[:5] == b"first" and data[4096:4102] == bytes(6)


def test_a_killed_process_mmap_writes_are_dropped_like_the_rest(mounted: MountedPowerFs) -> None:
    disk = mounted.mount / "m1"
    write(disk / "journal", bytes(4096), sync=True)
    fsync_path(disk)
    writer = (
        "import mmap, os, sys, time\n"
        f"fd = os.open({str(disk / 'journal')!r}, os.O_RDWR)\n"
        "m = mmap.mmap(fd, 0)\n"
        "m[0:7] = b'dirtied'\n"
        "print('written', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", writer], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"written\n"
    proc.kill()
    proc.wait()
    proc.stdout.close()
    assert (disk / "journal").read_bytes()[:7] == b"dirtied"  # the kernel wrote the page back
    mounted.client.drop(["m1"])
    assert (disk / "journal").read_bytes()[:7] == bytes(7)


def test_only_the_named_disk_loses_power_and_everything_is_saved_at_unmount(mounted: MountedPowerFs) -> None:
    (mounted.mount / "m2").mkdir()
    write(mounted.mount / "m1" / "a", b"m1 volatile", sync=False)
    write(mounted.mount / "m2" / "b", b"m2 volatile", sync=False)
    report = mounted.client.drop(["m1"])
    assert report["disks"] == ["m1"]
    assert list((mounted.mount / "m1").iterdir()) == []
    assert (mounted.mount / "m2" / "b").read_bytes() == b"m2 volatile"
    status = mounted.client.status()
    assert status["disks"] == ["m1", "m2"] and status["unsynced"] == {"m2": 2}
    mounted.stop()
    assert not os.path.ismount(mounted.mount)
    assert (mounted.backing / "m2" / "b").read_bytes() == b"m2 volatile"  # a clean unmount keeps everything
