"""The paper's two propositions, checked numerically.

Proposition 1 (real ProtoQA crowdsourced dev requests): with a fixed advantage scale, the expectation
over the responder draw of Rank-GRPO's ``responder`` update equals the ``marginal`` update, and the
responder update's variance is strictly larger (law of total variance: the gap is the mean variance
over responder draws).

Proposition 2: with G = 8 and 0/1 rewards, ``group`` scaling multiplies the constant-scale advantage
by 1 / (s + eps) where s, the unbiased std of m hits out of G, lies in [sqrt(1/G), sqrt(G / (4 (G-1)))]:
so the factor stays in [sqrt(4 (G-1) / G), sqrt(G)] = [1.871, 2.828] (max/min = G / (2 sqrt(G-1))).
Fractional rewards on a 1/n_x grid are not bounded that way: a single vote of 40 (r = 1/40) gets the
group advantage of a unanimous hit (r = 1), a factor ~ n_x sqrt(G) over constant scaling.
"""

import itertools
import json
import math
import random

import pytest
import torch

from remark.algos import encode_rows, rank_advantages, rank_rewards, scale_advantages

G, K, D = 8, 10, 16


def _crowdsourced(data_dir):
    """Requests from the raw JSON: every respondent names one answer (lower-cased raw string)."""
    path = data_dir / "protoqa" / "dev" / "dev.crowdsourced.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not found")
    requests = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            obj = json.loads(line)
            responders = [
                [answer.strip().lower()]
                for answer, count in obj["answers"]["raw"].items()
                for _ in range(count)
                if answer.strip()
            ]
            requests.append(responders)
    return requests


def _lists(rnd: random.Random, responders, other_items):
    """G lists of K slots: answers drawn by popularity, misses, repeats and ungrounded lines."""
    named = [r[0] for r in responders]
    out = []
    for _ in range(G):
        slots = []
        for _ in range(rnd.randint(K - 3, K + 2)):
            u = rnd.random()
            if u < 0.6:
                slots.append(rnd.choice(named))
            elif u < 0.9:
                slots.append(rnd.choice(other_items))
            else:
                slots.append(None)
        out.append(slots)
    return out


