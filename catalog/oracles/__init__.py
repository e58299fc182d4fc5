"""Test oracles for the catalog: a per-pair loop matcher that the batched ``Matcher`` is checked against.

Tests and benchmarks only.
"""
