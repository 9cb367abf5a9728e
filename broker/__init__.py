"""The broker: commit log, produce/consume API, and epoch-based master -> slave replication."""
