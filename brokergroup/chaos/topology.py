"""The cluster a chaos run attacks: 3 controllers and S broker sets of R replicas, real processes.

With `netns=True` each process runs in its own network namespace with its own 10.77.0.x address
(`brokergroup.chaos.netns`), so the nemesis can partition them; the harness's clients run in the
hub namespace (`clients()`). Without it, everything listens on 127.0.0.1 and only process faults
are possible.

With `power_fs=True` every process's data directory is a disk of the power-loss file system
(`brokergroup.chaos.powerfs`, mounted at `cluster/disks/<name>` while the run lasts), so the
nemesis can take away whatever a machine had not fsynced (`power_loss`). Process logs stay
outside it. At the end the file system is unmounted with everything made durable, and the
tree is left at the same paths.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import secrets
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp

from brokergroup.chaos.netns import Network, entered
from brokergroup.chaos.powerfs import MountedPowerFs
from brokergroup.controller.client import ControllerClient
from brokergroup.controller.codes import ControllerError
from brokergroup.local import profiles
from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup, settled
from brokergroup.local.processes import LocalProcess

CLUSTER_NAME = "chaos"


@dataclasses.dataclass(frozen=True)
class ClusterSpec:
    sets: int = 1
    replicas: int = 3
    controllers: int = 3
    mode: profiles.ReplicationMode = profiles.SYNC
    profile: profiles.TimingProfile = profiles.FAST
    netns: bool = False
    power_fs: bool = False
    """Data directories on the power-loss file system (needed by the `power-loss` fault)."""
    log_level: str = "INFO"
    retention: Retention | None = None
    """Brokers delete segments during the run (issue 18); None: the broker's default, no retention."""

    def broker_args(self) -> list[str]:
        store = self.retention.broker_args() if self.retention is not None else []
        return self.profile.broker_args() + self.mode.broker_args() + store + ["--log-level", self.log_level]


@dataclasses.dataclass(frozen=True)
class Retention:
    """Small segments and a short retention, so that every replica deletes segments while the run goes on."""

    segment_size: int = 4096
    """`store.segment_size`: the chaos messages are ~67-byte records, so a segment holds ~60."""
    retention_bytes: int | None = 2 * 4096
    """`store.retention_bytes`: each replica keeps about this much of its commit log."""
    retention_ms: int | None = None
    """`store.retention_ms`: segments last written longer ago than this go (at least 1000)."""
    check_interval_ms: int = 200
    """`store.retention_check_interval_ms`."""

    def __post_init__(self) -> None:
        if self.retention_bytes is None and self.retention_ms is None:
            raise ValueError("retention needs retention_bytes or retention_ms (or both)")

    def broker_args(self) -> list[str]:
        values = {"store.segment_size": self.segment_size, "store.retention_check_interval_ms": self.check_interval_ms}
        if self.retention_bytes is not None:
            values["store.retention_bytes"] = self.retention_bytes
        if self.retention_ms is not None:
            values["store.retention_ms"] = self.retention_ms
        return [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]

    def describe(self) -> dict[str, Any]:
        return {
            "segmentSize": self.segment_size,
            "retentionBytes": self.retention_bytes,
            "retentionMs": self.retention_ms,
            "checkIntervalMs": self.check_interval_ms,
        }


@dataclasses.dataclass(frozen=True)
class SetHealth:
    name: str
    master: str | None
    """The controller's master, when it also says it is master with a live write lease."""
    master_epoch: int
    sync_state_set: int
    following: int
    """Replicas (master included) that answer and know the current master epoch."""
    caught_up: bool
    """Every replica has the same max and confirm offsets (meaningful once writes stopped)."""

    def healthy(self, replicas: int, *, quiescent: bool) -> bool:
        complete = self.master is not None and self.sync_state_set == replicas and self.following == replicas
        return complete and (self.caught_up or not quiescent)


