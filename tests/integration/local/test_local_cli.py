"""`brokergroup local up / status / down` as a user runs them: separate processes, re-attaching by pid."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokergroup.local import attach
from brokergroup.local.state import read_auth, read_state
from tests.integration.local.processes import brokergroup, exists, wait_gone

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster_dir(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "local"
    yield folder
    if (folder / "cluster.json").exists():  # the test failed half-way: leave no process behind
        attach.stop(read_state(folder).processes(), timeout=5)


def test_up_status_down(cluster_dir: Path) -> None:
    up = brokergroup("local", "up", "--dir", cluster_dir, "--sets", "1", "--replicas", "3", "--profile", "fast")
    assert up.returncode == 0, up.stderr
    assert "local-broker-0" in up.stdout and "masters" in up.stdout
    state = read_state(cluster_dir)
    assert state.profile == "fast" and state.mode == "sync"
    pids = state.pids()
    assert len(pids) == 6
    assert all(exists(pid) for pid in pids), "the processes outlive `local up`"

    again = brokergroup("local", "up", "--dir", cluster_dir, "--sets", "1")
    assert again.returncode == 1
    assert "already up" in again.stderr

    status = brokergroup("local", "status", "--dir", cluster_dir)
    assert status.returncode == 0, status.stderr
    assert "controller leader n" in status.stdout
    for name in ("n0", "n1", "n2", "local-broker-0-0", "local-broker-0-1", "local-broker-0-2"):
        assert name in status.stdout
    assert status.stdout.count("master") >= 2 and "slave" in status.stdout
    assert "confirmOffset" in status.stdout and "lag" in status.stdout

    # The brokers registered and heartbeat with the generated broker token; without it a controller refuses.
    assert read_auth(cluster_dir).broker_token
    controller = state.controllers[0].api
    forged = urllib.request.Request(
        f"http://{controller}/v1/broker/heartbeat",
        data=json.dumps(
            {"clusterName": "local", "brokerName": "local-broker-0", "brokerAddr": "x:1", "brokerId": 1}
        ).encode(),
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(forged, timeout=10)
    refused.value.close()
    assert refused.value.code == 401

    down = brokergroup("local", "down", "--dir", cluster_dir)
    assert down.returncode == 0, down.stderr
    assert "stopped 6 processes" in down.stdout
    assert wait_gone(pids) == []
    assert (cluster_dir / "controllers" / "n0.log").exists(), "data and logs stay without --purge"

    stopped = brokergroup("local", "status", "--dir", cluster_dir)
    assert stopped.returncode == 1 and "stopped" in stopped.stderr

    purge = brokergroup("local", "down", "--dir", cluster_dir, "--purge")
    assert purge.returncode == 0 and not cluster_dir.exists()


def test_bad_flags_exit_2_with_the_reason(tmp_path: Path) -> None:
    done = brokergroup("local", "up", "--dir", tmp_path / "x", "--replicas", "1")
    assert done.returncode == 2
    assert "--mode sync needs at least 2 replicas" in done.stderr
    assert not (tmp_path / "x").exists()


def test_status_and_down_without_a_cluster_say_so(tmp_path: Path) -> None:
    for verb in ("status", "down"):
        done = brokergroup("local", verb, "--dir", tmp_path)
        assert done.returncode == 1
        assert "no local cluster was started in" in done.stderr
