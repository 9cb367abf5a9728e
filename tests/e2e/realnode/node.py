"""A real single Kubernetes node for the e2e tier: containerd + runc, the CNI bridge, kubelet, kube-proxy
(nftables), kube-scheduler and CoreDNS, against the project's ControlPlane (tests/e2e/kubeenv.py), running the
images scripts/realnode-images builds from the project's Dockerfile.

    host    bridge cni0 10.244.0.1/24: the node's InternalIP, the pods' gateway; socat forwards
            10.244.0.1:<apiserver port> to the apiserver on 127.0.0.1, so the `kubernetes` Service works
            route 10.96.0.0/16 (Services) dev cni0; nftables table inet realnode_guard keeps traffic on the machine
    state   /run/brokergroup-realnode (containerd's state and socket, the host settings found at start);
            containerd's root (images) is cached in $BROKERGROUP_REALNODE_CACHE/containerd; the rest in `work_dir`

`stop()` puts the host back: every process, pod sandbox, mount, cgroup, link, route, nftables table and
iptables chain made is removed, and the sysctls the kubelet and the node change are restored to the values
found at start. The test kubelet (tests/e2e/kubelet) uses the same host resources (ip_forward, the br_netfilter
path): the node holds its lock, /run/bgkubelet/lock, from start to stop. A node left by a killed process is
swept by the next start (the lock is free then).

docs/k8s-test-env.md ("A real node") tells what it is for and what it costs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import kubernetes

from brokergroup.local.processes import LocalProcess, tail
from tests.e2e.kubeenv import (
    CACHE,
    KUBERNETES_VERSION,
    PROJECT_CRDS,
    Binaries,
    ControlPlane,
    ControlPlaneError,
    eventually,
)
from tests.e2e.kubelet.network import HostLock
from tests.e2e.kubepki import Pki, write_private
from tests.e2e.realnode import config
from tests.e2e.realnode.provisioner import HostPathProvisioner

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).parent
REALNODE_CACHE = Path(
    os.environ.get("BROKERGROUP_REALNODE_CACHE") or Path.home() / ".cache" / "brokergroup" / "realnode"
)
"""Where scripts/realnode-images keeps the rootfs and buildah's storage, and the node keeps containerd's root."""
STATE_DIR = Path("/run/brokergroup-realnode")
APT_TOOLS = ("containerd", "ctr", "runc", "socat", "buildah", "nft", "iptables", "ip", "setpriv")
CRICTL_VERSION = "v1.34.0"


class RealNodeError(RuntimeError):
    """A component did not start, or a tool is missing."""


# ------------------------------------------------------------------------------------------ binaries


@dataclasses.dataclass(frozen=True)
class NodeBinaries:
    """The node's programs: Go binaries from scripts/realnode-bins' cache, the rest from Debian packages."""

    kubelet: Path
    kube_proxy: Path
    kube_scheduler: Path
    coredns: Path
    crictl: Path
    tools: dict[str, str | None]

    @classmethod
    def discover(cls) -> NodeBinaries:
        k8s = Path(os.environ.get("BROKERGROUP_K8S_BIN") or CACHE / f"kubernetes-{KUBERNETES_VERSION}" / "bin")
        return cls(
            kubelet=k8s / "kubelet",
            kube_proxy=k8s / "kube-proxy",
            kube_scheduler=k8s / "kube-scheduler",
            coredns=CACHE / f"coredns-{config.COREDNS_VERSION}" / "bin" / "coredns",
            crictl=CACHE / f"cri-tools-{CRICTL_VERSION}" / "bin" / "crictl",
            tools={tool: shutil.which(tool) for tool in APT_TOOLS},
        )

    def missing(self) -> list[str]:
        lacking = [
            str(path)
            for path in (self.kubelet, self.kube_proxy, self.kube_scheduler, self.coredns, self.crictl)
            if not (path.is_file() and os.access(path, os.X_OK))
        ]
        return lacking + [tool for tool, path in self.tools.items() if path is None]

    def tool(self, name: str) -> str:
        path = self.tools[name]
        if path is None:
            raise RealNodeError(f"{name} is not installed (scripts/realnode-bins installs it)")
        return path


def image_requirements() -> list[str]:
    """What this machine lacks to build the images (scripts/realnode-images)."""
    lacking = [] if os.geteuid() == 0 else ["root"]
    return lacking + [tool for tool in ("buildah", "debootstrap", "runc", "gcc") if shutil.which(tool) is None]


def missing_requirements() -> list[str]:
    """What this machine lacks for a real node: root, binaries, tools (empty when it can run one)."""
    lacking = [] if os.geteuid() == 0 else ["root"]
    lacking += NodeBinaries.discover().missing() + [str(path) for path in Binaries.discover().missing(helm=True)]
    if not (REALNODE_CACHE / "storage.conf").is_file():
        lacking.append(f"{REALNODE_CACHE}/storage.conf (scripts/realnode-images)")
    return [str(item) for item in lacking]


# ------------------------------------------------------------------------------------------- helpers


def run(argv: Sequence[str], *, check: bool = True, timeout: float = 120, env: dict[str, str] | None = None) -> str:
    """Run a command; its stdout, or RealNodeError with its stderr."""
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, check=False, timeout=timeout, env={**os.environ, **(env or {})}
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RealNodeError(f"{' '.join(argv)}: {exc}") from exc
    if check and done.returncode != 0:
        raise RealNodeError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()[-2000:]}")
    return done.stdout


def succeeds(argv: Sequence[str]) -> bool:
    """Whether a command exits 0 (its output discarded)."""
    try:
        return subprocess.run(list(argv), capture_output=True, check=False, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def read_sysctls(names: Iterable[str]) -> dict[str, str]:
    """The current value of each sysctl that exists here."""
    found = {}
    for name in names:
        with contextlib.suppress(OSError):
            found[name] = _sysctl_path(name).read_text().strip()
    return found


def write_sysctls(values: dict[str, str]) -> list[str]:
    """Set each sysctl; the ones that could not be written (with why)."""
    failed = []
    for name, value in values.items():
        try:
            path = _sysctl_path(name)
            if path.read_text().strip() != value:
                path.write_text(value + "\n")
        except OSError as exc:
            failed.append(f"{name}={value}: {exc}")
    return failed


def iptables_nft_tables() -> set[str]:
    """The nftables tables iptables-nft keeps ("ip filter", "ip6 nat", ...) that exist now."""
    listed = run(["nft", "list", "tables"], check=False)
    return {line.removeprefix("table ").strip() for line in listed.splitlines()} & {
        f"{family} {table}" for family in ("ip", "ip6") for table in ("filter", "nat", "mangle")
    }


# ---------------------------------------------------------------------------------------------- node


class RealNode:
    """Use as a context manager, or `start()` then `stop()` (idempotent; also registered with atexit by
    the ControlPlane it owns). `images`: what to import into containerd besides pause and CoreDNS (built
    beforehand by scripts/realnode-images)."""

    def __init__(
        self,
        work_dir: Path,
        *,
        images: Sequence[str] = (config.RUNTIME_IMAGE, config.BASE_IMAGE),
        binaries: NodeBinaries | None = None,
        k8s: Binaries | None = None,
    ) -> None:
        self.work_dir = work_dir
        self.images = [config.PAUSE_IMAGE, config.COREDNS_IMAGE, *images]
        self.binaries = binaries or NodeBinaries.discover()
        self.k8s = k8s or Binaries.discover()
        self.socket = STATE_DIR / "containerd.sock"
        self.containerd_root = REALNODE_CACHE / "containerd"
        self.kubelet_dir = work_dir / "kubelet"
        self.log_dir = work_dir / "logs"
        self.timings: dict[str, float] = {}
        """Seconds from the start of `start()` to each step's end, in order."""
        self.control_plane: ControlPlane | None = None
        self.provisioner: HostPathProvisioner | None = None
        self.api: kubernetes.client.ApiClient | None = None
        self._processes: dict[str, LocalProcess] = {}
        self._lock = HostLock()
        self._started = False
        self._t0 = 0.0

    # -- lifecycle

    def __enter__(self) -> RealNode:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 180.0, lock_timeout: float = 900.0) -> None:
        lacking = self.binaries.missing() + [str(p) for p in self.k8s.missing(helm=True)]
        if lacking:
            raise RealNodeError("the real node needs " + ", ".join(lacking))
        self._t0 = time.monotonic()
        self._started = True
        try:
            self._lock.acquire(lock_timeout)
            self._lap("lock")
            if STATE_DIR.exists():
                logger.warning("sweeping a real node left by a dead process")
                self._teardown_host()
            STATE_DIR.mkdir(parents=True)
            (STATE_DIR / "sysctl.before.json").write_text(json.dumps(read_sysctls(config.KUBELET_SYSCTLS)))
            (STATE_DIR / "nft-tables.before.json").write_text(json.dumps(sorted(iptables_nft_tables())))
            for folder in (self.work_dir, self.log_dir, self.containerd_root):
                folder.mkdir(parents=True, exist_ok=True)
            self._start_network()
            self._start_containerd(timeout)
            self.import_images(self.images)
            self._start_control_plane(timeout)
            self._start_node(timeout)
            self._start_addons(timeout)
        except BaseException:
            self.stop()
            raise

    def _lap(self, step: str) -> None:
        self.timings[step] = round(time.monotonic() - self._t0, 2)
        logger.info("real node: %s after %.1f s", step, self.timings[step])

    def _spawn(self, name: str, command: list[str]) -> LocalProcess:
        process = LocalProcess(name, self.work_dir, self.log_dir / f"{name}.log", detached=True)
        self._processes[name] = process
        # SIGTERM when the holding process dies (a killed pytest runs no atexit handlers).
        process.spawn([self.binaries.tool("setpriv"), "--pdeathsig", "TERM", "--", *command], env={})
        return process

    def _check_running(self, name: str) -> None:
        process = self._processes[name]
        if not process.running:
            raise RealNodeError(f"{name} exited; last lines of {process.log_path}:\n{tail(process.log_path, 40)}")

    def _start_network(self) -> None:
        ip, nft = self.binaries.tool("ip"), self.binaries.tool("nft")
        run([ip, "link", "add", config.BRIDGE, "type", "bridge"])
        run([ip, "addr", "add", f"{config.NODE_IP}/24", "dev", config.BRIDGE])
        run([ip, "link", "set", config.BRIDGE, "up"])
        run([ip, "route", "replace", config.SERVICE_CIDR, "dev", config.BRIDGE, "src", config.NODE_IP])
        guard = self.work_dir / "guard.nft"
        guard.write_text(config.GUARD_NFT)
        run([nft, "-f", str(guard)])
        failed = write_sysctls({"net.ipv4.ip_forward": "1"})
        if failed:
            raise RealNodeError(f"cannot switch IP forwarding on: {failed}")
        self._lap("network")

    def _start_containerd(self, timeout: float) -> None:
        cni_conf = self.work_dir / "cni" / "net.d"
        cni_conf.mkdir(parents=True, exist_ok=True)
        (cni_conf / "10-realnode.conflist").write_text(config.cni_conflist(self.work_dir / "cni" / "ipam"))
        toml = self.work_dir / "containerd.toml"
        toml.write_text(
            config.containerd_toml(
                self.containerd_root,
                STATE_DIR / "containerd",
                self.socket,
                self.binaries.tool("runc"),
                cni_conf,
                STATE_DIR / "runc",
            )
        )
        self._spawn("containerd", [self.binaries.tool("containerd"), "--config", str(toml)])

        def answers() -> bool:
            self._check_running("containerd")
            return self._ctr("version", check=False, timeout=5) != ""

        eventually(
            "containerd answers",
            answers,
            timeout=timeout,
            interval=0.1,
        )
        # Pod sandboxes a dead node left behind (their shims outlive containerd).
        self.crictl("rmp", "--all", "--force", check=False)
        self._lap("containerd")

    def _ctr(self, *args: str, check: bool = True, timeout: float = 300) -> str:
        return run(
            [self.binaries.tool("ctr"), "--address", str(self.socket), "--namespace", "k8s.io", *args],
            check=check,
            timeout=timeout,
        )

    def crictl(self, *args: str, check: bool = True, timeout: float = 120) -> str:
        """Run crictl against this node's containerd."""
        endpoint = f"unix://{self.socket}"
        return run(
            [
                str(self.binaries.crictl),
                "--runtime-endpoint",
                endpoint,
                "--image-endpoint",
                endpoint,
                "--timeout",
                "60s",
                *args,
            ],
            check=check,
            timeout=timeout,
        )

    def import_images(self, images: Iterable[str]) -> None:
        """Each image from buildah's storage into containerd's k8s.io namespace, unless the same image ID was
        imported before (containerd's root is cached; the stamp files beside it record what it holds)."""
        buildah = self.binaries.tool("buildah")
        env = {"CONTAINERS_STORAGE_CONF": str(REALNODE_CACHE / "storage.conf")}
        stamps = REALNODE_CACHE / "imported"
        stamps.mkdir(parents=True, exist_ok=True)
        present = set(self._ctr("images", "list", "--quiet").split())
        for image in images:
            image_id = run(
                [buildah, "inspect", "--type", "image", "--format", "{{.FromImageID}}", image], check=False, env=env
            ).strip()
            if not image_id:
                raise RealNodeError(f"image {image} is not in buildah's storage: build it with scripts/realnode-images")
            stamp = stamps / image.replace("/", "_").replace(":", "_")
            if image in present and stamp.is_file() and stamp.read_text() == image_id:
                continue
            archive = REALNODE_CACHE / "import.tar"
            archive.unlink(missing_ok=True)
            run([buildah, "push", "--quiet", image, f"docker-archive:{archive}:{image}"], env=env, timeout=600)
            self._ctr("images", "import", str(archive), timeout=600)
            archive.unlink()
            stamp.write_text(image_id)
            self._lap(f"imported {image}")
        self._lap("images")

    def _start_control_plane(self, timeout: float) -> None:
        # kube-apiserver's client identity towards the kubelet (logs, exec, port-forward): a CA of its own, which
        # the kubelet trusts beside the control plane's.
        pki_dir = self.work_dir / "kubelet-pki"
        kubelet_ca = Pki("realnode-kubelet-client-ca")
        client = kubelet_ca.issue("kube-apiserver-kubelet-client", organizations=["system:masters"])
        write_private(pki_dir / "ca.crt", kubelet_ca.ca.cert_pem)
        write_private(pki_dir / "client.crt", client.cert_pem)
        write_private(pki_dir / "client.key", client.key_pem)
        self.control_plane = ControlPlane(
            self.k8s,
            self.work_dir / "control-plane",
            advertise_address=config.NODE_IP,
            service_cidr=config.SERVICE_CIDR,
            disabled_controllers=(),  # a real kubelet heartbeats: the node lifecycle controllers belong here
            apiserver_flags=[
                "--kubelet-preferred-address-types=InternalIP",
                f"--kubelet-client-certificate={pki_dir / 'client.crt'}",
                f"--kubelet-client-key={pki_dir / 'client.key'}",
            ],
            crds=PROJECT_CRDS,
        )
        self.control_plane.start(timeout)
        cp = self.control_plane
        (pki_dir / "client-ca.crt").write_bytes(cp.ca_cert.read_bytes() + kubelet_ca.ca.cert_pem)
        # RBAC only (no Node authorizer): the nodes group gets the system:node role.
        cp.kubectl(
            "create", "clusterrolebinding", "realnode-system-nodes", "--clusterrole=system:node", "--group=system:nodes"
        )
        self._spawn(
            "socat",
            [
                self.binaries.tool("socat"),
                f"TCP-LISTEN:{cp.port},bind={config.NODE_IP},reuseaddr,fork",
                f"TCP:127.0.0.1:{cp.port}",
            ],
        )
        self.api = kubernetes.config.new_client_from_config(config_file=str(cp.admin_kubeconfig))
        self._lap("control plane")

    def _start_node(self, timeout: float) -> None:
        cp = self.control_plane
        assert cp is not None
        kubelet_kubeconfig = cp.user_kubeconfig(f"system:node:{config.NODE_NAME}", ["system:nodes"])
        proxy_kubeconfig = cp.user_kubeconfig("system:kube-proxy")
        scheduler_kubeconfig = cp.user_kubeconfig("system:kube-scheduler")
        resolv = self.work_dir / "resolv.conf"
        resolv.write_text(f"nameserver {config.DNS_IP}\n")
        kubelet_yaml = self.work_dir / "kubelet.json"
        kubelet_yaml.write_text(
            config.kubelet_config(self.work_dir / "kubelet-pki" / "client-ca.crt", self.socket, resolv)
        )
        proxy_yaml = self.work_dir / "kube-proxy.json"
        proxy_yaml.write_text(config.kube_proxy_config(proxy_kubeconfig))
        self._spawn(
            "kubelet",
            [
                str(self.binaries.kubelet),
                f"--config={kubelet_yaml}",
                f"--kubeconfig={kubelet_kubeconfig}",
                f"--root-dir={self.kubelet_dir}",
                f"--hostname-override={config.NODE_NAME}",
                f"--node-ip={config.NODE_IP}",
                "--v=1",
            ],
        )
        self._spawn(
            "kube-scheduler",
            [
                str(self.binaries.kube_scheduler),
                f"--kubeconfig={scheduler_kubeconfig}",
                f"--authentication-kubeconfig={scheduler_kubeconfig}",
                f"--authorization-kubeconfig={scheduler_kubeconfig}",
                "--leader-elect=false",
                "--secure-port=0",
                "--v=1",
            ],
        )
        self._spawn("kube-proxy", [str(self.binaries.kube_proxy), f"--config={proxy_yaml}", "--v=1"])

        def node_ready() -> bool:
            for name in ("kubelet", "kube-scheduler", "kube-proxy", "socat"):
                self._check_running(name)
            try:
                node = cp.get(f"/api/v1/nodes/{config.NODE_NAME}")
            except ControlPlaneError:
                return False
            conditions = {c["type"]: c["status"] for c in node.get("status", {}).get("conditions", [])}
            # The node lifecycle controller lifts the not-ready taint the kubelet registers with.
            return conditions.get("Ready") == "True" and not node["spec"].get("taints")

        eventually("the node is Ready and untainted", node_ready, timeout=timeout, interval=0.2)
        self._lap("node Ready")

    def _start_addons(self, timeout: float) -> None:
        cp = self.control_plane
        assert cp is not None and self.api is not None
        cp.kubectl("apply", "-f", "-", input=json.dumps(config.STORAGE_CLASS_MANIFEST))
        self.provisioner = HostPathProvisioner(self.api, self.work_dir / "volumes")
        self.provisioner.start()
        manifest = (HERE / "coredns.yaml").read_text().replace("@IMAGE@", config.COREDNS_IMAGE)
        cp.kubectl("apply", "-f", "-", input=manifest.replace("@DNS_IP@", config.DNS_IP))
        cp.kubectl(
            "-n",
            "kube-system",
            "rollout",
            "status",
            "deploy/coredns",
            f"--timeout={int(timeout)}s",
            timeout=timeout + 10,
        )
        self._lap("CoreDNS Ready")

    # -- stop

    def stop(self) -> None:
        """Stop everything and put the host back. Idempotent; never raises for a piece already gone."""
        if not self._started:
            return
        self._started = False
        if self.provisioner is not None:
            self.provisioner.stop()
        self._stop_process("kubelet")
        if "containerd" in self._processes and self._processes["containerd"].running:
            # Stops and removes every pod sandbox: CNI DEL (veth, address), the pods' /dev/shm and netns mounts.
            self.crictl("rmp", "--all", "--force", check=False, timeout=180)
        for name in ("kube-proxy", "kube-scheduler", "socat"):
            self._stop_process(name)
        if self.control_plane is not None:
            self.control_plane.stop()
        if self.api is not None:
            self.api.close()
        if self._lock.held:
            self._teardown_host()
            self._lock.release()

    def _stop_process(self, name: str) -> None:
        process = self._processes.pop(name, None)
        if process is not None:
            process.stop(timeout=20)

    def _teardown_host(self) -> None:
        """Undo what `start` did to the host (also what a dead node left: called with the lock held)."""
        with contextlib.suppress(RealNodeError):
            run([str(self.binaries.kube_proxy), "--cleanup"], check=False, timeout=60)  # its nftables tables
        self._stop_process("containerd")
        self._kill_shims()
        for target in sorted(self._our_mounts(), reverse=True):
            run(["umount", "-l", target], check=False)
        self._remove_iptables_leftovers()
        ip, nft = self.binaries.tools["ip"] or "ip", self.binaries.tools["nft"] or "nft"
        run([ip, "link", "del", config.BRIDGE], check=False)
        run([nft, "delete", "table", "inet", config.GUARD_TABLE], check=False)
        before = STATE_DIR / "sysctl.before.json"
        if before.is_file():
            failed = write_sysctls(json.loads(before.read_text()))
            if failed:
                logger.warning("sysctls not restored: %s", failed)
        for hierarchy in Path("/sys/fs/cgroup").glob("*/kubepods"):
            for folder in sorted((p for p in hierarchy.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                with contextlib.suppress(OSError):
                    folder.rmdir()
            with contextlib.suppress(OSError):
                hierarchy.rmdir()
        for leftover in (self.kubelet_dir, self.work_dir / "cni", self.work_dir / "volumes"):
            shutil.rmtree(leftover, ignore_errors=True)
        # What containerd 1.6 and libcni keep outside the configured folders.
        results = Path("/var/lib/cni/results")
        for result in [*results.glob(f"{config.CNI_NETWORK}-*"), *results.glob("cni-loopback-*")]:
            result.unlink(missing_ok=True)
        for folder in (
            "/var/lib/cni/results",
            "/var/lib/cni",
            "/run/containerd/s",
            "/run/containerd/fifo",
            "/run/containerd/io.containerd.runtime.v2.task/k8s.io",
            "/run/containerd/io.containerd.runtime.v2.task",
            "/run/containerd",
        ):
            with contextlib.suppress(OSError):
                os.rmdir(folder)
        shutil.rmtree(STATE_DIR, ignore_errors=True)

    def _kill_shims(self) -> None:
        """SIGKILL the containerd shims of this node's pods (found by this node's socket on their command line)."""
        needle = f"-address\0{self.socket}\0".encode()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                if needle in (proc / "cmdline").read_bytes():
                    os.kill(int(proc.name), 9)

    def _our_mounts(self) -> list[str]:
        roots = (str(self.work_dir) + "/", str(STATE_DIR) + "/", str(self.containerd_root) + "/")
        mounts = []
        with contextlib.suppress(OSError):
            for line in Path("/proc/self/mounts").read_text().splitlines():
                target = line.split()[1].replace("\\040", " ")
                if target.startswith(roots):
                    mounts.append(target)
        return mounts

    def _remove_iptables_leftovers(self) -> None:
        """The kubelet's KUBE-FIREWALL/canary chains, and iptables-nft tables that only it made (now empty)."""
        for ipt in ("iptables", "ip6tables"):
            if shutil.which(ipt) is None:
                continue
            for base in ("INPUT", "OUTPUT"):
                for _ in range(5):  # one jump per kubelet start
                    if not succeeds([ipt, "-t", "filter", "-D", base, "-j", "KUBE-FIREWALL"]):
                        break
            for table in ("mangle", "nat", "filter"):
                for chain in config.IPTABLES_CHAINS:
                    run([ipt, "-t", table, "-F", chain], check=False, timeout=30)
                    run([ipt, "-t", table, "-X", chain], check=False, timeout=30)
        before_file = STATE_DIR / "nft-tables.before.json"
        before = set(json.loads(before_file.read_text())) if before_file.is_file() else set()
        for table in sorted(iptables_nft_tables() - before):
            listing = run(["nft", "list", "table", *table.split()], check=False)
            rules = [
                line
                for line in listing.splitlines()
                if line.strip() and not line.strip().startswith(("table", "chain", "type", "}", "policy"))
            ]
            if not rules:
                run(["nft", "delete", "table", *table.split()], check=False)

    # -- use

    def kubeconfig(self) -> Path:
        if self.control_plane is None:
            raise RealNodeError("the node is not started")
        return self.control_plane.admin_kubeconfig

    def container_id(self, namespace: str, pod: str, container: str) -> str:
        """The runtime's ID of a running container (from the pod's status)."""
        cp = self.control_plane
        assert cp is not None
        status: dict[str, Any] = cp.get(f"/api/v1/namespaces/{namespace}/pods/{pod}")["status"]
        for entry in status.get("containerStatuses", []):
            if entry["name"] == container and entry.get("containerID"):
                return str(entry["containerID"]).split("://", 1)[1]
        raise RealNodeError(f"{namespace}/{pod} has no running container {container}")

    def kill_container(self, namespace: str, pod: str, container: str) -> None:
        """SIGKILL the main process of a container, as the kernel's OOM killer or a crash would."""
        self._ctr("tasks", "kill", "--signal", "SIGKILL", self.container_id(namespace, pod, container))
