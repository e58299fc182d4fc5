"""The CRS protocol through ``remark eval``: MRR/hit and the four slot filters by hand, ``--k`` from 1 to 50,
``--filters`` in score, compare and the markdown report (docs/metrics.md)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from eval import metrics
from eval.views import ALL_VIEWS, VIEWS
from remark.cli import eval as cli_eval
from remark.cli.main import main

CI = ["--ci-method", "percentile", "--resamples", "200"]
# tiny_dataset (tests/eval/conftest.py): r1 seen Contact, responders {Arrival, Interstellar}, {Arrival, Moon};
# r2 {Matrix}, {Blade Runner, Inception}, {Inception}; r3 {Annihilation}; r4 seen Moon, {Arrival, Contact},
# {Interstellar}. Eight responder rows.
PREDS = [
    # Contact is seen, the two next lines ground to nothing (no catalog item near 1950), then Arrival
    {
        "request_id": "r1",
        "recommendations": ["Contact (1997)", "Zzzq Xxwv (1950)", "Qqqz Vvwx (1950)", "Arrival (2016)"],
    },
    {"request_id": "r2", "recommendations": ["Inception (2010)"]},
    {"request_id": "r3", "recommendations": []},
    {"request_id": "r4", "recommendations": ["Moon (2009)", "Interstellar (2014)"]},
]
# Rank of Arrival in r1 and of Interstellar in r4, per filter (by hand, docs/metrics.md's rule):
RANKS = {
    "drop_ooc_seen": (1, 1),  # r1 [Arrival]; r4 [Interstellar]
    "drop_ooc": (2, 2),  # r1 [-(Contact), Arrival]; r4 [-(Moon), Interstellar]
    "drop_seen": (3, 1),  # r1 [-, -, Arrival]; r4 [Interstellar]
    "drop_none": (4, 2),  # r1 [-, -, -, Arrival]; r4 [-, Interstellar]
}


def _by_hand(name: str, k: int) -> tuple[float, float]:
    """(per-responder mrr@k, hit@k) over the 8 rows: r1 both rows find Arrival, r2 two of three rows
    find Inception at rank 1, r3 nothing, r4 one of two rows finds Interstellar."""
    r1, r4 = RANKS[name]
    rr = lambda rank: 1 / rank if rank <= k else 0.0  # noqa: E731
    mrr = (2 * rr(r1) + 2 * 1.0 + rr(r4)) / 8
    hit = (2 * (r1 <= k) + 2 + (r4 <= k)) / 8
    return mrr, hit


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_names_agree_with_the_library():
    assert list(metrics.METRICS) == cli_eval.METRIC_NAMES
    assert cli_eval.MAX_K == metrics.MAX_K
    assert list(metrics.FILTERS) == cli_eval.FILTER_NAMES
    assert list(ALL_VIEWS) == cli_eval.VIEW_NAMES and list(VIEWS) == cli_eval.DEFAULT_VIEWS
    assert cli_eval.filter_names(["all"]) == list(metrics.FILTERS)
    assert cli_eval.filter_names(["drop_none", "drop_ooc"]) == ["drop_ooc", "drop_none"]
    assert cli_eval.filter_names(None) == []


def test_score_filters_mrr_hit_by_hand(tiny_dataset, tmp_path, capsys):
    preds = _write(tmp_path / "p.jsonl", PREDS)
    out = _json(
        capsys,
        [
            "eval",
            "score",
            "--data",
            str(tiny_dataset),
            "--predictions",
            str(preds),
            "--k",
            "1",
            "4",
            "--metrics",
            "hit",
            "mrr",
            "--filters",
            "all",
            *CI,
            "--json",
        ],
    )
    for name in metrics.FILTERS:
        for k in (1, 4):
            mrr, hit = _by_hand(name, k)
            cell = out[f"per_responder/{name}"]
            assert cell[f"mrr@{k}"]["mean"] == pytest.approx(mrr), (name, k)
            assert cell[f"hit@{k}"]["mean"] == pytest.approx(hit), (name, k)
    # the plain keys are the primary filter (compaction on)
    assert out["per_responder"]["mrr@4"] == out["per_responder/drop_ooc_seen"]["mrr@4"]
    assert out["settings"]["filter"] == "drop_ooc_seen"
    assert out["settings"]["filters"] == list(metrics.FILTERS)
    # union r1 {Arrival, Interstellar, Moon}: mrr@4 = 1/rank of Arrival; r2 1; r3 0; r4 1/rank of Interstellar
    r1, r4 = RANKS["drop_seen"]
    assert out["union/drop_seen"]["mrr@4"]["mean"] == pytest.approx((1 / r1 + 1 + 0 + 1 / r4) / 4)
    # without --filters only the plain views are written
    plain = _json(
        capsys,
        [
            "eval",
            "score",
            "--data",
            str(tiny_dataset),
            "--predictions",
            str(preds),
            "--k",
            "4",
            *CI,
            "--json",
        ],
    )
    assert [v for v in plain if "/" in v] == []
    assert set(plain["per_responder"]) == {f"{m}@4" for m in metrics.METRICS}
    assert plain["per_responder"]["mrr@4"]["mean"] == pytest.approx(_by_hand("drop_ooc_seen", 4)[0])


def test_report_and_compare_show_the_filters(tiny_dataset, tmp_path, capsys):
    a = _write(tmp_path / "a.jsonl", PREDS)
    b = _write(tmp_path / "b.jsonl", [*PREDS[:3], {"request_id": "r4", "recommendations": ["Moon (2009)"]}])
    flags = ["--data", str(tiny_dataset), "--k", "2", "--metrics", "mrr", *CI]
    assert (
        main(
            [
                "eval",
                "score",
                "--predictions",
                str(a),
                *flags,
                "--filters",
                "all",
                "--out",
                str(tmp_path / "A"),
            ]
        )
        == 0
    )
    report = (tmp_path / "A" / "report.md").read_text()
    assert "Slot filters, per_responder (docs/metrics.md):" in report
    assert "| metric | drop_ooc_seen | drop_ooc | drop_seen | drop_none |" in report
    capsys.readouterr()
    assert (
        main(
            [
                "eval",
                "score",
                "--predictions",
                str(b),
                *flags,
                "--filters",
                "all",
                "--out",
                str(tmp_path / "B"),
            ]
        )
        == 0
    )
    capsys.readouterr()
    diff = _json(
        capsys,
        [
            "eval",
            "compare",
            str(tmp_path / "A"),
            str(tmp_path / "B"),
            *flags,
            "--filters",
            "drop_none",
            "--json",
        ],
    )
    # only r4 differs: Interstellar at rank 2 under drop_none in A (row u1), nothing in B
    assert diff["per_responder/drop_none"]["mrr@2"]["mean"] == pytest.approx(0.5 / 8)
    assert "per_responder/drop_ooc" not in diff and "per_responder" in diff


@pytest.mark.parametrize("bad", ["0", "-3", "51", "five"])
def test_k_outside_1_to_50_is_a_clear_error(tiny_dataset, tmp_path, capsys, bad):
    preds = _write(tmp_path / "p.jsonl", PREDS)
    assert (
        main(["eval", "score", "--data", str(tiny_dataset), "--predictions", str(preds), "--k", "5", bad])
        == 2
    )
    err = capsys.readouterr().err
    want = "is not an integer" if bad == "five" else "is out of range: must be >= 1 and <= 50"
    assert f"argument --k: '{bad}' {want}" in err
    assert "Traceback" not in err


def test_k_of_fifty_is_accepted(tiny_dataset, tmp_path, capsys):
    preds = _write(tmp_path / "p.jsonl", PREDS)
    argv = ["eval", "score", "--data", str(tiny_dataset), "--predictions", str(preds), "--k", "50"]
    out = _json(capsys, [*argv, "--metrics", "hit", "precision", *CI, "--json"])
    # the lists are shorter than 50: hit@50 is the hit of the whole list, precision counts 50 slots
    assert out["per_responder"]["hit@50"]["mean"] == pytest.approx(5 / 8)
    assert out["union"]["precision@50"]["mean"] == pytest.approx((1 + 1 + 0 + 1) / 50 / 4)


def test_run_writes_the_filter_variants_for_greedy_and_sampled_lists(
    tiny_model_dir, tiny_dataset, tmp_path, capsys
):
    out = tmp_path / "eval"
    argv = ["eval", "run", "--model", str(tiny_model_dir), "--data", str(tiny_dataset), "--out", str(out)]
    argv += ["--max-new-tokens", "12", "--num-samples", "2", "--k", "1", "3", "--engine", "transformers"]
    result = _json(capsys, [*argv, "--metrics", "mrr", "--filters", "drop_none", *CI, "--json"])
    for res in (result, result["sampled"]):
        assert set(res["per_responder/drop_none"]) == {"mrr@1", "mrr@3"}
        assert "per_responder/drop_ooc" not in res
    # rescoring the written predictions with the same filter reproduces the greedy variant
    rescored = _json(
        capsys,
        [
            "eval",
            "score",
            "--data",
            str(tiny_dataset),
            "--predictions",
            str(out / "predictions.jsonl"),
            "--k",
            "1",
            "3",
            "--metrics",
            "mrr",
            "--filters",
            "drop_none",
            *CI,
            "--json",
        ],
    )
    assert rescored["per_responder/drop_none"] == result["per_responder/drop_none"]
    assert "Slot filters, union (docs/metrics.md):" in (out / "report.md").read_text()


@pytest.mark.parametrize(
    ("key", "weight"),
    [("eval/mrr@20/per_responder/drop_none", "n_rows"), ("eval/recall@5/per_mention", "n_mentions")],
)
def test_steps_read_the_weights_of_variant_and_per_mention_keys(tmp_path, key, weight):
    from eval.steps import read_step_values

    (tmp_path / "eval").mkdir()
    pl.DataFrame({"request_id": ["b", "a"], key: [0.5, 1.0], weight: [3, 1]}).write_parquet(
        tmp_path / "eval" / "step_000010.parquet"
    )
    got = read_step_values(tmp_path, 10, key)
    assert got.columns == ["request_id", key, weight] and got[weight].to_list() == [1, 3]


def test_per_mention_view_through_the_cli(tiny_dataset, tmp_path, capsys):
    preds = _write(tmp_path / "p.jsonl", PREDS)
    out = _json(
        capsys,
        [
            "eval",
            "score",
            "--data",
            str(tiny_dataset),
            "--predictions",
            str(preds),
            "--k",
            "4",
            "--metrics",
            "recall",
            "mrr",
            "--views",
            "per_mention",
            "--filters",
            "drop_none",
            *CI,
            "--json",
        ],
    )
    # 12 (responder, item) mentions: r1 Arrival x2 (rank 1, or 4 with drop_none), r2 Inception x2 (rank 1),
    # r4 Interstellar (rank 1, or 2 with drop_none); the other seven are missed
    assert out["counts"]["per_mention/n_rows"] == 12 and set(out) >= {"per_mention", "per_mention/drop_none"}
    assert "per_responder" not in out and "union" not in out
    assert out["per_mention"]["recall@4"]["mean"] == pytest.approx(5 / 12)
    assert out["per_mention"]["mrr@4"]["mean"] == pytest.approx(5 / 12)
    assert out["per_mention/drop_none"]["recall@4"]["mean"] == pytest.approx(5 / 12)
    assert out["per_mention/drop_none"]["mrr@4"]["mean"] == pytest.approx((2 * 0.25 + 2 + 0.5) / 12)
