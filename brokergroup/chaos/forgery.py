"""Forged controller requests: what anyone who reaches a controller could send, and whether it worked.

The `forge-requests` fault sends, without any credential, requests that change the sync-state-set
or feed the election (issue 22, item 4), to every controller (a follower forwards to the leader):

- alter-sync-state-set with the set's current epochs (read from `GET /v1/replica-info`, as an
  attacker would) shrinking the set to the master alone;
- alter-sync-state-set with forged future epochs, naming every replica;
- a heartbeat for a slave with the current master epoch and an inflated max offset (it would
  win the election ranking);
- a heartbeat for a broker id the set does not have (it would appear as one more live broker),
  once as a POST and once on a heartbeat stream (the WebSocket the brokers use).

Every one must be refused (HTTP status 400 or above; on a stream, a refused upgrade, an error
answer or a close) and change nothing: the set's master,
master epoch, sync-state-set and its epoch as the controller reports them, and each
controller's count of live brokers. The offsets a heartbeat carries are not visible from
outside; the refusal is what shows they were not taken.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import aiohttp

from brokergroup.controller.client import ControllerClient

INFLATED_OFFSET = 2**40
UNKNOWN_ID_OFFSET = 100
STREAM = "/v1/broker/heartbeat-stream"
STREAM_ANSWER_S = 1.0
"""A stream that neither answers nor closes within this long took the heartbeat (it answers only errors)."""


@dataclasses.dataclass(frozen=True)
class Forged:
    what: str
    path: str
    body: dict[str, Any]


def forged_requests(cluster_name: str, broker_name: str, info: dict[str, Any]) -> list[Forged]:
    """The forged requests against one set, built from its replica-info (`ReplicaInfoResponse` as a dict)."""
    master, sss = info["masterBrokerId"], list(info["syncStateSet"])
    epoch, sss_epoch = info["masterEpoch"], info["syncStateSetEpoch"]
    slaves = [b for b in sss if b != master] or list(sss)
    address = info["masterAddress"]
    alter = {"brokerName": broker_name, "masterBrokerId": master}
    beat = {"clusterName": cluster_name, "brokerName": broker_name, "brokerAddr": address, "epoch": epoch}
    beat |= {"maxOffset": INFLATED_OFFSET, "confirmOffset": INFLATED_OFFSET, "electionPriority": 0}
    return [
        Forged(
            "alter-sync-state-set shrinking to the master, current epochs",
            "/v1/alter-sync-state-set",
            {**alter, "masterEpoch": epoch, "syncStateSet": [master], "syncStateSetEpoch": sss_epoch},
        ),
        Forged(
            "alter-sync-state-set with forged future epochs",
            "/v1/alter-sync-state-set",
            {**alter, "masterEpoch": epoch + 1, "syncStateSet": sorted(sss), "syncStateSetEpoch": sss_epoch + 1},
        ),
        Forged(
            f"heartbeat of slave {slaves[0]} with an inflated max offset",
            "/v1/broker/heartbeat",
            {**beat, "brokerId": slaves[0]},
        ),
        Forged(
            "heartbeat of a broker id the set does not have",
            "/v1/broker/heartbeat",
            {**beat, "brokerId": max(sss) + UNKNOWN_ID_OFFSET},
        ),
        Forged(
            "heartbeat stream of a broker id the set does not have",
            STREAM,
            {**beat, "brokerId": max(sss) + UNKNOWN_ID_OFFSET + 1},
        ),
    ]


async def send(session: aiohttp.ClientSession, controllers: list[str], forged: list[Forged]) -> list[dict[str, Any]]:
    """Send each forged request to each controller, without a credential; what each answered."""
    answers = []
    timeout = aiohttp.ClientTimeout(total=5)
    for request in forged:
        for controller in controllers:
            answer: dict[str, Any] = {"what": request.what, "controller": controller}
            url = f"http://{controller}{request.path}"
            try:
                if request.path == STREAM:
                    answer |= await _on_stream(session, url, request.body)
                    answers.append(answer)
                    continue
                async with session.post(url, json=request.body, timeout=timeout) as r:
                    text = await r.text()
                    answer |= {"httpStatus": r.status, "refused": r.status >= 400, "answer": text[:200]}
            except aiohttp.WSServerHandshakeError as exc:
                answer |= {"httpStatus": exc.status, "refused": exc.status >= 400, "answer": exc.message[:200]}
            except (aiohttp.ClientError, TimeoutError) as exc:
                # No answer is not a refusal: the request may have been taken before the connection broke.
                answer |= {"httpStatus": None, "refused": False, "answer": str(exc) or type(exc).__name__}
            answers.append(answer)
    return answers


async def _on_stream(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """One heartbeat on a new stream; refused if the stream answers (only errors are answered) or closes."""
    async with session.ws_connect(url, timeout=aiohttp.ClientWSTimeout(ws_close=5)) as ws:
        await ws.send_json(body)
        try:
            message = await ws.receive(timeout=STREAM_ANSWER_S)
        except TimeoutError:
            return {"httpStatus": 101, "refused": False, "answer": f"no answer within {STREAM_ANSWER_S} s"}
        shown = str(message.data)[:200] if message.type == aiohttp.WSMsgType.TEXT else message.type.name
        return {"httpStatus": 101, "refused": True, "answer": shown}


async def snapshot(
    session: aiohttp.ClientSession, controller: ControllerClient, controllers: list[str], broker_name: str
) -> dict[str, Any]:
    """What a forged request could change: the set's replica-info and every controller's live-broker count."""
    info = (await controller.replica_info(broker_name)).wire()
    active = {}
    for address in controllers:
        async with session.get(f"http://{address}/v1/status", timeout=aiohttp.ClientTimeout(total=5)) as r:
            active[address] = (await r.json()).get("activeBrokers")
    return {"replicaInfo": info, "activeBrokers": active}


def violations(answers: list[dict[str, Any]], before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Each forged request that was not refused, and each fact that changed (empty when all is well)."""
    found = [
        f"{a['what']}: {a['controller']} did not refuse it (HTTP {a['httpStatus']})"
        for a in answers
        if not a["refused"]
    ]
    for key in ("masterBrokerId", "masterEpoch", "syncStateSet", "syncStateSetEpoch"):
        was, now = before["replicaInfo"].get(key), after["replicaInfo"].get(key)
        if was != now:
            found.append(f"{key} changed from {was} to {now}")
    for address, was in before["activeBrokers"].items():
        now = after["activeBrokers"].get(address)
        if was != now:
            found.append(f"live brokers on {address} changed from {was} to {now}")
    return found
