"""cluster.json and auth.json: what `local status` and `local down` re-attach through."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from brokergroup.local import attach
from brokergroup.local.state import (
    FORMAT_VERSION,
    Auth,
    ClusterState,
    ProcessRecord,
    SetRecord,
    StateError,
    read_auth,
    read_state,
    write_auth,
    write_state,
)
from tests.needs import missing


def record(name: str, port: int, pid: int | None = 4242) -> ProcessRecord:
    return ProcessRecord(name, f"127.0.0.1:{port}", f"/data/{name}", f"/data/{name}.log", pid, port + 1)


def sample() -> ClusterState:
    return ClusterState(
        name="local",
        profile="fast",
        mode="sync",
        controllers=tuple(record(f"n{i}", 9000 + 10 * i) for i in range(3)),
        sets=tuple(
            SetRecord(
                f"local-broker-{s}", tuple(record(f"local-broker-{s}-{r}", 10000 + 100 * s + 10 * r) for r in range(3))
            )
            for s in range(2)
        ),
        created_at="2026-01-01T00:00:00+00:00",
    )


def test_state_round_trips_through_cluster_json(tmp_path: Path) -> None:
    state = sample()
    path = write_state(tmp_path, state)
    assert path.name == "cluster.json"
    assert read_state(tmp_path) == state


def test_cluster_json_names_every_process_with_its_pid_and_holds_no_secret(tmp_path: Path) -> None:
    state = sample()
    write_state(tmp_path, state)
    data = json.loads((tmp_path / "cluster.json").read_text())
    assert data["formatVersion"] == FORMAT_VERSION
    assert [c["name"] for c in data["controllers"]] == ["n0", "n1", "n2"]
    assert [r["name"] for r in data["sets"][1]["replicas"]] == [
        "local-broker-1-0",
        "local-broker-1-1",
        "local-broker-1-2",
    ]
    assert all(r["pid"] == 4242 for s in data["sets"] for r in s["replicas"])
    assert "password" not in json.dumps(data).lower() and data["authFile"] == "auth.json"


def test_lookups_over_the_state() -> None:
    state = sample()
    assert state.controller_addresses == ["127.0.0.1:9000", "127.0.0.1:9010", "127.0.0.1:9020"]
    assert state.set_names == ["local-broker-0", "local-broker-1"]
    assert len(state.processes()) == 9 and len(state.pids()) == 9


def test_a_process_that_never_started_has_no_pid(tmp_path: Path) -> None:
    state = ClusterState("c", "fast", "sync", (record("n0", 9000, pid=None),), (), "t")
    write_state(tmp_path, state)
    assert read_state(tmp_path).pids() == []


def test_auth_file_is_readable_by_the_owner_only(tmp_path: Path) -> None:
    auth = Auth(raft_password="p" * 20, admin_token="t" * 20)
    path = write_auth(tmp_path, auth)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_auth(tmp_path) == auth
    os.chmod(path, 0o644)  # a loosened file is replaced, not reused
    write_auth(tmp_path, Auth(raft_password="q" * 20, admin_token="u" * 20))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_auth(tmp_path).raft_password == "q" * 20


def test_missing_state_says_no_cluster_was_started_there(tmp_path: Path) -> None:
    with pytest.raises(StateError, match="no local cluster was started in"):
        read_state(tmp_path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not a usable cluster state"),
        (json.dumps({"formatVersion": 99}), "format version 99"),
        (json.dumps({"formatVersion": FORMAT_VERSION, "name": "x"}), "not a usable cluster state"),
    ],
)
def test_unusable_state_is_reported_with_the_reason(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "cluster.json").write_text(content)
    with pytest.raises(StateError, match=message):
        read_state(tmp_path)


def test_a_live_pid_running_something_else_is_not_ours() -> None:
    """A reused pid: alive, but its command line does not hold the data folder we started it with."""
    if not Path("/proc/self").exists():
        missing("pid identity checks need /proc")
    assert not attach.alive(ProcessRecord("x", "127.0.0.1:1", "/no/such/data-dir", "/x.log", os.getpid(), 2))
    assert not attach.alive(ProcessRecord("x", "127.0.0.1:1", "/d", "/x.log", None, 2))
