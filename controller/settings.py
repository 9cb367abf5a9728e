"""Settings of one controller node (`brokergroup controller`).

Loaded by `brokergroup.common.settings.load_settings` from a TOML file, `BG_CONTROLLER_*`
environment variables (groups split by `__`, e.g. `BG_CONTROLLER_RAFT__PASSWORD`) and flags.
`rocketmq` holds RocketMQ's `ControllerConfig` keys under their RocketMQ names; those are the
keys `GET/POST /v1/config` shows and changes at run time, node-locally as in RocketMQ.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

ADDRESS = re.compile(r"^[A-Za-z0-9.\-\[\]:]+:[0-9]{1,5}$")


class Peer(BaseModel):
    """One controller node: `<id>=<raft host:port>,<api host:port>`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=63)]
    raft: str
    api: str

    @field_validator("raft", "api")
    @classmethod
    def _address(cls, value: str) -> str:
        if not ADDRESS.match(value):
            raise ValueError(f"{value!r} is not host:port")
        return value

    @classmethod
    def parse(cls, text: str) -> Peer:
        ident, sep, rest = text.partition("=")
        raft, comma, api = rest.partition(",")
        if not sep or not comma:
            raise ValueError(f"peer {text!r} must look like n0=127.0.0.1:9877,127.0.0.1:9878")
        return cls(id=ident.strip(), raft=raft.strip(), api=api.strip())

    def __str__(self) -> str:
        return f"{self.id}={self.raft},{self.api}"


def parse_peers(value: Any) -> Any:
    if isinstance(value, str):
        return [Peer.parse(p) for p in value.split(";") if p.strip()]
    if isinstance(value, list):
        return [Peer.parse(p) if isinstance(p, str) else p for p in value]
    return value


class RaftSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    password: str | None = None
    """Shared secret of the Raft group. pysyncobj unpickles what arrives on its port, so a node
    refuses to start without one unless `insecure_dev` is set."""
    insecure_dev: bool = False
    """Allow a Raft port without a password (local development only)."""
    bind_host: str | None = None
    """Interface to bind the Raft port to (default: the host of this node's raft address)."""
    min_timeout: float = 0.4
    """Election timeout lower bound, seconds (pysyncobj raftMinTimeout)."""
    max_timeout: float = 1.4
    """Election timeout upper bound, seconds (pysyncobj raftMaxTimeout)."""
    append_entries_period: float = 0.1
    """Leader heartbeat period, seconds."""
    commit_timeout: float = 5.0
    """How long a request waits for its events to commit (RocketMQ waits 5 s)."""

    @model_validator(mode="after")
    def _timing(self) -> RaftSettings:
        if self.min_timeout <= 3 * self.append_entries_period:
            raise ValueError(
                f"raft.min_timeout ({self.min_timeout} s) must exceed 3 x raft.append_entries_period "
                f"({self.append_entries_period} s)"
            )
        if self.max_timeout <= self.min_timeout:
            raise ValueError(f"raft.max_timeout ({self.max_timeout} s) must exceed raft.min_timeout")
        if self.commit_timeout <= 0:
            raise ValueError("raft.commit_timeout must be positive")
        return self


class ApiSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    host: str = "127.0.0.1"
    """Interface the HTTP API binds to."""
    port: Annotated[int, Field(ge=0, le=65535)] = 9878
    """HTTP API port (0 picks a free one; only for tests)."""
    admin_token: str | None = None
    """Bearer token required by elect-master with designateElect, clean-broker-data and config
    updates. On Kubernetes it comes from the Secret `<bg>-controller-auth`."""
    broker_token: str | None = None
    """Bearer token of this group's brokers, required by every request that feeds an election or
    changes a sync-state-set: heartbeats (POST and stream), register, apply-id, alter-sync-state-set
    and broker-triggered elect-master (the admin token is accepted too). Without it anyone who
    reaches the API could make a lagging replica electable. On Kubernetes it comes from the Secret
    `<bg>-controller-auth` (key `brokerToken`); `brokergroup local` generates one."""
    forward_timeout: float = 6.0
    """Seconds a follower waits for the leader when forwarding a request."""
    leader_wait: Annotated[float, Field(gt=0, le=60)] = 3.0
    """Seconds a request waits for a serving leader while none is known (a Raft election, or a new
    leader applying its barrier) before it is answered CONTROLLER_NOT_LEADER."""
    brokers_leader_fallback_ms: Annotated[int, Field(ge=0, le=600_000)] = 3000
    """The deposed-leader fallback the brokers' write lease allows for (their
    `controller.leader_fallback_ms`, default 3000). This node refuses to start when its own
    leaderFallbackTimeout, max(3 s, 2 x raft.max_timeout), is longer: a deposed leader could then
    still renew a master's lease after a new leader elected another master."""


