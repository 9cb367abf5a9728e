"""Settings of one broker replica (`brokergroup broker`).

Loaded like every process's settings (`brokergroup.common.settings`): TOML file, then
`BG_BROKER_*` environment variables (groups split by `__`), then flags. Names follow RocketMQ's
`BrokerConfig` / `MessageStoreConfig` keys where one exists, in snake_case.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from brokergroup.broker.controller_addrs import split_address


class FlushMode(enum.Enum):
    SYNC = "SYNC"
    """Every replica fsyncs what it appends at once (group commit); a master answers a put, and a slave
    acknowledges replicated bytes, only once they are fsynced."""
    ASYNC = "ASYNC"
    """A put returns (a slave acknowledges) after the write; a background task fsyncs every
    `flush_interval_ms`, on masters and slaves alike."""


class StoreSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    segment_size: Annotated[int, Field(ge=4096, le=2**31)] = 64 * 1024 * 1024
    """Commit-log segment file size (must be the same on every replica of a set)."""
    max_message_size: Annotated[int, Field(ge=1, le=64 * 1024 * 1024)] = 4 * 1024 * 1024
    """Largest message body accepted."""
    flush: FlushMode = FlushMode.SYNC
    """SYNC: fsync before acknowledging, on every replica (group commit); ASYNC: fsync in the background."""
    flush_interval_ms: Annotated[int, Field(ge=1, le=60_000)] = 500
    """ASYNC mode: fsync period on masters and slaves (RocketMQ flushIntervalCommitLog, 500 ms)."""
    sync_flush_timeout_ms: Annotated[int, Field(ge=1, le=60_000)] = 5000
    """SYNC mode: a put waits this long for its fsync, then answers FLUSH_DISK_TIMEOUT."""
    retention_ms: Annotated[int, Field(ge=1000)] | None = None
    """Delete whole commit-log segments last written longer ago than this (RocketMQ fileReservedTime, 72 h
    there); only confirmed, flushed segments, never the one being written. None: no age limit."""
    retention_bytes: Annotated[int, Field(ge=4096)] | None = None
    """Delete the oldest whole segments while the commit log is bigger than this (same rules as age).
    None: no size limit."""
    retention_check_interval_ms: Annotated[int, Field(ge=100, le=3_600_000)] = 10_000
    """How often retention looks for segments to delete (RocketMQ cleanResourceInterval)."""
    min_free_disk_bytes: Annotated[int, Field(ge=0)] = 128 * 1024 * 1024
    """Refuse puts (SERVICE_NOT_AVAILABLE, a disk-full remark) while the store's file system has less free
    space than this; writing resumes by itself once space is freed. 0 turns the check off."""


class HASettings(BaseModel):
    """Replication (RocketMQ MessageStoreConfig HA keys)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    host: str = "127.0.0.1"
    """Interface the HA port binds to."""
    port: Annotated[int, Field(ge=0, le=65535)] = 10912
    """HA listen port (haListenPort); 0 picks a free one (tests)."""
    transfer_batch_size: Annotated[int, Field(ge=1024, le=64 * 1024 * 1024)] = 256 * 1024
    """haTransferBatchSize: most commit-log bytes per TRANSFER frame. RocketMQ's default is 32 KiB; here a
    frame is a hop through each slave's event loop, and 256 KiB gave batches of 32 1-KiB messages about 12 %
    more throughput at about 9 % less CPU per message (issue 17, docs/benchmarks.md)."""
    send_heartbeat_interval_ms: Annotated[int, Field(ge=10, le=600_000)] = 5000
    """haSendHeartbeatInterval: an idle master sends an empty frame, an idle slave re-acks."""
    housekeeping_interval_ms: Annotated[int, Field(ge=100, le=600_000)] = 20_000
    """haHousekeepingInterval: drop a connection with no reads for this long."""
    max_time_slave_not_catchup_ms: Annotated[int, Field(ge=100, le=3_600_000)] = 15_000
    """haMaxTimeSlaveNotCatchup: shrink a slave out of the sync-state-set after this long behind."""
    slave_timeout_ms: Annotated[int, Field(ge=1, le=600_000)] = 3000
    """slaveTimeout: a put waits this long for replica acks, then answers FLUSH_SLAVE_TIMEOUT."""
    all_ack_in_sync_state_set: bool = False
    """allAckInSyncStateSet: wait for every sync-state-set member (else `in_sync_replicas`)."""
    in_sync_replicas: Annotated[int, Field(ge=1, le=64)] = 1
    """inSyncReplicas: acks a put waits for, master included, when not all-ack."""
    min_in_sync_replicas: Annotated[int, Field(ge=1, le=64)] = 1
    """minInSyncReplicas: refuse puts (IN_SYNC_REPLICAS_NOT_ENOUGH) below this many in-sync replicas."""
    async_learner: bool = False
    """asyncLearner: replicate but never join the sync-state-set."""
    sync_from_last_file: bool = False
    """syncFromLastFile: a replica copying its master's log from scratch (empty, rebuilt, or behind the master's
    retention) starts at the master's last segment instead of its first; it gets the master's head state there."""

    @model_validator(mode="after")
    def _no_counted_acks(self) -> HASettings:
        # RocketMQ accepts inSyncReplicas >= 2 without allAck, and it looks like a quorum mode but is
        # none: the confirm offset is then the max offset (consumers read what only the master has),
        # and the election ranks by heartbeat offsets up to one interval stale, so a write acked by
        # {1, 3} can be lost if 2 is elected after 1 dies.
        if self.in_sync_replicas >= 2 and not self.all_ack_in_sync_state_set:
            raise ValueError(
                f"ha.in_sync_replicas ({self.in_sync_replicas}) needs ha.all_ack_in_sync_state_set: counting "
                "acks without all-ack is not a quorum (consumers would read, and an election could lose, writes "
                "only some replicas hold). For sync replication use --all-ack with --min-in-sync-replicas 2; "
                "for async replication keep ha.in_sync_replicas at 1"
            )
        return self


