"""A reward scheme from existing columns is one registered function plus its loop-reference case: a scheme
registered at run time (``half_union``: half the union reward) is offered by ``remark diagnose``, accepted
by the config, reported by the diagnostic, checked against its loop reference, and scored the same
serially and in the scoring pool."""

from __future__ import annotations

import argparse

import pytest
import torch

from remark.algos import get, names, rewards_RNK
from remark.oracles import rank_loops
from tests.remark.registered import registered
from tests.remark.scoring.test_scorer_oracle import ITEMS, K, _bpe, assert_same, columns, encode
from tests.remark.scoring.test_scorer_oracle import catalog as catalog  # the fixture

HELP = "half the union reward (a scheme registered by a test)"
G = 2


def half_union(enc):
    """rewards_RK = 0.5 * union: from the columns the union scheme reads, nothing new."""
    return 0.5 * get("reward", "union")(enc)


def half_union_loop(slots, elig, resp, drawn):
    return [0.5 * v for v in rank_loops.SCHEMES["union"](slots, elig, resp, drawn)]


@pytest.fixture
def half():
    """``half_union`` registered (and its loop reference added) for one test, both removed after."""
    assert "half_union" not in names("reward")
    with registered("reward", "half_union", half_union, output="list", draws=False, help=HELP):
        rank_loops.SCHEMES["half_union"] = half_union_loop
        try:
            yield "half_union"
        finally:
            rank_loops.SCHEMES.pop("half_union")
    assert "half_union" not in names("reward")


def diagnose_parser() -> argparse.ArgumentParser:
    from remark.cli import diagnose

    sub = argparse.ArgumentParser(prog="remark").add_subparsers()
    diagnose.add_parser(sub)
    return sub.choices["diagnose"]


def test_the_diagnose_command_offers_it(half):
    parser = diagnose_parser()
    text = " ".join(parser.format_help().split())
    assert f"'half_union': {HELP}" in text
    assert "--pass-rate-scheme {half_union,marginal,union}" in text  # per-list, no draw: a pass-rate scheme
    args = parser.parse_args(["data", "--policy", "popularity", "--pass-rate-scheme", "half_union"])
    assert args.pass_rate_scheme == "half_union"


def test_the_config_accepts_it(half, tmp_path):
    from catalog.io.errors import InputError
    from remark.config import load_config

    path = tmp_path / "run.yaml"
    path.write_text(
        "output_dir: /tmp/remark-new-scheme\nuse_cpu: true\nreport_to: none\nloss_type: bnpo\n"
        "scale_rewards: group\nnum_generations: 4\nper_device_train_batch_size: 8\n"
        "max_completion_length: 64\nnum_ranks: 5\nreward_scheme: half_union\n"
    )
    assert load_config(path).reward_scheme == "half_union"
    path.write_text(path.read_text().replace("half_union", "half_unoin"))
    with pytest.raises(InputError, match="did you mean 'half_union'"):
        load_config(path)


def test_the_diagnostic_reports_it(half):
    from remark.diagnose import diagnose
    from tests.remark.algos.test_diagnose import _requests

    lists = {"x1": [["a"], ["b"]], "x2": [["a"], ["c"]]}
    res = diagnose(_requests(), lists, group_size=2, k=1, scale="none", pass_rate_scheme="half_union")
    s = res.schemes
    assert s["half_union"].mean_reward == pytest.approx(3 / 8) == s["union"].mean_reward / 2
    assert s["half_union"].mean_abs_adv == pytest.approx(0.125)  # x2's [0.5, 0] -> +-0.25 with no scaling
    assert s["half_union"].responder_share == 0.0 and s["half_union"].zero_signal_frac == 0.5
    assert res.pass_rates["pass_rate"].to_list() == [0.5, 0.25]


@pytest.mark.parametrize("log_decay", [False, True])
def test_it_matches_its_loop_reference(half, log_decay):
    from tests.remark.algos.test_reference import SHAPES, check_against_loop_reference

    for seed in range(2):
        for n_requests, group_size, k in SHAPES:
            check_against_loop_reference(
                half, seed=seed, n_requests=n_requests, group_size=group_size, k=k, log_decay=log_decay
            )


@pytest.fixture(scope="module")
def tok():
    return _bpe()


def scored_rows(tok):
    rows = encode(
        tok, [("text", f"{i}. {t} ({y})\nHeat (1995)", i % 2 == 0) for i, (t, y) in enumerate(ITEMS)]
    )
    return rows, columns(len(rows))


def test_it_scores_serially_and_in_the_background_thread(half, catalog, tok):
    from remark.scoring.pool import ScoringPool
    from remark.scoring.scorer import RankScorer

    rows, cols = scored_rows(tok)
    serial = RankScorer(catalog, tok, k=K, scheme=half).score(rows, cols, group_size=G, step=3)
    union = RankScorer(catalog, tok, k=K, scheme="union").score(rows, cols, group_size=G, step=3)
    assert torch.equal(serial.rewards_RNK, 0.5 * union.rewards_RNK) and serial.rewards_RNK.sum() > 0
    assert not serial.per_responder and serial.rewards_RNK.shape == (len(rows), 1, K)
    with ScoringPool(RankScorer(catalog, tok, k=K, scheme=half), workers=0) as threaded:
        assert_same(threaded.submit(rows, cols, group_size=G, step=3).result(), serial)


def test_it_scores_the_same_in_worker_processes(half, catalog, tok):
    """The scheme exists in this process only; worker processes import the registrants, not this test."""
    from remark.scoring.pool import ScoringPool
    from remark.scoring.scorer import RankScorer

    rows, cols = scored_rows(tok)
    serial = RankScorer(catalog, tok, k=K, scheme=half).score(rows, cols, group_size=G, step=3)
    with ScoringPool(RankScorer(catalog, tok, k=K, scheme=half), workers=2, timeout_s=120) as pool:
        future = pool.submit(rows, cols, group_size=G, step=3)
        assert_same(future.result(), serial)
        assert len(future.worker_s) == 2  # the rows really went to both workers


def test_rewards_rnk_gives_it_the_per_list_shape(half):
    from remark.algos import encode_rows

    enc = encode_rows([["a", "x"], ["b", None]], k=2, responders=[[["a"], ["b"]]] * 2, seen=[[], []])
    rewards, mask = rewards_RNK(enc, half)
    assert rewards.tolist() == [[[0.5, 0.0]], [[0.5, 0.0]]] and mask.tolist() == [[True], [True]]
