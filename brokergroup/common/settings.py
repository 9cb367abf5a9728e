"""Loading a process's settings: file, then environment, then command-line flags.

Every process has one root settings class (a pydantic-settings `BaseSettings` made of small
groups with defaults and a docstring per field). `load_settings` reads an optional TOML
file, overlays `BG_<PROCESS>_...` environment variables (groups separated by `__`), then
the flags the user actually gave, and validates once. A bad value becomes `SettingsError`
whose message names the setting, the value and the rule.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError
from pydantic_settings import BaseSettings, InitSettingsSource, PydanticBaseSettingsSource
from pydantic_settings import SettingsError as SourceError

T = TypeVar("T", bound=BaseSettings)


class SettingsError(ValueError):
    """Settings that cannot be used; the message says which and why."""


def explain(err: ValidationError, *, source: str = "settings") -> str:
    lines = []
    for item in err.errors():
        where = ".".join(str(p) for p in item["loc"]) or "(root)"
        value = item.get("input")
        shown = "" if isinstance(value, dict) else f" (got {value!r})"
        lines.append(f"{where}: {item['msg']}{shown}")
    return f"invalid {source}:\n  " + "\n  ".join(lines)


def read_config_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError as exc:
        raise SettingsError(f"config file {path} does not exist") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"config file {path} is not valid TOML: {exc}") from exc


def deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_settings(cls: type[T], *, config_file: Path | None = None, flags: Mapping[str, Any] | None = None) -> T:
    """File < environment < flags. `flags` is a nested dict holding only flags that were given."""
    file_values = read_config_file(config_file) if config_file else {}

    class _Layered(cls):  # type: ignore[valid-type,misc]
        @classmethod
        def settings_customise_sources(
            cls_,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return (init_settings, env_settings, InitSettingsSource(settings_cls, init_kwargs=file_values))

    try:
        layered = _Layered(**dict(flags or {}))
        return cls.model_validate(layered.model_dump())
    except ValidationError as exc:
        raise SettingsError(explain(exc)) from exc
    except SourceError as exc:  # an environment variable that is not valid JSON for a nested group
        raise SettingsError(f"invalid settings: {exc}") from exc


def nested(flat: Mapping[str, Any]) -> dict[str, Any]:
    """{"raft.password": "x"} -> {"raft": {"password": "x"}}; None values are dropped."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        if value is None:
            continue
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def parse_overrides(items: list[str]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SettingsError(f"--set {item!r}: expected KEY=VALUE")
        flat[key.strip()] = value
    return nested(flat)
