"""Replaying a Dockerfile's stages without a container engine (tests/integration/test_image_install.py).

`read_stages` parses the Dockerfile with `dockerfile-parse`; `Replay(stages, root, overrides).stage(name)`
runs a stage after its parents under `root`, the way a build would: ARG and ENV set variables (the
`overrides` replace values, like --build-arg, and remap paths into `root`), WORKDIR changes the
working folder (inherited by child stages), COPY copies from the build context that .dockerignore
leaves, COPY --from replays the other stage and checks the path is the same in both, RUN runs with
`bash -euo pipefail -c`. Apt-get steps are checked instead (every package installed on this host),
and so is the creation of the image's user (uid and gid 10001). Any other form fails loudly.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.needs import missing

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
IGNORE_FILE = ROOT / ".dockerignore"


def need(tool: str) -> str:
    """The tool's path; a skip without it, a failure under CI."""
    found = shutil.which(tool)
    if found is None:
        missing(f"{tool} is not installed (scripts/test installs it)")
    return found


def dockerfile_parser() -> Any:
    try:
        from dockerfile_parse import DockerfileParser
    except ImportError:
        missing("dockerfile-parse is not installed (the `test` extra)")
    return DockerfileParser(path=str(DOCKERFILE))


# -- the Dockerfile as stages -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Instruction:
    name: str
    value: str
    line: int

    def __str__(self) -> str:
        return f"Dockerfile:{self.line}: {self.name} {self.value}"


@dataclasses.dataclass(frozen=True)
class Stage:
    name: str
    parent: str
    instructions: tuple[Instruction, ...]

    def all(self, name: str) -> list[Instruction]:
        return [i for i in self.instructions if i.name == name]


def read_stages() -> dict[str, Stage]:
    stages: dict[str, Stage] = {}
    current: tuple[str, str, list[Instruction]] | None = None
    for item in dockerfile_parser().structure:
        name, value, line = item["instruction"], item["value"], item["startline"] + 1
        if name == "COMMENT":
            continue
        if name == "FROM":
            if current is not None:
                stages[current[0]] = Stage(current[0], current[1], tuple(current[2]))
            parent, _as, stage = value.split()
            assert _as.upper() == "AS", f"Dockerfile:{line}: every stage is named (FROM image AS name)"
            current = (stage, parent, [])
        else:
            assert current is not None, f"Dockerfile:{line}: {name} before the first FROM"
            current[2].append(Instruction(name, value, line))
    assert current is not None
    stages[current[0]] = Stage(current[0], current[1], tuple(current[2]))
    return stages


def exec_form(value: str) -> list[str]:
    parsed = json.loads(value)
    assert isinstance(parsed, list), f"{value}: exec form expected"
    return [str(p) for p in parsed]


def copy_args(ins: Instruction) -> tuple[dict[str, str], list[str], str]:
    """(flags, sources, destination) of a COPY in shell form; anything else fails."""
    words = ins.value.split()
    flags = {}
    while words and words[0].startswith("--"):
        key, _, value = words.pop(0)[2:].partition("=")
        if key not in ("from", "chmod"):
            raise AssertionError(f"{ins}: COPY --{key} is not replayed by this test")
        flags[key] = value
    if ins.value.lstrip().startswith("[") or len(words) < 2:
        raise AssertionError(f"{ins}: only `COPY [--from=S] [--chmod=M] SRC... DEST` is replayed")
    return flags, words[:-1], words[-1]


# -- the build context (.dockerignore) ----------------------------------------------------------------


def ignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    """(exclude?, pattern) per line; `*`, `**`, `!` and plain names only, last match wins."""
    rules = []
    for raw in IGNORE_FILE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        exclude = not line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        if re.search(r"[?\[\]\\]", pattern):
            raise AssertionError(f".dockerignore: {line!r} uses a pattern form this test does not implement")
        regex = re.escape(pattern).replace(r"\*\*/", "(?:.*/)?").replace(r"\*\*", ".*").replace(r"\*", "[^/]*")
        rules.append((exclude, re.compile(regex + r"\Z")))
    return rules


