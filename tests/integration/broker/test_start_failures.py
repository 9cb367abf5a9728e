"""A broker that cannot take its role stops, with an error naming why, instead of staying up fenced and
silent (it once did: its role's start task died, the API kept answering "not learned its role yet", and
the cause was printed only when the process was told to stop). Real broker and controller processes;
tests/unit/broker/test_role_failures.py covers the role's other tasks."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup
from brokergroup.local.processes import tail
from tests.integration.broker.conftest import make_set


def run_until_exit(brokers: BrokerSet, index: int, timeout: float = 60) -> tuple[int, str]:
    """Start replica `index`; once it has exited, its exit code and its log. Fails after `timeout` seconds
    with the log's end."""
    node = brokers.nodes[index]
    try:
        brokers.start(index)
        assert node.proc is not None
        try:
            code = node.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{node.name} still runs after {timeout} s; its log ends with:\n{tail(node.log_path, 15)}"
            ) from None
        return code, node.log_path.read_text()
    finally:
        brokers.stop_all()


def test_a_broker_whose_replication_port_is_taken_exits_naming_it(
    controller_group: ControllerGroup, tmp_path: Path
) -> None:
    brokers = make_set(tmp_path, controller_group, [])
    node = brokers.nodes[0]
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", node.ha_port))
        holder.listen()
        code, log = run_until_exit(brokers, 0)
    assert code == 1, log
    assert "ERROR brokergroup.common.lasting: the broker stops: its start failed: " in log, log
    assert "brokergroup broker: the broker stopped: its start failed: " in log, log
    assert str(node.ha_port) in log.rsplit("brokergroup broker: ", 1)[1], log
    assert "Traceback" not in log, log


def test_a_broker_with_another_set_s_identity_refuses_to_start(
    controller_group: ControllerGroup, tmp_path: Path
) -> None:
    brokers = make_set(tmp_path, controller_group, [])
    node = brokers.nodes[0]
    node.data_dir.mkdir(parents=True)
    (node.data_dir / "brokerIdentity").write_text("other-cluster#other-set#1")
    code, log = run_until_exit(brokers, 0)
    assert code == 1, log
    message = "belongs to other-cluster/other-set, but this broker is configured as it/bs; refusing to start"
    assert (
        f"brokergroup broker: the broker stopped: its start failed: {node.data_dir / 'brokerIdentity'} {message}" in log
    ), log
    assert (node.data_dir / "brokerIdentity").read_text() == "other-cluster#other-set#1"  # left as it was
