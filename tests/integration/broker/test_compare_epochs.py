"""docs/operations.md's compare-epochs commands, run as written against real brokers before and after
a failover (issue 23 item 3): the predicted consistent point is where the old master really cuts
its unreplicated tail when it rejoins; bad sources get clear errors."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from brokergroup.controller.client import ControllerClient
from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup
from brokergroup.local.ports import free_ports
from tests.integration.broker.conftest import same_log, unclean_allowed_with_common_prefix
from tests.integration.broker.history import read_queue
from tests.integration.conftest import ADMIN_TOKEN, eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DOC = Path(__file__).resolve().parents[3] / "docs" / "operations.md"


def documented_lines() -> list[str]:
    section = DOC.read_text(encoding="utf-8").split("### Where would a replica truncate to", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section.split("\n### ", 1)[0], re.DOTALL)
    assert block is not None, "docs/operations.md lost its compare-epochs example"
    return [line for line in block[1].splitlines() if line.strip()]


async def run_line(line: str, **env: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run, line, shell=True, capture_output=True, text=True, timeout=60, env={**os.environ, **env}
    )


async def compare_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "brokergroup.cli", "admin", "compare-epochs", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_documented_compare_before_and_after_a_failover_predicts_the_real_truncation(
    controller_group: ControllerGroup, async_set: BrokerSet, tmp_path: Path
) -> None:
    live, files = documented_lines()
    old = await async_set.master()
    slaves = [i for i in range(3) if i != old]
    api = [n.api for n in async_set.nodes]
    async with (
        aiohttp.ClientSession() as session,
        ControllerClient(controller_group.api_addresses, token=ADMIN_TOKEN) as controller,
    ):
        producer = await unclean_allowed_with_common_prefix(controller, session)
        await eventually("every replica holds the common prefix", lambda: same_log(async_set, session))

        # Before: master and slave agree; the slave keeps everything.
        before = await run_line(live, MASTER=api[old], SLAVE=api[slaves[0]])
        assert before.returncode == 0, before.stderr
        common_end = (await _status(async_set, old, session))["store"]["maxOffset"]
        assert f"consistent point: {common_end}; the slave keeps its whole log" in before.stdout
        assert "first difference: none" in before.stdout
        old_id = (await _status(async_set, old, session))["brokerId"]
        assert f"master: master broker {old_id} http://{api[old]}: log [0, {common_end})" in before.stdout

        # The old master writes a tail its stopped slaves never get, then dies; a slave is elected.
        for i in slaves:
            async_set.signal(i, signal.SIGSTOP)

        async def dropped() -> bool:
            st = await async_set.status(old, session)
            return bool(st) and st["replication"]["connections"] == []  # type: ignore[index]

        await eventually("the master drops the stopped slaves' connections", dropped, timeout=20)
        for i in range(50):
            await producer.send("t", [f"tail{i}".encode() * 20])
        old_max = (await _status(async_set, old, session))["store"]["maxOffset"]
        assert old_max > common_end
        async_set.kill(old)
        for i in slaves:
            async_set.signal(i, signal.SIGCONT)
        new = await async_set.master(exclude={old}, timeout=30)
        for i in range(5):
            await producer.send("t", [f"after{i}".encode()])

        # After, from a copy of the dead old master's data directory: it will cut its tail.
        copy = tmp_path / "old-master-copy"
        shutil.copytree(async_set.nodes[old].data_dir, copy)
        after = await run_line(files, OLD_MASTER_DATA_DIR=str(copy), MASTER=api[new])
        assert after.returncode == 0, after.stderr
        verdict: dict[str, Any] = json.loads(after.stdout)
        assert verdict["outcome"] == "TRUNCATE", verdict
        assert verdict["consistentPoint"] == common_end, verdict
        assert verdict["truncatedBytes"] == old_max - common_end, verdict
        assert verdict["slave"]["source"] == str(copy) and verdict["master"]["role"] == "master"
        new_epochs = [(e["epoch"], e["startOffset"]) for e in verdict["master"]["epochs"]]
        assert new_epochs[-1][1] == common_end  # the new master's epoch starts where the logs part
        assert [e["epoch"] for e in verdict["sharedEpochs"]] == [e for e, _ in new_epochs[:-1]]

        # The old master rejoins and really cuts there.
        async_set.start(old)

        async def rejoined() -> bool:
            st, nst = await async_set.status(old, session), await async_set.status(new, session)
            return bool(
                st and nst and st.get("role") == "slave" and st["store"]["maxOffset"] == nst["store"]["maxOffset"]
            )

        await eventually("the old master truncated its tail and follows", rejoined, timeout=40)
        log = async_set.nodes[old].log_path.read_text(encoding="utf-8", errors="replace")
        assert f"truncating log from {old_max} to the consistent point {common_end}" in log
        assert len(await read_queue(session, async_set.nodes[old].api, "t")) == 25

        # And live, now: nothing left to cut.
        now = await run_line(live, MASTER=api[new], SLAVE=api[old])
        assert now.returncode == 0, now.stderr
        assert "the slave keeps its whole log" in now.stdout and "first difference: none" in now.stdout


async def _status(brokers: BrokerSet, index: int, session: aiohttp.ClientSession) -> dict[str, Any]:
    status = await brokers.status(index, session)
    assert status is not None, f"replica {index} does not answer"
    return status


async def test_bad_sources_are_named(tmp_path: Path) -> None:
    missing = await compare_cli("--a", str(tmp_path / "gone"))
    assert missing.returncode == 2 and "the following arguments are required: --b" in missing.stderr

    nowhere = await compare_cli("--a", str(tmp_path / "gone"), "--b", str(tmp_path))
    assert nowhere.returncode == 1
    assert f"compare-epochs: {tmp_path / 'gone'}: no such file or directory" in nowhere.stderr

    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "epochFileCheckpoint").write_bytes(b"2\n7\n1-0\n")
    corrupt = await compare_cli("--a", str(tmp_path), "--b", str(tmp_path))
    assert corrupt.returncode == 1 and "crc32 mismatch" in corrupt.stderr, corrupt.stderr

    # A real HTTP server that is no broker: its /v1/status is a file holding garbage.
    served = tmp_path / "www"
    (served / "v1").mkdir(parents=True)
    (served / "v1" / "status").write_text("<html>not a broker</html>")
    port = free_ports(1, "127.0.0.1")[0]
    server = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(served)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        async def serving() -> bool:
            try:
                async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{port}/v1/status") as r:
                    return r.status == 200
            except aiohttp.ClientError:
                return False

        await eventually("the garbage server answers", serving)
        garbage = await compare_cli("--a", f"http://127.0.0.1:{port}", "--b", str(tmp_path))
        assert garbage.returncode == 1
        assert f"http://127.0.0.1:{port}/v1/status did not answer like a broker's /v1/status" in garbage.stderr
        not_found = await compare_cli("--a", f"http://127.0.0.1:{port}/nothing", "--b", str(tmp_path))
        assert "answered HTTP 404" in not_found.stderr
    finally:
        server.terminate()
        await asyncio.wait_for(server.wait(), timeout=10)
    refused = await compare_cli("--a", f"http://127.0.0.1:{port}", "--b", str(tmp_path))
    assert refused.returncode == 1 and f"cannot reach http://127.0.0.1:{port}/v1/status" in refused.stderr
