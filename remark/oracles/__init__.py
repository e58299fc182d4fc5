"""Test oracles: slow, independent loop implementations that the fast paths are checked against.

Tests and benchmarks only; nothing in training imports them.
"""
