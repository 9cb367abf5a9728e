"""A real Kubernetes control plane for the e2e tier: etcd, kube-apiserver and kube-controller-manager.

All three run as plain processes on 127.0.0.1 with free ports; there is no scheduler and no kubelet,
so pods are created (by the StatefulSet controller, say) but stay Pending with no node.

- Identities are client certificates signed by one throwaway CA (`Pki`, in kubepki.py): the test driver
  is "admin" in system:masters, kube-controller-manager is "system:kube-controller-manager" in
  system:masters (so its writes are told apart from the tests' in the audit log), and `user_kubeconfig`
  issues more.
- Authorization is RBAC, admission is the apiserver's default set *including* ServiceAccount: the
  serviceaccount controller creates the `default` ServiceAccount of every new namespace, and pods get
  the projected token volume a real cluster gives them.
- Every request is written to a JSON audit log at Metadata level; `mark()` and `audit_writes()` read it.

docs/k8s-test-env.md describes how the binaries are built and what differs from a real cluster.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import ipaddress
import json
import os
import re
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from brokergroup.local.ports import free_ports
from brokergroup.local.processes import LocalProcess, tail
from tests.e2e.kubepki import KeyPair, Pki, kubeconfig, service_account_keys, write_private

KUBERNETES_VERSION = "v1.33.13"
HELM_VERSION = "v3.21.4"
CACHE = Path(os.environ.get("BROKERGROUP_K8S_CACHE") or Path.home() / ".cache" / "brokergroup" / "k8s")
"""Where scripts/k8s-bins builds the binaries and copies the CRDs (the same variable and default)."""
PROJECT_CRDS = sorted((Path(__file__).resolve().parents[2] / "crds").glob("*.yaml"))
"""The project's CRDs (crds/*.yaml), which the e2e fixture installs before kube-controller-manager starts."""
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
ADVERTISE_ADDRESS = "10.255.0.1"
"""What the `default/kubernetes` Service's endpoints say; nothing dials it. Endpoints validation refuses
loopback addresses, so with 127.0.0.1 the apiserver logs a failed sync of that Service every 10 s."""
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
ADMIN_USER = "admin"
KCM_USER = "system:kube-controller-manager"
DISABLED_CONTROLLERS = (
    # No kubelet ever heartbeats a Node: these would mark nodes NotReady, evict and force-delete pods.
    "node-lifecycle-controller",
    "taint-eviction-controller",
    "pod-garbage-collector-controller",
)
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata"}],
}

T = TypeVar("T")

Kubectl = Callable[..., subprocess.CompletedProcess[str]]
"""`ControlPlane.kubectl` or `ControlPlane.helm`: argv in, the finished process out (raises unless `check=False`)."""


class ControlPlaneError(RuntimeError):
    """A component did not start, or the control plane is used before `start()`."""


class KubectlError(subprocess.CalledProcessError):
    def __str__(self) -> str:
        return f"{super().__str__()}\nstdout: {self.output}\nstderr: {self.stderr}"


def eventually(what: str, check: Callable[[], T], timeout: float = 30.0, interval: float = 0.1) -> T:
    """Poll `check` until it returns something truthy and return that; fail after `timeout` seconds.

    An exception from `check` counts as "not yet" and is quoted in the failure.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            result = check()
        except Exception as exc:
            last = exc
        else:
            if result:
                return result
            last = result
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not true within {timeout} s (last result: {last!r})")
        time.sleep(interval)


# ----------------------------------------------------------------------------------------- binaries


@dataclasses.dataclass(frozen=True)
class Binaries:
    """Where the control plane's programs are: see `discover`."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kubectl: Path
    helm: Path

    @classmethod
    def discover(cls) -> Binaries:
        """BROKERGROUP_K8S_BIN, BROKERGROUP_HELM_BIN and BROKERGROUP_ETCD override the defaults, which are
        the cache `scripts/k8s-bins` fills and Debian's etcd-server."""
        k8s = Path(os.environ.get("BROKERGROUP_K8S_BIN") or CACHE / f"kubernetes-{KUBERNETES_VERSION}" / "bin")
        helm = Path(os.environ.get("BROKERGROUP_HELM_BIN") or CACHE / f"helm-{HELM_VERSION}" / "bin")
        etcd = os.environ.get("BROKERGROUP_ETCD") or shutil.which("etcd") or "/usr/bin/etcd"
        return cls(
            etcd=Path(etcd),
            kube_apiserver=k8s / "kube-apiserver",
            kube_controller_manager=k8s / "kube-controller-manager",
            kubectl=k8s / "kubectl",
            helm=helm / "helm",
        )

    def missing(self, *, helm: bool = False) -> list[Path]:
        """The required programs that are not executable files (helm only when asked for)."""
        wanted = [self.etcd, self.kube_apiserver, self.kube_controller_manager, self.kubectl]
        if helm:
            wanted.append(self.helm)
        return [path for path in wanted if not (path.is_file() and os.access(path, os.X_OK))]


