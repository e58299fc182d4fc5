import math

import pytest
import torch

from remark.algos import names, per_responder, rank_advantages, rank_rewards, scale_advantages
from tests.remark.algos.cases import encoded

T = torch.tensor
EPS = 1e-4
S2 = math.sqrt(2) / 2  # unbiased std of {0, 1}
S6 = math.sqrt(2) / 6  # unbiased std of {1/3, 2/3} or {0, 1/3}


def adv(scheme, mode, **kw):
    enc = encoded()
    rewards = rank_rewards(enc, scheme)
    mask = enc.responder_mask_RN if per_responder(scheme) else None
    return rank_advantages(rewards, group_size=2, mode=mode, eps=EPS, mask_RN=mask, **kw)


def test_union_group():
    # rank 0: [1, 1] -> 0; rank 2: [0, 1] -> -+0.5 / (std + eps); request B: all zero
    a = 0.5 / (S2 + EPS)
    expected = T([[0.0, 0, -a, 0], [0, 0, a, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
    torch.testing.assert_close(adv("union", "group"), expected)


def test_marginal_group_and_none():
    a = (1 / 6) / (S6 + EPS)
    torch.testing.assert_close(
        adv("marginal", "group"), T([[a, 0, -a, 0], [-a, 0, a, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
    )
    b = 1 / 6
    torch.testing.assert_close(
        adv("marginal", "none"), T([[b, 0, -b, 0], [-b, 0, b, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
    )


def test_responder_group_is_zero_signal_here():
    # drawn R1 = {a, b}: both lists hit at rank 0 and nothing else -> no signal at all
    assert torch.equal(adv("responder", "group"), torch.zeros(4, 4))


def test_union_batch_scale():
    # rank 2 over the whole batch: [0, 1, 0, 0], mean 1/4, unbiased var 1/4 -> std 1/2
    a = 0.5 / (0.5 + EPS)
    torch.testing.assert_close(
        adv("union", "batch"), T([[0.0, 0, -a, 0], [0, 0, a, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
    )


def test_responder_rb_group_and_batch():
    # R1: rank 0 [1, 1] -> 0; R2: rank 0 [1, 0], rank 2 [0, 1] -> +-0.5/(S2+eps); R3: 0; mean over 3
    a = 0.5 / (S2 + EPS) / 3
    torch.testing.assert_close(
        adv("responder_rb", "group"), T([[a, 0, -a, 0], [-a, 0, a, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
    )
    # batch: valid (b, n, g) entries of rank 0 are R1 [1, 1], R2 [1, 0], R3 [0, 0], request B's R1 [0, 0]:
    # 8 values, 3 ones: mean 3/8, unbiased var (3 * 25/64 + 5 * 9/64) / 7 = 15/56
    s0 = math.sqrt(15 / 56)
    # rank 2: one 1 among 8 values: var (49/64 + 7/64) / 7 = 1/8
    s2 = math.sqrt(1 / 8)
    a0, a2 = 0.5 / (s0 + EPS) / 3, 0.5 / (s2 + EPS) / 3
    torch.testing.assert_close(
        adv("responder_rb", "batch"), T([[a0, 0, -a2, 0], [-a0, 0, a2, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
    )


def test_scale_advantages_hand_values_and_mean_zero():
    r = T([[[1.0, 0.0], [0.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])  # B=1, G=4, K=2
    std = math.sqrt(1 / 3)  # {1, 0, 0, 1}: mean 1/2, sum sq 1, / 3
    a = 0.5 / (std + EPS)
    expected = T([[[a, -a], [-a, -a], [-a, a], [a, a]]])
    out = scale_advantages(r, "group", EPS)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(out.sum(1), torch.zeros(1, 2))
    torch.testing.assert_close(scale_advantages(r, "none"), r - 0.5)


@pytest.mark.parametrize("mode", names("scale"))
def test_no_nan_on_degenerate_batches(mode):
    for r in [torch.zeros(3, 8, 20), torch.ones(3, 8, 20), torch.full((1, 2, 1), 0.25)]:
        out = scale_advantages(r, mode)
        assert torch.isfinite(out).all() and torch.equal(out, torch.zeros_like(r))
    # a request whose lists are all ungrounded / empty, next to one with signal
    enc = encoded()
    for scheme in names("reward"):
        out = rank_advantages(
            rank_rewards(enc, scheme),
            group_size=2,
            mode=mode,
            mask_RN=enc.responder_mask_RN if per_responder(scheme) else None,
        )
        assert torch.isfinite(out).all()
        assert torch.equal(out[2:], torch.zeros(2, 4))


def test_batch_scale_single_valid_group_of_rb_has_no_nan():
    rewards = T([[[1.0]], [[0.0]]])  # R = 2 rows, N = 1, K = 1, one group
    out = rank_advantages(rewards, group_size=2, mode="batch", mask_RN=T([[True], [True]]))
    assert torch.isfinite(out).all()
    out = rank_advantages(
        torch.zeros(2, 2, 3), group_size=2, mode="batch", mask_RN=torch.zeros(2, 2, dtype=torch.bool)
    )
    assert torch.equal(out, torch.zeros(2, 3))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: scale_advantages(torch.zeros(4, 1, 20), "group"), "need G >= 2"),
        (lambda: scale_advantages(torch.zeros(32, 20), "group"), "must be 3-D"),
        (lambda: scale_advantages(torch.zeros(4, 8, 20), "grop"), "valid scale names: batch, group, none"),
        (lambda: scale_advantages(torch.full((2, 2, 2), math.nan), "group"), "NaN or inf"),
        (lambda: scale_advantages(torch.zeros(2, 2, 2), "group", -1.0), "eps must be >= 0"),
        (
            lambda: scale_advantages(torch.zeros(2, 2, 2), "batch", mask_B=torch.ones(3)),
            r"mask_B must have shape \(2,\)",
        ),
        (
            lambda: rank_advantages(torch.zeros(10, 20), group_size=8),
            "10 completion rows do not split into groups of 8",
        ),
        (lambda: rank_advantages(torch.zeros(8, 20), group_size=1), "group_size >= 2"),
        (lambda: rank_advantages(torch.zeros(8, 3, 20), group_size=8), r"need mask_RN of shape \(8, 3\)"),
        (
            lambda: rank_advantages(torch.zeros(8, 20), group_size=8, mask_RN=torch.ones(8, 2)),
            "only for per-responder",
        ),
        (lambda: rank_advantages(torch.zeros(8), group_size=8), r"must be an \(R, K\) or \(R, N, K\) tensor"),
        (
            lambda: rank_advantages(
                torch.zeros(2, 2, 3), group_size=2, mask_RN=T([[True, True], [True, False]])
            ),
            "mask_RN differs within a group",
        ),
    ],
)
def test_bad_shapes_raise_clear_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_integer_rewards_are_accepted():
    out = scale_advantages(T([[[1], [0]]]), "none")
    assert out.dtype == torch.float32 and out.flatten().tolist() == [0.5, -0.5]


def test_per_responder_advantages_are_the_responder_schemes_for_each_draw():
    from remark.algos import encode_rows, per_responder_advantages
    from tests.remark.algos.cases import COUNTS, RESPONDERS, SEEN, SLOTS, UNION

    enc = encoded()
    per = per_responder_advantages(
        rank_rewards(enc, "responder_rb"), group_size=2, mode="group", mask_RN=enc.responder_mask_RN
    )
    a = 0.5 / (S2 + EPS)
    # request A: R1 no signal, R2 (b, c) [+a, 0, -a, 0] / [-a, 0, +a, 0], R3 none; request B: padded -> 0
    torch.testing.assert_close(per[0], T([[0.0, 0, 0, 0], [a, 0, -a, 0], [0, 0, 0, 0]]))
    torch.testing.assert_close(per[1], T([[0.0, 0, 0, 0], [-a, 0, a, 0], [0, 0, 0, 0]]))
    assert torch.equal(per[2:], torch.zeros(2, 3, 4))
    for n in range(3):
        drawn = encode_rows(
            SLOTS[:2],
            k=4,
            union=UNION[:2],
            counts=COUNTS[:2],
            responders=RESPONDERS[:2],
            seen=SEEN[:2],
            responder_index=[n, n],
        )
        want = rank_advantages(rank_rewards(drawn, "responder"), group_size=2, mode="group")
        torch.testing.assert_close(per[:2, n], want)
