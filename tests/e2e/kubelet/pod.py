"""One pod's worker thread: volumes, containers, status, termination.

The thread that starts a container is its parent: the launcher asks for SIGKILL when that thread dies
(PR_SET_PDEATHSIG), and this thread lives until every container of the pod has exited.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

from tests.e2e.kubelet.env import ConfigError
from tests.e2e.kubelet.network import PodNetwork
from tests.e2e.kubelet.runner import ContainerRunner, PodContext
from tests.e2e.kubelet.status import Conditions, rfc3339

logger = logging.getLogger(__name__)
TICK = 0.1


class PodWorker(threading.Thread):
    def __init__(
        self,
        ctx: PodContext,
        net: PodNetwork,
        core: kubernetes.client.CoreV1Api,
        notify: Callable[[], None],
        *,
        timings: dict[str, float] | None = None,
        origin: float | None = None,
    ) -> None:
        meta = ctx.pod["metadata"]
        super().__init__(name=f"pod-{meta['name']}", daemon=True)
        self.ctx = ctx
        self.net = net
        self.core = core
        self.notify = notify
        self.pod_name: str = meta["name"]
        self.uid: str = meta["uid"]
        spec = ctx.pod.get("spec") or {}
        policy = spec.get("restartPolicy") or "Always"
        self.containers = [ContainerRunner(ctx, container, policy) for container in spec.get("containers") or []]
        self.unsupported = [c["name"] for c in spec.get("initContainers") or []]
        self.conditions = Conditions()
        self.start_time = rfc3339()
        self.created = time.monotonic()
        self.origin = self.created if origin is None else origin
        self.timings: dict[str, float] = {} if timings is None else timings
        """Seconds from `origin` (the binding) to the first time the pod was Running (`running`) and Ready."""
        self.grace: float | None = None
        self.finished = threading.Event()
        self.volume_error = ""
        self._wake = threading.Event()
        self._last_status = ""

    # -- from other threads

    def request_termination(self, grace: float) -> None:
        """Stop the pod's containers: SIGTERM, SIGKILL after `grace` seconds (0: SIGKILL now)."""
        if self.grace is None or grace < self.grace:
            self.grace = grace
            self._wake.set()

    def container(self, name: str | None) -> ContainerRunner:
        for runner in self.containers:
            if name is None or runner.name == name:
                return runner
        raise KeyError(f"pod {self.pod_name} has no container {name!r}")

    # -- the thread

    def run(self) -> None:
        try:
            self._run()
        except Exception:
            logger.exception("pod worker %s crashed", self.pod_name)
        finally:
            for runner in self.containers:
                runner.reap(5.0)
            self.finished.set()
            self.notify()

    def _run(self) -> None:
        if self.unsupported:
            message = f"init containers {self.unsupported} are not supported by the test kubelet"
            self.ctx.emit("Warning", "Failed", message, "")
            for runner in self.containers:
                runner.waiting = ("InitContainersUnsupported", message)
                runner.terminated = {"exitCode": 128, "reason": "InitContainersUnsupported", "message": message}
        self._publish()
        while self.grace is None:
            try:
                self.ctx.volumes.setup()
                self.volume_error = ""
                break
            except ConfigError as exc:
                if exc.message != self.volume_error:
                    self.ctx.emit("Warning", "FailedMount", f"MountVolume.SetUp failed: {exc.message}", "")
                self.volume_error = exc.message
                for runner in self.containers:
                    runner.waiting = ("ContainerCreating", exc.message)
                self._publish()
                self._wake.wait(1.0)
        while self.grace is None:
            now = time.monotonic()
            for runner in self.containers:
                runner.tick(now)
            self._publish()
            self._wake.wait(TICK)
            self._wake.clear()
        self._terminate()

    def _terminate(self) -> None:
        grace = self.grace or 0.0
        for runner in self.containers:
            if runner.running and grace > 0:
                self.ctx.emit("Normal", "Killing", f"Stopping container {runner.name}", runner.field_path)
            runner.terminate(grace)
        while any(runner.running for runner in self.containers):
            if self.grace == 0:
                for runner in self.containers:
                    runner.stop(0)
            now = time.monotonic()
            for runner in self.containers:
                runner.tick(now)
            self._wake.wait(0.05)
            self._wake.clear()
        self._publish()

    # -- status

    def status(self) -> dict[str, Any]:
        runners = self.containers
        terminal = bool(runners) and all(r.terminated is not None for r in runners)
        if terminal:
            phase = "Succeeded" if all(r.terminated and r.terminated["exitCode"] == 0 for r in runners) else "Failed"
        elif any(r.starts for r in runners):
            phase = "Running"
        else:
            phase = "Pending"
        unready = [r.name for r in runners if not r.ready]
        ready = not unready and phase == "Running"
        self.conditions.set("PodScheduled", True)
        self.conditions.set("PodReadyToStartContainers", True)
        self.conditions.set(
            "Initialized", not self.unsupported, None if not self.unsupported else "ContainersNotInitialized"
        )
        self.conditions.set("ContainersReady", ready, None if ready else "ContainersNotReady")
        self.conditions.set("Ready", ready, None if ready else "ContainersNotReady")
        now = time.monotonic() - self.origin
        if phase == "Running":
            self.timings.setdefault("running", now)
        if ready:
            self.timings.setdefault("ready", now)
        return {
            "phase": phase,
            "conditions": self.conditions.render(),
            "hostIP": self.ctx.host_ip,
            "hostIPs": [{"ip": self.ctx.host_ip}],
            "podIP": self.ctx.pod_ip,
            "podIPs": [{"ip": self.ctx.pod_ip}],
            "startTime": self.start_time,
            "containerStatuses": [runner.status() for runner in runners],
        }

    def _publish(self) -> None:
        """Patch pods/status when it changed (a merge patch carrying metadata.uid, as the kubelet's status
        manager does: it fails instead of touching a re-created pod of the same name)."""
        status = self.status()
        text = json.dumps(status, sort_keys=True)
        if text == self._last_status:
            return
        body = {"metadata": {"uid": self.uid}, "status": status}
        try:
            self.core.patch_namespaced_pod_status(
                self.pod_name,
                self.ctx.pod["metadata"]["namespace"],
                body,
                _content_type="application/merge-patch+json",
                _preload_content=False,
            )
        except ApiException as exc:
            if exc.status not in (404, 409, 422):
                logger.warning("status of %s: %s", self.pod_name, exc)
            return
        except Exception as exc:  # the apiserver unreachable for a moment: the next tick tries again
            logger.warning("status of %s: %s", self.pod_name, exc)
            return
        self._last_status = text