# ------------------------------------------------------------------------------------ control plane


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager on 127.0.0.1. Use as a context manager, or
    `start()` then `stop()`; `stop()` is idempotent and also registered with atexit.

    `work_dir` (certificates, kubeconfigs, process logs, the audit log) is kept if given and removed
    if the control plane made it; etcd's data directory is always a fresh tmpfs folder, removed on stop.
    """

    def __init__(
        self,
        binaries: Binaries | None = None,
        work_dir: Path | None = None,
        *,
        advertise_address: str = ADVERTISE_ADDRESS,
        service_cidr: str = SERVICE_CLUSTER_IP_RANGE,
        disabled_controllers: Iterable[str] = DISABLED_CONTROLLERS,
        apiserver_flags: Iterable[str] = (),
        crds: Iterable[Path] = (),
    ) -> None:
        """`service_cidr`, `disabled_controllers` and `apiserver_flags` (appended to kube-apiserver's command
        line) are for a control plane with a real node (tests/e2e/realnode): its kubelet heartbeats, so the
        node lifecycle controllers belong there, and pods reach the apiserver at `advertise_address`."""
        self.binaries = binaries or Binaries.discover()
        self.service_cidr = str(ipaddress.ip_network(service_cidr))
        self.disabled_controllers = tuple(disabled_controllers)
        self.apiserver_flags = list(apiserver_flags)
        self.crds = list(crds)
        """CustomResourceDefinition files applied before kube-controller-manager starts (see `_install_crds`)."""
        _sweep_stale_dirs()
        self._owns_work_dir = work_dir is None
        self.work_dir = _owned_tmp_dir("brokergroup-k8s-") if work_dir is None else work_dir
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.advertise_address = advertise_address
        self._etcd_dir: Path | None = None
        self._processes: list[LocalProcess] = []
        self._pki: Pki | None = None
        self._admin_opener: urllib.request.OpenerDirector | None = None
        self.timings: dict[str, float] = {}
        """Seconds each component took to become ready, in start order."""
        etcd_port, self._peer_port, self.port, self.kcm_port = free_ports(4)
        self.etcd_url = f"http://127.0.0.1:{etcd_port}"
        self.server = f"https://127.0.0.1:{self.port}"
        self.ca_cert = self.work_dir / "pki" / "ca.crt"
        self.admin_kubeconfig = self.work_dir / "admin.kubeconfig"
        self.audit_log = self.work_dir / "audit.log"

    @property
    def first_service_ip(self) -> str:
        """The `default/kubernetes` Service's ClusterIP: the serving certificate names it."""
        return str(next(ipaddress.ip_network(self.service_cidr).hosts()))

    # -- lifecycle

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 90.0) -> None:
        """Start the three components in order, each polled until healthy; on any failure stop them all."""
        atexit.register(self.stop)
        try:
            self._write_pki()
            self._start_etcd(timeout)
            self._start_apiserver(timeout)
            self._install_crds(timeout)
            self._start_controller_manager(timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop in reverse start order (SIGTERM to each process, SIGKILL after 15 s), remove temp dirs."""
        atexit.unregister(self.stop)
        while self._processes:
            self._processes.pop().stop(timeout=15)
        if self._etcd_dir is not None:
            shutil.rmtree(self._etcd_dir, ignore_errors=True)
            self._etcd_dir = None
        if self._owns_work_dir and not os.environ.get("BROKERGROUP_K8S_KEEP"):
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def _write_pki(self) -> None:
        pki = self._pki = Pki()
        sa = service_account_keys()
        serving = pki.issue(
            "kube-apiserver",
            dns_names=["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"],
            ip_addresses=sorted({"127.0.0.1", self.advertise_address, self.first_service_ip}),
            server=True,
        )
        d = self.work_dir / "pki"
        write_private(d / "ca.crt", pki.ca.cert_pem)
        write_private(d / "ca.key", pki.ca.key_pem)
        write_private(d / "apiserver.crt", serving.cert_pem)
        write_private(d / "apiserver.key", serving.key_pem)
        write_private(d / "sa.pub", sa.cert_pem)
        write_private(d / "sa.key", sa.key_pem)
        admin = self._write_kubeconfig(self.admin_kubeconfig, ADMIN_USER, ["system:masters"])
        write_private(d / "admin.pem", admin.cert_pem + admin.key_pem)
        tls = ssl.create_default_context(cafile=str(self.ca_cert))
        tls.load_cert_chain(str(d / "admin.pem"))
        self._admin_opener = _opener(tls)
        self._write_kubeconfig(self.work_dir / "kcm.kubeconfig", KCM_USER, ["system:masters"])
        write_private(self.work_dir / "audit-policy.json", json.dumps(AUDIT_POLICY).encode())

    def _write_kubeconfig(self, path: Path, user: str, groups: Iterable[str]) -> KeyPair:
        assert self._pki is not None
        identity = self._pki.issue(user, organizations=groups)
        write_private(path, json.dumps(kubeconfig(self.server, self._pki.ca.cert_pem, user, identity)).encode())
        return identity

    def user_kubeconfig(self, name: str, groups: Iterable[str] = ()) -> Path:
        """Issue a client certificate for user `name` in `groups` and write a kubeconfig for it."""
        if self._pki is None:
            raise ControlPlaneError("user_kubeconfig() needs a started control plane")
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        path = self.work_dir / "users" / f"{safe}.kubeconfig"
        self._write_kubeconfig(path, name, list(groups))
        return path

    def _spawn(self, name: str, command: list[str]) -> LocalProcess:
        # Own session (so a Ctrl-C reaches only pytest, which then stops them in order) and, when
        # util-linux's setpriv is there, SIGTERM on the test process's death: `timeout pytest` or a
        # killed run does not run atexit handlers. (The death signal follows the forking *thread*.)
        process = LocalProcess(name, self.work_dir, self.work_dir / f"{name}.log", detached=True)
        self._processes.append(process)
        setpriv = shutil.which("setpriv")
        process.spawn([setpriv, "--pdeathsig", "TERM", "--", *command] if setpriv else command, env={})
        return process

    def _start_etcd(self, timeout: float) -> None:
        self._etcd_dir = _owned_tmp_dir("brokergroup-etcd-")
        peer = f"http://127.0.0.1:{self._peer_port}"
        process = self._spawn(
            "etcd",
            [
                str(self.binaries.etcd),
                "--name=e2e",
                f"--data-dir={self._etcd_dir / 'data'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=e2e={peer}",
                "--initial-cluster-state=new",
                "--logger=zap",
                "--log-outputs=stderr",
            ],
        )
        self._wait_ready(process, f"{self.etcd_url}/health", _opener(None), timeout)

    def _start_apiserver(self, timeout: float) -> None:
        pki = self.work_dir / "pki"
        process = self._spawn(
            "kube-apiserver",
            [
                str(self.binaries.kube_apiserver),
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.port}",
                f"--advertise-address={self.advertise_address}",
                f"--cert-dir={self.work_dir / 'apiserver-certs'}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                "--authorization-mode=RBAC",
                f"--service-cluster-ip-range={self.service_cidr}",
                "--allow-privileged=true",
                f"--service-account-issuer={self.server}",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                f"--audit-policy-file={self.work_dir / 'audit-policy.json'}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-mode=blocking",
                "--audit-log-maxsize=0",
                "--profiling=false",
                *self.apiserver_flags,
            ],
        )
        self._wait_ready(process, f"{self.server}/readyz?verbose", self._admin, timeout)

    def _install_crds(self, timeout: float) -> None:
        """Apply `crds` and wait until they are served. This comes before kube-controller-manager starts
        because its garbage collector finds resource types by discovery at start and then only every
        30 s: children owned by a custom resource whose CRD came later are collected after up to ~40 s.

        Discovery lists a CRD's versions only once it is Established, so polling discovery waits for both."""
        if not self.crds:
            return
        started = time.monotonic()
        result = self.kubectl("apply", "--server-side", *(f"--filename={path}" for path in self.crds), check=False)
        if result.returncode != 0:
            raise ControlPlaneError(
                f"installing the CRDs {[str(p) for p in self.crds]} failed: {result.stderr.strip()}"
            )
        for crd in self.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")["items"]:
            group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
            for version in [v["name"] for v in crd["spec"]["versions"] if v["served"]]:
                eventually(
                    f"{plural}.{group}/{version} is in discovery",
                    functools.partial(self._discoverable, f"/apis/{group}/{version}", plural),
                    timeout=timeout,
                    interval=0.05,
                )
        self.timings["crds"] = time.monotonic() - started

    def _discoverable(self, path: str, plural: str) -> bool:
        return any(resource["name"] == plural for resource in self.get(path)["resources"])

    def _start_controller_manager(self, timeout: float) -> None:
        pki = self.work_dir / "pki"
        kcm_kubeconfig = self.work_dir / "kcm.kubeconfig"
        process = self._spawn(
            "kube-controller-manager",
            [
                str(self.binaries.kube_controller_manager),
                f"--kubeconfig={kcm_kubeconfig}",
                f"--authentication-kubeconfig={kcm_kubeconfig}",
                f"--authorization-kubeconfig={kcm_kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.kcm_port}",
                f"--cert-dir={self.work_dir / 'kcm-certs'}",
                "--leader-elect=false",
                "--use-service-account-credentials=false",
                "--controllers=" + ",".join(["*", *(f"-{name}" for name in self.disabled_controllers)]),
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}",
                f"--cluster-signing-cert-file={pki / 'ca.crt'}",
                f"--cluster-signing-key-file={pki / 'ca.key'}",
                "--profiling=false",
            ],
        )
        # KCM serves /healthz with a self-signed certificate it makes in memory: nothing to verify it against.
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        self._wait_ready(process, f"https://127.0.0.1:{self.kcm_port}/healthz", _opener(insecure), timeout)
        # /healthz answers before the controllers' caches are synced: wait for one to have acted.
        started = time.monotonic()
        eventually(
            "the serviceaccount controller creates default/default",
            lambda: self.get("/api/v1/namespaces/default/serviceaccounts/default"),
            timeout=timeout,
            interval=0.05,
        )
        self.timings["controllers"] = time.monotonic() - started

    def _wait_ready(
        self, process: LocalProcess, url: str, opener: urllib.request.OpenerDirector, timeout: float
    ) -> None:
        started = time.monotonic()
        deadline = started + timeout
        last = "no answer yet"
        while True:
            if not process.running:
                code = process.proc.returncode if process.proc else None
                raise ControlPlaneError(
                    f"{process.name} exited (code {code}) before it was ready; "
                    f"last lines of {process.log_path}:\n{tail(process.log_path, 40)}"
                )
            try:
                status, body = _fetch(opener, url, timeout=5)
            except OSError as exc:
                last = repr(exc)
            else:
                if status == 200:
                    self.timings[process.name] = time.monotonic() - started
                    return
                last = f"HTTP {status}: {body.decode(errors='replace')[-2000:]}"
            if time.monotonic() >= deadline:
                raise ControlPlaneError(
                    f"{process.name} not ready at {url} within {timeout} s: {last}\n"
                    f"last lines of {process.log_path}:\n{tail(process.log_path, 40)}"
                )
            time.sleep(0.1)

    @property
    def _admin(self) -> urllib.request.OpenerDirector:
        """An opener that talks to the apiserver as admin (made once, by `_write_pki`)."""
        if self._admin_opener is None:
            raise ControlPlaneError("the apiserver is asked before start()")
        return self._admin_opener

    def get(self, path: str) -> Any:
        """GET `path` from the apiserver as admin and decode the JSON answer."""
        status, body = _fetch(self._admin, self.server + path)
        if status != 200:
            raise ControlPlaneError(f"GET {path}: HTTP {status}: {body.decode(errors='replace')[:500]}")
        return json.loads(body)

    # -- tools

    def _tool_env(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}
        helm = self.work_dir / "helm"
        env.update(
            HELM_CACHE_HOME=str(helm / "cache"),
            HELM_CONFIG_HOME=str(helm / "config"),
            HELM_DATA_HOME=str(helm / "data"),
        )
        return env

    def _run(
        self, command: list[str], *, check: bool, input: str | None, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            command, input=input, capture_output=True, text=True, timeout=timeout, env=self._tool_env(), check=False
        )
        if check and result.returncode != 0:
            raise KubectlError(result.returncode, command, result.stdout, result.stderr)
        return result

    def kubectl(
        self,
        *args: str,
        kubeconfig: Path | None = None,
        check: bool = True,
        input: str | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        """Run the cached kubectl as admin (or as the user of `kubeconfig`); text output captured."""
        command = [
            str(self.binaries.kubectl),
            f"--kubeconfig={kubeconfig or self.admin_kubeconfig}",
            f"--cache-dir={self.work_dir / 'kubectl-cache'}",
            *args,
        ]
        return self._run(command, check=check, input=input, timeout=timeout)

    def helm(
        self,
        *args: str,
        kubeconfig: Path | None = None,
        check: bool = True,
        input: str | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        """Run the cached helm against this control plane, with helm's cache and config in the work dir."""
        command = [str(self.binaries.helm), f"--kubeconfig={kubeconfig or self.admin_kubeconfig}", *args]
        return self._run(command, check=check, input=input, timeout=timeout)

    # -- audit log

    def audit_sync(self, timeout: float = 10.0) -> None:
        """Return once every request answered before this call is in the audit log.

        The apiserver writes an event after the response has gone out, so a request the client has seen
        completed may not be logged yet. This sends a uniquely named GET and waits for its event: requests
        are logged in the order they finish, so by then the earlier ones are there.
        """
        offset = self._audit_size()
        token = f"audit-barrier-{uuid.uuid4().hex}"
        status, body = _fetch(self._admin, f"{self.server}/api/v1/namespaces/default/configmaps/{token}")
        if status != 404:
            raise ControlPlaneError(f"audit barrier GET: expected HTTP 404, got {status}: {body[:500]!r}")
        eventually(
            "the audit log has the barrier request",
            lambda: any(token in event.get("requestURI", "") for event in self._read_audit(offset)),
            timeout=timeout,
            interval=0.02,
        )

    def _audit_size(self) -> int:
        try:
            return self.audit_log.stat().st_size
        except FileNotFoundError:
            return 0

    def _read_audit(self, after: int) -> list[dict[str, Any]]:
        """Whole events from byte `after` on. A size taken while the apiserver was writing a line can fall
        inside it: that line began before `after`, so it is skipped."""
        try:
            with self.audit_log.open("rb") as log:
                log.seek(max(0, after - 1))
                data = log.read()
        except FileNotFoundError:
            return []
        if after > 0:
            data = data[data.find(b"\n") + 1 :]  # from the first line that starts at or after `after`
        complete = data[: data.rfind(b"\n") + 1]  # a line being written has no newline yet
        return [json.loads(line) for line in complete.splitlines() if line.strip()]

    def mark(self) -> int:
        """A position in the audit log: pass it as `after=` to see only requests made since."""
        self.audit_sync()
        return self._audit_size()

    def audit_events(self, after: int = 0, *, sync: bool = True) -> list[dict[str, Any]]:
        """Every audit event (ResponseStarted and ResponseComplete stages) after the mark `after`."""
        if sync:
            self.audit_sync()
        return self._read_audit(after)

    def audit_writes(self, user: str, after: int = 0, *, sync: bool = True) -> list[dict[str, Any]]:
        """Completed create/update/patch/delete/deletecollection requests authenticated as `user`."""
        return [
            event
            for event in self.audit_events(after, sync=sync)
            if event.get("stage") == "ResponseComplete"
            and event.get("verb") in WRITE_VERBS
            and event.get("user", {}).get("username") == user
        ]


def _tmpfs() -> str | None:
    """/dev/shm when there is one: etcd fsyncs every write and Debian's etcd 3.4 has no --unsafe-no-fsync."""
    return "/dev/shm" if Path("/dev/shm").is_dir() and os.access("/dev/shm", os.W_OK) else None


def _owned_tmp_dir(prefix: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=_tmpfs()))
    (folder / "owner.pid").write_text(str(os.getpid()))
    return folder


def _sweep_stale_dirs() -> None:
    """Remove temp dirs left by test processes that were killed (etcd preallocates 64 MB of WAL on tmpfs)."""
    tmp = Path(_tmpfs() or tempfile.gettempdir())
    for folder in [*tmp.glob("brokergroup-k8s-*"), *tmp.glob("brokergroup-etcd-*")]:
        try:
            owner = int((folder / "owner.pid").read_text())
            os.kill(owner, 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except (OSError, ValueError):
            continue  # not ours, alive (PermissionError), or being created


def _opener(tls: ssl.SSLContext | None) -> urllib.request.OpenerDirector:
    # No proxy: everything is on loopback, whatever https_proxy says.
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
    if tls is not None:
        handlers.append(urllib.request.HTTPSHandler(context=tls))
    return urllib.request.build_opener(*handlers)


def _fetch(opener: urllib.request.OpenerDirector, url: str, timeout: float = 10) -> tuple[int, bytes]:
    """GET `url`: (status, body) whatever the status; OSError when there is no answer."""
    try:
        with opener.open(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read()
