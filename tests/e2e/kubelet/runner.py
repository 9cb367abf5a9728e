"""A container as a local process: start (through launch.py in the pod's namespaces), probes, restarts with
back-off, and termination with a grace period.

Back-off after an exit is 0.5 s, doubling to at most 5 s (the kubelet's is 10 s to 5 min), reset when the
container ran for 10 s. The restart policy decides: Always restarts every exit, OnFailure only non-zero exits,
Never none.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.e2e.kubelet.env import ConfigError, Lookup, command_line, resolve_env
from tests.e2e.kubelet.probes import Prober
from tests.e2e.kubelet.status import rfc3339
from tests.e2e.kubelet.volumes import MountPoints, PodVolumes

logger = logging.getLogger(__name__)
LAUNCH = Path(__file__).with_name("launch.py")
IMAGE_ROOT = Path(__file__).resolve().parents[3]
"""The repository root: the editable install of brokergroup, our stand-in for the container image."""
INITIAL_BACKOFF = 0.5
MAX_BACKOFF = 5.0
BACKOFF_RESET_AFTER = 10.0

Emit = Callable[[str, str, str, str], None]
"""(type Normal|Warning, reason, message, fieldPath) -> an Event about the pod."""


@dataclasses.dataclass
class PodContext:
    """What the containers of one pod share."""

    pod: dict[str, Any]
    netns: str
    pod_ip: str
    host_ip: str
    pod_dir: Path
    log_dir: Path
    volumes: PodVolumes
    mount_points: MountPoints
    lookup: Lookup
    executor: ThreadPoolExecutor
    emit: Emit
    grace_cap: float

    @property
    def grace(self) -> float:
        """terminationGracePeriodSeconds (default 30), capped for tests."""
        value = (self.pod.get("spec") or {}).get("terminationGracePeriodSeconds")
        return min(float(30 if value is None else value), self.grace_cap)


class ContainerRunner:
    """One container of a pod, ticked by the pod's worker thread (`signal` may come from any thread)."""

    def __init__(self, ctx: PodContext, spec: Mapping[str, Any], restart_policy: str) -> None:
        self.ctx = ctx
        self.spec = spec
        self.name: str = spec["name"]
        self.restart_policy = restart_policy
        self.field_path = f"spec.containers{{{self.name}}}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.restart_count = 0
        self.started_at = ""
        self.started_mono = 0.0
        self.waiting: tuple[str, str] = ("ContainerCreating", "")
        self.last_terminated: dict[str, Any] | None = None
        self.terminated: dict[str, Any] | None = None
        self.next_start = 0.0
        self.backoff = INITIAL_BACKOFF
        self.stopping = False
        self.kill_deadline: float | None = None
        self.log_path = ctx.log_dir / f"{self.name}.log"
        self._lock = threading.Lock()
        self.probers: dict[str, Prober] = {}
        for kind in ("startup", "readiness", "liveness"):
            probe = spec.get(f"{kind}Probe")
            if probe:
                self.probers[kind] = Prober(
                    kind, probe, spec, pod_ip=ctx.pod_ip, netns=ctx.netns, executor=ctx.executor
                )

    # -- state seen by status and tests

    @property
    def pid(self) -> int | None:
        with self._lock:
            return self.proc.pid if self.proc is not None and self.proc.returncode is None else None

    @property
    def running(self) -> bool:
        return self.proc is not None

    @property
    def started(self) -> bool:
        startup = self.probers.get("startup")
        return self.running and (startup is None or startup.result)

    @property
    def ready(self) -> bool:
        readiness = self.probers.get("readiness")
        return self.started and self.kill_deadline is None and (readiness is None or readiness.result)

    def container_id(self) -> str:
        return f"testkubelet://{self.ctx.pod['metadata']['uid'][:8]}-{self.name}-{self.starts}"

    def status(self) -> dict[str, Any]:
        if self.running:
            state: dict[str, Any] = {"running": {"startedAt": self.started_at}}
        elif self.terminated is not None:
            state = {"terminated": self.terminated}
        else:
            reason, message = self.waiting
            state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
        result: dict[str, Any] = {
            "name": self.name,
            "image": self.spec.get("image", ""),
            "imageID": "",
            "ready": self.ready,
            "started": self.started,
            "restartCount": self.restart_count,
            "state": state,
            "lastState": {"terminated": self.last_terminated} if self.last_terminated else {},
        }
        if self.starts:
            result["containerID"] = self.container_id()
        return result

    # -- signals

    def signal(self, sig: int) -> bool:
        """Signal the container's process group; False when it is not running. Safe from any thread: the
        pid is only signalled while its process is not reaped, so a recycled pid is never hit."""
        with self._lock:
            if self.proc is None or self.proc.poll() is not None:
                return False
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            return True

    def stop(self, grace: float) -> None:
        """SIGTERM now, SIGKILL after `grace` seconds (at once when 0)."""
        if grace <= 0:
            self.signal(signal.SIGKILL)
            self.kill_deadline = time.monotonic()
        elif self.kill_deadline is None and self.signal(signal.SIGTERM):
            self.kill_deadline = time.monotonic() + grace

    def terminate(self, grace: float) -> None:
        """The pod is going: stop for good."""
        self.stopping = True
        self.stop(grace)

    # -- the loop

    def tick(self, now: float) -> None:
        with self._lock:
            exited = self.proc is not None and self.proc.poll() is not None
        if exited:
            self._exited(now)
        if not self.running:
            if self.terminated is None and not self.stopping and now >= self.next_start:
                self._start(now)
            return
        if self.kill_deadline is not None:
            if now >= self.kill_deadline:
                self.signal(signal.SIGKILL)
            return
        pid = self.pid
        startup = self.probers.get("startup")
        if startup is not None and not startup.result:
            self._probe(startup, now, pid)
            if startup.exhausted:
                self._restart_unhealthy("startup")
            return
        for kind in ("readiness", "liveness"):
            if kind in self.probers:
                self._probe(self.probers[kind], now, pid)
        liveness = self.probers.get("liveness")
        if liveness is not None and liveness.exhausted:
            self._restart_unhealthy("liveness")

    def _probe(self, prober: Prober, now: float, pid: int | None) -> None:
        outcome = prober.tick(now, pid)
        if outcome is not None and not outcome[0]:
            self.ctx.emit("Warning", "Unhealthy", f"{prober.kind.capitalize()} probe failed: {outcome[1]}", "")

    def _restart_unhealthy(self, kind: str) -> None:
        message = f"Container {self.name} failed {kind} probe, will be restarted"
        self.ctx.emit("Normal", "Killing", message, self.field_path)
        grace = self.probers[kind].spec.get("terminationGracePeriodSeconds")
        self.stop(min(float(grace), self.ctx.grace_cap) if grace is not None else self.ctx.grace)

    def _exited(self, now: float) -> None:
        assert self.proc is not None
        code = self.proc.returncode
        sig = -code if code < 0 else 0
        exit_code = 128 + sig if sig else code
        terminated: dict[str, Any] = {
            "exitCode": exit_code,
            "reason": "Completed" if exit_code == 0 else "Error",
            "startedAt": self.started_at,
            "finishedAt": rfc3339(),
            "containerID": self.container_id(),
        }
        if sig:
            terminated["signal"] = sig
        with self._lock:
            self.proc = None
        self.kill_deadline = None
        logger.info("%s/%s exited with %s", self.ctx.pod["metadata"]["name"], self.name, exit_code)
        if self.stopping:
            self.terminated = terminated
            return
        restart = self.restart_policy == "Always" or (self.restart_policy == "OnFailure" and exit_code != 0)
        if not restart:
            self.terminated = terminated
            return
        self.last_terminated = terminated
        if now - self.started_mono >= BACKOFF_RESET_AFTER:
            self.backoff = INITIAL_BACKOFF
        delay, self.backoff = self.backoff, min(self.backoff * 2, MAX_BACKOFF)
        self.next_start = now + delay
        pod = self.ctx.pod["metadata"]["name"]
        self.waiting = ("CrashLoopBackOff", f"back-off {delay:g}s restarting failed container={self.name} pod={pod}")
        self.ctx.emit("Warning", "BackOff", "Back-off restarting failed container", self.field_path)

    def _start(self, now: float) -> None:
        ctx = self.ctx
        try:
            env = resolve_env(self.spec, ctx.pod, pod_ip=ctx.pod_ip, host_ip=ctx.host_ip, lookup=ctx.lookup)
            argv = command_line(self.spec, env)
            mounts = ctx.volumes.mounts(self.spec)
        except ConfigError as exc:
            if self.waiting != (exc.reason, exc.message):
                ctx.emit("Warning", "Failed", f"Error: {exc.message}", self.field_path)
            self.waiting = (exc.reason, exc.message)
            self.next_start = now + 1.0
            return
        for mount in mounts:
            ctx.mount_points.ensure(mount)
        spec_path = ctx.pod_dir / f"{self.name}.launch.json"
        launch = {
            "parent": os.getpid(),
            "hostname": env["HOSTNAME"],
            "mounts": [{"source": str(m.source), "target": m.target, "readOnly": m.read_only} for m in mounts],
            # The "image": the checkout the installed `brokergroup` runs from stays visible even when a
            # volume (the /tmp emptyDir) is mounted over the folder it lives in (a clone under /tmp).
            "keep": [str(IMAGE_ROOT)],
            "readOnlyRoot": bool((self.spec.get("securityContext") or {}).get("readOnlyRootFilesystem")),
            "cwd": self.spec.get("workingDir") or "/",
            "argv": argv,
            "env": env,
        }
        descriptor = os.open(spec_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            json.dump(launch, handle)
        if self.starts:
            self.restart_count += 1
        self.starts += 1
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"--- test kubelet: start {self.starts} of {self.name} at {rfc3339()}: {argv}\n".encode())
            log.flush()
            command = ["ip", "netns", "exec", ctx.netns, sys.executable, "-I", "-S", str(LAUNCH), str(spec_path)]
            try:
                proc = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")},
                    start_new_session=True,
                )
            except OSError as exc:
                self.waiting = ("StartError", str(exc))
                self.next_start = now + 1.0
                return
        with self._lock:
            self.proc = proc
        self.started_at, self.started_mono = rfc3339(), now
        self.waiting = ("", "")
        for prober in self.probers.values():
            prober.reset(now)
        ctx.emit("Normal", "Started", f"Started container {self.name}", self.field_path)

    def reap(self, timeout: float) -> None:
        """Kill and wait (used when the kubelet stops)."""
        self.stopping = True
        self.signal(signal.SIGKILL)
        with self._lock:
            proc = self.proc
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout)
