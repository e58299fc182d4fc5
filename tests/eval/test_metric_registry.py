"""The metric registry (``eval.metric_registry``) is the one list of metrics: the values, the order of the
reports, the command line's choices, the trainer's validation names and docs/metrics.md's table read it."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from eval.metric_registry import (
    METRIC_REGISTRY,
    METRICS,
    VALIDATION_METRICS,
    CutCounts,
    metric,
    metric_rank,
    metrics_table_markdown,
    validation_ks,
)
from eval.metrics import metrics_at_k
from eval.report import _metric_order
from eval.views import VIEWS, validation_metric_names

REPO = Path(__file__).resolve().parents[2]


def test_each_entrys_value_by_hand():
    # two rows at k = 4: hits at ranks 2 and 4 of |T| = 3; no hit of |T| = 1
    d = 1 / np.log2(np.arange(2, 6))
    counts = CutCounts(
        k=4,
        hits=np.array([2.0, 0.0]),
        n_targets=np.array([3.0, 1.0]),
        first=np.array([1.0, 0.0]),
        dcg=np.array([d[1] + d[3], 0.0]),
        idcg=np.array([d[:3].sum(), d[0]]),
    )
    want = {
        "recall": [2 / 3, 0.0],
        "ndcg": [(d[1] + d[3]) / d[:3].sum(), 0.0],
        "precision": [0.5, 0.0],
        "hit": [1.0, 0.0],
        "mrr": [0.5, 0.0],
    }
    for name, values in want.items():
        np.testing.assert_allclose(metric(name).value(counts), values)


def test_metrics_at_k_computes_every_registered_entry_in_registry_order():
    hits = np.array([[0, 1, 0, 1]], dtype=bool)
    out = metrics_at_k(hits, np.array([3]), ks=[4])
    assert list(out) == [f"{m}@4" for m in METRICS]
    assert out["mrr@4"][0] == pytest.approx(0.5) and out["recall@4"][0] == pytest.approx(2 / 3)


def test_names_are_unique_and_unknown_ones_are_refused():
    assert len(set(METRICS)) == len(METRIC_REGISTRY)
    assert all(re.fullmatch(r"[a-z_]+", m) for m in METRICS)  # "name@k" keys split on "@" and "/"
    with pytest.raises(ValueError, match="unknown metric 'nope'; valid: " + ", ".join(METRICS)):
        metric("nope")


def test_reports_order_by_the_registry_and_put_an_unregistered_metric_last():
    shuffled = [f"{m}@{k}" for k in (10, 5) for m in reversed(METRICS)] + ["zz@5"]
    assert _metric_order(shuffled) == [f"{m}@{k}" for m in METRICS for k in (5, 10)] + ["zz@5"]
    assert metric_rank("zz") == len(METRICS)


def test_the_command_line_offers_the_registry():
    from remark.cli.eval.flags import METRIC_NAMES

    assert list(METRICS) == METRIC_NAMES


def test_validation_logs_the_validated_entries_at_its_cutoffs_on_every_view():
    assert tuple(m.name for m in METRIC_REGISTRY if m.validated) == VALIDATION_METRICS
    assert validation_ks(20) == (5, 10, 20) and validation_ks(3) == (3,) and validation_ks(12) == (5, 10, 12)
    names = validation_metric_names(10)
    assert len(names) == 2 * len(VALIDATION_METRICS) * 2 * len(VIEWS)
    assert "eval/recall@10/union" in names and "sampled/ndcg@5/per_responder" in names


def test_docs_metrics_md_holds_the_registrys_table():
    text = (REPO / "docs" / "metrics.md").read_text()
    block = re.search(r"<!-- metrics:start[^>]*-->\n(.*?)\n<!-- metrics:end -->", text, re.S)
    assert block is not None, "docs/metrics.md lost its metrics:start / metrics:end markers"
    assert block.group(1) == metrics_table_markdown()
