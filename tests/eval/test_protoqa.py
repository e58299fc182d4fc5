"""eval.protoqa: prediction formats, conversion, the official Max Answers@k; real dev set cross-check."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from catalog.io.errors import InputError
from catalog.match import GroundingSettings, Matcher
from catalog.normalize import normalize_title
from data_prep.dataset import load_dataset, write_dataset
from data_prep.pool import pool_threads
from data_prep.readers import read_protoqa
from eval.bootstrap import BootstrapConfig
from eval.protoqa import (
    convert_protoqa_predictions,
    max_answers_at_k,
    read_protoqa_clusters,
    read_protoqa_predictions,
)
from eval.score import read_predictions, score_predictions

SUN = [(38, ["umbrella"]), (36, ["sunscreen", "sun block"]), (14, ["sun hat"]), (5, ["sunglasses"])]


def test_max_answers_by_hand():
    # "hat" and "sun glasses" match nothing exactly; oracle at 3 = 38 + 36 + 14
    assert max_answers_at_k(["umbrella", "hat", "sun glasses"], SUN, 3) == pytest.approx(38 / 88)
    # one-to-one: a repeated answer scores its cluster once; preprocessing lower-cases and strips
    assert max_answers_at_k([" Umbrella", "umbrella", "SUN BLOCK"], SUN, 3) == pytest.approx(74 / 88)
    # only the first k predictions count; unnormalised = share of all answers
    assert max_answers_at_k(["hat", "sunglasses"], SUN, 1) == 0.0
    assert max_answers_at_k(["sunglasses"], SUN, 1, normalize=False) == pytest.approx(5 / 93)
    assert max_answers_at_k([], SUN, 3) == 0.0


def test_reads_both_prediction_shapes_and_converts(tmp_path):
    lines = tmp_path / "human.jsonl"
    lines.write_text('{"q1": ["a", "b"]}\n{"question_id": "q2", "ranked_answers": ["c"]}\n')
    whole = tmp_path / "gpt2.json"
    whole.write_text(json.dumps({"q1": ["a", ""], "q2": []}))
    assert read_protoqa_predictions(lines) == {"q1": ["a", "b"], "q2": ["c"]}
    assert read_protoqa_predictions(whole) == {"q1": ["a", ""], "q2": []}
    out = tmp_path / "preds.jsonl"
    assert convert_protoqa_predictions(whole, out) == 2
    preds = read_predictions(out)
    assert preds.request_ids == ["q1", "q2"] and preds.recommendations == [["a", ""], []]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"q1": ["a"]}\n{"q2": ["b", 3]}\n')
    with pytest.raises(InputError, match=r"row 2, field 'q2\[1\]'"):
        read_protoqa_predictions(bad)


@pytest.mark.data
def test_dev_set_per_responder_recall_matches_the_evaluator_on_raw_answers(data_dir, tmp_path):
    """Our per-responder recall@k (raw answers as items, exact, positions kept) counts the respondents whose
    answer is among the first k predictions: the official evaluator's unnormalised Max Answers@k with one
    cluster per raw answer. Equal per question, except where our normalisation differs on purpose (quotes
    stripped from predictions; raw strings that fold to one catalog id, e.g. "mac & cheese")."""
    dev = data_dir / "protoqa" / "dev"
    threads = read_protoqa(dev / "dev.crowdsourced.jsonl", items="raw")
    threads.frame = threads.frame.with_columns(pl.lit("test").alias("split"))
    matcher = Matcher(threads.catalog, GroundingSettings(match_mode="exact"))
    write_dataset(
        tmp_path / "pqa",
        pool_threads(threads, matcher),
        threads.catalog,
        threads.meta,
        grounding=matcher.settings,
    )
    ds = load_dataset(tmp_path / "pqa")
    convert_protoqa_predictions(dev / "dev.predictions.human.jsonl", tmp_path / "human.jsonl")
    cfg = BootstrapConfig(method="percentile", n_resamples=200)
    result, scored = score_predictions(
        ds,
        read_predictions(tmp_path / "human.jsonl"),
        ks=[1, 10],
        metrics=["recall"],
        compact=False,
        config=cfg,
    )
    assert result["n_requests"] == 52 and result["per_responder"]["recall@10"]["mean"] > 0.2

    raw = {}
    for line in (dev / "dev.crowdsourced.jsonl").read_text().splitlines():
        obj = json.loads(line)
        raw[obj["metadata"]["id"]] = obj["answers"]["raw"]
    keys: dict[str, set[str]] = {}
    for answers in raw.values():
        for a in answers:
            keys.setdefault(normalize_title(a), set()).add(a)
    folded = {k for k, strings in keys.items() if len(strings) > 1}
    preds = read_protoqa_predictions(dev / "dev.predictions.human.jsonl")
    clusters = {q: [(c, [a]) for a, c in answers.items()] for q, answers in raw.items()}
    pr = scored.per_request
    compared = 0
    for q, value, n_rows in zip(pr["request_id"], pr["eval/recall@10/per_responder"], pr["n_rows"]):
        if any('"' in p for p in preds[q][:10]) or any(normalize_title(a) in folded for a in raw[q]):
            continue
        hits = max_answers_at_k(preds[q], clusters[q], 10, normalize=False) * sum(raw[q].values())
        assert value * n_rows == pytest.approx(hits), q
        compared += 1
    assert compared >= 40, compared  # 43 of 52 at the time of writing
    assert np.isfinite(result["per_responder"]["recall@10"]["ci_low"])


@pytest.mark.data
def test_reads_the_dev_clusters(data_dir):
    q = read_protoqa_clusters(data_dir / "protoqa" / "dev" / "dev.crowdsourced.jsonl")
    assert len(q) == 52
    assert sum(c for c, _ in q["r1q1"]) == 98 and q["r1q1"][0] == (35, q["r1q1"][0][1])
