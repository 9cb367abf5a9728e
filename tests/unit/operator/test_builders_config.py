"""The ConfigMap's settings files plus the pods' env load with the real settings classes.

Each test runs a container's own command line through the real `brokergroup controller|broker`
argument parser and loads settings exactly as that command does (file < env < flags), with the
env resolved from the StatefulSet like the kubelet would.
"""

from __future__ import annotations

import argparse
import os
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from builder_factories import OWNER, children, only_container, spec
from hypothesis import given
from hypothesis import strategies as st
from pydantic_settings import BaseSettings

from brokergroup.broker import cmd as broker_cmd
from brokergroup.broker.settings import BrokerSettings, FlushMode
from brokergroup.common.settings import deep_merge, load_settings, nested, parse_overrides
from brokergroup.controller import cmd as controller_cmd
from brokergroup.controller.settings import ControllerSettings
from brokergroup.operator.builders import new_auth_secret
from brokergroup.operator.builders.config import config_hash
from brokergroup.operator.builders.tomlfile import TomlTypeError, dumps
from brokergroup.operator.spec import BrokerGroupSpec
from tests.e2e.kubelet.env import resolve_env


def _tokens(*values: str) -> Callable[[int], str]:
    remaining = iter(values)
    return lambda _size: next(remaining)


