"""This broker's role on its own Pod's labels: the master Service follows elections without the operator.

The controller elects; the broker is the first to learn its own role. As in Patroni's Kubernetes mode, each
replica patches its own Pod on every role change:

- the label `brokergroup.io/role=master|slave` (removed while the broker has no role), the label
  `brokergroup.io/broker-id` and the annotation `brokergroup.io/master-epoch`, the same keys the operator
  writes, so the operator's stale-epoch guard sees the broker's epoch;
- demote first: a broker that stops being master relabels itself `slave` as it takes the new role, and a
  new master labels itself only after it has become master **and** after it took `role=master` off the
  master it followed until then (a JSON patch that tests for `role=master` and for the master epoch it
  followed, so it changes nothing on a pod that already relabelled itself or was elected again since).
  Without that step the two patches race: the old master learns of the election a moment after the new
  one, and for that moment the master Service selected both;
- at start, before anything else, the broker removes a stale `role=master` from its Pod (a killed master
  that restarts is not master until the controller says so). `/readyz` waits for that patch, so a
  restarted old master never turns Ready while carrying `role=master`.

The Kubernetes API is called from one thread of its own (`PodLabeler`): a slow or refusing API server never
blocks replication, acknowledgements or the event loop. The newest wanted state wins. A refused or timed-out
patch is logged once (until a patch succeeds again), counted in
`brokergroup_broker_pod_label_patches_total{result}`, and retried with back-off; the broker keeps serving its
role meanwhile. The operator stays the second writer and the repairer.

Off by default (outside Kubernetes, `brokergroup local`): `kubernetes.enabled` turns it on, with the pod's
name and namespace from the downward API. The broker's ServiceAccount may patch its group's broker pods by
name and nothing else (a Role the operator makes per BrokerGroup).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
from collections.abc import Callable
from typing import Any, Final, Protocol

from brokergroup.broker.metrics import BrokerMetrics
from brokergroup.broker.role import Role, RoleManager
from brokergroup.broker.settings import KubernetesSettings

logger = logging.getLogger(__name__)

ROLE_LABEL: Final = "brokergroup.io/role"
BROKER_ID_LABEL: Final = "brokergroup.io/broker-id"
MASTER_EPOCH_ANNOTATION: Final = "brokergroup.io/master-epoch"
BACKOFF_START_S: Final = 0.2
BACKOFF_MAX_S: Final = 5.0


@dataclasses.dataclass(frozen=True)
class Wanted:
    """What the Pod's metadata should say. `role` None: no role yet (the label is removed)."""

    role: str | None
    broker_id: int | None = None
    epoch: int | None = None
    demote: tuple[tuple[str, int], ...] = ()
    """(pod, its master epoch): other pods of the set to take `role=master` off before this patch, if they
    still say master at that epoch (a new master's predecessor)."""

    def patch(self) -> dict[str, Any]:
        """The JSON merge patch of the Pod (a None value removes the key)."""
        pod_labels: dict[str, str | None] = {ROLE_LABEL: self.role}
        if self.broker_id is not None:
            pod_labels[BROKER_ID_LABEL] = str(self.broker_id)
        meta: dict[str, Any] = {"labels": pod_labels}
        if self.epoch is not None and self.role is not None:
            meta["annotations"] = {MASTER_EPOCH_ANNOTATION: str(self.epoch)}
        return {"metadata": meta}


class KubernetesAccessError(Exception):
    """Kubernetes access is on but cannot be set up (no credentials): the broker does not start."""


class PatchFailed(Exception):
    """A patch did not land. `result` is the metric label: refused (4xx), timeout, or error."""

    def __init__(self, result: str, message: str) -> None:
        super().__init__(message)
        self.result = result


Patcher = Callable[[dict[str, Any]], None]
"""Applies one JSON merge patch to the Pod; raises `PatchFailed`."""
Demoter = Callable[[str, int], None]
"""Relabels another pod of the set from `role=master` at the given master epoch to `slave`; nothing when it is
not labelled so or is gone; raises `PatchFailed`."""


def peer_pod(address: str | None, own: str) -> str | None:
    """The pod behind a broker address `<pod>.<set>.<ns>.svc:<port>` (the operator's advertised names) when it
    is another pod of `own`'s StatefulSet (`<set>-<ordinal>`); None for any other address."""
    if not address:
        return None
    name = address.rsplit(":", 1)[0].split(".", 1)[0]
    prefix, _, ordinal = name.rpartition("-")
    if name == own or not ordinal.isdigit() or prefix != own.rpartition("-")[0]:
        return None
    return name


