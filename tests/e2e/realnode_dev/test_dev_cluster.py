"""`scripts/dev-cluster up` and `down` (README): the real node with the chart and examples/minimal.yaml, the
kubeconfig printed, `kubectl get bg` working with it, and the host put back. In a package of its own, so that
it runs after tests/e2e/realnode has stopped its node (one real node per machine)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.kubeenv import Binaries, eventually
from tests.e2e.realnode import config
from tests.e2e.realnode.node import missing_requirements, read_sysctls
from tests.needs import missing

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "dev-cluster"


def dev_cluster(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), command], capture_output=True, text=True, timeout=1500, check=False)


@pytest.mark.timeout(1800)
def test_dev_cluster_up_prints_a_kubeconfig_with_a_brokergroup_and_down_cleans_up() -> None:
    lacking = missing_requirements()
    if lacking:
        missing("scripts/dev-cluster needs " + ", ".join(lacking))
    # ip_forward is left out: a test kubelet of another session may take the host as soon as the node is down.
    tunables = [name for name in config.KUBELET_SYSCTLS if name != "net.ipv4.ip_forward"]
    before = read_sysctls(tunables)
    up = dev_cluster("up")
    try:
        assert up.returncode == 0, up.stderr[-4000:]
        (line,) = [line for line in up.stdout.splitlines() if line.startswith("export KUBECONFIG=")]
        kubeconfig = line.removeprefix("export KUBECONFIG=")
        kubectl = str(Binaries.discover().kubectl)

        def phase() -> str:
            return subprocess.run(
                [kubectl, f"--kubeconfig={kubeconfig}", "get", "bg", "demo", "-n", "demo", "-o",
                 "jsonpath={.status.phase}"],
                capture_output=True, text=True, timeout=60, check=False,
            ).stdout  # fmt: skip

        eventually("kubectl get bg demo says Ready", lambda: phase() == "Ready", timeout=300, interval=1)
    finally:
        down = dev_cluster("down")
    assert down.returncode == 0, down.stderr[-4000:]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    assert f" {config.BRIDGE}:" not in links
    assert not Path("/run/brokergroup-realnode").exists()
    assert read_sysctls(tunables) == before  # the kubelet changed them (kernel.panic=10, ...): put back
