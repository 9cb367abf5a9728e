"""Pod volumes as folders of the kubelet's work dir, and the bind mounts of a container.

- configMap, secret, downwardAPI and projected (configMap, secret, downwardAPI, serviceAccountToken sources):
  written like the kubelet's AtomicWriter: files in a timestamped `..<stamp>` folder, a `..data` symlink to it,
  and one top-level symlink per entry, so an update (ConfigMap or Secret changed: `refresh`) swaps all files at
  once with a rename. `items`, `defaultMode`, item `mode` and `optional` are honoured.
- emptyDir: a folder of the pod (any medium), removed with the pod.
- persistentVolumeClaim: `<work>/pvc/<namespace>/<claimName>`, kept when the pod goes, so a StatefulSet pod that
  is re-created gets its data back. The claim must exist; it stays Pending (no provisioner), which the
  StatefulSet controller does not mind.
- hostPath: the host path itself (created for type "" and DirectoryOrCreate).

Mount targets must exist on the host as empty mount points: `MountPoints` creates missing ones (nothing is ever
written into them on the host) and removes those it created when the kubelet stops.
"""

from __future__ import annotations

import dataclasses
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from tests.e2e.kubelet.env import ConfigError, Lookup, field_value, object_data

Payload = dict[str, tuple[bytes, int]]
ATOMIC = ("configMap", "secret", "downwardAPI", "projected")


class VolumeError(ConfigError):
    """A volume cannot be set up yet (FailedMount): retried."""

    def __init__(self, message: str) -> None:
        super().__init__("FailedMount", message)


@dataclasses.dataclass(frozen=True)
class Mount:
    source: Path
    target: str
    read_only: bool


def write_atomic(folder: Path, payload: Payload) -> None:
    """Replace the content of `folder` with `payload` ({relative path: (bytes, mode)}) in one rename."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = folder / f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{time.monotonic_ns()}"
    stamp.mkdir()
    for relative, (data, mode) in payload.items():
        path = stamp / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(mode)
    staging = folder / "..data_tmp"
    staging.unlink(missing_ok=True)
    staging.symlink_to(stamp.name)
    staging.rename(folder / "..data")
    tops = {PurePosixPath(relative).parts[0] for relative in payload}
    for top in tops:
        link = folder / top
        if not link.is_symlink():
            link.symlink_to(f"..data/{top}")
    for entry in folder.iterdir():
        if entry.name.startswith(".."):
            if entry.is_dir() and not entry.is_symlink() and entry != stamp:
                shutil.rmtree(entry, ignore_errors=True)
        elif entry.name not in tops:
            entry.unlink()


def _checked_path(relative: str) -> str:
    path = PurePosixPath(relative)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise VolumeError(f"invalid volume item path {relative!r}")
    return relative


class PodVolumes:
    """The volumes of one pod under `pod_dir/volumes/<name>`."""

    def __init__(
        self,
        pod: Mapping[str, Any],
        pod_dir: Path,
        pvc_root: Path,
        *,
        lookup: Lookup,
        token: Callable[[Mapping[str, Any]], str],
        pod_ip: str,
        host_ip: str,
    ) -> None:
        self.pod = pod
        self.root = pod_dir / "volumes"
        self.pvc_root = pvc_root
        self.lookup = lookup
        self.token = token
        self.pod_ip, self.host_ip = pod_ip, host_ip
        self.dirs: dict[str, Path] = {}
        self._written: dict[str, Payload] = {}
        self._lock = threading.Lock()

    @property
    def volumes(self) -> list[dict[str, Any]]:
        return list((self.pod.get("spec") or {}).get("volumes") or [])

    def setup(self) -> None:
        """Create every volume; VolumeError when one cannot be made yet."""
        with self._lock:
            for volume in self.volumes:
                self.dirs[volume["name"]] = self._setup_one(volume)

    def _setup_one(self, volume: Mapping[str, Any]) -> Path:
        name = volume["name"]
        folder: Path
        if any(kind in volume for kind in ATOMIC):
            folder = self.root / name
            self._write(name, folder, self._payload(volume))
            return folder
        if "emptyDir" in volume:
            folder = self.root / name
            folder.mkdir(parents=True, exist_ok=True)
            return folder
        if "persistentVolumeClaim" in volume:
            claim = volume["persistentVolumeClaim"]["claimName"]
            if self.lookup("PersistentVolumeClaim", claim) is None:
                raise VolumeError(f'persistentvolumeclaim "{claim}" not found')
            folder = self.pvc_root / str(self.pod["metadata"]["namespace"]) / str(claim)
            folder.mkdir(parents=True, exist_ok=True)
            return folder
        if "hostPath" in volume:
            path = Path(volume["hostPath"]["path"])
            if volume["hostPath"].get("type", "") in ("", "DirectoryOrCreate"):
                path.mkdir(parents=True, exist_ok=True)
            elif not path.exists():
                raise VolumeError(f"hostPath {path} does not exist")
            return path
        kinds = sorted(key for key in volume if key != "name")
        raise VolumeError(f"volume {name}: type {kinds} is not supported by the test kubelet")

    def _write(self, name: str, folder: Path, payload: Payload) -> bool:
        if self._written.get(name) == payload and (folder / "..data").exists():
            return False
        write_atomic(folder, payload)
        self._written[name] = payload
        return True

    def refresh(self, kind: str, obj_name: str) -> bool:
        """Rewrite the volumes that take data from ConfigMap or Secret `obj_name`; True when a file changed."""
        changed = False
        with self._lock:
            for volume in self.volumes:
                if volume["name"] in self.dirs and (kind, obj_name) in _sources(volume):
                    try:
                        changed |= self._write(volume["name"], self.dirs[volume["name"]], self._payload(volume))
                    except VolumeError:
                        continue  # e.g. the ConfigMap is gone: keep the last content, as the kubelet does
        return changed

    def _payload(self, volume: Mapping[str, Any]) -> Payload:
        if "projected" in volume:
            projected = volume["projected"]
            default = projected.get("defaultMode", 0o644)
            payload: Payload = {}
            for source in projected.get("sources") or []:
                payload.update(self._source_payload(source, default))
            return payload
        return self._source_payload(volume, None)

    def _source_payload(self, source: Mapping[str, Any], projected_mode: int | None) -> Payload:
        for field, kind in (("configMap", "ConfigMap"), ("secret", "Secret")):
            if field in source:
                ref = source[field]
                obj_name = ref.get("name") or ref.get("secretName")
                default = projected_mode if projected_mode is not None else ref.get("defaultMode", 0o644)
                obj = self.lookup(kind, obj_name)
                if obj is None:
                    if ref.get("optional"):
                        return {}
                    raise VolumeError(f'{kind.lower()} "{obj_name}" not found')
                data = object_data(obj, kind)
                items = ref.get("items") or [{"key": key, "path": key} for key in sorted(data)]
                payload: Payload = {}
                for item in items:
                    if item["key"] not in data:
                        if ref.get("optional"):
                            continue
                        raise VolumeError(f"configuration key {item['key']} not found in {kind} {obj_name}")
                    payload[_checked_path(item["path"])] = (data[item["key"]], item.get("mode", default))
                return payload
        if "downwardAPI" in source:
            ref = source["downwardAPI"]
            default = projected_mode if projected_mode is not None else ref.get("defaultMode", 0o644)
            payload = {}
            for item in ref.get("items") or []:
                if "fieldRef" not in item:
                    raise VolumeError(f"downwardAPI item {item['path']}: only fieldRef is supported")
                value = field_value(item["fieldRef"]["fieldPath"], self.pod, self.pod_ip, self.host_ip)
                payload[_checked_path(item["path"])] = (value.encode(), item.get("mode", default))
            return payload
        if "serviceAccountToken" in source:
            ref = source["serviceAccountToken"]
            mode = projected_mode if projected_mode is not None else 0o644
            return {_checked_path(ref["path"]): (self.token(ref).encode(), mode)}
        raise VolumeError(f"unsupported volume source {sorted(source)}")

    def mounts(self, container: Mapping[str, Any]) -> list[Mount]:
        """The container's bind mounts, parents before children."""
        result = []
        for mount in container.get("volumeMounts") or []:
            if mount["name"] not in self.dirs:
                raise VolumeError(f"volumeMount {mount['name']} names no volume of the pod")
            source = self.dirs[mount["name"]]
            if mount.get("subPath"):
                source = source / _checked_path(mount["subPath"])
                if not source.exists():
                    source.mkdir(parents=True)
            result.append(Mount(source, mount["mountPath"], bool(mount.get("readOnly"))))
        return sorted(result, key=lambda m: len(PurePosixPath(m.target).parts))

    def remove(self) -> None:
        """Delete the pod's own volume folders (emptyDir, configMap, ...); PVC and hostPath folders stay."""
        shutil.rmtree(self.root, ignore_errors=True)