class Counter(Protocol):
    def labels(self, *values: str) -> Any: ...


class Gauge(Protocol):
    def set(self, value: float) -> None: ...


class PodLabeler:
    """One thread that brings the Pod's metadata to the newest `Wanted`, retrying with back-off."""

    def __init__(
        self,
        patcher: Patcher,
        *,
        pod: str,
        demoter: Demoter | None = None,
        patches: Counter | None = None,
        in_sync: Gauge | None = None,
    ) -> None:
        self._patcher = patcher
        self._demoter = demoter
        self.pod = pod
        self._patches = patches
        self._in_sync_gauge = in_sync
        self._cond = threading.Condition()
        self._wanted: Wanted = Wanted(role=None)
        self._version = 1  # the start state (no role) is wanted at once: it clears a stale master label
        self._applied = 0
        self._stopping = False
        self._settled_once = threading.Event()
        self._failing = False
        self._thread = threading.Thread(target=self._run, name=f"pod-labels-{pod}", daemon=True)

    # ---- the event loop's side: never blocks -----------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def publish(self, wanted: Wanted) -> None:
        """Ask for `wanted`; returns at once (the thread patches)."""
        with self._cond:
            if wanted == self._wanted and self._applied == self._version:
                return
            self._wanted = wanted
            self._version += 1
            self._cond.notify_all()
        self._gauge(0)

    @property
    def cleared(self) -> bool:
        """True once the first patch landed: a stale `role=master` from a previous run is gone."""
        return self._settled_once.is_set()

    @property
    def in_sync(self) -> bool:
        with self._cond:
            return self._applied == self._version

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)

    # ---- the thread ---------------------------------------------------------------------------------
    def _run(self) -> None:
        delay = BACKOFF_START_S
        while True:
            with self._cond:
                while not self._stopping and self._applied == self._version:
                    self._cond.wait()
                if self._stopping:
                    return
                wanted, version = self._wanted, self._version
            try:
                if wanted.role == "master" and self._demoter is not None:
                    for other, other_epoch in wanted.demote:  # demote first; a retry repeats it harmlessly
                        self._demoter(other, other_epoch)
                self._patcher(wanted.patch())
            except PatchFailed as exc:
                self._count(exc.result)
                if not self._failing:
                    logger.warning(
                        "pod %s: cannot set role label %s (%s); keeping the role, retrying with back-off",
                        self.pod,
                        wanted.role,
                        exc,
                    )
                    self._failing = True
                with self._cond:
                    self._cond.wait_for(functools.partial(self._news, version), delay)
                delay = min(delay * 2, BACKOFF_MAX_S)
                continue
            self._count("ok")
            if self._failing:
                logger.warning("pod %s: role label patched again (%s)", self.pod, wanted.role)
                self._failing = False
            else:
                logger.info("pod %s: role label %s, epoch %s", self.pod, wanted.role, wanted.epoch)
            delay = BACKOFF_START_S
            with self._cond:
                self._applied = max(self._applied, version)
                current = self._applied == self._version
            self._settled_once.set()
            self._gauge(1 if current else 0)

    def _news(self, version: int) -> bool:
        """Something to do other than retrying `version`: stop, or a newer wanted state."""
        return self._stopping or self._version != version

    def _count(self, result: str) -> None:
        if self._patches is not None:
            self._patches.labels(result).inc()

    def _gauge(self, value: int) -> None:
        if self._in_sync_gauge is not None:
            self._in_sync_gauge.set(value)


def demote_patch(epoch: int) -> list[dict[str, str]]:
    """A JSON patch: `role=master` at master epoch `epoch` becomes `slave`; the API server refuses it (422)
    when a test fails (the pod relabelled itself, or was elected again and carries a newer epoch)."""
    return [
        {"op": "test", "path": "/metadata/labels/brokergroup.io~1role", "value": "master"},
        {"op": "test", "path": "/metadata/annotations/brokergroup.io~1master-epoch", "value": str(epoch)},
        {"op": "replace", "path": "/metadata/labels/brokergroup.io~1role", "value": "slave"},
    ]


