"""``eval.verdicts``: the figures beside the interval, computed by hand, and the one rule on 1, 2 and 3
seeds; ``remark eval compare`` prints and writes them."""

from __future__ import annotations

import doctest
import itertools
import json
import math

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import eval.verdicts as verdicts
from eval.bootstrap import BootstrapConfig, compare
from eval.verdicts import (
    macro_mean,
    percentile_interval,
    request_differences,
    sign_flip_test,
    table_verdicts,
    top_influence_share,
    verdict,
    weighted_mean,
    wins_ties_losses,
)
from remark.cli.main import main
from tests.eval.test_cli_seeds import IDS, N_ROWS, RESP, UNION, A, B, eval_dir

D, W = np.array([1.0, -1.0, 2.0]), np.array([1.0, 1.0, 2.0])
FAST = BootstrapConfig(n_resamples=999)


def test_the_docstring_examples_hold():
    assert doctest.testmod(verdicts).failed == 0


def test_hand_case_three_requests():
    # T = (1 - 1 + 4) / 4 = 1; the 8 sign vectors give sum(e w d) = +-1 +-1 +-4 in {6, 4, 4, 2, -2, -4, -4, -6},
    # so T* in {1.5, 1, 1, 0.5, -0.5, -1, -1, -1.5}: abs(T*) >= 1 for 6 of 8
    assert weighted_mean(D, W) == 1.0
    assert macro_mean(D, W) == pytest.approx(2 / 3)
    flip = sign_flip_test(D, W)
    assert flip == {
        "statistic": 1.0,
        "p": 0.75,
        "exact": True,
        "n_resamples": 8,
        "seed": 0,
        "alternative": "two-sided",
    }
    # scipy's exact paired test on one sample (every sign vector) agrees
    res = stats.permutation_test(
        (D,), lambda x, axis=-1: (x * W).sum(axis) / W.sum(), permutation_type="samples", vectorized=True
    )
    assert res.pvalue == pytest.approx(0.75)
    assert wins_ties_losses(D, W) == {"wins": 2, "ties": 0, "losses": 1}
    # fewer than five requests: the top five are all of them
    assert top_influence_share(D, W) == 1.0
    # w d = [1, -1, 4]: the largest is 4 of a total 4; the two largest (4, then 1 before -1) carry 5 / 4
    assert top_influence_share(D, W, k=1) == 1.0
    assert top_influence_share(D, W, k=2) == 1.25


def test_requests_that_do_not_move_the_statistic_keep_the_test_exact():
    d, w = np.r_[D, np.zeros(100)], np.r_[W, np.ones(100)]
    flip = sign_flip_test(d, w)
    assert flip["exact"] and flip["n_resamples"] == 8
    # the weights of the level requests still divide T
    assert flip["statistic"] == pytest.approx(4 / 104) and flip["p"] == 0.75
    # weight 0: outside the view, whatever its difference
    assert sign_flip_test([1.0, -1.0, 2.0, 50.0], [1.0, 1.0, 2.0, 0.0])["p"] == 0.75
    assert wins_ties_losses([1.0, -1.0, 2.0, 50.0], [1.0, 1.0, 2.0, 0.0]) == {
        "wins": 2,
        "ties": 0,
        "losses": 1,
    }


def test_one_sided_differences():
    # ten requests, A ahead on every one: only the all-plus and all-minus sign vectors reach abs(T)
    d = np.linspace(0.1, 1.0, 10)
    flip = sign_flip_test(d)
    assert flip["exact"] and flip["n_resamples"] == 1024 and flip["p"] == 2 / 1024
    assert wins_ties_losses(d) == {"wins": 10, "ties": 0, "losses": 0}
    assert top_influence_share(d) == pytest.approx((0.6 + 0.7 + 0.8 + 0.9 + 1.0) / 5.5)
    # too many requests to enumerate: random sign vectors, and no random one reaches abs(T) (2 in 2^40)
    flip = sign_flip_test(np.ones(40), n_resamples=999, seed=3)
    assert not flip["exact"] and flip["n_resamples"] == 999 and flip["p"] == 1 / 1000 and flip["seed"] == 3


