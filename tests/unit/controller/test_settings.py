"""Controller settings: file < environment < flags, and validation messages that explain themselves."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokergroup import cli
from brokergroup.common.settings import SettingsError, load_settings
from brokergroup.controller.settings import ControllerSettings, Peer

DEV = {"raft": {"insecure_dev": True}}
PEERS = "n0=127.0.0.1:9877,127.0.0.1:9878;n1=10.0.0.2:9877,10.0.0.2:9878;n2=[::1]:9877,[::1]:9878"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No BG_CONTROLLER_* from the developer's shell; a working directory with nothing in it."""
    for name in list(os.environ):
        if name.upper().startswith("BG_CONTROLLER_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    yield


def load(flags: dict[str, Any] | None = None, *, config_file: Path | None = None) -> ControllerSettings:
    return load_settings(ControllerSettings, config_file=config_file, flags=flags)


def load_error(flags: dict[str, Any] | None = None, *, config_file: Path | None = None) -> str:
    with pytest.raises(SettingsError) as info:
        load(flags, config_file=config_file)
    return str(info.value)


def write_toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "controller.toml"
    path.write_text(text, encoding="utf-8")
    return path


# ---- the Raft password ----------------------------------------------------------------------------------


def test_defaults_need_a_raft_password() -> None:
    message = load_error()
    assert "raft.password is required" in message
    assert "BG_CONTROLLER_RAFT__PASSWORD" in message and "--insecure-dev" in message


def test_insecure_dev_runs_without_a_password() -> None:
    settings = load(DEV)
    assert (settings.raft.password, settings.raft.insecure_dev) == (None, True)
    assert (settings.node_id, settings.me.raft, settings.me.api, settings.others) == (
        "n0",
        "127.0.0.1:9877",
        "127.0.0.1:9878",
        [],
    )
    assert (settings.raft.min_timeout, settings.raft.max_timeout, settings.api.port) == (0.4, 1.4, 9878)


def test_an_empty_password_is_no_password() -> None:
    assert "raft.password is required" in load_error({"raft": {"password": ""}})


def test_password_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BG_CONTROLLER_RAFT__PASSWORD", "from-env")
    assert load().raft.password == "from-env"


# ---- peers ------------------------------------------------------------------------------------------------


def test_peers_string_is_parsed() -> None:
    settings = load({**DEV, "peers": PEERS, "node_id": "n1"})
    assert settings.peers == [
        Peer(id="n0", raft="127.0.0.1:9877", api="127.0.0.1:9878"),
        Peer(id="n1", raft="10.0.0.2:9877", api="10.0.0.2:9878"),
        Peer(id="n2", raft="[::1]:9877", api="[::1]:9878"),
    ]
    assert settings.me.id == "n1"
    assert [p.id for p in settings.others] == ["n0", "n2"]
    assert ";".join(str(p) for p in settings.peers) == PEERS


def test_peers_tolerate_spaces_and_a_trailing_separator() -> None:
    settings = load({**DEV, "peers": " n0 = 127.0.0.1:1 , 127.0.0.1:2 ; "})
    assert settings.peers == [Peer(id="n0", raft="127.0.0.1:1", api="127.0.0.1:2")]


def test_peers_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BG_CONTROLLER_PEERS", PEERS)
    monkeypatch.setenv("BG_CONTROLLER_NODE_ID", "n2")
    settings = load(DEV)
    assert [str(p) for p in settings.peers] == PEERS.split(";")
    assert settings.me.raft == "[::1]:9877"


def test_peers_as_a_toml_table_list(tmp_path: Path) -> None:
    path = write_toml(
        tmp_path,
        '[[peers]]\nid = "a"\nraft = "h1:1"\napi = "h1:2"\n[[peers]]\nid = "b"\nraft = "h2:1"\napi = "h2:2"\n',
    )
    settings = load({**DEV, "node_id": "b"}, config_file=path)
    assert [(p.id, p.raft, p.api) for p in settings.peers] == [("a", "h1:1", "h1:2"), ("b", "h2:1", "h2:2")]


@pytest.mark.parametrize(
    "peer",
    ["n0=127.0.0.1:9877", "n0", "127.0.0.1:9877,127.0.0.1:9878", "n0:127.0.0.1:9877,127.0.0.1:9878"],
)
def test_malformed_peer_shows_the_expected_form(peer: str) -> None:
    message = load_error({**DEV, "peers": peer})
    assert f"peer {peer!r} must look like n0=127.0.0.1:9877,127.0.0.1:9878" in message
    assert message.startswith("invalid settings:\n  peers: ")


@pytest.mark.parametrize(
    ("peers", "expected"),
    [
        ("n0=localhost,127.0.0.1:2", "peers.raft: Value error, 'localhost' is not host:port"),
        ("n0=127.0.0.1:1,127.0.0.1:port", "peers.api: Value error, '127.0.0.1:port' is not host:port"),
        ("n0=127.0.0.1:1,127.0.0.1:123456", "'127.0.0.1:123456' is not host:port"),
        ("-n0=127.0.0.1:1,127.0.0.1:2", "peers.id: String should match pattern"),
    ],
)
def test_bad_peer_parts_are_named(peers: str, expected: str) -> None:
    assert expected in load_error({**DEV, "peers": peers})


def test_node_id_must_be_one_of_the_peers() -> None:
    message = load_error({**DEV, "peers": PEERS, "node_id": "n7"})
    assert "node_id 'n7' is not one of the peers ['n0', 'n1', 'n2']" in message


def test_duplicate_peer_ids_are_refused() -> None:
    message = load_error({**DEV, "peers": "n0=h:1,h:2;n1=h:3,h:4;n0=h:5,h:6"})
    assert "peers: duplicate node ids in ['n0', 'n1', 'n0']" in message


# ---- Raft timing --------------------------------------------------------------------------------------------


def test_election_timeout_must_exceed_three_heartbeats() -> None:
    message = load_error({"raft": {"insecure_dev": True, "min_timeout": 0.3, "append_entries_period": 0.1}})
    assert "raft.min_timeout (0.3 s) must exceed 3 x raft.append_entries_period (0.1 s)" in message


def test_max_timeout_must_exceed_min_timeout() -> None:
    message = load_error({"raft": {"insecure_dev": True, "min_timeout": 1.0, "max_timeout": 1.0}})
    assert "raft.max_timeout (1.0 s) must exceed raft.min_timeout" in message


def test_commit_timeout_must_be_positive() -> None:
    assert "raft.commit_timeout must be positive" in load_error({"raft": {"insecure_dev": True, "commit_timeout": 0}})


def test_timing_rule_applies_to_values_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BG_CONTROLLER_RAFT__APPEND_ENTRIES_PERIOD", "0.5")
    assert "must exceed 3 x raft.append_entries_period (0.5 s)" in load_error(DEV)


# ---- layering ---------------------------------------------------------------------------------------------------


def test_file_then_environment_then_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_toml(
        tmp_path,
        """
group = "from-file"
log_level = "DEBUG"
[raft]
password = "file-secret"
min_timeout = 0.6
max_timeout = 2.0
[api]
port = 1111
host = "0.0.0.0"
brokers_leader_fallback_ms = 6000  # max_timeout 3.0 below: a 6 s leader fallback
[rocketmq]
scanInactiveMasterInterval = 700
""",
    )
    monkeypatch.setenv("BG_CONTROLLER_RAFT__PASSWORD", "env-secret")
    monkeypatch.setenv("BG_CONTROLLER_API__PORT", "2222")
    monkeypatch.setenv("BG_CONTROLLER_LOG_LEVEL", "WARNING")
    settings = load({"api": {"port": 3333}, "raft": {"max_timeout": 3.0}}, config_file=path)
    assert settings.group == "from-file"  # file only
    assert settings.log_level == "WARNING"  # env over file
    assert settings.raft.password == "env-secret"  # env over file, same group as a flag
    assert settings.api.port == 3333  # flag over env over file
    assert settings.api.host == "0.0.0.0"  # file value kept beside env and flag values of its group
    assert (settings.raft.min_timeout, settings.raft.max_timeout) == (0.6, 3.0)
    assert settings.rocketmq.scan_inactive_master_interval == 700
    assert settings.rocketmq.scan_not_active_broker_interval == 5000


def test_flags_reach_rocketmq_keys_by_their_rocketmq_names() -> None:
    settings = load({**DEV, "rocketmq": {"scanInactiveMasterInterval": "1000", "enableElectUncleanMaster": True}})
    assert settings.rocketmq.scan_inactive_master_interval == 1000
    assert settings.rocketmq.enable_elect_unclean_master is True


def test_file_values_are_validated_like_any_other(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "[api]\nport = 70000\n")
    message = load_error(DEV, config_file=path)
    assert "api.port: Input should be less than or equal to 65535 (got 70000)" in message


def test_environment_values_are_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BG_CONTROLLER_API__PORT", "http")
    assert "api.port: Input should be a valid integer" in load_error(DEV)


def test_environment_group_that_is_not_json_is_a_settings_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BG_CONTROLLER_RAFT", "password=x")
    assert 'error parsing value for field "raft" from source "EnvSettingsSource"' in load_error(DEV)


# ---- files ---------------------------------------------------------------------------------------------------------


def test_missing_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "controller.toml"
    assert load_error(DEV, config_file=path) == f"config file {path} does not exist"


def test_bad_toml_is_named(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "[raft\npassword = 1\n")
    message = load_error(DEV, config_file=path)
    assert message.startswith(f"config file {path} is not valid TOML: ")
    assert "line 1" in message


# ---- unknown keys --------------------------------------------------------------------------------------------------


def test_unknown_keys_in_a_file_are_refused(tmp_path: Path) -> None:
    path = write_toml(tmp_path, 'nodeid = "n1"\n[raft]\npasword = "x"\n')
    message = load_error(DEV, config_file=path)
    assert "nodeid: Extra inputs are not permitted" in message
    assert "raft.pasword: Extra inputs are not permitted (got 'x')" in message


def test_unknown_flags_are_refused() -> None:
    assert "api.admin_tokn: Extra inputs are not permitted" in load_error({**DEV, "api": {"admin_tokn": "t"}})
    assert "rocketmq.noSuchKey: Extra inputs are not permitted" in load_error({**DEV, "rocketmq": {"noSuchKey": 1}})


def test_unknown_keys_of_a_group_in_the_environment_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BG_CONTROLLER_RAFT__PASWORD", "x")
    assert "raft.pasword: Extra inputs are not permitted" in load_error(DEV)


# ---- the command line ---------------------------------------------------------------------------------------------


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = cli.main(["controller", *args])
    return code, capsys.readouterr().err


def test_cli_set_without_a_value_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(capsys, "--insecure-dev", "--set", "bad")
    assert code == 2
    assert err == "brokergroup controller: --set 'bad': expected KEY=VALUE\n"


def test_cli_set_of_an_unknown_key_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(capsys, "--insecure-dev", "--set", "raft.bogus=1")
    assert code == 2
    assert err.startswith("brokergroup controller: invalid settings:\n")
    assert "raft.bogus: Extra inputs are not permitted (got '1')" in err


def test_cli_without_a_password_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(capsys, "--peers", "n0=127.0.0.1:1,127.0.0.1:2")
    assert code == 2
    assert "raft.password is required" in err


def test_cli_missing_config_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, err = run_cli(capsys, "--config", str(tmp_path / "absent.toml"), "--insecure-dev")
    assert (code, err) == (2, f"brokergroup controller: config file {tmp_path / 'absent.toml'} does not exist\n")


# ---- the Raft configuration built from the settings -------------------------------------------------------


def test_peer_addresses_are_resolved_again_within_seconds(tmp_path: Path) -> None:
    """A controller pod re-created by a rolling restart has a new IP; pysyncobj's default 10-minute DNS cache
    kept its lower-named peers (the ones that connect to it) on the old one, which cut it off for minutes."""
    from brokergroup.controller.replicated import PEER_DNS_CACHE_SECONDS, StateMachine, build_conf

    settings = load({**DEV, "data_dir": str(tmp_path / "data")})
    conf = build_conf(settings, StateMachine(lambda applied: None), on_state_changed=lambda old, new: None)
    assert conf.dnsCacheTime == PEER_DNS_CACHE_SECONDS <= 5.0
    assert conf.dnsFailCacheTime <= 1.0