@pytest.mark.data
def test_proposition_1_on_protoqa_crowdsourced(data_dir):
    requests = _crowdsourced(data_dir)
    assert len(requests) == 52
    all_items = sorted({r[0] for resp in requests for r in resp})
    gen = torch.Generator().manual_seed(0)
    total_resp_var, total_marg_var, mean_within = [], [], []
    for draw in range(2):  # two independent list draws per request
        rnd = random.Random(draw)
        u_resp, u_marg, within = [], [], []
        for x, responders in enumerate(requests):
            lists = _lists(rnd, responders, all_items)
            enc = encode_rows(lists, k=K, responders=[responders] * G, group_size=G)
            phi_GKD = torch.randn(G, K, D, generator=gen, dtype=torch.float64)  # per-rank score directions
            # the responder update for every possible draw n: A^(n) = r^(n) - mean_g r^(n) (fixed scale 1)
            r_GNK = rank_rewards(enc, "responder_rb").double()
            a_NGK = (r_GNK - r_GNK.mean(0, keepdim=True)).permute(1, 0, 2)
            u_ND = torch.einsum("ngk,gkd->nd", a_NGK, phi_GKD)
            a_marg = rank_advantages(rank_rewards(enc, "marginal").double(), group_size=G, mode="none")
            u_m = torch.einsum("gk,gkd->d", a_marg.view(G, K), phi_GKD)
            # E over a uniform responder draw of the responder update == the marginal update
            torch.testing.assert_close(u_ND.mean(0), u_m, atol=1e-6, rtol=1e-6)  # float32 c / n_x
            u_resp.append(u_ND)
            u_marg.append(u_m)
            within.append(((u_ND - u_ND.mean(0)) ** 2).sum(1).mean())
            if x < 3 and draw == 0:  # the per-responder columns are the responder scheme's rewards
                for n in (0, len(responders) // 2, len(responders) - 1):
                    e = encode_rows(lists, k=K, responders=[responders] * G, responder_index=[n] * G)
                    torch.testing.assert_close(rank_rewards(e, "responder").double(), r_GNK[:, n])
        # variance (trace) over requests' updates, pooling responder draws: Var = Var(E_r) + E(Var_r)
        resp_all = torch.cat(u_resp)  # every (request, responder) update, responders weighted 1/n_x below
        weights = torch.cat(
            [torch.full((u.shape[0],), 1.0 / u.shape[0] / len(u_resp)) for u in u_resp]
        ).double()
        mean_all = (weights[:, None] * resp_all).sum(0)
        var_resp = (weights * ((resp_all - mean_all) ** 2).sum(1)).sum()
        marg = torch.stack(u_marg)
        var_marg = ((marg - marg.mean(0)) ** 2).sum(1).mean()
        e_within = torch.stack(within).mean()
        torch.testing.assert_close(var_resp, var_marg + e_within, rtol=1e-6, atol=1e-6)
        assert torch.stack(within).min() >= 0 and e_within > 0
        assert var_resp > var_marg
        total_resp_var.append(var_resp)
        total_marg_var.append(var_marg)
        mean_within.append(e_within)
    # the responder draw is a large share of the update's variance on these requests
    share = torch.stack(mean_within).sum() / torch.stack(total_resp_var).sum()
    print(f"responder-draw share of the update variance: {share:.3f}")
    assert 0.05 < share < 1.0


def test_proposition_1_needs_a_fixed_scale():
    """With per-group std scaling, averaging the responder advantages is not the marginal advantage."""
    responders = [["a"], ["a"], ["b"], ["c"]]
    lists = [["a", "b"], ["b", "x"], ["c", "a"], ["x", "x"]]
    enc = encode_rows(lists, k=2, responders=[responders] * 4, group_size=4)
    rb = rank_advantages(
        rank_rewards(enc, "responder_rb"), group_size=4, mode="group", mask_RN=enc.responder_mask_RN
    )
    marg = rank_advantages(rank_rewards(enc, "marginal"), group_size=4, mode="group")
    assert not torch.allclose(rb, marg, atol=1e-3)
    rb_none = rank_advantages(
        rank_rewards(enc, "responder_rb"), group_size=4, mode="none", mask_RN=enc.responder_mask_RN
    )
    torch.testing.assert_close(
        rb_none, rank_advantages(rank_rewards(enc, "marginal"), group_size=4, mode="none")
    )


def test_proposition_2_binary_rewards_bounded_factor():
    eps = 1e-4
    lo, hi = math.sqrt(4 * (G - 1) / G), math.sqrt(G)
    assert (lo, hi) == pytest.approx((1.8708287, 2.8284271))
    patterns = torch.tensor(list(itertools.product([0.0, 1.0], repeat=G)))  # all 256 groups, K = 1
    r_BGK = patterns[:, :, None]
    a_group = scale_advantages(r_BGK, "group", eps)
    a_const = scale_advantages(r_BGK, "none")
    nz = a_const.abs() > 0
    factor = a_group[nz] / a_const[nz]
    assert (factor > 0).all()  # same sign: scaling never flips a 0/1 advantage
    # derived: factor = 1 / (s_m + eps), s_m = sqrt(m (G - m) / (G (G - 1)))
    m = patterns.sum(1, keepdim=True).expand(-1, G)[:, :, None][nz]
    want = 1 / (torch.sqrt(m * (G - m) / (G * (G - 1))) + eps)
    torch.testing.assert_close(factor, want)
    assert factor.max() <= hi and factor.min() >= (1 - 1e-6) / (1 / lo + eps)  # float32 rounding
    assert factor.max() / factor.min() == pytest.approx(G / (2 * math.sqrt(G - 1)), rel=1e-3)  # 1.512
    # largest advantage anywhere: the lone hit, (1 - 1/G) sqrt(G) = (G - 1) / sqrt(G), vs 1 - 1/G unscaled
    assert a_group.max().item() == pytest.approx((G - 1) / math.sqrt(G), rel=1e-3)
    assert a_const.max().item() == pytest.approx(1 - 1 / G)


def test_proposition_2_fractional_single_vote_gets_a_unanimous_advantage():
    n_x = 40
    responders = [["rare", "all"]] + [["all"]] * (n_x - 1)  # "rare": 1 vote of 40, "all": 40 of 40
    lists = [["rare"]] + [[]] * (G - 1) + [["all"]] + [[]] * (G - 1)
    enc = encode_rows(lists, k=1, responders=[responders] * (2 * G), group_size=G)
    r = rank_rewards(enc, "marginal")
    assert r[0, 0] == pytest.approx(1 / n_x) and r[G, 0] == pytest.approx(1.0)
    a_group = rank_advantages(r, group_size=G, mode="group")
    a_const = rank_advantages(r, group_size=G, mode="none")
    single, unanimous = a_group[0, 0].item(), a_group[G, 0].item()
    assert single == pytest.approx(unanimous, rel=0.02)  # equal up to eps (1e-4 against std 0.0088)
    assert a_const[G, 0] / a_const[0, 0] == pytest.approx(n_x)  # constant scale keeps them 40x apart
    factor = single / a_const[0, 0].item()  # ~ n_x sqrt(G) / (1 + eps n_x sqrt(G)): far past the 0/1 bound
    assert factor == pytest.approx(1 / (math.sqrt(1 / G) / n_x + 1e-4), rel=1e-4)
    assert factor > n_x > math.sqrt(G)
    # the union scheme scores both as hits: the same 0/1 bound as above applies
    u = rank_advantages(rank_rewards(enc, "union"), group_size=G, mode="group")
    assert u[0, 0] == pytest.approx(u[G, 0])
