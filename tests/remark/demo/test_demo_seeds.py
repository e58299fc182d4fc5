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


def _figures(resolved, n=3):
    """An ``eval.verdicts.verdict`` dict with the figures the report prints."""
    return {
        "n_seeds": n,
        "resolved": resolved,
        "mean": 0.02,
        "percentile": {"ci_low": 0.001, "ci_high": 0.04},
        "sign_flip": {"p": 0.012},
        "wins": 30,
        "ties": 80,
        "losses": 13,
        "macro_mean": 0.015,
        "top_influence": {"share": 0.6},
    }


def test_verdict_reads_the_one_rule_and_prints_its_figures():
    def d(seeds, verdict_figures=None, n=3):
        out = {"seeds": {"n": n, "ci_low": seeds[0], "ci_high": seeds[1]}, "requests": {}}
        if verdict_figures is not None:
            out["verdict"] = verdict_figures
        return out

    text = verdict(d((0.01, 0.05), _figures(1)), "A", "B")
    assert text.startswith("**resolved: A is ahead**") and "p = 0.012" in text and "30 / 80 / 13" in text
    assert "percentile interval +2.00 [+0.10, +4.00]" in text and "carry 60%" in text
    assert verdict(d((-0.05, -0.01), _figures(-1)), "A", "B").startswith("**resolved: B is ahead**")
    assert verdict(d((-0.02, 0.08), _figures(0)), "A", "B").startswith("**not resolved**")
    # fewer than three seeds: the figures, and no verdict, whatever the intervals say
    assert verdict(d((0.01, 0.05), _figures(None, n=1), n=1), "A", "B").startswith("**no verdict**")
    assert resolution(d((0.01, 0.05), _figures(None, n=2), n=2)) is None
    # a view without the verdict figures: the seed interval, with the same seed count rule
    assert resolution(d((0.01, 0.05))) == 1 and resolution(d((-0.01, 0.05))) == 0
    assert resolution(d((0.01, 0.05), n=2)) is None