def _sources(volume: Mapping[str, Any]) -> set[tuple[str, str]]:
    sources = [volume, *((volume.get("projected") or {}).get("sources") or [])]
    found = set()
    for source in sources:
        if "configMap" in source:
            found.add(("ConfigMap", source["configMap"]["name"]))
        if "secret" in source:
            found.add(("Secret", source["secret"].get("secretName") or source["secret"].get("name")))
    return found


class MountPoints:
    """Creates missing mount targets on the host (folders, or empty files for file sources), remembers them in
    memory and in `record` (so that a later kubelet can remove what a dead one made: `sweep_mount_points`)."""

    def __init__(self, record: Path) -> None:
        self.record = record
        self.created: list[Path] = []
        self._lock = threading.Lock()

    def ensure(self, mount: Mount) -> None:
        with self._lock:
            target = Path(mount.target)
            if target.exists():
                return
            missing = [p for p in [*reversed(target.parents), target] if not p.exists() and not p.is_symlink()]
            for path in missing:
                if path == target and not mount.source.is_dir():
                    path.touch()
                else:
                    path.mkdir()
                self.created.append(path)
            self.record.parent.mkdir(parents=True, exist_ok=True)
            self.record.write_text("".join(f"{path}\n" for path in self.created))

    def remove_created(self) -> None:
        """Remove the targets made by `ensure`, children first, when still empty."""
        with self._lock:
            _remove_empty(reversed(self.created))
            self.created.clear()
            self.record.unlink(missing_ok=True)


def sweep_mount_points(record: Path) -> None:
    """Remove the mount targets that a kubelet which died listed in `record`."""
    if record.exists():
        _remove_empty(reversed([Path(line) for line in record.read_text().splitlines() if line]))
        record.unlink()


def _remove_empty(paths: Iterable[Path]) -> None:
    for path in paths:
        try:
            if path.is_dir() and not path.is_symlink():
                path.rmdir()
            elif path.is_file() and path.stat().st_size == 0:
                path.unlink()
        except OSError:
            continue
