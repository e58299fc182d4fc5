"""remark.diagnose: hand-computed (a)-(d) and pass rates, the popularity policy, the CLI end to end."""

import json
import math
import re
import subprocess
import sys

import numpy as np
import polars as pl
import pytest

from remark.algos import registry
from remark.cli.main import main
from remark.diagnose import diagnose, pass_rate_schemes, popularity_lists, popularity_prior

EPS = 1e-4
A = 0.5 / (math.sqrt(0.5) + EPS)  # group advantage of rewards [1, 0] (unbiased std sqrt(1/2))


def _requests():
    # x1: R1 = {a}, R2 = {b} (disagree); x2: R1 = R2 = {a} (agree)
    return pl.DataFrame(
        {
            "request_id": ["x1", "x2"],
            "seen": [[], []],
            "responders": [[["a"], ["b"]], [["a"], ["a"]]],
            "union": [["a", "b"], ["a"]],
            "counts": [[1, 1], [2]],
            "split": ["train", "valid"],
        }
    )


def test_hand_computed_report():
    lists = {"x1": [["a"], ["b"]], "x2": [["a"], ["c"]]}
    res = diagnose(_requests(), lists, group_size=2, k=1, scale="group")
    s = res.schemes
    # responder: x1's draw flips the sign (+-A: E_r = 0, Var_r = A^2); x2's draws agree (+A, -A).
    # E[Var_r] = (A^2 + A^2 + 0 + 0) / 4; Var(E_r) = (0 + 0 + A^2 + A^2) / 4 - 0  -> share 1/2
    assert s["responder"].responder_share == pytest.approx(0.5)
    assert s["responder"].zero_signal_frac == 0.0
    assert s["responder"].mean_abs_adv == pytest.approx(A, rel=1e-6)
    # union: x1 [1, 1] -> no signal; x2 [1, 0] -> +-A
    assert s["union"].responder_share == 0.0
    assert s["union"].zero_signal_frac == 0.5
    assert s["union"].mean_abs_adv == pytest.approx(A / 2, rel=1e-6)
    assert s["union"].mean_reward == pytest.approx(3 / 4)
    # marginal: x1 [1/2, 1/2] -> none; x2 [1, 0] -> +-A (scale-free under group scaling)
    assert s["marginal"].zero_signal_frac == 0.5
    assert s["marginal"].mean_abs_adv == pytest.approx(A / 2, rel=1e-6)
    assert s["marginal"].mean_reward == pytest.approx((0.5 + 0.5 + 1 + 0) / 4)
    # responder_rb: x1's per-responder advantages cancel (mean 0); x2 +-A; x1's rewards still differ
    assert s["responder_rb"].mean_abs_adv == pytest.approx(A / 2, rel=1e-6)
    assert s["responder_rb"].zero_signal_frac == 0.0
    # the mean over the draw (responder) or the responders (responder_rb) is the marginal reward
    assert s["responder"].mean_reward == pytest.approx(s["marginal"].mean_reward, rel=1e-12)
    assert s["responder_rb"].mean_reward == pytest.approx(s["marginal"].mean_reward, rel=1e-12)
    assert set(s) == set(registry.names("reward"))
    # (d): a, b in x1 have c = 1; a in x2 has c = 2
    assert res.single_vote_share == pytest.approx(2 / 3)
    assert res.pass_rates.to_dicts() == [
        {"request_id": "x1", "pass_rate": 1.0, "n_samples": 2},
        {"request_id": "x2", "pass_rate": 0.5, "n_samples": 2},
    ]


def test_none_scale_and_errors():
    lists = [[["a"], ["b"]], [["a"], ["c"]]]
    res = diagnose(_requests(), lists, group_size=2, k=1, scale="none")
    assert res.schemes["responder"].mean_abs_adv == pytest.approx(0.5)
    assert res.schemes["marginal"].mean_abs_adv == pytest.approx(0.25)
    with pytest.raises(ValueError, match="expected group_size = 3"):
        diagnose(_requests(), lists, group_size=3, k=1)
    with pytest.raises(ValueError, match="no lists for 1 requests"):
        diagnose(_requests(), {"x1": lists[0]}, group_size=2, k=1)
    with pytest.raises(ValueError, match="group_size must be >= 2"):
        diagnose(_requests(), lists, group_size=1, k=1)
    drawing = next(d.name for d in registry.describe("reward") if d.meta["draws"])
    with pytest.raises(
        ValueError, match=re.escape(f"one of {pass_rate_schemes()} (per-list schemes with no responder")
    ):
        diagnose(_requests(), lists, group_size=2, k=1, pass_rate_scheme=drawing)


def test_marginal_pass_rates():
    lists = {"x1": [["a"], ["b"]], "x2": [["a"], ["c"]]}
    res = diagnose(_requests(), lists, group_size=2, k=1, pass_rate_scheme="marginal")
    assert res.pass_rates["pass_rate"].to_list() == [0.5, 0.5]  # x1: 1/2 and 1/2; x2: 1 and 0


