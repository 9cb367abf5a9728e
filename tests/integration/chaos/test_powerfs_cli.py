"""docs/chaos.md's power-loss file system commands, run as written: mount, a disk and an unsynced
file, status, drop, the file gone, unmount and the durable tree saved."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from brokergroup.chaos import powerfs
from tests.needs import missing

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

DOC = Path(__file__).resolve().parents[3] / "docs" / "chaos.md"
DEMO = Path("/tmp/powerfs-demo")


def documented_lines() -> list[str]:
    text = DOC.read_text()
    block = re.search(r"```bash\n(brokergroup chaos powerfs mount .*?)```", text, re.DOTALL)
    assert block is not None, "docs/chaos.md lost its powerfs example"
    return [line for line in block[1].splitlines() if line.strip()]


def test_the_documented_powerfs_commands_work_as_written() -> None:
    lacking = powerfs.missing_capabilities()
    if lacking:
        missing("; ".join(lacking))
    if os.path.ismount(DEMO / "mnt"):
        subprocess.run(["fusermount3", "-u", str(DEMO / "mnt")], check=True)
    shutil.rmtree(DEMO, ignore_errors=True)
    mount, *rest = documented_lines()
    assert mount.endswith(" &")
    server = subprocess.Popen(mount.removesuffix(" &"), shell=True)
    try:
        deadline = time.monotonic() + 20
        while not (os.path.ismount(DEMO / "mnt") and (DEMO / "control.sock").exists()):
            assert time.monotonic() < deadline, "powerfs did not mount"
            assert server.poll() is None, f"powerfs exited with {server.returncode}"
            time.sleep(0.05)
        out = [subprocess.run(line, shell=True, check=True, capture_output=True, text=True).stdout for line in rest]
        status, dropped, listing = json.loads(out[1]), json.loads(out[2]), out[3]
        assert status["disks"] == ["m1"] and status["unsynced"] == {"m1": 2}
        assert dropped["disks"] == ["m1"] and dropped["files_reverted"] == 1 and dropped["entries_reverted"] == 1
        assert listing == ""
        assert server.wait(timeout=30) == 0  # the last line unmounted it
        assert (DEMO / "at-rest" / "m1").is_dir() and list((DEMO / "at-rest" / "m1").iterdir()) == []
    finally:
        if os.path.ismount(DEMO / "mnt"):
            subprocess.run(["fusermount3", "-u", "-z", str(DEMO / "mnt")], check=False)
        server.wait(timeout=30)
        shutil.rmtree(DEMO, ignore_errors=True)
