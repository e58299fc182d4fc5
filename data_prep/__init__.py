"""Datasets for ReMaRk and Rank-GRPO: readers for every source, pooling into one row per request, the
per-responder expansion, statistics, prompts (docs/architecture.md, "data_prep/").

Modules: ``schema`` (frames and bad-row reporting), ``readers`` (ProtoQA, Reddit in Rank-GRPO's shape,
ReDial, generic threads), ``pool`` (grounded mentions -> requests; splits), ``dataset`` (the prepared
directory), ``stats``, ``prompts``, ``fetch`` (downloads), ``synthetic`` (the embedded default world).
Nothing is imported here, so ``import data_prep.prompts`` stays light.
"""
