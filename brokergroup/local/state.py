"""`cluster.json`: what a later `brokergroup local status` or `down` needs to re-attach to a cluster.

The file lives in the cluster's folder and holds the topology, every process's addresses,
pid and folders, the timing profile and the replication mode. The Raft password and the
admin token are not in it: they live in `auth.json` beside it, readable by the owner only.

Pure: (de)serialisation and lookups. Writing files is `write_state` / `write_auth`, reading is
`read_state` / `read_auth`; both are small and kept here with the format they write.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Final

FORMAT_VERSION: Final = 1
STATE_FILE: Final = "cluster.json"
AUTH_FILE: Final = "auth.json"


class StateError(Exception):
    """No usable cluster.json; the message says where and why."""


@dataclasses.dataclass(frozen=True)
class ProcessRecord:
    name: str
    api: str
    """HTTP API address host:port."""
    data_dir: str
    log: str
    pid: int | None
    extra_port: int
    """Raft port of a controller, HA port of a broker."""

    def wire(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "api": self.api,
            "dataDir": self.data_dir,
            "log": self.log,
            "pid": self.pid,
            "extraPort": self.extra_port,
        }

    @classmethod
    def parse(cls, data: dict[str, Any]) -> ProcessRecord:
        pid = data.get("pid")
        return cls(
            name=str(data["name"]),
            api=str(data["api"]),
            data_dir=str(data["dataDir"]),
            log=str(data["log"]),
            pid=int(pid) if pid is not None else None,
            extra_port=int(data["extraPort"]),
        )


@dataclasses.dataclass(frozen=True)
class SetRecord:
    name: str
    replicas: tuple[ProcessRecord, ...]

    def wire(self) -> dict[str, Any]:
        return {"name": self.name, "replicas": [r.wire() for r in self.replicas]}

    @classmethod
    def parse(cls, data: dict[str, Any]) -> SetRecord:
        return cls(name=str(data["name"]), replicas=tuple(ProcessRecord.parse(r) for r in data["replicas"]))


@dataclasses.dataclass(frozen=True)
class ClusterState:
    name: str
    """Cluster name; broker set i is `<name>-broker-<i>`."""
    profile: str
    mode: str
    controllers: tuple[ProcessRecord, ...]
    sets: tuple[SetRecord, ...]
    created_at: str
    """UTC ISO time of `up`."""

    @property
    def controller_addresses(self) -> list[str]:
        return [c.api for c in self.controllers]

    @property
    def set_names(self) -> list[str]:
        return [s.name for s in self.sets]

    def processes(self) -> list[ProcessRecord]:
        return [*self.controllers, *(r for s in self.sets for r in s.replicas)]

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes() if p.pid is not None]

    def wire(self) -> dict[str, Any]:
        return {
            "formatVersion": FORMAT_VERSION,
            "name": self.name,
            "profile": self.profile,
            "mode": self.mode,
            "createdAt": self.created_at,
            "authFile": AUTH_FILE,
            "controllers": [c.wire() for c in self.controllers],
            "sets": [s.wire() for s in self.sets],
        }

    @classmethod
    def parse(cls, data: dict[str, Any]) -> ClusterState:
        version = data.get("formatVersion")
        if version != FORMAT_VERSION:
            raise StateError(f"format version {version!r} is not {FORMAT_VERSION}")
        return cls(
            name=str(data["name"]),
            profile=str(data["profile"]),
            mode=str(data["mode"]),
            created_at=str(data["createdAt"]),
            controllers=tuple(ProcessRecord.parse(c) for c in data["controllers"]),
            sets=tuple(SetRecord.parse(s) for s in data["sets"]),
        )


@dataclasses.dataclass(frozen=True)
class Auth:
    raft_password: str
    admin_token: str
    broker_token: str | None = None
    """The brokers' credential at the controllers; None in clusters created before it existed."""

    def wire(self) -> dict[str, str]:
        out = {"raftPassword": self.raft_password, "adminToken": self.admin_token}
        return out | ({"brokerToken": self.broker_token} if self.broker_token else {})

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Auth:
        broker = data.get("brokerToken")
        return cls(
            raft_password=str(data["raftPassword"]),
            admin_token=str(data["adminToken"]),
            broker_token=str(broker) if broker else None,
        )


def write_state(directory: Path, state: ClusterState) -> Path:
    """Write cluster.json atomically (a reader never sees half a file)."""
    path = directory / STATE_FILE
    tmp = directory / f".{STATE_FILE}.tmp"
    tmp.write_text(json.dumps(state.wire(), indent=2) + "\n")
    tmp.replace(path)
    return path


def read_state(directory: Path) -> ClusterState:
    path = directory / STATE_FILE
    try:
        data = json.loads(path.read_text())
        return ClusterState.parse(data)
    except FileNotFoundError:
        raise StateError(f"{path} does not exist: no local cluster was started in {directory}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise StateError(f"{path} is not a usable cluster state: {exc}") from exc


def write_auth(directory: Path, auth: Auth) -> Path:
    """auth.json, created with mode 0600 so that only the owner can read the secrets."""
    path = directory / AUTH_FILE
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(auth.wire(), indent=2) + "\n")
    return path


def read_auth(directory: Path) -> Auth:
    path = directory / AUTH_FILE
    try:
        return Auth.parse(json.loads(path.read_text()))
    except FileNotFoundError:
        raise StateError(f"{path} does not exist") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise StateError(f"{path} is not usable: {exc}") from exc
