"""What we change in pysyncobj 0.3.17, carried in the project (the dependency stays pinned).

`FixedSyncObj` subclasses `SyncObj` and overrides a few of its private (name-mangled) methods;
`tests/unit/controller/test_raft_fixes_pin.py` fails when the pysyncobj internals we rely on
change. What it changes:

1. **A durable journal with group commit** (`journal.DurableJournal`, installed through
   pysyncobj's `createJournal`). A follower's `next_node_idx` answers (its acknowledgements)
   are held while the journal has unsynced writes and sent after one `flush()` at the end of the
   tick, which covers every entry received in that tick. The leader flushes at the start of each
   tick, before pysyncobj counts its own log towards the commit index. Term and vote are synced
   by the journal before a vote or an append is answered.
2. **No `nextIndex` rewind.** A late success reply for an older pipelined batch set the leader's
   `nextIndex` back to that batch's end, so it re-sent entries the follower had. We keep the larger.
3. **Truncate only on a conflict (Raft §5.3).** pysyncobj deletes every entry after `prevLogIdx`
   and re-appends, even when the follower already holds the same entries. We drop the entries
   the follower already has (same index and term) from an append before pysyncobj sees it, and
   never truncate when nothing conflicts.
4. **PreVote (Raft thesis §9.6) with leader stickiness.** When its election timer expires a node
   first asks for pre-votes for term + 1 without changing its term; a node grants one only if its
   log is not newer and it has not heard from a leader within the minimum election timeout (a
   leader never grants). Only with a majority of pre-votes does it start a real election, so a
   node that was away (SIGSTOP, partition) does not depose a healthy leader.
5. **Snapshots written off the tick thread.** With a custom serializer and `useFork=False`,
   pysyncobj runs the whole snapshot (copy, encoding, write, fsync) on its tick thread. A
   serializer whose owner is a `BackgroundSnapshots` (installed through pysyncobj's `Serializer`
   name) has the tick thread take only a copy of the state (`start`); a thread encodes, writes and
   fsyncs it, and the tick thread renames it into place and reports success when it polls
   (`poll`), so pysyncobj drops the log head only once the snapshot is durable, at the index the
   copy was taken at. No snapshot is sent to a follower while one is being written (as before).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pysyncobj.journal
import pysyncobj.serializer
import pysyncobj.syncobj
from pysyncobj import SyncObj
from pysyncobj.config import SERIALIZER_STATE

from brokergroup.controller.journal import DurableJournal

logger = logging.getLogger(__name__)

LEADER = 2  # pysyncobj.syncobj._RAFT_STATE.LEADER

_original_create_journal: Callable[[Any], Any] = pysyncobj.syncobj.createJournal


def _create_journal(journal_file: Any = None) -> Any:
    """pysyncobj's `createJournal`, except that a `DurableJournal` passed as `journalFile` is used as is."""
    if isinstance(journal_file, DurableJournal):
        return journal_file
    return _original_create_journal(journal_file)


class BackgroundSnapshots:
    """What a snapshot writer that works off the tick thread provides (`replicated.Snapshots`)."""

    def serialize(self, path: str, data: tuple[Any, Any, Any]) -> None:
        """The whole snapshot on the calling thread (pysyncobj's own contract for `serializer`)."""
        raise NotImplementedError

    def start(self, path: str, data: tuple[Any, Any, Any]) -> None:
        """On the tick thread: copy the state (it is at the index of `data[0]`) and begin writing it to
        a temporary file in the background; `path` is not touched until `poll` succeeds."""
        raise NotImplementedError

    def poll(self) -> int:
        """On the tick thread: a `SERIALIZER_STATE`. SUCCESS (once, after the file is renamed to
        `path`), FAILED (once), SERIALIZING, or NOT_SERIALIZING when the write was abandoned
        because another snapshot was loaded meanwhile."""
        raise NotImplementedError


NOT_SERIALIZING: int = SERIALIZER_STATE.NOT_SERIALIZING
SERIALIZING: int = SERIALIZER_STATE.SERIALIZING
SUCCESS: int = SERIALIZER_STATE.SUCCESS
FAILED: int = SERIALIZER_STATE.FAILED

IN_BACKGROUND = -3
"""`Serializer.__pid` while a background snapshot is being written (0: idle; -1/-2: pysyncobj's)."""