def test_pass_rate_schemes_are_the_per_list_schemes_without_a_draw():
    want = [d.name for d in registry.describe("reward") if d.meta["output"] == "list" and not d.meta["draws"]]
    assert pass_rate_schemes() == want
    assert "union" in want and "responder" not in want  # ReMaRk's reward qualifies; Rank-GRPO's draws


def test_help_lists_every_registered_scheme_without_torch():
    code = (
        "import sys; from remark.cli.main import main\n"
        "try:\n    main(['diagnose', '--help'])\nexcept SystemExit:\n    pass\n"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    text = " ".join(out.stdout.split())
    assert text.endswith(" False")  # torch was never imported
    for d in registry.describe("reward"):
        assert f"'{d.name}': {d.help.split()[0]}" in text
    assert f"--pass-rate-scheme {{{','.join(pass_rate_schemes())}}}" in text
    assert f"--scale {{{','.join(registry.names('scale'))}}}" in text


def test_popularity_prior_and_lists():
    items, weights = popularity_prior(_requests())  # train split only: x1
    assert items == ["a", "b"] and weights.tolist() == [1.0, 1.0]
    items, weights = popularity_prior(_requests(), split=None)
    assert items == ["a", "b"] and weights.tolist() == [3.0, 1.0]
    lists = popularity_lists(500, ["a", "b", "c"], np.array([8.0, 1.0, 1.0]), group_size=4, k=2, seed=1)
    assert len(lists) == 500 and all(len(g) == 4 for g in lists)
    flat = [lst for g in lists for lst in g]
    assert all(len(lst) == 2 and len(set(lst)) == 2 for lst in flat)  # without replacement
    first = np.mean([lst[0] == "a" for lst in flat])
    assert first == pytest.approx(0.8, abs=0.03)  # first draw ~ weights
    assert lists == popularity_lists(
        500, ["a", "b", "c"], np.array([8.0, 1.0, 1.0]), group_size=4, k=2, seed=1
    )
    assert all(
        len(lst) == 3
        for g in popularity_lists(2, ["a", "b", "c"], np.ones(3), group_size=2, k=20, seed=0)
        for lst in g
    )
    with pytest.raises(ValueError, match="prior is empty"):
        popularity_lists(1, [], np.zeros(0), group_size=2, k=2, seed=0)


QUESTIONS = [
    {"id": "q1", "q": "name a fruit", "raw": {"apple": 5, "banana": 3, "kiwi": 1, "pear": 1}},
    {"id": "q2", "q": "name a color", "raw": {"red": 6, "blue": 2, "teal": 1}},
    {"id": "q3", "q": "name a pet", "raw": {"dog": 5, "cat": 4, "fish": 1}},
]


@pytest.fixture
def dataset(tmp_path):
    src = tmp_path / "pqa.jsonl"
    with src.open("w") as fh:
        for q in QUESTIONS:
            obj = {
                "metadata": {"id": q["id"], "source": "test"},
                "question": {"original": q["q"], "normalized": q["q"]},
                "answers": {"raw": q["raw"], "clusters": {}},
                "num": {"answers": sum(q["raw"].values()), "clusters": 0},
            }
            fh.write(json.dumps(obj) + "\n")
    out = tmp_path / "ds"
    assert main(["prep", "protoqa", "--input", f"train={src}", "--out", str(out)]) == 0
    return out


def test_cli_popularity_json_and_pass_rates(dataset, tmp_path, capsys):
    from remark.planning import read_pass_rates

    capsys.readouterr()
    pr = tmp_path / "pr.parquet"
    args = ["diagnose", str(dataset), "--policy", "popularity", "--group-size", "4", "--k", "3", "--json"]
    assert main([*args, "--pass-rates-out", str(pr)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n_requests"] == 3 and set(report["schemes"]) == set(registry.names("reward"))
    # unions: q1 apple banana kiwi pear, q2 red blue teal, q3 dog cat fish; c = 1: kiwi pear teal fish
    assert report["single_vote_share"] == pytest.approx(4 / 10)
    rates = read_pass_rates(pr)
    assert sorted(rates.request_id) == ["q1", "q2", "q3"] and (rates.n_samples == 12).all()
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out) == report  # seeded: the same report twice


def test_cli_lists_and_completions(dataset, tmp_path, capsys):
    lists = tmp_path / "lists.jsonl"
    lists.write_text(
        json.dumps({"request_id": "q1", "lists": [["apple", "kiwi"], ["dog", None]]})
        + "\n"
        + json.dumps({"request_id": "q2", "completions": ["1. Red\n2. blue", "Teal\nred"]})
        + "\n"
    )
    assert (
        main(["diagnose", str(dataset), "--lists", str(lists), "--group-size", "2", "--k", "2", "--json"])
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["n_requests"] == 2
    # union: q1 [apple, kiwi] -> [1, 1], [dog, None] -> [0, 0]; q2 (parsed, grounded) [red, blue] and
    # [teal, red] -> [1, 1] twice: 6 hits of 8 slots; q2's group has no signal
    assert report["schemes"]["union"]["mean_reward"] == pytest.approx(6 / 8)
    assert report["schemes"]["union"]["zero_signal_frac"] == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"request_id": "nope", "lists": [[], []]}, "unknown request_id 'nope'"),
        ({"request_id": "q1", "lists": [[]]}, "lists must hold G = 2 entries, got 1"),
        ({"request_id": "q1"}, "needs a 'lists' or a 'completions' field"),
        ({"request_id": "q1", "lists": [[1], []]}, "list of item ids"),
    ],
)
def test_cli_bad_lists_exit_2(dataset, tmp_path, capsys, line, message):
    lists = tmp_path / "lists.jsonl"
    lists.write_text(json.dumps(line) + "\n")
    assert main(["diagnose", str(dataset), "--lists", str(lists), "--group-size", "2"]) == 2
    err = capsys.readouterr().err
    assert message in err and "lists.jsonl, row 1" in err


