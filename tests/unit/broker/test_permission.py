"""The write permission (broker/permission.py) and the role manager's use of it: wiped durably, kept across a
restart (a new RoleManager on the same data folder), refusing produces only where the broker would take them."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from brokergroup.broker import permission
from brokergroup.broker.permission import PERMISSION_FILE, READ_ONLY_REMARK, PermissionFile, parse
from brokergroup.broker.role import Role, RoleManager, monotonic_ms
from brokergroup.broker.settings import BrokerSettings
from brokergroup.broker.store.types import PutStatus


def test_a_fresh_data_folder_is_writable(tmp_path: Path) -> None:
    assert PermissionFile(tmp_path).load() is True
    assert not (tmp_path / PERMISSION_FILE).exists()


def test_wipe_and_restore_survive_a_new_reader(tmp_path: Path) -> None:
    PermissionFile(tmp_path).save(False)
    assert json.loads((tmp_path / PERMISSION_FILE).read_text()) == {"writable": False}
    assert PermissionFile(tmp_path).load() is False  # a restarted broker reads it again
    PermissionFile(tmp_path).save(False)  # wiping twice is harmless
    assert PermissionFile(tmp_path).load() is False
    PermissionFile(tmp_path).save(True)
    assert not (tmp_path / PERMISSION_FILE).exists()
    assert PermissionFile(tmp_path).load() is True
    PermissionFile(tmp_path).save(True)  # restoring a writable broker changes nothing
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_saves_go_through_the_durable_helpers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, Any]] = []
    real_replace, real_fsync = permission.replace_durably, permission.fsync_path

    def replace(path: Path, data: bytes) -> None:
        calls.append(("replace", (path.name, data)))
        real_replace(path, data)

    def fsync(path: Path, *, directory: bool = False) -> None:
        calls.append(("fsync", (path, directory)))
        real_fsync(path, directory=directory)

    monkeypatch.setattr(permission, "replace_durably", replace)
    monkeypatch.setattr(permission, "fsync_path", fsync)
    folder = tmp_path / "data"  # not there yet: made durably too
    PermissionFile(folder).save(False)
    assert ("replace", (PERMISSION_FILE, b'{"writable": false}\n')) in calls
    calls.clear()
    PermissionFile(folder).save(True)
    assert calls == [("fsync", (folder, True))]  # the removal's folder entry is fsynced


def test_a_torn_save_leaves_the_old_state_and_its_tmp_is_removed(tmp_path: Path) -> None:
    (tmp_path / (PERMISSION_FILE + ".tmp")).write_text('{"writ')
    assert PermissionFile(tmp_path).load() is True
    assert not (tmp_path / (PERMISSION_FILE + ".tmp")).exists()


@pytest.mark.parametrize("content", [b"", b"{", b"[]", b'{"writable": "no"}', b'{"writable": 0}', b'{"w": false}'])
def test_a_damaged_file_keeps_the_broker_read_only_and_says_so(
    tmp_path: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / PERMISSION_FILE).write_bytes(content)
    with caplog.at_level(logging.ERROR, logger=permission.__name__):
        assert PermissionFile(tmp_path).load() is False
    assert str(tmp_path / PERMISSION_FILE) in caplog.text and "read-only" in caplog.text
    PermissionFile(tmp_path).save(True)  # restoring replaces it
    assert PermissionFile(tmp_path).load() is True


def test_parse() -> None:
    assert parse(b'{"writable": true}') is True
    assert parse(b'{"writable": false}\n') is False
    assert parse(b"nope") == "not JSON"
    assert parse(b'{"writable": false, "x": 1}') == 'not {"writable": true|false}'


# ---- the role manager ------------------------------------------------------------------------------------


def role_manager(data_dir: Path, role: Role = Role.MASTER, *, lease: bool = True) -> RoleManager:
    manager = RoleManager(
        settings=BrokerSettings(data_dir=data_dir),
        store=None,  # type: ignore[arg-type]  # not read here
        make_ha=lambda _id: None,  # type: ignore[arg-type,return-value]
        controller=None,  # type: ignore[arg-type]
        session=None,  # type: ignore[arg-type]  # the heartbeat streams are never started here
        address="127.0.0.1:1",
    )
    manager.broker_id, manager.role, manager.master_epoch, manager.fenced = 1, role, 3, False
    if lease:
        manager._lease_until_ms = monotonic_ms() + 60_000
    return manager


def test_a_wiped_master_refuses_produces_and_says_why(tmp_path: Path) -> None:
    master = role_manager(tmp_path)
    assert master.produce_refusal() is None and master.view()["writable"] is True
    master.set_writable(False)
    assert master.produce_refusal() == READ_ONLY_REMARK
    assert master.check_write() is None  # consumer-offset commits (the put path's check) go on
    assert master.ready()  # still Ready: the master Service keeps serving consumers
    assert master.view()["writable"] is False and master.view()["role"] == "master"
    assert (tmp_path / PERMISSION_FILE).exists()  # durable before it takes effect

    restarted = role_manager(tmp_path)
    assert restarted.writable is False and restarted.produce_refusal() == READ_ONLY_REMARK
    restarted.set_writable(True)
    assert restarted.produce_refusal() is None and role_manager(tmp_path).writable is True


def test_a_wiped_slave_refuses_as_a_slave_until_it_is_master(tmp_path: Path) -> None:
    slave = role_manager(tmp_path, Role.SLAVE)
    slave.set_writable(False)
    refused = slave.check_write()
    assert refused is not None and refused[0] is PutStatus.SERVICE_NOT_AVAILABLE  # names its master to the producer
    assert slave.produce_refusal() is None
    slave.role = Role.MASTER  # elected
    assert slave.produce_refusal() == READ_ONLY_REMARK


def test_other_refusals_come_first(tmp_path: Path) -> None:
    lapsed = role_manager(tmp_path, lease=False)
    lapsed.set_writable(False)
    assert lapsed.check_write() is not None and lapsed.produce_refusal() is None
    fenced = role_manager(tmp_path)
    fenced.admin_fenced = True
    assert fenced.writable is False and fenced.produce_refusal() is None
