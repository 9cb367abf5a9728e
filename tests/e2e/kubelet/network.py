"""The test kubelet's pod network: a bridge in the root namespace, one network namespace per pod, and the
hosts files that stand in for cluster DNS.

    root namespace   bridge bgpodbr0 10.88.0.1/16 (also the node's InternalIP and every pod's gateway)
                     route 10.0.0.0/24 (the Service CIDR) dev bgpodbr0, so ClusterIPs never leave the host
       |-- veth bgv<hash> ---- namespace bgpod-<hash>  eth0 10.88.0.N/16, default via 10.88.0.1

Names differ from brokergroup/chaos/netns.py's (`bgchaos-*`, `bgbr0`, 10.77.0.0/24), so both can be used in one
session. Every name is fixed, so one test kubelet runs on a machine at a time: `HostLock` takes a flock on
/run/bgkubelet/lock, and whoever holds it may sweep whatever an earlier, dead kubelet left (`sweep`).

`ip netns exec NS ...` bind-mounts every file of /etc/netns/NS/ over the same file in /etc, so each pod gets its
own /etc/hosts and /etc/resolv.conf. Those files are rewritten in place (`write_in_place`): a bind mount pins the
inode, so a rename would leave the pod looking at the old file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import logging
import os
import shutil
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

# The chaos harness's namespace tools: `run` raises NetnsError with the tool's stderr.
from brokergroup.chaos.netns import NetnsError, kill_namespace, namespaces, run

logger = logging.getLogger(__name__)

BRIDGE = "bgpodbr0"
POD_CIDR = ipaddress.ip_network("10.88.0.0/16")
GATEWAY = "10.88.0.1"
FIRST_POD_HOST = 10
NETNS_PREFIX = "bgpod-"
VETH_PREFIX = "bgv"
CLUSTER_DOMAIN = "cluster.local"
ETC_NETNS = Path("/etc/netns")
STATE_DIR = Path("/run/bgkubelet")
IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")
FORWARD_BEFORE = STATE_DIR / "ip_forward.before"
RESOLV_CONF = (
    "# test kubelet: no cluster DNS; names come from /etc/hosts\nnameserver 127.0.0.1\noptions timeout:1 attempts:1\n"
)


class NetworkError(RuntimeError):
    """The host is taken by another test kubelet, or the pod addresses are used up (a failing `ip` or `nft`
    raises the chaos harness's NetnsError)."""


def netns_name(namespace: str, pod: str, uid: str) -> str:
    """`bgpod-<8 hex>` from the pod's namespace, name and uid (a re-created pod gets a new namespace)."""
    return NETNS_PREFIX + hashlib.sha256(f"{namespace}/{pod}/{uid}".encode()).hexdigest()[:8]


def veth_name(netns: str) -> str:
    """The root side of a pod's veth pair: `bgv<8 hex>`, 11 characters (interface names stop at 15)."""
    return VETH_PREFIX + netns[len(NETNS_PREFIX) :]


def kill_netns(name: str) -> None:
    """SIGKILL every process still in network namespace `name`, delete it and its /etc/netns folder."""
    kill_namespace(name)
    shutil.rmtree(ETC_NETNS / name, ignore_errors=True)


class HostLock:
    """An exclusive flock on /run/bgkubelet/lock, held for a kubelet's lifetime (released by the kernel when
    the process dies, so a leftover lock file means nothing)."""

    def __init__(self) -> None:
        self._fd: int | None = None

    def acquire(self, timeout: float) -> None:
        """Take the lock, polling for up to `timeout` seconds while another kubelet (say, another test session
        on this machine) holds it."""
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        fd = os.open(STATE_DIR / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
                    os.close(fd)
                    raise NetworkError(
                        f"another test kubelet (pid {holder or '?'}) held /run/bgkubelet/lock for {timeout} s: "
                        "one runs per machine"
                    ) from None
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def restore_ip_forward() -> None:
    """Put back the ip_forward value that `HostNetwork.create` found, if it changed it."""
    if FORWARD_BEFORE.exists():
        IP_FORWARD.write_text(FORWARD_BEFORE.read_text().strip() + "\n")
        FORWARD_BEFORE.unlink()


def sweep() -> list[str]:
    """Remove everything a test kubelet makes (call with the `HostLock` held: then none of it is live)."""
    removed = []
    for name in namespaces():
        if name.startswith(NETNS_PREFIX):
            kill_netns(name)
            removed.append(name)
    for folder in ETC_NETNS.glob(NETNS_PREFIX + "*"):
        shutil.rmtree(folder, ignore_errors=True)
    with contextlib.suppress(NetnsError):  # no bridge
        run(["ip", "link", "del", BRIDGE])
        removed.append(BRIDGE)
    restore_ip_forward()
    return removed


class HostNetwork:
    """The bridge, the Service CIDR route and ip_forward; `PodNetwork`s hang off the bridge.

    ip_forward is switched on if it is off; the value found is kept in /run/bgkubelet/ip_forward.before, and
    `sweep` (which also deletes the bridge, and with it the route) restores it."""

    def __init__(self, service_cidr: str) -> None:
        self.service_cidr = service_cidr
        self._next_host = FIRST_POD_HOST

    def create(self) -> None:
        run(["ip", "link", "add", BRIDGE, "type", "bridge"])
        run(["ip", "addr", "add", f"{GATEWAY}/{POD_CIDR.prefixlen}", "dev", BRIDGE])
        run(["ip", "link", "set", BRIDGE, "up"])
        run(["ip", "route", "add", self.service_cidr, "dev", BRIDGE])
        # Pods reach ClusterIPs through the root namespace (DNAT, then forwarded back onto the bridge).
        before = IP_FORWARD.read_text().strip()
        if before != "1":
            FORWARD_BEFORE.write_text(before)
            IP_FORWARD.write_text("1\n")

    def allocate_ip(self) -> str:
        """The next unused pod address; addresses are not reused while this kubelet runs (no stale ARP or
        conntrack entries point at a new pod)."""
        address = POD_CIDR.network_address + self._next_host
        if address not in POD_CIDR or address == POD_CIDR.broadcast_address:
            raise NetworkError(f"pod addresses in {POD_CIDR} are used up")
        self._next_host += 1
        return str(address)


class PodNetwork:
    """One pod's network namespace, veth and /etc/netns files."""

    def __init__(self, netns: str, ip: str) -> None:
        self.netns = netns
        self.ip = ip
        self.veth = veth_name(netns)
        self.etc = ETC_NETNS / netns
        self.hosts_text = ""

    def create(self, hosts: str) -> None:
        try:
            self.etc.mkdir(parents=True, exist_ok=True)
            (self.etc / "resolv.conf").write_text(RESOLV_CONF)
            (self.etc / "hosts").write_text(hosts)
            self.hosts_text = hosts
            run(["ip", "netns", "add", self.netns])
            run(["ip", "link", "add", self.veth, "type", "veth", "peer", "name", "eth0", "netns", self.netns])
            run(["ip", "link", "set", self.veth, "master", BRIDGE, "up"])
            # With br_netfilter (bridge-nf-call-iptables=1) the DNAT of a pod's packet to its own Service
            # happens on the bridge, which then sends the frame back out of the port it came in on: hairpin.
            run(["ip", "link", "set", self.veth, "type", "bridge_slave", "hairpin", "on"])
            inside = [
                "link set lo up",
                f"addr add {self.ip}/{POD_CIDR.prefixlen} dev eth0",
                "link set eth0 up",
                f"route add default via {GATEWAY}",
            ]
            run(["ip", "-n", self.netns, "-batch", "-"], stdin="\n".join(inside) + "\n")
        except BaseException:
            self.destroy()
            raise

    def update_hosts(self, hosts: str) -> bool:
        """Rewrite /etc/netns/<ns>/hosts in place when its content changes; True when it did."""
        if hosts == self.hosts_text:
            return False
        write_in_place(self.etc / "hosts", hosts)
        self.hosts_text = hosts
        return True

    def destroy(self) -> None:
        kill_netns(self.netns)  # the veth pair dies with its inner end


def write_in_place(path: Path, text: str) -> None:
    """Overwrite `path` keeping its inode (a bind mount of it stays valid): new bytes first, then cut the
    tail, so a concurrent reader never sees an empty file."""
    data = text.encode()
    with open(path, "r+b") as handle:
        handle.write(data)
        handle.truncate(len(data))


# ------------------------------------------------------------------------------------------- hosts files


def own_hosts_lines(pod: Mapping[str, Any], ip: str) -> list[str]:
    """What the real kubelet writes into a pod's /etc/hosts (its "managed hosts file")."""
    meta, spec = pod["metadata"], pod.get("spec") or {}
    hostname = (spec.get("hostname") or meta["name"])[:63]
    lines = [
        "# Kubernetes-managed hosts file (test kubelet).",
        "127.0.0.1\tlocalhost",
        "::1\tlocalhost ip6-localhost ip6-loopback",
        "fe00::0\tip6-localnet",
        "fe00::1\tip6-allnodes",
        "fe00::2\tip6-allrouters",
    ]
    subdomain = spec.get("subdomain")
    if subdomain:
        lines.append(f"{ip}\t{hostname}.{subdomain}.{meta['namespace']}.svc.{CLUSTER_DOMAIN}\t{hostname}")
    else:
        lines.append(f"{ip}\t{hostname}")
    return lines


def dns_lines(namespace: str, services: Iterable[Mapping[str, Any]], slices: Iterable[Mapping[str, Any]]) -> list[str]:
    """The records cluster DNS would serve for one namespace, as hosts lines.

    - A ClusterIP Service: `<svc>.<ns>.svc.cluster.local`, `<svc>.<ns>.svc`, and the short forms that the
      pod's DNS search path would complete (`<svc>.<ns>`, `<svc>`).
    - A headless Service: one line per endpoint that has a hostname (a pod whose `spec.subdomain` is the
      Service's name) and is ready, as CoreDNS serves them. `publishNotReadyAddresses` makes the EndpointSlice
      controller mark every endpoint ready, so those names resolve before the pods are ready, as in a cluster.
      The Service's own name resolves to every ready endpoint: one line each (glibc returns every line of a
      name, `multi on` in /etc/host.conf), as CoreDNS serves one A record per endpoint.
    """
    lines = ["# test kubelet: cluster DNS records of this namespace"]
    headless: set[str] = set()
    for service in sorted(services, key=lambda s: s["metadata"]["name"]):
        name = service["metadata"]["name"]
        cluster_ip = (service.get("spec") or {}).get("clusterIP")
        if cluster_ip == "None":
            headless.add(name)
        elif cluster_ip:
            fqdn = f"{name}.{namespace}.svc"
            lines.append(f"{cluster_ip}\t{fqdn}.{CLUSTER_DOMAIN}\t{fqdn}\t{name}.{namespace}\t{name}")
    records: dict[str, str] = {}
    members: list[tuple[str, str]] = []
    for endpoint_slice in slices:
        service_name = (endpoint_slice["metadata"].get("labels") or {}).get("kubernetes.io/service-name")
        if service_name not in headless or endpoint_slice.get("addressType") != "IPv4":
            continue
        for endpoint in endpoint_slice.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready", True) is False:
                continue
            members.append((service_name, endpoint["addresses"][0]))
            hostname = endpoint.get("hostname")
            if hostname:
                records[f"{hostname}.{service_name}"] = endpoint["addresses"][0]
    for short, ip in sorted(records.items()) + sorted(members):
        fqdn = f"{short}.{namespace}.svc"
        lines.append(f"{ip}\t{fqdn}.{CLUSTER_DOMAIN}\t{fqdn}\t{short}.{namespace}\t{short}")
    return lines


def hosts_file(pod: Mapping[str, Any], ip: str, dns: list[str]) -> str:
    return "\n".join([*own_hosts_lines(pod, ip), *dns]) + "\n"
