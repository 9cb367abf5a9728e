"""Timing profiles and replication modes of local clusters, as data.

A timing profile fixes every period and timeout that decides how fast a failover happens: how
often brokers heartbeat the controller and how long until a silent one counts as lost, how
long a master's write lease lasts, how often the controller scans for dead brokers and
masterless sets, how long a slave may lag before it leaves the sync-state-set. It becomes
`--set` flags for `brokergroup broker` and `brokergroup controller`.

- `default`: RocketMQ's defaults (and the brokers' and controllers' own defaults);
- `fast`: the values of the integration tests, so that a demo or a fault run finishes in minutes.

A replication mode decides when a write is acknowledged:

- `sync`: every member of the sync-state-set has it, at least 2 replicas are in sync, and it is
  fsynced (SYNC flush). A single process dying loses no acknowledged message.
- `async`: the master alone has it (fsynced). A master failover can lose what it had not
  replicated yet.

Pure: no processes, no I/O.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from brokergroup.broker.settings import lease_margin_problem
from brokergroup.common.settings import SettingsError

# A stale controller leader may answer for up to this long after losing its quorum: the controllers'
# leaderFallbackTimeout, max(3 s, 2 x raft.max_timeout) with the default raft timings (the brokers'
# settings check the whole lease margin with it: `broker.settings.lease_margin_problem`).
STALE_LEADER_GRACE_MS: Final = 3000


class ProfileError(SettingsError):
    """A profile or mode that cannot be used; the message says which and why."""


@dataclasses.dataclass(frozen=True)
class TimingProfile:
    name: str
    description: str
    heartbeat_interval_ms: int
    """Broker → controller heartbeat period (brokerHeartbeatInterval)."""
    heartbeat_timeout_ms: int
    """A broker silent this long is lost (controllerHeartBeatTimeoutMills)."""
    sync_broker_metadata_period_ms: int
    """Brokers poll replica-info this often (syncBrokerMetadataPeriod)."""
    check_sync_state_set_period_ms: int
    """The master checks whether to shrink its sync-state-set this often (checkSyncStateSetPeriod)."""
    max_time_slave_not_catchup_ms: int
    """A slave this far behind leaves the sync-state-set (haMaxTimeSlaveNotCatchup)."""
    write_lease_ms: int
    """A master acknowledges only within this long of reaching the controller leader."""
    scan_not_active_broker_ms: int
    """Controller: heartbeat expiry scan period (scanNotActiveBrokerInterval)."""
    scan_inactive_master_ms: int
    """Controller: scan for sets whose master is inactive (scanInactiveMasterInterval)."""
    ha_send_heartbeat_interval_ms: int
    """Replication keep-alive of an idle connection (haSendHeartbeatInterval)."""
    ha_housekeeping_interval_ms: int
    """Drop a replication connection silent this long (haHousekeepingInterval)."""
    ha_slave_timeout_ms: int
    """A put waits this long for replica acks (slaveTimeout)."""
    segment_size: int | None = None
    """Commit-log segment size; None keeps the broker's default (64 MiB)."""

    def validate(self) -> TimingProfile:
        problem = lease_margin_problem(
            write_lease_ms=self.write_lease_ms,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            heartbeat_send_timeout_ms=self.heartbeat_interval_ms * 4 // 5,
            heartbeat_timeout_ms=self.heartbeat_timeout_ms,
            leader_fallback_ms=STALE_LEADER_GRACE_MS,
        )
        if problem:
            raise ProfileError(f"profile {self.name}: {problem}")
        if self.heartbeat_timeout_ms <= 3 * self.heartbeat_interval_ms:
            raise ProfileError(
                f"profile {self.name}: heartbeat timeout ({self.heartbeat_timeout_ms} ms) must exceed 3 x the "
                f"heartbeat interval ({self.heartbeat_interval_ms} ms)"
            )
        return self

    def broker_args(self) -> list[str]:
        values = {
            "controller.heartbeat_interval_ms": self.heartbeat_interval_ms,
            "controller.heartbeat_timeout_ms": self.heartbeat_timeout_ms,
            "controller.write_lease_ms": self.write_lease_ms,
            "controller.sync_broker_metadata_period_ms": self.sync_broker_metadata_period_ms,
            "controller.check_sync_state_set_period_ms": self.check_sync_state_set_period_ms,
            "ha.max_time_slave_not_catchup_ms": self.max_time_slave_not_catchup_ms,
            "ha.send_heartbeat_interval_ms": self.ha_send_heartbeat_interval_ms,
            "ha.housekeeping_interval_ms": self.ha_housekeeping_interval_ms,
            "ha.slave_timeout_ms": self.ha_slave_timeout_ms,
        }
        if self.segment_size is not None:
            values["store.segment_size"] = self.segment_size
        return set_flags(values)

    def controller_args(self) -> list[str]:
        return set_flags(
            {
                "rocketmq.scanNotActiveBrokerInterval": self.scan_not_active_broker_ms,
                "rocketmq.scanInactiveMasterInterval": self.scan_inactive_master_ms,
            }
        )


