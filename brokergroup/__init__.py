"""brokergroup: RocketMQ-style broker replica sets with automatic master/slave switching.

The import namespace maps onto the repository's folders: `brokergroup.controller` is
`controller/`, `brokergroup.broker` is `broker/`, and so on (docs/architecture.md).
"""

__version__ = "0.1.0"
