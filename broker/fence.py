"""The administrator's fence on one broker replica (CloudNativePG's fencing): a file in the data folder.

A fenced broker refuses writes (reads still answer, to inspect its data), is not Ready, does not
replicate (so its master drops it from the sync-state-set) and does not ask for an election. A fenced
master stays master: its set takes no writes until it is unfenced or another replica is elected.
The fence lives in the broker's own data folder (the pod's volume): it holds across restarts of the
pod and without the operator, until it is lifted (`kubectl brokergroup unfence`, or
`PUT /v1/admin/fence` with the group's broker token).
"""

from __future__ import annotations

import json
from pathlib import Path

from brokergroup.common.durable import fsync_path

FENCE_FILE = "fenced.json"


class FenceFile:
    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / FENCE_FILE

    def load(self) -> bool:
        return self.path.exists()

    def save(self, fenced: bool) -> None:
        """Durably set or lift the fence (the folder entry is fsynced too)."""
        if fenced:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temp = self.path.with_suffix(".tmp")
            temp.write_text(json.dumps({"fenced": True}) + "\n")
            fsync_path(temp)
            temp.replace(self.path)
        elif self.path.exists():
            self.path.unlink()
        else:
            return
        fsync_path(self.path.parent, directory=True)
