"""operator/settings.py (OperatorSettings, configure_kopf) and operator/cmd.py (argument parsing)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kopf
import pytest
from pydantic import ValidationError

from brokergroup.cli import build_parser
from brokergroup.common.settings import SettingsError, deep_merge, load_settings, nested, parse_overrides
from brokergroup.operator import cmd, names
from brokergroup.operator.settings import OperatorSettings, configure_kopf


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No BG_OPERATOR_* from the developer's shell; a working directory with nothing in it."""
    for name in list(os.environ):
        if name.upper().startswith("BG_OPERATOR_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def settings(**values: Any) -> OperatorSettings:
    return OperatorSettings(instance="test", **values)


# ---- OperatorSettings --------------------------------------------------------------------------


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    s = settings()
    assert s.namespaces == []
    assert s.kubeconfig is None
    assert (s.metrics_host, s.metrics_port, s.liveness_port) == ("127.0.0.1", 8080, 8081)  # a workstation
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert settings().metrics_host == "0.0.0.0"  # a pod: Prometheus scrapes it
    assert (s.resync_seconds, s.retry_seconds, s.controller_timeout) == (60.0, 5.0, 5.0)
    assert s.log_level == "INFO"
    assert s.controller_address("demo", "mq") == f"demo-controller-api.mq.svc:{names.CONTROLLER_API_PORT}"
    assert f"http://{s.controller_address('demo', 'mq')}" == names.controller_api_url("demo", "mq")


def test_instance_defaults_to_a_non_empty_host_name() -> None:
    assert OperatorSettings().instance


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a,b", ["a", "b"]),
        (" a , b ,", ["a", "b"]),
        ("", []),
        (",", []),
        ("mq", ["mq"]),
        (["x", "y-1"], ["x", "y-1"]),
    ],
)
def test_namespaces_split(value: Any, expected: list[str]) -> None:
    assert settings(namespaces=value).namespaces == expected


@pytest.mark.parametrize("bad", ["Upper", "a_b", "-a", "a-", "a.b", "a" * 64, "ns with space"])
def test_invalid_namespace_refused(bad: str) -> None:
    with pytest.raises(ValidationError, match="namespaces"):
        settings(namespaces=[bad])


def test_longest_namespace_accepted() -> None:
    assert settings(namespaces=["a" * 63]).namespaces == ["a" * 63]


def test_namespace_with_trailing_newline_refused() -> None:
    with pytest.raises(ValidationError, match="namespaces"):
        settings(namespaces=["mq\n"])


def test_namespaces_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BG_OPERATOR_NAMESPACES", "a, b")
    monkeypatch.setenv("BG_OPERATOR_METRICS_PORT", "9100")
    s = settings()
    assert s.namespaces == ["a", "b"]
    assert s.metrics_port == 9100


@pytest.mark.parametrize(
    "values",
    [
        {"metrics_port": -1},
        {"metrics_port": 65536},
        {"liveness_port": 70000},
        {"resync_seconds": 0.5},
        {"resync_seconds": 3601},
        {"retry_seconds": 0.01},
        {"retry_seconds": 601},
        {"controller_timeout": 0},
        {"controller_timeout": 121},
        {"unknown_setting": 1},
    ],
)
def test_out_of_range_or_unknown_refused(values: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match=next(iter(values))):
        settings(**values)


def test_same_metrics_and_liveness_port_refused() -> None:
    with pytest.raises(ValidationError, match="metrics_port and liveness_port are both 9000"):
        settings(metrics_port=9000, liveness_port=9000)


def test_both_ports_off_is_fine() -> None:
    s = settings(metrics_port=0, liveness_port=0)
    assert (s.metrics_port, s.liveness_port) == (0, 0)


