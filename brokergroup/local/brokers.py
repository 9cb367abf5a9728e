"""A broker set as local processes: `python -m brokergroup.cli broker ...` per replica.

Ports are chosen once, so a replica restarted after `kill -9` comes back at the same address
(as a pod would behind its StatefulSet name).
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from brokergroup.local.ports import free_ports
from brokergroup.local.processes import LocalProcess, stop_all, tail
from brokergroup.local.snapshot import get_json

API_PORT = 10911
HA_PORT = 10912


@dataclasses.dataclass
class BrokerProcess(LocalProcess):
    api: str = ""
    ha_port: int = 0


class BrokerSet:
    def __init__(
        self,
        base_dir: Path,
        *,
        controllers: list[str],
        broker_name: str,
        replicas: int = 3,
        cluster_name: str = "local",
        extra_args: list[str] | None = None,
        broker_token: str | None = None,
        host: str = "127.0.0.1",
        hosts: list[str] | None = None,
        netns: list[str] | None = None,
    ) -> None:
        """`hosts` (one address per replica, e.g. in its own network namespace named by `netns`)
        gives every replica the default ports on its own address, API and replication both bound
        to it, instead of free ports on `host`."""
        self.controllers = controllers
        self.broker_name = broker_name
        self.cluster_name = cluster_name
        self.extra_args = extra_args or []
        self.broker_token = broker_token
        """The controllers' broker token, given to every replica (env, never on the command line)."""
        self.own_hosts = hosts is not None
        if hosts is not None:
            if len(hosts) != replicas or (netns is not None and len(netns) != replicas):
                raise ValueError(f"give one host (and one namespace) per replica: {replicas}")
            addresses = [(f"{h}:{API_PORT}", HA_PORT) for h in hosts]
        else:
            ports = free_ports(2 * replicas, host)
            addresses = [(f"{host}:{ports[2 * i]}", ports[2 * i + 1]) for i in range(replicas)]
        self.nodes = [
            BrokerProcess(
                name=f"{broker_name}-{i}",
                data_dir=base_dir / f"{broker_name}-{i}",
                log_path=base_dir / f"{broker_name}-{i}.log",
                api=api,
                ha_port=ha_port,
                netns=netns[i] if netns else None,
            )
            for i, (api, ha_port) in enumerate(addresses)
        ]

    def command(self, node: BrokerProcess) -> list[str]:
        host, port = node.api.rsplit(":", 1)
        return [
            sys.executable, "-m", "brokergroup.cli", "broker",
            "--cluster-name", self.cluster_name, "--broker-name", self.broker_name,
            "--data-dir", str(node.data_dir), "--host", host, "--port", port,
            "--ha-port", str(node.ha_port), "--controller", ";".join(self.controllers),
            *(["--set", f"ha.host={host}"] if self.own_hosts else []),
            *self.extra_args,
        ]  # fmt: skip

    def start(self, index: int) -> None:
        node = self.nodes[index]
        env = {"BG_BROKER_CONTROLLER__BROKER_TOKEN": self.broker_token} if self.broker_token else {}
        node.spawn(self.command(node), env)

    def start_all(self) -> None:
        for i in range(len(self.nodes)):
            self.start(i)

    def kill(self, index: int) -> None:
        self.nodes[index].signal(signal.SIGKILL)

    def signal(self, index: int, sig: signal.Signals) -> None:
        self.nodes[index].signal(sig)

    def stop_all(self) -> None:
        stop_all(list(self.nodes))

    async def status(self, index: int, session: aiohttp.ClientSession) -> dict[str, Any] | None:
        return await get_json(session, f"http://{self.nodes[index].api}/v1/status")

    async def master(self, *, timeout: float = 30.0, exclude: set[int] | None = None) -> int:
        """Index of the replica that is master with a live write lease."""
        deadline = time.monotonic() + timeout
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < deadline:
                for i, node in enumerate(self.nodes):
                    if not node.running or (exclude and i in exclude):
                        continue
                    status = await self.status(i, session)
                    if status and status.get("role") == "master" and status.get("writeLeaseRemainingMs", 0) > 0:
                        return i
                await asyncio.sleep(0.05)
        logs = "\n".join(f"--- {n.name}\n{tail(n.log_path)}" for n in self.nodes)
        raise TimeoutError(f"no master in {self.broker_name} within {timeout} s\n{logs}")
