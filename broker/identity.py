"""The broker's persistent controller id (RocketMQ BrokerMetadata / TempBrokerMetadata).

Registration is a three-step handshake with the controller (next-id, apply-id, register),
and a crash can stop it anywhere. Two small files make it resumable:

- `brokerIdentity-temp`: `cluster#broker#id#<address>;<millis>` written after next-id and before
  apply-id, so a retry applies the same id with the same check code (the controller treats
  that as an idempotent retry);
- `brokerIdentity`: `cluster#broker#id`, written once apply-id succeeded; the temp file is
  then removed.

Writes are atomic (temp file, fsync, rename) and keep the previous content as `.bak`.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from brokergroup.broker.errors import BrokerError
from brokergroup.common.durable import durable_mkdir, fsync_path


class IdentityError(BrokerError):
    """An identity file that cannot be used; the broker stays fenced."""


@dataclasses.dataclass(frozen=True)
class Identity:
    cluster_name: str
    broker_name: str
    broker_id: int
    register_check_code: str | None = None
    """Only in the temp file: `<address>;<millis>`."""


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    if path.exists():
        path.replace(path.with_name(path.name + ".bak"))
    tmp.replace(path)
    fsync_path(path.parent, directory=True)


def _parse(text: str, *, temp: bool, path: Path) -> Identity:
    parts = text.strip().split("#")
    if len(parts) != (4 if temp else 3):
        raise IdentityError(f"{path}: expected {'cluster#broker#id#checkcode' if temp else 'cluster#broker#id'}")
    try:
        broker_id = int(parts[2])
    except ValueError as exc:
        raise IdentityError(f"{path}: broker id {parts[2]!r} is not a number") from exc
    return Identity(parts[0], parts[1], broker_id, parts[3] if temp else None)


def _read(path: Path, *, temp: bool) -> Identity | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise IdentityError(f"{path}: not a text file ({exc.reason})") from exc
    return _parse(text, temp=temp, path=path)


class IdentityFiles:
    def __init__(self, data_dir: Path) -> None:
        durable_mkdir(data_dir)
        self.final = data_dir / "brokerIdentity"
        self.temp = data_dir / "brokerIdentity-temp"

    def load(self) -> Identity | None:
        return _read(self.final, temp=False)

    def load_temp(self) -> Identity | None:
        return _read(self.temp, temp=True)

    def save_temp(self, identity: Identity) -> None:
        _write(
            self.temp,
            f"{identity.cluster_name}#{identity.broker_name}#{identity.broker_id}#{identity.register_check_code}",
        )

    def save_final(self, identity: Identity) -> None:
        _write(self.final, f"{identity.cluster_name}#{identity.broker_name}#{identity.broker_id}")
        self.drop_temp()

    def drop_temp(self) -> None:
        """Remove the temp file durably: the folder is fsynced so that it cannot come back after a power loss."""
        if self.temp.exists():
            self.temp.unlink(missing_ok=True)
            fsync_path(self.temp.parent, directory=True)


def check_matches(identity: Identity, *, cluster_name: str, broker_name: str, path: Path) -> None:
    """RocketMQ checkMetadataValid: a file from another set must not be reused."""
    if (identity.cluster_name, identity.broker_name) != (cluster_name, broker_name):
        raise IdentityError(
            f"{path} belongs to {identity.cluster_name}/{identity.broker_name}, but this broker is configured as "
            f"{cluster_name}/{broker_name}; refusing to start (move the data directory or fix the settings)"
        )
