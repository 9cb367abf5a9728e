"""Optional parts of the install, and the one message for a missing one.

The runtime (operator, controller, broker, admin, local clusters) needs only the base install.
The Spark audit and the demo's charts need the `audit` extra (`pip install 'brokergroup[audit]'`:
pyspark and matplotlib), which the runtime image leaves out (docs/images.md). Commands that need
it check here before importing it, so that without it they stop with one line saying what to
install instead of a traceback.
"""

from __future__ import annotations

import dataclasses
import importlib.util

from brokergroup.common.settings import SettingsError


@dataclasses.dataclass(frozen=True)
class Extra:
    name: str
    """The extra's name in pyproject.toml's [project.optional-dependencies]."""
    modules: tuple[str, ...]
    """Top-level modules it installs."""

    @property
    def install(self) -> str:
        return f"pip install 'brokergroup[{self.name}]'"


AUDIT = Extra("audit", ("pyspark", "matplotlib"))


class MissingExtraError(SettingsError):
    """A command needs an extra that is not installed. Reported like a settings error: one line, exit 2."""


def absent(extra: Extra, *modules: str) -> str | None:
    """The first of `modules` (default: all of `extra`'s) that is not installed here, or None."""
    for module in modules or extra.modules:
        if importlib.util.find_spec(module) is None:
            return module
    return None


def missing(extra: Extra, *modules: str) -> str | None:
    """Why `extra` (or the part of it that is `modules`) cannot be used here, with the fix; None if it can."""
    module = absent(extra, *modules)
    return None if module is None else f"{module} is not installed ({extra.install})"


def require(extra: Extra, what: str) -> None:
    """MissingExtraError unless `extra` is installed: "<what> needs pyspark, which is not installed: pip ..."."""
    module = absent(extra)
    if module is not None:
        raise MissingExtraError(f"{what} needs {module}, which is not installed: {extra.install}")