class ChaosCluster:
    def __init__(self, base_dir: Path, spec: ClusterSpec) -> None:
        self.spec = spec
        controller_names = [f"n{i}" for i in range(spec.controllers)]
        set_names = [f"bs{i}" for i in range(spec.sets)]
        replica_names = {s: [f"{s}-{j}" for j in range(spec.replicas)] for s in set_names}
        every = controller_names + [r for s in set_names for r in replica_names[s]]
        self.network = Network(every) if spec.netns else None

        def placement(names: list[str]) -> dict[str, Any]:
            if self.network is None:
                return {}
            return {
                "hosts": [self.network.address(n) for n in names],
                "netns": [self.network.namespace(n) for n in names],
            }

        log = ["--log-level", spec.log_level]
        self.broker_token = secrets.token_urlsafe(16)
        """The group's broker credential: the brokers carry it; the harness's forged requests do not."""
        self.controllers = ControllerGroup(
            base_dir / "controllers",
            size=spec.controllers,
            password=secrets.token_urlsafe(16),
            broker_token=self.broker_token,
            extra_args=spec.profile.controller_args() + log,
            **placement(controller_names),
        )
        self.sets = {
            name: BrokerSet(
                base_dir / "brokers",
                controllers=self.controllers.api_addresses,
                broker_name=name,
                replicas=spec.replicas,
                cluster_name=CLUSTER_NAME,
                broker_token=self.broker_token,
                extra_args=spec.broker_args(),
                **placement(replica_names[name]),
            )
            for name in set_names
        }
        self.disks_dir = base_dir / "disks"
        self.power_fs: MountedPowerFs | None = None
        if spec.power_fs:
            # The control socket's path must stay short (AF_UNIX): a private folder under /tmp.
            control = Path(tempfile.mkdtemp(prefix="bgpowerfs-")) / "control.sock"
            at_rest = base_dir / "disks.at-rest"
            self.power_fs = MountedPowerFs(at_rest, self.disks_dir, control, base_dir / "powerfs.log")
            for node in self.processes().values():
                node.data_dir = self.disks_dir / node.name

    # ---- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        if self.network is not None:
            self.network.create()
        if self.power_fs is not None:
            for node in self.processes().values():
                node.log_path.parent.mkdir(parents=True, exist_ok=True)
            self.power_fs.start()
        self.controllers.start_all()
        for brokers in self.sets.values():
            brokers.start_all()

    def stop(self) -> None:
        """Stop every process (SIGCONT first, so a stopped one can exit) and remove the network."""
        try:
            for brokers in self.sets.values():
                brokers.stop_all()
            self.controllers.stop_all()
        finally:
            try:
                self._unmount()
            finally:
                if self.network is not None:
                    self.network.destroy()

    def _unmount(self) -> None:
        """Unmount the power-loss file system (saving every file) and put the tree where it was."""
        if self.power_fs is None or self.power_fs.proc is None:
            return
        self.power_fs.stop()
        shutil.rmtree(self.power_fs.control.parent, ignore_errors=True)
        if self.power_fs.backing.exists() and not os.path.ismount(self.disks_dir):
            self.disks_dir.rmdir()
            self.power_fs.backing.rename(self.disks_dir)

    def __enter__(self) -> ChaosCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    @contextlib.contextmanager
    def clients(self) -> Iterator[None]:
        """Where the harness's sockets must be made: the hub namespace, or here without netns."""
        if self.network is None:
            yield
        else:
            with entered(self.network.hub):
                yield

    # ---- processes --------------------------------------------------------------------------------
    def processes(self) -> dict[str, LocalProcess]:
        out: dict[str, LocalProcess] = {n.name: n for n in self.controllers.nodes}
        for brokers in self.sets.values():
            out.update({n.name: n for n in brokers.nodes})
        return out

    def restart(self, name: str) -> None:
        for i, controller in enumerate(self.controllers.nodes):
            if controller.name == name:
                self.controllers.start(i)
                return
        for brokers in self.sets.values():
            for i, broker in enumerate(brokers.nodes):
                if broker.name == name:
                    brokers.start(i)
                    return
        raise KeyError(name)

    def power_loss(self, names: list[str]) -> dict[str, Any]:
        """Power loss of these machines at once: SIGKILL all (and reap them), then drop everything
        their disks had not made durable. Restart them with `restart`. Returns the file system's report."""
        if self.power_fs is None:
            raise RuntimeError("power loss needs the power-loss file system (ClusterSpec(power_fs=True))")
        processes = self.processes()
        for name in names:
            proc = processes[name].proc
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for name in names:
            processes[name].signal(signal.SIGKILL)  # waits until it is reaped
        return self.power_fs.client.drop(names)

    def controller_names(self) -> list[str]:
        return [n.name for n in self.controllers.nodes]

    def replica_names(self, broker_set: str) -> list[str]:
        return [n.name for n in self.sets[broker_set].nodes]

    def name_of_broker(self, broker_set: str, address: str | None) -> str | None:
        for node in self.sets[broker_set].nodes:
            if node.api == address:
                return node.name
        return None

    def event_logs(self) -> list[Path]:
        return sorted(p for n in self.controllers.nodes for p in (n.data_dir / "events").glob("*.jsonl"))

    # ---- state, as the controllers and brokers report it --------------------------------------
    def controller_client(self, timeout: float = 3.0) -> ControllerClient:
        return self.controllers.client(timeout=timeout)

    async def controller_leader(self, timeout: float = 30.0) -> str:
        return self.controllers.nodes[await self.controllers.leader(timeout=timeout)].name

    async def master_of(self, broker_set: str, controller: ControllerClient) -> str | None:
        try:
            info = await controller.replica_info(broker_set)
        except ControllerError:
            return None
        return self.name_of_broker(broker_set, info.master_address)

    async def set_health(
        self, broker_set: str, controller: ControllerClient, session: aiohttp.ClientSession
    ) -> SetHealth:
        info = await controller.replica_info(broker_set)
        brokers = self.sets[broker_set]
        master = self.name_of_broker(broker_set, info.master_address)
        ends: set[tuple[int, int]] = set()
        following, lease_ok = 0, False
        for i, node in enumerate(brokers.nodes):
            status = await brokers.status(i, session)
            if status is None:
                ends.add((-1, -1))
                continue
            store = status.get("store", {})
            ends.add((int(store.get("maxOffset", -1)), int(store.get("confirmOffset", -1))))
            following += int(status.get("masterEpoch") == info.master_epoch and not status.get("fenced"))
            if node.name == master:
                lease_ok = status.get("role") == "master" and status.get("writeLeaseRemainingMs", 0) > 0
        return SetHealth(
            name=broker_set,
            master=master if lease_ok else None,
            master_epoch=info.master_epoch,
            sync_state_set=len(info.sync_state_set),
            following=following,
            caught_up=len(ends) == 1,
        )

    async def wait_healthy(self, *, timeout: float, quiescent: bool = False) -> float:
        """Wait until a controller leader serves and every set has a master with a full sync-state-set
        that every replica follows (and, `quiescent`, with equal offsets everywhere: writes have
        stopped); returns how long it took. Raises TimeoutError naming what was missing."""
        started = time.monotonic()
        deadline = started + timeout
        last = "nothing checked yet"
        async with aiohttp.ClientSession() as session, self.controller_client() as controller:
            while time.monotonic() < deadline:
                try:
                    await settled(self.controllers, timeout=max(0.5, deadline - time.monotonic()))
                    health = [await self.set_health(name, controller, session) for name in self.sets]
                except (ControllerError, TimeoutError) as exc:
                    last = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                else:
                    sick = [h for h in health if not h.healthy(self.spec.replicas, quiescent=quiescent)]
                    if not sick:
                        return time.monotonic() - started
                    last = "; ".join(f"{h}" for h in sick)
                await asyncio.sleep(0.1)
        raise TimeoutError(f"cluster not healthy within {timeout:.0f} s: {last}")
