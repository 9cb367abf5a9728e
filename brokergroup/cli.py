"""The `brokergroup` command: one entry point, one subcommand per process or tool (DESIGN §1)."""

from __future__ import annotations

import argparse
import sys

from brokergroup import __version__
from brokergroup.common.lasting import TaskFailedError
from brokergroup.common.settings import SettingsError


def build_parser() -> argparse.ArgumentParser:
    from brokergroup import bench
    from brokergroup.controller import admin, cmd

    parser = argparse.ArgumentParser(prog="brokergroup", description=__doc__)
    parser.add_argument("--version", action="version", version=f"brokergroup {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    cmd.add_parser(sub)
    admin.add_parser(sub)
    from brokergroup.broker import cmd as broker_cmd

    broker_cmd.add_parsers(sub)
    bench.add_parser(sub)
    from brokergroup import demo
    from brokergroup.local import cmd as local_cmd

    local_cmd.add_parser(sub)
    demo.add_parser(sub)
    from brokergroup.spark import cli as audit_cli

    audit_cli.add_parser(sub)
    from brokergroup.chaos import cmd as chaos_cmd
    from brokergroup.operator import cmd as operator_cmd

    chaos_cmd.add_parser(sub)
    operator_cmd.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except SettingsError as exc:
        print(f"brokergroup {args.command}: {exc}", file=sys.stderr)
        return 2
    except TaskFailedError as exc:  # a broker or controller whose background task failed; logged already
        print(f"brokergroup {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
