"""Timing profiles and replication modes: what the real broker and controller command lines make of them."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import pytest

from brokergroup.broker import cmd as broker_cmd
from brokergroup.broker.settings import BrokerSettings, FlushMode
from brokergroup.common.settings import SettingsError, deep_merge, load_settings, nested, parse_overrides
from brokergroup.controller import cmd as controller_cmd
from brokergroup.controller.settings import ControllerSettings
from brokergroup.local import profiles
from brokergroup.local.cluster import ClusterSpec

TIMING = (
    ("heartbeat_interval_ms", "controller", "heartbeat_interval_ms"),
    ("heartbeat_timeout_ms", "controller", "heartbeat_timeout_ms"),
    ("sync_broker_metadata_period_ms", "controller", "sync_broker_metadata_period_ms"),
    ("check_sync_state_set_period_ms", "controller", "check_sync_state_set_period_ms"),
    ("write_lease_ms", "controller", "write_lease_ms"),
    ("max_time_slave_not_catchup_ms", "ha", "max_time_slave_not_catchup_ms"),
    ("ha_send_heartbeat_interval_ms", "ha", "send_heartbeat_interval_ms"),
    ("ha_housekeeping_interval_ms", "ha", "housekeeping_interval_ms"),
    ("ha_slave_timeout_ms", "ha", "slave_timeout_ms"),
)


def _parser(add: Any) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add(parser.add_subparsers(dest="command"))
    return parser


def broker_settings(args: list[str]) -> BrokerSettings:
    """What `brokergroup broker ARGS` would run with (broker.cmd.run_broker_cmd, without running)."""
    ns = _parser(broker_cmd.add_parsers).parse_args(["broker", *args])
    flags = {k: v for k, v in vars(ns).items() if k not in ("config", "func", "overrides", "command")}
    return load_settings(BrokerSettings, flags=deep_merge(nested(flags), parse_overrides(ns.overrides)))


def controller_settings(args: list[str]) -> ControllerSettings:
    ns = _parser(controller_cmd.add_parser).parse_args(["controller", "--insecure-dev", *args])
    flags = {k: v for k, v in vars(ns).items() if k not in ("config", "func", "overrides", "command")}
    return load_settings(ControllerSettings, flags=deep_merge(nested(flags), parse_overrides(ns.overrides)))


@pytest.mark.parametrize("profile", list(profiles.PROFILES.values()), ids=list(profiles.PROFILES))
def test_broker_args_reach_every_timing_setting(profile: profiles.TimingProfile) -> None:
    settings = broker_settings(profile.broker_args())
    for field, group, key in TIMING:
        assert getattr(getattr(settings, group), key) == getattr(profile, field), field
    if profile.segment_size is not None:
        assert settings.store.segment_size == profile.segment_size


def test_default_profile_is_what_brokers_and_controllers_do_by_themselves() -> None:
    """`default` is RocketMQ's defaults, which are also our processes' own defaults: passing it changes nothing."""
    assert broker_settings(profiles.DEFAULT.broker_args()) == broker_settings([])
    assert controller_settings(profiles.DEFAULT.controller_args()) == controller_settings([])


@pytest.mark.parametrize("profile", list(profiles.PROFILES.values()), ids=list(profiles.PROFILES))
def test_controller_args_set_the_scans(profile: profiles.TimingProfile) -> None:
    rocketmq = controller_settings(profile.controller_args()).rocketmq
    assert rocketmq.scan_not_active_broker_interval == profile.scan_not_active_broker_ms
    assert rocketmq.scan_inactive_master_interval == profile.scan_inactive_master_ms


def test_sync_mode_acknowledges_only_with_every_in_sync_replica_and_fsync() -> None:
    ha_store = broker_settings(profiles.SYNC.broker_args())
    assert ha_store.ha.all_ack_in_sync_state_set
    assert ha_store.ha.min_in_sync_replicas == 2
    assert ha_store.store.flush is FlushMode.SYNC


def test_async_mode_acknowledges_on_the_master_alone() -> None:
    settings = broker_settings(profiles.ASYNC.broker_args())
    assert not settings.ha.all_ack_in_sync_state_set
    assert settings.ha.in_sync_replicas == 1
    assert settings.ha.min_in_sync_replicas == 1


def test_a_lease_too_long_for_the_heartbeat_timeout_is_refused_with_the_reason() -> None:
    bad = dataclasses.replace(profiles.FAST, name="bad", write_lease_ms=2500)
    expected = r"heartbeat_timeout_ms \(5000\) must be at least write_lease_ms \(2500\) \+ leader_fallback_ms \(3000"
    with pytest.raises(profiles.ProfileError, match=expected):
        bad.validate()


def test_heartbeat_timeout_must_cover_several_heartbeats() -> None:
    bad = dataclasses.replace(profiles.FAST, name="bad", heartbeat_interval_ms=2000)
    with pytest.raises(profiles.ProfileError, match=r"2 x heartbeat_interval_ms \(2000\) = 8500"):
        bad.validate()


def test_unknown_names_list_the_choices_and_are_settings_errors() -> None:
    with pytest.raises(SettingsError, match="choose one of default, fast"):
        profiles.profile("slow")
    with pytest.raises(SettingsError, match="choose one of sync, async"):
        profiles.mode("semi")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (ClusterSpec(replicas=1), "--mode sync needs at least 2 replicas"),
        (ClusterSpec(sets=0), "--sets 0: must be between 1 and 16"),
        (ClusterSpec(controllers=10), "--controllers 10"),
        (ClusterSpec(replicas=12, mode=profiles.ASYNC), "--replicas 12"),
        (ClusterSpec(name="Bad_Name"), "--name 'Bad_Name'"),
    ],
)
def test_cluster_specs_that_cannot_work_are_refused(spec: ClusterSpec, message: str) -> None:
    with pytest.raises(SettingsError, match=message.replace("(", r"\(")):
        spec.validate()


def test_async_mode_runs_with_a_single_replica() -> None:
    assert ClusterSpec(replicas=1, mode=profiles.ASYNC).validate().replicas == 1