class BackgroundSerializer(pysyncobj.serializer.Serializer):  # type: ignore[misc]
    """pysyncobj's file `Serializer` whose `serialize` only starts a `BackgroundSnapshots` write.

    While the write runs, `__pid` is non-zero, as in pysyncobj's fork mode: `serialize` starts no
    other snapshot and `getTransmissionData` sends none to a follower (the file is being replaced)."""

    _Serializer__pid: int
    _Serializer__currentID: int
    _Serializer__fileName: str
    _Serializer__transmissions: dict[Any, Any]

    def __init__(self, file_name: str, batch_size: int, snapshots: BackgroundSnapshots, deserializer: Any) -> None:
        super().__init__(file_name, batch_size, False, snapshots.serialize, deserializer, None)
        self._snapshots = snapshots

    def serialize(self, data: tuple[Any, Any, Any, Any], id: int) -> None:
        if self._Serializer__pid != 0:
            return
        self._Serializer__currentID = id
        try:
            self._snapshots.start(self._Serializer__fileName, data[1:])
        except Exception:
            logger.exception("could not start a snapshot at index %s", id)
            self._Serializer__pid = -2  # pysyncobj's "failed": the next check reports FAILED
            return
        self._Serializer__pid = IN_BACKGROUND

    def checkSerializing(self) -> tuple[int, int | None]:
        if self._Serializer__pid != IN_BACKGROUND:
            return super().checkSerializing()  # type: ignore[no-any-return]
        status = self._snapshots.poll()
        if status == SERIALIZING:
            return status, self._Serializer__currentID
        self._Serializer__pid = 0
        if status == SUCCESS:
            self._Serializer__transmissions = {}  # as pysyncobj does: later transmissions read the new file
        return status, self._Serializer__currentID


_original_serializer: Callable[..., Any] = pysyncobj.syncobj.Serializer


def _create_serializer(
    file_name: str | None,
    batch_size: int,
    try_use_fork: bool,
    serializer: Any,
    deserializer: Any,
    serialize_checker: Any,
) -> Any:
    """pysyncobj's `Serializer`, or a `BackgroundSerializer` when `serializer` is a `BackgroundSnapshots`'s."""
    owner = getattr(serializer, "__self__", None)
    if isinstance(owner, BackgroundSnapshots) and file_name is not None and serialize_checker is None:
        return BackgroundSerializer(file_name, batch_size, owner, deserializer)
    return _original_serializer(file_name, batch_size, try_use_fork, serializer, deserializer, serialize_checker)


def install() -> None:
    """Let `SyncObjConf(journalFile=<DurableJournal>)` use our journal and a `BackgroundSnapshots`'s
    `serialize` write off the tick thread (idempotent, same behaviour otherwise)."""
    pysyncobj.syncobj.createJournal = _create_journal
    pysyncobj.syncobj.Serializer = _create_serializer


