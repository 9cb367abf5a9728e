"""Request and response bodies of the controller's HTTP API (DESIGN §2.1).

One definition per message, shared by the pure core, the aiohttp API, the client and the
OpenAPI document. Field names on the wire are camelCase, as in RocketMQ's request headers;
Python code uses snake_case. Models are strict: a string where a number belongs, an unknown
field, or a missing required field is refused with a message that names the field.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

INT32_MAX = 2**31 - 1
TOKEN_HEADER = "X-Brokergroup-Token"  # noqa: S105 (a header name)
"""The header of the controller's credentials (admin or broker token), accepted next to `Authorization: Bearer`:
the API server's service proxy takes `Authorization` as the caller's Kubernetes credential and drops it, so an
operator outside the cluster sends the token here (the brokers' admin API uses the same header)."""

Name = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._%|-]*$")]
Address = Annotated[str, Field(min_length=3, max_length=255, pattern=r"^[^\s;]+:[0-9]{1,5}$")]
BrokerId = Annotated[int, Field(ge=1, le=2**53)]
Epoch = Annotated[int, Field(ge=0, le=INT32_MAX)]
Offset = Annotated[int, Field(ge=-1, le=2**63 - 1)]


class Message(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", strict=True, frozen=True)

    def wire(self) -> dict[str, Any]:
        """The JSON-ready camelCase dict of this message."""
        return self.model_dump(mode="json", by_alias=True)


# ---- requests -------------------------------------------------------------------------------


class NextIdRequest(Message):
    cluster_name: Name
    broker_name: Name


class ApplyIdRequest(Message):
    cluster_name: Name
    broker_name: Name
    applied_broker_id: BrokerId
    register_check_code: Annotated[str, Field(min_length=1, max_length=512)]
    """`<brokerAddress>;<epochMillis>`; the controller takes the address before the first `;`."""


class RegisterRequest(Message):
    cluster_name: Name
    broker_name: Name
    broker_id: BrokerId
    broker_address: Address


class HeartbeatRequest(Message):
    cluster_name: Name
    broker_name: Name
    broker_addr: Address
    broker_id: BrokerId
    """Required on the wire; the heartbeat table also refuses a missing id as RocketMQ does."""
    epoch: Annotated[int, Field(ge=-1, le=INT32_MAX)] = -1
    max_offset: Offset = -1
    confirm_offset: Offset = -1
    heartbeat_timeout_mills: Annotated[int, Field(ge=1, le=3_600_000)] | None = None
    election_priority: Annotated[int, Field(ge=0, le=INT32_MAX)] | None = None


class ElectMasterRequest(Message):
    cluster_name: Annotated[str, Field(max_length=128)] = ""
    broker_name: Name
    broker_id: Annotated[int, Field(ge=-1, le=2**53)] = -1
    """-1 means "controller-triggered": pick by policy, no requester."""
    designate_elect: bool = False


class AlterSyncStateSetRequest(Message):
    broker_name: Name
    master_broker_id: BrokerId
    master_epoch: Epoch
    sync_state_set: Annotated[list[BrokerId], Field(min_length=1, max_length=64)]
    sync_state_set_epoch: Epoch
    """The sync-state epoch the master knew when it made the proposal; committed only if current."""
    confirm_offset: Offset = -1
    """The master's confirm offset when it made the proposal (brokergroup; -1: not given). Each
    member being added must have reported at least this max offset in its last heartbeat."""


class SyncStateDataRequest(Message):
    broker_names: Annotated[list[Name], Field(min_length=1, max_length=1024)]


class CleanBrokerDataRequest(Message):
    cluster_name: Annotated[str, Field(max_length=128)] | None = None
    broker_name: Name
    broker_controller_ids_to_clean: Annotated[str, Field(max_length=4096)] | None = None
    """Broker ids separated by `;`, as mqadmin passes them: `"1;2;3"`."""
    is_clean_living_broker: bool = False
    force: bool = False
    """brokergroup: clean the ids even though that leaves replicas of the set outside any sync-state-set
    (the set becomes unknown to the controller; see `core.clean_broker_data`)."""


# ---- responses ------------------------------------------------------------------------------


class NextIdResponse(Message):
    cluster_name: str
    broker_name: str
    next_broker_id: int


class ApplyIdResponse(Message):
    cluster_name: str
    broker_name: str


class RegisterResponse(Message):
    master_broker_id: int | None
    master_address: str | None
    master_epoch: int | None
    sync_state_set_epoch: int
    sync_state_set: list[int]


class BrokerMemberGroup(Message):
    cluster: str
    broker_name: str
    broker_addrs: dict[str, str]
    """broker id (as a JSON object key) -> broker address"""


class ElectMasterResponse(Message):
    master_broker_id: int | None
    master_address: str | None
    master_epoch: int | None
    sync_state_set_epoch: int | None
    sync_state_set: list[int]
    broker_member_group: BrokerMemberGroup | None = None


class AlterSyncStateSetResponse(Message):
    sync_state_set: list[int]
    sync_state_set_epoch: int


class ReplicaInfoResponse(Message):
    master_broker_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set: list[int]
    sync_state_set_epoch: int
    heartbeat_age_ms: int | None = None
    """brokergroup: how long ago the answering leader last heard a heartbeat from the broker named
    by the `brokerId` query parameter; null when not asked or not heard within its timeout. A master
    renews its write lease only from an answer that says its heartbeats reach the leader."""


class ReplicaIdentity(Message):
    broker_name: str
    broker_id: int
    broker_address: str | None
    alive: bool


class ReplicasInfo(Message):
    master_broker_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set_epoch: int
    in_sync_replicas: list[ReplicaIdentity]
    not_in_sync_replicas: list[ReplicaIdentity]


class SyncStateDataResponse(Message):
    replicas_info_table: dict[str, ReplicasInfo]


class MetadataResponse(Message):
    group: str
    controller_leader_id: str | None
    controller_leader_address: str | None
    is_leader: bool
    peers: list[str]


class EmptyResponse(Message):
    pass


class ErrorResponse(BaseModel):
    """Every error: RocketMQ's code and name, and a remark naming what was wrong."""

    model_config = ConfigDict(extra="allow")
    code: int
    name: str
    remark: str
