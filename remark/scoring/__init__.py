"""Scoring: a generated completion -> per-rank rewards and token ranks (``docs/architecture.md``).

``scorer`` (``RankScorer``: decode, parse, ground, encode, reward, token map -> ``ScoredRows``), ``pool``
(the same scorer in worker processes, overlapping generation), ``shards`` (how rows are split among and
joined from the workers).
"""
