"""eval.score: predictions file -> aligned, grounded, scored; bad input is an error or a counted warning."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from catalog.io.errors import InputError
from catalog.match import GroundingSettings
from catalog.table import Catalog
from data_prep.dataset import PooledDataset
from eval.bootstrap import BootstrapConfig
from eval.score import read_predictions, score_predictions

CFG = BootstrapConfig(method="percentile", n_resamples=200, seed=0)


def make_dataset() -> PooledDataset:
    catalog = Catalog.from_frame(
        pl.DataFrame(
            {
                "item_id": ["m1", "m2", "m3", "m4", "m5"],
                "title": ["Arrival", "The Matrix", "Moon", "Primer", "Contact"],
                "year": [2016, 1999, 2009, 2004, 1997],
            }
        )
    )
    ids = pl.List(pl.String)
    requests = pl.DataFrame(
        {
            "request_id": ["q1", "q2", "q3"],
            "seen": [["m5"], [], []],
            "responders": [[["m1", "m2"], ["m3"]], [["m4"]], [["m1"]]],
            "union": [["m1", "m2", "m3"], ["m4"], ["m1"]],
            "counts": [[1, 1, 1], [1], [1]],
            "split": ["test", "test", "train"],
        },
        schema={
            "request_id": pl.String,
            "seen": ids,
            "responders": pl.List(ids),
            "union": ids,
            "counts": pl.List(pl.UInt32),
            "split": pl.String,
        },
    )
    rows = pl.DataFrame(
        {
            "request_id": ["q1", "q1", "q2", "q3"],
            "responder_id": ["alice", "bob", "carol", "dan"],
            "responder_index": [0, 1, 0, 0],
        },
        schema_overrides={"responder_index": pl.UInt32},
    )
    meta = {"domain": "movie", "has_years": True, "grounding": GroundingSettings().to_dict()}
    return PooledDataset(requests, rows, catalog, meta)


def write(tmp_path: Path, rows: list) -> Path:
    p = tmp_path / "preds.jsonl"
    p.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return p


GOOD = [
    {
        "request_id": "q1",
        "recommendations": ["1. Arrival (2016)", "Contact (1997)", "Not A Movie (2000)", "Moon (2009)"],
    },
    {"request_id": "q2", "recommendations": ["Primer (2004)"], "extra": "ignored"},
    {"request_id": "q3", "recommendations": ["Arrival (2016)"]},
]


def test_predictions_outside_the_split_are_an_error_or_scored_with_split_all(tmp_path):
    preds = read_predictions(write(tmp_path, GOOD))
    with pytest.raises(
        InputError, match=r"1 of 3 predictions are for requests outside split 'test' \(train: 1\)"
    ) as err:
        score_predictions(make_dataset(), preds, split="test", ks=[1], metrics=["recall"], config=CFG)
    assert "--split all" in str(err.value) and "--on-other-split ignore" in str(err.value)
    result, scored = score_predictions(
        make_dataset(), preds, split="all", ks=[1], metrics=["recall"], config=CFG
    )
    assert result["n_requests"] == result["n_predictions"] == 3 and result["warnings"] == {}
    assert result["requests_by_split"] == {"test": 2, "train": 1} and result["settings"]["split"] == "all"
    assert scored.per_request["request_id"].to_list() == ["q1", "q2", "q3"]
    # q1 [Arrival] 1/3, q2 [Primer] 1, q3 [Arrival] 1
    assert result["union"]["recall@1"]["mean"] == pytest.approx((1 / 3 + 1 + 1) / 3)


def test_scores_by_hand_and_counts_other_split(tmp_path):
    result, scored = score_predictions(
        make_dataset(),
        read_predictions(write(tmp_path, GOOD)),
        split="test",
        ks=[1, 3],
        metrics=["recall"],
        config=CFG,
        on_other_split="ignore",
    )
    assert result["n_requests"] == 2
    # q1 compacted: [Arrival, Moon] (Contact seen, the unknown title ungrounded)
    assert result["per_responder"]["recall@1"]["mean"] == pytest.approx((0.25 * 2 + 1) / 3)
    assert result["per_responder"]["recall@3"]["mean"] == pytest.approx((0.75 * 2 + 1) / 3)
    assert result["union"]["recall@1"]["mean"] == pytest.approx((1 / 3 + 1) / 2)
    assert result["single_mention"]["recall@3"]["mean"] == pytest.approx((2 / 3 + 1) / 2)
    for cell in result["union"].values():
        assert set(cell) == {"mean", "ci_low", "ci_high"}
    assert result["warnings"] == {"other_split_ignored": 1}
    assert result["n_predictions"] == 3 and result["requests_by_split"] == {"test": 2}
    assert result["settings"]["compact"] is True
    assert result["settings"]["grounding"]["used"] == GroundingSettings().to_dict()
    assert (
        result["settings"]["grounding"]["overridden"] == {} and result["settings"]["grounding"]["notes"] == []
    )
    assert result["counts"]["n_seen_slots"] == 1 and result["counts"]["n_ungrounded_slots"] == 1
    assert scored.per_request["request_id"].to_list() == ["q1", "q2"]
    # the per-responder rows, named by the dataset's responder ids: alice {Arrival, The Matrix}, bob {Moon}
    rows = scored.per_row
    assert rows["responder_id"].to_list() == ["alice", "bob", "carol"] and set(rows["split"]) == {"test"}
    assert rows["eval/recall@1/per_responder"].to_list() == [0.5, 0.0, 1.0]
    assert rows["eval/recall@3/per_responder"].to_list() == [0.5, 1.0, 1.0]
    assert rows["eval/recall@3/per_responder"].mean() == pytest.approx(
        result["per_responder"]["recall@3"]["mean"]
    )
    json.dumps(result)  # serialisable as is


def test_no_compaction_and_exact_matching(tmp_path):
    rows = [{"request_id": "q1", "recommendations": ["the matrix (1999)", "Arrival (2016)"]}, GOOD[1]]
    preds = read_predictions(write(tmp_path, rows))
    fuzzy, _ = score_predictions(make_dataset(), preds, ks=[1], metrics=["recall"], config=CFG)
    exact, _ = score_predictions(
        make_dataset(), preds, ks=[1], metrics=["recall"], config=CFG, grounding={"match_mode": "exact"}
    )
    recorded = exact["settings"]["grounding"]
    assert recorded["used"]["match_mode"] == "exact" and recorded["dataset"]["match_mode"] == "fuzzy"
    assert recorded["overridden"] == {"match_mode": {"dataset": "fuzzy", "used": "exact"}}
    assert exact["warnings"] == {"grounding_overridden": 1}
    assert "match_mode='exact' (dataset: 'fuzzy')" in recorded["notes"][0]
    assert fuzzy["union"]["recall@1"]["mean"] == pytest.approx((1 / 3 + 1) / 2)
    # exact is verbatim (Rank-GRPO's matcher): lower-case "the matrix" does not ground, Arrival moves up
    assert exact["union"]["recall@1"]["mean"] == pytest.approx((1 / 3 + 1) / 2)
    assert exact["counts"]["n_ungrounded_slots"] == 1
    kept, _ = score_predictions(
        make_dataset(),
        preds,
        ks=[1],
        metrics=["recall"],
        config=CFG,
        grounding={"match_mode": "exact"},
        compact=False,
    )
    assert kept["union"]["recall@1"]["mean"] == pytest.approx((0 + 1) / 2)


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        (["{not json"], r"row 1: not valid JSON"),
        ([[1, 2]], r"row 1: each line must be a JSON object"),
        ([{"request_id": 3, "recommendations": []}], r"row 1, field 'request_id'"),
        ([{"request_id": "q1", "recommendations": "Arrival"}], r"row 1, field 'recommendations'"),
        (
            [GOOD[0], {"request_id": "q2", "recommendations": ["Moon (2009)", None]}],
            r"row 2, field 'recommendations\[1\]'",
        ),
        ([GOOD[0], GOOD[0]], r"row 2, field 'request_id': request 'q1' already has predictions on line 1"),
    ],
)
def test_malformed_files_name_line_and_field(tmp_path, rows, match):
    with pytest.raises(InputError, match=match):
        read_predictions(write(tmp_path, rows))


def test_unknown_and_missing_requests(tmp_path):
    ds = make_dataset()
    unknown = read_predictions(write(tmp_path, [*GOOD, {"request_id": "zz", "recommendations": ["Moon"]}]))
    with pytest.raises(InputError, match=r"row 4, field 'request_id': request 'zz' is not in the dataset"):
        score_predictions(ds, unknown, config=CFG)
    result, _ = score_predictions(
        ds, unknown, config=CFG, on_unknown="warn", on_other_split="ignore", ks=[1], metrics=["recall"]
    )
    assert result["warnings"] == {"other_split_ignored": 1, "unknown_ignored": 1}
    only_q1 = read_predictions(write(tmp_path, GOOD[:1]))
    with pytest.raises(InputError, match=r"1 of 2 requests have no prediction \(first: 'q2'\)"):
        score_predictions(ds, only_q1, config=CFG)
    result, _ = score_predictions(ds, only_q1, config=CFG, on_missing="empty", ks=[1], metrics=["recall"])
    assert result["warnings"] == {"missing_scored_empty": 1}
    assert result["union"]["recall@1"]["mean"] == pytest.approx((1 / 3 + 0) / 2)  # q2 counted as a miss
    with pytest.raises(InputError, match="no request in split 'valid'"):
        score_predictions(ds, only_q1, split="valid", config=CFG)


def test_empty_lists_and_empty_items_are_counted_and_scored(tmp_path):
    rows = [
        {"request_id": "q1", "recommendations": ["", "  ", "Arrival (2016)"]},
        {"request_id": "q2", "recommendations": []},
    ]
    preds = read_predictions(write(tmp_path, rows))
    result, _ = score_predictions(
        make_dataset(), preds, ks=[1, 3], metrics=["recall"], config=CFG, compact=False
    )
    assert result["warnings"] == {"empty_items": 2, "empty_lists": 1}
    assert result["union"]["recall@1"]["mean"] == 0.0
    assert result["union"]["recall@3"]["mean"] == pytest.approx((1 / 3 + 0) / 2)


def test_describe_lists_counts_lines_titles_and_grounded_items():
    from eval.run import describe_lists, lists_markdown

    completions = ["Here are some:\n1. Heat (1995)\n2. zzqx", "", "I'm not sure what you mean."]
    shape = describe_lists(completions, [["i1", None], [], [None]])
    assert shape["n_lists"] == 3 and shape["lists_without_lines"] == 1  # the preamble holds no rank
    assert shape["lines_per_list"] == pytest.approx(3 / 3) and shape["grounded_per_list"] == pytest.approx(
        1 / 3
    )
    assert shape["parsed_per_list"] == pytest.approx(3 / 3)  # every line read as a title, one grounded
    assert shape["examples"] == completions
    md = lists_markdown(shape, "What the greedy lists were")
    assert "1.00 lines, 1.00 with a title, 0.33 grounded to the catalog; 1 lists without a line" in md