def test_random_sign_flips_agree_with_enumeration_and_scipy():
    rng = np.random.default_rng(1)
    d, w = rng.normal(0.2, 1.0, 17), rng.integers(1, 4, 17).astype(float)
    exact = sign_flip_test(d, w, n_resamples=2**17)
    assert exact["exact"] and exact["n_resamples"] == 2**17
    signs = np.array(list(itertools.product([1.0, -1.0], repeat=17)))
    t = (w * d).sum() / w.sum()
    assert exact["p"] == pytest.approx(np.mean(np.abs(signs @ (w * d) / w.sum()) >= abs(t) * (1 - 1e-12)))
    sampled = sign_flip_test(d, w, n_resamples=20_000, seed=5)
    assert not sampled["exact"] and sampled["p"] == pytest.approx(exact["p"], abs=0.01)
    assert sign_flip_test(d, w, n_resamples=20_000, seed=5) == sampled  # a fixed seed: the same p
    res = stats.permutation_test(
        (d,),
        lambda x, axis=-1: (x * w).sum(axis) / w.sum(),
        permutation_type="samples",
        vectorized=True,
        n_resamples=20_000,
        rng=np.random.default_rng(0),
    )
    assert sampled["p"] == pytest.approx(res.pvalue, abs=0.02)


def test_ties_and_the_tolerance():
    d = [0.1, -0.05, 0.0, 0.3, -0.2]
    assert wins_ties_losses(d) == {"wins": 2, "ties": 1, "losses": 2}
    assert wins_ties_losses(d, tol=0.05) == {"wins": 2, "ties": 2, "losses": 1}
    with pytest.raises(ValueError, match="tolerance"):
        wins_ties_losses(d, tol=-1.0)


def test_macro_and_weighted_means_differ_by_the_weights():
    # one request with three responders gains, two with one each do not
    assert weighted_mean([1.0, 0.0, 0.0], [3.0, 1.0, 1.0]) == pytest.approx(3 / 5)
    assert macro_mean([1.0, 0.0, 0.0], [3.0, 1.0, 1.0]) == pytest.approx(1 / 3)
    assert math.isnan(macro_mean([1.0], [0.0])) and math.isnan(weighted_mean([1.0], [0.0]))


def test_top_influence_share_can_exceed_one_or_be_negative():
    # w d = [-3, 1, 1, 1, 1, 0.5]: total 1.5; the largest, -3, points against the mean
    d = [-3.0, 1.0, 1.0, 1.0, 1.0, 0.5]
    assert top_influence_share(d, k=1) == pytest.approx(-2.0)
    assert top_influence_share(d) == pytest.approx(1.0 / 1.5)  # -3 + 1 + 1 + 1 + 1 over 1.5
    # five requests carry 115% of the mean: the others pull the other way
    d = [0.3, 0.3, 0.25, 0.2, 0.1, -0.05, -0.05, -0.05, 0.0]
    assert sum(d) == pytest.approx(1.0)
    assert top_influence_share(d) == pytest.approx(1.15)
    assert math.isnan(top_influence_share([1.0, -1.0]))


def per_request_tables(values_a, values_b):
    table = pl.DataFrame({"request_id": IDS, "n_rows": N_ROWS})
    return (
        table.with_columns(pl.Series(RESP, values_a), pl.Series(UNION, np.square(values_a))),
        table.with_columns(pl.Series(RESP, values_b), pl.Series(UNION, np.square(values_b))),
    )


def test_the_percentile_interval_is_compares_bootstrap_with_another_method():
    a, b = per_request_tables(A[0], B[0])
    d, w = request_differences([a], [b], RESP)
    assert d.shape == (1, 6) and w.tolist() == N_ROWS.tolist()
    config = BootstrapConfig(n_resamples=999, seed=4)
    ours = percentile_interval(d[0], w, config)
    theirs = compare(a, b, [RESP, UNION], BootstrapConfig(method="percentile", n_resamples=999, seed=4))
    assert ours.estimate[0] == pytest.approx(theirs[RESP]["mean"])
    assert (ours.low[0], ours.high[0]) == pytest.approx((theirs[RESP]["ci_low"], theirs[RESP]["ci_high"]))
    # several metrics at once, as compare bootstraps them
    d_union, _ = request_differences([a], [b], UNION)
    both = percentile_interval(np.stack([d[0], d_union[0]], 1), np.stack([w, np.ones(6)], 1), config)
    assert both.low == pytest.approx([theirs[k]["ci_low"] for k in (RESP, UNION)])
    assert both.high == pytest.approx([theirs[k]["ci_high"] for k in (RESP, UNION)])


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(st.floats(-1, 1, allow_nan=False), st.integers(1, 6)),
        min_size=2,
        max_size=30,
    ),
    st.integers(0, 2**16),
)
def test_the_percentile_interval_contains_the_mean(rows, seed):
    d, w = np.array([r[0] for r in rows]), np.array([r[1] for r in rows], dtype=float)
    iv = percentile_interval(d, w, BootstrapConfig(n_resamples=499, seed=seed))
    mean = weighted_mean(d, w)
    assert iv.estimate[0] == pytest.approx(mean, abs=1e-12)
    assert iv.low[0] - 1e-12 <= mean <= iv.high[0] + 1e-12


