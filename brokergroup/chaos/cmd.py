"""`brokergroup chaos`: Jepsen-style fault runs against a local cluster, and the offline checker.

    brokergroup chaos run [--faults N] [--mode sync|async] [--nemesis kill,stop,partition,...]
                          [--seed S] [--out DIR] [--sets 1] [--profile fast|default]
    brokergroup chaos check DIR      # re-check a run's history.jsonl and controller event logs
    brokergroup chaos powerfs mount|drop|status ...   # the power-loss file system (powerfs.py)

Both exit 0 on VALID, 1 on INVALID (the checker finds a violation of the mode's guarantees, or
the cluster does not recover from a fault), 3 on INCOMPLETE (no violation, but too little was
recorded to say VALID: a missing or failed final read, missing controller event logs, an empty
history; `brokergroup.chaos.checker`), 2 on a usage error. In async mode lost messages (and
what readers saw of truncated ones) are counted and reported but tolerated: async replication
promises no more.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from brokergroup.local import profiles

DEFAULT_NEMESIS = "kill,stop,partition,power,forge"


def add_parser(sub: Any) -> None:
    chaos: argparse.ArgumentParser = sub.add_parser("chaos", help="fault injection runs with a history checker")
    kinds = chaos.add_subparsers(dest="chaos_command", metavar="COMMAND", required=True)
    p = kinds.add_parser("run", help="run a local cluster under faults and check the history")
    p.add_argument("--faults", type=int, default=10, help="faults to inject, one at a time (default 10)")
    p.add_argument("--mode", choices=sorted(profiles.MODES), default="sync", help="replication mode (default sync)")
    p.add_argument(
        "--nemesis",
        default=None,
        help=f"fault kinds or families (kill, stop, partition, power, forge), comma-separated "
        f"(default {DEFAULT_NEMESIS}; "
        "partition only where network namespaces work)",
    )
    p.add_argument("--seed", type=int, default=None, help="random seed (default: random, printed)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default brokergroup-chaos-<time>)")
    p.add_argument("--sets", type=int, default=1, choices=(1, 2), help="broker sets of 3 replicas (default 1)")
    p.add_argument("--profile", choices=sorted(profiles.PROFILES), default="fast", help="timing profile")
    p.add_argument("--rate", type=float, default=25.0, help="sends per second per producer (default 25)")
    p.add_argument("--no-netns", action="store_true", help="run on 127.0.0.1 without namespaces (no partitions)")
    p.add_argument(
        "--protocol",
        choices=["binary", "http"],
        default="binary",
        help="how producers and consumers reach the brokers: the binary client port (default) or the HTTP API",
    )
    r = p.add_argument_group("retention (issue 18): brokers delete segments while the run goes on")
    r.add_argument("--retention-bytes", type=int, default=None, help="store.retention_bytes of every broker")
    r.add_argument("--retention-ms", type=int, default=None, help="store.retention_ms of every broker")
    r.add_argument("--segment-size", type=int, default=4096, help="store.segment_size with retention (default 4096)")
    r.add_argument(
        "--lagging-consumer-every",
        type=float,
        default=None,
        metavar="S",
        help="one more consumer per set that polls only every S seconds (falls behind retention; default: with "
        "retention 15, else none)",
    )
    p.set_defaults(func=run)
    f = kinds.add_parser("powerfs", help="the power-loss file system: mount, drop (power loss) or status")
    f.add_argument("powerfs_args", nargs=argparse.REMAINDER, help="mount|drop|status and their options")
    f.set_defaults(func=power_fs)
    c = kinds.add_parser("check", help="check a finished run's history and event logs again")
    c.add_argument("dir", type=Path, help="a run's output folder")
    c.add_argument("--mode", choices=sorted(profiles.MODES), default="sync")
    c.set_defaults(func=check)


def _print(line: str) -> None:
    print(line, flush=True)


def run(args: argparse.Namespace) -> int:
    from brokergroup.chaos import checker, netns, powerfs
    from brokergroup.chaos.nemesis import POWER_LOSS, NemesisError, expand
    from brokergroup.chaos.runner import ChaosRun, RunOptions
    from brokergroup.chaos.topology import ClusterSpec, Retention

    if args.faults < 0:
        print("brokergroup chaos run: --faults must be at least 0", file=sys.stderr)
        return 2
    missing = [] if args.no_netns else netns.missing_capabilities()
    use_netns = not args.no_netns and not missing
    try:
        if args.nemesis is None:
            spec_text = DEFAULT_NEMESIS if use_netns else "kill,stop,power,forge"
            if not use_netns and not args.no_netns:
                _print(f"partitions disabled: {'; '.join(missing)}")
        else:
            spec_text = args.nemesis
        kinds = expand(spec_text, partitions_available=use_netns)
    except NemesisError as exc:
        why = f" ({'; '.join(missing)})" if missing else ""
        print(f"brokergroup chaos run: {exc}{why}", file=sys.stderr)
        return 2
    power_missing = powerfs.missing_capabilities() if POWER_LOSS in kinds else []
    if power_missing and args.nemesis is None:
        kinds = [k for k in kinds if k != POWER_LOSS]
        _print(f"power loss disabled: {'; '.join(power_missing)}")
    elif power_missing:
        print(f"brokergroup chaos run: {POWER_LOSS} needs FUSE: {'; '.join(power_missing)}", file=sys.stderr)
        return 2
    retention = None
    if args.retention_bytes is not None or args.retention_ms is not None:
        try:
            retention = Retention(
                segment_size=args.segment_size, retention_bytes=args.retention_bytes, retention_ms=args.retention_ms
            )
        except ValueError as exc:
            print(f"brokergroup chaos run: {exc}", file=sys.stderr)
            return 2
    lagging = args.lagging_consumer_every
    if lagging is None and retention is not None:
        lagging = 15.0
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    out = args.out or Path(f"brokergroup-chaos-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    options = RunOptions(
        out=out.resolve(),
        kinds=tuple(kinds),
        faults=args.faults,
        seed=seed,
        spec=ClusterSpec(
            sets=args.sets,
            mode=profiles.mode(args.mode),
            profile=profiles.profile(args.profile),
            netns=use_netns,
            power_fs=POWER_LOSS in kinds,
            retention=retention,
        ),
        rate=args.rate,
        protocol=args.protocol,
        lagging_every_s=lagging,
    )
    _print(
        f"chaos run: {args.faults} faults from {','.join(kinds)}; mode {args.mode}, profile {args.profile}, "
        f"seed {seed}, {'network namespaces' if use_netns else '127.0.0.1'}; output {out}"
    )
    result = asyncio.run(ChaosRun(options, _print).run())
    _print(render(result))
    return checker.EXIT_CODES[result["status"]]


def render(result: dict[str, Any]) -> str:
    verdict, summary = result["verdict"], result["run"]
    stats = verdict["stats"]
    lines = [
        "",
        f"faults: {summary['faultsInjected']} {json.dumps(summary['faultMix'])} in {summary['durationS']} s",
        f"sends: {stats['sendsInvoked']} invoked, {stats['sendsOk']} acknowledged, "
        f"{stats['sendsIndeterminate']} indeterminate ({stats['indeterminateSendsRead']} of them stored), "
        f"{stats['sendsFailed']} failed; reads: {stats['messagesRead']}",
        f"controller: {stats['controllerEvents']} events, elections {json.dumps(stats['elections'])}, "
        f"master epochs {json.dumps(stats['masterEpochs'])}",
        "anomalies: " + ", ".join(f"{k} {v}" for k, v in verdict["anomalies"].items()),
    ]
    kept = stats.get("retention") or {}
    if kept.get("offsetsToldDeleted"):
        lines.append(
            f"retention: offsets told deleted {json.dumps(kept['offsetsToldDeleted'])}; acknowledged messages "
            f"deleted before the final read {json.dumps(kept['ackedDeletedBeforeFinalRead'])}, before any "
            f"consumer read them {kept['ackedDeletedBeforeAnyConsumerRead']}"
        )
    if verdict["tolerated"]:
        lines.append(f"tolerated in {summary['mode']} mode (counted, not failing): {', '.join(verdict['tolerated'])}")
    for kind, examples in verdict["examples"].items():
        lines.append(f"  {kind}: {json.dumps(examples[:3])}")
    for key, what in (("writeOutage", "controller follower"), ("leaderFaultOutage", "controller leader")):
        outage = result[key]
        if outage["faults"]:
            lines.append(
                f"{what} faults: {outage['faults']}, refused puts {outage['refusedPuts']}, "
                f"master changes {outage['masterChanges']}, longest time without an acknowledgement "
                f"{outage['longestAckGapS']} s"
            )
    losses = [f for f in result["faults"] if f["kind"] == "power-loss"]
    if losses:
        dropped = {
            k: sum(f["dropped"][k] for f in losses) for k in ("files_reverted", "bytes_lost", "entries_reverted")
        }
        lines.append(
            f"power losses: {len(losses)}; unsynced data dropped: {dropped['bytes_lost']} bytes in "
            f"{dropped['files_reverted']} files, entries of {dropped['entries_reverted']} directories"
        )
    raft = result.get("raftStates")
    if raft is not None:
        nodes = ", ".join(f"{n['node_id']}@{n['last_applied']}:{n['digest'][:12]}" for n in raft["nodes"])
        agreed = "identical" if raft["agreed"] else f"DIFFER ({raft['problem']})"
        lines.append(f"controllers' states: {agreed}; {nodes}")
    for problem in result["liveness"]:
        lines.append(f"liveness: {problem}")
    for problem in result["safety"]:
        lines.append(f"safety: {problem}")
    reasons = verdict["failing"] + [k for k in ("liveness", "safety") if result[k]]
    lines.append(status_line(result["status"], {**verdict, "failing": reasons}, summary["mode"]))
    return "\n".join(lines)


def status_line(status: str, verdict: dict[str, Any], mode: str) -> str:
    if status == "VALID":
        return f"VALID ({mode})"
    if status == "INCOMPLETE":
        return "INCOMPLETE: " + "; ".join(verdict["incomplete"])
    return f"INVALID: {', '.join(verdict['failing'])}"


def power_fs(args: argparse.Namespace) -> int:
    from brokergroup.chaos import powerfs

    return powerfs.main(args.powerfs_args)


def check(args: argparse.Namespace) -> int:
    from brokergroup.chaos import checker
    from brokergroup.chaos.history import read_history
    from brokergroup.chaos.runner import ASYNC_TOLERATED, load_events

    history = args.dir / "history.jsonl"
    if not history.exists():
        print(f"brokergroup chaos check: {history} does not exist", file=sys.stderr)
        return 2
    cluster = args.dir / "cluster"  # data dirs are under disks/ when the run used the power-loss file system
    logs = sorted([*cluster.glob("controllers/n*/events/*.jsonl"), *cluster.glob("disks/n*/events/*.jsonl")])
    tolerate = ASYNC_TOLERATED if args.mode == "async" else ()
    verdict = checker.check(read_history(history), load_events(logs), tolerate=tolerate)
    print(json.dumps(verdict, indent=2))
    print(status_line(verdict["status"], verdict, args.mode))
    return checker.EXIT_CODES[verdict["status"]]
