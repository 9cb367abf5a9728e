"""Pins the pysyncobj internals `controller/raft_fixes.py` relies on: fails when they change.

`FixedSyncObj` overrides name-mangled private methods of pysyncobj 0.3.17 and reads its private
attributes. If an upgrade renames or reshapes any of them, the fixes would silently stop
applying (acks before fsync, nextIndex rewinds, elections without PreVote); this test fails first.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pysyncobj
import pysyncobj.serializer
import pysyncobj.syncobj
from pysyncobj import SyncObj, SyncObjConf

from brokergroup.controller import raft_fixes
from brokergroup.controller.journal import DurableJournal, OsDisk
from brokergroup.local.ports import free_ports


def source(fn: object) -> str:
    return inspect.getsource(fn)  # type: ignore[arg-type]


def test_pysyncobj_is_the_pinned_version() -> None:
    assert pysyncobj.syncobj.VERSION == "0.3.17"
    pyproject = (Path(__file__).parents[3] / "pyproject.toml").read_text()
    assert '"pysyncobj==0.3.17"' in pyproject


def test_the_hooks_we_override_are_where_we_expect_them() -> None:
    init = source(SyncObj.__init__)
    assert "self.__raftLog = createJournal(self.__conf.journalFile)" in init
    assert "self.__transport.setOnMessageReceivedCallback(self.__onMessageReceived)" in init
    send_idx = source(SyncObj._SyncObj__sendNextNodeIdx)
    for key in ("'type': 'next_node_idx'", "'next_node_idx': nextNodeIdx", "'reset': reset", "'success': success"):
        assert key in send_idx
    tick = source(SyncObj._onTick)
    # the leader's own log counts as one vote for the commit index, computed in the tick
    assert "count = 1" in tick and "self.__raftMatchIndex[node] >= commitIdx" in tick
    assert "self.__raftElectionDeadline < monotonicTime() and self.__connectedToAnyone()" in tick
    assert tick.index("self._checkCommandsToApply()") < tick.index("self._poller.poll(timeToWait)")
    received = source(SyncObj._SyncObj__onMessageReceived)
    assert "self.__raftNextIndex[node] = nextNodeIdx" in received  # the rewind we undo
    assert "if len(prevEntries) > 1:" in received and "self.__deleteEntriesFrom(prevLogIdx + 1)" in received
    assert "self.__sendNextNodeIdx(node, nextNodeIdx=nextNodeIdx, success=True)" in received
    assert "if 'prevLogIdx' in message:" in received
    check = source(SyncObj._checkCommandsToApply)
    assert "self.__raftLog.add(command, idx, term)" in check
    ser = source(pysyncobj.serializer.Serializer)
    assert "self.__serializer(tmpFile, data[1:])" in ser
    assert "return (None,) + self.__deserializer(self.__fileName)" in ser
    # 5. snapshots off the tick thread: the class is looked up by name when a node is built, a non-zero
    # pid keeps another snapshot from starting and keeps the file from being sent while it is replaced
    assert "self.__serializer = Serializer(self.__conf.fullDumpFile," in init
    assert "self.__pid = 0\n        self.__currentID = 0\n        self.__transmissions = {}" in ser
    assert "def serialize(self, data, id):\n        if self.__pid != 0:\n            return" in ser
    assert "def getTransmissionData(self, transmissionID):\n        if self.__pid != 0:\n            return None" in ser
    compaction = source(SyncObj._SyncObj__tryLogCompaction)
    assert "serializeState, serializeID = self.__serializer.checkSerializing()" in compaction
    assert "self.__deleteEntriesTo(serializeID)" in compaction
    assert "if serializeState != SERIALIZER_STATE.NOT_SERIALIZING:\n            return" in compaction
    assert "lastAppliedEntries[1], lastAppliedEntries[0], cluster), lastAppliedEntries[0][1])" in compaction
    assert "if self.__serializer.setTransmissionData(serialized):\n                    self.__loadDumpFile(" in received


def test_a_fixed_node_uses_our_journal_and_has_the_attributes_we_read(tmp_path: Path) -> None:
    journal = DurableJournal(OsDisk(tmp_path))
    port = free_ports(1)[0]
    conf = SyncObjConf(journalFile=journal, autoTick=False)
    node = raft_fixes.FixedSyncObj(f"127.0.0.1:{port}", [], conf)
    try:
        assert pysyncobj.syncobj.createJournal is raft_fixes._create_journal
        assert node._SyncObj__raftLog is journal
        for name in (
            "transport",
            "raftState",
            "raftCurrentTerm",
            "raftNextIndex",
            "raftElectionDeadline",
            "otherNodes",
            "selfNode",
            "raftLeader",
            "conf",
            "transferInProgress",
        ):
            assert hasattr(node, f"_SyncObj__{name}"), name
        assert callable(node._SyncObj__connectedToAnyone) and callable(node._SyncObj__generateRaftTimeout)
        assert callable(node._SyncObj__onLeaderChanged)
        for _ in range(200):  # a one-node group: pre-vote, then election, then leader
            node.doTick(0.01)
            if node._isLeader():
                break
        assert node._isLeader()
        assert node.prevotes_started >= 1
        assert len(journal) >= 2 and not journal.dirty, "the leader's no-op is synced"
    finally:
        node.destroy()
    assert pysyncobj.syncobj.Serializer is raft_fixes._create_serializer
    assert type(node._SyncObj__serializer) is pysyncobj.serializer.Serializer  # no custom serializer: pysyncobj's
    # a plain path still gets pysyncobj's own journal
    assert type(raft_fixes._create_journal(None)).__name__ == "MemoryJournal"