@pytest.mark.data
def test_protoqa_crowdsourced_popularity(data_dir, tmp_path, capsys):
    """The paper's qualitative finding on real data: the draw is most of Rank-GRPO's variance and
    zero-signal groups are far more common under the responder scheme."""
    src = data_dir / "protoqa" / "dev" / "dev.crowdsourced.jsonl"
    if not src.exists():
        pytest.skip(f"{src} not found")
    out = tmp_path / "crowd"
    assert main(["prep", "protoqa", "--input", str(src), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["diagnose", str(out), "--policy", "popularity", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    s = report["schemes"]
    assert report["n_requests"] == 52
    assert s["responder"]["responder_share"] > 0.5
    assert s["responder"]["zero_signal_frac"] > 2 * s["union"]["zero_signal_frac"]
    assert 0.6 < report["single_vote_share"] < 0.9


def test_popularity_groups_are_drawn_batch_by_batch_and_give_the_same_report(monkeypatch):
    """``diagnose`` reads an iterator of groups one batch at a time (memory holds one batch, not every
    request's G lists), and the report equals the one from the lists drawn all at once."""
    import remark.diagnose as diag
    from remark.diagnose import iter_popularity_groups

    requests = pl.concat([_requests().with_columns(pl.col("request_id") + f"_{i}") for i in range(5)])
    args = (requests.height, ["a", "b", "c"], np.array([3.0, 2.0, 1.0]))
    whole = diagnose(
        requests, popularity_lists(*args, group_size=4, k=2, seed=3), group_size=4, k=2, batch_size=3
    )
    drawn, seen = [0], []

    def counting():
        for group in iter_popularity_groups(*args, group_size=4, k=2, seed=3):
            drawn[0] += 1
            yield group

    encode = diag.encode_rows
    monkeypatch.setattr(diag, "encode_rows", lambda *a, **kw: (seen.append(drawn[0]), encode(*a, **kw))[1])
    lazy = diagnose(requests, counting(), group_size=4, k=2, batch_size=3)
    assert seen == [3, 6, 9, 10]  # groups drawn when each batch of 3 requests is encoded
    assert lazy.to_dict() == whole.to_dict()


def test_a_batch_that_cannot_fit_in_memory_is_refused_up_front(dataset, monkeypatch, capsys):
    from remark.diagnose import diagnose_memory

    # 3 requests of 10, 9 and 10 responders (the answers' counts), G = 100, K = 20, all in one batch
    need = diagnose_memory([10, 9, 10], group_size=100, k=20, batch_size=48)
    assert need == 300 * (1000 + 20 * (100 + 10 * 64))
    monkeypatch.setenv("REMARK_MEMORY_LIMIT_GB", "0.001")
    capsys.readouterr()
    assert main(["diagnose", str(dataset), "--policy", "popularity", "--group-size", "100"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "remark diagnose: error: field '--group-size': one batch of 3 requests x G = 100 lists x K = 20 ranks "
        "(up to 10 responders) needs about 4.7 MB of memory, over the limit of 1.0 MB "
        "(REMARK_MEMORY_LIMIT_GB=0.001) (lower --group-size or --batch-size (one batch is held at a time), "
        "or set REMARK_MEMORY_LIMIT_GB to allow more)"
    )
    # what a new user typed: refused in a second, not killed by the kernel
    monkeypatch.setenv("REMARK_MEMORY_LIMIT_GB", "2")
    assert main(["diagnose", str(dataset), "--policy", "popularity", "--group-size", "100000"]) == 2
    assert (
        "G = 100000 lists x K = 20 ranks (up to 10 responders) needs about 4.7 GB of memory, over the "
        "limit of 2.0 GB (REMARK_MEMORY_LIMIT_GB=2)" in capsys.readouterr().err
    )
    monkeypatch.setenv("REMARK_MEMORY_LIMIT_GB", "lots")
    assert main(["diagnose", str(dataset), "--policy", "popularity"]) == 2
    assert "field 'REMARK_MEMORY_LIMIT_GB': REMARK_MEMORY_LIMIT_GB='lots' is not a positive number" in (
        capsys.readouterr().err
    )
