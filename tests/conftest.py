"""Shared test configuration: every tier fails loudly on leaked resources."""
