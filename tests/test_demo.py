"""``remark demo``: settings and inputs checked up front, ProtoQA respondent splits, and a whole fast run."""

from __future__ import annotations

import dataclasses
import json
import math

import polars as pl
import pytest

from catalog.errors import InputError
from remark.cli.main import main
from remark.demo import METHODS, default_settings, find_protoqa, prepare_protoqa, rl_fields
from remark.demo.pipeline import _prepare_out


def test_settings_errors_say_what_to_pass():
    with pytest.raises(InputError, match="--data-dir"):
        default_settings("protoqa")
    with pytest.raises(InputError, match="unknown data"):
        default_settings("reddit")
    with pytest.raises(InputError, match="--steps"):
        default_settings(steps=0)
    s = default_settings(steps=3)
    assert s.steps == 3 and s.validation_every == 3
    assert default_settings("protoqa", data_dir="x").k == 10
    assert s.metric == "sampled/recall@5/per_responder" and s.greedy_metric == "eval/recall@5/per_responder"
    assert s.validation_logs() == {
        "sampled": ("sampled", "sampled/recall@5/per_responder"),
        "greedy": ("", "eval/recall@5/per_responder"),
    }
    greedy_only = dataclasses.replace(s, validation_samples=0)
    assert greedy_only.metric == greedy_only.greedy_metric and list(greedy_only.validation_logs()) == [
        "greedy"
    ]


