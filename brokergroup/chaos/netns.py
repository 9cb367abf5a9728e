"""A private test network of Linux network namespaces, and partitions inside it.

Shape (nothing is added to the host's own namespace, and no address outside 10.77.0.0/24 is used):

    namespace <prefix>hub  bridge bgbr0 10.77.0.1/24  (the harness's clients live here)
       |-- veth v0 ---- namespace <prefix>n0    eth0 10.77.0.10/24  (controller n0)
       |-- veth v1 ---- namespace <prefix>n1    eth0 10.77.0.11/24
       ...
       '-- veth vK ---- namespace <prefix>bs0-2 eth0 10.77.0.1K/24  (broker replica bs0-2)

Every process namespace gets an nftables table `inet bgchaos` with a set `cut` of peer
addresses: its input and output chains drop every packet from or to an address in the set.
A partition of A from B adds B's address to A's set (and A's to B's: both directions are cut on
both sides); healing flushes the sets. Packets vanish silently, as on a real partition: new
connections time out and established ones stall until TCP gives up.

The harness enters the hub namespace with setns(2) on its own thread (`entered`), so its
clients reach the servers on 10.77.0.x while its other threads and children stay where they
were. `sweep_stale` removes the namespaces of a harness that died without tearing down (their
names carry its pid). Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN), iproute2 and nftables.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path

logger = logging.getLogger(__name__)

SUBNET_PREFIX = "10.77.0."
HUB_ADDRESS = SUBNET_PREFIX + "1"
FIRST_NODE = 10
NAME_PREFIX = "bgchaos-"
CLONE_NEWNET = 0x40000000
NFT_TABLE = """
table inet bgchaos {
  set cut { type ipv4_addr; }
  chain input { type filter hook input priority 0; policy accept; ip saddr @cut drop; }
  chain output { type filter hook output priority 0; policy accept; ip daddr @cut drop; }
}
"""


class NetnsError(RuntimeError):
    """The test network could not be built or changed."""


def missing_capabilities() -> list[str]:
    """What this machine lacks for namespace partitions (empty when everything is there)."""
    missing = [f"`{tool}` not on PATH" for tool in ("ip", "nft") if shutil.which(tool) is None]
    if os.geteuid() != 0:
        missing.append("not root (network namespaces need CAP_NET_ADMIN and CAP_SYS_ADMIN)")
    if not missing:
        probe = f"{NAME_PREFIX}{os.getpid()}-probe"
        try:
            run(["ip", "netns", "add", probe])
            run(["ip", "netns", "exec", probe, "nft", "-f", "-"], stdin=NFT_TABLE)
        except NetnsError as exc:
            missing.append(f"cannot create a namespace with an nftables table: {exc}")
        finally:
            subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return missing


def run(argv: list[str], *, stdin: str | None = None) -> str:
    """Run one `ip` or `nft` command; its stdout, or NetnsError naming the command and why it failed."""
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetnsError(f"{' '.join(argv)}: {exc}") from exc
    if done.returncode != 0:
        raise NetnsError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def namespaces() -> list[str]:
    return [line.split()[0] for line in run(["ip", "netns", "list"]).splitlines() if line.strip()]


def kill_namespace(name: str) -> None:
    """SIGKILL whatever still runs in one of our namespaces, then delete it."""
    pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True, check=False).stdout
    for pid in (int(p) for p in pids.split()):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


def sweep_stale() -> list[str]:
    """Delete namespaces left by chaos harnesses whose process is gone; returns their names."""
    removed = []
    for name in namespaces():
        if not name.startswith(NAME_PREFIX):
            continue
        pid = name[len(NAME_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            kill_namespace(name)
            removed.append(name)
    return removed


class Network:
    """The hub plus one namespace (and one 10.77.0.x address) per named process."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = list(names)
        if len(self.names) > 240:
            raise ValueError("at most 240 processes fit in 10.77.0.0/24")
        self.prefix = f"{NAME_PREFIX}{os.getpid()}-{secrets.token_hex(2)}-"
        self.hub = self.prefix + "hub"
        self.addresses = {name: f"{SUBNET_PREFIX}{FIRST_NODE + i}" for i, name in enumerate(self.names)}
        self.cuts: dict[str, set[str]] = {name: set() for name in self.names}
        self._created: list[str] = []

    def namespace(self, name: str) -> str:
        return self.prefix + name

    def address(self, name: str) -> str:
        return self.addresses[name]

    def name_of(self, address: str) -> str:
        host = address.rsplit(":", 1)[0]
        for name, ip in self.addresses.items():
            if ip == host:
                return name
        raise KeyError(address)

    def create(self) -> None:
        """Build the hub, the bridge and every process namespace; on any error tear down what exists."""
        sweep_stale()
        try:
            self._add_namespace(self.hub)
            run(["ip", "-n", self.hub, "link", "add", "bgbr0", "type", "bridge"])
            run(["ip", "-n", self.hub, "addr", "add", f"{HUB_ADDRESS}/24", "dev", "bgbr0"])
            run(["ip", "-n", self.hub, "link", "set", "bgbr0", "up"])
            for i, name in enumerate(self.names):
                ns = self.namespace(name)
                self._add_namespace(ns)
                veth = f"v{i}"
                run(["ip", "-n", self.hub, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
                run(["ip", "-n", self.hub, "link", "set", veth, "master", "bgbr0", "up"])
                run(["ip", "-n", ns, "addr", "add", f"{self.addresses[name]}/24", "dev", "eth0"])
                run(["ip", "-n", ns, "link", "set", "eth0", "up"])
                run(["ip", "netns", "exec", ns, "nft", "-f", "-"], stdin=NFT_TABLE)
        except BaseException:
            self.destroy()
            raise

    def _add_namespace(self, ns: str) -> None:
        run(["ip", "netns", "add", ns])
        self._created.append(ns)
        run(["ip", "-n", ns, "link", "set", "lo", "up"])

    def destroy(self) -> None:
        """Kill anything left inside and delete every namespace (veths and the bridge go with them)."""
        for ns in reversed(self._created):
            kill_namespace(ns)
        self._created.clear()

    # ---- partitions ---------------------------------------------------------------------------
    def cut(self, side_a: Iterable[str], side_b: Iterable[str]) -> None:
        """Drop all traffic between every process of `side_a` and every one of `side_b` ("hub" = the clients)."""
        a, b = list(side_a), list(side_b)
        for x in a:
            for y in b:
                if x != y:
                    self._cut_one(x, y)
                    self._cut_one(y, x)
        self._apply({x for x in a + b if x != "hub"})

    def _cut_one(self, here: str, peer: str) -> None:
        if here == "hub":
            return  # the hub keeps no rules: cutting the peer's side drops both directions already
        self.cuts[here].add(HUB_ADDRESS if peer == "hub" else self.addresses[peer])

    def heal(self) -> None:
        """Remove every cut."""
        dirty = {name for name, cut in self.cuts.items() if cut}
        for name in dirty:
            self.cuts[name].clear()
        self._apply(dirty)

    def _apply(self, names: Iterable[str]) -> None:
        for name in names:
            ns = self.namespace(name)
            elements = ", ".join(sorted(self.cuts[name]))
            script = "flush set inet bgchaos cut\n" + (
                f"add element inet bgchaos cut {{ {elements} }}\n" if elements else ""
            )
            run(["ip", "netns", "exec", ns, "nft", "-f", "-"], stdin=script)

    def describe_cuts(self) -> dict[str, list[str]]:
        return {
            name: sorted(self.name_of(a) if a != HUB_ADDRESS else "hub" for a in cut)
            for name, cut in self.cuts.items()
            if cut
        }


@contextlib.contextmanager
def entered(namespace: str) -> Iterator[None]:
    """Run the calling thread inside `namespace` (new sockets are created there), then return."""
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(f"/run/netns/{namespace}", os.O_RDONLY)
        try:
            if libc.setns(target, CLONE_NEWNET) != 0:
                errno = ctypes.get_errno()
                raise NetnsError(f"setns into {namespace}: {os.strerror(errno)}")
        finally:
            os.close(target)
        try:
            yield
        finally:
            if libc.setns(own, CLONE_NEWNET) != 0:
                raise NetnsError(f"setns back from {namespace}: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(own)
