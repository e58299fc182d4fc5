"""`remark eval compare --lists` and `remark eval steps|curves --metric` with the names reports use."""

from __future__ import annotations

import json

import polars as pl
import pytest

from catalog.io.outputs import OUTPUT_MARKER
from remark.cli.main import main
from tests.eval.test_steps import KEY, write_run

CI = ["--ci-method", "percentile", "--resamples", "200"]
UNION1 = "eval/recall@1/union"


def eval_dir(root, greedy, sampled=None):
    """An `eval run` output dir: per-request greedy (and sampled) union recall@1, metrics.json settings."""
    root.mkdir(parents=True)
    ids = [f"r{i}" for i in range(len(greedy))]
    pl.DataFrame({"request_id": ids, UNION1: greedy}).write_parquet(root / "per_request.parquet")
    settings = {"compact": True, "grounding": {"used": {"match_mode": "fuzzy", "year_tolerance": 2}}}
    metrics = {"n_requests": len(greedy), "settings": {**settings, "lists": "greedy"}}
    if sampled is not None:
        pl.DataFrame({"request_id": ids, UNION1: sampled}).write_parquet(root / "per_request_sampled.parquet")
        metrics["sampled"] = {"settings": {**settings, "lists": "4 samples at temperature 1.0"}}
    (root / "metrics.json").write_text(json.dumps(metrics))
    (root / OUTPUT_MARKER).write_text(json.dumps({"kind": "eval-run"}))  # as atomic_dir marks it
    return root


def compare(capsys, a, b, *flags):
    argv = ["eval", "compare", str(a), str(b), "--k", "1", "--metrics", "recall", *CI, *flags]
    code = main(argv)
    return code, capsys.readouterr()


def test_compare_says_which_lists_and_reads_the_sampled_ones_on_request(tmp_path, capsys):
    a = eval_dir(tmp_path / "a", greedy=[0.5, 0.5, 0.5, 0.5], sampled=[1.0, 1.0, 0.0, 0.0])
    b = eval_dir(tmp_path / "b", greedy=[0.5, 0.5, 0.5, 0.5], sampled=[0.0, 0.0, 0.0, 0.0])
    code, out = compare(capsys, a, b)
    assert code == 0
    assert out.out.startswith(f"comparing greedy lists ({a / 'per_request.parquet'})")
    assert f"with greedy lists ({b / 'per_request.parquet'})" in out.out
    code, out = compare(capsys, a, b, "--json")
    greedy = json.loads(out.out)
    assert greedy["lists"] == "greedy" and greedy["union"]["recall@1"]["mean"] == pytest.approx(0.0)
    assert "comparing greedy lists" in out.err
    code, out = compare(capsys, a, b, "--lists", "sampled", "--json")
    sampled = json.loads(out.out)
    assert code == 0 and sampled["lists"] == "sampled"
    assert sampled["union"]["recall@1"]["mean"] == pytest.approx(0.5)  # (1 + 1 + 0 + 0) / 4 - 0
    assert sampled["compared"]["a"] == f"sampled lists ({a / 'per_request_sampled.parquet'})"


def test_compare_refuses_what_it_cannot_compare(tmp_path, capsys):
    a = eval_dir(tmp_path / "a", greedy=[0.5, 0.5], sampled=[1.0, 0.0])
    greedy_only = eval_dir(tmp_path / "g", greedy=[0.5, 0.5])
    code, out = compare(capsys, a, greedy_only, "--lists", "sampled")
    assert code == 2 and "Traceback" not in out.err
    assert "no per_request_sampled.parquet here (sampled lists)" in out.err and "--num-samples" in out.err
    other = eval_dir(tmp_path / "o", greedy=[0.5, 0.5])
    meta = json.loads((other / "metrics.json").read_text())
    meta["settings"]["grounding"]["used"]["year_tolerance"] = 0
    (other / "metrics.json").write_text(json.dumps(meta))
    code, out = compare(capsys, a, other)
    assert code == 2 and "different grounding" in out.err
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"request_id": "r0", "recommendations": []}\n')
    code, out = compare(capsys, preds, preds, "--lists", "sampled")
    assert code == 2 and "field '--lists'" in out.err


@pytest.fixture
def runs(tmp_path):
    """Two training runs with greedy logs at the root and sampled logs under sampled/ (the library's layout)."""
    base, run = tmp_path / "base", tmp_path / "run"
    write_run(base, {0: [0.0, 0.1, 0.1, 0.2], 100: [0.1, 0.2, 0.2, 0.3], 200: [0.2, 0.3, 0.3, 0.4]})
    write_run(run, {0: [0.0, 0.1, 0.1, 0.2], 50: [0.1, 0.2, 0.3, 0.2], 100: [0.3, 0.4, 0.5, 0.4]})
    # sampled: the run reaches the baseline's step-200 value (0.3) at step 100 exactly
    write_run(base / "sampled", {0: [0.0, 0.0, 0.0, 0.0], 200: [0.3, 0.3, 0.3, 0.3]})
    write_run(run / "sampled", {0: [0.0, 0.0, 0.0, 0.0], 100: [0.3, 0.3, 0.3, 0.3]})
    return run, base


def steps(capsys, run, base, metric):
    argv = ["eval", "steps", "--run", str(run), "--baseline", str(base), "--metric", metric, *CI, "--json"]
    code = main(argv)
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else out.err)


def test_steps_accepts_the_report_and_eval_log_names(runs, capsys):
    run, base = runs
    code, greedy = steps(capsys, run, base, KEY)
    assert code == 0 and greedy["fraction"] == pytest.approx(0.375)
    code, bare = steps(capsys, run, base, KEY.removeprefix("eval/"))
    assert code == 0 and bare["fraction"] == greedy["fraction"]
    code, sampled = steps(capsys, run, base, "sampled/recall@20/union")  # the demo report's name
    assert code == 0 and sampled["fraction"] == pytest.approx(0.5)
    assert sampled["runs"] == {"run": str(run / "sampled"), "baseline": str(base / "sampled")}
    assert sampled["metric"] == KEY  # the key in <run>/sampled/eval_log.jsonl
    for r, b in ((run / "sampled", base / "sampled"), (run / "sampled", base)):  # with or without /sampled
        code, again = steps(capsys, r, b, "sampled/recall@20/union")
        assert code == 0 and again["fraction"] == sampled["fraction"]
    code, direct = steps(capsys, run / "sampled", base / "sampled", KEY)
    assert code == 0 and direct["fraction"] == sampled["fraction"]


def test_steps_lists_the_logged_metrics_on_a_miss(runs, capsys):
    run, base = runs
    code, err = steps(capsys, run, base, "sampled/recall@5/per_responder")
    assert code == 2 and "Traceback" not in err
    assert "metric 'sampled/recall@5/per_responder' is not logged" in err
    logged = err.split("logged: ", 1)[1]
    assert logged.startswith(", ".join(f"eval/{k}" for k in ("recall@20/per_responder", "recall@20/union")))
    assert "sampled/recall@20/per_responder, sampled/recall@20/union" in logged
    code, err = steps(capsys, run, base, "recall")
    assert code == 2 and "'recall' is not a metric name" in err and "sampled/recall@5/per_responder" in err
    code, err = steps(capsys, run / "nowhere", base, KEY)
    assert code == 2 and "Traceback" not in err
    png = run.parent / "c.png"
    argv = ["eval", "curves", str(run), str(base), "--metric", "sampled/recall@20/union", "--out", str(png)]
    assert main([*argv, *CI]) == 0 and png.read_bytes()[:4] == b"\x89PNG"