def test_resolved_has_one_meaning_in_the_headline_and_the_verdict():
    """``headline_block``'s ``resolved`` is ``resolution``, which is ``eval.verdicts.verdict``'s rule."""
    diff = {
        "seeds": {"n": 3, "ci_low": -0.01, "ci_high": 0.05, "values": [0.01, 0.02, 0.03]},
        "requests": {"mean": 0.02, "ci_low": 0.01, "ci_high": 0.03},
        "verdict": _figures(0),
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
    assert head["resolved"] is False and head["sentence"].endswith("**not resolved**.")
    assert "sign-flip test p = 0.012" in head["sentence"] and "ahead on 30 questions" in head["sentence"]
    diff["verdict"] = _figures(1)
    head = headline_block(summary)
    assert head["resolved"] is True and head["verdict"] == "resolved: ReMaRk ahead" and resolution(diff) == 1
    diff["verdict"] = _figures(None, n=2)
    assert headline_block(summary)["resolved"] is None


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
    # no flagged requests: the headline cell says so, and only the headline pair has the key
    for lists in ("sampled", "greedy"):
        assert across["remark_vs_rank_grpo"][lists]["per_responder"]["without_outliers"] is None
        assert "without_outliers" not in across["remark_vs_sft"][lists]["per_responder"]
        assert "without_outliers" not in across["remark_vs_rank_grpo"][lists]["union"]
    _check_without_outliers(tmp_path, s, pairs, across)


def _check_without_outliers(tmp_path, s, pairs, across):
    """Flagged q03 and q17 (and an id no table holds): ``without_outliers`` is ``eval.seeds``'
    ``pooled_difference`` and ``eval.verdicts.verdict`` on the tables less those two requests; every
    other figure is unchanged."""
    from eval.bootstrap import BootstrapConfig
    from eval.seeds import pooled_difference
    from eval.verdicts import request_differences
    from eval.verdicts import verdict as eval_verdict
    from eval.views import weighted_means

    flagged = across_seeds(tmp_path, s, pairs, flagged=["q17", "q03", "absent"])["paired"]
    ci = BootstrapConfig(n_resamples=s.ci_resamples, seed=s.seed)
    key = f"eval/recall@{s.k}/per_responder"
    kept = ~pl.col("request_id").is_in(["q03", "q17"])
    for lists, table in (("sampled", "per_request_sampled.parquet"), ("greedy", "per_request.parquet")):
        cell = flagged["remark_vs_rank_grpo"][lists]["per_responder"]
        w = cell.pop("without_outliers")
        before = across["remark_vs_rank_grpo"][lists]["per_responder"]
        assert cell == {k: v for k, v in before.items() if k != "without_outliers"}
        assert (w["n_removed"], w["removed"]) == (2, ["q03", "q17"]) and "10 MAD" in w["rule"]
        fa = [pl.read_parquet(tmp_path / f"remark-seed{x}" / table).filter(kept) for x in s.rl_seeds]
        fb = [pl.read_parquet(tmp_path / f"rank_grpo-seed{x}" / table).filter(kept) for x in s.rl_seeds]
        assert all(f.height == 28 for f in fa + fb)
        assert w["requests"] == pooled_difference(fa, fb, key, ci)
        assert w["requests"] != cell["requests"]
        per_seed = [weighted_means(a, [key])[key] - weighted_means(b, [key])[key] for a, b in zip(fa, fb)]
        assert w["seeds"]["values"] == pytest.approx(per_seed, rel=1e-12)
        d_SR, w_R = request_differences(fa, fb, key)
        expected = eval_verdict(
            d_SR, w_R, per_seed, config=ci, names=("ReMaRk", "Rank-GRPO"), requests=w["requests"]
        )
        assert w["verdict"] == expected
    assert flagged["remark_vs_sft"] == across["remark_vs_sft"]


def _report_summary(without):
    """The smallest summary ``report._headline`` reads, the headline cell with ``without_outliers`` set to
    ``without`` (the key left out when it is ``...``)."""
    seeds = {"n": 3, "values": [0.01, 0.02, 0.03], "sd": 0.01, "ci_low": 0.005, "ci_high": 0.035}
    diff = {
        "seeds": seeds,
        "requests": {"mean": 0.02, "ci_low": 0.01, "ci_high": 0.03},
        "verdict": _figures(1),
    }
    if without is not ...:
        diff["without_outliers"] = without
    return {
        "settings": {"k": 10},
        "across_seeds": {"paired": {"remark_vs_rank_grpo": {"sampled": {"per_responder": diff}}}},
        "test": {"sft": {"greedy": {"n_requests": 123}}},
        "validation": {
            "sampled": {
                "curves": {"remark": {"pooled": {"mean": [0.1]}}},
                "pooled": {"remark_reaches_rank_grpo": {}},
                "per_seed": {},
            }
        },
    }


def test_the_report_gives_the_headline_without_the_flagged_requests():
    from remark.demo.report import _headline

    without = {
        "n_removed": 2,
        "removed": ["dev-scraped_q3473", "dev-scraped_q4013"],
        "rule": "the rule",
        "seeds": {"n": 3, "values": [0.0, 0.01, 0.02], "sd": 0.01, "ci_low": -0.01, "ci_high": 0.03},
        "requests": {"mean": 0.01, "ci_low": -0.005, "ci_high": 0.025},
        "verdict": _figures(0),
    }
    lines = _headline(_report_summary(without))
    at = next(i for i, line in enumerate(lines) if line.startswith("- Sampled lists"))
    assert lines[at + 2] == (
        "- Without the 2 flagged test requests (dev-scraped_q3473, dev-scraped_q4013; rule: the rule), sampled "
        "lists: ReMaRk - Rank-GRPO +1.00 [-0.50, +2.50] points; "
        + verdict(without, "ReMaRk", "Rank-GRPO")
        + "."
    )
    assert "**not resolved**" in lines[at + 2]
    for absent in (None, ...):
        text = "\n".join(_headline(_report_summary(absent)))
        assert "- Sampled lists" in text and "Without the" not in text
