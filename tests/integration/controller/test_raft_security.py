"""pysyncobj unpickles what arrives on its port: the password must stop a pickle payload.

The same payload is sent to a node started with --insecure-dev to show that it is a real
exploit (the marker file appears there), so the protected case cannot pass by accident.
"""

from __future__ import annotations

import contextlib
import pickle
import socket
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

from brokergroup.local.controllers import ControllerGroup
from tests.integration.conftest import eventually


class TouchFile:
    """Unpickling this calls open(path, "w"): a harmless stand-in for running any code."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Callable[..., object], tuple[str, str]]:
        return (open, (str(self.path), "w"))


def send_raw_pickle(raft_address: str, marker: Path) -> None:
    payload = zlib.compress(pickle.dumps(TouchFile(marker)), 3)
    host, port = raft_address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(struct.pack("i", len(payload)) + payload)
        sock.settimeout(2)
        with contextlib.suppress(TimeoutError, ConnectionError):
            sock.recv(1024)


async def test_password_protected_raft_port_refuses_pickle(controller_group: ControllerGroup, tmp_path: Path) -> None:
    group = controller_group
    leader = await group.leader()
    marker = tmp_path / "pwned-protected"
    for node in group.nodes:
        send_raw_pickle(node.raft, marker)
    # the group keeps working and the payload never ran
    async with group.client() as client:
        status = await client.status(address=group.nodes[leader].api)
        assert status["hasQuorum"] is True
    assert not marker.exists()


async def test_insecure_dev_node_runs_the_payload(tmp_path: Path) -> None:
    group = ControllerGroup(tmp_path / "insecure", size=1, extra_args=["--insecure-dev"])
    group.password = ""
    group.start_all()
    try:
        await group.leader()
        marker = tmp_path / "pwned-insecure"
        send_raw_pickle(group.nodes[0].raft, marker)

        async def ran() -> bool:
            return marker.exists()

        await eventually("the pickle payload runs on an unprotected port", ran, timeout=10)
    finally:
        group.stop_all()


def test_refuses_to_start_without_password(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "brokergroup.cli", "controller", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 2
    assert "raft.password is required" in result.stderr
    assert not (tmp_path / "raft").exists()
