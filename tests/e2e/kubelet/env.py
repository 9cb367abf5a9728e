"""A container's environment and command line, resolved the way the kubelet does it.

Order (as in kubelet_pods.go makeEnvironmentVariables): the "image" variables (PATH of this Python environment,
HOME, HOSTNAME), then `envFrom` sources in order (a `prefix` is prepended; keys that are not valid variable
names are skipped), then `env` in order, each value `$(VAR)`-expanded against everything defined before it.
`command` and `args` are expanded against the final environment. Service link variables
(`<SVC>_SERVICE_HOST`, `enableServiceLinks`) are not made: a documented gap.
"""

from __future__ import annotations

import base64
import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
FIELD_KEY = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")

Lookup = Callable[[str, str], Mapping[str, Any] | None]
"""(kind "ConfigMap" | "Secret", name) -> the object in the pod's namespace, or None when it does not exist."""


class ConfigError(Exception):
    """The container cannot start yet (CreateContainerConfigError / CreateContainerError): retried."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion: `$(NAME)` becomes the value of NAME when defined, else stays as written;
    `$$` is an escaped `$`; any other `$` is literal."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char != "$" or i + 1 >= n:
            out.append(char)
            i += 1
            continue
        following = text[i + 1]
        if following == "$":
            out.append("$")
            i += 2
        elif following == "(":
            end = text.find(")", i + 2)
            if end == -1:
                out.append(text[i:])
                break
            name = text[i + 2 : end]
            out.append(env[name] if name in env else text[i : end + 1])
            i = end + 1
        else:
            out.append("$" + following)
            i += 2
    return "".join(out)


def field_value(path: str, pod: Mapping[str, Any], pod_ip: str, host_ip: str) -> str:
    """A downward API `fieldRef` (env or downwardAPI volume)."""
    meta, spec = pod["metadata"], pod.get("spec") or {}
    simple = {
        "metadata.name": meta["name"],
        "metadata.namespace": meta["namespace"],
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": host_ip,
        "status.hostIPs": host_ip,
    }
    if path in simple:
        return str(simple[path])
    if path in ("metadata.labels", "metadata.annotations"):
        values = meta.get(path.split(".")[1]) or {}
        return "\n".join(f'{key}="{value}"' for key, value in sorted(values.items()))
    keyed = FIELD_KEY.match(path)
    if keyed:
        return str((meta.get(keyed.group(1)) or {}).get(keyed.group(2), ""))
    raise ConfigError("CreateContainerConfigError", f"unsupported fieldRef {path!r}")


def object_data(obj: Mapping[str, Any], kind: str) -> dict[str, bytes]:
    """A ConfigMap's data and binaryData, or a Secret's decoded data, as bytes."""
    if kind == "Secret":
        return {key: base64.b64decode(value) for key, value in (obj.get("data") or {}).items()}
    data = {key: str(value).encode() for key, value in (obj.get("data") or {}).items()}
    data.update({key: base64.b64decode(value) for key, value in (obj.get("binaryData") or {}).items()})
    return data


def _key_ref(kind: str, ref: Mapping[str, Any], lookup: Lookup) -> str | None:
    obj = lookup(kind, ref["name"])
    if obj is None:
        if ref.get("optional"):
            return None
        raise ConfigError("CreateContainerConfigError", f'{kind.lower()} "{ref["name"]}" not found')
    data = object_data(obj, kind)
    if ref["key"] not in data:
        if ref.get("optional"):
            return None
        raise ConfigError(
            "CreateContainerConfigError", f"couldn't find key {ref['key']} in {kind} {obj['metadata']['name']}"
        )
    return data[ref["key"]].decode("utf-8", errors="replace")


def base_env(hostname: str) -> dict[str, str]:
    """What the "image" provides: this interpreter's bin folder first on PATH (so `brokergroup`, installed in
    the test environment, is found), HOME of root, and HOSTNAME as the runtime sets it."""
    bin_dir = str(Path(sys.executable).parent)
    path = os.pathsep.join([bin_dir, *[p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != bin_dir]])
    return {"PATH": path, "HOME": "/root", "HOSTNAME": hostname}


def resolve_env(
    container: Mapping[str, Any], pod: Mapping[str, Any], *, pod_ip: str, host_ip: str, lookup: Lookup
) -> dict[str, str]:
    """The container's environment; ConfigError when a non-optional source is missing."""
    spec = pod.get("spec") or {}
    env = base_env((spec.get("hostname") or pod["metadata"]["name"])[:63])
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix") or ""
        for kind, field in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            ref = source.get(field)
            if ref is None:
                continue
            obj = lookup(kind, ref["name"])
            if obj is None:
                if ref.get("optional"):
                    continue
                raise ConfigError("CreateContainerConfigError", f'{kind.lower()} "{ref["name"]}" not found')
            for key, data in object_data(obj, kind).items():
                if ENV_NAME.match(prefix + key):
                    env[prefix + key] = data.decode("utf-8", errors="replace")
    for item in container.get("env") or []:
        name = item["name"]
        source = item.get("valueFrom")
        if source is None:
            env[name] = expand(item.get("value") or "", env)
        elif "fieldRef" in source:
            env[name] = field_value(source["fieldRef"]["fieldPath"], pod, pod_ip, host_ip)
        elif "secretKeyRef" in source:
            found = _key_ref("Secret", source["secretKeyRef"], lookup)
            if found is not None:
                env[name] = found
        elif "configMapKeyRef" in source:
            found = _key_ref("ConfigMap", source["configMapKeyRef"], lookup)
            if found is not None:
                env[name] = found
        else:
            raise ConfigError("CreateContainerConfigError", f"env {name}: unsupported valueFrom {sorted(source)}")
    return env


def command_line(container: Mapping[str, Any], env: Mapping[str, str]) -> list[str]:
    """`command` + `args`, `$(VAR)`-expanded. Images are ignored, so there is no ENTRYPOINT to fall back on."""
    command = [expand(str(part), env) for part in container.get("command") or []]
    args = [expand(str(part), env) for part in container.get("args") or []]
    if not command:
        raise ConfigError(
            "CreateContainerError",
            f"container {container['name']} has no command: the test kubelet ignores images, so there is no "
            "ENTRYPOINT to run",
        )
    return command + args
