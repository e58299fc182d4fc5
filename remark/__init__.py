"""remark: rank-level reinforcement learning for LLM recommenders.

ReMaRk (Responder-Marginalized Rank-level RL) pools every responder of a request into one training row
and rewards a title at rank k when *any* responder named it; Rank-GRPO (Zhu et al., 2025), the baseline,
scores each (request, responder) row against that one responder. Both share the per-rank group scaling
implemented in :mod:`remark.algos`.

Layering (enforced by ``tests/test_layering.py``): ``catalog`` <- ``data_prep`` <- ``eval`` <- ``remark``.
"""

__version__ = "0.1.0"
