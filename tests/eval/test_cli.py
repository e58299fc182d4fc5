"""``remark eval ...`` end to end: score (hand-computed), run on the tiny model, compare, steps, curves."""

from __future__ import annotations

import json

import polars as pl
import pytest

from catalog.io.errors import InputError
from catalog.match import Matcher
from data_prep.dataset import load_dataset
from eval.generate import GenerationConfig, resolve_engine, vllm_available
from eval.run import parse_and_ground
from eval.score import ground_lists
from remark.cli.main import main
from tests.eval.test_steps import KEY, write_run

CI = ["--ci-method", "percentile", "--resamples", "200"]
PREDS = [
    {"request_id": "r1", "recommendations": ["Contact (1997)", "Arrival (2016)", "Moon (2009)"]},
    {"request_id": "r2", "recommendations": ["Inception (2010)"]},
    {"request_id": "r3", "recommendations": []},
    {"request_id": "r4", "recommendations": ["1. Interstellar (2014)", "- Arrival (2016)"]},
]


def write_preds(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run_json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_score_json_hand_computed(tiny_dataset, tmp_path, capsys):
    preds = write_preds(tmp_path / "p.jsonl", PREDS)
    argv = ["eval", "score", "--data", str(tiny_dataset), "--predictions", str(preds), "--k", "1", "2", *CI]
    out = run_json(capsys, [*argv, "--metrics", "recall", "--json", "--out", str(tmp_path / "scored")])
    assert out["n_requests"] == 4  # r5 is in train
    # per request (rows): r1 [0.5, 0.5], r2 [0, 0.5, 1], r3 [0], r4 [0, 1] at k=1
    assert out["per_responder"]["recall@1"]["mean"] == pytest.approx(3.5 / 8)
    assert out["per_responder"]["recall@2"]["mean"] == pytest.approx(4.5 / 8)
    assert out["union"]["recall@1"]["mean"] == pytest.approx(0.25)
    assert out["union"]["recall@2"]["mean"] == pytest.approx((2 / 3 + 1 / 3 + 0 + 2 / 3) / 4)
    assert set(out["union"]["recall@1"]) == {"mean", "ci_low", "ci_high"}
    assert out["warnings"] == {"empty_lists": 1} and out["settings"]["compact"] is True
    # r5 is the train split: none of the 4 test prompts is its twin
    overlap = out["split_overlap"]
    assert (overlap["n_test_requests"], overlap["n_train_requests"], overlap["near_duplicate_prompt"]) == (
        4,
        1,
        0,
    )
    assert overlap["warning"] is None and capsys.readouterr().err == ""
    assert {p.name for p in (tmp_path / "scored").iterdir()} == {
        ".remark-output.json",
        "metrics.json",
        "per_request.parquet",
        "per_row.parquet",
        "report.md",
        "metrics.png",
    }
    # without compaction Contact (seen) keeps rank 1 in r1: r1's rows score 0 at k=1
    out = run_json(capsys, [*argv, "--metrics", "recall", "--json", "--no-compact"])
    assert out["per_responder"]["recall@1"]["mean"] == pytest.approx(2.5 / 8)


def test_score_out_writes_one_row_per_request_and_responder(tiny_dataset, tmp_path, capsys):
    preds = write_preds(tmp_path / "p.jsonl", PREDS)
    argv = ["eval", "score", "--data", str(tiny_dataset), "--predictions", str(preds), "--k", "1", "2", *CI]
    out = run_json(capsys, [*argv, "--filters", "drop_none", "--json", "--out", str(tmp_path / "scored")])
    rows = pl.read_parquet(tmp_path / "scored" / "per_row.parquet")
    assert rows.columns[:6] == [
        "request_id",
        "responder_id",
        "responder_index",
        "split",
        "n_lists",
        "n_targets",
    ]
    assert rows.height == 8 and set(rows["split"]) == {"test"}  # r5 (train) is not scored
    got = dict(zip(rows["responder_id"], rows["eval/recall@1/per_responder"]))
    # the rows of test_score_json_hand_computed: r1 [0.5, 0.5], r2 [0, 0.5, 1], r3 [0], r4 [0, 1]
    assert got == {
        "r1-u0": 0.5, "r1-u1": 0.5, "r2-u0": 0.0, "r2-u1": 0.5, "r2-u2": 1.0, "r3-u0": 0.0, "r4-u0": 0.0,
        "r4-u1": 1.0,
    }  # fmt: skip
    # without compaction Contact (seen) keeps rank 1 in r1
    got = dict(zip(rows["responder_id"], rows["eval/recall@1/per_responder/drop_none"]))
    assert (got["r1-u0"], got["r1-u1"]) == (0.0, 0.0)
    assert set(rows["n_targets"]) == {1, 2} and set(rows["n_lists"]) == {1}
    keys = [c for c in rows.columns if c.startswith("eval/")]
    assert len(keys) == 2 * 5 * 2 and all("/per_responder" in k for k in keys)  # k, metrics, filters
    for key in keys:  # the means over rows are the per_responder view's numbers
        metric, view = key.removeprefix("eval/").split("/", 1)
        assert rows[key].mean() == pytest.approx(out[view][metric]["mean"]), key


def test_bad_input_exits_2_with_line_and_field(tiny_dataset, tmp_path, capsys):
    preds = write_preds(tmp_path / "p.jsonl", [*PREDS, {"request_id": "nope", "recommendations": ["Moon"]}])
    assert main(["eval", "score", "--data", str(tiny_dataset), "--predictions", str(preds), *CI]) == 2
    err = capsys.readouterr().err
    assert "row 5, field 'request_id'" in err and "--on-unknown warn" in err
    assert (
        main(["eval", "score", "--data", str(tiny_dataset), "--predictions", str(tmp_path / "x.jsonl")]) == 2
    )


def test_generated_lines_round_trip_through_the_predictions_file(tiny_dataset):
    ds = load_dataset(tiny_dataset)
    matcher = Matcher(ds.catalog)
    completions = [
        'Sure! Here you go:\n1. **Arrival** (2016)\n2. ???\n3. "Moon" (2009) - a classic\n4. Arival (2016)'
    ]
    shown, ids = parse_and_ground(completions, matcher)
    assert shown == [["Arrival (2016)", "2. ???", "Moon (2009)", "Arival (2016)"]]  # unparsed: the raw line
    assert ids == [["Arrival (2016)", None, "Moon (2009)", "Arrival (2016)"]]
    assert ground_lists(shown, matcher) == ids  # `remark eval score` on predictions.jsonl sees the same ids


def test_run_on_the_tiny_model_writes_every_output(tiny_model_dir, tiny_dataset, tmp_path, capsys):
    out = tmp_path / "eval"
    argv = ["eval", "run", "--model", str(tiny_model_dir), "--data", str(tiny_dataset), "--out", str(out)]
    argv += [
        "--max-new-tokens",
        "12",
        "--num-samples",
        "2",
        "--batch-size",
        "3",
        "--k",
        "1",
        "5",
        "--engine",
        "transformers",
    ]
    result = run_json(capsys, [*argv, *CI, "--json"])
    files = {p.name for p in out.iterdir()}
    assert files >= {"predictions.jsonl", "samples.jsonl", "metrics.json", "per_request.parquet"}
    assert files >= {"per_request_sampled.parquet", "report.md", "metrics.png", "metrics_sampled.png"}
    rows = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert [r["request_id"] for r in rows] == ["r1", "r2", "r3", "r4"]
    assert all(len(r["recommendations"]) == len(r["grounded"]) for r in rows)
    assert len((out / "samples.jsonl").read_text().splitlines()) == 8
    assert result["n_requests"] == 4 and result["sampled"]["n_requests"] == 4
    assert result["sampled"]["counts"]["n_lists"] == 8 and result["generation"]["engine"] == "transformers"
    assert json.loads((out / "metrics.json").read_text())["union"] == result["union"]
    for name, res in (("per_row.parquet", result), ("per_row_sampled.parquet", result["sampled"])):
        table = pl.read_parquet(out / name)
        assert table.height == 8 and table["responder_id"].str.starts_with(table["request_id"]).all()
        assert table["n_lists"].to_list() == [1 if name == "per_row.parquet" else 2] * 8
        for metric, cell in res["per_responder"].items():
            assert table[f"eval/{metric}/per_responder"].mean() == pytest.approx(cell["mean"])
    # scoring the written predictions reproduces the greedy numbers
    rescored = run_json(
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
            "5",
            *CI,
            "--json",
            "--on-missing",
            "error",
        ],
    )
    assert rescored["per_responder"] == result["per_responder"] and rescored["union"] == result["union"]
    assert (
        rescored["split_overlap"]
        == result["split_overlap"]
        == json.loads((out / "metrics.json").read_text())["split_overlap"]
    )
    # greedy generation is deterministic: a second run writes the same lists
    assert main([*argv, *CI]) == 0
    assert [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()] == rows