class FixedSyncObj(SyncObj):  # type: ignore[misc]
    """`SyncObj` with the fixes above. `conf.journalFile` must be a `DurableJournal`."""

    _SyncObj__raftElectionDeadline: float
    _SyncObj__raftLeader: Any

    def __init__(self, self_node: str, other_nodes: list[str], conf: Any, **kwargs: Any) -> None:
        if not isinstance(conf.journalFile, DurableJournal):
            raise TypeError("FixedSyncObj needs SyncObjConf(journalFile=DurableJournal(...))")
        install()
        self._journal: DurableJournal = conf.journalFile
        self._held_acks: list[tuple[Any, dict[str, Any]]] = []
        self._last_leader_contact = 0.0
        self._prevote_term: int | None = None
        self._prevote_granted: set[str] = set()
        self._prevote_won = False
        self.nextindex_rewinds_prevented = 0
        self.redundant_truncations_prevented = 0
        self.prevotes_started = 0
        super().__init__(self_node, other_nodes, conf, **kwargs)

    # -- 1. group commit --------------------------------------------------------------------------
    def _flush_and_release(self) -> None:
        self._journal.flush()
        if self._held_acks:
            held, self._held_acks = self._held_acks, []
            transport = self._SyncObj__transport
            for node, message in held:
                transport.send(node, message)

    def _SyncObj__sendNextNodeIdx(
        self, node: Any, reset: bool = False, nextNodeIdx: int | None = None, success: bool = False
    ) -> None:
        if nextNodeIdx is None:
            nextNodeIdx = self._SyncObj__raftLog[-1][1] + 1
        message = {"type": "next_node_idx", "next_node_idx": nextNodeIdx, "reset": reset, "success": success}
        if self._journal.dirty or self._held_acks:
            self._held_acks.append((node, message))
        else:
            self._SyncObj__transport.send(node, message)

    def _checkCommandsToApply(self) -> None:
        # The leader appended this tick's commands and sent them; sync them while the followers do.
        super()._checkCommandsToApply()
        self._flush_and_release()

    def _onTick(self, timeToWait: float = 0.0) -> None:
        # Before pysyncobj counts the leader's own log towards the commit index, that log is on disk.
        self._flush_and_release()
        self._prevote_instead_of_election()
        super()._onTick(timeToWait)
        # After the poll: every append received in this tick is synced by one fdatasync, then answered.
        self._flush_and_release()

    # -- messages -----------------------------------------------------------------------------------
    def _SyncObj__onMessageReceived(self, node: Any, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "pre_vote":
            self._answer_prevote(node, message)
            return
        if kind == "pre_vote_response":
            self._count_prevote(node, message)
            return
        if kind == "append_entries" and message.get("term", -1) >= self._SyncObj__raftCurrentTerm:
            self._last_leader_contact = time.monotonic()
            self._prevote_term, self._prevote_won = None, False
            message = self._without_entries_we_have(node, message)
            if message.get("_handled"):
                return
        if kind == "next_node_idx" and self._SyncObj__raftState == LEADER and message.get("success"):
            before = self._SyncObj__raftNextIndex.get(node)
            super()._SyncObj__onMessageReceived(node, message)
            after = self._SyncObj__raftNextIndex.get(node)
            if before is not None and after is not None and after < before:
                self._SyncObj__raftNextIndex[node] = before
                self.nextindex_rewinds_prevented += 1
            return
        super()._SyncObj__onMessageReceived(node, message)

    # -- 3. truncate only on a conflict ---------------------------------------------------------
    def _without_entries_we_have(self, node: Any, message: dict[str, Any]) -> dict[str, Any]:
        if "prevLogIdx" not in message or "transmission" in message or message.get("prevLogIdx") is None:
            return message
        log = self._SyncObj__raftLog
        first, last = log[0][1], log[-1][1]
        prev_idx, prev_term = message["prevLogIdx"], message["prevLogTerm"]
        if not first <= prev_idx <= last or log[prev_idx - first][2] != prev_term:
            return message  # pysyncobj answers: reset / mismatch
        entries = list(message.get("entries") or [])
        skip = 0
        for entry in entries:
            idx = entry[1]
            if idx > last or log[idx - first][2] != entry[2]:
                break
            skip += 1
        if skip == 0 and (entries or prev_idx == last):
            return message
        verified = entries[skip - 1] if skip else (None, prev_idx, prev_term)
        rest = entries[skip:]
        if rest or verified[1] == last:
            return {**message, "prevLogIdx": verified[1], "prevLogTerm": verified[2], "entries": rest}
        # Everything the leader sent is already here and our log goes further: do not truncate
        # (the entries after it are not known to conflict). Let pysyncobj take the leader, term and
        # commit index from a message without entries, with the commit index capped at what is verified.
        self.redundant_truncations_prevented += 1
        bare = {k: v for k, v in message.items() if k not in ("prevLogIdx", "prevLogTerm", "entries")}
        bare["commit_index"] = min(message["commit_index"], verified[1])
        super()._SyncObj__onMessageReceived(node, bare)
        self._SyncObj__sendNextNodeIdx(node, nextNodeIdx=verified[1] + 1, success=True)
        return {"_handled": True}

    # -- 4. PreVote -------------------------------------------------------------------------------
    def _majority(self, votes: int) -> bool:
        return votes > (len(self._SyncObj__otherNodes) + 1) / 2

    def _prevote_instead_of_election(self) -> None:
        """Runs before pysyncobj's tick: turn an expired election timer into a pre-vote round."""
        if self._SyncObj__raftState == LEADER or self._SyncObj__selfNode is None:
            return
        now = time.monotonic()
        if self._SyncObj__raftElectionDeadline >= now or not self._SyncObj__connectedToAnyone():
            return
        if self._prevote_won or self._SyncObj__transferInProgress:
            self._prevote_won = False  # pysyncobj starts the real election in this tick
            return
        self._SyncObj__raftElectionDeadline = now + self._SyncObj__generateRaftTimeout()
        if self._SyncObj__raftLeader is not None:
            # No word from the leader for an election timeout: forget it, as pysyncobj does when it
            # starts an election (readiness and forwarding then stop pointing at it).
            self._SyncObj__raftLeader = None
            self._SyncObj__onLeaderChanged()
        log = self._SyncObj__raftLog
        self._prevote_term = self._SyncObj__raftCurrentTerm + 1
        self._prevote_granted = {self._SyncObj__selfNode.id}
        self.prevotes_started += 1
        request = {
            "type": "pre_vote",
            "term": self._prevote_term,
            "last_log_index": log[-1][1],
            "last_log_term": log[-1][2],
        }
        for other in self._SyncObj__otherNodes:
            self._SyncObj__transport.send(other, request)
        self._check_prevote()

    def _answer_prevote(self, node: Any, message: dict[str, Any]) -> None:
        log = self._SyncObj__raftLog
        last_term, last_idx = log[-1][2], log[-1][1]
        up_to_date = (message["last_log_term"], message["last_log_index"]) >= (last_term, last_idx)
        leader_heard = (
            self._SyncObj__raftLeader is not None
            and time.monotonic() - self._last_leader_contact < self._SyncObj__conf.raftMinTimeout
        )
        granted = (
            message["term"] > self._SyncObj__raftCurrentTerm
            and up_to_date
            and self._SyncObj__raftState != LEADER
            and not leader_heard
        )
        self._SyncObj__transport.send(node, {"type": "pre_vote_response", "term": message["term"], "granted": granted})

    def _count_prevote(self, node: Any, message: dict[str, Any]) -> None:
        if message.get("granted") and message.get("term") == self._prevote_term:
            self._prevote_granted.add(node.id)
            self._check_prevote()

    def _check_prevote(self) -> None:
        if self._prevote_term is not None and self._majority(len(self._prevote_granted)):
            self._prevote_term = None
            self._prevote_won = True
            self._SyncObj__raftElectionDeadline = 0.0  # the next tick starts the real election
