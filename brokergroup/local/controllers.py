"""A controller group as local processes: start, kill -9, SIGSTOP, restart, find the leader.

Used by `brokergroup demo`, `brokergroup bench controller` and the integration tests, so all
three exercise the same real processes: `python -m brokergroup.cli controller ...`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import secrets
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from brokergroup.controller.client import ControllerClient
from brokergroup.controller.codes import ControllerError
from brokergroup.local.ports import free_ports
from brokergroup.local.processes import LocalProcess, stop_all, tail

RAFT_PORT = 9877
API_PORT = 9878


@dataclasses.dataclass
class ControllerProcess(LocalProcess):
    raft: str = ""
    api: str = ""

    @property
    def node_id(self) -> str:
        return self.name


class ControllerGroup:
    def __init__(
        self,
        base_dir: Path,
        *,
        size: int = 3,
        password: str | None = None,
        admin_token: str | None = None,
        broker_token: str | None = None,
        extra_args: list[str] | None = None,
        host: str = "127.0.0.1",
        hosts: list[str] | None = None,
        netns: list[str] | None = None,
    ) -> None:
        """`hosts` (one address per node, e.g. in its own network namespace named by `netns`)
        gives every node the default ports on its own address instead of free ports on `host`."""
        self.base_dir = base_dir
        self.password = password or secrets.token_urlsafe(24)
        self.admin_token = admin_token
        self.broker_token = broker_token
        """The brokers' credential (`api.broker_token`); None leaves broker requests open."""
        self.extra_args = extra_args or []
        if hosts is not None:
            if len(hosts) != size or (netns is not None and len(netns) != size):
                raise ValueError(f"give one host (and one namespace) per controller node: {size}")
            addresses = [(f"{h}:{RAFT_PORT}", f"{h}:{API_PORT}") for h in hosts]
        else:
            ports = free_ports(2 * size, host)
            addresses = [(f"{host}:{ports[2 * i]}", f"{host}:{ports[2 * i + 1]}") for i in range(size)]
        self.nodes = [
            ControllerProcess(
                name=f"n{i}",
                raft=raft,
                api=api,
                data_dir=base_dir / f"n{i}",
                log_path=base_dir / f"n{i}.log",
                netns=netns[i] if netns else None,
            )
            for i, (raft, api) in enumerate(addresses)
        ]

    @property
    def peers(self) -> str:
        return ";".join(f"{n.node_id}={n.raft},{n.api}" for n in self.nodes)

    @property
    def api_addresses(self) -> list[str]:
        return [n.api for n in self.nodes]

    def command(self, node: ControllerProcess) -> list[str]:
        return [
            sys.executable,
            "-m",
            "brokergroup.cli",
            "controller",
            "--node-id",
            node.node_id,
            "--peers",
            self.peers,
            "--data-dir",
            str(node.data_dir),
            "--api-host",
            node.api.rsplit(":", 1)[0],
            "--api-port",
            node.api.rsplit(":", 1)[1],
            *self.extra_args,
        ]

    def start(self, index: int) -> None:
        node = self.nodes[index]
        env = {"BG_CONTROLLER_RAFT__PASSWORD": self.password}
        if self.admin_token:
            env["BG_CONTROLLER_API__ADMIN_TOKEN"] = self.admin_token
        if self.broker_token:
            env["BG_CONTROLLER_API__BROKER_TOKEN"] = self.broker_token
        node.spawn(self.command(node), env)

    def start_all(self) -> None:
        for i in range(len(self.nodes)):
            self.start(i)

    def signal(self, index: int, sig: signal.Signals) -> None:
        self.nodes[index].signal(sig)

    def kill(self, index: int) -> None:
        self.signal(index, signal.SIGKILL)

    def stop_all(self) -> None:
        stop_all(list(self.nodes))

    def client(self, **kwargs: object) -> ControllerClient:
        return ControllerClient(self.api_addresses, token=self.admin_token, **kwargs)  # type: ignore[arg-type]

    async def leader(self, *, timeout: float = 30.0, exclude: set[int] | None = None) -> int:
        """Index of the node serving as leader, once one does; polls each running node's status."""
        deadline = time.monotonic() + timeout
        async with self.client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                for i, node in enumerate(self.nodes):
                    if not node.running or (exclude and i in exclude):
                        continue
                    try:
                        status = await client.status(address=node.api)
                    except ControllerError:
                        continue
                    if status.get("serving"):
                        return i
                await asyncio.sleep(0.05)
        logs = "\n".join(f"--- {n.node_id}\n{tail(n.log_path)}" for n in self.nodes)
        raise TimeoutError(f"no controller leader within {timeout} s\n{logs}")


async def settled(group: ControllerGroup, *, timeout: float = 30.0) -> int:
    """Wait until a leader serves and every running node knows which node it is."""
    deadline = time.monotonic() + timeout
    leader = await group.leader(timeout=timeout)
    async with group.client(timeout=2.0) as client:
        while time.monotonic() < deadline:
            known = set()
            for node in group.nodes:
                if node.running:
                    try:
                        known.add((await client.status(address=node.api)).get("leaderId"))
                    except ControllerError:
                        known.add(None)
            if known == {group.nodes[leader].node_id}:
                return leader
            leader = await group.leader(timeout=max(0.1, deadline - time.monotonic()))
            await asyncio.sleep(0.05)
    raise TimeoutError(f"controller nodes did not agree on a leader within {timeout} s")


@contextlib.contextmanager
def running_group(
    base_dir: Path,
    *,
    admin_token: str | None = None,
    broker_token: str | None = None,
    extra_args: list[str] | None = None,
) -> Iterator[ControllerGroup]:
    """A 3-node group on free loopback ports with a random Raft password: started, settled on a
    leader, and stopped on exit (tests and tools)."""
    group = ControllerGroup(base_dir, admin_token=admin_token, broker_token=broker_token, extra_args=extra_args)
    group.start_all()
    try:
        asyncio.run(settled(group))
        yield group
    finally:
        group.stop_all()
