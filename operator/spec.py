"""The BrokerGroup spec as the operator reads it (mirror of `crds/brokergroup.io_brokergroups.yaml`).

The apiserver validates and defaults the CR with the CRD's OpenAPI schema and CEL rules; this model
parses what it stored, with the same defaults (a unit test keeps the two in step), so that the
builders get typed values. A spec the model refuses (an older CRD without a rule, say) is a
`SpecError` naming the field: the operator reports it and changes nothing.
"""

from __future__ import annotations

import enum
import re
from decimal import ROUND_CEILING, Decimal
from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from brokergroup import images

QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"
DEFAULT_IMAGE = images.runtime_image()


class SpecError(ValueError):
    """The BrokerGroup spec cannot be used; the message names the field."""


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True, use_attribute_docstrings=True
    )


Quantity = Annotated[str, Field(pattern=QUANTITY)]

_SUFFIX: Final[dict[str, int | Decimal]] = {
    "": 1, "m": Decimal("0.001"), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}  # fmt: skip
SEGMENT_SIZE: Final = "64Mi"
"""The brokers' commit-log segment size (the broker's default `store.segment_size`; the operator sets none)."""
BROKER_MIN_FREE_DISK: Final = "128Mi"
"""The broker's default `store.min_free_disk_bytes`, used when `brokers.minFreeDisk` is unset."""


def quantity_bytes(quantity: str) -> int:
    """A quantity the CRD's pattern admits ("50Gi", "1.5G", "0") as whole bytes, rounded up (the
    kubernetes client's parse_quantity is not for pure cores; the pattern leaves nothing else to parse)."""
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([a-zA-Z]*)", quantity)
    if match is None or match.group(2) not in _SUFFIX:
        raise ValueError(f"{quantity!r} is not a quantity such as 50Gi")
    value = Decimal(match.group(1)) * _SUFFIX[match.group(2)]
    return int(value.to_integral_value(rounding=ROUND_CEILING))


