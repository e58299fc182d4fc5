"""Rank-level importance ratio through the log-probabilities (remark.algos.ratios)."""

from __future__ import annotations

import torch

from remark.algos import get
from remark.algos.ratios import rank_level_logps


def test_ratio_is_exp_of_mean_log_ratio_per_rank():
    logps = torch.tensor([[-1.0, -2.0, -3.0, -0.5, -0.7, 0.0]], requires_grad=True)
    old = torch.tensor([[-1.5, -2.5, -2.0, -0.5, -0.2, 0.0]])
    rank = torch.tensor([[0, 0, 1, 1, -1, -1]])  # two ranks, a token of no rank, a padding token
    mask = torch.tensor([[1, 1, 1, 1, 1, 0]])
    new = rank_level_logps(logps, old, rank, mask)
    ratio = torch.exp(new - old)
    # rank 0: mean(0.5, 0.5) = 0.5; rank 1: mean(-1.0, 0.0) = -0.5; no-rank token keeps its own -0.5
    expected = torch.tensor([[0.5, 0.5, -0.5, -0.5, -0.5, 0.0]]).exp()
    torch.testing.assert_close(ratio, expected)
    # the gradient of a rank's ratio spreads evenly over its tokens: d w_0 / d logp_t = w_0 / 2
    ratio[0, 0].backward()
    torch.testing.assert_close(logps.grad[0, :2], torch.full((2,), 0.5 * float(expected[0, 0])))
    assert float(logps.grad[0, 2:].abs().sum()) == 0.0


def test_sums_over_a_rank_are_preserved_and_registry_name():
    torch.manual_seed(0)
    logps, old = torch.randn(3, 7), torch.randn(3, 7)
    rank = torch.tensor([[0, 0, 1, 1, 1, -1, -1], [0, 1, 2, 2, 2, 2, -1], [-1] * 7])
    mask = torch.ones(3, 7)
    new = rank_level_logps(logps, old, rank, mask)
    for r in range(3):
        for k in range(3):
            sel = rank[r] == k
            torch.testing.assert_close(new[r, sel].sum(), logps[r, sel].sum())
    torch.testing.assert_close(new[rank < 0], logps[rank < 0])
    assert get("ratio", "rank") is rank_level_logps
