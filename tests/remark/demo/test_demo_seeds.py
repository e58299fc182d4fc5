"""The demo report's verdict on across-seed intervals (``remark.demo.report.verdict``), on hand-made values,
and the demo's across-seed cells against ``remark eval compare`` with several runs per side.

The across-seed statistics themselves are ``eval.seeds`` (tests/eval/test_seeds.py).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import polars as pl
import pytest

from catalog.io.outputs import OUTPUT_MARKER
from remark.cli.main import main
from remark.demo import default_settings
from remark.demo.evaluation import VIEWS, across_seeds, per_seed_pairs
from remark.demo.report import headline_block, resolution, verdict


def test_verdict_needs_both_intervals_to_exclude_zero():
    def d(seeds, reqs):
        return {
            "seeds": {"ci_low": seeds[0], "ci_high": seeds[1]},
            "requests": {"ci_low": reqs[0], "ci_high": reqs[1]},
        }

    assert "resolved: A is ahead" in verdict(d((0.01, 0.05), (0.02, 0.04)), "A", "B")
    assert "resolved: B is ahead" in verdict(d((-0.05, -0.01), (-0.04, -0.02)), "A", "B")
    text = verdict(d((-0.02, 0.08), (0.01, 0.05)), "A", "B")
    assert "not resolved" in text and "over seeds" in text and "over requests" not in text
    text = verdict(d((0.01, 0.08), (-0.01, 0.05)), "A", "B")
    assert "not resolved" in text and "over requests" in text
    assert "not resolved" in verdict(d((None, None), (0.01, 0.05)), "A", "B")
    one = d((None, None), (0.01, 0.05))
    one["seeds"]["n"] = 1  # one RL seed: the request interval alone, and the report says what it leaves out
    assert "resolved: A is ahead" in verdict(one, "A", "B") and resolution(one) == 1
    assert "training variance is not covered" in verdict(one, "A", "B")
    one["requests"]["ci_low"] = -0.01
    assert verdict(one, "A", "B") == "**not resolved** (the 95% interval over requests contains 0)"
    assert resolution(one) == 0


def test_resolved_has_one_meaning_in_the_headline_and_the_verdict():
    """``headline_block``'s ``resolved`` is ``resolution``: with several seeds a request interval that excludes 0
    is not enough when the seed interval contains it."""
    diff = {
        "seeds": {"n": 3, "ci_low": -0.01, "ci_high": 0.05, "values": [0.01, 0.02, 0.03]},
        "requests": {"mean": 0.02, "ci_low": 0.01, "ci_high": 0.03},
    }
    assert resolution(diff) == 0 and "not resolved" in verdict(diff, "A", "B")
    cell = {"requests": {"mean": 0.1}}
    summary = {
        "settings": {"validation_samples": 4, "k": 10, "data": "protoqa"},
        "across_seeds": {
            "models": {
                "remark": {"sampled": {"per_responder": cell}},
                "rank_grpo": {"sampled": {"per_responder": cell}},
            },
            "paired": {"remark_vs_rank_grpo": {"sampled": {"per_responder": diff}}},
        },
        "test": {"sft": {"greedy": {"n_requests": 40}}},
        "data": {"description": "x"},
    }
    head = headline_block(summary)
    assert head["resolved"] is False and "not resolved" in head["sentence"]
    diff["seeds"]["ci_low"] = 0.005
    assert headline_block(summary)["resolved"] is True and resolution(diff) == 1


def test_the_demo_across_seed_cells_are_what_eval_compare_prints(tmp_path, capsys):
    """The demo's across-seed differences (``evaluation.across_seeds``) and ``remark eval compare A1 A2 A3
    --vs B1 B2 B3`` on the same eval folders give the same numbers (random tables, BCa)."""
    rng = np.random.default_rng(5)
    s = dataclasses.replace(default_settings("synthetic"), ci_resamples=199, seed=3, rl_seeds=(0, 1, 2))
    ids = [f"q{i:02d}" for i in range(30)]
    n_rows = rng.integers(1, 5, size=30)
    names = ["sft", *(f"{m}-seed{x}" for x in s.rl_seeds for m in ("remark", "rank_grpo"))]
    for name in names:
        root = tmp_path / name
        root.mkdir()
        for table in ("per_request.parquet", "per_request_sampled.parquet"):
            columns = {
                f"eval/recall@{s.k}/{v}": rng.random(30) * (1.5 if "remark" in name else 1) for v in VIEWS
            }
            pl.DataFrame({"request_id": ids, "n_rows": n_rows, **columns}).write_parquet(root / table)
        settings = {"compact": True}
        (root / "metrics.json").write_text(
            json.dumps({"n_requests": 30, "settings": settings, "sampled": {"settings": settings}})
        )
        (root / OUTPUT_MARKER).write_text(json.dumps({"kind": "eval-run"}))
    pairs = per_seed_pairs(tmp_path, s)
    across = across_seeds(tmp_path, s, pairs)["paired"]
    for pair, (a, b) in (
        ("remark_vs_rank_grpo", ("remark", "rank_grpo")),
        ("remark_vs_sft", ("remark", "sft")),
    ):
        runs_b = ["sft"] if b == "sft" else [f"{b}-seed{x}" for x in s.rl_seeds]
        argv = ["eval", "compare", *(str(tmp_path / f"{a}-seed{x}") for x in s.rl_seeds), "--vs"]
        argv += [*(str(tmp_path / r) for r in runs_b), "--k", str(s.k), "--resamples", "199", "--seed", "3"]
        for lists in ("sampled", "greedy"):
            assert main([*argv, "--lists", lists, "--json"]) == 0
            printed = json.loads(capsys.readouterr().out)
            for view in VIEWS:
                got, cell = printed[view][f"recall@{s.k}"], across[pair][lists][view]
                assert got["seeds"] == cell["seeds"], (pair, lists, view)
                assert got["requests"] == pytest.approx(cell["requests"], rel=1e-12, abs=1e-15)
                assert got["requests"]["ci_low"] < got["requests"]["mean"] < got["requests"]["ci_high"]
