"""List+watch of one resource in one namespace, kept as an in-memory store of plain JSON dicts.

Each `Informer` is a thread with its own ApiClient: it lists (the store is replaced), then watches from the
list's resourceVersion with bookmarks. A watch that the server ends (timeout) resumes from the last seen
resourceVersion; "410 Gone" (the version was compacted away) or any other error relists. Every change puts
(kind, name) on the sink queue; the kubelet's loop reads the store, level-triggered.

`stop()` shuts the watch's socket down (urllib3's HTTPResponse.shutdown), so the thread ends at once.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

import kubernetes
from kubernetes.watch.watch import iter_resp_lines

logger = logging.getLogger(__name__)
WATCH_SECONDS = 120


class _Relist(Exception):
    """The watch cannot resume: list again."""


class Informer(threading.Thread):
    def __init__(
        self,
        kind: str,
        api: kubernetes.client.ApiClient,
        list_fn: Callable[..., Any],
        namespace: str,
        sink: queue.Queue[tuple[str, str]],
    ) -> None:
        super().__init__(name=f"informer-{kind}", daemon=True)
        self.kind = kind
        self.api = api
        self.list_fn = list_fn
        self.namespace = namespace
        self.sink = sink
        self.synced = threading.Event()
        self._items: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._response: Any = None

    # -- store

    def snapshot(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return dict(self._items)

    def get(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._items.get(name)

    # -- thread

    def stop(self) -> None:
        self._stopped.set()
        response = self._response
        if response is not None:
            try:
                response.shutdown()
            except Exception as exc:  # a response being torn down by its own thread
                logger.debug("informer %s: shutdown: %s", self.kind, exc)

    def run(self) -> None:
        while not self._stopped.is_set():
            try:
                version = self._list()
                while not self._stopped.is_set():
                    version = self._watch(version)
            except _Relist as exc:
                logger.debug("informer %s: relist (%s)", self.kind, exc)
            except Exception as exc:
                if self._stopped.is_set():
                    break
                logger.warning("informer %s: %s; relisting", self.kind, exc)
                self._stopped.wait(0.5)
        self.api.close()

    def _list(self) -> str:
        response = self.list_fn(self.namespace, _preload_content=False, _request_timeout=30)
        try:
            body = json.loads(response.data)
        finally:
            response.release_conn()
        items = {item["metadata"]["name"]: item for item in body.get("items") or []}
        with self._lock:
            changed = set(self._items) | set(items)
            self._items = items
        for name in sorted(changed):
            self.sink.put((self.kind, name))
        self.synced.set()
        self.sink.put((self.kind, ""))
        return str(body["metadata"]["resourceVersion"])

    def _watch(self, version: str) -> str:
        response = self.list_fn(
            self.namespace,
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_SECONDS,
            _preload_content=False,
            _request_timeout=(10, WATCH_SECONDS + 30),
        )
        self._response = response
        try:
            if self._stopped.is_set():
                return version
            for line in iter_resp_lines(response):
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    raise _Relist(f"watch error {obj.get('code')}: {obj.get('message')}")
                version = obj["metadata"]["resourceVersion"]
                if kind == "BOOKMARK":
                    continue
                name = obj["metadata"]["name"]
                with self._lock:
                    if kind == "DELETED":
                        self._items.pop(name, None)
                    else:
                        self._items[name] = obj
                self.sink.put((self.kind, name))
        finally:
            self._response = None
            response.close()
        return version
