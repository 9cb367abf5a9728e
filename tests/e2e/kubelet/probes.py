"""Container probes (httpGet, tcpSocket, exec) with the kubelet's thresholds and periods.

A `Prober` is ticked by its pod worker; the probe itself runs on a shared thread pool (a slow probe does not
stall the pod's other work), and its result is counted when the next tick sees it finished:

- readiness and startup start as failure, liveness as success (as in the kubelet's prober results);
- `successThreshold` consecutive successes turn the result to success, `failureThreshold` consecutive failures
  to failure; the first probe runs `initialDelaySeconds` after the container started, then every
  `periodSeconds`, each bounded by `timeoutSeconds`;
- `exhausted` tells the worker to restart the container (liveness failed, or startup failed too often).
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

Outcome = tuple[bool, str]


def resolve_port(port: int | str, container: Mapping[str, Any]) -> int:
    """A probe's port: a number, or the name of one of the container's ports."""
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    for declared in container.get("ports") or []:
        if declared.get("name") == port:
            return int(declared["containerPort"])
    raise ValueError(f"port {port!r} is not a named port of container {container['name']}")


def http_get(spec: Mapping[str, Any], host: str, port: int, timeout: float) -> Outcome:
    scheme = (spec.get("scheme") or "HTTP").lower()
    path = spec.get("path") or "/"
    url = f"{scheme}://{host}:{port}{path if path.startswith('/') else '/' + path}"
    headers = {"User-Agent": "kube-probe/1.33 (test kubelet)", "Accept": "*/*"}
    headers.update({h["name"]: h["value"] for h in spec.get("httpHeaders") or []})
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
    if scheme == "https":
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        handlers.append(urllib.request.HTTPSHandler(context=insecure))
    opener = urllib.request.build_opener(*handlers)
    try:
        with opener.open(urllib.request.Request(url, headers=headers), timeout=timeout) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        exc.close()
        status = exc.code
    except OSError as exc:
        return False, f"Get {url}: {exc}"
    return 200 <= status < 400, f"HTTP probe to {url} answered {status}"


def tcp_connect(host: str, port: int, timeout: float) -> Outcome:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True, f"connected to {host}:{port}"
    except OSError as exc:
        return False, f"dial tcp {host}:{port}: {exc}"


def exec_in(command: list[str], netns: str, pid: int | None, timeout: float) -> Outcome:
    """Run `command` in the container: its mount, UTS and network namespaces through nsenter (or only the pod's
    network namespace without nsenter)."""
    nsenter = shutil.which("nsenter")
    argv = (
        [nsenter, "-t", str(pid), "-m", "-u", "-n", "--", *command]
        if nsenter and pid
        else ["ip", "netns", "exec", netns, *command]
    )
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return False, f"command {command} timed out after {timeout} s"
    except OSError as exc:
        return False, f"command {command}: {exc}"
    return done.returncode == 0, f"exit {done.returncode}: {(done.stdout + done.stderr).strip()[-300:]}"


def run_probe(
    spec: Mapping[str, Any], container: Mapping[str, Any], pod_ip: str, netns: str, pid: int | None
) -> Outcome:
    timeout = float(spec.get("timeoutSeconds") or 1)
    try:
        if "httpGet" in spec:
            http = spec["httpGet"]
            return http_get(http, http.get("host") or pod_ip, resolve_port(http["port"], container), timeout)
        if "tcpSocket" in spec:
            tcp = spec["tcpSocket"]
            return tcp_connect(tcp.get("host") or pod_ip, resolve_port(tcp["port"], container), timeout)
        if "exec" in spec:
            return exec_in(list(spec["exec"]["command"]), netns, pid, timeout)
    except Exception as exc:  # a malformed answer (http.client.HTTPException, ...) is a failed probe
        return False, f"{type(exc).__name__}: {exc}"
    return False, "no supported probe handler (httpGet, tcpSocket and exec are; grpc is not)"


class Prober:
    """One probe (startup, readiness or liveness) of one container instance."""

    def __init__(
        self,
        kind: str,
        spec: Mapping[str, Any],
        container: Mapping[str, Any],
        *,
        pod_ip: str,
        netns: str,
        executor: ThreadPoolExecutor,
    ) -> None:
        self.kind = kind
        self.spec = spec
        self.container = container
        self.pod_ip, self.netns = pod_ip, netns
        self.executor = executor
        self.period = float(spec.get("periodSeconds") or 10)
        self.initial_delay = float(spec.get("initialDelaySeconds") or 0)
        self.success_threshold = int(spec.get("successThreshold") or 1)
        self.failure_threshold = int(spec.get("failureThreshold") or 3)
        self.result = kind == "liveness"
        self.successes = self.failures = 0
        self.next_due = 0.0
        self._future: Future[Outcome] | None = None

    def reset(self, started: float) -> None:
        """A new container instance started (monotonic time `started`)."""
        self.result = self.kind == "liveness"
        self.successes = self.failures = 0
        self.next_due = started + self.initial_delay
        self._future = None  # a probe of the previous instance still running is ignored

    @property
    def exhausted(self) -> bool:
        """The container must be restarted: liveness turned to failure, or startup failed `failureThreshold`
        times in a row."""
        if self.kind == "liveness":
            return not self.result
        return self.kind == "startup" and not self.result and self.failures >= self.failure_threshold

    def tick(self, now: float, pid: int | None) -> tuple[bool, str] | None:
        """Count a finished probe (returns (ok, message) of it) or start a due one (returns None)."""
        future = self._future
        if future is not None:
            if not future.done():
                return None
            self._future = None
            ok, message = future.result()
            self._count(ok)
            return ok, message
        if now >= self.next_due:
            self.next_due = now + self.period
            self._future = self.executor.submit(run_probe, self.spec, self.container, self.pod_ip, self.netns, pid)
        return None

    def _count(self, ok: bool) -> None:
        if ok:
            self.successes, self.failures = self.successes + 1, 0
            if self.successes >= self.success_threshold:
                self.result = True
        else:
            self.failures, self.successes = self.failures + 1, 0
            if self.failures >= self.failure_threshold:
                self.result = False
