"""The real node's fixed names and the configuration files of its components (pure: text in, text out).

Every name is fixed, so one real node runs on a machine at a time, and they differ from the test kubelet's
(`bgpodbr0`, 10.88.0.0/16, Services 10.0.0.0/24) and the chaos harness's (`bgbr0`, 10.77.0.0/24).
"""

from __future__ import annotations

import json
from pathlib import Path

NODE_NAME = "realnode"
BRIDGE = "cni0"
NODE_IP = "10.244.0.1"
"""The bridge's address: the node's InternalIP, every pod's gateway, and where pods reach the apiserver."""
POD_CIDR = "10.244.0.0/24"
SERVICE_CIDR = "10.96.0.0/16"
DNS_IP = "10.96.0.10"
GUARD_TABLE = "realnode_guard"
CNI_NETWORK = "realnode"
STORAGE_CLASS = "realnode-hostpath"
PROVISIONER = "brokergroup.test/realnode-hostpath"
PAUSE_IMAGE = "localhost/pause:local"
COREDNS_VERSION = "v1.12.4"
COREDNS_IMAGE = f"localhost/coredns:{COREDNS_VERSION}"
BASE_IMAGE = "localhost/brokergroup-base:bookworm"
RUNTIME_IMAGE = "ghcr.io/brokergroup/brokergroup:0.1.0"
SPARK_IMAGE = "ghcr.io/brokergroup/brokergroup-spark:0.1.0"
KUBELET_SYSCTLS = (
    # The kubelet sets these at start (protectKernelDefaults: true makes it refuse to start instead).
    "kernel.panic",
    "kernel.panic_on_oops",
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
    # Pod -> ClusterIP -> pod on the same bridge needs forwarding (the test kubelet switches it on too).
    "net.ipv4.ip_forward",
)
IPTABLES_CHAINS = ("KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY", "KUBE-FIREWALL")
"""The kubelet makes these in iptables(-nft)'s filter, nat and mangle tables whatever the proxy mode."""


def containerd_toml(root: Path, state: Path, socket: Path, runc: str, cni_conf: Path, runc_root: Path) -> str:
    return f"""version = 2
root = "{root}"
state = "{state}"

[grpc]
  address = "{socket}"

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "{PAUSE_IMAGE}"
    enable_selinux = false
    # Without CAP_SYS_RESOURCE (containers of this machine kind lack it) a negative oom_score_adj (sandboxes
    # -998, Guaranteed pods -997) makes runc's init fail: "can't get final child's PID from pipe: EOF".
    restrict_oom_score_adj = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          BinaryName = "{runc}"
          Root = "{runc_root}"
          SystemdCgroup = false
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "{cni_conf}"
  [plugins."io.containerd.internal.v1.opt"]
    path = "{root}/opt"
"""


def cni_conflist(ipam_dir: Path) -> str:
    """The bridge plugin on cni0 with host-local addresses, no masquerade (nothing leaves the machine)."""
    return json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": CNI_NETWORK,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "dataDir": str(ipam_dir),
                        "ranges": [[{"subnet": POD_CIDR, "gateway": NODE_IP}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        },
        indent=2,
    )


GUARD_NFT = f"""# Keep pod and Service traffic on this machine: nothing is forwarded between {BRIDGE} and another
# interface, and whatever is still addressed to the Service CIDR after kube-proxy's DNAT is refused.
table inet {GUARD_TABLE} {{
  chain forward {{
    type filter hook forward priority 10; policy accept;
    ip daddr {SERVICE_CIDR} reject
    iifname "{BRIDGE}" oifname != "{BRIDGE}" drop
    oifname "{BRIDGE}" iifname != "{BRIDGE}" drop
  }}
  chain output {{
    type filter hook output priority 10; policy accept;
    ip daddr {SERVICE_CIDR} reject
  }}
}}
"""


def kubelet_config(client_ca: Path, runtime_socket: Path, resolv_conf: Path) -> str:
    return json.dumps(
        {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": NODE_IP,  # :10250 on the bridge address only (the node's InternalIP)
            "port": 10250,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": 10248,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(client_ca)},
            },
            "authorization": {"mode": "Webhook"},
            "containerRuntimeEndpoint": f"unix://{runtime_socket}",
            "cgroupDriver": "cgroupfs",
            "failCgroupV1": False,  # hybrid cgroup v1 hosts: 1.33 only warns
            "failSwapOn": False,
            "resolvConf": str(resolv_conf),
            "clusterDomain": "cluster.local",
            "clusterDNS": [DNS_IP],
            "podCIDR": POD_CIDR,
            "serializeImagePulls": False,
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "imageGCHighThresholdPercent": 100,
            "rotateCertificates": False,
            "protectKernelDefaults": False,
        },
        indent=2,
    )


def kube_proxy_config(kubeconfig: Path) -> str:
    return json.dumps(
        {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "hostnameOverride": NODE_NAME,
            "mode": "nftables",
            "clusterCIDR": POD_CIDR,
            "nodePortAddresses": [f"{NODE_IP}/32"],
            "healthzBindAddress": "127.0.0.1:10256",
            "metricsBindAddress": "127.0.0.1:10249",
            # Zeros: leave the host's conntrack sysctls alone.
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        },
        indent=2,
    )


STORAGE_CLASS_MANIFEST = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {
        "name": STORAGE_CLASS,
        "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
    },
    "provisioner": PROVISIONER,
    "reclaimPolicy": "Delete",
    "volumeBindingMode": "WaitForFirstConsumer",
    "allowVolumeExpansion": True,
}
