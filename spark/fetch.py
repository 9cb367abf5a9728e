"""`brokergroup audit fetch`: download the controllers' event-log files over HTTP.

Every controller node serves its own files (docs/operations.md): `GET /v1/eventlog` lists
them with the size of their complete lines, `GET /v1/eventlog/{name}` answers one, cut after
the last newline the node saw when it opened the file. For each `--controller URL` the command
lists the files and downloads them to `<out>/<nodeId>/<file>`, the layout `brokergroup audit
DIR` reads (every `*.jsonl` below DIR; the file names carry the node id as well).

- A file goes to `.<file>.part` first and is renamed when its last byte has arrived, so `<out>`
  never holds a half-downloaded `*.jsonl`.
- Re-runs resume: a file whose local copy has the listed size is skipped (sizes are compared,
  not contents). A smaller local copy is downloaded again, whole: the controller has appended to
  it since. A *larger* local copy is a conflict: the controller's log was replaced (a wiped
  data volume) or the copy is not that node's. It is not overwritten, because it may hold the
  only record of those events, and the controller counts as failed; move the copy away and fetch
  again.
- A controller that fails (unreachable, an error answer, a conflict) does not stop the others,
  and keeps what it gave before failing. The command then exits 1, unless `--allow-partial` is
  given and at least one controller answered in full: the audit reports what is missing as
  gaps, it does not need every node's log.

The pure parts (flag checks, reading a listing, the plan, the exit code, the summaries) are
plain functions; `fetch_all` is the I/O shell around them. HTTP is urllib, with no proxy from
the environment: the controllers are reached directly, as the brokers reach them. The audit
imports no controller code (import-linter), so the file-name pattern is stated here again.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from brokergroup.common.settings import SettingsError

DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 3600.0
CHUNK = 256 * 1024
NODE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
FILE_NAME = re.compile(r"events-(?P<node>[A-Za-z0-9][A-Za-z0-9_.-]*)-[0-9]{6,}\.jsonl")
OK, FAILED = 0, 1
Progress = Callable[[str, int, int], None]
"""progress(url, bytes done, bytes planned) for one controller."""


class FetchError(Exception):
    """A controller could not give its files; the message names the URL or file and the reason."""


# ---- flags --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FetchConfig:
    controllers: tuple[str, ...]
    """Base URLs of the controller nodes' HTTP APIs, one per node (`http://host:9878`)."""
    out: Path
    """Where `<nodeId>/<file>` go; the folder to give `brokergroup audit`."""
    timeout: float = DEFAULT_TIMEOUT
    """Seconds without an answer (to connect, or between bytes of an answer) before a request fails."""
    allow_partial: bool = False
    """Exit 0 when at least one controller answered in full, with a warning for each other one."""


def controller_url(value: str) -> str:
    """The base URL `value` names, as `scheme://host[:port]`; ValueError saying what is wrong."""
    parts = urllib.parse.urlsplit(value.strip())
    example = "give the controller API's base URL, e.g. http://demo-controller-0.demo-controller.ns.svc:9878"
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"the scheme must be http or https (got {parts.scheme or 'none'!r}); {example}")
    if not parts.hostname:
        raise ValueError(f"no host; {example}")
    try:
        _ = parts.port  # urlsplit checks the port only when asked
    except ValueError as exc:
        raise ValueError(f"bad port: {exc}") from None
    if parts.username is not None or parts.password is not None:
        raise ValueError("user info is not used: the event-log endpoints need no credentials")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"no path, query or fragment: the command adds /v1/eventlog itself; {example}")
    return f"{parts.scheme}://{parts.netloc}"


def config_from_flags(
    controllers: Sequence[str] | None, out: Path | None, timeout: float | None, *, allow_partial: bool
) -> FetchConfig:
    """The fetch settings from `audit fetch`'s flags; SettingsError naming the flag that is wrong."""
    if not controllers:
        raise SettingsError("audit fetch: --controller URL is required (once per controller node)")
    if out is None:
        raise SettingsError("audit fetch: --out DIR is required")
    urls: list[str] = []
    for value in controllers:
        try:
            url = controller_url(value)
        except ValueError as exc:
            raise SettingsError(f"--controller {value!r}: {exc}") from None
        if url in urls:
            raise SettingsError(f"--controller {value!r}: given twice; give each controller node once")
        urls.append(url)
    if timeout is not None and not 0 < timeout <= MAX_TIMEOUT:
        raise SettingsError(f"--timeout ({timeout}) must be more than 0 and at most {MAX_TIMEOUT:g} seconds")
    return FetchConfig(tuple(urls), out, DEFAULT_TIMEOUT if timeout is None else timeout, allow_partial)


# ---- listings and the plan ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RemoteFile:
    name: str
    size: int


@dataclasses.dataclass(frozen=True)
class Listing:
    node_id: str
    files: tuple[RemoteFile, ...]