class Resources(_Model):
    """Kubernetes ResourceRequirements (requests and limits of cpu and memory)."""

    requests: dict[str, Quantity | Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    limits: dict[str, Quantity | Annotated[int, Field(ge=0)]] = Field(default_factory=dict)

    def to_k8s(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        if self.requests:
            out["requests"] = {k: str(v) for k, v in sorted(self.requests.items())}
        if self.limits:
            out["limits"] = {k: str(v) for k, v in sorted(self.limits.items())}
        return out


class Storage(_Model):
    size: Quantity = "1Gi"
    """PersistentVolumeClaim size of each replica's data volume.
    May grow; it never shrinks below the claims' size (status.storage). The operator raises every claim's
    request and re-creates the StatefulSet with the new template, keeping its pods (the StorageClass must
    allow volume expansion; docs/operations.md, "Grow the data volumes")."""
    storage_class_name: str | None = None
    """StorageClass of the claims; unset means the cluster's default. Immutable."""


class BrokerStorage(Storage):
    size: Quantity = "10Gi"
    """PersistentVolumeClaim size of each broker replica's commit log.
    May grow; it never shrinks below the claims' size (status.storage). The operator raises every claim's
    request and re-creates the StatefulSet with the new template, keeping its pods (the StorageClass must
    allow volume expansion; docs/operations.md, "Grow the data volumes")."""


class Replication(enum.Enum):
    SYNC = "Sync"
    """A put is acknowledged once the master and every sync-state-set member have fsynced it: nothing
    acknowledged or consumed is lost to a kill -9 of any processes or a power loss of one or every machine."""
    ASYNC = "Async"
    """A put is acknowledged once the master has fsynced it; slaves follow in the background. A failover
    loses the acknowledged, and possibly already consumed, messages that no slave had received."""


class MasterUpdateStrategy(enum.Enum):
    UNSUPERVISED = "Unsupervised"
    """The roll elects an updated slave and restarts the old master by itself."""
    SUPERVISED = "Supervised"
    """The roll stops before the master's step until `brokergroup.io/approve-master-update` is set."""


class ControllerSpec(_Model):
    replicas: Annotated[int, Field(ge=1, le=7)] = 3
    """Raft nodes: 1, 3, 5 or 7. Immutable (the Raft membership is static)."""
    elect_unclean_master: bool = False
    """enableElectUncleanMaster: allow electing a replica outside the sync-state-set (may lose messages)."""
    heartbeat_timeout_seconds: Annotated[int, Field(ge=10, le=600)] = 10
    """A broker whose heartbeats stop for this long is inactive (controllerHeartBeatTimeoutMills). At least
    10: the brokers' write lease (5 s) + a deposed controller leader's fallback (3 s) + 2 heartbeat
    intervals (2 x 1 s)."""
    resources: Resources = Field(
        default_factory=lambda: Resources(requests={"cpu": "100m", "memory": "128Mi"}, limits={"memory": "256Mi"})
    )
    storage: Storage = Field(default_factory=lambda: Storage(size="1Gi"))

    @model_validator(mode="after")
    def _odd(self) -> ControllerSpec:
        if self.replicas % 2 == 0:
            raise ValueError(f"controller.replicas must be odd (1, 3, 5 or 7), not {self.replicas}")
        return self


class BrokersSpec(_Model):
    sets: Annotated[int, Field(ge=1, le=64)] = 1
    """Broker sets (RocketMQ brokerNames `<bg>-broker-<i>`). May grow; shrinks only while the removed
    sets hold no data."""
    replicas: Annotated[int, Field(ge=1, le=16)] = 3
    """Replicas per set: one master and replicas-1 slaves."""
    replication: Replication = Replication.SYNC
    min_in_sync_replicas: Annotated[int, Field(ge=1, le=16)] = 2
    """Sync mode: refuse puts while fewer replicas are in sync (master included)."""
    resources: Resources = Field(
        default_factory=lambda: Resources(requests={"cpu": "250m", "memory": "512Mi"}, limits={"memory": "1Gi"})
    )
    storage: BrokerStorage = Field(default_factory=BrokerStorage)
    master_update_strategy: MasterUpdateStrategy = MasterUpdateStrategy.UNSUPERVISED
    """How a roll of the broker pods (new image, resources or settings) treats each set's master, which rolls
    last."""
    retention_hours: Annotated[int, Field(ge=1, le=87_600)] | None = None
    """Delete whole commit-log segments last written longer ago than this many hours (RocketMQ fileReservedTime;
    only confirmed segments, never the one being written). Unset: keep everything."""
    retention_size: Quantity | None = None
    """Delete the oldest whole commit-log segments while a replica's commit log is bigger than this (the
    brokers' store.retention_bytes; only confirmed segments, never the one being written), e.g. 50Gi. At least
    one segment (64Mi); with one segment being written and minFreeDisk it must fit in storage.size. Unset: no
    size limit."""
    min_free_disk: Quantity | None = None
    """Refuse puts (SERVICE_NOT_AVAILABLE, "disk full") while a replica's volume has less free space than this;
    writing resumes by itself once retention or an operator frees space (the brokers' store.min_free_disk_bytes).
    0 turns the check off. Below storage.size. Unset: the brokers' default, 128Mi."""
    sync_from_last_file: bool = False
    """A replica copying its master's log from scratch (a new or wiped volume, or one behind the master's
    retention) starts at the master's last segment instead of its first (RocketMQ syncFromLastFile, the brokers'
    ha.sync_from_last_file): ready sooner, with less history for consumers reading from it."""

    @model_validator(mode="after")
    def _disk(self) -> BrokersSpec:
        # The CRD's CEL rules on spec.brokers say the same.
        size = quantity_bytes(self.storage.size)
        free = quantity_bytes(self.min_free_disk if self.min_free_disk is not None else BROKER_MIN_FREE_DISK)
        if self.min_free_disk is not None and free >= size:
            raise ValueError(
                f"brokers.minFreeDisk ({self.min_free_disk}) must be below brokers.storage.size ({self.storage.size})"
            )
        if self.retention_size is not None:
            kept = quantity_bytes(self.retention_size)
            if kept < quantity_bytes(SEGMENT_SIZE):
                raise ValueError(
                    f"brokers.retentionSize ({self.retention_size}) must be at least one commit-log segment "
                    f"({SEGMENT_SIZE}): retention deletes whole segments and never the one being written"
                )
            if kept + quantity_bytes(SEGMENT_SIZE) + free > size:
                raise ValueError(
                    f"brokers.retentionSize ({self.retention_size}) + one segment being written ({SEGMENT_SIZE}) + "
                    f"brokers.minFreeDisk ({self.min_free_disk or BROKER_MIN_FREE_DISK}) must fit in "
                    f"brokers.storage.size ({self.storage.size}): the disk would be full before retention deletes"
                )
        return self

    @model_validator(mode="after")
    def _in_sync(self) -> BrokersSpec:
        # Async acks never wait for slaves (the minimum becomes 1), so only Sync is checked.
        if self.replication is Replication.SYNC and self.min_in_sync_replicas > self.replicas:
            raise ValueError(
                f"brokers.minInSyncReplicas ({self.min_in_sync_replicas}) cannot exceed brokers.replicas "
                f"({self.replicas}) in Sync replication"
            )
        return self


class PodDisruptionBudgetSpec(_Model):
    enabled: bool = True


class ImagePullPolicy(enum.Enum):
    ALWAYS = "Always"
    IF_NOT_PRESENT = "IfNotPresent"
    NEVER = "Never"


class BrokerGroupSpec(_Model):
    image: Annotated[str, Field(min_length=1)] = DEFAULT_IMAGE
    """Container image of the controllers and brokers (one image runs `brokergroup`)."""
    image_pull_policy: ImagePullPolicy = ImagePullPolicy.IF_NOT_PRESENT
    controller: ControllerSpec = Field(default_factory=ControllerSpec)
    brokers: BrokersSpec = Field(default_factory=BrokersSpec)
    pod_disruption_budget: PodDisruptionBudgetSpec = Field(default_factory=PodDisruptionBudgetSpec)

    @model_validator(mode="after")
    def _in_sync_mode(self) -> BrokerGroupSpec:
        if self.brokers.replication is Replication.ASYNC and self.brokers.min_in_sync_replicas > 1:
            # Async acks never wait for slaves; a minimum above 1 would refuse every put.
            return self.model_copy(update={"brokers": self.brokers.model_copy(update={"min_in_sync_replicas": 1})})
        return self


def _is_type_tag(part: object) -> bool:
    """pydantic puts the union member tried (`constrained-str`, `int`) into error locations."""
    return isinstance(part, str) and (part in ("int", "str") or "-" in part or "[" in part)


def parse_spec(spec: dict[str, Any] | Any, *, default_image: str = DEFAULT_IMAGE) -> BrokerGroupSpec:
    """Parse a stored spec; raise `SpecError` naming the first bad field.

    `spec.image` has no default in the CRD: a group that names none runs `default_image`, the
    operator's `image` setting (the chart sets it to the operator's own image), so upgrading the
    operator upgrades those groups, master last."""
    try:
        return BrokerGroupSpec.model_validate({"image": default_image, **dict(spec)})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"] if not _is_type_tag(p)) or "spec"
        raise SpecError(f"spec.{where}: {first['msg']}") from exc