class Announcer:
    """`RoleManager.on_role_change` for a `PodLabeler`: each role change becomes the wanted Pod metadata. A
    promotion names the master this broker followed last (as a slave) to be demoted first."""

    def __init__(self, labeler: PodLabeler, master_address: Callable[[], str | None]) -> None:
        self.labeler = labeler
        self.master_address = master_address
        self.followed: tuple[str, int] | None = None
        """(pod, master epoch) of the master this broker followed last."""

    def __call__(self, new_role: Role, epoch: int, broker_id: int | None) -> None:
        if new_role is Role.SLAVE:
            pod = peer_pod(self.master_address(), self.labeler.pod)
            self.followed = None if pod is None else (pod, epoch)
        demote = (self.followed,) if new_role is Role.MASTER and self.followed is not None else ()
        role = None if new_role is Role.NONE else new_role.value
        self.labeler.publish(Wanted(role=role, broker_id=broker_id, epoch=epoch, demote=demote))


def kube_patchers(settings: KubernetesSettings) -> tuple[Patcher, Demoter]:
    """A `Patcher` of the Pod `settings.pod_name` and a `Demoter` of the other pods of its namespace through the
    Kubernetes API, logged in in-cluster (or with `settings.kubeconfig`). Raises KubernetesAccessError, naming
    what is missing, without credentials."""
    import kubernetes  # only when enabled: `brokergroup local` never pays for the import
    import urllib3

    configuration = kubernetes.client.Configuration()
    try:
        if settings.kubeconfig is not None:
            kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(settings.kubeconfig), client_configuration=configuration
            )
        else:
            kubernetes.config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except kubernetes.config.ConfigException as exc:
        raise KubernetesAccessError(
            f"kubernetes.enabled, but no Kubernetes credentials were found ({exc}); run in a pod, set "
            "kubernetes.kubeconfig, or turn kubernetes.enabled off"
        ) from exc
    configuration.retries = False  # one attempt per patch: the labeler's own back-off retries (and logs once)
    core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))
    name, namespace = str(settings.pod_name), str(settings.namespace)
    timeout = settings.request_timeout_ms / 1000

    def send(pod: str, body: Any, content_type: str, moot: tuple[int, ...] = ()) -> None:
        try:
            core.patch_namespaced_pod(pod, namespace, body, _request_timeout=timeout, _content_type=content_type)
        except kubernetes.client.exceptions.ApiException as exc:
            if exc.status in moot:
                return
            raise PatchFailed(
                "refused" if exc.status and exc.status < 500 else "error", f"pod {pod}: {exc.status} {exc.reason}"
            ) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:  # the API is not reachable, or too slow
            reason = getattr(exc, "reason", None)
            slow = isinstance(exc, urllib3.exceptions.TimeoutError) or isinstance(
                reason, urllib3.exceptions.TimeoutError
            )
            raise PatchFailed("timeout" if slow else "error", f"pod {pod}: {type(exc).__name__}: {exc}") from exc

    def patch(body: dict[str, Any]) -> None:
        send(name, body, "application/merge-patch+json")

    def demote(pod: str, epoch: int) -> None:
        # 422: a test failed (the pod is not labelled master at that epoch: nothing to do); 404: it is gone.
        send(pod, demote_patch(epoch), "application/json-patch+json", moot=(404, 422))

    return patch, demote


def attach(role: RoleManager, settings: KubernetesSettings, metrics: BrokerMetrics) -> PodLabeler | None:
    """Wire a started `PodLabeler` to `role` when `settings.enabled` (readiness then waits for its first
    patch); None, and readiness as before, when it is off. On but without credentials (a pod without its
    ServiceAccount token or `KUBERNETES_SERVICE_HOST`): logged as an error, `pod_label_in_sync` 0, and the
    broker runs as if it were off, leaving the labels to the operator."""
    if not settings.enabled:
        metrics.pod_label_in_sync.set(1)
        return None
    try:
        patcher, demoter = kube_patchers(settings)
    except KubernetesAccessError as exc:
        # Degraded, not down: the operator still labels the pods, as before brokers labelled themselves.
        logger.error("pod labels off: %s", exc)  # noqa: TRY400 (the message is the whole story)
        metrics.pod_label_in_sync.set(0)
        metrics.pod_label_patches.labels("error").inc()
        return None
    pod = str(settings.pod_name)
    labeler = PodLabeler(
        patcher,
        pod=pod,
        demoter=demoter,
        patches=metrics.pod_label_patches,
        in_sync=metrics.pod_label_in_sync,
    )
    role.on_role_change = Announcer(labeler, lambda: role.master_address)
    role.ready_gate = lambda: labeler.cleared
    labeler.start()
    return labeler