@dataclasses.dataclass(frozen=True)
class ReplicationMode:
    name: str
    description: str
    args: tuple[str, ...]
    min_replicas: int
    """Fewest replicas per set with which the mode can acknowledge anything."""

    def broker_args(self) -> list[str]:
        return list(self.args)


def set_flags(values: dict[str, int]) -> list[str]:
    return [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]


DEFAULT = TimingProfile(
    name="default",
    description="RocketMQ's defaults: heartbeat 1 s, timeout 10 s, lease 5 s, scans 5 s",
    heartbeat_interval_ms=1000,
    heartbeat_timeout_ms=10_000,
    sync_broker_metadata_period_ms=5000,
    check_sync_state_set_period_ms=5000,
    max_time_slave_not_catchup_ms=15_000,
    write_lease_ms=5000,
    scan_not_active_broker_ms=5000,
    scan_inactive_master_ms=5000,
    ha_send_heartbeat_interval_ms=5000,
    ha_housekeeping_interval_ms=20_000,
    ha_slave_timeout_ms=3000,
)

FAST = TimingProfile(
    name="fast",
    description="the integration tests' timing: heartbeat 200 ms, timeout 5 s, lease 1.5 s, scans 500 ms",
    heartbeat_interval_ms=200,
    heartbeat_timeout_ms=5000,
    sync_broker_metadata_period_ms=500,
    check_sync_state_set_period_ms=300,
    max_time_slave_not_catchup_ms=2000,
    write_lease_ms=1500,
    scan_not_active_broker_ms=500,
    scan_inactive_master_ms=500,
    ha_send_heartbeat_interval_ms=300,
    ha_housekeeping_interval_ms=3000,
    ha_slave_timeout_ms=2000,
    segment_size=1024 * 1024,
)

SYNC = ReplicationMode(
    name="sync",
    description="acknowledge once every sync-state-set member has it (at least 2) and it is fsynced",
    args=("--all-ack", "--min-in-sync-replicas", "2", "--flush", "SYNC"),
    min_replicas=2,
)

ASYNC = ReplicationMode(
    name="async",
    description="acknowledge once the master has it fsynced; a failover can lose unreplicated messages",
    args=("--in-sync-replicas", "1", "--min-in-sync-replicas", "1", "--flush", "SYNC"),
    min_replicas=1,
)

PROFILES: Final[dict[str, TimingProfile]] = {p.name: p.validate() for p in (DEFAULT, FAST)}
MODES: Final[dict[str, ReplicationMode]] = {m.name: m for m in (SYNC, ASYNC)}


def profile(name: str) -> TimingProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ProfileError(f"unknown timing profile {name!r}; choose one of {', '.join(PROFILES)}") from None


def mode(name: str) -> ReplicationMode:
    try:
        return MODES[name]
    except KeyError:
        raise ProfileError(f"unknown replication mode {name!r}; choose one of {', '.join(MODES)}") from None