def test_score_and_run_record_the_overlap_of_a_respondent_split(tiny_model_dir, tmp_path, capsys):
    from tests.eval.conftest import write_split_dataset

    data = write_split_dataset(tmp_path / "respondents", by="respondent")
    preds = [{"request_id": f"q{i}#test", "recommendations": ["Moon (2009)"]} for i in range(1, 5)]
    argv = [
        "eval",
        "score",
        "--data",
        str(data),
        "--predictions",
        str(write_preds(tmp_path / "p.jsonl", preds)),
    ]
    argv += ["--k", "1", "--metrics", "recall", *CI]
    assert main([*argv, "--json", "--out", str(tmp_path / "scored")]) == 0
    captured = capsys.readouterr()
    overlap = json.loads(captured.out)["split_overlap"]
    assert (overlap["exact_prompt"], overlap["near_duplicate_prompt"]) == (4, 4)
    warning = "warning: 4 of 4 test requests are training requests (same or near-duplicate prompt)"
    assert captured.err.startswith(warning)
    report = (tmp_path / "scored" / "report.md").read_text()
    assert "Split overlap, test vs train: 4 test requests, 4 train requests" in report and warning in report
    assert json.loads((tmp_path / "scored" / "metrics.json").read_text())["split_overlap"] == overlap
    assert main(argv) == 0
    assert warning in capsys.readouterr().out
    # eval run: the overlap of the requests it evaluated (--limit 2), before generating anything
    out = tmp_path / "run"
    run = [
        "eval",
        "run",
        "--model",
        str(tiny_model_dir),
        "--data",
        str(data),
        "--out",
        str(out),
        "--limit",
        "2",
    ]
    run += ["--max-new-tokens", "4", "--k", "1", "--engine", "transformers", *CI]
    result = run_json(capsys, [*run, "--json"])
    assert (
        result["split_overlap"]["near_duplicate_prompt"] == 2
        and result["split_overlap"]["n_test_requests"] == 2
    )
    assert "warning: 2 of 2 test requests are training requests" in (out / "report.md").read_text()