def test_cli_protoqa_without_or_with_missing_path_exits_2(tmp_path, capsys):
    assert main(["demo", "--data", "protoqa", "--out", str(tmp_path / "o")]) == 2
    assert "--data-dir" in capsys.readouterr().err
    missing = tmp_path / "nowhere" / "dev.scraped.jsonl"
    assert main(["demo", "--data", "protoqa", "--data-dir", str(missing), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "ProtoQA path not found" in err and "nowhere" in err
    assert not (tmp_path / "o" / "report.md").exists()


def test_find_protoqa_accepts_file_folder_or_prepared_dir(tmp_path):
    (tmp_path / "dev").mkdir()
    f = tmp_path / "dev" / "dev.scraped.jsonl"
    f.write_text("{}\n")
    assert find_protoqa(f) == f
    assert find_protoqa(tmp_path) == f
    assert find_protoqa(tmp_path / "dev") == f
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    (prepared / "requests.parquet").write_bytes(b"")
    assert find_protoqa(prepared) == prepared
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match=r"no dev\.scraped\.jsonl"):
        find_protoqa(empty)


def _scraped_line(i: int, counts: list[int]) -> str:
    qid = f"dev-scraped_q{i}"
    clusters = {f"{qid}.{j}": {"count": c, "answers": [f"answer {i}-{j}"]} for j, c in enumerate(counts)}
    raw = {f"answer {i}-{j}": c for j, c in enumerate(counts)}
    obj = {
        "metadata": {"id": qid},
        "question": {"original": f"Name something number {i}", "normalized": f"name something number {i}"},
        "answers": {"raw": raw, "clusters": clusters},
    }
    return json.dumps(obj)


def test_protoqa_splits_respondents_of_the_same_questions(tmp_path):
    counts = {1: [10, 6, 4, 2, 2], 2: [8, 8, 4, 3, 1, 1], 3: [20, 5, 5, 5, 5], 4: [30, 3]}  # q4: 2 clusters
    path = tmp_path / "dev.scraped.jsonl"
    path.write_text("\n".join(_scraped_line(i, c) for i, c in counts.items()) + "\n")
    s = default_settings("protoqa", data_dir=path, fast=True)
    ds, data_dir = prepare_protoqa(path, tmp_path / "data", s)
    assert data_dir == tmp_path / "data"
    req = ds.requests
    base = req["request_id"].str.replace(r"#.*$", "")
    assert set(base) == {"dev-scraped_q1", "dev-scraped_q2", "dev-scraped_q3"}  # q4 has < 5 clusters
    for qid in set(base):
        rows = req.filter(base == qid)
        assert set(zip(rows["request_id"], rows["split"])) == {
            (qid, "train"),
            (f"{qid}#valid", "valid"),
            (f"{qid}#test", "test"),
        }
        assert rows["prompt"].n_unique() == 1  # the same question everywhere
        n = dict(zip(rows["split"], rows["n_responders"]))
        total = sum(counts[int(qid.rsplit("q", 1)[1])])
        assert sum(n.values()) == total
        assert abs(n["train"] - total / 2) <= 1 and abs(n["valid"] - total / 4) <= 1
    again, _ = prepare_protoqa(path, tmp_path / "data2", s)
    assert again.requests.sort("request_id")["responders"].equals(req.sort("request_id")["responders"])
    # a prepared dataset is used as it is, and must have the three splits
    prepared, prepared_dir = prepare_protoqa(tmp_path / "data", tmp_path / "unused", s)
    assert prepared.requests.height == req.height and prepared_dir == tmp_path / "data"
    only_train = tmp_path / "only_train"
    from data_prep.dataset import write_dataset

    write_dataset(
        only_train,
        _pooled(ds.requests.filter(pl.col("split") == "train"), ds),
        ds.catalog,
        ds.meta,
        grounding=ds.grounding,
    )
    with pytest.raises(InputError, match="split"):
        prepare_protoqa(only_train, tmp_path / "unused", s)


def _pooled(requests: pl.DataFrame, ds) -> pl.DataFrame:
    ids = ds.responder_rows.group_by("request_id", maintain_order=True).agg(pl.col("responder_id"))
    return requests.join(ids.rename({"responder_id": "responder_ids"}), on="request_id")


def test_out_folder_not_written_by_a_demo_is_refused(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(InputError, match="non-empty folder"):
        _prepare_out(tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep me"


def test_methods_differ_only_in_reward_and_sampling(tmp_path):
    from remark.config import RemarkGRPOConfig

    s = default_settings()
    a, b = (rl_fields(m, s, tmp_path, tmp_path, tmp_path / m) for m in METHODS)
    differ = {k for k in a if a[k] != b[k]}
    assert differ == {"reward_scheme", "sampling", "output_dir"}
    assert (a["reward_scheme"], a["sampling"]) == ("union", "uniform")
    assert (b["reward_scheme"], b["sampling"]) == ("responder", "per_responder")
    assert a["per_device_train_batch_size"] == s.prompts_per_step * s.num_generations
    # the library's sampled validation picks the best checkpoint: the config accepts the demo's metric
    assert (a["validation_metric"], a["validation_num_samples"]) == ("sampled/recall@5/per_responder", 4)
    cfg = RemarkGRPOConfig(**a)
    assert cfg.validation_metric == s.metric and cfg.validation_num_samples == s.validation_samples


def _finite_cell(cell):
    return all(isinstance(cell[k], float) and math.isfinite(cell[k]) for k in ("mean", "ci_low", "ci_high"))


@pytest.mark.slow
def test_fast_demo_end_to_end(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--fast", "--out", str(out), "--seed", "1"]) == 0
    printed = capsys.readouterr().out
    assert f"report: {out / 'report.md'}" in printed
    assert "'loss'" not in printed and "'loss'" in (out / "sft_model" / "sft_log.txt").read_text()

    report = (out / "report.md").read_text()
    for text in ("ReMaRk", "Rank-GRPO", "SFT start", "Paired differences", "Steps to reach", "curves.png"):
        assert text in report
    assert report.count(" [") >= 12  # every test cell carries its CI
    for png in ("curves.png", "curves_greedy.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    summary = json.loads((out / "summary.json").read_text())
    assert {
        "settings",
        "metric",
        "data",
        "model",
        "sft",
        "runs",
        "test",
        "paired",
        "steps_to_reach",
        "curves",
    } <= set(summary)
    k = summary["settings"]["k"]
    for name in ("sft", *METHODS):
        for lists in ("greedy", "sampled"):
            res = summary["test"][name][lists]
            for view in ("per_responder", "union"):
                assert _finite_cell(res[view][f"recall@{k}"]), (name, lists, view)
    for key in ("remark_vs_rank_grpo", "remark_vs_sft", "rank_grpo_vs_sft"):
        for lists in ("greedy", "sampled"):
            assert _finite_cell(summary["paired"][key][lists]["per_responder"][f"recall@{k}"])
    for lists in ("sampled", "greedy"):
        reach = summary["steps_to_reach"][lists]
        for direction in ("remark_reaches_rank_grpo", "rank_grpo_reaches_remark"):
            assert reach[direction]["baseline_step"] == summary["settings"]["steps"]
        for m in METHODS:
            curve = summary["curves"][lists][m]
            assert curve["x"] == list(range(summary["settings"]["steps"] + 1))
            assert all(math.isfinite(v) for v in curve["mean"])
    steps = list(range(summary["settings"]["steps"] + 1))
    for m in METHODS:
        run = summary["runs"][m]
        assert run["best_step"] in steps
        assert (out / m / "best" / "config.json").is_file()
        assert run["train"]["steps"] == summary["settings"]["steps"]
        # the best checkpoint is the library's choice on sampled per-responder recall
        sampled = [json.loads(x) for x in (out / m / "sampled" / "eval_log.jsonl").read_text().splitlines()]
        assert [r["step"] for r in sampled] == steps
        best = json.loads((out / m / "best" / "best.json").read_text())
        assert best["metric"] == summary["metric"] == f"sampled/recall@{k}/per_responder"
        assert best["value"] == max(r[f"eval/recall@{k}/per_responder"] for r in sampled) == run["best_value"]
    assert summary["timing"]["total_s"] > 0 and summary["model"]["parameters"] > 0
    assert not [p for p in out.rglob("*") if p.suffix in (".bin", ".pt", ".pth", ".pkl")]  # no pickle

    # a second run into the same folder replaces the demo's own outputs (no stale eval-log lines)
    assert main(["demo", "--fast", "--out", str(out), "--seed", "1", "--sequential"]) == 0
    for log in ("eval_log.jsonl", "sampled/eval_log.jsonl"):
        lines = (out / "remark" / log).read_text().splitlines()
        assert [json.loads(x)["step"] for x in lines] == steps
