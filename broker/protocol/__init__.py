"""Wire protocols of the broker, sans-I/O: bytes in, frames out (and back).

- `ha`: the master <-> slave replication frames (RocketMQ AutoSwitch HA, DESIGN §2.2).
"""
