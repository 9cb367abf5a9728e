"""The test kubelet: runs the pods of one namespace of the e2e control plane as local processes.

One loop thread, level-triggered: informers (pods, services, endpointslices, configmaps, secrets) keep stores and
wake it; each pass binds new pods to the Node, gives bound pods a network namespace and a worker thread
(`PodWorker`), passes deletions on, tears finished pods down and deletes their objects, rewrites every pod's
hosts file and rebuilds the service proxy's nftables table when they change. See docs/k8s-test-env.md.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import kubernetes

from tests.e2e.kubeenv import SERVICE_CLUSTER_IP_RANGE
from tests.e2e.kubelet import network
from tests.e2e.kubelet.cluster import Cluster, api_client
from tests.e2e.kubelet.informer import Informer
from tests.e2e.kubelet.network import HostLock, HostNetwork, PodNetwork, dns_lines, hosts_file, netns_name
from tests.e2e.kubelet.pod import PodWorker
from tests.e2e.kubelet.proxy import ServiceProxy
from tests.e2e.kubelet.runner import PodContext
from tests.e2e.kubelet.volumes import MountPoints, PodVolumes, sweep_mount_points

logger = logging.getLogger(__name__)
NODE_NAME = "e2e-node"
MOUNT_RECORD = network.STATE_DIR / "mount-points"


class KubeletError(RuntimeError):
    """The kubelet cannot run here, or a test asked about a pod it does not run."""


def missing_requirements() -> list[str]:
    """What this machine lacks for the test kubelet (empty when nothing)."""
    missing = [f"`{tool}` on PATH" for tool in ("ip", "nft") if shutil.which(tool) is None]
    if os.geteuid() != 0:
        missing.append("root (network and mount namespaces, nftables)")
    return missing


class Kubelet:
    """`start()`, then pods of `namespace` run; `stop()` kills them all and removes everything it made."""

    def __init__(
        self,
        kubeconfig: Path,
        namespace: str,
        work_dir: Path,
        *,
        node_name: str = NODE_NAME,
        service_cidr: str = SERVICE_CLUSTER_IP_RANGE,
        grace_cap: float = 10.0,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.work_dir = work_dir
        self.node_name = node_name
        self.host_ip = network.GATEWAY
        self.grace_cap = grace_cap
        self.pvc_root = work_dir / "pvc"
        self.log_root = work_dir / "logs"
        self.api = api_client(kubeconfig)
        self.core = kubernetes.client.CoreV1Api(self.api)
        self._informers: dict[str, Informer] = {}
        self.cluster = Cluster(self.core, namespace, node_name, self.host_ip, self._informers)
        self.host = HostNetwork(service_cidr)
        self.proxy = ServiceProxy(service_cidr)
        self.mount_points = MountPoints(MOUNT_RECORD)
        self.executor = ThreadPoolExecutor(max_workers=16, thread_name_prefix="probe")
        self.timings: dict[str, dict[str, float]] = {}
        """Per pod name: seconds from binding to `network` set up, first `running` and first `ready`."""
        self._lock = HostLock()
        self._queue: queue.Queue[tuple[str, str]] = queue.Queue()
        self._workers: dict[str, PodWorker] = {}
        self._done: set[str] = set()
        self._bound: dict[str, float] = {}
        self._stopping = threading.Event()
        self._loop_thread: threading.Thread | None = None
        self._started = False
        self._log_handler: logging.Handler | None = None

    # -- lifecycle

    def __enter__(self) -> Kubelet:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 30.0, lock_timeout: float = 180.0) -> None:
        """Set the host up and start watching; `lock_timeout`: how long to wait for another test kubelet on
        this machine to stop."""
        missing = missing_requirements()
        if missing:
            raise KubeletError("the test kubelet needs " + ", ".join(missing))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._log_handler = logging.FileHandler(self.work_dir / "kubelet.log")
        self._log_handler.setFormatter(logging.Formatter("%(asctime)s %(threadName)s %(levelname)s %(message)s"))
        package_logger = logging.getLogger("tests.e2e.kubelet")
        package_logger.addHandler(self._log_handler)
        package_logger.setLevel(logging.INFO)
        atexit.register(self.stop)
        self._started = True
        try:
            self._lock.acquire(lock_timeout)
            swept = network.sweep()
            ServiceProxy.delete()
            sweep_mount_points(MOUNT_RECORD)
            if swept:
                logger.warning("removed leftovers of an earlier test kubelet: %s", swept)
            self.host.create()
            self.proxy.sync([], [])
            self.cluster.ensure_node()
            self._start_informers(timeout)
            self._loop_thread = threading.Thread(target=self._loop, name="kubelet", daemon=True)
            self._loop_thread.start()
        except BaseException:
            self.stop()
            raise

    def _start_informers(self, timeout: float) -> None:
        kinds = {
            "Pod": lambda api: kubernetes.client.CoreV1Api(api).list_namespaced_pod,
            "Service": lambda api: kubernetes.client.CoreV1Api(api).list_namespaced_service,
            "EndpointSlice": lambda api: kubernetes.client.DiscoveryV1Api(api).list_namespaced_endpoint_slice,
            "ConfigMap": lambda api: kubernetes.client.CoreV1Api(api).list_namespaced_config_map,
            "Secret": lambda api: kubernetes.client.CoreV1Api(api).list_namespaced_secret,
        }
        for kind, list_fn in kinds.items():
            api = api_client(self.kubeconfig)
            informer = Informer(kind, api, list_fn(api), self.namespace, self._queue)
            self._informers[kind] = informer
            informer.start()
        deadline = time.monotonic() + timeout
        for informer in self._informers.values():
            if not informer.synced.wait(max(0.0, deadline - time.monotonic())):
                raise KubeletError(f"the {informer.kind} informer did not list within {timeout} s")

    def stop(self) -> None:
        """Kill every pod process, delete the pods' objects (they have no kubelet any more), remove every
        namespace, link, nftables table, /etc/netns folder and mount point made. Idempotent."""
        if not self._started:
            return
        self._started = False
        atexit.unregister(self.stop)
        self._stopping.set()
        if self._loop_thread is not None:
            self._loop_thread.join(10)
        for informer in self._informers.values():
            informer.stop()
        workers = list(self._workers.values())
        for worker in workers:
            worker.request_termination(0)
            for runner in worker.containers:
                runner.reap(5.0)
        for worker in workers:
            worker.join(10)
            worker.net.destroy()
            try:
                self.cluster.delete_pod(worker.pod_name, worker.uid)
            except Exception as exc:  # the apiserver may be gone already (atexit)
                logger.warning("pod %s not deleted: %s", worker.pod_name, exc)
        self._workers.clear()
        for informer in self._informers.values():
            informer.join(5)
        if self._lock.held:  # else another kubelet owns the host's network: leave it alone
            self.proxy.delete()
            network.sweep()  # the pods' namespaces, the bridge, ip_forward
            self.mount_points.remove_created()
            self._lock.release()
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.api.close()
        if self._log_handler is not None:
            logging.getLogger("tests.e2e.kubelet").removeHandler(self._log_handler)
            self._log_handler.close()

    # -- the loop

    def _loop(self) -> None:
        while not self._stopping.is_set():
            changed: set[tuple[str, str]] = set()
            try:
                changed.add(self._queue.get(timeout=0.5))
                while True:
                    changed.add(self._queue.get_nowait())
            except queue.Empty:
                pass
            if self._stopping.is_set():
                return
            try:
                self._sync(changed)
            except Exception:
                logger.exception("kubelet sync failed; retrying")
                self._stopping.wait(0.5)

    def _notify(self) -> None:
        self._queue.put(("", ""))

    def _sync(self, changed: set[tuple[str, str]]) -> None:
        pods = self._informers["Pod"].snapshot()
        services = list(self._informers["Service"].snapshot().values())
        slices = list(self._informers["EndpointSlice"].snapshot().values())
        dns = dns_lines(self.namespace, services, slices)
        live = {pod["metadata"]["uid"] for pod in pods.values()}
        for uid, worker in self._workers.items():
            if uid not in live:
                worker.request_termination(0)  # force-deleted: nothing to wait for
        for pod in pods.values():
            self._sync_pod(pod, dns)
        for uid, worker in list(self._workers.items()):
            if worker.finished.is_set():
                self._teardown(worker)
                del self._workers[uid]
                self._done.add(uid)
        for worker in self._workers.values():
            worker.net.update_hosts(hosts_file(worker.ctx.pod, worker.net.ip, dns))
        if self.proxy.sync(services, slices):
            logger.info("service proxy: %s", self.proxy.routes)
        for kind, name in changed:
            if kind in ("ConfigMap", "Secret") and name:
                for worker in self._workers.values():
                    worker.ctx.volumes.refresh(kind, name)

    def _sync_pod(self, pod: dict[str, Any], dns: list[str]) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        uid, node = meta["uid"], spec.get("nodeName")
        if not node:
            if not meta.get("deletionTimestamp") and uid not in self._bound and self.cluster.bind(pod):
                self._bound[uid] = time.monotonic()
            return
        if node != self.node_name or uid in self._done:
            return
        worker = self._workers.get(uid)
        if meta.get("deletionTimestamp"):
            grace = float(meta.get("deletionGracePeriodSeconds") or 0)
            if worker is None:
                self.cluster.delete_pod(meta["name"], uid)
                self._done.add(uid)
            else:
                worker.request_termination(min(grace, self.grace_cap))
            return
        if worker is None and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            self._start_pod(pod, dns)

    def _start_pod(self, pod: dict[str, Any], dns: list[str]) -> None:
        meta = pod["metadata"]
        name, uid = meta["name"], meta["uid"]
        ip = self.host.allocate_ip()
        net = PodNetwork(netns_name(self.namespace, name, uid), ip)
        net.create(hosts_file(pod, ip, dns))
        pod_dir = self.work_dir / "pods" / f"{name}-{uid[:8]}"
        pod_dir.mkdir(parents=True, exist_ok=True)
        volumes = PodVolumes(
            pod,
            pod_dir,
            self.pvc_root,
            lookup=self.cluster.lookup,
            token=lambda ref: self.cluster.token(pod, ref),
            pod_ip=ip,
            host_ip=self.host_ip,
        )
        ctx = PodContext(
            pod=pod,
            netns=net.netns,
            pod_ip=ip,
            host_ip=self.host_ip,
            pod_dir=pod_dir,
            log_dir=self.log_root / f"{self.namespace}_{name}_{uid}",
            volumes=volumes,
            mount_points=self.mount_points,
            lookup=self.cluster.lookup,
            executor=self.executor,
            emit=lambda kind, reason, message, path: self.cluster.events.emit(pod, kind, reason, message, path),
            grace_cap=self.grace_cap,
        )
        bound = self._bound.get(uid, time.monotonic())
        self.timings[name] = {"network": time.monotonic() - bound}
        worker = PodWorker(ctx, net, self.core, self._notify, timings=self.timings[name], origin=bound)
        self._workers[uid] = worker
        logger.info("pod %s: netns %s, ip %s", name, net.netns, ip)
        worker.start()

    def _teardown(self, worker: PodWorker) -> None:
        worker.net.destroy()
        worker.ctx.volumes.remove()
        if worker.grace is not None:
            self.cluster.delete_pod(worker.pod_name, worker.uid)
        logger.info("pod %s (uid %s) torn down", worker.pod_name, worker.uid)

    # -- for tests

    def worker(self, pod: str) -> PodWorker:
        """The worker of the running pod named `pod` (the newest one, when a re-created pod is starting)."""
        found = [w for w in list(self._workers.values()) if w.pod_name == pod and not w.finished.is_set()]
        if not found:
            raise KubeletError(f"the test kubelet runs no pod {self.namespace}/{pod}")
        return max(found, key=lambda w: w.created)

    def pod_ip(self, pod: str) -> str:
        return self.worker(pod).net.ip

    def netns(self, pod: str) -> str:
        return self.worker(pod).net.netns

    def pid(self, pod: str, container: str | None = None) -> int | None:
        """The pid of the container's process (None while it is not running)."""
        return self.worker(pod).container(container).pid

    def kill(self, pod: str, sig: int = signal.SIGKILL, container: str | None = None) -> int:
        """Signal the container's process group, as `kill -9` of its main process would end a container;
        returns the pid signalled."""
        runner = self.worker(pod).container(container)
        pid = runner.pid
        if pid is None or not runner.signal(sig):
            raise KubeletError(f"container {runner.name} of pod {pod} is not running")
        return pid

    def hosts(self, pod: str) -> str:
        return (network.ETC_NETNS / self.netns(pod) / "hosts").read_text()

    def logs(self, pod: str, container: str | None = None) -> str:
        """The container's stdout and stderr (every run, each after a `--- test kubelet: start` line); the
        newest pod of that name, running or not."""
        folders = sorted(self.log_root.glob(f"{self.namespace}_{pod}_*"), key=lambda p: p.stat().st_mtime)
        if not folders:
            raise KubeletError(f"no logs of pod {pod}")
        files = sorted(folders[-1].glob(f"{container or '*'}.log"))
        return "".join(path.read_text(errors="replace") for path in files)

    def pvc_dir(self, claim: str) -> Path:
        return self.pvc_root / self.namespace / claim

    def exec(
        self, pod: str, argv: list[str], *, timeout: float = 30, container: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run `argv` inside the container (its mount, UTS and network namespaces: `kubectl exec`), or in the
        pod's network namespace when the container is not running."""
        worker = self.worker(pod)
        pid = worker.container(container).pid
        nsenter = shutil.which("nsenter")
        if pid is not None and nsenter:
            command = [nsenter, "-t", str(pid), "-m", "-u", "-n", "--", *argv]
        else:
            command = ["ip", "netns", "exec", worker.net.netns, *argv]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