class RocketMQConfig(BaseModel):
    """RocketMQ `ControllerConfig` keys, node-local and changeable through `POST /v1/config`."""

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, use_attribute_docstrings=True
    )
    scan_not_active_broker_interval: Annotated[int, Field(ge=50, le=600_000)] = 5000
    """Heartbeat expiry scan period, ms."""
    scan_inactive_master_interval: Annotated[int, Field(ge=50, le=600_000)] = 5000
    """Leader's scan for broker sets whose master is inactive, ms."""
    elect_master_max_retry_count: Annotated[int, Field(ge=1, le=100)] = 3
    """Attempts of a controller-triggered election."""
    enable_elect_unclean_master: bool = False
    """Allow electing a replica outside the sync-state-set (may lose messages)."""
    notify_broker_role_changed: bool = True
    """Push role changes to brokers (`POST /v1/role-change`)."""
    scan_warmup_interval: Annotated[int, Field(ge=0, le=600_000)] = 3000
    """brokergroup: after becoming leader, wait this long (ms) for brokers' heartbeats before
    the inactive-master scan may trigger elections."""
    config_black_list: str = "configBlackList;configStorePath"
    """Keys that cannot be changed at run time (`;`-separated)."""
    config_store_path: str = ""
    """Not used by brokergroup; kept so that RocketMQ's default black list means the same."""

    def black_list(self) -> set[str]:
        return {k for k in self.config_black_list.split(";") if k} | {"configBlackList", "rocketmqHome"}


class ControllerSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="BG_CONTROLLER_", env_nested_delimiter="__", extra="forbid", use_attribute_docstrings=True
    )
    node_id: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=63)] = "n0"
    """This node's id; must be one of `peers`."""
    group: str = "brokergroup-controller"
    """Controller group name, shown by get-controller-metadata."""
    peers: Annotated[list[Peer], NoDecode] = Field(
        default_factory=lambda: [Peer(id="n0", raft="127.0.0.1:9877", api="127.0.0.1:9878")]
    )
    """Every node of the group, this one included: `n0=raft_host:port,api_host:port;n1=...`."""
    data_dir: Path = Path("data/controller")
    """Raft journal, snapshots and event log live here."""
    event_log_max_bytes: Annotated[int, Field(ge=4096)] = 64 * 1024 * 1024
    """Roll the event-log file after this many bytes."""
    log_level: str = "INFO"
    raft: RaftSettings = Field(default_factory=RaftSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    rocketmq: RocketMQConfig = Field(default_factory=RocketMQConfig)

    _parse_peers = field_validator("peers", mode="before")(parse_peers)

    @model_validator(mode="after")
    def _consistent(self) -> ControllerSettings:
        ids = [p.id for p in self.peers]
        if len(set(ids)) != len(ids):
            raise ValueError(f"peers: duplicate node ids in {ids}")
        if self.node_id not in ids:
            raise ValueError(f"node_id {self.node_id!r} is not one of the peers {ids}")
        if not self.raft.password and not self.raft.insecure_dev:
            raise ValueError(
                "raft.password is required: pysyncobj unpickles what arrives on the Raft port, so an "
                "open port runs anyone's code. Set BG_CONTROLLER_RAFT__PASSWORD, or pass --insecure-dev "
                "for local development"
            )
        fallback_ms = round(self.leader_fallback_timeout * 1000)
        if fallback_ms > self.api.brokers_leader_fallback_ms:
            raise ValueError(
                f"this node's leaderFallbackTimeout, max(3 s, 2 x raft.max_timeout ({self.raft.max_timeout} s)) = "
                f"{fallback_ms} ms, exceeds api.brokers_leader_fallback_ms ({self.api.brokers_leader_fallback_ms}): "
                "a leader that lost its quorum answers for that long, so the brokers' write-lease margin must "
                "cover it. Raise every broker's controller.leader_fallback_ms (and controller.heartbeat_timeout_ms "
                "with it, see their settings check) to at least "
                f"{fallback_ms}, then set api.brokers_leader_fallback_ms to match"
            )
        return self

    @property
    def leader_fallback_timeout(self) -> float:
        """Seconds a leader that lost its quorum keeps answering (pysyncobj leaderFallbackTimeout)."""
        return max(3.0, 2 * self.raft.max_timeout)

    @property
    def me(self) -> Peer:
        return next(p for p in self.peers if p.id == self.node_id)

    @property
    def others(self) -> list[Peer]:
        return [p for p in self.peers if p.id != self.node_id]
