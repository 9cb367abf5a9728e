"""One replica's write permission (RocketMQ's brokerPermission / `mqadmin wipeWritePerm`): a file in the data folder.

A broker whose write permission is wiped is read-only: it refuses every produce (HTTP and binary) with
`NO_PERMISSION`, and nothing of it reaches the commit log, while everything else goes on as before:
consumes, consumer-offset commits and reads, replication, heartbeats, elections and readiness (the
master Service keeps serving consumers). That is how a broker set is drained before it is removed:
wipe its write permission, wait until every consumer group's lag is 0 (`GET /v1/consumer-lag`), remove it.

The permission is per replica and lives in the replica's own data folder (the pod's volume), so it
holds across restarts (kill -9 too) until it is restored (`PUT /v1/admin/write-permission` with
`{"writable": true}` and the group's broker token). A slave can be made read-only too: elected master
later, it refuses produces as well.

The file (`write-permission.json`, `{"writable": false}`) exists only while the permission is wiped: it
is replaced durably (tmp, fsync, rename, folder fsync) when wiped and removed (folder fsynced) when
restored. A file that cannot be read as such keeps the broker read-only (a decommission in progress must
not take writes it will later drop) and is reported in the log; restoring the permission replaces it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from brokergroup.common.durable import durable_mkdir, fsync_path, replace_durably

logger = logging.getLogger(__name__)

PERMISSION_FILE = "write-permission.json"
NO_PERMISSION = "NO_PERMISSION"
"""The produce answer's status (RocketMQ ResponseCode NO_PERMISSION, 16), with HTTP 503."""
READ_ONLY_REMARK = (
    "the broker's write permission is wiped (read-only, PUT /v1/admin/write-permission); nothing was written"
)
"""The produce answer's remark."""


class PermissionFile:
    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / PERMISSION_FILE

    def load(self) -> bool:
        """True when writable: no file, or a file saying so. A leftover `.tmp` (a torn save) is removed."""
        self.path.with_name(self.path.name + ".tmp").unlink(missing_ok=True)
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return True
        parsed = parse(raw)
        if isinstance(parsed, bool):
            return parsed
        logger.error(
            "%s: %s; the broker stays read-only until PUT /v1/admin/write-permission sets it again", self.path, parsed
        )
        return False

    def save(self, writable: bool) -> None:
        """Durably wipe (False) or restore (True) the write permission."""
        if not writable:
            durable_mkdir(self.path.parent)
            replace_durably(self.path, encode(writable=False))
        elif self.path.exists():
            self.path.unlink()
            fsync_path(self.path.parent, directory=True)


def encode(*, writable: bool) -> bytes:
    return (json.dumps({"writable": writable}) + "\n").encode()


def parse(raw: bytes) -> bool | str:
    """The file's `writable` value, or what is wrong with it."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return "not JSON"
    if not isinstance(data, dict) or set(data) != {"writable"} or not isinstance(data["writable"], bool):
        return 'not {"writable": true|false}'
    writable: bool = data["writable"]
    return writable
