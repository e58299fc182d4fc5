"""``remark eval compare A1 A2 A3 --vs B1 B2 B3``: several runs per side, the seed spread beside the request
bootstrap, checked against numpy / scipy computed here; and what it refuses."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest
from scipy import stats

from catalog.io.outputs import OUTPUT_MARKER
from remark.cli.main import main
from tests.eval.test_cli import PREDS, write_preds

CI = ["--ci-method", "percentile", "--resamples", "200"]
RESP, UNION = "eval/recall@1/per_responder", "eval/recall@1/union"
IDS = ["r1", "r2", "r3", "r4", "r5", "r6"]
N_ROWS = np.array([1, 2, 3, 1, 2, 1])
#: per-responder recall@1 per request, one list per run (seed)
A = [
    [1.0, 0.5, 0.0, 1.0, 0.5, 0.0],
    [0.5, 0.5, 1 / 3, 0.0, 1.0, 1.0],
    [1.0, 0.0, 2 / 3, 1.0, 0.5, 0.0],
]
B = [
    [0.0, 0.5, 0.0, 0.0, 0.5, 0.0],
    [0.5, 0.0, 1 / 3, 0.0, 0.0, 1.0],
    [0.0, 0.5, 0.0, 1.0, 0.0, 0.0],
]


def eval_dir(root, per_responder, *, ids=IDS, year_tolerance=2, sampled=False):
    """An `eval run` output dir: per-request recall@1 (per responder with `n_rows`, union = its square)."""
    root.mkdir(parents=True)
    table = pl.DataFrame(
        {
            "request_id": ids,
            "n_rows": N_ROWS[: len(ids)],
            RESP: per_responder,
            UNION: [v * v for v in per_responder],
        }
    )
    table.write_parquet(root / "per_request.parquet")
    settings = {
        "compact": True,
        "grounding": {"used": {"match_mode": "fuzzy", "year_tolerance": year_tolerance}},
    }
    metrics = {"n_requests": len(ids), "settings": {**settings, "lists": "greedy"}}
    if sampled:
        table.write_parquet(root / "per_request_sampled.parquet")
        metrics["sampled"] = {"settings": {**settings, "lists": "4 samples at temperature 1.0"}}
    (root / "metrics.json").write_text(json.dumps(metrics))
    (root / OUTPUT_MARKER).write_text(json.dumps({"kind": "eval-run"}))
    return root


@pytest.fixture
def runs(tmp_path):
    a = [eval_dir(tmp_path / f"a{s}", v, sampled=True) for s, v in enumerate(A)]
    b = [eval_dir(tmp_path / f"b{s}", v, sampled=True) for s, v in enumerate(B)]
    return a, b


def compare(capsys, a, b, *flags):
    argv = ["eval", "compare", *map(str, a), "--vs", *map(str, b), "--k", "1", "--metrics", "recall"]
    code = main([*argv, *CI, *flags])
    return code, capsys.readouterr()


def weighted(values, key):
    w = N_ROWS if key == RESP else np.ones(len(IDS))
    v = np.asarray(values) if key == RESP else np.asarray(values) ** 2
    return w * v, w


def scipy_interval(a_runs, b_runs, key):
    """scipy.stats.bootstrap over request indices of the run-averaged A - B (the same seed and resamples)."""
    num_a, den_a = (sum(x) for x in zip(*(weighted(v, key) for v in a_runs), strict=True))
    num_b, den_b = (sum(x) for x in zip(*(weighted(v, key) for v in b_runs), strict=True))

    def diff(idx, axis=-1):
        return num_a[idx].sum(axis) / den_a[idx].sum(axis) - num_b[idx].sum(axis) / den_b[idx].sum(axis)

    res = stats.bootstrap(
        (np.arange(len(IDS)),),
        diff,
        n_resamples=200,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(0),
    )
    mean = num_a.sum() / den_a.sum() - num_b.sum() / den_b.sum()
    return mean, res.confidence_interval.low, res.confidence_interval.high


def test_three_runs_per_side_print_the_seed_spread_and_the_request_interval(runs, capsys):
    a, b = runs
    code, out = compare(capsys, a, b, "--json")
    assert code == 0
    got = json.loads(out.out)
    assert (
        got["n_seeds"] == 3 and got["n_requests"] == 6 and got["pairs"] == ["A1 - B1", "A2 - B2", "A3 - B3"]
    )
    assert got["compared"]["B2"] == f"greedy lists ({b[1] / 'per_request.parquet'})"
    cell = got["per_responder"]["recall@1"]
    # per pair, by hand (weights 1 2 3 1 2 1 over 10 rows): A 0.4, 0.55, 0.5; B 0.2, 0.25, 0.2
    per_seed = [c["mean"] for c in cell["per_seed"]]
    assert per_seed == pytest.approx([0.2, 0.3, 0.3])
    d = np.array([0.2, 0.3, 0.3])
    seeds = cell["seeds"]
    half = stats.t.ppf(0.975, 2) * d.std(ddof=1) / math.sqrt(3)
    assert seeds["mean"] == pytest.approx(0.8 / 3) and seeds["sd"] == pytest.approx(math.sqrt(3 / 900))
    assert (seeds["min"], seeds["max"]) == pytest.approx((0.2, 0.3))
    assert (seeds["ci_low"], seeds["ci_high"]) == pytest.approx((d.mean() - half, d.mean() + half))
    for key, view in ((RESP, "per_responder"), (UNION, "union")):
        mean, low, high = scipy_interval(A, B, key)
        reqs = got[view]["recall@1"]["requests"]
        assert (reqs["mean"], reqs["ci_low"], reqs["ci_high"]) == pytest.approx((mean, low, high), abs=1e-12)
        assert reqs["mean"] == pytest.approx(got[view]["recall@1"]["seeds"]["mean"])  # same weights each run
        for s in range(3):  # each pair's own request bootstrap
            mean, low, high = scipy_interval(A[s : s + 1], B[s : s + 1], key)
            pair = got[view]["recall@1"]["per_seed"][s]
            assert (pair["mean"], pair["ci_low"], pair["ci_high"]) == pytest.approx(
                (mean, low, high), abs=1e-12
            )
    # the text says the same numbers, in points
    code, out = compare(capsys, a, b)
    assert code == 0 and out.out.startswith(f"A1: greedy lists ({a[0] / 'per_request.parquet'})\n")
    text = out.out
    assert "## A - B over 3 pairs of runs (paired on 6 requests, points)" in text
    assert "95% Student t interval over the 3 pairs (2 df)" in text and "(percentile, 200 resamples" in text
    mean, low, high = scipy_interval(A, B, RESP)
    pairs = [
        f"{100 * p['mean']:.2f} [{100 * p['ci_low']:.2f}, {100 * p['ci_high']:.2f}]" for p in cell["per_seed"]
    ]
    row = (
        f"| recall@1 | 26.67 | [{100 * (d.mean() - half):.2f}, {100 * (d.mean() + half):.2f}] | "
        f"[{100 * low:.2f}, {100 * high:.2f}] | 5.77 | 20.00 to 30.00 | " + " | ".join(pairs) + " |"
    )
    per_responder = text.split("### per_responder")[1].split("###")[0]
    assert row in per_responder
    # --lists sampled reads every run's sampled table
    code, out = compare(capsys, a, b, "--lists", "sampled", "--json")
    sampled = json.loads(out.out)
    assert (
        code == 0 and sampled["compared"]["A3"] == f"sampled lists ({a[2] / 'per_request_sampled.parquet'})"
    )
    assert sampled["per_responder"] == got["per_responder"]


def test_one_baseline_run_is_paired_with_every_run(runs, capsys):
    a, b = runs
    code, out = compare(capsys, a, b[:1], "--json")
    assert code == 0
    got = json.loads(out.out)
    assert got["pairs"] == ["A1 - B", "A2 - B", "A3 - B"] and got["b"] == [str(b[0])]
    cell = got["per_responder"]["recall@1"]
    assert [c["mean"] for c in cell["per_seed"]] == pytest.approx([0.2, 0.35, 0.3])  # A - 0.2
    mean, low, high = scipy_interval(A, [B[0]] * 3, RESP)
    assert (
        cell["requests"]["mean"],
        cell["requests"]["ci_low"],
        cell["requests"]["ci_high"],
    ) == pytest.approx((mean, low, high), abs=1e-12)


def test_one_run_per_side_prints_what_it_did_and_says_the_interval_covers_requests(runs, capsys):
    a, b = runs
    plain = ["eval", "compare", str(a[0]), str(b[0]), "--k", "1", "--metrics", "recall", *CI]
    assert main(plain) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"comparing greedy lists ({a[0] / 'per_request.parquet'})")
    assert "| recall@1 | 20.00 [" in text  # per_responder 0.4 - 0.2
    assert (
        "CIs: 95% bootstrap over the 6 requests (percentile, 200 resamples, seed 0): they cover which "
        in text
    )
    assert "not what varies between training runs" in text
    code, out = compare(capsys, a[:1], b[:1])  # A --vs B is A B
    assert code == 0 and out.out == text
    assert main([*plain, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["a"] == str(a[0]) and got["per_responder"]["recall@1"]["mean"] == pytest.approx(0.2)
    assert got["ci"]["unit"] == "request" and "n_seeds" not in got


def test_several_runs_are_refused_when_they_cannot_be_paired_or_averaged(runs, tmp_path, capsys):
    a, b = runs
    code, out = compare(capsys, a, b[:2])
    assert code == 2 and "Traceback" not in out.err
    assert "field '--vs': 3 runs of A and 2 of B: run i of A is paired with run i of B" in out.err
    argv = ["eval", "compare", *map(str, a), "--k", "1", *CI]
    assert main(argv) == 2
    assert "3 runs given without --vs" in capsys.readouterr().err
    code, out = compare(capsys, [a[0], a[1], a[0]], b)
    assert code == 2 and f"{a[0]}: listed twice among the runs of A" in out.err
    elsewhere = eval_dir(tmp_path / "elsewhere", B[1], ids=[*IDS[:5], "r9"])
    code, out = compare(capsys, a, [b[0], elsewhere, b[2]])
    assert code == 2 and "B2 was scored on different requests than A1: 1 only in B2, 1 only in A1" in out.err
    other = eval_dir(tmp_path / "other", B[2], year_tolerance=0)
    code, out = compare(capsys, a, [b[0], b[1], other])
    assert code == 2 and "A1 and B3 were scored with different grounding" in out.err
    greedy_only = eval_dir(tmp_path / "greedy_only", A[1])
    code, out = compare(capsys, [a[0], greedy_only, a[2]], b, "--lists", "sampled")
    assert code == 2 and "no per_request_sampled.parquet here (sampled lists)" in out.err


def test_predictions_files_of_three_seeds_are_scored_and_paired(tiny_dataset, tmp_path, capsys):
    """The layout of tests/eval/test_cli.py: predictions files scored against the tiny dataset."""
    lists = {
        "a0": PREDS,
        "a1": [*PREDS[:3], {"request_id": "r4", "recommendations": ["Arrival (2016)"]}],
        "a2": [*PREDS[:1], {"request_id": "r2", "recommendations": ["The Matrix (1999)"]}, *PREDS[2:]],
        "b0": [*PREDS[:3], {"request_id": "r4", "recommendations": ["Moon (2009)"]}],
        "b1": [{"request_id": "r1", "recommendations": ["Moon (2009)"]}, *PREDS[1:]],
        "b2": PREDS,
    }
    paths = {name: write_preds(tmp_path / f"{name}.jsonl", rows) for name, rows in lists.items()}
    a, b = [paths[f"a{s}"] for s in range(3)], [paths[f"b{s}"] for s in range(3)]
    code, out = compare(capsys, a, b, "--data", str(tiny_dataset), "--json")
    assert code == 0
    got = json.loads(out.out)["per_responder"]["recall@1"]
    # recall@1 per responder row (8 rows; r1 [0.5, 0.5], r2 [0, 0.5, 1], r3 [0], r4 [0, 1] for PREDS):
    # a0 - b0: r4's rows 0 + 1 vs 0 + 0 (Moon is seen); a1 - b1: r4 [0.5, 0] vs [0, 1], r1 [0.5, 0.5] vs
    # [0, 0.5]; a2 - b2: r2 [1, 0, 0] vs [0, 0.5, 1]
    assert [c["mean"] for c in got["per_seed"]] == pytest.approx([1 / 8, 0.0, -0.5 / 8])
    assert got["seeds"]["mean"] == pytest.approx(0.5 / 8 / 3) == got["requests"]["mean"]
