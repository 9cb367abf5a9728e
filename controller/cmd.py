"""`brokergroup controller`: run one controller node."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from brokergroup.common import eventloop
from brokergroup.common.settings import load_settings, nested, parse_overrides
from brokergroup.controller.node import run_node
from brokergroup.controller.settings import ControllerSettings


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "controller",
        help="run one controller node (pysyncobj Raft + HTTP API)",
        description="Run one controller node. Settings: --config file, then BG_CONTROLLER_* env, then flags.",
    )
    p.add_argument("--config", type=Path, help="TOML settings file")
    p.add_argument("--node-id", dest="node_id", help="this node's id, one of --peers (default n0)")
    p.add_argument("--peers", help="all nodes: 'n0=raft_host:port,api_host:port;n1=...'")
    p.add_argument("--data-dir", dest="data_dir", type=Path, help="journal, snapshot and event log directory")
    p.add_argument("--api-host", dest="api.host", help="HTTP API bind address")
    p.add_argument("--api-port", dest="api.port", type=int, help="HTTP API port")
    p.add_argument("--raft-bind-host", dest="raft.bind_host", help="bind the Raft port to this interface")
    p.add_argument(
        "--insecure-dev",
        dest="raft.insecure_dev",
        action="store_const",
        const=True,
        help="allow a Raft port without a password (local development only)",
    )
    p.add_argument(
        "--enable-elect-unclean-master",
        dest="rocketmq.enable_elect_unclean_master",
        action="store_const",
        const=True,
        help="allow electing outside the sync-state-set",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any setting by dotted path, e.g. rocketmq.scanInactiveMasterInterval=1000",
    )
    p.add_argument("--log-level", dest="log_level", help="DEBUG, INFO, WARNING")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    flags = {k: v for k, v in vars(args).items() if k not in ("config", "func", "overrides", "command")}
    from brokergroup.common.settings import deep_merge

    settings = load_settings(
        ControllerSettings,
        config_file=args.config,
        flags=deep_merge(nested(flags), parse_overrides(args.overrides)),
    )
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("pysyncobj").setLevel(logging.WARNING)
    eventloop.run(run_node(settings))
    return 0