SECRET = new_auth_secret(OWNER, _tokens("raft-pw", "admin-tk", "broker-tk"))


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No BG_* variables from the developer's shell."""
    for name in list(os.environ):
        if name.upper().startswith("BG_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    yield


def load_pod(
    statefulset_name: str,
    pod: str,
    settings_cls: type[BaseSettings],
    *,
    bg_spec: BrokerGroupSpec | None = None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Any:
    """Settings of `pod` as its container's command would load them."""
    objects = children(bg_spec)
    statefulset = objects[("StatefulSet", statefulset_name)]
    configmap = objects[("ConfigMap", "demo-config")]
    container = only_container(statefulset)
    (volume,) = [v for v in statefulset["spec"]["template"]["spec"]["volumes"] if "configMap" in v]
    (item,) = volume["configMap"]["items"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == volume["name"])

    parser = argparse.ArgumentParser(prog="brokergroup")
    sub = parser.add_subparsers(dest="command", required=True)
    controller_cmd.add_parser(sub)
    broker_cmd.add_parsers(sub)
    args = parser.parse_args(container["command"][1:])
    assert container["command"][0] == "brokergroup"
    assert args.config == Path(mount["mountPath"]) / item["path"]  # the file the volume puts there

    config_file = tmp_path / item["path"]
    config_file.write_text(configmap["data"][item["key"]], encoding="utf-8")
    # The test kubelet's own env resolution: downward API, Secret keys, `$(VAR)`.
    pod_object = {"metadata": {"name": pod, "namespace": OWNER.namespace}, "spec": {"hostname": pod}}
    env = resolve_env(
        container,
        pod_object,
        pod_ip="10.88.0.5",
        host_ip="10.88.0.1",
        lookup=lambda kind, name: SECRET if (kind, name) == ("Secret", SECRET["metadata"]["name"]) else None,
    )
    for name, value in env.items():
        if name not in ("PATH", "HOME", "HOSTNAME"):  # the "image" variables; not settings
            monkeypatch.setenv(name, value)
    flags = {k: v for k, v in vars(args).items() if k not in ("config", "func", "overrides", "command")}
    return load_settings(
        settings_cls, config_file=config_file, flags=deep_merge(nested(flags), parse_overrides(args.overrides))
    )


@pytest.mark.parametrize("ordinal", [0, 2])
def test_controller_pod_loads_its_node_id_peers_and_secrets(
    ordinal: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pod = f"demo-controller-{ordinal}"
    settings = load_pod("demo-controller", pod, ControllerSettings, tmp_path=tmp_path, monkeypatch=monkeypatch)
    assert isinstance(settings, ControllerSettings)
    assert settings.node_id == pod
    assert [str(p) for p in settings.peers] == [
        f"demo-controller-{k}=demo-controller-{k}.demo-controller.mq.svc:9877,"
        f"demo-controller-{k}.demo-controller.mq.svc:9878"
        for k in range(3)
    ]
    assert settings.me.raft == f"{pod}.demo-controller.mq.svc:9877"
    assert (settings.raft.password, settings.api.admin_token) == ("raft-pw", "admin-tk")
    assert settings.api.broker_token == "broker-tk"
    assert settings.raft.insecure_dev is False
    assert (settings.raft.bind_host, settings.api.host, settings.api.port) == ("0.0.0.0", "0.0.0.0", 9878)
    assert settings.data_dir == Path("/var/lib/brokergroup/controller")
    assert settings.group == "demo-controller"
    assert settings.rocketmq.enable_elect_unclean_master is False


def test_controller_settings_follow_the_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bg_spec = spec(controller={"replicas": 5, "electUncleanMaster": True})
    settings = load_pod(
        "demo-controller",
        "demo-controller-4",
        ControllerSettings,
        bg_spec=bg_spec,
        tmp_path=tmp_path,
        monkeypatch=monkeypatch,
    )
    assert [p.id for p in settings.peers] == [f"demo-controller-{k}" for k in range(5)]
    assert settings.rocketmq.enable_elect_unclean_master is True


def test_sync_broker_pod_loads_its_set_name_and_advertise_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bg_spec = spec(brokers={"sets": 2, "minInSyncReplicas": 3})
    settings = load_pod(
        "demo-broker-1", "demo-broker-1-2", BrokerSettings, bg_spec=bg_spec, tmp_path=tmp_path, monkeypatch=monkeypatch
    )
    assert isinstance(settings, BrokerSettings)
    assert (settings.cluster_name, settings.broker_name) == ("demo", "demo-broker-1")
    assert settings.advertise_host == "demo-broker-1-2.demo-broker-1.mq.svc"
    assert (settings.host, settings.port, settings.ha.host, settings.ha.port) == ("0.0.0.0", 10911, "0.0.0.0", 10912)
    assert (settings.binary.host, settings.binary.port) == ("0.0.0.0", 10909)
    assert settings.data_dir == Path("/var/lib/brokergroup/broker")
    assert settings.store.flush is FlushMode.SYNC
    assert (settings.ha.all_ack_in_sync_state_set, settings.ha.min_in_sync_replicas) == (True, 3)
    # The headless Service's name, resolved to every controller pod and again every 5 s (issue 23).
    assert settings.controller.addresses == ["demo-controller.mq.svc:9878"]
    assert (settings.controller.dns_lookup, settings.controller.dns_lookup_interval_ms) == (True, 5000)
    assert settings.controller.heartbeat_timeout_ms == 10_000
    # The brokers' credential is the controllers' broker token, from the same Secret key; never the admin token.
    assert (settings.controller.broker_token, settings.controller.admin_token) == ("broker-tk", None)


def test_async_broker_pod_acknowledges_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bg_spec = spec(brokers={"replication": "Async"}, controller={"heartbeatTimeoutSeconds": 30})
    settings = load_pod(
        "demo-broker-0", "demo-broker-0-0", BrokerSettings, bg_spec=bg_spec, tmp_path=tmp_path, monkeypatch=monkeypatch
    )
    assert settings.broker_name == "demo-broker-0"
    assert settings.advertise_host == "demo-broker-0-0.demo-broker-0.mq.svc"
    assert (settings.ha.all_ack_in_sync_state_set, settings.ha.in_sync_replicas, settings.ha.min_in_sync_replicas) == (
        False,
        1,
        1,
    )
    assert settings.store.flush is FlushMode.SYNC
    assert settings.controller.heartbeat_timeout_ms == 30_000
    assert settings.store.retention_ms is None  # brokers.retentionHours unset: keep everything


def test_broker_pods_get_the_retention_of_the_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bg_spec = spec(brokers={"retentionHours": 72})
    settings = load_pod(
        "demo-broker-0", "demo-broker-0-0", BrokerSettings, bg_spec=bg_spec, tmp_path=tmp_path, monkeypatch=monkeypatch
    )
    assert isinstance(settings, BrokerSettings)
    assert settings.store.retention_ms == 72 * 3600 * 1000


def test_broker_pods_get_the_retention_size_free_disk_and_seeding_of_the_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bg_spec = spec(
        brokers={"retentionSize": "50Gi", "minFreeDisk": "1.5Gi", "syncFromLastFile": True, "storage": {"size": "60Gi"}}
    )
    settings = load_pod(
        "demo-broker-0", "demo-broker-0-2", BrokerSettings, bg_spec=bg_spec, tmp_path=tmp_path, monkeypatch=monkeypatch
    )
    assert isinstance(settings, BrokerSettings)
    assert settings.store.retention_bytes == 50 * 2**30
    assert settings.store.min_free_disk_bytes == 3 * 2**29
    assert settings.ha.sync_from_last_file is True
    assert settings.store.retention_ms is None


def test_unset_retention_fields_leave_the_broker_toml_as_it_was() -> None:
    """A group that sets none of the new fields keeps its broker.toml (and its pods: no roll on upgrade)."""
    broker_toml = tomllib.loads(children(spec())[("ConfigMap", "demo-config")]["data"]["broker.toml"])
    assert set(broker_toml["store"]) == {"flush"}
    assert "sync_from_last_file" not in broker_toml["ha"]
    off = tomllib.loads(
        children(spec(brokers={"syncFromLastFile": False}))[("ConfigMap", "demo-config")]["data"]["broker.toml"]
    )
    assert off == broker_toml


def test_the_smallest_heartbeat_timeout_passes_the_brokers_lease_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bg_spec = spec(controller={"heartbeatTimeoutSeconds": 10})
    settings = load_pod(
        "demo-broker-0", "demo-broker-0-1", BrokerSettings, bg_spec=bg_spec, tmp_path=tmp_path, monkeypatch=monkeypatch
    )
    assert settings.controller.heartbeat_timeout_ms == 10_000
    assert settings.controller.max_heartbeat_age_ms >= 2 * settings.controller.heartbeat_interval_ms


def test_one_second_below_the_crds_minimum_fails_the_brokers_lease_check() -> None:
    """The CRD's minimum heartbeatTimeoutSeconds (10) is the brokers' lease margin, not a guess."""
    with pytest.raises(ValueError, match=r"heartbeat_timeout_ms \(9000\) must be at least"):
        BrokerSettings.model_validate({"controller": {"heartbeat_timeout_ms": 9000}})
    with pytest.raises(ValueError, match=r"spec\.controller\.heartbeatTimeoutSeconds"):
        spec(controller={"heartbeatTimeoutSeconds": 9})


# ---- config hash ------------------------------------------------------------------------------------------


def test_config_hash_follows_the_file_it_names() -> None:
    base = children()[("ConfigMap", "demo-config")]
    changed = children(spec(brokers={"replication": "Async"}))[("ConfigMap", "demo-config")]
    assert config_hash(base, "broker.toml") != config_hash(changed, "broker.toml")
    assert config_hash(base, "controller.toml") == config_hash(changed, "controller.toml")
    assert config_hash(base) != config_hash(changed)
    assert len(config_hash(base)) == 16


# ---- the TOML writer --------------------------------------------------------------------------------------

_scalars = st.one_of(st.booleans(), st.integers(min_value=-(2**63), max_value=2**63 - 1), st.text())
_keys = st.text(min_size=1, max_size=12)
_values = st.one_of(_scalars, st.lists(_scalars, max_size=4))
_tables = st.recursive(
    st.dictionaries(_keys, _values, max_size=5),
    lambda inner: st.dictionaries(_keys, st.one_of(_values, inner), max_size=4),
    max_leaves=20,
)


@given(_tables)
def test_toml_writer_round_trips(document: dict[str, Any]) -> None:
    assert tomllib.loads(dumps(document)) == document


def test_toml_writer_text_is_stable_and_readable() -> None:
    text = dumps({"b": 1, "a": {"x": 'q"uo\\te\n', "y": [True, 2]}, "c": ["z"], "d": {}, "k\n": "\x7f"})
    assert text == 'b = 1\nc = ["z"]\n"k\\n" = "\\u007f"\n\n[a]\nx = "q\\"uo\\\\te\\n"\ny = [true, 2]\n\n[d]\n'
    assert tomllib.loads(text) == {"b": 1, "a": {"x": 'q"uo\\te\n', "y": [True, 2]}, "c": ["z"], "d": {}, "k\n": "\x7f"}
    long = dumps({"peers": [f"node-{i}-with-a-long-address" for i in range(4)]})
    assert long.splitlines()[:2] == ["peers = [", '    "node-0-with-a-long-address",']


@pytest.mark.parametrize("bad", [1.5, None, b"bytes", [{"a": 1}], [[1]], 2**63])
def test_toml_writer_refuses_what_it_cannot_write(bad: Any) -> None:
    with pytest.raises(TomlTypeError, match=r"a\.k: unsupported TOML value"):
        dumps({"a": {"k": bad}})