@pytest.mark.parametrize("url", ["localhost:9878", "{name}.{namespace}.svc:9878", "just-a-host"])
def test_controller_url_without_scheme_refused(url: str) -> None:
    with pytest.raises(ValidationError, match="controller_url"):
        settings(controller_url=url)


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("http://127.0.0.1:9878", "127.0.0.1:9878"),
        ("http://127.0.0.1:9878/", "127.0.0.1:9878"),
        ("http://{name}.{namespace}.example:1234", "demo.mq.example:1234"),
        ("https://{namespace}-{name}:443/", "https://mq-demo:443"),  # kept: the client speaks TLS to it
        ("http://{cluster_ip}:9878/prefix", "10.0.0.7:9878/prefix"),
    ],
)
def test_controller_address(url: str, address: str) -> None:
    assert settings(controller_url=url).controller_address("demo", "mq", cluster_ip="10.0.0.7") == address


@pytest.mark.parametrize("url", ["http://{nmae}.{namespace}.svc:9878", "http://{name.svc:9878"])
def test_controller_url_with_bad_placeholder_refused_at_startup(url: str) -> None:
    with pytest.raises(ValidationError, match="controller_url"):
        settings(controller_url=url)


# ---- configure_kopf ----------------------------------------------------------------------------


@pytest.fixture
def kubernetes_logger_level() -> Iterator[None]:
    logger = logging.getLogger("kubernetes")
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.mark.usefixtures("kubernetes_logger_level")
def test_configure_kopf() -> None:
    k = kopf.OperatorSettings()
    configure_kopf(k, settings())
    assert k.peering.standalone is True
    assert k.posting.enabled is False
    assert k.persistence.finalizer == "operator.brokergroup.io/finalizer"
    progress = k.persistence.progress_storage
    assert isinstance(progress, kopf.AnnotationsProgressStorage)
    assert progress.prefix == "operator.brokergroup.io"
    diffbase = k.persistence.diffbase_storage
    assert isinstance(diffbase, kopf.AnnotationsDiffBaseStorage)
    assert diffbase.prefix == "operator.brokergroup.io"
    assert diffbase.key == "last-handled-configuration"
    assert k.background.cancellation_polling == 1.0
    assert k.execution.max_workers == 8
    assert k.watching.server_timeout == 300
    assert k.watching.client_timeout == 330
    assert k.watching.client_timeout > k.watching.server_timeout
    assert k.networking.request_timeout == 60
    assert tuple(k.queueing.error_delays) == (1, 2, 5, 10, 30, 60)
    assert logging.getLogger("kubernetes").level == logging.WARNING


@pytest.mark.usefixtures("kubernetes_logger_level")
def test_configure_kopf_is_repeatable() -> None:
    a, b = kopf.OperatorSettings(), kopf.OperatorSettings()
    configure_kopf(a, settings())
    configure_kopf(b, settings())
    configure_kopf(b, settings())
    assert (a.peering.standalone, a.posting.enabled, a.persistence.finalizer) == (
        b.peering.standalone,
        b.posting.enabled,
        b.persistence.finalizer,
    )
    assert a.queueing.error_delays == b.queueing.error_delays


# ---- cmd: `brokergroup operator ...` -----------------------------------------------------------


def parse(*argv: str) -> Any:
    return build_parser().parse_args(["operator", *argv])


def settings_from(args: Any) -> OperatorSettings:
    """What `cmd.run` loads from parsed arguments (the same helpers, without starting kopf)."""
    flags = {k: v for k, v in vars(args).items() if k not in ("config", "func", "overrides", "command")}
    return load_settings(
        OperatorSettings, config_file=args.config, flags=deep_merge(nested(flags), parse_overrides(args.overrides))
    )


def test_parse_namespace_and_metrics_port() -> None:
    args = parse("--namespace", "a,b", "--metrics-port", "9000")
    assert args.command == "operator"
    assert args.func is cmd.run
    assert args.namespaces == "a,b"
    assert args.metrics_port == 9000
    s = settings_from(args)
    assert s.namespaces == ["a", "b"]
    assert s.metrics_port == 9000
    assert s.liveness_port == 8081


