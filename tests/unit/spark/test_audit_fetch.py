"""`brokergroup audit fetch`, the pure parts: flags, listings, the download plan, answers, exit
code and summaries. The HTTP shell runs against real controllers in
tests/integration/spark/test_audit_fetch.py."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from brokergroup import cli
from brokergroup.common.settings import SettingsError
from brokergroup.spark import fetch
from brokergroup.spark.fetch import ControllerResult, Listing, RemoteFile

# ---- --controller URLs --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "base"),
    [
        (
            "http://demo-controller-0.demo-controller.ns.svc:9878",
            "http://demo-controller-0.demo-controller.ns.svc:9878",
        ),
        ("http://127.0.0.1:9878/", "http://127.0.0.1:9878"),
        ("  https://c0:443  ", "https://c0:443"),
        ("HTTP://c0", "http://c0"),
        ("http://[::1]:9878", "http://[::1]:9878"),
    ],
)
def test_a_controller_url_becomes_its_base(value: str, base: str) -> None:
    assert fetch.controller_url(value) == base


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("c0:9878", "the scheme must be http or https (got 'c0')"),
        ("127.0.0.1:9878", "the scheme must be http or https"),
        ("ftp://c0:21", "the scheme must be http or https (got 'ftp')"),
        ("", "the scheme must be http or https (got 'none')"),
        ("http://", "no host"),
        ("http://:9878", "no host"),
        ("http://c0:98x8", "bad port"),
        ("http://c0:70000", "bad port"),
        ("http://admin:secret@c0:9878", "user info is not used"),
        ("http://c0:9878/v1/eventlog", "no path, query or fragment"),
        ("http://c0:9878?x=1", "no path, query or fragment"),
        ("http://c0:9878#top", "no path, query or fragment"),
    ],
)
def test_a_bad_controller_url_is_explained(value: str, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        fetch.controller_url(value)


def test_flags_become_a_config(tmp_path: Path) -> None:
    config = fetch.config_from_flags(["http://a:1", "http://b:2/"], tmp_path, None, allow_partial=True)
    assert config == fetch.FetchConfig(("http://a:1", "http://b:2"), tmp_path, 30.0, allow_partial=True)
    assert fetch.config_from_flags(["http://a:1"], tmp_path, 2.5, allow_partial=False).timeout == 2.5


@pytest.mark.parametrize(
    ("controllers", "out", "timeout", "message"),
    [
        (None, Path("x"), None, "--controller URL is required"),
        ([], Path("x"), None, "--controller URL is required"),
        (["http://a:1"], None, None, "--out DIR is required"),
        (["http://a:1", "a:2"], Path("x"), None, "--controller 'a:2': the scheme must be http or https"),
        (["http://a:1", "http://a:1/"], Path("x"), None, "--controller 'http://a:1/': given twice"),
        (["http://a:1"], Path("x"), 0.0, "--timeout (0.0) must be more than 0"),
        (["http://a:1"], Path("x"), -1.0, "--timeout (-1.0) must be more than 0"),
        (["http://a:1"], Path("x"), float("nan"), "--timeout (nan)"),
        (["http://a:1"], Path("x"), 1e9, "at most 3600 seconds"),
    ],
)
def test_bad_flags_are_named(
    controllers: list[str] | None, out: Path | None, timeout: float | None, message: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        fetch.config_from_flags(controllers, out, timeout, allow_partial=False)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["fetch", "--controller", "htp://c0:9878", "--out", "x"], "--controller 'htp://c0:9878': the scheme"),
        (["fetch", "--out", "x"], "audit fetch: --controller URL is required"),
        (["fetch", "--controller", "http://c0:9878"], "audit fetch: --out DIR is required"),
        (
            ["fetch", "--controller", "http://c0:1", "--out", "x", "--sets", "2"],
            "--sets: not an option of `audit fetch`",
        ),
        (
            ["fetch", "--controller", "http://c0:1", "--out", "x", "--fail-on-violations"],
            "--fail-on-violations: not an option of `audit fetch`",
        ),
        (["some-dir", "--controller", "http://c0:1"], "--controller: options of `audit fetch`, not of `audit DIR`"),
        (["generate", "--out", "x", "--allow-partial"], "--allow-partial: not an option of `audit generate`"),
    ],
)
def test_the_command_line_refuses_bad_fetch_flags(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert cli.main(["audit", *args]) == 2
    assert message in capsys.readouterr().err


def test_a_malformed_controller_url_is_a_usage_error_that_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ["audit", "fetch", "--controller", "http://127.0.0.1:9878", "--controller", "127.0.0.1:9879"]
    assert cli.main([*args, "--out", str(tmp_path)]) == 2
    assert "--controller '127.0.0.1:9879': the scheme must be http or https" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_timeout_that_is_not_a_number_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(["audit", "fetch", "--controller", "http://c0:1", "--out", "x", "--timeout", "soon"])
    assert caught.value.code == 2
    assert "--timeout: invalid float value: 'soon'" in capsys.readouterr().err


# ---- listings -----------------------------------------------------------------------------------


def listing_body(node: object = "n0", files: object = None) -> bytes:
    if files is None:
        files = [{"name": "events-n0-000000.jsonl", "size": 10}, {"name": "events-n0-000001.jsonl", "size": 0}]
    return json.dumps({"nodeId": node, "files": files}).encode()


def test_a_listing_is_read() -> None:
    assert fetch.parse_listing(listing_body()) == Listing(
        "n0", (RemoteFile("events-n0-000000.jsonl", 10), RemoteFile("events-n0-000001.jsonl", 0))
    )
    extra = json.dumps({"nodeId": "ctl-1.a", "files": [], "later": True}).encode()
    assert fetch.parse_listing(extra) == Listing("ctl-1.a", ())


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"<html>hello</html>", "the listing is not JSON"),
        (b"[]", "not an object with nodeId and files"),
        (json.dumps({"nodeId": "n0"}).encode(), "not an object with nodeId and files"),
        (listing_body(node=None), "nodeId None is not a node id"),
        (listing_body(node="../etc"), "nodeId '../etc' is not a node id"),
        (listing_body(node=".hidden"), "nodeId '.hidden' is not a node id"),
        (listing_body(node="a..b"), "nodeId 'a..b' is not a node id"),
        (listing_body(files=["events-n0-000000.jsonl"]), "holds 'events-n0-000000.jsonl', not {name, size}"),
        (listing_body(files=[{"name": "events-n0-000000.jsonl", "size": -1}]), "not {name, size}"),
        (listing_body(files=[{"name": "events-n0-000000.jsonl", "size": True}]), "not {name, size}"),
        (listing_body(files=[{"name": "events-n0-000000.jsonl", "size": "10"}]), "not {name, size}"),
        (listing_body(files=[{"name": "events-n1-000000.jsonl", "size": 1}]), "not an event-log file of node n0"),
        (listing_body(files=[{"name": "../events-n0-000000.jsonl", "size": 1}]), "not an event-log file of node n0"),
        (listing_body(files=[{"name": "events-n0-1.jsonl", "size": 1}]), "not an event-log file of node n0"),
        (
            listing_body(files=[{"name": "events-n0-000000.jsonl", "size": 1}] * 2),
            "names 'events-n0-000000.jsonl' twice",
        ),
    ],
)
def test_a_listing_that_is_not_a_controllers_is_refused(body: bytes, problem: str) -> None:
    with pytest.raises(fetch.FetchError) as caught:
        fetch.parse_listing(body)
    assert problem in str(caught.value)


# ---- the plan -----------------------------------------------------------------------------------


def test_the_plan_downloads_new_and_grown_files_and_skips_complete_ones() -> None:
    listing = Listing(
        "n0",
        tuple(RemoteFile(f"events-n0-00000{i}.jsonl", size) for i, size in enumerate((100, 200, 300, 0, 50))),
    )
    local = {"events-n0-000000.jsonl": 100, "events-n0-000001.jsonl": 150, "events-n0-000003.jsonl": 0}
    local |= {"events-n0-000004.jsonl": 80, "events-n0-000009.jsonl": 5}  # 9: no longer listed, left alone
    steps = fetch.plan(listing, local)
    assert [(s.file.name[-12:], s.action, s.local_size) for s in steps] == [
        ("000000.jsonl", "up-to-date", 100),
        ("000001.jsonl", "download", 150),
        ("000002.jsonl", "download", None),
        ("000003.jsonl", "up-to-date", 0),
        ("000004.jsonl", "conflict", 80),
    ]
    message = fetch.conflict_message(steps[-1], Path("/o/n0/events-n0-000004.jsonl"))
    assert message.startswith("/o/n0/events-n0-000004.jsonl: the local copy (80 bytes) is larger than")
    assert "(50 bytes)" in message


def test_an_empty_listing_plans_nothing() -> None:
    assert fetch.plan(Listing("n0", ()), {"events-n0-000000.jsonl": 3}) == ()


# ---- answers ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("got", "length", "last", "listed", "problem"),
    [
        (100, "100", b"\n", 100, None),
        (120, "120", b"\n", 100, None),  # the file grew since it was listed
        (0, "0", b"", 0, None),
        (100, None, b"\n", 100, None),
        (60, "100", b"\n", 100, "the answer ended after 60 of 100 bytes"),
        (60, "x", b"\n", 10, "the answer ended after 60 of x bytes"),
        (100, "100", b"}", 100, "the answer does not end with a newline"),
        (80, "80", b"\n", 100, "80 bytes, fewer than the 100 listed: was the file replaced?"),
    ],
)
def test_a_downloaded_answer_is_checked(got: int, length: str | None, last: bytes, listed: int, problem: str) -> None:
    assert fetch.answer_problem(got, length, last, listed) == problem


@pytest.mark.parametrize(
    ("body", "remark"),
    [
        (
            b'{"code": 3, "name": "REQUEST_CODE_NOT_SUPPORTED", "remark": "GET /v1/eventlog: Not Found"}',
            "REQUEST_CODE_NOT_SUPPORTED: GET /v1/eventlog: Not Found",
        ),
        (b'{"remark": "no"}', "no"),
        (b"<html>bad gateway</html>", "b'<html>bad gateway</html>'"),
        (b"", "(an empty answer)"),
    ],
)
def test_an_error_answer_is_shown_by_its_remark(body: bytes, remark: str) -> None:
    assert fetch.error_remark(body) == remark


# ---- exit code and summaries --------------------------------------------------------------------

GOOD = ControllerResult("http://a:1", "n0", files=2, total_bytes=300, downloaded=1, downloaded_bytes=200, up_to_date=1)
DOWN = ControllerResult("http://b:1", error="cannot reach the controller: [Errno 111] Connection refused")


@pytest.mark.parametrize(
    ("results", "allow_partial", "code"),
    [
        ([GOOD, GOOD], False, 0),
        ([GOOD, DOWN], False, 1),
        ([GOOD, DOWN], True, 0),
        ([DOWN, DOWN], True, 1),
        ([DOWN], False, 1),
    ],
)
def test_the_exit_code(results: list[ControllerResult], allow_partial: bool, code: int) -> None:
    assert fetch.exit_code(results, allow_partial=allow_partial) == code


def test_one_summary_line_per_controller() -> None:
    assert fetch.summary_line(GOOD) == (
        "http://a:1 n0: 2 files, 300 bytes (1 downloaded, 200 bytes; 1 up to date) in 0.00 s"
    )
    assert fetch.summary_line(DOWN) == (
        "http://b:1 ?: 0 files, 0 bytes (0 downloaded, 0 bytes; 0 up to date) in 0.00 s; "
        "FAILED: cannot reach the controller: [Errno 111] Connection refused"
    )


def test_the_json_summary(tmp_path: Path) -> None:
    config = fetch.FetchConfig(("http://a:1", "http://b:1"), tmp_path, allow_partial=True)
    summary = fetch.summary_json(config, [GOOD, DOWN])
    assert (summary["ok"], summary["files"], summary["bytes"], summary["out"]) == (True, 2, 300, str(tmp_path))
    assert summary["controllers"][0] == {
        "url": "http://a:1",
        "nodeId": "n0",
        "files": 2,
        "bytes": 300,
        "downloaded": 1,
        "downloadedBytes": 200,
        "upToDate": 1,
        "seconds": 0.0,
        "error": None,
    }
    assert summary["controllers"][1]["error"] == DOWN.error
    assert fetch.summary_json(dataclasses.replace(config, allow_partial=False), [GOOD, DOWN])["ok"] is False