@pytest.mark.skipif(vllm_available(), reason="vLLM is installed here")
def test_asking_for_vllm_without_it_is_a_clear_error():
    with pytest.raises(InputError, match=r"vLLM is not installed.*remark\[vllm\]"):
        resolve_engine("vllm")
    assert resolve_engine("auto") == "transformers"
    with pytest.raises(InputError, match="temperature"):
        GenerationConfig(num_samples=2, temperature=0.0)


def test_compare_steps_curves(tiny_dataset, tmp_path, capsys):
    a = write_preds(tmp_path / "a.jsonl", PREDS)
    b = write_preds(
        tmp_path / "b.jsonl", [*PREDS[:3], {"request_id": "r4", "recommendations": ["Moon (2009)"]}]
    )
    out = run_json(
        capsys,
        [
            "eval",
            "compare",
            str(a),
            str(b),
            "--data",
            str(tiny_dataset),
            "--k",
            "1",
            "--metrics",
            "recall",
            *CI,
            "--json",
        ],
    )
    # only r4 differs: union recall@1 1/3 vs 0 (Moon is seen), per responder 0.5 * 2 rows vs 0
    assert out["union"]["recall@1"]["mean"] == pytest.approx((1 / 3) / 4)
    assert out["per_responder"]["recall@1"]["mean"] == pytest.approx(1.0 / 8)
    base = write_run(
        tmp_path / "base", {0: [0.0, 0.1, 0.1, 0.2], 100: [0.1, 0.2, 0.2, 0.3], 200: [0.2, 0.3, 0.3, 0.4]}
    )
    run = write_run(
        tmp_path / "run", {0: [0.0, 0.1, 0.1, 0.2], 50: [0.1, 0.2, 0.3, 0.2], 100: [0.3, 0.4, 0.5, 0.4]}
    )
    png = tmp_path / "steps.png"
    res = run_json(
        capsys,
        [
            "eval",
            "steps",
            "--run",
            str(run),
            "--baseline",
            str(base),
            "--metric",
            KEY,
            *CI,
            "--json",
            "--plot",
            str(png),
        ],
    )
    assert res["fraction"] == pytest.approx(0.375) and png.stat().st_size > 0
    assert (
        main(["eval", "curves", str(run), str(base), "--metric", KEY, "--out", str(tmp_path / "c.png"), *CI])
        == 0
    )
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"