def test_parse_no_flags_leaves_everything_unset() -> None:
    args = parse()
    unset = {k: v for k, v in vars(args).items() if k not in ("command", "func", "overrides")}
    assert all(v is None for v in unset.values()), unset
    assert args.overrides == []
    assert settings_from(args).namespaces == []  # every namespace


def test_parse_every_flag() -> None:
    args = parse(
        "--config",
        "op.toml",
        "--kubeconfig",
        "kube.yaml",
        "--namespace",
        "mq",
        "--metrics-host",
        "127.0.0.1",
        "--metrics-port",
        "0",
        "--liveness-port",
        "9001",
        "--resync-seconds",
        "30.5",
        "--controller-url",
        "http://{name}.{namespace}:1",
        "--log-level",
        "DEBUG",
        "--set",
        "retry_seconds=2",
        "--set",
        "instance=me",
    )
    assert args.config == Path("op.toml")
    assert args.kubeconfig == Path("kube.yaml")
    assert (args.metrics_host, args.metrics_port, args.liveness_port) == ("127.0.0.1", 0, 9001)
    assert args.resync_seconds == 30.5
    assert args.controller_url == "http://{name}.{namespace}:1"
    assert args.log_level == "DEBUG"
    assert args.overrides == ["retry_seconds=2", "instance=me"]


def test_flags_beat_environment_and_set_overrides_reach_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BG_OPERATOR_NAMESPACES", "from-env")
    monkeypatch.setenv("BG_OPERATOR_RETRY_SECONDS", "9")
    s = settings_from(parse("--namespace", "from-flag", "--set", "retry_seconds=2", "--set", "instance=me"))
    assert s.namespaces == ["from-flag"]
    assert s.retry_seconds == 2.0
    assert s.instance == "me"


def test_config_file_is_the_lowest_layer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "op.toml"
    config.write_text('namespaces = ["file-a", "file-b"]\nmetrics_port = 9100\nliveness_port = 9101\n')
    monkeypatch.setenv("BG_OPERATOR_LIVENESS_PORT", "9102")
    s = settings_from(parse("--config", str(config), "--metrics-port", "9200"))
    assert s.namespaces == ["file-a", "file-b"]
    assert (s.metrics_port, s.liveness_port) == (9200, 9102)


@pytest.mark.parametrize(
    "argv",
    [
        ("--metrics-port", "lots"),
        ("--liveness-port", "1.5"),
        ("--resync-seconds", "often"),
        ("--no-such-flag",),
    ],
)
def test_unparseable_flags_exit(argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse(*argv)
    assert exc.value.code == 2
    capsys.readouterr()


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (("--namespace", "Bad_NS"), "namespaces"),
        (("--metrics-port", "70000"), "metrics_port"),
        (("--metrics-port", "9000", "--liveness-port", "9000"), "metrics_port and liveness_port"),
        (("--set", "bogus=1"), "bogus"),
        (("--controller-url", "localhost:1"), "controller_url"),
    ],
)
def test_invalid_settings_from_flags_are_a_settings_error(argv: tuple[str, ...], field: str) -> None:
    with pytest.raises(SettingsError, match=field):
        settings_from(parse(*argv))


def test_set_without_equals_is_a_settings_error() -> None:
    with pytest.raises(SettingsError, match="KEY=VALUE"):
        settings_from(parse("--set", "retry_seconds"))


@pytest.mark.parametrize(("root", "access"), [(logging.INFO, logging.WARNING), (logging.DEBUG, logging.NOTSET)])
def test_no_access_log_line_per_scrape_or_probe_above_debug(root: int, access: int) -> None:
    from brokergroup.operator import cmd

    logger = logging.getLogger("aiohttp.access")
    saved_root, saved_access = logging.getLogger().level, logger.level
    try:
        logging.getLogger().setLevel(root)
        logger.setLevel(logging.NOTSET)
        cmd.quiet_access_log()
        assert logger.level == access
    finally:
        logging.getLogger().setLevel(saved_root)
        logger.setLevel(saved_access)
