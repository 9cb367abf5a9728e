"""The test network: namespaces reach each other over the bridge, a cut drops traffic, heal restores
it, and nothing is left behind, even by a harness that died."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokergroup.chaos import netns
from tests.needs import missing

pytestmark = pytest.mark.integration


def require_netns() -> None:
    """Skip locally without network namespaces; under CI=true a missing capability fails."""
    lacking = netns.missing_capabilities()
    if lacking:
        missing(f"network namespaces are unavailable: {'; '.join(lacking)}")


@pytest.fixture
def network() -> Iterator[netns.Network]:
    require_netns()
    net = netns.Network(["a", "b"])
    net.create()
    try:
        yield net
    finally:
        net.destroy()


def listen(net: netns.Network, name: str) -> socket.socket:
    with netns.entered(net.namespace(name)):
        server = socket.socket()
    server.bind((net.address(name), 7000))
    server.listen()
    return server


def connects(net: netns.Network, source: str, target: str) -> bool:
    where = net.hub if source == "hub" else net.namespace(source)
    with netns.entered(where):
        client = socket.socket()
    client.settimeout(0.5)
    try:
        client.connect((net.address(target), 7000))
    except OSError:
        return False
    finally:
        client.close()
    return True


def test_cut_drops_traffic_both_ways_and_heal_restores_it(network: netns.Network) -> None:
    server_a, server_b = listen(network, "a"), listen(network, "b")
    try:
        assert network.address("a").startswith("10.77.0.")
        assert connects(network, "hub", "a") and connects(network, "b", "a") and connects(network, "a", "b")
        network.cut(["a"], ["b"])
        assert network.describe_cuts() == {"a": ["b"], "b": ["a"]}
        assert not connects(network, "b", "a")
        assert not connects(network, "a", "b")
        assert connects(network, "hub", "a")  # only a-b is cut
        network.cut(["a"], ["hub"])
        assert not connects(network, "hub", "a")
        network.heal()
        assert network.describe_cuts() == {}
        assert connects(network, "b", "a") and connects(network, "hub", "a")
    finally:
        server_a.close()
        server_b.close()


def test_server_address_exists_only_inside_its_namespace(network: netns.Network) -> None:
    probe = socket.socket()
    try:
        with pytest.raises(OSError):
            probe.bind((network.address("a"), 0))  # not an address of the host's own namespace
    finally:
        probe.close()


def test_destroy_removes_every_namespace_and_kills_what_runs_inside() -> None:
    require_netns()
    net = netns.Network(["a"])
    net.create()
    sleeper = subprocess.Popen(["ip", "netns", "exec", net.namespace("a"), "sleep", "600"])
    try:
        # Popen returns before `ip netns exec` has entered the namespace: destroy could run first and find
        # nothing inside. Wait until the process runs `sleep` (ip execs it once inside).
        deadline = time.monotonic() + 30
        while Path(f"/proc/{sleeper.pid}/comm").read_text().strip() != "sleep":
            assert sleeper.poll() is None, f"ip netns exec exited with {sleeper.returncode}"
            assert time.monotonic() < deadline, "sleep did not start inside the namespace within 30 s"
            time.sleep(0.02)
        ours = [n for n in netns.namespaces() if n.startswith(net.prefix)]
        assert sorted(ours) == sorted([net.hub, net.namespace("a")])
        net.destroy()
        assert sleeper.wait(timeout=10) == -9
        assert [n for n in netns.namespaces() if n.startswith(net.prefix)] == []
    finally:
        sleeper.kill()
        sleeper.wait()
        net.destroy()


def test_namespaces_of_a_dead_harness_are_swept() -> None:
    require_netns()
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"{netns.NAME_PREFIX}{dead.pid}-0000-hub"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    try:
        assert stale in netns.sweep_stale()
        assert stale not in netns.namespaces()
    finally:
        subprocess.run(["ip", "netns", "del", stale], capture_output=True, check=False)
