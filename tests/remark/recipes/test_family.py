"""remark.algos.family: the registered pieces TRL lacks, against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from remark.algos import get, rank_advantages
from remark.algos.family import (
    gmpo_clip_log_ratio,
    gmpo_logps,
    interrupt_truncated,
    prompt_weights,
    rloo_baseline,
    zero_signal_groups,
)

# one request, G = 4 lists, K = 2 ranks
R_GK = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0], [1.0, 1.0]])


def test_rloo_baseline_is_the_mean_of_the_other_lists():
    base = rloo_baseline(R_GK[None])[0]
    # rank 1 column [1, 0, 0, 1]: others' means (0+0+1)/3, (1+0+1)/3, (1+0+1)/3, (1+0+0)/3
    torch.testing.assert_close(base[:, 0], torch.tensor([1 / 3, 2 / 3, 2 / 3, 1 / 3]))
    adv = rank_advantages(R_GK, group_size=4, mode="none", baseline="rloo")
    torch.testing.assert_close(adv[:, 0], torch.tensor([2 / 3, -2 / 3, -2 / 3, 2 / 3]))
    # the convention: r - mean(others) = G / (G - 1) * (r - mean), no further factor
    plain = rank_advantages(R_GK, group_size=4, mode="none", baseline="mean")
    torch.testing.assert_close(adv, plain * 4 / 3)
    assert get("baseline", "rloo") is rloo_baseline
    with pytest.raises(ValueError, match="G >= 2"):
        rloo_baseline(torch.zeros(1, 1, 2))


def test_reinforce_pp_batch_mean_and_std_per_rank():
    rewards = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # groups of 2: [1,0],[1,0] equal
    adv = rank_advantages(rewards, group_size=2, mode="batch", baseline="batch", eps=0.0)
    # rank 1: mean 0.75, unbiased std sqrt(0.25) = 0.5 -> (1 - 0.75) / 0.5 = 0.5, (0 - 0.75) / 0.5 = -1.5
    torch.testing.assert_close(adv[:, 0], torch.tensor([0.5, 0.5, -1.5, 0.5]))
    # rank 2: mean 0.5, std sqrt(1/3)
    s = math.sqrt(1 / 3)
    torch.testing.assert_close(adv[:, 1], torch.tensor([-0.5 / s, -0.5 / s, 0.5 / s, 0.5 / s]))
    assert float(adv[:2].abs().sum()) > 0  # a group of identical lists still moves: no group baseline


def test_gmpo_clip_is_directional_in_log_space():
    log_ratio = torch.tensor([0.6, -0.6, 0.6, -0.6, 0.1, 0.9])
    a = torch.tensor([1.0, 1.0, -1.0, -1.0, 0.0, 0.0])
    got = gmpo_clip_log_ratio(log_ratio, a, clip_low=0.4, clip_high=0.5)
    # A > 0 caps from above only; A < 0 floors from below only; A = 0 untouched
    torch.testing.assert_close(got, torch.tensor([0.5, -0.6, 0.6, -0.4, 0.1, 0.9]))


def test_gmpo_ratio_is_the_geometric_mean_of_clipped_token_ratios():
    logps = torch.tensor([[-1.0, -2.0, -0.5, -0.3, -1.0]], requires_grad=True)
    old = torch.tensor([[-1.2, -2.9, -0.5, -0.1, 0.0]])
    adv = torch.tensor([[1.0, 1.0, 1.0, -2.0, 0.0]])
    seg = torch.tensor([[0, 0, 0, 1, -1]])  # rank 0: three tokens; rank 1: one; one token of no rank
    mask = torch.tensor([[1, 1, 1, 1, 0]])  # the last is padding
    new = gmpo_logps(logps, old, adv, seg, mask, clip_low=0.4, clip_high=0.4)
    ratio = torch.exp(new - old)
    # rank 0: token ratios e^0.2, e^0.9 -> clipped e^0.4, e^0: (e^0.2 * e^0.4 * 1)^(1/3)
    r0 = (math.exp(0.2) * math.exp(0.4) * 1.0) ** (1 / 3)
    # rank 1: e^-0.2, A < 0 floors at e^-0.4 only: stays e^-0.2
    torch.testing.assert_close(ratio[0, :4], torch.tensor([r0, r0, r0, math.exp(-0.2)]))
    assert float(new[0, 4].detach()) == float(logps[0, 4].detach())  # padding keeps its log-prob
    # the clipped token (t = 1) gets no gradient; the others share the segment's: d rho / d logp_t = rho / 3
    ratio[0, 0].backward()
    torch.testing.assert_close(logps.grad[0, :3], torch.tensor([r0 / 3, 0.0, r0 / 3]))
    assert get("objective", "gmpo") is gmpo_logps


def test_gmpo_sequence_level_is_one_segment_and_own_segments_stay_token_level():
    torch.manual_seed(0)
    logps, old = torch.randn(2, 6), torch.randn(2, 6)
    adv = torch.ones(2, 6)
    mask = torch.ones(2, 6)
    seq = gmpo_logps(logps, old, adv, torch.zeros(2, 6, dtype=torch.long), mask, clip_low=9.0, clip_high=9.0)
    torch.testing.assert_close(seq - old, (logps - old).mean(1, keepdim=True).expand(2, 6))
    own = gmpo_logps(logps, old, adv, torch.full((2, 6), -1), mask, clip_low=9.0, clip_high=9.0)
    torch.testing.assert_close(own, logps)


def test_prompt_weights_average_each_prompts_token_mean():
    tokens = torch.tensor([10.0, 30.0, 5.0, 5.0, 0.0, 0.0])  # groups of 2: n_b = 40, 10, 0 (filtered)
    w = prompt_weights(tokens, group_size=2)
    # N = 50, n_B = 2: group 1 rows get 50 / (2 * 40), group 2 rows 50 / (2 * 10), the empty group 0
    torch.testing.assert_close(w, torch.tensor([0.625, 0.625, 2.5, 2.5, 0.0, 0.0]))
    # sum_{r,t} w_r l_rt / N = mean over prompts of each prompt's token mean
    loss_rt = [torch.full((int(n),), float(i + 1)) for i, n in enumerate(tokens)]
    got = sum(float(w[i] * loss_rt[i].sum()) for i in range(6)) / 50
    want = ((10 * 1 + 30 * 2) / 40 + (5 * 3 + 5 * 4) / 10) / 2
    assert got == pytest.approx(want)
    torch.testing.assert_close(get("aggregation", "token")(tokens, group_size=2), torch.ones(6))


def test_interrupt_zeroes_the_cut_line_only():
    rewards = torch.ones(3, 2)
    got = interrupt_truncated(
        rewards, last_rank_R=torch.tensor([1, 0, 5]), cut_R=torch.tensor([True, False, True])
    )
    torch.testing.assert_close(
        got, torch.tensor([[1.0, 0.0], [1.0, 1.0], [1.0, 1.0]])
    )  # rank 5 >= K: overflow
    per_responder = torch.ones(2, 3, 2)
    got = interrupt_truncated(
        per_responder, last_rank_R=torch.tensor([0, 1]), cut_R=torch.tensor([True, True])
    )
    assert got[0, :, 0].eq(0).all() and got[1, :, 1].eq(0).all() and float(got.sum()) == 6.0
    same = get("truncation", "score")(
        rewards, last_rank_R=torch.tensor([1, 0, 5]), cut_R=torch.ones(3, dtype=torch.bool)
    )
    assert same is rewards


def test_zero_signal_groups_for_rank_and_per_responder_rewards():
    rewards = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    torch.testing.assert_close(zero_signal_groups(rewards, group_size=2), torch.tensor([True, False]))
    # per responder: equal maxima, but responder 2 differs across the lists -> signal
    rnk = torch.tensor([[[1.0, 0.0], [0.0, 0.0]], [[1.0, 0.0], [1.0, 0.0]]])
    torch.testing.assert_close(zero_signal_groups(rnk, group_size=2), torch.tensor([False]))
    with pytest.raises(ValueError, match="groups of 3"):
        zero_signal_groups(rewards, group_size=3)