def test_request_differences_refuse_other_weights():
    a, b = per_request_tables(A[0], B[0])
    with pytest.raises(ValueError, match="different request weights"):
        request_differences([a], [b.with_columns(pl.lit(1).alias("n_rows"))], RESP)
    nulls = a.with_columns(
        pl.when(pl.col("request_id") == "r1").then(None).otherwise(pl.col(RESP)).alias(RESP)
    )
    with pytest.raises(ValueError, match="different request weights"):
        request_differences([nulls], [b], RESP)
    d, w = request_differences([nulls], [b.with_columns(nulls[RESP].alias(RESP) * 0)], RESP)
    assert w[0] == 0 and d[0, 0] == 0  # a null is outside the view in both


SEEDS_UP = np.array([[0.3, 0.2, 0.4, 0.1, 0.2, 0.3, 0.25, 0.15], [0.2, 0.3, 0.3, 0.2, 0.1, 0.3, 0.2, 0.2]])
SEEDS_UP = np.vstack([SEEDS_UP, SEEDS_UP[0] + 0.01])  # three seeds, every request ahead


@pytest.mark.parametrize("n_seeds", [1, 2])
def test_fewer_than_three_seeds_give_the_figures_and_no_verdict(n_seeds):
    v = verdict(SEEDS_UP[:n_seeds], config=FAST)
    assert v["resolved"] is None and v["verdict"] == "no verdict (n seeds < 3)"
    assert v["text"].startswith("no verdict (n seeds < 3): A - B = +")
    assert v["n_seeds"] == n_seeds and v["n_requests"] == 8 and v["wins"] == 8
    assert v["sign_flip"]["p"] == 2 / 256 and v["percentile"]["ci_low"] > 0
    json.dumps(v)  # JSON-able
    # the same with one seed given as (R,)
    if n_seeds == 1:
        assert verdict(SEEDS_UP[0], config=FAST)["text"] == v["text"]


def test_three_seeds_one_sided_resolve_in_the_direction_of_the_mean():
    up = verdict(SEEDS_UP, config=FAST, names=("ReMaRk", "Rank-GRPO"))
    assert up["resolved"] == 1 and up["verdict"] == "resolved"
    assert up["seeds"]["ci_low"] > 0 and up["sign_flip"]["p"] == 2 / 256 < 0.05
    points = "23.67 points"  # seeds 0.2375, 0.225, 0.2475
    assert up["text"].startswith(f"resolved, ReMaRk ahead: ReMaRk - Rank-GRPO = +{points} (the t-interval")
    assert "excludes 0 and sign-flip p = 0.00781 < 0.05 over 8 requests)." in up["text"]
    down = verdict(-SEEDS_UP, config=FAST)
    assert down["resolved"] == -1 and down["text"].startswith(f"resolved, B ahead: A - B = -{points}")
    keys = {
        "n_seeds", "n_requests", "mean", "weighted_mean", "macro_mean", "seeds", "requests", "percentile",
        "sign_flip", "alpha", "wins", "ties", "losses", "tie_tolerance", "top_influence", "resolved",
        "verdict", "text",
    }  # fmt: skip
    assert set(up) == keys
    assert up["mean"] == pytest.approx(up["weighted_mean"]) == pytest.approx(SEEDS_UP.mean())


def test_three_seeds_mixed_cases_are_not_resolved():
    # the seeds agree exactly (t-interval [1, 1]) but three requests cannot reach p < 0.05 (p = 0.75)
    v = verdict(np.tile(D, (3, 1)), W, config=FAST)
    assert v["resolved"] == 0 and (v["seeds"]["ci_low"], v["seeds"]["ci_high"]) == (1.0, 1.0)
    assert v["text"] == "not resolved: A - B = +100.00 points (sign-flip p = 0.75 >= 0.05 over 3 requests)."
    # every request ahead (p = 2/256) but the seeds' aggregates spread across 0
    v = verdict(SEEDS_UP, seed_diffs_S=[-0.5, 0.2, 0.9], config=FAST)
    assert v["resolved"] == 0 and v["sign_flip"]["p"] < 0.05 and v["seeds"]["ci_low"] < 0
    assert "the t-interval over 3 seeds [" in v["text"] and "contains 0)" in v["text"]
    # both exclude 0, in opposite directions
    v = verdict(-SEEDS_UP, seed_diffs_S=[0.2, 0.21, 0.22], config=FAST)
    assert v["resolved"] == 0 and "opposite directions" in v["text"]
    # won 19 and lost 34 yet positive: the mean is carried by few requests
    d = np.r_[np.full(19, 0.1), np.full(34, -0.05), np.zeros(70)]
    d[:5] = 0.3
    v = verdict(np.tile(d, (3, 1)) + np.array([[0.0], [0.001], [-0.001]]) * (d != 0), config=FAST)
    assert (v["wins"], v["ties"], v["losses"]) == (19, 70, 34)
    # w d: five 0.3, fourteen 0.1, thirty-four -0.05: the top five carry 1.5 of 1.2
    assert v["top_influence"]["share"] == pytest.approx(1.25)
    assert v["macro_mean"] == pytest.approx(v["weighted_mean"])


