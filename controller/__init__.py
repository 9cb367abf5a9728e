"""The Raft controller: RocketMQ 5 controller-mode semantics on pysyncobj.

Layers, from pure to I/O (checked by import-linter, see pyproject.toml):
- `codes`, `protocol`, `model`, `election`, `heartbeat`, `core`: pure rules, no clock, no I/O;
- `replicated` (pysyncobj), `bridge` (pysyncobj thread -> asyncio), `eventlog`: adapters;
- `service` (the request scheduler and liveness on the leader), `api` (aiohttp), `client`;
- `node` (process wiring) and `admin` (the mqadmin-style CLI).
"""