def parse_listing(body: bytes) -> Listing:
    """`GET /v1/eventlog`'s answer, checked: a node id fit for a folder name, and only that node's
    event-log file names, each once, with sizes. FetchError saying what is wrong."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise FetchError(f"the listing is not JSON ({exc}); is this a brokergroup controller?") from None
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        raise FetchError("the listing is not an object with nodeId and files; is this a brokergroup controller?")
    node = data.get("nodeId")
    if not isinstance(node, str) or not NODE_ID.fullmatch(node) or ".." in node:
        raise FetchError(f"the listing's nodeId {node!r} is not a node id")
    files: list[RemoteFile] = []
    for item in data["files"]:
        name = item.get("name") if isinstance(item, dict) else None
        size = item.get("size") if isinstance(item, dict) else None
        if not isinstance(name, str) or not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise FetchError(f"the listing holds {item!r}, not {{name, size}}")
        match = FILE_NAME.fullmatch(name)
        if match is None or match["node"] != node:
            raise FetchError(f"the listing names {name!r}, not an event-log file of node {node}")
        if any(f.name == name for f in files):
            raise FetchError(f"the listing names {name!r} twice")
        files.append(RemoteFile(name, size))
    return Listing(node, tuple(files))


Action = Literal["download", "up-to-date", "conflict"]


@dataclasses.dataclass(frozen=True)
class Step:
    file: RemoteFile
    action: Action
    local_size: int | None
    """The local copy's size before the run; None when there is none."""


def plan(listing: Listing, local_sizes: Mapping[str, int]) -> tuple[Step, ...]:
    """What to do with each listed file, given the sizes of the local copies (see the module doc)."""
    steps = []
    for remote in listing.files:
        local = local_sizes.get(remote.name)
        if local is None or local < remote.size:
            action: Action = "download"
        elif local == remote.size:
            action = "up-to-date"
        else:
            action = "conflict"
        steps.append(Step(remote, action, local))
    return tuple(steps)


def conflict_message(step: Step, path: Path) -> str:
    return (
        f"{path}: the local copy ({step.local_size} bytes) is larger than the controller's file "
        f"({step.file.size} bytes): the controller's log was replaced, or the copy is not its; "
        "it is kept as it is, move it away to fetch the controller's file"
    )


# ---- results ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ControllerResult:
    url: str
    node_id: str | None = None
    files: int = 0
    """Listed files with a complete local copy after the run."""
    total_bytes: int = 0
    """Their local size."""
    downloaded: int = 0
    downloaded_bytes: int = 0
    up_to_date: int = 0
    seconds: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def exit_code(results: Sequence[ControllerResult], *, allow_partial: bool) -> int:
    """0 when every controller answered in full, or with `allow_partial` when at least one did."""
    answered = sum(r.ok for r in results)
    if answered == len(results) or (allow_partial and answered > 0):
        return OK
    return FAILED


def summary_line(result: ControllerResult) -> str:
    node = result.node_id or "?"
    done = (
        f"{result.url} {node}: {result.files} files, {result.total_bytes} bytes "
        f"({result.downloaded} downloaded, {result.downloaded_bytes} bytes; {result.up_to_date} up to date) "
        f"in {result.seconds:.2f} s"
    )
    return done if result.ok else f"{done}; FAILED: {result.error}"


def summary_json(config: FetchConfig, results: Sequence[ControllerResult]) -> dict[str, Any]:
    return {
        "out": str(config.out),
        "ok": exit_code(results, allow_partial=config.allow_partial) == OK,
        "allowPartial": config.allow_partial,
        "files": sum(r.files for r in results),
        "bytes": sum(r.total_bytes for r in results),
        "controllers": [
            {
                "url": r.url,
                "nodeId": r.node_id,
                "files": r.files,
                "bytes": r.total_bytes,
                "downloaded": r.downloaded,
                "downloadedBytes": r.downloaded_bytes,
                "upToDate": r.up_to_date,
                "seconds": round(r.seconds, 3),
                "error": r.error,
            }
            for r in results
        ],
    }


# ---- the I/O shell ------------------------------------------------------------------------------


class Http:
    """GET over urllib with a socket timeout and no proxy taken from the environment."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def get(self, url: str) -> http.client.HTTPResponse:
        """The open response to a 200; FetchError naming the URL for anything else."""
        try:
            response: http.client.HTTPResponse = self._opener.open(url, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            with exc:
                try:
                    body = exc.read(4096)
                except (OSError, http.client.HTTPException):
                    body = b""  # the status alone is the answer, then
                raise FetchError(f"GET {url}: HTTP {exc.code}: {error_remark(body)}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            raise FetchError(f"GET {url}: {unreachable(exc, self.timeout)}") from None
        return response

    def read(self, url: str, *, limit: int = 64 * 1024 * 1024) -> bytes:
        """The whole body of a 200 answer to GET `url` (at most `limit` bytes); FetchError otherwise."""
        with self.get(url) as response:
            try:
                body = response.read(limit + 1)
            except (OSError, http.client.HTTPException) as exc:
                raise FetchError(f"GET {url}: {unreachable(exc, self.timeout)}") from None
        if len(body) > limit:
            raise FetchError(f"GET {url}: the answer is larger than {limit} bytes")
        return body


def error_remark(body: bytes) -> str:
    """The `remark` of a controller's error body, or the start of whatever else came back."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict) and isinstance(data.get("remark"), str):
        return f"{data.get('name', '')}: {data['remark']}".lstrip(": ")
    return repr(body[:200]) if body else "(an empty answer)"