def test_runner_over_a_loaded_model_leaves_no_side_effects(tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from eval.generate import transformers_runner

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tok.padding_side = "right"
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    model.train()
    run = transformers_runner(model, tok, GenerationConfig(max_new_tokens=6, batch_size=2, seed=3))
    torch.manual_seed(123)
    state = torch.get_rng_state()
    texts = ["Arrival (2016)\n", "The Matrix", "Moon (2009)\nContact"]
    sampled = run(texts, 2, True)
    assert torch.equal(torch.get_rng_state(), state)  # the training run's RNG is untouched
    assert tok.padding_side == "right" and model.training
    assert [len(s) for s in sampled] == [2, 2, 2]
    assert run(texts, 2, True) == sampled  # seeded: same samples again
    assert run(texts, 1, False) == run(texts, 1, False)


def test_the_completion_cap_follows_k_and_a_small_one_is_warned_about(
    tiny_model_dir, tiny_dataset, tmp_path, capsys, monkeypatch
):
    import eval.generate as generate

    assert GenerationConfig(k=50).cap == 800 and GenerationConfig().cap == 320  # 16 tokens per item
    assert GenerationConfig(k=20, max_new_tokens=320).cap_note() is None
    note = GenerationConfig(k=50, max_new_tokens=320).cap_note()
    assert "--max-new-tokens 320 for k = 50 items is 6.4 tokens per item" in note and "16: 800" in note
    caps = []
    real = generate.transformers_runner

    def recording(model, tok, cfg):
        caps.append(cfg.cap)
        return real(model, tok, cfg)

    monkeypatch.setattr(generate, "transformers_runner", recording)
    out = tmp_path / "eval"
    argv = ["eval", "run", "--model", str(tiny_model_dir), "--data", str(tiny_dataset), "--out", str(out)]
    argv += ["--k", "1", "2", "--engine", "transformers", "--limit", "2", *CI]
    assert main(argv) == 0
    gen = json.loads((out / "metrics.json").read_text())["generation"]
    assert caps == [32] and gen["max_new_tokens"] == 32 and gen["max_new_tokens_default"] is True
    assert gen["notes"] == [] and "warning" not in capsys.readouterr().out
    # a cap given by hand is used as given, and one below 16 per item is printed and recorded
    assert main([*argv, "--max-new-tokens", "12"]) == 0
    printed = capsys.readouterr().out
    expected = (
        "warning: --max-new-tokens 12 for k = 2 items is 6.0 tokens per item (the default gives 16: 32)"
    )
    assert printed.startswith(expected)
    gen = json.loads((out / "metrics.json").read_text())["generation"]
    assert caps == [32, 12] and gen["max_new_tokens"] == 12 and gen["max_new_tokens_default"] is False
    assert gen["notes"][0].startswith(expected)


def test_steps_text_says_never_when_some_resamples_never_reach(tmp_path, capsys):
    base = write_run(tmp_path / "base", {0: [0.0, 0.0, 0.0, 0.0], 200: [0.2, 0.2, 0.2, 0.2]})
    # the mean reaches 0.2 at step 100, but resamples of the last two requests never do
    run = write_run(tmp_path / "run", {0: [0.0, 0.0, 0.0, 0.0], 100: [0.4, 0.4, 0.0, 0.0]})
    argv = ["eval", "steps", "--run", str(run), "--baseline", str(base), "--metric", KEY, *CI]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "run reaches it at step 100 = 50.0% of 200 [" in out and "never, in some resamples]" in out
    assert "inf%" not in out


def test_curves_and_steps_plots_refuse_to_write_over_an_input(tmp_path, capsys):
    base = write_run(tmp_path / "base", {0: [0.0, 0.0, 0.0, 0.0], 200: [0.2, 0.2, 0.2, 0.2]})
    run = write_run(tmp_path / "run", {0: [0.0, 0.0, 0.0, 0.0], 100: [0.4, 0.4, 0.0, 0.0]})
    log = run / "eval_log.jsonl"
    before = log.read_bytes()
    assert main(["eval", "curves", str(run), str(base), "--metric", KEY, "--out", str(log), *CI]) == 2
    steps = ["eval", "steps", "--run", str(run), "--baseline", str(base), "--metric", KEY, *CI]
    assert main([*steps, "--plot", str(base / "eval_log.jsonl")]) == 2
    assert log.read_bytes() == before and (base / "eval_log.jsonl").read_bytes()[:1] == b"{"
    assert "eval_log.jsonl" in capsys.readouterr().err