class ControllerLinkSettings(BaseModel):
    """How the broker talks to the controller (RocketMQ BrokerConfig controller keys)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    addresses: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["127.0.0.1:9878"])
    """controllerAddr: controller API addresses (`;`-separated in env and flags)."""
    dns_lookup: bool = False
    """fetchControllerAddrByDnsLookup: each address is `name:port`, a DNS name that stands for every controller
    node it resolves to (on Kubernetes the controllers' headless Service), resolved again every
    `dns_lookup_interval_ms`; each resolved node gets heartbeats. A name that stops resolving keeps its last
    addresses (and is asked again every second)."""
    dns_lookup_interval_ms: Annotated[int, Field(ge=100, le=3_600_000)] = 120_000
    """brokergroup: how often `dns_lookup` resolves the names again (RocketMQ: every 2 minutes)."""
    heartbeat_interval_ms: Annotated[int, Field(ge=50, le=60_000)] = 1000
    """brokerHeartbeatInterval: each controller node gets a heartbeat this often, from its own task."""
    heartbeat_send_timeout_ms: Annotated[int, Field(ge=10, le=60_000)] | None = None
    """brokergroup: a heartbeat send (and a reconnect) to one node gives up after this long, so a hung
    node cannot hold its stream past the next beat; must be below the interval (default: 80 % of it)."""
    heartbeat_timeout_ms: Annotated[int, Field(ge=100, le=600_000)] = 10_000
    """controllerHeartBeatTimeoutMills, sent with every heartbeat."""
    sync_broker_metadata_period_ms: Annotated[int, Field(ge=50, le=600_000)] = 5000
    """syncBrokerMetadataPeriod: replica-info poll."""
    check_sync_state_set_period_ms: Annotated[int, Field(ge=50, le=600_000)] = 5000
    """checkSyncStateSetPeriod: the master's shrink check."""
    election_priority: Annotated[int, Field(ge=0, le=2**31 - 1)] = 2**31 - 1
    """brokerElectionPriority: lower is preferred among equally up-to-date replicas."""
    write_lease_ms: Annotated[int, Field(ge=100, le=600_000)] = 5000
    """brokergroup: a master acknowledges writes only while it has reached the controller leader
    within this long; an isolated old master stops acknowledging (closes RocketMQ #7017)."""
    leader_fallback_ms: Annotated[int, Field(ge=0, le=600_000)] = 3000
    """brokergroup: how long a controller leader that lost its quorum may still answer: the controllers'
    leaderFallbackTimeout, max(3 s, 2 x raft.max_timeout). Must be at least theirs."""
    broker_token: str | None = None
    """brokergroup: the group's broker token (the controllers' `api.broker_token`), sent as a bearer token
    with heartbeats, registration and sync-state-set changes. On Kubernetes from the Secret
    `<bg>-controller-auth` (key `brokerToken`); `brokergroup local` generates one."""
    admin_token: str | None = None
    """Token for controller admin calls (not needed by brokers today)."""

    @property
    def send_timeout_ms(self) -> int:
        """`heartbeat_send_timeout_ms`, or its default."""
        if self.heartbeat_send_timeout_ms is not None:
            return self.heartbeat_send_timeout_ms
        return self.heartbeat_interval_ms * 4 // 5

    @property
    def max_heartbeat_age_ms(self) -> int:
        """The oldest heartbeat (as the leader heard it) from which the write lease is renewed."""
        return self.heartbeat_timeout_ms - self.write_lease_ms - self.leader_fallback_ms

    @model_validator(mode="before")
    @classmethod
    def _split(cls, data: object) -> object:
        if isinstance(data, dict) and isinstance(data.get("addresses"), str):
            data = {**data, "addresses": [a.strip() for a in data["addresses"].split(";") if a.strip()]}
        return data

    @model_validator(mode="after")
    def _dns_names(self) -> ControllerLinkSettings:
        if self.dns_lookup:
            for address in self.addresses:
                split_address(address)  # "controller address 'x': expected name:port"
        return self

    @model_validator(mode="after")
    def _lease(self) -> ControllerLinkSettings:
        if not self.addresses:
            raise ValueError("controller.addresses: at least one controller address is needed")
        problem = lease_margin_problem(
            write_lease_ms=self.write_lease_ms,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            heartbeat_send_timeout_ms=self.send_timeout_ms,
            heartbeat_timeout_ms=self.heartbeat_timeout_ms,
            leader_fallback_ms=self.leader_fallback_ms,
        )
        if problem:
            raise ValueError(problem)
        return self


def lease_margin_problem(
    *,
    write_lease_ms: int,
    heartbeat_interval_ms: int,
    heartbeat_send_timeout_ms: int,
    heartbeat_timeout_ms: int,
    leader_fallback_ms: int,
) -> str | None:
    """Why these timings could let two masters acknowledge, or make healthy heartbeats miss the
    lease; None when they are safe.

    A master renews its lease (`write_lease_ms` from when it asked) only from a leader that heard its
    heartbeat at most `heartbeat_timeout - lease - fallback` ago. That leader declares the broker dead
    no earlier than `heartbeat_timeout` after that heartbeat, so the lease ends at least
    `leader_fallback_ms` (the time a deposed leader may still answer) before any election. Heartbeats
    arrive every interval, each send taking up to its timeout, so the age allowed must cover one
    interval plus one send, and one more interval so that a single lost beat does not drop the lease.
    """
    if heartbeat_send_timeout_ms >= heartbeat_interval_ms:
        return (
            f"controller.heartbeat_send_timeout_ms ({heartbeat_send_timeout_ms}) must be below "
            f"controller.heartbeat_interval_ms ({heartbeat_interval_ms}): a hung controller would otherwise "
            "hold a heartbeat stream past the next beat"
        )
    needed = write_lease_ms + leader_fallback_ms + 2 * heartbeat_interval_ms
    if needed > heartbeat_timeout_ms:
        return (
            f"controller.heartbeat_timeout_ms ({heartbeat_timeout_ms}) must be at least write_lease_ms "
            f"({write_lease_ms}) + leader_fallback_ms ({leader_fallback_ms}, how long a deposed controller "
            f"leader may still answer) + 2 x heartbeat_interval_ms ({heartbeat_interval_ms}) = {needed}: "
            "the lease is renewed only from a leader that heard a heartbeat within heartbeat_timeout - "
            f"write_lease - leader_fallback = {heartbeat_timeout_ms - write_lease_ms - leader_fallback_ms} ms, "
            "which must cover a lost heartbeat, or an isolated old master could still acknowledge writes "
            "after a new master is elected"
        )
    return None


class KubernetesSettings(BaseModel):
    """The broker's own Pod labels (`brokergroup.broker.podlabels`): off outside Kubernetes."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    enabled: bool = False
    """Patch this broker's Pod with its role on every role change (the operator sets it on in its pods)."""
    pod_name: str | None = None
    """This broker's Pod (the downward API's metadata.name)."""
    namespace: str | None = None
    """The Pod's namespace (the downward API's metadata.namespace)."""
    kubeconfig: Path | None = None
    """Credentials outside a pod; default: the pod's ServiceAccount (in-cluster)."""
    request_timeout_ms: Annotated[int, Field(ge=100, le=60_000)] = 2000
    """One patch may take this long; then it counts as a timeout and is retried."""

    @model_validator(mode="after")
    def _pod(self) -> KubernetesSettings:
        if self.enabled and not (self.pod_name and self.namespace):
            raise ValueError(
                "kubernetes.enabled needs kubernetes.pod_name and kubernetes.namespace (the downward API's "
                "metadata.name and metadata.namespace)"
            )
        return self


class BinarySettings(BaseModel):
    """The binary client port (`brokergroup.broker.binary_server`): produce, consume and consumer offsets in
    length-prefixed frames, beside the HTTP API. Clients find it through `binaryAddress` in `GET /v1/status`."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    enabled: bool = True
    """Serve the binary client protocol (the default protocol of `brokergroup produce/consume`)."""
    host: str | None = None
    """Interface it binds to (default: `host`, the HTTP API's)."""
    port: Annotated[int, Field(ge=0, le=65535)] = 0
    """Its port; 0 picks a free one (clients learn it from `GET /v1/status`). Fix it (e.g. 10909) where a
    firewall or a Service must name it."""
    max_in_flight: Annotated[int, Field(ge=1, le=65_536)] = 256
    """Requests one connection may have running; beyond, the broker stops reading that connection."""
    max_connections: Annotated[int, Field(ge=1, le=1_000_000)] = 1024
    """Open client connections; one more is answered with an ERROR (503, too many connections) and closed."""
    frame_timeout_ms: Annotated[int, Field(ge=100, le=600_000)] = 10_000
    """A frame begun must arrive in full within this long, else the connection is closed (slow-loris)."""
    write_timeout_ms: Annotated[int, Field(ge=100, le=600_000)] = 30_000
    """A client that leaves its replies unread (the 1 MiB reply buffer full) this long is disconnected."""


class BrokerSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="BG_BROKER_", env_nested_delimiter="__", extra="forbid", use_attribute_docstrings=True
    )
    cluster_name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._%|-]*$", max_length=128)] = "DefaultCluster"
    """brokerClusterName."""
    broker_name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._%|-]*$", max_length=128)] = "broker-a"
    """brokerName: the broker set this replica belongs to."""
    data_dir: Path = Path("data/broker")
    """Commit log, epoch file, identity files."""
    host: str = "127.0.0.1"
    """Interface the HTTP API binds to."""
    port: Annotated[int, Field(ge=0, le=65535)] = 10911
    """HTTP client/admin API port (listenPort)."""
    advertise_host: str | None = None
    """Host other processes use to reach this broker (default: `host`)."""
    log_level: str = "INFO"
    store: StoreSettings = Field(default_factory=StoreSettings)
    ha: HASettings = Field(default_factory=HASettings)
    controller: ControllerLinkSettings = Field(default_factory=ControllerLinkSettings)
    kubernetes: KubernetesSettings = Field(default_factory=KubernetesSettings)
    binary: BinarySettings = Field(default_factory=BinarySettings)

    @model_validator(mode="after")
    def _consistent(self) -> BrokerSettings:
        binds = (self.host, self.ha.host, self.binary.host)
        if self.advertise_host is None and any(h in ("0.0.0.0", "::") for h in binds):
            raise ValueError(
                "advertise_host is required when binding to all interfaces: other replicas and the controller "
                "must know an address that reaches this broker"
            )
        if self.ha.min_in_sync_replicas > max(self.ha.in_sync_replicas, 1) and not self.ha.all_ack_in_sync_state_set:
            raise ValueError(
                f"ha.min_in_sync_replicas ({self.ha.min_in_sync_replicas}) cannot exceed ha.in_sync_replicas "
                f"({self.ha.in_sync_replicas}) unless ha.all_ack_in_sync_state_set is true"
            )
        return self
