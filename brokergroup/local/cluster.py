"""A whole local cluster: a controller group plus S broker sets of R replicas, on 127.0.0.1.

`LocalCluster` is the in-process handle (`brokergroup demo` and `local up` hold one): it starts
the processes, records them in `cluster.json` (and the secrets in `auth.json`, mode 0600) and
waits until the cluster is up, reporting progress. A later process re-attaches through
cluster.json (`brokergroup local status` / `down`, see `brokergroup.local.attach`).

Folder layout:

    <dir>/cluster.json, auth.json
    <dir>/controllers/n<i>/ (journal, snapshot, events/*.jsonl) and n<i>.log
    <dir>/brokers/<name>-broker-<i>-<j>/ (commit log, epochs) and <name>-broker-<i>-<j>.log
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import re
import secrets
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp

from brokergroup.local import profiles, snapshot
from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup, settled
from brokergroup.local.processes import LocalProcess, stop_all, tail
from brokergroup.local.state import (
    AUTH_FILE,
    STATE_FILE,
    Auth,
    ClusterState,
    ProcessRecord,
    SetRecord,
    write_auth,
    write_state,
)

NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")


@dataclasses.dataclass(frozen=True)
class ClusterSpec:
    name: str = "local"
    controllers: int = 3
    sets: int = 2
    replicas: int = 3
    profile: profiles.TimingProfile = profiles.DEFAULT
    mode: profiles.ReplicationMode = profiles.SYNC
    log_level: str = "INFO"

    def validate(self) -> ClusterSpec:
        if not NAME.match(self.name):
            raise profiles.ProfileError(
                f"--name {self.name!r}: use 1-40 lower-case letters, digits and '-', starting with a letter or digit"
            )
        for what, value, top in (("controllers", self.controllers, 9), ("sets", self.sets, 16)):
            if not 1 <= value <= top:
                raise profiles.ProfileError(f"--{what} {value}: must be between 1 and {top}")
        if not 1 <= self.replicas <= 9:
            raise profiles.ProfileError(f"--replicas {self.replicas}: must be between 1 and 9")
        if self.replicas < self.mode.min_replicas:
            raise profiles.ProfileError(
                f"--mode {self.mode.name} needs at least {self.mode.min_replicas} replicas per set "
                f"(min-in-sync-replicas {self.mode.min_replicas}), got --replicas {self.replicas}; "
                "add replicas or use --mode async"
            )
        return self


class LocalCluster:
    def __init__(self, directory: Path, spec: ClusterSpec, *, auth: Auth | None = None) -> None:
        self.directory = directory.resolve()
        self.spec = spec.validate()
        self.auth = auth or Auth(
            raft_password=secrets.token_urlsafe(24),
            admin_token=secrets.token_urlsafe(24),
            broker_token=secrets.token_urlsafe(24),
        )
        self.created_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        log = ["--log-level", spec.log_level]
        self.controllers = ControllerGroup(
            self.directory / "controllers",
            size=spec.controllers,
            password=self.auth.raft_password,
            admin_token=self.auth.admin_token,
            broker_token=self.auth.broker_token,
            extra_args=[*spec.profile.controller_args(), *log],
        )
        self.sets = [
            BrokerSet(
                self.directory / "brokers",
                controllers=self.controllers.api_addresses,
                broker_name=f"{spec.name}-broker-{i}",
                replicas=spec.replicas,
                cluster_name=spec.name,
                extra_args=[*spec.profile.broker_args(), *spec.mode.broker_args(), *log],
                broker_token=self.auth.broker_token,
            )
            for i in range(spec.sets)
        ]

    # ---- processes -------------------------------------------------------------------------------------
    def start(self, *, detached: bool = False) -> None:
        """Start every process and write cluster.json. Detached processes run in their own session,
        so they outlive this one and a Ctrl-C in its terminal does not reach them."""
        self.directory.mkdir(parents=True, exist_ok=True)
        write_auth(self.directory, self.auth)
        for node in self.all_processes():
            node.detached = detached
        self.controllers.start_all()
        for brokers in self.sets:
            brokers.start_all()
        self.save()

    def save(self) -> Path:
        return write_state(self.directory, self.state())

    def stop(self) -> None:
        """SIGTERM the brokers, wait (SIGKILL what does not exit), then the controllers. Brokers
        first: they leave while the controllers still answer, so nothing waits on a dead peer
        (all at once takes several times longer)."""
        stop_all([n for s in self.sets for n in s.nodes])
        self.controllers.stop_all()

    def all_processes(self) -> list[LocalProcess]:
        return [*self.controllers.nodes, *(n for s in self.sets for n in s.nodes)]

    @property
    def event_log_dir(self) -> Path:
        return self.directory / "controllers"

    def state(self) -> ClusterState:
        def record(node: LocalProcess, api: str, extra_port: int) -> ProcessRecord:
            pid = node.proc.pid if node.proc is not None else None
            return ProcessRecord(node.name, api, str(node.data_dir), str(node.log_path), pid, extra_port)

        return ClusterState(
            name=self.spec.name,
            profile=self.spec.profile.name,
            mode=self.spec.mode.name,
            created_at=self.created_at,
            controllers=tuple(record(n, n.api, int(n.raft.rsplit(":", 1)[1])) for n in self.controllers.nodes),
            sets=tuple(
                SetRecord(s.broker_name, tuple(record(n, n.api, n.ha_port) for n in s.nodes)) for s in self.sets
            ),
        )

    # ---- readiness -------------------------------------------------------------------------------------
    async def wait_ready(
        self,
        *,
        timeout: float = 120.0,
        on_progress: Callable[[snapshot.Readiness], None] | None = None,
    ) -> snapshot.ClusterSnapshot:
        """Poll until every step of `snapshot.readiness` is done; fail early when a process exits."""
        deadline = time.monotonic() + timeout
        state = self.state()
        async with aiohttp.ClientSession(timeout=snapshot.STATUS_TIMEOUT) as session:
            while True:
                self._check_running()
                snap = await snapshot.take(state, session=session)
                ready = snapshot.readiness(snap, self.spec.replicas)
                if on_progress is not None:
                    on_progress(ready)
                if ready.done:
                    return snap
                if time.monotonic() > deadline:
                    raise TimeoutError(f"cluster not up within {timeout:.0f} s: waiting for {ready.waiting_for()}")
                if ready.completed == 0:
                    await settled(self.controllers, timeout=max(1.0, deadline - time.monotonic()))
                else:
                    await asyncio.sleep(0.1)

    def _check_running(self) -> None:
        for node in self.all_processes():
            if node.proc is not None and node.proc.poll() is not None:
                raise RuntimeError(
                    f"{node.name} exited with code {node.proc.returncode} while the cluster was starting; "
                    f"its log {node.log_path} ends with:\n{tail(node.log_path, 15)}"
                )


def purge(directory: Path) -> None:
    """Delete what a local cluster wrote, and the folder when nothing else is left in it."""
    for name in ("controllers", "brokers"):
        shutil.rmtree(directory / name, ignore_errors=True)
    for name in (STATE_FILE, AUTH_FILE, f".{STATE_FILE}.tmp"):
        (directory / name).unlink(missing_ok=True)
    if directory.exists() and not any(directory.iterdir()):
        directory.rmdir()
