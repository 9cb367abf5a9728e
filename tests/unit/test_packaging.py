"""The distribution ships every package of the namespace, each from its design-card folder."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def discovered() -> set[str]:
    found = set()
    for root, _dirs, files in os.walk(ROOT / "brokergroup", followlinks=True):
        if "__init__.py" in files and "__pycache__" not in root:
            found.add(str(Path(root).relative_to(ROOT)).replace(os.sep, "."))
    return found


def test_packages_list_matches_the_tree() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert set(config["packages"]) == discovered()


def test_component_folders_are_mapped_and_linked() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    for name, folder in config["package-dir"].items():
        if name == "brokergroup":
            continue
        link = ROOT / "brokergroup" / name.split(".")[1]
        assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve(), name