def in_context(rel: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Docker's rule: a path is excluded when the last pattern matching it or a parent excludes it."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    included = True
    for exclude, regex in rules:
        if any(regex.match(p) for p in prefixes):
            included = not exclude
    return included


# -- replay ------------------------------------------------------------------------------------------


def expand(text: str, scope: dict[str, str], where: Instruction) -> str:
    if re.search(r"\$\{\w+:", text):
        raise AssertionError(f"{where}: ${{VAR:...}} forms are not replayed")

    def value(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in scope:
            raise AssertionError(f"{where}: ${name} is not set at this point")
        return scope[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, text)


APT_STEPS = ("apt-get update", "apt-get install", "rm -rf /var/lib/apt/lists/*", "mkdir -p /usr/share/man/man1")
USER_STEPS = ("groupadd", "useradd")


def steps(command: str) -> list[list[str]]:
    """The `&&`-joined commands of a RUN, each as words without leading VAR=value assignments."""
    out = []
    for part in command.split("&&"):
        words = shlex.split(part)
        while words and re.fullmatch(r"\w+=\S*", words[0]):
            words.pop(0)
        out.append(words)
    return out


def base_python(root: Path) -> Path:
    """The bin folder of a bare venv under `root` (pip only): what the base image's python3 is."""
    base = root / "base-python"
    if not (base / "bin" / "python3").exists():
        subprocess.run([sys.executable, "-m", "venv", str(base)], cwd="/", check=True, capture_output=True)
    # What hid the bug: `operator` already imported when sys.path[0] starts to matter.
    probe = "import sys; print(sorted({'operator', 'collections'} & set(sys.modules)))"
    early = subprocess.run([str(base / "bin" / "python3"), "-c", probe], capture_output=True, text=True, check=True)
    assert early.stdout.strip() == "[]", f"the bare interpreter imports at startup: {early.stdout}"
    return base / "bin"


@dataclasses.dataclass
class Replay:
    """Replays stages of the Dockerfile under `root`; each stage once (COPY --from reuses it)."""

    stages: dict[str, Stage]
    root: Path
    overrides: dict[str, str | None]
    """Variables whose ENV/ARG value the test replaces (None: left unset), like --build-arg."""
    log: list[str] = dataclasses.field(default_factory=list)
    done: dict[str, tuple[dict[str, str], Path]] = dataclasses.field(default_factory=dict)
    rules: list[tuple[bool, re.Pattern[str]]] = dataclasses.field(default_factory=ignore_rules)
    """.dockerignore, read once for every COPY."""

    def host_env(self) -> dict[str, str]:
        """What a build on this host starts from: a bare interpreter first on PATH, no venv leaking in.

        The base image's python3 has pip and nothing else. This interpreter has the test
        dependencies, whose `.pth` files import modules (`operator` among them) before the working
        folder joins sys.path, which hid a build failure (`python3 -m venv` in WORKDIR /src imported
        our `operator/`). So RUN steps get a fresh venv of this interpreter, with pip and no `.pth`.
        """
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env["PATH"] = f"{base_python(self.root)}{os.pathsep}{env.get('PATH', '')}"
        return env

    def inside(self, path: str, where: Instruction) -> Path:
        resolved = Path(os.path.normpath(path))  # no `..` out of the replay's folder
        assert resolved.is_absolute(), f"{where}: {path} is not absolute"
        assert self.root in resolved.parents or resolved == self.root, (
            f"{where}: {path} is outside the replay's folder; remap the variable it comes from"
        )
        return resolved

    def stage(self, name: str) -> tuple[dict[str, str], Path]:
        """Replay `name` after its parents: the ENV and WORKDIR it ends with (ARGs end with the stage)."""
        if name in self.done:
            return self.done[name]
        stage = self.stages[name]
        if stage.parent in self.stages:
            inherited, cwd = self.stage(stage.parent)
            env = dict(inherited)
        else:
            env, cwd = self.host_env(), self.root
        args: dict[str, str] = {}
        for ins in stage.instructions:
            scope = {**args, **env}  # ENV wins over an ARG of the same name
            if ins.name in ("ARG", "ENV"):
                self.assign(ins, env if ins.name == "ENV" else args, scope)
            elif ins.name == "WORKDIR":
                cwd = self.inside(expand(ins.value, scope, ins), ins)
                cwd.mkdir(parents=True, exist_ok=True)
            elif ins.name == "COPY":
                self.copy(ins, scope)
            elif ins.name == "RUN":
                self.run(ins, scope, cwd)
            elif ins.name not in ("LABEL", "USER", "ENTRYPOINT", "CMD"):
                raise AssertionError(f"{ins}: not replayed by this test")
        self.done[name] = env, cwd
        return env, cwd

    def assign(self, ins: Instruction, into: dict[str, str], scope: dict[str, str]) -> None:
        # One ENV with several pairs substitutes from the values before it, as Docker does.
        for pair in shlex.split(ins.value):
            key, eq, raw = pair.partition("=")
            if key in self.overrides:
                value = self.overrides[key]
                if value is None:
                    into.pop(key, None)
                else:
                    into[key] = value
            elif eq:
                into[key] = expand(raw, scope, ins)
            else:
                raise AssertionError(f"{ins}: ARG {key} has no default and the test gives it none")

    def copy(self, ins: Instruction, scope: dict[str, str]) -> None:
        flags, sources, dest = copy_args(ins)
        if "from" in flags:
            (source,) = sources
            here, there = expand(source, scope, ins), expand(dest, scope, ins)
            assert here == there, f"{ins}: a venv only works at the path it was built at"
            self.stage(flags["from"])
            assert Path(there).is_dir(), f"{ins}: stage {flags['from']} left no {there}"
            self.log.append(f"{ins}: the same path in both stages")
            return
        target = self.inside(expand(dest, scope, ins).rstrip("/") or "/", ins)
        if len(sources) == 1 and (ROOT / sources[0]).is_dir():
            self.copy_tree(ins, sources[0].strip("/"), target)
        elif all((ROOT / s).is_file() for s in sources) and (dest.endswith("/") or len(sources) == 1):
            for source in sources:
                assert in_context(source, self.rules), f"{ins}: {source} is not in the build context (.dockerignore)"
                to = target / Path(source).name if dest.endswith("/") else target
                to.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / source, to)
                if "chmod" in flags:
                    to.chmod(int(flags["chmod"], 8))
        else:
            absent = [s for s in sources if not (ROOT / s).exists()]
            raise AssertionError(f"{ins}: missing from the repository: {absent}" if absent else f"{ins}: form")

    def copy_tree(self, ins: Instruction, source: str, target: Path) -> None:
        copied = 0
        for folder, dirs, files in os.walk(ROOT / source):
            rel_folder = Path(folder).relative_to(ROOT)
            for entry in [*dirs, *files]:
                rel = (rel_folder / entry).as_posix()
                path = ROOT / rel
                if not in_context(rel, self.rules) or (path.is_dir() and not path.is_symlink()):
                    continue
                to = target / Path(rel).relative_to(source)
                to.parent.mkdir(parents=True, exist_ok=True)
                if path.is_symlink():
                    to.symlink_to(os.readlink(path))
                else:
                    shutil.copy2(path, to)
                copied += 1
        assert copied, f"{ins}: nothing of {source} is in the build context (.dockerignore)"

    def run(self, ins: Instruction, env: dict[str, str], cwd: Path) -> None:
        if ins.value.startswith("-") or ins.value.lstrip().startswith(("[", "<<")):
            raise AssertionError(f"{ins}: RUN flags, exec form and heredocs are not replayed")
        parts = steps(ins.value)
        kinds = {kind(words, ins) for words in parts}
        if kinds == {"shell"}:
            started = time.monotonic()
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", ins.value], env=env, cwd=cwd, check=False)
            assert done.returncode == 0, f"{ins}: exit {done.returncode}"
            self.log.append(f"{ins}: ran in {time.monotonic() - started:.1f} s")
        elif kinds == {"apt"}:
            packages = [w for words in parts if words[:2] == ["apt-get", "install"] for w in words[2:]]
            packages = [p for p in packages if not p.startswith("-")]
            assert packages, f"{ins}: installs nothing"
            for package in packages:
                status = subprocess.run(
                    ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True, check=False
                )
                assert status.stdout == "install ok installed", f"{ins}: {package} is not installed on this host"
            self.log.append(f"{ins}: not run; {', '.join(packages)} installed here (dpkg)")
        elif kinds == {"user"}:
            for words in parts:
                ids = {words[i + 1] for i, w in enumerate(words) if w in ("--uid", "--gid")}
                assert ids == {"10001"}, f"{ins}: {words[0]} must use uid/gid 10001, not {ids}"
            self.log.append(f"{ins}: not run; uid and gid 10001 checked")
        else:
            raise AssertionError(f"{ins}: mixes steps of kinds {sorted(kinds)}; split the RUN")


def kind(words: list[str], ins: Instruction) -> str:
    line = " ".join(words)
    if any(line.startswith(step) for step in APT_STEPS):
        return "apt"
    if words and words[0] in USER_STEPS:
        return "user"
    if words and words[0].startswith(("apt", "dpkg", "usermod", "chown", "chmod", "sudo")):
        raise AssertionError(f"{ins}: {words[0]} is not replayed by this test")
    return "shell"
