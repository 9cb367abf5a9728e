"""Fault injection: clients recording histories, a nemesis, a checker, and `brokergroup chaos run`."""