def test_a_given_interval_is_reported_as_given():
    v = verdict(SEEDS_UP, config=FAST, requests={"mean": 0.2, "ci_low": -0.1, "ci_high": 0.5})
    assert v["requests"] == {"method": "bca", "ci_low": -0.1, "ci_high": 0.5} and v["resolved"] == 1
    with pytest.raises(ValueError, match="per-seed differences"):
        verdict(SEEDS_UP, seed_diffs_S=[0.1, 0.2])


def test_table_verdicts_of_three_seeds():
    tables = [per_request_tables(a, b) for a, b in zip(A, B, strict=True)]
    got = table_verdicts([t[0] for t in tables], [t[1] for t in tables], [RESP, UNION], FAST)
    # per-responder: the pairs' differences 0.2, 0.3, 0.3 (tests/eval/test_cli_seeds.py)
    assert got[RESP]["seeds"]["values"] == pytest.approx([0.2, 0.3, 0.3])
    # seed-averaged d_r: [2/3, 0, 2/9, 1/3, 1/2, 0]: four requests ahead, two level; 2 of 16 sign vectors
    assert (got[RESP]["wins"], got[RESP]["ties"], got[RESP]["losses"]) == (4, 2, 0)
    assert got[RESP]["macro_mean"] == pytest.approx((2 / 3 + 2 / 9 + 1 / 3 + 1 / 2) / 6)
    assert got[RESP]["sign_flip"]["p"] == 2 / 16 and got[RESP]["resolved"] == 0
    # one bootstrap for both keys: the percentile interval of each key's own
    for key in (RESP, UNION):
        alone = verdict(
            *request_differences([t[0] for t in tables], [t[1] for t in tables], key), config=FAST
        )
        assert alone["percentile"] == pytest.approx(got[key]["percentile"])
        assert alone["requests"] == pytest.approx(got[key]["requests"])
    assert table_verdicts([t[0] for t in tables], [t[1] for t in tables], []) == {}


def test_compare_prints_and_writes_the_figures(tmp_path, capsys):
    a = [eval_dir(tmp_path / f"a{s}", v) for s, v in enumerate(A)]
    b = [eval_dir(tmp_path / f"b{s}", v) for s, v in enumerate(B)]
    flags = ["--k", "1", "--metrics", "recall", "--resamples", "200"]
    # one run per side: the figures beside the BCa interval, no verdict
    assert main(["eval", "compare", str(a[0]), str(b[0]), *flags, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    cell = got["verdicts"]["per_responder"]["recall@1"]
    assert cell["resolved"] is None and cell["n_seeds"] == 1
    assert cell["requests"]["ci_low"] == got["per_responder"]["recall@1"]["ci_low"]  # the BCa printed
    assert (cell["wins"], cell["ties"], cell["losses"]) == (2, 4, 0)
    assert cell["text"].startswith("no verdict (n seeds < 3): a0 - b0 = +20.00 points")
    assert main(["eval", "compare", str(a[0]), str(b[0]), *flags]) == 0
    text = capsys.readouterr().out
    assert (
        "| metric | mean | macro mean | BCa | percentile | sign-flip p | A ahead / level / behind |" in text
    )
    assert "| recall@1 | +20.00 | +33.33 | [" in text and "0.5 (exact) | 2 / 4 / 0 | 100% |" in text
    assert "Verdict: none with one run per side" in text
    # three runs per side: the verdict sentence of each metric
    assert main(["eval", "compare", *map(str, a), "--vs", *map(str, b), *flags, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    cell = got["verdicts"]["per_responder"]["recall@1"]
    assert cell["requests"]["ci_low"] == got["per_responder"]["recall@1"]["requests"]["ci_low"]
    assert cell["seeds"] == got["per_responder"]["recall@1"]["seeds"]
    assert main(["eval", "compare", *map(str, a), "--vs", *map(str, b), *flags]) == 0
    text = capsys.readouterr().out
    assert f"- recall@1: {cell['text']}" in text
    assert (
        cell["text"] == "not resolved: A - B = +26.67 points (sign-flip p = 0.125 >= 0.05 over 6 requests)."
    )
