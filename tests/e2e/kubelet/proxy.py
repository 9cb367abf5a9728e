"""A tiny kube-proxy: nftables rules that send ClusterIP:port to the ready endpoints of a Service.

The whole table `ip bgk8sproxy` is rebuilt in one `nft -f` transaction on every change (simple and race-free):

- nat `prerouting` (pods' traffic, which reaches the root namespace through the bridge) and nat `output`
  (processes of the root namespace: pytest, the operator) jump to `services`, which matches ClusterIP, protocol
  and port and picks an endpoint with `numgen random mod N` (once per connection: nat chains see only a
  connection's first packet).
- nat `postrouting` masquerades DNATed connections from pod addresses leaving onto the bridge. The backend pod
  then answers the gateway 10.88.0.1, whose conntrack entry undoes both translations; without it a reply to a
  pod on the same bridge would skip the root namespace (and a pod reaching itself through its Service, the
  hairpin case, would answer itself). Backends therefore see 10.88.0.1 as the client, as with kube-proxy's
  masquerade-all.
- filter `output` and `forward` reject what is still addressed to the Service CIDR after DNAT (a Service with no
  ready endpoint, or an unknown ClusterIP): the client gets "connection refused" at once, as with kube-proxy.
- filter `forward` drops anything from the bridge to another interface and back: pods reach nothing outside.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from brokergroup.chaos.netns import NetnsError, run
from tests.e2e.kubelet.network import BRIDGE, POD_CIDR

TABLE = "bgk8sproxy"


def backends(
    service: Mapping[str, Any], slices: Iterable[Mapping[str, Any]]
) -> list[tuple[str, int, str, list[tuple[str, int]]]]:
    """(clusterIP, port, protocol, [(endpoint ip, target port)]) for each port of a ClusterIP Service.

    The EndpointSlice controller has already resolved named target ports: a slice's port carries the
    Service port's name and the number behind it. Only endpoints with `conditions.ready` (unset counts as
    ready) are used.
    """
    spec = service.get("spec") or {}
    cluster_ip = spec.get("clusterIP")
    if not cluster_ip or cluster_ip == "None":
        return []
    name = service["metadata"]["name"]
    own = [s for s in slices if (s["metadata"].get("labels") or {}).get("kubernetes.io/service-name") == name]
    result = []
    for port in spec.get("ports") or []:
        protocol = (port.get("protocol") or "TCP").lower()
        targets: set[tuple[str, int]] = set()
        for endpoint_slice in own:
            if endpoint_slice.get("addressType") != "IPv4":
                continue
            numbers = [
                p["port"]
                for p in endpoint_slice.get("ports") or []
                if (p.get("name") or "") == (port.get("name") or "") and p.get("port") is not None
            ]
            for endpoint in endpoint_slice.get("endpoints") or []:
                if (endpoint.get("conditions") or {}).get("ready", True) is False:
                    continue
                targets.update((endpoint["addresses"][0], number) for number in numbers)
        result.append((cluster_ip, int(port["port"]), protocol, sorted(targets)))
    return result


def ruleset(
    services: Iterable[Mapping[str, Any]], slices: Iterable[Mapping[str, Any]], service_cidr: str
) -> tuple[str, dict[str, list[tuple[str, int]]]]:
    """The nft script that replaces the table, and what it routes ("ip:port/proto" -> endpoints) for logs."""
    slices = list(slices)
    matches: list[str] = []
    chains: list[str] = []
    routes: dict[str, list[tuple[str, int]]] = {}
    for service in sorted(services, key=lambda s: s["metadata"]["name"]):
        for cluster_ip, port, protocol, targets in backends(service, slices):
            routes[f"{cluster_ip}:{port}/{protocol}"] = targets
            if not targets:
                continue  # left to the reject rules
            chain = "svc-" + hashlib.sha256(f"{cluster_ip}/{port}/{protocol}".encode()).hexdigest()[:12]
            matches.append(f"    ip daddr {cluster_ip} {protocol} dport {port} goto {chain}")
            if len(targets) == 1:
                chains.append(_chain(chain, f"meta l4proto {protocol} dnat to {targets[0][0]}:{targets[0][1]}"))
                continue
            arms = []
            for index, (ip, target_port) in enumerate(targets):
                chains.append(_chain(f"{chain}-{index}", f"meta l4proto {protocol} dnat to {ip}:{target_port}"))
                arms.append(f"{index} : goto {chain}-{index}")
            chains.append(_chain(chain, f"numgen random mod {len(targets)} vmap {{ {', '.join(arms)} }}"))
    body = "\n".join(
        [
            f"table ip {TABLE} {{",
            "  chain services {",
            *matches,
            "  }",
            *chains,
            "  chain nat-prerouting {",
            "    type nat hook prerouting priority -100; policy accept;",
            "    jump services",
            "  }",
            "  chain nat-output {",
            "    type nat hook output priority -100; policy accept;",
            "    jump services",
            "  }",
            "  chain nat-postrouting {",
            "    type nat hook postrouting priority 100; policy accept;",
            f'    ct status dnat ip saddr {POD_CIDR} oifname "{BRIDGE}" masquerade',
            "  }",
            "  chain filter-output {",
            "    type filter hook output priority 0; policy accept;",
            f"    ip daddr {service_cidr} meta l4proto tcp reject with tcp reset",
            f"    ip daddr {service_cidr} reject",
            "  }",
            "  chain filter-forward {",
            "    type filter hook forward priority 0; policy accept;",
            f"    ip daddr {service_cidr} meta l4proto tcp reject with tcp reset",
            f"    ip daddr {service_cidr} reject",
            f'    iifname "{BRIDGE}" oifname != "{BRIDGE}" drop',
            f'    oifname "{BRIDGE}" iifname != "{BRIDGE}" drop',
            "  }",
            "}",
        ]
    )
    # Declaring the table first makes the delete succeed when it does not exist yet; one transaction.
    return f"table ip {TABLE}\ndelete table ip {TABLE}\n{body}\n", routes


def _chain(name: str, rule: str) -> str:
    return f"  chain {name} {{\n    {rule}\n  }}"


class ServiceProxy:
    """Applies `ruleset` when it changes; `delete` removes the table."""

    def __init__(self, service_cidr: str) -> None:
        self.service_cidr = service_cidr
        self.script = ""
        self.routes: dict[str, list[tuple[str, int]]] = {}

    def sync(self, services: Iterable[Mapping[str, Any]], slices: Iterable[Mapping[str, Any]]) -> bool:
        """Rebuild the table if the rules differ from the applied ones; True when it did."""
        script, routes = ruleset(services, slices, self.service_cidr)
        if script == self.script:
            return False
        run(["nft", "-f", "-"], stdin=script)
        self.script, self.routes = script, routes
        return True

    @staticmethod
    def delete() -> None:
        with contextlib.suppress(NetnsError):  # no table
            run(["nft", "delete", "table", "ip", TABLE])
