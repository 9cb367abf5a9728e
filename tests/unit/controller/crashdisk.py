"""A `journal.Disk` in memory that knows what is synced, and loses the rest on `crash()`.

Like LazyFS or Pebble's strict MemFS, at the journal's seam: every write and truncate since a
file's last `sync` is pending; a crash keeps the synced image and applies an arbitrary subset of
the pending operations, in order, the last one applied possibly torn (a prefix of its bytes).
`replace` is durable and atomic when it returns (it syncs the temporary and the directory), so a
crash sees either the old or the new file.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class CrashDisk:
    current: dict[str, bytearray] = field(default_factory=dict)
    durable: dict[str, bytes] = field(default_factory=dict)
    pending: dict[str, list[tuple[str, int, bytes]]] = field(default_factory=dict)
    syncs: int = 0

    def read(self, name: str) -> bytes | None:
        data = self.current.get(name)
        return None if data is None else bytes(data)

    def _file(self, name: str) -> bytearray:
        if name not in self.current:
            self.current[name] = bytearray()
            self.pending.setdefault(name, [])
        return self.current[name]

    def write(self, name: str, offset: int, data: bytes) -> None:
        f = self._file(name)
        if len(f) < offset:
            f.extend(b"\0" * (offset - len(f)))
        f[offset : offset + len(data)] = data
        self.pending.setdefault(name, []).append(("write", offset, bytes(data)))

    def truncate(self, name: str, size: int) -> None:
        f = self._file(name)
        del f[size:]
        self.pending.setdefault(name, []).append(("truncate", size, b""))

    def sync(self, name: str) -> None:
        self.durable[name] = bytes(self._file(name))
        self.pending[name] = []
        self.syncs += 1

    def replace(self, name: str, data: bytes) -> None:
        self.current[name] = bytearray(data)
        self.durable[name] = bytes(data)
        self.pending[name] = []
        self.syncs += 1

    def sync_dir(self) -> None:
        pass

    def crash(self, rng: random.Random) -> CrashDisk:
        """The disk after a power loss now: synced data, plus some of the unsynced writes, maybe torn."""
        after = CrashDisk()
        for name in set(self.current) | set(self.durable):
            if name not in self.durable and not self.pending.get(name):
                continue
            image = bytearray(self.durable.get(name, b""))
            ops = self.pending.get(name, [])
            for i, (kind, arg, data) in enumerate(ops):
                if rng.random() < 0.5:
                    continue
                if kind == "truncate":
                    del image[arg:]
                    continue
                if i == len(ops) - 1 or rng.random() < 0.3:
                    data = data[: rng.randint(0, len(data))]
                if len(image) < arg:
                    image.extend(b"\0" * (arg - len(image)))
                image[arg : arg + len(data)] = data
            after.current[name] = image
            after.durable[name] = bytes(image)
        return after