def unreachable(exc: BaseException, timeout: float) -> str:
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, TimeoutError):
        return f"no answer within {timeout:g} s (--timeout)"
    return f"cannot reach the controller: {reason}"


def local_sizes(folder: Path, names: Iterable[str]) -> dict[str, int]:
    sizes = {}
    for name in names:
        path = folder / name
        if path.is_file():
            sizes[name] = path.stat().st_size
    return sizes


def answer_problem(got: int, content_length: str | None, last_byte: bytes, listed: int) -> str | None:
    """What is wrong with a downloaded file of `got` bytes, if anything."""
    if content_length is not None and (not content_length.isdigit() or got != int(content_length)):
        return f"the answer ended after {got} of {content_length} bytes"
    if got and last_byte != b"\n":
        return "the answer does not end with a newline"
    if got < listed:
        return f"{got} bytes, fewer than the {listed} listed: was the file replaced?"
    return None


def download(http_: Http, url: str, target: Path, listed: int, progress: Callable[[int], None]) -> int:
    """GET `url` into `target` by way of a `.part` file; the bytes written. FetchError when the
    answer is cut short, does not end a line, or is shorter than the listed size."""
    part = target.with_name(f".{target.name}.part")
    try:
        with http_.get(url) as response, part.open("wb") as f:
            length = response.headers.get("Content-Length")
            got, last = 0, b""
            while chunk := read_chunk(response, url, http_.timeout):
                f.write(chunk)
                got += len(chunk)
                last = chunk[-1:]
                progress(len(chunk))
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    problem = answer_problem(got, length, last, listed)
    if problem is not None:
        part.unlink(missing_ok=True)
        raise FetchError(f"GET {url}: {problem}")
    part.replace(target)
    return got


def read_chunk(response: http.client.HTTPResponse, url: str, timeout: float) -> bytes:
    try:
        return response.read(CHUNK)
    except (OSError, http.client.HTTPException) as exc:
        raise FetchError(f"GET {url}: {unreachable(exc, timeout)}") from None


def fetch_controller(
    http_: Http, url: str, out: Path, taken: Mapping[str, str], progress: Progress
) -> ControllerResult:
    """List and download one controller's files; the error, if any, is in the result. `taken`
    maps the node ids already fetched in this run to their URLs."""
    started = time.monotonic()
    try:
        listing = parse_listing(http_.read(f"{url}/v1/eventlog"))
    except FetchError as exc:
        error = str(exc).removeprefix(f"GET {url}/v1/eventlog: ")
        return ControllerResult(url, error=error, seconds=time.monotonic() - started)
    if listing.node_id in taken:
        error = (
            f"node {listing.node_id} again (also at {taken[listing.node_id]}): give each node's address, not a Service"
        )
        return ControllerResult(url, listing.node_id, error=error, seconds=time.monotonic() - started)
    folder = out / listing.node_id
    folder.mkdir(parents=True, exist_ok=True)
    steps = plan(listing, local_sizes(folder, (f.name for f in listing.files)))
    result = apply_plan(http_, url, folder, steps, progress)
    return dataclasses.replace(result, node_id=listing.node_id, seconds=time.monotonic() - started)


def apply_plan(http_: Http, url: str, folder: Path, steps: Sequence[Step], progress: Progress) -> ControllerResult:
    """Download what the plan says, in order; stop at the first failed download (the next ones
    would fail alike). Conflicts are reported and the other files fetched all the same."""
    planned = sum(s.file.size for s in steps if s.action == "download")
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        progress(url, done, max(planned, done))

    progress(url, 0, planned)
    errors: list[str] = []
    files = total = downloaded = downloaded_bytes = up_to_date = 0
    for step in steps:
        target = folder / step.file.name
        if step.action == "conflict":
            errors.append(conflict_message(step, target))
            continue
        if step.action == "up-to-date":
            size = step.file.size
            up_to_date += 1
        else:
            file_url = f"{url}/v1/eventlog/{urllib.parse.quote(step.file.name, safe='')}"
            try:
                size = download(http_, file_url, target, step.file.size, advance)
            except FetchError as exc:
                errors.append(str(exc))
                break
            downloaded += 1
            downloaded_bytes += size
        files += 1
        total += size
    return ControllerResult(
        url,
        files=files,
        total_bytes=total,
        downloaded=downloaded,
        downloaded_bytes=downloaded_bytes,
        up_to_date=up_to_date,
        error="; ".join(errors) if errors else None,
    )


def fetch_all(config: FetchConfig, progress: Progress) -> list[ControllerResult]:
    """Every controller in turn; a failure is recorded in its result and the next one is tried."""
    http_ = Http(config.timeout)
    config.out.mkdir(parents=True, exist_ok=True)
    results: list[ControllerResult] = []
    taken: dict[str, str] = {}
    for url in config.controllers:
        result = fetch_controller(http_, url, config.out, taken, progress)
        if result.node_id is not None and result.node_id not in taken:
            taken[result.node_id] = url
        results.append(result)
    return results
