"""Names of every object a BrokerGroup owns (DESIGN §2.4). One function per name, nothing else."""

from __future__ import annotations

import re
from typing import Final

GROUP: Final = "brokergroup.io"
VERSION: Final = "v1alpha1"
PLURAL: Final = "brokergroups"
KIND: Final = "BrokerGroup"

CONTROLLER_RAFT_PORT: Final = 9877
CONTROLLER_API_PORT: Final = 9878
BROKER_PORT: Final = 10911
BROKER_HA_PORT: Final = 10912
BROKER_BINARY_PORT: Final = 10909
"""The binary client port (RocketMQ's brokers listen on 10909 beside 10911 too, for their fast channel)."""

_ORDINAL = re.compile(r"0|[1-9][0-9]*")


def controller(bg: str) -> str:
    """Controller StatefulSet and its headless Service."""
    return f"{bg}-controller"


def controller_api(bg: str) -> str:
    """ClusterIP Service in front of every controller's HTTP API."""
    return f"{bg}-controller-api"


def controller_auth(bg: str) -> str:
    """Secret with the Raft password and the admin token."""
    return f"{bg}-controller-auth"


def config(bg: str) -> str:
    """ConfigMap with the controller's and the brokers' settings files."""
    return f"{bg}-config"


def network_policy(bg: str) -> str:
    return f"{bg}-controller-raft"


def controller_pdb(bg: str) -> str:
    return f"{bg}-controller"


def broker_set(bg: str, index: int) -> str:
    """StatefulSet, headless Service and RocketMQ brokerName of set `index`."""
    return f"{bg}-broker-{index}"


def broker_account(bg: str) -> str:
    """ServiceAccount, Role and RoleBinding of the broker pods (they patch their own role labels)."""
    return f"{bg}-broker"


def broker_master_service(bg: str, index: int) -> str:
    return f"{broker_set(bg, index)}-master"


def broker_pod(bg: str, index: int, ordinal: int) -> str:
    return f"{broker_set(bg, index)}-{ordinal}"


def controller_pod(bg: str, ordinal: int) -> str:
    return f"{controller(bg)}-{ordinal}"


def pod_host(pod: str, service: str, namespace: str) -> str:
    """Stable DNS name of a StatefulSet pod behind its headless Service."""
    return f"{pod}.{service}.{namespace}.svc"


def controller_peer_host(bg: str, ordinal: int, namespace: str) -> str:
    return pod_host(controller_pod(bg, ordinal), controller(bg), namespace)


def broker_pod_host(bg: str, index: int, ordinal: int, namespace: str) -> str:
    return pod_host(broker_pod(bg, index, ordinal), broker_set(bg, index), namespace)


def controller_api_url(bg: str, namespace: str) -> str:
    return f"http://{controller_api(bg)}.{namespace}.svc:{CONTROLLER_API_PORT}"


def set_index(bg: str, name: str) -> int | None:
    """The set index of a broker StatefulSet name `<bg>-broker-<i>`, or None if it is not one."""
    prefix = f"{bg}-broker-"
    if not name.startswith(prefix):
        return None
    rest = name[len(prefix) :]
    return int(rest) if _ORDINAL.fullmatch(rest) else None


def pod_ordinal(statefulset: str, pod: str) -> int | None:
    """The ordinal of `pod` in `statefulset`, or None if the pod is not one of its pods."""
    prefix = f"{statefulset}-"
    if not pod.startswith(prefix):
        return None
    rest = pod[len(prefix) :]
    return int(rest) if _ORDINAL.fullmatch(rest) else None
